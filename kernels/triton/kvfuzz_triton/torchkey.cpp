// The plan key (launch_plan.keyed_pointers) of a call whose tensors are all torch.Tensor exactly, read
// through torch's C++ API: the tensors' sizes, strides, dtype, device and pointer come straight from
// their at::Tensor, where the Python key (and fastlaunch.c's) reads them through torch's Python
// attributes, about 0.5 µs a tensor (reports/cpu/2026-12-05-api-host).
//
// Built at first use by fast_launch.py against the torch the process has imported (its headers and
// libraries, its C++ ABI), cached in Triton's cache directory.
//
//   keyed_pointers(tensors, others, debug, instrumentation_mode)
//       -> (key, pointers), (None, None), or NotImplemented when an argument is neither None nor a
//          torch.Tensor (a subclass, a duck tensor): the caller computes the key another way.
//
// The key is (bytes, others, debug, instrumentation_mode). Per tensor argument the bytes hold int64
// words: 0 for an absent one; else 1 + ndim, the sizes, the strides, the scalar type, the device type
// and index, and data_ptr() % 16. Two calls' keys are equal exactly when the Python key's would be
// (type, shape, strides, dtype, device, alignment; tests/triton/test_fast_launch.py checks it), and a
// key of this kind never equals one of the others (a bytes object against a tuple). A tensor whose
// strides or pointer torch refuses (sparse, nested), a negative-bit view and a null pointer with
// elements give (None, None), as in the Python key.
#include <Python.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstdint>
#include <new>
#include <vector>

namespace {

void describe(const at::Tensor& t, uint64_t ptr, std::vector<int64_t>& words) {
  const c10::IntArrayRef sizes = t.sizes(), strides = t.strides();
  words.push_back(1 + static_cast<int64_t>(sizes.size()));
  words.insert(words.end(), sizes.begin(), sizes.end());
  words.insert(words.end(), strides.begin(), strides.end());
  words.push_back(static_cast<int64_t>(t.scalar_type()));
  words.push_back(static_cast<int64_t>(t.device().type()));
  words.push_back(t.device().index());
  words.push_back(static_cast<int64_t>(ptr & 15));
}

PyObject* none_pair() { return PyTuple_Pack(2, Py_None, Py_None); }

PyObject* keyed_pointers(PyObject*, PyObject* args) {
  PyObject *tensors, *others, *debug, *mode;
  if (!PyArg_ParseTuple(args, "OOOO", &tensors, &others, &debug, &mode)) return nullptr;
  if (!PyTuple_Check(tensors)) Py_RETURN_NOTIMPLEMENTED;
  const Py_ssize_t n = PyTuple_GET_SIZE(tensors);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PyTuple_GET_ITEM(tensors, i);
    // torch.Tensor itself (THPVariable_CheckExact also takes nn.Parameter, which the Python key tells apart)
    if (item != Py_None && Py_TYPE(item) != reinterpret_cast<PyTypeObject*>(THPVariableClass)) Py_RETURN_NOTIMPLEMENTED;
  }
  std::vector<int64_t> words;
  std::vector<uint64_t> ptrs;
  try {
    words.reserve(static_cast<size_t>(n) * 16);
    ptrs.resize(static_cast<size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* item = PyTuple_GET_ITEM(tensors, i);
      if (item == Py_None) {
        words.push_back(0);
        continue;
      }
      const at::Tensor& t = THPVariable_Unpack(item);
      ptrs[i] = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(t.data_ptr()));
      // No key for a tensor no plan may take (launch_plan._described): a negative-bit view, a null
      // pointer with elements (a functionalized or zero tensor).
      if (t.is_neg() || (ptrs[i] == 0 && t.numel() > 0)) return none_pair();
      describe(t, ptrs[i], words);
    }
  } catch (const std::bad_alloc&) {
    return PyErr_NoMemory();
  } catch (...) {  // torch refused an attribute: as the Python key's `except Exception`
    if (PyErr_Occurred()) return nullptr;
    return none_pair();
  }
  PyObject* pointers = PyList_New(n);
  if (!pointers) return nullptr;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* p = PyTuple_GET_ITEM(tensors, i) == Py_None ? Py_NewRef(Py_None) : PyLong_FromUnsignedLongLong(ptrs[i]);
    if (!p) {
      Py_DECREF(pointers);
      return nullptr;
    }
    PyList_SET_ITEM(pointers, i, p);
  }
  PyObject* described = PyBytes_FromStringAndSize(reinterpret_cast<const char*>(words.data()),
                                                  static_cast<Py_ssize_t>(words.size() * sizeof(int64_t)));
  PyObject* key = described ? PyTuple_Pack(4, described, others, debug, mode) : nullptr;
  Py_XDECREF(described);
  PyObject* result = key ? PyTuple_Pack(2, key, pointers) : nullptr;
  Py_XDECREF(key);
  Py_DECREF(pointers);
  return result;
}

PyMethodDef methods[] = {
    {"keyed_pointers", keyed_pointers, METH_VARARGS,
     "keyed_pointers(tensors, others, debug, instrumentation_mode) -> (key, pointers), (None, None) or "
     "NotImplemented"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "kvfuzz_torchkey", nullptr, -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit_kvfuzz_torchkey(void) { return PyModule_Create(&module_def); }
