// kv_append_emu.cpp — the cuda-emu launcher: runs kv_append.cuh's per-thread body on the CPU.
//
// The grid is walked block by block and thread by thread with the same launch configuration the
// GPU launcher uses. The body has no shared memory or barriers, so serial execution is a valid
// schedule of the CUDA program; the invalid-slot counter is incremented serially (count_invalid_slot).
// Compiled by the host C++ compiler with CUDA's headers on the include path; needs no GPU or driver.
#include "kv_append.h"

#include "cp_slot_mapping.cuh"
#include "kv_append.cuh"

namespace kvf {

LaunchStatus kv_append_emu(const KvAppendParams& p) {
  const LaunchConfig cfg = kv_append_launch_config(p);
  const bool supported = dispatch_kv_append(p, [&](auto in, auto cache, auto slot) {
    using InT = typename decltype(in)::type;
    using CacheT = typename decltype(cache)::type;
    using SlotT = typename decltype(slot)::type;
    const KernelPath path = cfg.path;  // the instantiation the GPU launcher runs
    const KvAppendCore& core = p;       // a classic cache's kernels take the core alone
    if constexpr (!kIsFormat<CacheT>) {
      if (path == KernelPath::aligned || path == KernelPath::aligned_dynamic) {  // kv_append_aligned_kernel's threads
        for (int64_t cta = 0; cta < cfg.grid; ++cta)
          for (int head = 0; head < cfg.grid_y * cfg.block_y; ++head)
            for (int chunk = 0; chunk < cfg.block; ++chunk) {
              if (path == KernelPath::aligned) {
                append_aligned_item<InT, CacheT, SlotT>(core, cta, head, chunk);
              } else if constexpr (kIsQuantized<CacheT>) {
                append_aligned_dynamic_item<InT, CacheT, SlotT>(core, cta, head, chunk, cfg.block);
              }
            }
        return;
      }
    }
    for (int64_t cta = 0; cta < cfg.grid; ++cta)
      for (int thread = 0; thread < cfg.block; ++thread) {
        if constexpr (kIsFormat<CacheT>) {  // a quantised format: the fields path's instantiation only
          kv_append_thread<InT, CacheT, SlotT, KernelPath::fields>(p, cta, thread, cfg.block);
        } else if (path == KernelPath::fields) {
          kv_append_thread<InT, CacheT, SlotT, KernelPath::fields>(core, cta, thread, cfg.block);
        } else if (path == KernelPath::classic_dynamic) {
          kv_append_thread<InT, CacheT, SlotT, KernelPath::classic_dynamic>(core, cta, thread, cfg.block);
        } else {
          kv_append_thread<InT, CacheT, SlotT, KernelPath::classic>(core, cta, thread, cfg.block);
        }
      }
  });
  return supported ? LaunchStatus::ok : LaunchStatus::unsupported_dtype;
}

void cp_slot_mapping_emu(const CpSlotMappingParams& p) {
  for (int64_t t = 0; t < p.num_rows; ++t) cp_slot_mapping_thread(p, t);
}

}  // namespace kvf
