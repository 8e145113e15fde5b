// kvfuzz_triton's own launcher of a launch plan (launch_plan.py, fast_launch.py): a compiled Triton
// kernel launched with cuLaunchKernelEx from arguments packed once, each call patching in its
// pointers. Triton 3.6's launcher parses every one of a kernel's ~60 arguments from Python objects on
// every call (CudaLauncher.__call__, then PyArg_ParseTuple); a plan's arguments other than its
// pointers never change, so they are packed when the plan is made (fast_launch.py) and copied here.
//
// Built at first use by fast_launch.py with Triton's own module builder (the one that builds Triton's
// launchers), against the cuda.h Triton ships; libcuda.so.1 is opened at the first launch, so the
// module also builds and loads where there is no driver (the CPU tests call everything but launch()).
//
//   keyed_pointers(tensors, others, debug, instrumentation_mode) -> (key, pointers) | (None, None)
//       launch_plan.keyed_pointers, in C (launch_plan.py says what the key holds).
//   Plan(function, device, grid, num_warps, shared, template, slots)
//       a launch: CUfunction handle, CUDA device index, (x, y, z), warps per block, dynamic shared
//       bytes, template = the kernel's parameters as 8-byte cells (bytes, fast_launch.pack), slots =
//       ((cell, index into the call's pointers), ...).
//   Plan.cells(pointers) -> bytes      the cells a launch with these pointers passes (for the tests)
//   Plan.launch(pointers, stream)      launches on `stream` (a raw CUstream handle)
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cuda.h"

enum { kMaxCells = 256 };

// ---------------------------------------------------------------------------------------------
// The plan key (launch_plan.keyed_pointers)

static PyObject *str_data_ptr, *str_shape, *str_stride, *str_dtype, *str_device, *str_is_neg, *str_numel;

// Whether t is a tensor no plan may take (launch_plan._described): a negative-bit view, or a null
// pointer with elements. 1 yes, 0 no, -1 an exception set.
static int refused(PyObject *t, PyObject *ptr) {
  PyObject *neg = PyObject_CallMethodNoArgs(t, str_is_neg);
  if (!neg) return -1;
  int out = PyObject_IsTrue(neg);
  Py_DECREF(neg);
  if (out != 0) return out;
  if ((out = PyObject_Not(ptr)) != 1) return out;
  PyObject *numel = PyObject_CallMethodNoArgs(t, str_numel);
  if (!numel) return -1;
  out = PyObject_IsTrue(numel);
  Py_DECREF(numel);
  return out;
}

// (type(t), t.shape, t.stride(), t.dtype, t.device, ptr & 15), a new reference or NULL (a ValueError for
// a tensor no plan may take).
static PyObject *describe(PyObject *t, PyObject *ptr) {
  PyObject *shape = NULL, *stride = NULL, *dtype = NULL, *device = NULL, *low = NULL, *fifteen = NULL;
  PyObject *out = NULL;
  const int refuse = refused(t, ptr);
  if (refuse != 0) {
    if (refuse > 0) PyErr_SetString(PyExc_ValueError, "not a tensor a plan may take");
    return NULL;
  }
  if (!(shape = PyObject_GetAttr(t, str_shape))) goto done;
  if (!(stride = PyObject_CallMethodNoArgs(t, str_stride))) goto done;
  if (!(dtype = PyObject_GetAttr(t, str_dtype))) goto done;
  if (!(device = PyObject_GetAttr(t, str_device))) goto done;
  if (!(fifteen = PyLong_FromLong(15))) goto done;
  if (!(low = PyNumber_And(ptr, fifteen))) goto done;
  out = PyTuple_Pack(6, (PyObject *)Py_TYPE(t), shape, stride, dtype, device, low);
done:
  Py_XDECREF(shape);
  Py_XDECREF(stride);
  Py_XDECREF(dtype);
  Py_XDECREF(device);
  Py_XDECREF(fifteen);
  Py_XDECREF(low);
  return out;
}

