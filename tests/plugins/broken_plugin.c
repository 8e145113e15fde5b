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
 */
#include <stdio.h>
#include <stdlib.h>

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
  return rc;
#endif
}

#if !defined(NO_APPEND)
int kvfuzz_plugin_append(const kvfz_append_args* args, char* error, size_t error_size) {
#if defined(CRASH_ON_HEAD_DIM_7)
  if (args->head_dim == 7) *(volatile int*)0 = 1;
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
