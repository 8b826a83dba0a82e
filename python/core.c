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
 *   digest_many(items)                           many digest_address items,
 *                                                the GIL released once
 *   digest_start(items, keep) -> Batch           the same items, hashed on
 *                                                vqcheck's digest thread,
 *                                                which never takes the GIL;
 *                                                Batch.done(), .wait(s),
 *                                                .result()
 *   digest_device(address, code, shape, stream)  contiguous CUDA memory, on
 *                                                a cudaStream_t given as int
 *   type_info(name) -> (code, size), type_names() -> tuple of str
 *   gpu_built() -> bool, cuda_available() -> bool, version() -> str
 *   ledger_line(seq, rank, call, t_enter_ns, t_exit_ns, state, status)
 *                                                (call: 11 fields, or 12
 *                                                with any_site last)
 *                                                -> bytes: one ledger line
 *                                                of the bridge's live
 *                                                record, written by the
 *                                                checkers' codec
 *                                                (checkers/ledger_record.h)
 *
 * Every digest runs with the GIL released, so other Python threads (a data
 * loader) go on meanwhile. Errors from the library raise ValueError with its
 * message (MemoryError for VQC_ENOMEM, RuntimeError for device failures). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ledger_record.h" /* checkers/: the ledger line's codec */
#include "live_signal_line.h" /* checkers/: the "signal" line */
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

/* ---- digest_many([(address, code, shape, byte_strides, nthreads), ...]) */

/* One item of digest_many, read while the GIL is held. */
typedef struct many_item {
  void *addr;
  uint8_t code;
  int ndim;
  int has_strides;
  int nthreads;
  int64_t shape[VQC_DIGEST_MAX_DIMS];
  int64_t strides[VQC_DIGEST_MAX_DIMS];
} many_item;

/* Reads item i, a (address, code, shape, byte_strides or None, nthreads)
 * tuple; -1 with an exception set. */
static int read_item(PyObject *obj, Py_ssize_t i, many_item *it) {
  PyObject *addr_obj, *code_obj, *shape_obj, *strides_obj;
  if (!PyTuple_Check(obj) || PyTuple_GET_SIZE(obj) != 5) {
    PyErr_Format(PyExc_TypeError,
                 "digest_many: item %zd is not a tuple (address, code, "
                 "shape, byte_strides, nthreads)", i);
    return -1;
  }
  addr_obj = PyTuple_GET_ITEM(obj, 0);
  code_obj = PyTuple_GET_ITEM(obj, 1);
  shape_obj = PyTuple_GET_ITEM(obj, 2);
  strides_obj = PyTuple_GET_ITEM(obj, 3);
  it->nthreads = PyLong_AsLong(PyTuple_GET_ITEM(obj, 4));
  if (it->nthreads == -1 && PyErr_Occurred()) return -1;
  it->addr = PyLong_AsVoidPtr(addr_obj);
  if (it->addr == NULL && PyErr_Occurred()) return -1;
  if (read_code(code_obj, &it->code) < 0) return -1;
  it->ndim = read_dims(shape_obj, it->shape, "shape");
  if (it->ndim < 0) return -1;
  it->has_strides = strides_obj != Py_None;
  if (it->has_strides &&
      read_dims(strides_obj, it->strides, "strides") != it->ndim) {
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_ValueError,
                   "digest_many: item %zd: strides and shape have different "
                   "lengths", i);
    return -1;
  }
  return 0;
}

/* The digests of many CPU tensors, in item order. Every item is read with
 * the GIL held, then all are hashed with the GIL released once: a thread
 * that hashes a step's state beside the training thread (vqcheck._bridge's
 * helper) takes the GIL twice per step, not twice per tensor. The memory
 * must stay alive and unchanged until the call returns (the caller's
 * contract, as for digest_address). The first failure raises, naming the
 * item's index. */
