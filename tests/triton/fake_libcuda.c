// A fake CUDA driver for the fast launcher's CPU tests (test_fast_launch.py): built as a shared library
// whose soname is libcuda.so.1 and loaded before fastlaunch.c opens "libcuda.so.1", so that dlopen
// returns it. It has the six entries fastlaunch.c uses; each records what it was given, and the fake_*
// functions let a test read the records and choose what the entries return.
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

enum { kMaxParams = 256 };

static struct {
  CUcontext current;        // what cuCtxGetCurrent gives
  CUresult get_current_status, launch_status;
  int device_gets, last_ordinal, retains, sets;
  int launches, param_count, gil_held;
  CUlaunchConfig config;
  CUfunction function;
  uint64_t params[kMaxParams];  // the first param_count parameters of the last launch, 8 bytes each
  int extra_null;
} fake;

// A primary context of device `ordinal` (the fake's own handle, 0x1000 + ordinal).
static CUcontext primary_of(int ordinal) { return (CUcontext)(uintptr_t)(0x1000 + ordinal); }

CUresult cuCtxGetCurrent(CUcontext *ctx) {
  if (fake.get_current_status != CUDA_SUCCESS) return fake.get_current_status;
  *ctx = fake.current;
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  ++fake.sets;
  fake.current = ctx;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *dev, int ordinal) {
  ++fake.device_gets;
  fake.last_ordinal = ordinal;
  *dev = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev) {
  ++fake.retains;
  *ctx = primary_of(dev);
  return CUDA_SUCCESS;
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra) {
  // Whether the caller still holds Python's GIL (it should have released it around the launch). The
  // lookup is done once: through torch's symbol tables it costs more than the launch api_host_cpu.py times.
  static int (*gil_check)(void) = NULL;
  if (!gil_check) gil_check = (int (*)(void))dlsym(RTLD_DEFAULT, "PyGILState_Check");
  fake.gil_held = gil_check ? gil_check() : -1;
  if (fake.launch_status != CUDA_SUCCESS) return fake.launch_status;
  ++fake.launches;
  fake.config = *config;
  fake.function = f;
  for (int i = 0; i < fake.param_count && i < kMaxParams; ++i) memcpy(&fake.params[i], params[i], 8);
  fake.extra_null = extra == NULL;
  return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult status, const char **text) {
  *text = status == CUDA_ERROR_ILLEGAL_ADDRESS ? "fake: an illegal memory access" : "fake: some error";
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// What the tests call (ctypes)

void fake_reset(int param_count) {
  memset(&fake, 0, sizeof fake);
  fake.param_count = param_count;
}
void fake_set_current(uintptr_t ctx) { fake.current = (CUcontext)ctx; }
uintptr_t fake_current(void) { return (uintptr_t)fake.current; }
void fake_fail_get_current(int status) { fake.get_current_status = (CUresult)status; }
void fake_fail_launch(int status) { fake.launch_status = (CUresult)status; }
int fake_launches(void) { return fake.launches; }
int fake_retains(void) { return fake.retains; }
int fake_device_ordinal(void) { return fake.device_gets ? fake.last_ordinal : -1; }
int fake_gil_held(void) { return fake.gil_held; }
uintptr_t fake_function(void) { return (uintptr_t)fake.function; }
int fake_extra_null(void) { return fake.extra_null; }
uint64_t fake_param(int i) { return i >= 0 && i < kMaxParams ? fake.params[i] : 0; }

// The last launch's configuration: grid x y z, block x y z, shared memory, attribute count.
void fake_config(unsigned out[8]) {
  const CUlaunchConfig *c = &fake.config;
  unsigned values[8] = {c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,
                        c->sharedMemBytes, c->numAttrs};
  memcpy(out, values, sizeof values);
}
uintptr_t fake_stream(void) { return (uintptr_t)fake.config.hStream; }
