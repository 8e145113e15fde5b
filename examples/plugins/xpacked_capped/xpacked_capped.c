/* xpacked_capped.c — a vLLM-legacy-layout append kernel with a real bug class, for kvfuzz to catch.
 *
 * The cache is vLLM's legacy pair (KVFZ_LAYOUT_VLLM_LEGACY): K [num_blocks, H, D/x, block_size, x]
 * with x = 16 bytes of elements (8 for f16/bf16), V [num_blocks, H, D, block_size]. The kernel is
 * written as a CUDA kernel would be, and run here on the CPU thread by thread: one thread block per
 * token, one thread per (head, x-chunk of the head dim), and the block capped at 512 threads. The
 * capped kernel has no loop over the work items, so a token with more than 512 (head, chunk) items
 * never writes its last heads: at D 128 (16 chunks), heads 32 and up. kvfuzz reports that as
 * missing_write. Built with -DWITH_LOOP, each thread strides over the items and the kernel is right.
 *
 *   kvfuzz run --target plugin:build/plugins/xpacked_capped.so --config configs/formats.json --cases 3000 --seed 1
 *   kvfuzz run --target plugin:build/plugins/xpacked_loop.so   --config configs/formats.json --cases 3000 --seed 1
 */
#include <stdio.h>
#include <string.h>

#include "kvfuzz_plugin.h"

enum { kMaxThreads = 512 };

uint32_t kvfuzz_plugin_abi_version(void) { return KVFUZZ_PLUGIN_ABI_VERSION; }

int kvfuzz_plugin_query(kvfz_capabilities* caps, int device, char* error, size_t error_size) {
  (void)device, (void)error, (void)error_size;
  caps->memory = KVFZ_MEMORY_HOST;
#if defined(WITH_LOOP)
  caps->name = "xpacked_loop";
  caps->description = "vLLM legacy layout, one thread per (head, x-chunk), striding over every item";
#else
  caps->name = "xpacked_capped";
  caps->description = "vLLM legacy layout, one thread per (head, x-chunk), at most 512 threads, no loop";
#endif
  caps->layouts = 1u << KVFZ_LAYOUT_VLLM_LEGACY;
  caps->input_dtypes = (1u << KVFZ_F16) | (1u << KVFZ_BF16);
  caps->cache_dtypes = caps->input_dtypes;
  caps->same_input_cache_dtype = 1; /* 16-bit copies */
  caps->scale_kinds = 1u << KVFZ_SCALE_NONE;
  caps->slot_types = (1u << KVFZ_I32) | (1u << KVFZ_I64);
  caps->features = KVFZ_FEATURE_FUSED_QKV | KVFZ_FEATURE_STRIDED_INPUT | KVFZ_FEATURE_PADDED_CACHE |
                   KVFZ_FEATURE_GRAPH_PADDING_ROWS | KVFZ_FEATURE_UNALIGNED;
  caps->rounding = KVFZ_ROUNDING_EXACT;
  return 0;
}

/* One thread's work item: the x elements [chunk*x, chunk*x + x) of head `head` of token `t`. */
static void copy_item(const kvfz_append_args* a, int64_t t, int64_t block, int64_t pos, int64_t head, int64_t chunk) {
  const int64_t x = 8, bs = a->cache.block_size, D = a->head_dim;
  uint16_t* k = (uint16_t*)a->k_cache;
  uint16_t* v = (uint16_t*)a->v_cache;
  const uint16_t* key = (const uint16_t*)a->key;
  const uint16_t* value = (const uint16_t*)a->value;
  for (int64_t i = 0; i < x; ++i) {
    const int64_t d = chunk * x + i;
    /* K [nb, H, D/x, bs, x] and V [nb, H, D, bs], blocks and heads at the cache's strides */
    const int64_t head_base = block * a->cache.stride_block + head * a->cache.stride_head;
    k[head_base + (d / x) * bs * x + pos * x + d % x] = key[t * a->key_stride_token + head * a->key_stride_head + d];
    v[head_base + d * bs + pos] = value[t * a->value_stride_token + head * a->value_stride_head + d];
  }
  (void)D;
}

int kvfuzz_plugin_append(const kvfz_append_args* a, char* error, size_t error_size) {
  if (a->memory != KVFZ_MEMORY_HOST || a->input_dtype != a->cache_dtype || a->head_dim % 8 != 0) {
    snprintf(error, error_size, "xpacked: host pointers, same-dtype 16-bit caches, head_dim a multiple of 8");
    return 1;
  }
  const int64_t chunks = a->head_dim / 8, items = a->num_heads * chunks;
  const int64_t threads = items < kMaxThreads ? items : kMaxThreads;
  const int64_t capacity = a->cache.num_blocks * a->cache.block_size;
  for (int64_t t = 0; t < a->num_slots; ++t) { /* thread block t */
    const int64_t slot = a->slot_type == KVFZ_I32 ? ((const int32_t*)a->slot_mapping)[t] : ((const int64_t*)a->slot_mapping)[t];
    if (slot < 0 || slot >= capacity) continue; /* padding, invalid */
    const int64_t block = slot / a->cache.block_size, pos = slot % a->cache.block_size;
    for (int64_t tid = 0; tid < threads; ++tid) {
#if defined(WITH_LOOP)
      for (int64_t item = tid; item < items; item += threads) copy_item(a, t, block, pos, item / chunks, item % chunks);
#else
      copy_item(a, t, block, pos, tid / chunks, tid % chunks); /* the bug: items >= 512 are never done */
#endif
    }
  }
  return 0;
}
