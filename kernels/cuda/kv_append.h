// kv_append.h — host entry points of the CUDA append kernel (no CUDA headers needed to include).
//
//   kv_append_cuda(): launches kv_append.cuh's body on the GPU (kv_append.cu, built by nvcc).
//   kv_append_emu():  runs the same body on the CPU, thread block by thread block (kv_append_emu.cpp).
//
// Both are thin launchers: grid math and the launch. Arguments are validated one layer up, by the
// harness (src/case/validate.h) or the caller's own API.
#pragma once

namespace kvf {

struct KvAppendParams;
struct CpSlotMappingParams;

// Status of a launch; mirrors cudaError_t's success/failure split without needing CUDA headers.
enum class LaunchStatus { ok, unsupported_dtype, launch_error };

// Runs the kernel on the CPU. Pointers in p are host pointers.
LaunchStatus kv_append_emu(const KvAppendParams& p);

// Runs the context-parallel slot-mapping producer (cp_slot_mapping.cuh) on the CPU.
void cp_slot_mapping_emu(const CpSlotMappingParams& p);

}  // namespace kvf