static PyObject *keyed_pointers(PyObject *Py_UNUSED(self), PyObject *args) {
  PyObject *tensors, *others, *debug, *mode;
  if (!PyArg_ParseTuple(args, "OOOO", &tensors, &others, &debug, &mode)) return NULL;
  // A tuple or a list, as the Python version takes; a list is copied first, since the tensors' methods
  // run arbitrary Python that could change it.
  if (!PyTuple_Check(tensors) && !PyList_Check(tensors)) return PyTuple_Pack(2, Py_None, Py_None);
  PyObject *seq = PySequence_Tuple(tensors);
  if (!seq) goto not_described;
  Py_ssize_t n = PyTuple_GET_SIZE(seq);
  PyObject **items = &PyTuple_GET_ITEM(seq, 0);
  PyObject *pointers = PyList_New(n), *described = PyTuple_New(n), *result = NULL;
  if (!pointers || !described) goto fail;
  // As the Python version: every data_ptr() first, then the descriptions.
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject *p = items[i] == Py_None ? Py_NewRef(Py_None) : PyObject_CallMethodNoArgs(items[i], str_data_ptr);
    if (!p) goto fail;
    PyList_SET_ITEM(pointers, i, p);
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject *d = items[i] == Py_None ? Py_NewRef(Py_None) : describe(items[i], PyList_GET_ITEM(pointers, i));
    if (!d) goto fail;
    PyTuple_SET_ITEM(described, i, d);
  }
  PyObject *key = PyTuple_Pack(4, described, others, debug, mode);
  if (!key) goto fail;
  result = PyTuple_Pack(2, key, pointers);
  Py_DECREF(key);
  if (!result) goto fail;
  Py_DECREF(seq);
  Py_DECREF(pointers);
  Py_DECREF(described);
  return result;
fail:
  Py_DECREF(seq);
  Py_XDECREF(pointers);
  Py_XDECREF(described);
not_described:
  // `except Exception` in the Python version: anything but a tensor gives (None, None); a
  // KeyboardInterrupt or SystemExit goes on.
  if (PyErr_ExceptionMatches(PyExc_Exception)) {
    PyErr_Clear();
    return PyTuple_Pack(2, Py_None, Py_None);
  }
  return NULL;
}

// ---------------------------------------------------------------------------------------------
// The driver, opened at the first launch

typedef CUresult (*LaunchEx)(const CUlaunchConfig *, CUfunction, void **, void **);
typedef CUresult (*CtxGetCurrent)(CUcontext *);
typedef CUresult (*CtxSetCurrent)(CUcontext);
typedef CUresult (*DeviceGet)(CUdevice *, int);
typedef CUresult (*PrimaryCtxRetain)(CUcontext *, CUdevice);
typedef CUresult (*GetErrorString)(CUresult, const char **);

static struct {
  int opened;  // 1 every entry found, -1 tried and failed (why: failure)
  char failure[512];
  LaunchEx launch;
  CtxGetCurrent ctx_get_current;
  CtxSetCurrent ctx_set_current;
  DeviceGet device_get;
  PrimaryCtxRetain primary_ctx_retain;
  GetErrorString error_string;
} cu;

// 1 when the driver's entries are found; else 0 with a RuntimeError saying why (every call).
static int open_driver(void) {
  if (cu.opened > 0) return 1;
  if (cu.opened < 0) {
    PyErr_SetString(PyExc_RuntimeError, cu.failure);
    return 0;
  }
  cu.opened = -1;
  void *lib = dlopen("libcuda.so.1", RTLD_LAZY);
  if (!lib) {
    snprintf(cu.failure, sizeof cu.failure, "kvfuzz_triton fast launcher: cannot open libcuda.so.1 (%s)", dlerror());
    PyErr_SetString(PyExc_RuntimeError, cu.failure);
    return 0;
  }
  cu.launch = (LaunchEx)dlsym(lib, "cuLaunchKernelEx");
  cu.ctx_get_current = (CtxGetCurrent)dlsym(lib, "cuCtxGetCurrent");
  cu.ctx_set_current = (CtxSetCurrent)dlsym(lib, "cuCtxSetCurrent");
  cu.device_get = (DeviceGet)dlsym(lib, "cuDeviceGet");
  cu.primary_ctx_retain = (PrimaryCtxRetain)dlsym(lib, "cuDevicePrimaryCtxRetain");
  cu.error_string = (GetErrorString)dlsym(lib, "cuGetErrorString");
  if (!cu.launch || !cu.ctx_get_current || !cu.ctx_set_current || !cu.device_get || !cu.primary_ctx_retain ||
      !cu.error_string) {
    snprintf(cu.failure, sizeof cu.failure, "kvfuzz_triton fast launcher: libcuda.so.1 lacks cuLaunchKernelEx or a "
                                            "context function (a driver older than CUDA 12?)");
    PyErr_SetString(PyExc_RuntimeError, cu.failure);
    return 0;
  }
  cu.opened = 1;
  return 1;
}

