/* core.c: the C extension module `vqcheck._core`, the Python package's bridge
 * to libvqcheck (CPython C API, no binding generator).
 *
 * It exposes the tensor digest (vqc/digest.h) over three kinds of memory, and
 * the digest type table; python/vqcheck/_digest.py turns torch tensors, numpy
 * arrays and buffers into these calls and is the public face:
 *
 *   digest_buffer(obj, code, shape, nthreads)   any buffer-protocol object
 *   digest_address(address, code, shape, byte_strides, nthreads)
 *                                                CPU memory the caller keeps
 *                                                alive (a torch tensor's
 *                                                data_ptr())
 *   digest_device(address, code, shape, stream)  contiguous CUDA memory, on
 *                                                a cudaStream_t given as int
 *   type_info(name) -> (code, size), type_names() -> tuple of str
 *   gpu_built() -> bool, cuda_available() -> bool, version() -> str
 *
 * Every digest runs with the GIL released, so other Python threads (a data
 * loader) go on meanwhile. Errors from the library raise ValueError with its
 * message (MemoryError for VQC_ENOMEM, RuntimeError for device failures). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include "vqc/digest.h"
#include "vqc/gpu.h"
#include "vqc/status.h"
#include "vqc/tensor.h"
#include "vqc/version.h"

/* ---- helpers */

/* Raises the Python exception for a failed library call and returns NULL. */
static PyObject *raise_status(vqc_status s) {
  PyObject *type = PyExc_ValueError;
  if (s == VQC_ENOMEM) type = PyExc_MemoryError;
  if (s == VQC_ECUDA || s == VQC_ENODEVICE || s == VQC_EUNSUPPORTED)
    type = PyExc_RuntimeError;
  const char *msg = vqc_last_error();
  PyErr_SetString(type, msg && msg[0] ? msg : vqc_status_message(s));
  return NULL;
}

/* Reads a sequence of at most VQC_DIGEST_MAX_DIMS ints into out; returns
 * the count, or -1 with an exception set. `what` names it in errors. */
static int read_dims(PyObject *seq, int64_t out[VQC_DIGEST_MAX_DIMS],
                     const char *what) {
  PyObject *fast = PySequence_Fast(seq, "a sequence of ints is needed");
  if (fast == NULL) return -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  if (n > VQC_DIGEST_MAX_DIMS) {
    PyErr_Format(PyExc_ValueError,
                 "%s has %zd dims; the digest takes at most %d (a trace line "
                 "holds 8)", what, n, VQC_DIGEST_MAX_DIMS);
    Py_DECREF(fast);
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
    if (v == -1 && PyErr_Occurred()) {
      Py_DECREF(fast);
      return -1;
    }
    out[i] = (int64_t)v;
  }
  Py_DECREF(fast);
  return (int)n;
}

/* A digest type code (VQC_DIGEST_TYPE_LIST) from a Python int. */
static int read_code(PyObject *obj, uint8_t *code) {
  long v = PyLong_AsLong(obj);
  if (v == -1 && PyErr_Occurred()) return -1;
  vqc_digest_type t;
  if (v < 1 || v > 255 || vqc_digest_type_by_code((uint8_t)v, &t) != VQC_OK) {
    PyErr_Format(PyExc_ValueError, "unknown digest type code %ld", v);
    return -1;
  }
  *code = (uint8_t)v;
  return 0;
}

/* ---- digest_buffer(obj, code, shape, nthreads) */

/* With shape None the buffer's own shape and strides are used (a numpy
 * array, a memoryview); its item size must be the type's. With a shape, the
 * buffer must be C-contiguous and hold exactly numel * size bytes (bytes,
 * bytearray, mmap read as the given type). */
