// kernel_entry.cpp — kvf::kv_append_emu for kvfuzz-libfuzzer, forwarding to the kernel compiled in
// namespace kvf_kernel (scripts/build-libfuzzer.sh compiles kv_append_emu.cpp with -Dkvf=kvf_kernel,
// so that none of the kernel's inline functions is merged with the harness's copy: a mutant rewrites
// them). Both namespaces hold the same KvAppendParams, compiled from kv_append.cuh.
#include "kv_append.cuh"
#include "kv_append.h"

namespace kvf_kernel {
struct KvAppendParams;
enum class LaunchStatus { ok, unsupported_dtype, launch_error };  // kv_append.h's, in the renamed namespace
LaunchStatus kv_append_emu(const KvAppendParams& p);
}  // namespace kvf_kernel

namespace kvf {

LaunchStatus kv_append_emu(const KvAppendParams& p) {
  static_assert(static_cast<int>(LaunchStatus::launch_error) == static_cast<int>(kvf_kernel::LaunchStatus::launch_error));
  return static_cast<LaunchStatus>(kvf_kernel::kv_append_emu(reinterpret_cast<const kvf_kernel::KvAppendParams&>(p)));
}

}  // namespace kvf