static int cuda_failed(CUresult status, const char *what) {
  if (status == CUDA_SUCCESS) return 0;
  const char *text = NULL;
  cu.error_string(status, &text);
  PyErr_Format(PyExc_RuntimeError, "kvfuzz_triton fast launcher: %s failed: %s (CUresult %d)", what,
               text ? text : "unknown error", (int)status);
  return 1;
}

// ---------------------------------------------------------------------------------------------
// Plan

typedef struct {
  PyObject_HEAD
  CUfunction function;
  int device;
  unsigned grid[3], block, shared;
  Py_ssize_t ncells, nslots;
  uint64_t cells[kMaxCells];
  Py_ssize_t slot_cell[kMaxCells], slot_source[kMaxCells];
} Plan;

static int plan_init(Plan *self, PyObject *args, PyObject *kwargs) {
  unsigned long long function;
  int device, num_warps;
  long long grid[3];
  unsigned shared;
  Py_buffer template;
  PyObject *slots;
  static char *names[] = {"function", "device", "grid", "num_warps", "shared", "template", "slots", NULL};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Ki(LLL)iIy*O", names, &function, &device, &grid[0], &grid[1],
                                   &grid[2], &num_warps, &shared, &template, &slots))
    return -1;
  // Everything is checked into locals first: a Plan whose __init__ fails keeps what it held.
  int ok = 0;
  PyObject *seq = NULL;
  Py_ssize_t slot_cell[kMaxCells], slot_source[kMaxCells];
  const Py_ssize_t ncells = template.len / 8;
  if (template.len % 8 || ncells > kMaxCells) {
    PyErr_Format(PyExc_ValueError, "Plan: template must be at most %d 8-byte cells, got %zd bytes", kMaxCells,
                 template.len);
    goto done;
  }
  if (num_warps < 1 || num_warps > 32) {
    PyErr_Format(PyExc_ValueError, "Plan: num_warps must be 1 to 32, got %d", num_warps);
    goto done;
  }
  for (int i = 0; i < 3; ++i) {
    if (grid[i] < 0 || grid[i] > 0x7FFFFFFF) {  // Triton's launcher takes the grid as C ints
      PyErr_Format(PyExc_ValueError, "Plan: grid sizes must be 0 to 2^31 - 1, got %lld", grid[i]);
      goto done;
    }
  }
  if (!(seq = PySequence_Tuple(slots))) goto done;
  const Py_ssize_t nslots = PyTuple_GET_SIZE(seq);
  if (nslots > ncells) {
    PyErr_SetString(PyExc_ValueError, "Plan: more slots than cells");
    goto done;
  }
  for (Py_ssize_t i = 0; i < nslots; ++i) {
    Py_ssize_t cell, source;
    if (!PyArg_ParseTuple(PyTuple_GET_ITEM(seq, i), "nn", &cell, &source)) goto done;
    if (cell < 0 || cell >= ncells || source < 0) {
      PyErr_Format(PyExc_ValueError, "Plan: slot (%zd, %zd) outside the %zd cells", cell, source, ncells);
      goto done;
    }
    slot_cell[i] = cell;
    slot_source[i] = source;
  }
  memcpy(self->cells, template.buf, template.len);
  memcpy(self->slot_cell, slot_cell, (size_t)nslots * sizeof slot_cell[0]);
  memcpy(self->slot_source, slot_source, (size_t)nslots * sizeof slot_source[0]);
  self->ncells = ncells;
  self->nslots = nslots;
  self->function = (CUfunction)(uintptr_t)function;
  self->device = device;
  for (int i = 0; i < 3; ++i) self->grid[i] = (unsigned)grid[i];
  self->block = 32u * (unsigned)num_warps;
  self->shared = shared;
  ok = 1;
done:
  Py_XDECREF(seq);
  PyBuffer_Release(&template);
  return ok ? 0 : -1;
}

// The plan's cells with each slot's pointer from `pointers` (a list or tuple of ints): 1, or 0 with
// an exception set.
static int fill(const Plan *self, PyObject *pointers, uint64_t *cells) {
  if (!PyList_Check(pointers) && !PyTuple_Check(pointers)) {
    PyErr_SetString(PyExc_TypeError, "pointers must be a list or tuple of ints");
    return 0;
  }
  Py_ssize_t n = PySequence_Fast_GET_SIZE(pointers);
  PyObject **items = PySequence_Fast_ITEMS(pointers);
  memcpy(cells, self->cells, (size_t)self->ncells * 8);
  for (Py_ssize_t i = 0; i < self->nslots; ++i) {
    Py_ssize_t source = self->slot_source[i];
    if (source >= n) {
      PyErr_Format(PyExc_IndexError, "pointer %zd of a call with %zd", source, n);
      return 0;
    }
    unsigned long long ptr = PyLong_AsUnsignedLongLong(items[source]);
    if (ptr == (unsigned long long)-1 && PyErr_Occurred()) return 0;
    cells[self->slot_cell[i]] = ptr;
  }
  return 1;
}