static PyObject *py_digest_buffer(PyObject *self, PyObject *args) {
  PyObject *obj, *code_obj, *shape_obj;
  int nthreads;
  if (!PyArg_ParseTuple(args, "OOOi:digest_buffer", &obj, &code_obj,
                        &shape_obj, &nthreads))
    return NULL;
  uint8_t code;
  if (read_code(code_obj, &code) < 0) return NULL;
  vqc_digest_type type;
  (void)vqc_digest_type_by_code(code, &type);

  Py_buffer view;
  if (PyObject_GetBuffer(obj, &view, PyBUF_RECORDS_RO) < 0) return NULL;
  int64_t shape[VQC_DIGEST_MAX_DIMS], strides[VQC_DIGEST_MAX_DIMS];
  int ndim;
  const int64_t *stride_arg = NULL;
  PyObject *result = NULL;

  if (shape_obj == Py_None) {
    if (view.ndim > VQC_DIGEST_MAX_DIMS) {
      PyErr_Format(PyExc_ValueError,
                   "the buffer has %d dims; the digest takes at most %d",
                   view.ndim, VQC_DIGEST_MAX_DIMS);
      goto done;
    }
    if (view.itemsize != type.size) {
      PyErr_Format(PyExc_ValueError,
                   "the buffer's items are %zd bytes but %s has %d",
                   view.itemsize, type.name, (int)type.size);
      goto done;
    }
    ndim = view.ndim;
    for (int d = 0; d < ndim; d++) {
      shape[d] = (int64_t)view.shape[d];
      strides[d] = (int64_t)view.strides[d];
    }
    stride_arg = strides;
  } else {
    ndim = read_dims(shape_obj, shape, "shape");
    if (ndim < 0) goto done;
    if (!PyBuffer_IsContiguous(&view, 'C')) {
      PyErr_SetString(PyExc_ValueError,
                      "a buffer read with an explicit shape must be "
                      "C-contiguous");
      goto done;
    }
    int64_t want = type.size;
    for (int d = 0; d < ndim; d++) want *= shape[d] < 0 ? 0 : shape[d];
    if (view.len != (Py_ssize_t)want) {
      PyErr_Format(PyExc_ValueError,
                   "the buffer holds %zd bytes but %s of that shape needs "
                   "%lld", view.len, type.name, (long long)want);
      goto done;
    }
  }

  uint64_t digest = 0;
  vqc_status s;
  Py_BEGIN_ALLOW_THREADS
  s = vqc_digest_strided(view.buf, code, ndim, shape, stride_arg, nthreads,
                         &digest);
  Py_END_ALLOW_THREADS
  result = s == VQC_OK ? PyLong_FromUnsignedLongLong(digest) : raise_status(s);
done:
  PyBuffer_Release(&view);
  return result;
}

/* ---- digest_address(address, code, shape, byte_strides, nthreads) */

static PyObject *py_digest_address(PyObject *self, PyObject *args) {
  PyObject *addr_obj, *code_obj, *shape_obj, *strides_obj;
  int nthreads;
  if (!PyArg_ParseTuple(args, "OOOOi:digest_address", &addr_obj, &code_obj,
                        &shape_obj, &strides_obj, &nthreads))
    return NULL;
  void *addr = PyLong_AsVoidPtr(addr_obj);
  if (addr == NULL && PyErr_Occurred()) return NULL;
  uint8_t code;
  if (read_code(code_obj, &code) < 0) return NULL;
  int64_t shape[VQC_DIGEST_MAX_DIMS], strides[VQC_DIGEST_MAX_DIMS];
  int ndim = read_dims(shape_obj, shape, "shape");
  if (ndim < 0) return NULL;
  const int64_t *stride_arg = NULL;
  if (strides_obj != Py_None) {
    if (read_dims(strides_obj, strides, "strides") != ndim) {
      if (!PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError,
                        "strides and shape have different lengths");
      return NULL;
    }
    stride_arg = strides;
  }
  uint64_t digest = 0;
  vqc_status s;
  Py_BEGIN_ALLOW_THREADS
  s = vqc_digest_strided(addr, code, ndim, shape, stride_arg, nthreads,
                         &digest);
  Py_END_ALLOW_THREADS
  return s == VQC_OK ? PyLong_FromUnsignedLongLong(digest) : raise_status(s);
}

/* ---- digest_device(address, code, shape, stream) */

/* The leaves are hashed on the device (kernels/digest.cu) on `stream`, after
 * the work queued there; only they (8 bytes per 64 KiB) come to the host for
 * the root hash. The memory must be contiguous and on the current device. */
