// aot_manifest.h — the Triton kernels compiled ahead of time: which cubins exist, which one a case
// needs, and the launch arguments in the order the cubin's entry point takes them.
//
// kernels/triton/aot_compile.py writes manifest.json next to one cubin per (input dtype, cache
// dtype, slot dtype) and one of the context-parallel slot-mapping producer
// (kvfuzz_triton/cp_slot_mapping.py), and embeds them in the binary (embedded_triton_files()). Everything here is
// plain C++ with no CUDA: the triton target (triton_target.cpp) adds the driver calls, and the unit
// tests check selection and packing against the real manifest on machines without a GPU.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "case/quant_format.h"
#include "case/types.h"
#include "cp_slot_mapping.cuh"
#include "kv_append.cuh"
#include "embedded_files.h"

namespace kvf {

enum class ParamType : uint8_t {
  pointer,  // a device address (Triton "*fp16", "*i64", ...)
  i32,
  i64,
  scratch,  // Triton 3.x's trailing global/profile scratch pointers: always null here
};

struct KernelParam {
  std::string name;  // the Python parameter name: "key_ptr", "num_heads", ...
  ParamType type = ParamType::i64;
};

// One compiled specialisation of kv_append_kernel or kv_append_format_kernel, or the slot-mapping producer.
struct AotKernel {
  std::string name;       // "kv_append_f16_int8_i64", "kv_append_format_bf16_nvfp4_i64", "cp_slot_mapping";
                          // also its cubin's file stem
  std::string function;   // entry point inside the cubin: "kv_append_kernel", "kv_append_format_kernel", ...
  DType input_dtype = DType::f16;  // kv_append kernels: the specialisation's dtypes
  DType cache_dtype = DType::f16;
  QuantFormat quant_format = QuantFormat::none;  // format kernels: the format (cache_dtype then unused)
  IndexType slot_type = IndexType::i64;
  int64_t rows_per_program = 0;    // the producer: slot_mapping rows per program (0 for kv_append kernels)
  int num_warps = 4;      // threads per program = num_warps * warp_size
  int shared_bytes = 0;   // dynamic shared memory per program
  std::array<int, 3> cluster_dims{1, 1, 1};
  std::string arch;       // "sm_90a"
  std::vector<KernelParam> params;  // in launch order, scratch pointers last
  std::string cubin;      // file name of the image
  int64_t cubin_bytes = 0;
};

struct AotManifest {
  std::string origin;          // where it was read from, for messages
  std::string triton_version;  // "3.6.0"
  int compute_capability = 0;  // 90: the cubins run on exactly this major.minor
  int warp_size = 32;
  int block_h = 0;             // the tile every kernel was compiled with (api.AOT_TILE)
  int block_d = 0;
  std::vector<AotKernel> kernels;
  AotKernel cp_slot_mapping;   // the context-parallel slot-mapping producer (one specialisation)
  int format_block = 0;        // the quantised formats' kernels: their tile (format_api.FORMAT_AOT_BLOCK)
  std::vector<AotKernel> format_kernels;  // one per (input dtype, quantised format, slot dtype)
};

// Parses manifest.json. Throws InputError(origin, JSON pointer, expectation) for anything
// malformed, including dtype or scale-kind numbering that differs from kvf's.
AotManifest parse_aot_manifest(const std::string& text, const std::string& origin);

// A manifest and the cubins it names.
struct AotKernelSet {
  AotManifest manifest;
  std::map<std::string, std::string> cubins;  // file name -> image bytes
};
// From embedded files (manifest.json among them) or from a directory holding manifest.json and the
// cubins (an aot_compile.py --out-dir). Throws InputError when the manifest is malformed or a
// cubin is missing or of the wrong size.
AotKernelSet kernel_set_from_files(const std::vector<EmbeddedFile>& files, const std::string& origin);
AotKernelSet kernel_set_from_directory(const std::string& dir);

// The kernel for these dtypes, or nullptr when the manifest has none.
const AotKernel* find_kernel(const AotManifest& m, DType input, DType cache, IndexType slot);
// The quantised format's kernel for these dtypes, or nullptr.
const AotKernel* find_format_kernel(const AotManifest& m, DType input, QuantFormat format, IndexType slot);

// Grid and variant of one launch (the rules of kvfuzz_triton.api.launch with the AOT tile).
struct AotLaunchPlan {
  std::array<uint32_t, 3> grid{0, 1, 1};  // programs (times cluster_dims.x in x when launching)
  int32_t heads_per_program = 0;          // num_heads (token-major) or block_h (head-major)
  bool head_major = false;
};
// Returns "" and fills `plan`, or why the case cannot be launched (a grid dimension too large).
// grid[0] == 0 means nothing to launch (no slot entries).
std::string plan_launch(const AotManifest& m, const KvAppendParams& p, AotLaunchPlan& plan);

// Grid of a quantised format's launch (kvfuzz_triton.format_api.launch_format): one program per
// (slot entry, head). Returns "" or why not; grid[0] == 0: nothing to launch.
std::string plan_format_launch(const KvAppendParams& p, AotLaunchPlan& plan);

// Grid of the producer's launch for p (the rules of kvfuzz_triton.launch_cp_slot_mapping): one
// program per rows_per_program rows. Returns "" or why not; grid[0] == 0: nothing to launch.
std::string plan_cp_slot_mapping(const AotKernel& k, const CpSlotMappingParams& p, AotLaunchPlan& plan);

// Launch arguments: one 8-byte cell per parameter (an i32 uses the first 4 bytes) and the
// pointer array cuLaunchKernel takes.
struct PackedArgs {
  std::vector<std::array<std::byte, 8>> cells;
  std::vector<void*> pointers;
};
// Packs the arguments of kv_append kernel `k` for p, in the kernel's order. Returns "" or why not
// (a parameter this loader does not know, a value out of the parameter's range).
std::string pack_arguments(const AotKernel& k, const KvAppendParams& p, const AotLaunchPlan& plan,
                           PackedArgs& out);
// The same for a quantised format's kernel `k` (AotManifest::format_kernels): p's format fields
// (code_layout, scale_layout, zero_layout, rope_layout) as kv_append_format_kernel's kc_, ks_, ...
// arguments (kernel_fields.h, format_kernel_field), its rules, its buffers.
std::string pack_format_arguments(const AotKernel& k, const KvAppendParams& p, PackedArgs& out);
// The same for the slot-mapping producer `k` (AotManifest::cp_slot_mapping) and p.
std::string pack_cp_arguments(const AotKernel& k, const CpSlotMappingParams& p, PackedArgs& out);

}  // namespace kvf
