/* naive.c — the least a kvfuzz plugin has to be: a plain C, single-threaded append of f16, bf16 or
 * f32 rows into caches of the same dtype, paged NHD or HND. Start your own adapter from this file.
 *
 * Build and fuzz it (docs/targets.md):
 *   cc -std=c99 -O2 -shared -fPIC -Iinclude examples/plugins/naive/naive.c -o naive.so
 *   kvfuzz run --target plugin:./naive.so --cases 1000
 *
 * It declares exactly what it supports (kvfuzz_plugin_query), so kvfuzz never sends it a quantised,
 * converting or contiguous/packed cache and says in the run summary how many drawn cases it replaced
 * for that reason. Strides are honoured everywhere (the one addressing formula of the header), so it
 * takes fused QKV views, gapped strides, unaligned pointers and CUDA-graph padding rows.
 *
 * examples/plugins/CMakeLists.txt also builds a mutated copy (naive-mutant-padding.so) whose padding
 * test reads `slot < -1`: the bug of forgetting that -1 is padding, which kvfuzz must catch.
 */
#include <stdio.h>
#include <string.h>

#include "kvfuzz_plugin.h"

uint32_t kvfuzz_plugin_abi_version(void) { return KVFUZZ_PLUGIN_ABI_VERSION; }

int kvfuzz_plugin_query(kvfz_capabilities* caps, int device, char* error, size_t error_size) {
  (void)device;
  (void)error;
  (void)error_size;
  caps->memory = KVFZ_MEMORY_HOST;
  caps->name = "naive";
  caps->description = "one loop iteration per element, same-dtype float caches";
  caps->layouts = (1u << KVFZ_LAYOUT_PAGED_NHD) | (1u << KVFZ_LAYOUT_PAGED_HND);
  caps->input_dtypes = (1u << KVFZ_F16) | (1u << KVFZ_BF16) | (1u << KVFZ_F32);
  caps->cache_dtypes = caps->input_dtypes;
  caps->same_input_cache_dtype = 1; /* a bit copy: no conversion between float formats */
  caps->scale_kinds = 1u << KVFZ_SCALE_NONE;
  caps->slot_types = (1u << KVFZ_I32) | (1u << KVFZ_I64);
  caps->features = KVFZ_FEATURE_FUSED_QKV | KVFZ_FEATURE_STRIDED_INPUT | KVFZ_FEATURE_PADDED_CACHE |
                   KVFZ_FEATURE_GRAPH_PADDING_ROWS | KVFZ_FEATURE_INVALID_SLOT_COUNTER | KVFZ_FEATURE_UNALIGNED;
  caps->rounding = KVFZ_ROUNDING_EXACT;
  return 0;
}

/* Returns 0 when done; nonzero with a reason in error refuses the call (a launch_error finding);
 * KVFZ_APPEND_SKIP would skip a case the capabilities cannot exclude. A device plugin returns its
 * launch status the same way (include/kvfuzz_plugin.h, examples/plugins/cuda/plugin.cpp). The check
 * below refuses rather than skips: kvfuzz never sends these cases, so one arriving is a bug to see. */
int kvfuzz_plugin_append(const kvfz_append_args* a, char* error, size_t error_size) {
  if (a->memory != KVFZ_MEMORY_HOST || a->input_dtype != a->cache_dtype || a->scale_kind != KVFZ_SCALE_NONE) {
    snprintf(error, error_size, "naive: host pointers and same-dtype float caches only");
    return 1;
  }
  const size_t elem = a->input_dtype == KVFZ_F32 ? 4 : 2; /* f16 and bf16: copied as raw 2-byte values */
  const int64_t capacity = a->cache.num_blocks * a->cache.block_size;
  for (int64_t t = 0; t < a->num_slots; ++t) {
    const int64_t slot = a->slot_type == KVFZ_I32 ? ((const int32_t*)a->slot_mapping)[t]
                                                  : ((const int64_t*)a->slot_mapping)[t];
    if (slot < 0) continue; /* padding */
    if (slot >= capacity) { /* invalid: never written, counted */
      if (a->invalid_slots) *a->invalid_slots += 1;
      continue;
    }
    const int64_t block = slot / a->cache.block_size, pos = slot % a->cache.block_size;
    for (int64_t h = 0; h < a->num_heads; ++h) {
      for (int64_t d = 0; d < a->head_dim; ++d) {
        /* element offsets: input row t, head h, dim d; cache (block, pos, head h, dim d) */
        const int64_t k_in = t * a->key_stride_token + h * a->key_stride_head + d;
        const int64_t v_in = t * a->value_stride_token + h * a->value_stride_head + d;
        const int64_t out = block * a->cache.stride_block + pos * a->cache.stride_pos + h * a->cache.stride_head + d;
        memcpy((char*)a->k_cache + out * elem, (const char*)a->key + k_in * elem, elem);
        memcpy((char*)a->v_cache + out * elem, (const char*)a->value + v_in * elem, elem);
      }
    }
  }
  return 0;
}