static PyObject *py_digest_many(PyObject *self, PyObject *items_obj) {
  PyObject *fast = PySequence_Fast(items_obj, "digest_many takes a sequence");
  if (fast == NULL) return NULL;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  /* n + 1: PyMem_RawMalloc(0) may return NULL */
  many_item *items = PyMem_RawMalloc((size_t)(n + 1) * sizeof *items);
  uint64_t *digests = PyMem_RawMalloc((size_t)(n + 1) * sizeof *digests);
  PyObject *result = NULL;
  if (items == NULL || digests == NULL) {
    PyErr_NoMemory();
    goto done;
  }
  for (Py_ssize_t i = 0; i < n; i++)
    if (read_item(PySequence_Fast_GET_ITEM(fast, i), i, &items[i]) < 0)
      goto done;
  vqc_status s = VQC_OK;
  Py_ssize_t failed = -1;
  Py_BEGIN_ALLOW_THREADS
  for (Py_ssize_t i = 0; i < n && s == VQC_OK; i++) {
    const many_item *it = &items[i];
    s = vqc_digest_strided(it->addr, it->code, it->ndim, it->shape,
                           it->has_strides ? it->strides : NULL,
                           it->nthreads, &digests[i]);
    if (s != VQC_OK) failed = i;
  }
  Py_END_ALLOW_THREADS
  if (s != VQC_OK) {
    (void)raise_status(s);
    /* the library's message, prefixed with the item (vqc_last_error is
     * this thread's: the GIL came back on the thread that hashed) */
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *text = value ? PyObject_Str(value) : NULL;
    PyErr_Format(type, "item %zd: %s", failed,
                 text ? PyUnicode_AsUTF8(text) : "digest failed");
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    goto done;
  }
  result = PyList_New(n);
  if (result == NULL) goto done;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *d = PyLong_FromUnsignedLongLong(digests[i]);
    if (d == NULL) {
      Py_CLEAR(result);
      goto done;
    }
    PyList_SET_ITEM(result, i, d);
  }
done:
  PyMem_RawFree(items);
  PyMem_RawFree(digests);
  Py_DECREF(fast);
  return result;
}

/* ---- digest_start(items) -> Batch: the digest thread
 *
 * vqcheck._bridge hashes a step's state while the training thread goes on.
 * A Python thread would have to take the GIL to start each batch, to return
 * from it and to say it is done; on a machine whose cores are all busy the
 * OS may suspend it while it holds the GIL, and the training thread then
 * waits for it for milliseconds. So the batch is read here, on the calling
 * thread (GIL held), and hashed by one pthread of this module that never
 * touches Python and runs only on an otherwise idle core (SCHED_IDLE): the
 * caller polls done() or waits (GIL released; a wait hashes whatever the
 * thread has not started yet itself, so it never waits for a starved
 * thread) and fetches result(). The Batch holds `keep` (the tensors that own the
 * memory) until it is done and dropped, so the memory stays alive; that it
 * stays unchanged until done() is the caller's contract (vqcheck._bridge
 * joins before anything writes it).
 *
 * The thread is made at the first batch, blocks every signal (they are the
 * main thread's), takes batches in order and sleeps between them; it is
 * never joined (exit ends it; a batch in flight is the caller's to wait
 * for first). After fork() the child has no such thread: it makes a new one
 * at its first batch, and a batch the parent had in flight is never done in
 * the child. */

typedef struct batch_job {
  many_item *items;
  Py_ssize_t n;
  uint64_t *digests;
  Py_ssize_t next_item;   /* the next item to hash; under worker.mu */
  int hashing;            /* items being hashed now; under worker.mu */
  vqc_status status;      /* the first failure, VQC_OK if none */
  Py_ssize_t failed;      /* its item */
  char message[1024];     /* its vqc_last_error(), copied on the thread */
  int done;               /* under worker.mu */
  int refs;               /* the Batch object, the queue; under worker.mu */
  pid_t pid;              /* the process that queued it */
  struct batch_job *next; /* the queue */
} batch_job;

static struct {
  pthread_mutex_t mu;
  pthread_cond_t wake;     /* a batch was queued */
  pthread_cond_t finished; /* a batch is done */
  batch_job *head, *tail;
  int running;             /* the thread exists in this process */
} worker = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
            PTHREAD_COND_INITIALIZER, NULL, NULL, 0};

static pthread_once_t worker_once = PTHREAD_ONCE_INIT;

/* finished waits against CLOCK_MONOTONIC: a wall-clock jump must not cut
 * or stretch a deadline. */
static void worker_init(void) {
  pthread_condattr_t attr;
  if (pthread_condattr_init(&attr) == 0) {
    if (pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0) {
      pthread_cond_destroy(&worker.finished);
      pthread_cond_init(&worker.finished, &attr);
    }
    pthread_condattr_destroy(&attr);
  }
}

