// bench_driver.cu — FlashInfer's paged-KV append behind a small C entry point, for bench/bench.py's
// `--peer flashinfer=PATH` (loaded with ctypes; no torch extension, no FlashInfer Python package).
//
// bench.py fills a kvfz_flashinfer_append (paged_append.cuh; its FlashInferArgs mirrors it) with raw
// device pointers, FlashInfer's CSR arrays and the stream, and calls kvfuzz_flashinfer_append, which
// launches flashinfer::AppendPagedKVCache exactly as FlashInfer's binding (csrc/page.cu) does:
// paged_append.cuh, the code kvfuzz's FlashInfer plugin (adapter.cu) runs too.
//
// Build (no GPU needed), after fetch-headers.sh:
//   examples/peers/flashinfer/build.sh -t bench         # -> build/peers/flashinfer_bench.so
// Use, on a machine with a Hopper GPU:
//   python3 bench/bench.py --cuda-lib cuda=CUDA.so --peer flashinfer=build/peers/flashinfer_bench.so --out DIR
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <exception>

#include "paged_append.cuh"  // kvfz_flashinfer_append, the paged_kv_t and launch, unsupported()

// build.sh passes the FlashInfer version the headers came from (FLASHINFER_VERSION of the fetched tree).
#if !defined(KVFZ_FLASHINFER_VERSION)
#define KVFZ_FLASHINFER_VERSION "unknown"
#endif

// kvfuzz_flashinfer_append's return for "AppendPagedKVCache cannot take this call" (nothing
// launched, the error text says why): no cudaError_t is negative. bench/cuda_entry.cu's
// KVFZ_BENCH_UNSUPPORTED has the same value and meaning.
#define KVFZ_FLASHINFER_UNSUPPORTED (-1)

using kvfz_flashinfer::set_error;

extern "C" {

// sizeof(kvfz_flashinfer_append) as compiled here: bench.py checks its ctypes mirror against it.
__attribute__((visibility("default"))) long long kvfuzz_flashinfer_args_size(void) {
  return static_cast<long long>(sizeof(kvfz_flashinfer_append));
}

// The FlashInfer version of the headers this was built against ("0.7.4"), for the report.
__attribute__((visibility("default"))) const char* kvfuzz_flashinfer_version(void) { return KVFZ_FLASHINFER_VERSION; }

// One append. Returns 0 after a successful launch (nothing is synchronised), KVFZ_FLASHINFER_UNSUPPORTED
// when the kernel cannot take the call (nothing launched), else the cudaError_t of the first failing
// CUDA call of AppendPagedKVCache (the thread's last error is consumed). error (error_size bytes,
// may be NULL) receives a text for every non-zero return.
__attribute__((visibility("default"))) int kvfuzz_flashinfer_append(const kvfz_flashinfer_append* a, char* error,
                                                                    size_t error_size) {
  if (const char* why = kvfz_flashinfer::unsupported(*a)) {
    set_error(error, error_size, "%s", why);
    return KVFZ_FLASHINFER_UNSUPPORTED;
  }
  cudaError_t e = cudaSuccess;
  try {  // no C++ exception may leave a C function; unsupported() has ruled out DISPATCH_HEAD_DIM's
    e = kvfz_flashinfer::append_dispatch(*a);
  } catch (const std::exception& x) {
    set_error(error, error_size, "AppendPagedKVCache threw: %s", x.what());
    return static_cast<int>(cudaErrorUnknown);
  }
  // As the plugins: the launch's own error too, consumed (0 is cudaSuccess).
  return static_cast<int>(kvfz_flashinfer::launch_result(e, "AppendPagedKVCache", error, error_size));
}

}  // extern "C"
