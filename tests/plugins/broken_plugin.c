/* broken_plugin.c — plugins that break one rule of include/kvfuzz_plugin.h each, for test_plugins.py.
 *
 * Each is examples/plugins/naive/naive.c (compiled with its three functions renamed naive_*) behind
 * these wrappers, changed by one compile definition:
 *   CRASH_ON_HEAD_DIM_7   kvfuzz_plugin_append writes through a null pointer when head_dim == 7
 *   ABI_VERSION_99        kvfuzz_plugin_abi_version returns 99
 *   NO_APPEND             kvfuzz_plugin_append is not exported
 *   QUERY_REFUSES         kvfuzz_plugin_query returns 1 with a reason
 *   STRICT_HND_I32        declares paged HND and i32 slots only, appends a line to the file named by
 *                         $KVFUZZ_TEST_VIOLATIONS for every call outside that (kvfuzz must never make
 *                         one, shrinking included), and refuses every case with 2 or more heads
 *   SLOW                  sleeps $KVFUZZ_TEST_START_DELAY_S seconds when loaded (a plugin whose
 *                         library set-up is slow: a worker's start-up, never a launch's timeout)
 *                         and $KVFUZZ_TEST_APPEND_DELAY_S seconds per call (a slow, right kernel)
 *   LEAKS                 every call leaks 8 MiB of touched memory and one thread that never ends
 *                         (test_faults.py: the worker recycling policy)
 *   REFUSES_TWO           refuses two things, as a real kernel's checks do: an empty batch ("no
 *                         tokens") and 4 or more heads ("too many heads"); the shrinker must not turn
 *                         the second into the first (test_findings.py)
 *   RACY                  right except on every 7th call in a process, where it writes nothing (a
 *                         race that loses now and then, deterministically): --repeat finds it
 *   SLOW_AND_WRONG        sleeps $KVFUZZ_TEST_APPEND_DELAY_S seconds per call and writes nothing
 *                         (missing_write on every case with a slot) and, by the head count mod 3, one
 *                         byte before the K cache or of the key input (two more bugs): long shrinks and reports, to
 *                         interrupt (test_faults.py)
 *   HEAD_DIMS_64_128      declares the head-dim set {64, 128} (kvfz_capabilities.head_dims), appends a
 *                         line to $KVFUZZ_TEST_VIOLATIONS for every call with another head dim, and
 *                         refuses every case with 2 or more heads (so that campaigns shrink)
 *   NO_SLOTS_PAST_CAPACITY  declares KVFZ_FEATURE_NO_SLOTS_PAST_CAPACITY and refuses any call with a
 *                         slot >= capacity (kvfuzz must never make one, shrinking included)
 *   STRIDE_GRANULARITY_16  declares kvfz_capabilities.stride_granularity 16 and refuses any call
 *                         with an input or cache stride that is not a whole number of 16 bytes
 *                         (kvfuzz must never make one, shrinking included)
 *   FLUSH_SUBNORMALS      stores a subnormal key element as a zero of its sign (flush to zero), which
 *                         seeded payloads rarely reach and an explicit input value reaches at once
 *   SKIPS_SMALL_HEAD_DIM  returns KVFZ_APPEND_SKIP ("head_dim below 8 is not implemented") for head
 *                         dims below 8; with $KVFUZZ_TEST_WRONG set, writes nothing for the others
 *                         (missing_write), so that shrinking meets skipped candidates
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(SLOW) || defined(LEAKS) || defined(SLOW_AND_WRONG)
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#endif

#include "kvfuzz_plugin.h"

uint32_t naive_abi_version(void);
int naive_query(kvfz_capabilities* caps, int device, char* error, size_t error_size);
int naive_append(const kvfz_append_args* args, char* error, size_t error_size);

uint32_t kvfuzz_plugin_abi_version(void) {
#if defined(ABI_VERSION_99)
  return 99;
#else
  return naive_abi_version();
#endif
}

int kvfuzz_plugin_query(kvfz_capabilities* caps, int device, char* error, size_t error_size) {
#if defined(QUERY_REFUSES)
  (void)caps;
  (void)device;
  snprintf(error, error_size, "this plugin needs an accelerator this machine does not have");
  return 1;
#else
  const int rc = naive_query(caps, device, error, error_size);
#if defined(STRICT_HND_I32)
  caps->layouts = 1u << KVFZ_LAYOUT_PAGED_HND;
  caps->slot_types = 1u << KVFZ_I32;
#endif
#if defined(NO_SLOTS_PAST_CAPACITY)
  caps->features |= KVFZ_FEATURE_NO_SLOTS_PAST_CAPACITY;
#endif
#if defined(STRIDE_GRANULARITY_16)
  if (KVFZ_HAS_FIELD(caps, kvfz_capabilities, stride_granularity)) caps->stride_granularity = 16;
#endif
#if defined(HEAD_DIMS_64_128)
  if (KVFZ_HAS_FIELD(caps, kvfz_capabilities, head_dims)) {
    caps->head_dims[0] = 64;
    caps->head_dims[1] = 128;
  }
#endif
  return rc;
#endif
}

#if defined(SLOW) || defined(SLOW_AND_WRONG)
static void sleep_for(const char* variable) {
  const char* s = getenv(variable);
  const double delay = s ? atof(s) : 0;
  if (delay > 0) {
    struct timespec t = {(time_t)delay, (long)((delay - (double)(time_t)delay) * 1e9)};
    while (nanosleep(&t, &t) != 0) {
    }
  }
}
#endif

#if defined(SLOW)
__attribute__((constructor)) static void slow_start(void) { sleep_for("KVFUZZ_TEST_START_DELAY_S"); }
#endif

#if defined(LEAKS)
void* kvfuzz_test_leaked[1 << 16];  /* escapes, so the compiler keeps every allocation */
static unsigned kvfuzz_test_leaks = 0;