static PyObject *plan_cells(Plan *self, PyObject *pointers) {
  uint64_t cells[kMaxCells];
  if (!fill(self, pointers, cells)) return NULL;
  return PyBytes_FromStringAndSize((const char *)cells, self->ncells * 8);
}

static PyObject *plan_launch(Plan *self, PyObject *const *args, Py_ssize_t nargs) {
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "launch(pointers, stream)");
    return NULL;
  }
  uint64_t cells[kMaxCells];
  void *params[kMaxCells];
  unsigned long long stream = PyLong_AsUnsignedLongLong(args[1]);
  if (stream == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
  if (!fill(self, args[0], cells) || !open_driver()) return NULL;
  for (Py_ssize_t i = 0; i < self->ncells; ++i) params[i] = &cells[i];
  if (self->grid[0] == 0 || self->grid[1] == 0 || self->grid[2] == 0) Py_RETURN_NONE;  // as Triton: nothing
  CUlaunchConfig config = {0};
  config.gridDimX = self->grid[0];
  config.gridDimY = self->grid[1];
  config.gridDimZ = self->grid[2];
  config.blockDimX = self->block;
  config.blockDimY = config.blockDimZ = 1;
  config.sharedMemBytes = self->shared;
  config.hStream = (CUstream)(uintptr_t)stream;
  CUresult status;
  const char *what = "cuCtxGetCurrent";
  Py_BEGIN_ALLOW_THREADS;
  // As Triton's launcher: a thread with no current context gets a primary one (here the plan's
  // device's; Triton's takes device 0's).
  CUcontext ctx = NULL;
  status = cu.ctx_get_current(&ctx);
  if (status == CUDA_SUCCESS) what = "cuLaunchKernelEx";
  if (status == CUDA_SUCCESS && !ctx) {
    CUdevice dev;
    what = "making the device's primary context current";
    status = cu.device_get(&dev, self->device);
    if (status == CUDA_SUCCESS) status = cu.primary_ctx_retain(&ctx, dev);
    if (status == CUDA_SUCCESS) status = cu.ctx_set_current(ctx);
    if (status == CUDA_SUCCESS) what = "cuLaunchKernelEx";
  }
  if (status == CUDA_SUCCESS) status = cu.launch(&config, self->function, params, NULL);
  Py_END_ALLOW_THREADS;
  if (cuda_failed(status, what)) return NULL;
  Py_RETURN_NONE;
}

static PyMethodDef plan_methods[] = {
    {"cells", (PyCFunction)plan_cells, METH_O, "The cells a launch with these pointers passes (bytes)."},
    {"launch", (PyCFunction)(void (*)(void))plan_launch, METH_FASTCALL, "launch(pointers, stream)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject PlanType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kvfuzz_fastlaunch.Plan",
    .tp_basicsize = sizeof(Plan),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A compiled kernel's launch with its arguments packed (fastlaunch.c).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)plan_init,
    .tp_methods = plan_methods,
};

// ---------------------------------------------------------------------------------------------

static PyMethodDef module_methods[] = {
    {"keyed_pointers", keyed_pointers, METH_VARARGS,
     "keyed_pointers(tensors, others, debug, instrumentation_mode) -> (key, pointers) or (None, None)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    .m_base = PyModuleDef_HEAD_INIT, .m_name = "kvfuzz_fastlaunch", .m_size = -1, .m_methods = module_methods};

PyMODINIT_FUNC PyInit_kvfuzz_fastlaunch(void) {
  if (!(str_data_ptr = PyUnicode_InternFromString("data_ptr")) || !(str_shape = PyUnicode_InternFromString("shape")) ||
      !(str_stride = PyUnicode_InternFromString("stride")) || !(str_dtype = PyUnicode_InternFromString("dtype")) ||
      !(str_device = PyUnicode_InternFromString("device")) || !(str_is_neg = PyUnicode_InternFromString("is_neg")) ||
      !(str_numel = PyUnicode_InternFromString("numel")))
    return NULL;
  if (PyType_Ready(&PlanType) < 0) return NULL;
  PyObject *m = PyModule_Create(&module_def);
  if (!m) return NULL;
  if (PyModule_AddObjectRef(m, "Plan", (PyObject *)&PlanType) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