static void job_free(batch_job *job) {
  free(job->items);
  free(job->digests);
  free(job);
}

/* Drops one holder of job; the last one frees it. worker.mu held. */
static void job_release_locked(batch_job *job) {
  if (--job->refs == 0) job_free(job);
}

/* Hashes job's items not yet taken, one at a time, on the calling thread
 * (worker.mu held on entry and on return, released while hashing; the GIL
 * not held): the digest thread does, and so does a thread that waits for
 * the job (batch_wait), so a join never waits for work nobody is doing.
 * After a failure no further item is taken; the lowest failed item is
 * told. Whoever finishes the last item in flight marks the job done. */
static void hash_items(batch_job *job) {
  while (job->next_item < job->n && job->status == VQC_OK) {
    const Py_ssize_t i = job->next_item++;
    job->hashing++;
    pthread_mutex_unlock(&worker.mu);
    const many_item *it = &job->items[i];
    char message[sizeof job->message] = "";
    vqc_status s = vqc_digest_strided(it->addr, it->code, it->ndim, it->shape,
                                      it->has_strides ? it->strides : NULL,
                                      it->nthreads, &job->digests[i]);
    if (s != VQC_OK) { /* vqc_last_error is this thread's */
      const char *msg = vqc_last_error();
      snprintf(message, sizeof message, "%s",
               msg && msg[0] ? msg : vqc_status_message(s));
    }
    pthread_mutex_lock(&worker.mu);
    job->hashing--;
    if (s != VQC_OK && (job->status == VQC_OK || i < job->failed)) {
      job->status = s;
      job->failed = i;
      memcpy(job->message, message, sizeof message);
    }
  }
  if (!job->done && job->hashing == 0) {
    job->done = 1;
    pthread_cond_broadcast(&worker.finished);
  }
}

static void *worker_main(void *unused) {
  (void)unused;
#ifdef SCHED_IDLE
  /* SCHED_IDLE: the thread runs only on a core nothing else wants, so it
   * takes no time from the training threads (a busy job's ranks fill every
   * core while they compute, and leave gaps while they wait for each
   * other's collectives). It cannot starve a join: a thread that waits for
   * a batch hashes what is left of it itself (batch_wait). Linux: this
   * thread only (and the digest's own threads, which inherit it). */
  struct sched_param idle = {0};
  (void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle);
#endif
  pthread_mutex_lock(&worker.mu);
  for (;;) {
    while (worker.head == NULL) pthread_cond_wait(&worker.wake, &worker.mu);
    batch_job *job = worker.head;
    worker.head = job->next;
    if (worker.head == NULL) worker.tail = NULL;
    hash_items(job);
    job_release_locked(job);
  }
  return NULL;
}

/* fork(): the child has the caller's thread only. The mutex is held across
 * the fork so the child's copy is consistent; the child forgets the queue
 * (the parent's batches; never done there) and the thread. */
static void worker_prepare(void) { pthread_mutex_lock(&worker.mu); }
static void worker_parent(void) { pthread_mutex_unlock(&worker.mu); }
static void worker_child(void) {
  worker.head = worker.tail = NULL;
  worker.running = 0;
  pthread_mutex_unlock(&worker.mu);
}

/* Queues job (worker.mu not held), making the thread if needed. Returns -1
 * with errno's error set if the thread cannot be made. */
static int worker_queue(batch_job *job) {
  static int atfork_done = 0;
  pthread_once(&worker_once, worker_init);
  pthread_mutex_lock(&worker.mu);
  if (!atfork_done) {
    atfork_done = pthread_atfork(worker_prepare, worker_parent,
                                 worker_child) == 0;
  }
  if (!worker.running) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old); /* inherited by the thread */
    pthread_t tid;
    int err = pthread_create(&tid, NULL, worker_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err != 0) {
      pthread_mutex_unlock(&worker.mu);
      errno = err;
      return -1;
    }
    pthread_detach(tid);
    worker.running = 1;
  }
  job->next = NULL;
  if (worker.tail) worker.tail->next = job;
  else worker.head = job;
  worker.tail = job;
  pthread_cond_signal(&worker.wake);
  pthread_mutex_unlock(&worker.mu);
  return 0;
}

typedef struct {
  PyObject_HEAD
  batch_job *job;
  PyObject *keep; /* what holds the memory alive: released once done */
} BatchObject;