static void* sleep_forever(void* arg) {
  (void)arg;
  for (;;) pause();
  return NULL;
}
#endif

#if !defined(NO_APPEND)
int kvfuzz_plugin_append(const kvfz_append_args* args, char* error, size_t error_size) {
#if defined(CRASH_ON_HEAD_DIM_7)
  if (args->head_dim == 7) *(volatile int*)0 = 1;
#endif
#if defined(RACY)
  static int calls = 0;
  if (++calls % 7 == 0 && args->num_slots > 0) return 0;
#endif
#if defined(REFUSES_TWO)
  if (args->num_slots == 0) {
    snprintf(error, error_size, "no tokens: an empty batch is not supported");
    return 1;
  }
  if (args->num_heads >= 4) {
    snprintf(error, error_size, "too many heads: %d > 3", (int)args->num_heads);
    return 1;
  }
#endif
#if defined(SLOW)
  sleep_for("KVFUZZ_TEST_APPEND_DELAY_S");
#endif
#if defined(SLOW_AND_WRONG)
  sleep_for("KVFUZZ_TEST_APPEND_DELAY_S");
  (void)error, (void)error_size;
  if (!args) return 1;
  /* Two more bugs, so that a campaign saves several cases (one bug is one finding): by the head
   * count mod 3, one byte before the K cache, or the first byte of the key input, is also changed. */
  if (args->num_slots > 0 && args->num_heads % 3 == 1) ((unsigned char*)args->k_cache)[-1] ^= 0x5a;
  if (args->num_slots > 0 && args->num_heads % 3 == 2) ((unsigned char*)(uintptr_t)args->key)[0] ^= 0x5a;
  return 0;
#endif
#if defined(LEAKS)
  void* leak = malloc((size_t)8 << 20);
  if (leak) memset(leak, 1, (size_t)8 << 20);
  kvfuzz_test_leaked[kvfuzz_test_leaks++ % (1u << 16)] = leak;
  pthread_t thread;
  if (pthread_create(&thread, NULL, sleep_forever, NULL) == 0) pthread_detach(thread);
#endif
#if defined(HEAD_DIMS_64_128)
  if (args->head_dim != 64 && args->head_dim != 128) {
    const char* path = getenv("KVFUZZ_TEST_VIOLATIONS");
    FILE* f = path ? fopen(path, "a") : NULL;
    if (f) {
      fprintf(f, "head_dim %d\n", (int)args->head_dim);
      fclose(f);
    }
  }
  if (args->num_heads >= 2) {
    snprintf(error, error_size, "two or more heads are not implemented");
    return 1;
  }
#endif
#if defined(NO_SLOTS_PAST_CAPACITY)
  {
    const int64_t capacity = args->cache.num_blocks * args->cache.block_size;
    for (int64_t t = 0; t < args->num_slots; ++t) {
      const int64_t slot = args->slot_type == KVFZ_I32 ? (int64_t)((const int32_t*)args->slot_mapping)[t]
                                                       : ((const int64_t*)args->slot_mapping)[t];
      if (slot >= capacity) {
        snprintf(error, error_size, "slot %lld past the capacity %lld was sent", (long long)slot, (long long)capacity);
        return 1;
      }
    }
  }
#endif
#if defined(STRIDE_GRANULARITY_16)
  {
    const int64_t in = args->input_dtype == KVFZ_F32 ? 4 : 2, cache = args->cache_dtype == KVFZ_F32 ? 4 : 2;
    const int64_t strides[] = {args->key_stride_token * in,    args->key_stride_head * in,     args->value_stride_token * in,
                               args->value_stride_head * in,   args->cache.stride_block * cache, args->cache.stride_pos * cache,
                               args->cache.stride_head * cache};
    for (size_t i = 0; i < sizeof strides / sizeof strides[0]; ++i)
      if (strides[i] % 16 != 0) {
        snprintf(error, error_size, "stride %zu is %lld bytes, not a whole number of 16-byte units", i, (long long)strides[i]);
        return 1;
      }
  }
#endif
#if defined(FLUSH_SUBNORMALS)
  {
    const int rc = naive_append(args, error, error_size);
    const int wide = args->input_dtype == KVFZ_F32;
    const int64_t capacity = args->cache.num_blocks * args->cache.block_size, size = wide ? 4 : 2;
    const uint32_t exp_mask = wide ? 0x7F800000u : args->input_dtype == KVFZ_F16 ? 0x7C00u : 0x7F80u;
    const uint32_t sign = wide ? 0x80000000u : 0x8000u;
    for (int64_t t = 0; rc == 0 && t < args->num_slots; ++t) {
      const int64_t slot = args->slot_type == KVFZ_I32 ? (int64_t)((const int32_t*)args->slot_mapping)[t]
                                                       : ((const int64_t*)args->slot_mapping)[t];
      if (slot < 0 || slot >= capacity) continue;
      const int64_t block = slot / args->cache.block_size, pos = slot % args->cache.block_size;
      for (int64_t h = 0; h < args->num_heads; ++h)
        for (int64_t d = 0; d < args->head_dim; ++d) {
          const unsigned char* in = (const unsigned char*)args->key + (t * args->key_stride_token + h * args->key_stride_head + d) * size;
          uint32_t bits = 0;
          memcpy(&bits, in, (size_t)size);
          if ((bits & exp_mask) != 0 || (bits & ~sign) == 0) continue;
          bits &= sign;
          memcpy((unsigned char*)args->k_cache +
                     (block * args->cache.stride_block + pos * args->cache.stride_pos + h * args->cache.stride_head + d) * size,
                 &bits, (size_t)size);
        }
    }
    return rc;
  }
#endif
#if defined(SKIPS_SMALL_HEAD_DIM)
  if (args->head_dim < 8) {
    snprintf(error, error_size, "head_dim below 8 is not implemented");
    return KVFZ_APPEND_SKIP;
  }
  if (getenv("KVFUZZ_TEST_WRONG")) return 0;
#endif
#if defined(STRICT_HND_I32)
  if (args->layout != KVFZ_LAYOUT_PAGED_HND || args->slot_type != KVFZ_I32) {
    const char* path = getenv("KVFUZZ_TEST_VIOLATIONS");
    FILE* f = path ? fopen(path, "a") : NULL;
    if (f) {
      fprintf(f, "layout %d slot_type %d\n", (int)args->layout, (int)args->slot_type);
      fclose(f);
    }
  }
  if (args->num_heads >= 2) {
    snprintf(error, error_size, "two or more heads are not implemented");
    return 1;
  }
#endif
  return naive_append(args, error, error_size);
}
#endif