static PyObject *py_digest_device(PyObject *self, PyObject *args) {
  PyObject *addr_obj, *code_obj, *shape_obj, *stream_obj;
  if (!PyArg_ParseTuple(args, "OOOO:digest_device", &addr_obj, &code_obj,
                        &shape_obj, &stream_obj))
    return NULL;
  void *addr = PyLong_AsVoidPtr(addr_obj);
  if (addr == NULL && PyErr_Occurred()) return NULL;
  void *stream = PyLong_AsVoidPtr(stream_obj);
  if (stream == NULL && PyErr_Occurred()) return NULL;
  uint8_t code;
  if (read_code(code_obj, &code) < 0) return NULL;
  int64_t shape[VQC_DIGEST_MAX_DIMS];
  int ndim = read_dims(shape_obj, shape, "shape");
  if (ndim < 0) return NULL;
  if (!vqc_gpu_built()) {
    PyErr_SetString(PyExc_RuntimeError,
                    "this vqcheck was built without CUDA: digest a host copy "
                    "(t.cpu()), or rebuild where the CUDA toolkit is "
                    "installed");
    return NULL;
  }
  vqc_digest_type type;
  (void)vqc_digest_type_by_code(code, &type);
  size_t nbytes = type.size;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] < 0) {
      PyErr_Format(PyExc_ValueError, "shape[%d] = %lld is negative", d,
                   (long long)shape[d]);
      return NULL;
    }
    nbytes *= (size_t)shape[d];
  }
  size_t nleaves = nbytes == 0 ? 1 : (nbytes - 1) / VQC_DIGEST_CHUNK + 1;
  uint64_t *leaves = PyMem_RawMalloc(nleaves * sizeof *leaves);
  if (leaves == NULL) return PyErr_NoMemory();
  uint64_t digest = 0;
  vqc_status s;
  Py_BEGIN_ALLOW_THREADS
  s = vqc_gpu_digest_leaves_on(addr, nbytes, leaves, stream);
  if (s == VQC_OK)
    s = vqc_digest_from_leaves(code, ndim, shape, leaves, nleaves, &digest);
  Py_END_ALLOW_THREADS
  PyMem_RawFree(leaves);
  return s == VQC_OK ? PyLong_FromUnsignedLongLong(digest) : raise_status(s);
}

/* ---- the type table and build facts */

static PyObject *py_type_info(PyObject *self, PyObject *arg) {
  const char *name = PyUnicode_AsUTF8(arg);
  if (name == NULL) return NULL;
  vqc_digest_type t;
  if (vqc_digest_type_by_name(name, &t) != VQC_OK) {
    PyErr_SetString(PyExc_ValueError, vqc_last_error());
    return NULL;
  }
  return Py_BuildValue("(ii)", (int)t.code, (int)t.size);
}

static PyObject *py_type_names(PyObject *self, PyObject *unused) {
  PyObject *names = PyList_New(0);
  if (names == NULL) return NULL;
  vqc_digest_type t;
  for (int code = 1; code < 256; code++) {
    if (vqc_digest_type_by_code((uint8_t)code, &t) != VQC_OK) continue;
    PyObject *s = PyUnicode_FromString(t.name);
    if (s == NULL || PyList_Append(names, s) < 0) {
      Py_XDECREF(s);
      Py_DECREF(names);
      return NULL;
    }
    Py_DECREF(s);
  }
  PyObject *tuple = PyList_AsTuple(names);
  Py_DECREF(names);
  return tuple;
}

static PyObject *py_gpu_built(PyObject *self, PyObject *unused) {
  return PyBool_FromLong(vqc_gpu_built());
}

static PyObject *py_cuda_available(PyObject *self, PyObject *unused) {
  return PyBool_FromLong(vqc_cuda_available());
}

static PyObject *py_version(PyObject *self, PyObject *unused) {
  return PyUnicode_FromString(VQC_VERSION_STRING);
}

/* ---- the module */

static PyMethodDef core_methods[] = {
    {"digest_buffer", py_digest_buffer, METH_VARARGS,
     "digest_buffer(obj, code, shape, nthreads) -> int\n"
     "Tensor digest of a buffer-protocol object (shape None: its own shape "
     "and strides)."},
    {"digest_address", py_digest_address, METH_VARARGS,
     "digest_address(address, code, shape, byte_strides, nthreads) -> int\n"
     "Tensor digest of CPU memory at an address the caller keeps alive."},
    {"digest_device", py_digest_device, METH_VARARGS,
     "digest_device(address, code, shape, stream) -> int\n"
     "Tensor digest of contiguous CUDA memory, hashed on the device."},
    {"type_info", py_type_info, METH_O,
     "type_info(name) -> (code, size) of a digest element type."},
    {"type_names", py_type_names, METH_NOARGS,
     "type_names() -> the element type names, in code order."},
    {"gpu_built", py_gpu_built, METH_NOARGS,
     "gpu_built() -> whether the library has its CUDA kernels."},
    {"cuda_available", py_cuda_available, METH_NOARGS,
     "cuda_available() -> whether a CUDA device answers."},
    {"version", py_version, METH_NOARGS, "version() -> libvqcheck's version."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT, "vqcheck._core",
    "libvqcheck's digest for the vqcheck package (use vqcheck.digest).", -1,
    core_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__core(void); /* the one exported symbol */
PyMODINIT_FUNC PyInit__core(void) { return PyModule_Create(&core_module); }