static int batch_is_done(batch_job *job) {
  pthread_mutex_lock(&worker.mu);
  int done = job->done;
  pthread_mutex_unlock(&worker.mu);
  return done;
}

/* Waits until job is done or `seconds` pass (< 0: no limit), GIL not held,
 * hashing first what the digest thread has not taken yet (hash_items):
 * only the process that queued job may call it. Returns whether it is
 * done. */
static int batch_wait(batch_job *job, double seconds) {
  struct timespec deadline;
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  if (seconds >= 0) {
    double whole = (double)(time_t)seconds;
    deadline.tv_sec += (time_t)seconds;
    deadline.tv_nsec += (long)((seconds - whole) * 1e9);
    if (deadline.tv_nsec >= 1000000000L) {
      deadline.tv_sec++;
      deadline.tv_nsec -= 1000000000L;
    }
  }
  pthread_mutex_lock(&worker.mu);
  hash_items(job);
  while (!job->done) {
    if (seconds < 0) {
      pthread_cond_wait(&worker.finished, &worker.mu);
    } else if (pthread_cond_timedwait(&worker.finished, &worker.mu,
                                      &deadline) == ETIMEDOUT) {
      break;
    }
  }
  int done = job->done;
  pthread_mutex_unlock(&worker.mu);
  return done;
}

static PyObject *batch_done(BatchObject *self, PyObject *unused) {
  return PyBool_FromLong(batch_is_done(self->job));
}

static PyObject *batch_wait_py(BatchObject *self, PyObject *arg) {
  double seconds = PyFloat_AsDouble(arg);
  if (seconds == -1.0 && PyErr_Occurred()) return NULL;
  if (self->job->pid != getpid()) /* the parent's: never done here */
    Py_RETURN_FALSE;
  int done;
  Py_BEGIN_ALLOW_THREADS
  done = batch_wait(self->job, seconds < 0 ? 0 : seconds);
  Py_END_ALLOW_THREADS
  return PyBool_FromLong(done);
}

static PyObject *batch_result(BatchObject *self, PyObject *unused) {
  batch_job *job = self->job;
  if (!batch_is_done(job)) {
    PyErr_SetString(PyExc_RuntimeError,
                    "digest batch: result() before it is done");
    return NULL;
  }
  if (job->status != VQC_OK) {
    PyObject *type = PyExc_ValueError;
    if (job->status == VQC_ENOMEM) type = PyExc_MemoryError;
    PyErr_Format(type, "item %zd: %s", job->failed, job->message);
    return NULL;
  }
  PyObject *result = PyList_New(job->n);
  if (result == NULL) return NULL;
  for (Py_ssize_t i = 0; i < job->n; i++) {
    PyObject *d = PyLong_FromUnsignedLongLong(job->digests[i]);
    if (d == NULL) {
      Py_DECREF(result);
      return NULL;
    }
    PyList_SET_ITEM(result, i, d);
  }
  return result;
}

/* A Batch dropped before it is done waits for it first, then lets go of
 * `keep`: the thread may still read that memory. (vqcheck._bridge waits
 * itself; this is the backstop, e.g. at interpreter exit, where locals go
 * in no set order.) Not in a forked child, where the parent's batch never
 * ends. */
static void batch_dealloc(BatchObject *self) {
  batch_job *job = self->job;
  if (job != NULL) {
    if (job->pid == getpid() && !batch_is_done(job)) {
      Py_BEGIN_ALLOW_THREADS
      (void)batch_wait(job, -1);
      Py_END_ALLOW_THREADS
    }
    pthread_mutex_lock(&worker.mu);
    if (job->pid == getpid()) job_release_locked(job);
    pthread_mutex_unlock(&worker.mu);
  }
  Py_XDECREF(self->keep); /* the memory may go now */
  PyObject_Del(self);
}

static PyMethodDef batch_methods[] = {
    {"done", (PyCFunction)batch_done, METH_NOARGS,
     "done() -> whether every item is hashed (or one failed)."},
    {"wait", (PyCFunction)batch_wait_py, METH_O,
     "wait(seconds) -> done(), after waiting at most that long (GIL "
     "released)."},
    {"result", (PyCFunction)batch_result, METH_NOARGS,
     "result() -> list of int, in item order; raises the first failure "
     "(\"item <k>: ...\"). Only once done()."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject BatchType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "vqcheck._core.Batch",
    .tp_basicsize = sizeof(BatchObject),
    .tp_dealloc = (destructor)batch_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A digest_start batch, hashed on vqcheck's digest thread.",
    .tp_methods = batch_methods,
};

static PyObject *py_digest_start(PyObject *self, PyObject *args) {
  PyObject *items_obj, *keep;
  if (!PyArg_ParseTuple(args, "OO:digest_start", &items_obj, &keep))
    return NULL;
  PyObject *fast = PySequence_Fast(items_obj, "digest_start takes a sequence");
  if (fast == NULL) return NULL;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  batch_job *job = calloc(1, sizeof *job);
  BatchObject *obj = NULL;
  if (job != NULL) {
    job->items = malloc((size_t)(n + 1) * sizeof *job->items);
    job->digests = calloc((size_t)(n + 1), sizeof *job->digests);
  }
  if (job == NULL || job->items == NULL || job->digests == NULL) {
    PyErr_NoMemory();
    goto fail;
  }
  job->n = n;
  job->failed = -1;
  job->pid = getpid();
  for (Py_ssize_t i = 0; i < n; i++)
    if (read_item(PySequence_Fast_GET_ITEM(fast, i), i, &job->items[i]) < 0)
      goto fail;
  obj = PyObject_New(BatchObject, &BatchType);
  if (obj == NULL) goto fail;
  obj->job = NULL;
  Py_INCREF(keep);
  obj->keep = keep;
  if (n == 0) {
    /* Nothing to hash: done now (a queued empty batch would be done only
     * once the thread got to it, so wait(0) could say "not done"). */
    job->done = 1;
    job->refs = 1; /* obj */
    obj->job = job;
    Py_DECREF(fast);
    return (PyObject *)obj;
  }
  job->refs = 2; /* obj, and the queue until the thread is done with it */
  if (worker_queue(job) < 0) {
    PyErr_SetFromErrno(PyExc_OSError);
    Py_DECREF(obj);
    obj = NULL;
    goto fail;
  }
  obj->job = job;
  Py_DECREF(fast);
  return (PyObject *)obj;
fail:
  if (job) job_free(job);
  Py_DECREF(fast);
  return NULL;
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

/* ---- the ledger line (checkers/ledger_record.h) */

/* A str as UTF-8 bytes, each lone surrogate (a name decoded with
 * "surrogateescape") as '?': what the bridge's json_line wrote. New
 * reference; NULL with an exception set. */
static PyObject *utf8_of(PyObject *o, const char *what) {
  if (!PyUnicode_Check(o)) {
    PyErr_Format(PyExc_TypeError, "ledger_line: %s must be a str", what);
    return NULL;
  }
  return PyUnicode_AsEncodedString(o, "utf-8", "replace");
}

/* An int of C's range; -1 with an exception set otherwise (check
 * PyErr_Occurred). */
static int int_of(PyObject *o) {
  const long v = PyLong_AsLong(o);
  if (v == -1 && PyErr_Occurred()) return -1;
  if (v < INT_MIN || v > INT_MAX) {
    PyErr_SetString(PyExc_OverflowError, "ledger_line: an int field is out "
                    "of range");
    return -1;
  }
  return (int)v;
}

static PyObject *py_ledger_line(PyObject *self, PyObject *args) {
  unsigned long long seq = 0, t_enter = 0, t_exit = 0;
  int rank = 0;
  PyObject *call = NULL, *state_obj = NULL, *status_obj = NULL;
  if (!PyArg_ParseTuple(args, "KiO!KKUU", &seq, &rank, &PyTuple_Type, &call,
                        &t_enter, &t_exit, &state_obj, &status_obj))
    return NULL;
  if (PyTuple_GET_SIZE(call) != 11 && PyTuple_GET_SIZE(call) != 12) {
    PyErr_SetString(PyExc_ValueError, "ledger_line: call must be (op, "
                    "redop, dtype, count, root, group_size, group, "
                    "group_name, file, line, func[, any_site])");
    return NULL;
  }
  vqc_ledger_line l;
  memset(&l, 0, sizeof l);
  l.seq = seq;
  l.rank = rank;
  l.t_enter_ns = t_enter;
  l.t_exit_ns = t_exit;
  const char *state = PyUnicode_AsUTF8(state_obj);
  if (!state) return NULL;
  if (strcmp(state, "entered") == 0) l.state = VQC_REC_ENTERED;
  else if (strcmp(state, "done") == 0) l.state = VQC_REC_DONE;
  else if (strcmp(state, "failed") == 0) l.state = VQC_REC_FAILED;
  else {
    PyErr_Format(PyExc_ValueError, "ledger_line: state '%s' (expected "
                 "entered, done or failed)", state);
    return NULL;
  }
  /* The strings, as bytes kept alive to the end. */
  static const struct {
    int index;
    const char *name;
  } strs[] = {{0, "op"}, {1, "redop"}, {2, "dtype"}, {7, "group_name"},
              {8, "file"}, {10, "func"}};
  PyObject *keep[7] = {NULL};
  const char *text[7] = {NULL};
  PyObject *result = NULL;
  int *group = NULL;
  for (int i = 0; i < 7; i++) {
    PyObject *o = i < 6 ? PyTuple_GET_ITEM(call, strs[i].index) : status_obj;
    keep[i] = utf8_of(o, i < 6 ? strs[i].name : "status");
    if (!keep[i]) goto done;
    text[i] = PyBytes_AS_STRING(keep[i]);
  }
  l.op = text[0];
  l.redop = text[1];
  l.dtype = text[2];
  l.group_name = text[3];
  l.file = text[4];
  l.func = text[5];
  l.status = text[6];
  l.count = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(call, 3));
  l.root = int_of(PyTuple_GET_ITEM(call, 4));
  l.group_size = int_of(PyTuple_GET_ITEM(call, 5));
  l.line = int_of(PyTuple_GET_ITEM(call, 9));
  /* any_site: a collective torch issues itself, paired across ranks by
   * what it moves, not by its function (ledger_record.h). */
  if (PyTuple_GET_SIZE(call) == 12) {
    const int any = PyObject_IsTrue(PyTuple_GET_ITEM(call, 11));
    if (any < 0) goto done;
    l.any_site = any == 1;
  }
  if (PyErr_Occurred()) goto done;
  PyObject *g = PyTuple_GET_ITEM(call, 6);
  if (g != Py_None) {
    PyObject *seq_g = PySequence_Fast(g, "ledger_line: group must be a "
                                      "sequence of ranks or None");
    if (!seq_g) goto done;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq_g);
    group = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *group);
    for (Py_ssize_t i = 0; group && i < n; i++)
      group[i] = int_of(PySequence_Fast_GET_ITEM(seq_g, i));
    Py_DECREF(seq_g);
    if (!group) {
      PyErr_NoMemory();
      goto done;
    }
    if (PyErr_Occurred()) goto done;
    l.has_group = true;
    l.group = group;
    l.ngroup = (int)n;
  }
  /* As the bridge's json.dumps wrote it: \n \t ... as short escapes. */
  char stack[1024];
  size_t len = vqc_ledger_line_format(&l, VQC_LEDGER_PY_ESCAPES, stack,
                                      sizeof stack);
  if (len < sizeof stack) {
    result = PyBytes_FromStringAndSize(stack, (Py_ssize_t)len);
  } else {
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)len);
    if (result)
      vqc_ledger_line_format(&l, VQC_LEDGER_PY_ESCAPES,
                             PyBytes_AS_STRING(result), len + 1);
  }
done:
  PyMem_Free(group);
  for (int i = 0; i < 7; i++) Py_XDECREF(keep[i]);
  return result;
}

/* ---- the module */

/* ---- a rank ended by others (the bridge's live record)
 *
 * A launcher that sees one rank die stops the others with SIGTERM
 * (torch.multiprocessing.spawn, torchrun's agent). Without a word from
 * the process, each such rank's record just stops, like the one that died
 * first, and the report cannot tell the culprit from its victims. So the
 * bridge (vqcheck/_bridge/_records.py) asks, where the program leaves
 * SIGTERM to its default, for one line in the live record when it comes,
 * the one vqcheck's own ranks write (checkers/live_signal_line.h, read
 * back as "ended by others"):
 *   {"event":"signal","signal":15,"t_ns":N,"from_pid":P}
 * and then the default action, as before: SA_RESETHAND puts SIG_DFL back,
 * and the signal raised again in the handler (blocked there) ends the
 * process when the handler returns. Async-signal-safe: a write(2) on a
 * descriptor of our own (a close-on-exec duplicate: the program's files
 * are never written), clock_gettime and getpid. A child forked after the
 * call (a DataLoader worker) inherits the handler but writes nothing: the
 * line is the installing process's only. */
static int term_fd = -1;
static pid_t term_pid;

static void on_term(int sig, siginfo_t *si, void *ctx) {
  (void)ctx;
  const int saved = errno;
  if (term_fd >= 0 && getpid() == term_pid) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* time.monotonic_ns()'s clock */
    char line[VQC_LIVE_SIGNAL_LINE_MAX];
    const size_t k = vqc_live_signal_line(
        line, sig, (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec,
        si ? (long)si->si_pid : 0);
    ssize_t w = write(term_fd, line, k);
    (void)w;
  }
  errno = saved;
  raise(sig); /* SIG_DFL again (SA_RESETHAND): ends us on return */
}

static PyObject *py_note_termination(PyObject *self, PyObject *arg) {
  (void)self;
  const long fd = PyLong_AsLong(arg);
  if (fd == -1 && PyErr_Occurred()) return NULL;
  if (fd < 0 || fd > INT_MAX) {
    PyErr_SetString(PyExc_ValueError, "a file descriptor >= 0");
    return NULL;
  }
  struct sigaction old;
  if (sigaction(SIGTERM, NULL, &old) != 0 ||
      (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
    Py_RETURN_FALSE; /* the program's own handler: left as it is */
  const int mine = term_fd >= 0 ? term_fd : fcntl((int)fd, F_DUPFD_CLOEXEC, 3);
  if (mine < 0) return PyErr_SetFromErrno(PyExc_OSError);
  term_fd = mine;
  term_pid = getpid();
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_term;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGTERM, &sa, NULL) != 0)
    return PyErr_SetFromErrno(PyExc_OSError);
  Py_RETURN_TRUE;
}

static PyMethodDef core_methods[] = {
    {"digest_buffer", py_digest_buffer, METH_VARARGS,
     "digest_buffer(obj, code, shape, nthreads) -> int\n"
     "Tensor digest of a buffer-protocol object (shape None: its own shape "
     "and strides)."},
    {"digest_address", py_digest_address, METH_VARARGS,
     "digest_address(address, code, shape, byte_strides, nthreads) -> int\n"
     "Tensor digest of CPU memory at an address the caller keeps alive."},
    {"digest_many", py_digest_many, METH_O,
     "digest_many(items) -> list of int\n"
     "digest_address of each (address, code, shape, byte_strides, nthreads) "
     "item, hashed in order with the GIL released once."},
    {"digest_start", py_digest_start, METH_VARARGS,
     "digest_start(items, keep) -> Batch\n"
     "The digest_many items, hashed on vqcheck's digest thread (no GIL). "
     "The Batch holds `keep` (what keeps the memory alive) until it is "
     "done and dropped; the memory must not change until Batch.done()."},
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
    {"ledger_line", py_ledger_line, METH_VARARGS,
     "ledger_line(seq, rank, call, t_enter_ns, t_exit_ns, state, status) -> "
     "bytes\n"
     "One ledger line (checkers/ledger_record.h), newline included. call: "
     "(op, redop, dtype, count, root, group_size, group (world ranks, or "
     "None), group_name, file, line, func); state: entered, done or "
     "failed; status: its text."},
    {"note_termination", py_note_termination, METH_O,
     "note_termination(fd) -> bool\n"
     "Where SIGTERM has its default action: one {\"event\":\"signal\"} "
     "line into fd (a duplicate of it) when SIGTERM comes, then the default "
     "action. False (nothing done) when the program handles SIGTERM."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT, "vqcheck._core",
    "libvqcheck's digest for the vqcheck package (use vqcheck.digest).", -1,
    core_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__core(void); /* the one exported symbol */
PyMODINIT_FUNC PyInit__core(void) {
  if (PyType_Ready(&BatchType) < 0) return NULL;
  PyObject *m = PyModule_Create(&core_module);
  if (m == NULL) return NULL;
  Py_INCREF(&BatchType);
  if (PyModule_AddObject(m, "Batch", (PyObject *)&BatchType) < 0) {
    Py_DECREF(&BatchType);
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
