/* comm_nccl.c: the `nccl` comm backend (one process per rank under mpiexec,
 * data collectives on device buffers through NCCL). Compiled only with
 * VQC_WITH_NCCL (lib/CMakeLists.txt globs lib/src/nccl/).
 *
 * A world is an mpi comm (vqc_mpi_comm_create: MPI_Init, duplicated
 * communicators) plus an NCCL communicator over the same ranks. MPI does
 * two jobs: rank 0's ncclUniqueId reaches the others over the MPI side
 * channel, and that side channel stays this comm's side channel, so
 * checkers exchange digests over MPI whatever NCCL does. comm.c writes the
 * ledger and raises the events, as for every backend; this file only moves
 * data and keeps the deadline.
 *
 * Deadlines. NCCL has no collective with a timeout, and its blocking
 * communicators can block inside a call (connection setup waits for the
 * peers). So the communicator is created NON-blocking (config.blocking = 0):
 * every call returns at once (ncclSuccess or ncclInProgress), its kernels go
 * on the comm's own stream, and completion is polled: ncclCommGetAsyncError
 * (still ncclInProgress while NCCL enqueues; any other error is fatal) and
 * then cudaStreamQuery (done when the stream is idle), spinning, then
 * yielding, then napping as the mpi backend does. When the comm's deadline
 * passes, or vqc_comm_abort was called, the NCCL communicator is aborted
 * (ncclCommAbort: its kernels stop, its resources go) and the call returns
 * VQC_ETIMEOUT (VQC_EABORTED); every later call returns VQC_EABORTED with
 * the reason. A hung collective thus ends in a ledger record FAILED with
 * VQC_ETIMEOUT, which the collective checker turns into a deadlock finding
 * and a non-zero exit, never in a hang. vqc_comm_abort (any thread) only
 * sets a flag; the rank's own thread, which owns the NCCL communicator,
 * does the abort.
 *
 * Stream order (the policy of vqc/gpu_base.h "Streams"). The comm's stream is
 * non-blocking, so it does not wait for the legacy default stream, where
 * vqcheck's memsets, copies and kernels run and may still be running when
 * a collective is called (a memset or a device-to-device copy returns once
 * queued). begin() records an event on the legacy stream and makes the
 * comm's stream wait for it before any NCCL call, so a collective reads
 * what every earlier producer wrote. A call returns after its collective
 * finished (polled), so later work on any stream sees its results.
 *
 * Float sums in rank order. NCCL adds ranks in an order that depends on
 * its algorithm and the topology; the threads backend adds them in rank
 * order (comm.h). A SUM of F32 or F64 over two or more ranks is therefore
 * an ncclAllGather of the blocks into the comm's gather buffer and
 * vqc_gpu_sum_in_rank_order_async (kernels/rank_sum.cu) on the same
 * stream, in chunks of at most GATHER_BUDGET bytes of gathered data: the
 * bits equal a threads or mpi run's on the same inputs, at the cost of
 * moving (P - 1) * n elements per rank instead of about 2 (P - 1) / P * n.
 * Integer sums, MIN and MAX are exact in any order and stay ncclAllReduce.
 *
 * Start-up and failure. NCCL connects peers lazily, at the first
 * collective that needs a connection, so the first collective of a fresh
 * communicator can take seconds. The communicator is warmed up at creation
 * (a small and a large all_reduce, an all_gather, a broadcast: the paths
 * the backend uses) under the creation timeout, outside any caller's
 * deadline, so a short --timeout does not abort a healthy comm on its first
 * collective. Every wait (init, warm-up, collectives, finalize) honours
 * vqc_comm_abort on the comm and vqc_nccl_interrupt for the process. After
 * a collective failed (deadline, abort, NCCL or CUDA error) its receive
 * buffer is undefined: it is overwritten with 0xFF bytes (NaN in every
 * float, -1 in every integer) where the device still allows it, so nothing
 * reads a half-reduced buffer as a result.
 *
 * Every NCCL call goes through NCCL_CALL and every CUDA call through
 * CUDA_CALL (the library's one CUDA check, core/cuda/cuda_check.h): a
 * failure is VQC_ECOMM / VQC_ECUDA (VQC_ENODEVICE when CUDA says there is
 * no usable device) recorded with file:line, the rank, the call and the
 * library's error string (NCCL's last error message too).
 *
 * Not thread-safe across calls on one comm (one rank thread drives it). */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_internal.h"
#include "comm/mpi/mpi_common.h"
#include "core/cuda/cuda_check.h"
#include "vqc/comm.h"
#include "vqc/gpu_base.h"
#include "vqc/tensor.h"

/* Gathered bytes per chunk of a rank-ordered float sum: bounds the gather
 * buffer a comm keeps (64 MiB), whatever the count and the number of
 * ranks. */
#define GATHER_BUDGET ((size_t)64 << 20)
/* Elements of the warm-up's large all_reduce (4 MiB of floats): large
 * enough for NCCL to pick its bandwidth protocol, not only the
 * low-latency one. */
#define WARMUP_COUNT ((size_t)1 << 20)

/* ---- state */

typedef struct nccl_world {
  vqc_comm data;       /* returned to the caller; data.side = mpi's side */
  vqc_comm *mpi;       /* the mpi comm underneath (owned) */
  ncclComm_t nccl;     /* NULL once aborted or destroyed */
  cudaStream_t stream; /* every NCCL call of this comm runs here (owned) */
  cudaEvent_t produced; /* recorded on the legacy stream by begin() (owned) */
  int32_t *scratch;    /* one device int for the barrier (owned) */
  void *gather;        /* rank-ordered sums' gather buffer (owned; grows) */
  size_t gather_cap;   /* its bytes */
  int device;          /* the CUDA device of this rank */
  int abort_flag;      /* set by ops->abort (any thread); __atomic */
  char dead[256];      /* why the communicator was aborted; "" while alive */
} nccl_world;

/* Set by vqc_nccl_interrupt (any thread, or a signal handler): every wait
 * of every nccl comm of the process gives up, creation included. */
static volatile sig_atomic_t interrupted;

void vqc_nccl_interrupt(void) { interrupted = 1; }
void vqc_nccl_interrupt_clear(void) { interrupted = 0; }

/* ---- error checking */

static vqc_status nccl_check(ncclResult_t r, const nccl_world *w, int rank,
                             const char *file, int line, const char *call) {
  if (r == ncclSuccess || r == ncclInProgress) return VQC_OK;
  const char *last = w && w->nccl ? ncclGetLastError(w->nccl) : "";
  return vqc_error_at(VQC_ECOMM, file, line, "rank %d: %s failed: %s (%s)",
                      rank, call, ncclGetErrorString(r), last ? last : "");
}
#define NCCL_CALL(w, rank, call) \
  nccl_check((call), (w), (rank), __FILE__, __LINE__, #call)

#define CUDA_CALL(rank, call) \
  vqc_cuda_checkf_at((call), __FILE__, __LINE__, "rank %d: %s", (rank), #call)

/* ---- waiting against the deadline (pacing shared with comm_mpi.c:
 * mpi/mpi_common.h) */

/* Aborts the NCCL communicator (its kernels exit, the stream drains) and
 * remembers why; later calls return VQC_EABORTED with the reason. */
static void give_up(nccl_world *w, const char *why) {
  if (w->nccl) {
    /* Unchecked on purpose: the caller is about to record the reason the
     * comm was given up, which matters more than a failed abort. */
    (void)ncclCommAbort(w->nccl);
    w->nccl = NULL;
  }
  snprintf(w->dead, sizeof w->dead, "%s", why);
}

/* Why a wait should stop now: "" to go on. */
static const char *stop_reason(const nccl_world *w) {
  if (interrupted) return "vqc_nccl_interrupt";
  if (__atomic_load_n(&w->abort_flag, __ATOMIC_ACQUIRE))
    return "vqc_comm_abort";
  return "";
}

/* After a failed collective: recv (bytes) is undefined, so it is made
 * plainly wrong (0xFF bytes: NaN floats, -1 integers) on the comm's
 * stream, behind whatever NCCL left there (aborted kernels exit), and
 * waited for at most a few seconds. Best effort: a device that no longer
 * answers leaves it as it is, and the caller has the error anyway. */
static void poison_recv(nccl_world *w, void *recv, size_t bytes) {
  if (recv == NULL || bytes == 0) return;
  if (cudaMemsetAsync(recv, 0xFF, bytes, w->stream) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  uint64_t start = vqc_now_ns(), limit = start + (uint64_t)5e9;
  while (cudaStreamQuery(w->stream) == cudaErrorNotReady &&
         vqc_now_ns() < limit)
    vqc_poll_pause(vqc_now_ns() - start);
  (void)cudaGetLastError();
}

/* Polls until the NCCL calls issued on w's stream have been enqueued
 * (enqueue_only) or have finished, against `deadline`. `what` names the
 * collective for messages. On failure the communicator is given up and
 * recv (bytes; may be NULL) poisoned. A non-blocking communicator may
 * answer a call with ncclInProgress while it enqueues: no other NCCL call
 * and no kernel meant to follow it on the stream may be issued before the
 * enqueue is over, hence enqueue_only between the steps of one collective. */
static vqc_status wait_on(vqc_comm *c, uint64_t deadline, const char *what,
                          bool enqueue_only, void *recv, size_t bytes) {
  nccl_world *w = c->impl;
  uint64_t start = vqc_now_ns();
  vqc_status s = VQC_OK;
  for (;;) {
    ncclResult_t async = ncclSuccess;
    if ((s = NCCL_CALL(w, c->rank, ncclCommGetAsyncError(w->nccl, &async))))
      break;
    if (async != ncclSuccess && async != ncclInProgress) {
      s = NCCL_CALL(w, c->rank, async);
      give_up(w, "an asynchronous NCCL error");
      break;
    }
    if (async == ncclSuccess) {
      if (enqueue_only) return VQC_OK;
      cudaError_t e = cudaStreamQuery(w->stream);
      if (e == cudaSuccess) return VQC_OK;
      if (e != cudaErrorNotReady) {
        s = CUDA_CALL(c->rank, e);
        give_up(w, "a CUDA error on the NCCL stream");
        break;
      }
    }
    const char *stop = stop_reason(w);
    if (*stop) {
      give_up(w, stop);
      s = vqc_error(VQC_EABORTED, "rank %d: %s: the comm was aborted (%s)",
                    c->rank, what, stop);
      break;
    }
    uint64_t now = vqc_now_ns();
    if (now > deadline) {
      char why[160];
      snprintf(why, sizeof why, "%s timed out after %.3g s", what,
               c->timeout_s);
      give_up(w, why);
      s = vqc_error(VQC_ETIMEOUT,
                    "rank %d: %s did not complete within %.3g s (did every "
                    "rank enter it?); the NCCL communicator was aborted",
                    c->rank, what, c->timeout_s);
      break;
    }
    vqc_poll_pause(now - start);
  }
  /* The first error stays the one reported (vqc_error keeps the last). */
  char msg[512];
  snprintf(msg, sizeof msg, "%s", vqc_last_error());
  poison_recv(w, recv, bytes);
  return vqc_error(s, "%s", msg);
}

static vqc_status wait_done(vqc_comm *c, uint64_t deadline, const char *what,
                            void *recv, size_t bytes) {
  return wait_on(c, deadline, what, false, recv, bytes);
}

/* Every collective starts here: refuses on an aborted comm, makes this
 * rank's device current, orders the comm's stream after everything queued
 * on the legacy default stream so far (see the top), and returns the
 * deadline. */
static vqc_status begin(vqc_comm *c, const char *what, uint64_t *deadline) {
  nccl_world *w = c->impl;
  const char *stop = stop_reason(w);
  if (*stop && w->nccl) give_up(w, stop);
  if (w->nccl == NULL)
    return vqc_error(VQC_EABORTED,
                     "rank %d: %s: the NCCL communicator was aborted (%s)",
                     c->rank, what, w->dead[0] ? w->dead : "destroyed");
  VQC_TRY(CUDA_CALL(c->rank, cudaSetDevice(w->device)));
  VQC_TRY(CUDA_CALL(c->rank, cudaEventRecord(w->produced, cudaStreamLegacy)));
  VQC_TRY(CUDA_CALL(c->rank, cudaStreamWaitEvent(w->stream, w->produced, 0)));
  *deadline = vqc_comm_deadline_ns(c);
  return VQC_OK;
}

/* ---- argument conversion and checks */

static ncclDataType_t nccl_dtype(vqc_dtype dt) {
  switch (dt) {
    case VQC_F32: return ncclFloat32;
    case VQC_F64: return ncclFloat64;
    case VQC_I32: return ncclInt32;
    case VQC_I64: return ncclInt64;
    case VQC_U8: return ncclUint8;
    default: return ncclFloat32; /* validated by comm.c: unreachable */
  }
}

static ncclRedOp_t nccl_op(vqc_redop op) {
  switch (op) {
    case VQC_SUM: return ncclSum;
    case VQC_MIN: return ncclMin;
    case VQC_MAX: return ncclMax;
    default: return ncclSum; /* validated by comm.c: unreachable */
  }
}

/* NCCL moves device memory: a host pointer is a usage error, said plainly
 * here rather than as NCCL's "invalid usage". */
static vqc_status check_device_ptr(const vqc_comm *c, const void *p,
                                   size_t nbytes, const char *what,
                                   const char *which) {
  char fn[64]; /* "rank R: all_reduce", the message's subject */
  snprintf(fn, sizeof fn, "rank %d: %s", c->rank, what);
  return vqc_gpu_check_device_buffer(fn, which, p, nbytes);
}

/* ---- the ops */

/* The gather buffer holds at least `bytes` (grown, never shrunk; freed
 * with the comm). */
static vqc_status reserve_gather(vqc_comm *c, size_t bytes) {
  nccl_world *w = c->impl;
  if (bytes <= w->gather_cap) return VQC_OK;
  if (w->gather) {
    /* Earlier users of the buffer finished: every collective waits. */
    (void)CUDA_CALL(c->rank, cudaFree(w->gather));
    w->gather = NULL;
    w->gather_cap = 0;
  }
  VQC_TRY(CUDA_CALL(c->rank, cudaMalloc(&w->gather, bytes)));
  w->gather_cap = bytes;
  return VQC_OK;
}

/* SUM of floats in rank order: chunk by chunk, all_gather the ranks'
 * blocks, then add them in rank order into recv (see the top). send may
 * equal recv: chunk k's gather reads send before its sum writes recv. */
static vqc_status rank_ordered_sum(vqc_comm *c, const void *send, void *recv,
                                   size_t count, vqc_dtype dt,
                                   uint64_t deadline) {
  nccl_world *w = c->impl;
  const char *what = "all_reduce";
  const size_t esz = vqc_dtype_size(dt), P = (size_t)c->size;
  size_t chunk = GATHER_BUDGET / (P * esz);
  if (chunk == 0) chunk = 1;
  if (chunk > count) chunk = count;
  vqc_status s = reserve_gather(c, chunk * P * esz);
  for (size_t at = 0; s == VQC_OK && at < count; at += chunk) {
    const size_t n = count - at < chunk ? count - at : chunk;
    s = NCCL_CALL(w, c->rank,
                  ncclAllGather((const char *)send + at * esz, w->gather, n,
                                nccl_dtype(dt), w->nccl, w->stream));
    if (s == VQC_OK)
      s = wait_on(c, deadline, what, true, recv, count * esz);
    if (s == VQC_OK)
      s = vqc_gpu_sum_in_rank_order_async(w->gather, c->size, n, dt,
                                          (char *)recv + at * esz, w->stream);
  }
  if (s != VQC_OK) return s;
  return wait_done(c, deadline, what, recv, count * esz);
}

static vqc_status nccl_all_reduce(vqc_comm *c, const void *send, void *recv,
                                  size_t count, vqc_dtype dt, vqc_redop op) {
  nccl_world *w = c->impl;
  const char *what = "all_reduce";
  size_t bytes = count * vqc_dtype_size(dt);
  uint64_t deadline = 0;
  if (send != recv && vqc_ranges_overlap(send, bytes, recv, bytes))
    return vqc_error(VQC_EINVAL, "rank %d: %s: send and recv overlap without "
                     "being the same buffer", c->rank, what);
  VQC_TRY(check_device_ptr(c, send, bytes, what, "send"));
  VQC_TRY(check_device_ptr(c, recv, bytes, what, "recv"));
  VQC_TRY(begin(c, what, &deadline));
  if (op == VQC_SUM && (dt == VQC_F32 || dt == VQC_F64) && c->size > 1 &&
      count > 0)
    return rank_ordered_sum(c, send, recv, count, dt, deadline);
  VQC_TRY(NCCL_CALL(w, c->rank,
                    ncclAllReduce(send, recv, count, nccl_dtype(dt),
                                  nccl_op(op), w->nccl, w->stream)));
  return wait_done(c, deadline, what, recv, bytes);
}

static vqc_status nccl_all_gather(vqc_comm *c, const void *send, void *recv,
                                  size_t count, vqc_dtype dt) {
  nccl_world *w = c->impl;
  const char *what = "all_gather";
  size_t block = count * vqc_dtype_size(dt);
  char *mine = (char *)recv + (size_t)c->rank * block;
  uint64_t deadline = 0;
  VQC_TRY(check_device_ptr(c, send, block, what, "send"));
  VQC_TRY(check_device_ptr(c, recv, block * (size_t)c->size, what, "recv"));
  /* In place is NCCL's send == recv + rank * count. send == recv (the mpi
   * backend's in-place form) moves this rank's block there first; other
   * overlaps are refused. */
  bool move_first = false;
  if (vqc_ranges_overlap(send, block, recv, block * (size_t)c->size) &&
      send != mine) {
    if (send != recv)
      return vqc_error(VQC_EINVAL, "rank %d: %s: send overlaps recv but is "
                       "neither recv nor this rank's block of it", c->rank,
                       what);
    move_first = true;
  }
  VQC_TRY(begin(c, what, &deadline));
  if (move_first) {
    VQC_TRY(CUDA_CALL(c->rank, cudaMemcpyAsync(mine, send, block,
                                               cudaMemcpyDeviceToDevice,
                                               w->stream)));
    send = mine;
  }
  VQC_TRY(NCCL_CALL(w, c->rank,
                    ncclAllGather(send, recv, count, nccl_dtype(dt), w->nccl,
                                  w->stream)));
  return wait_done(c, deadline, what, recv, block * (size_t)c->size);
}

/* Variable counts as one broadcast per rank in a group (NCCL has no
 * all_gatherv): rank r's block goes to every rank's recv at its
 * displacement. counts are the same on every rank (comm.c's contract), so
 * every rank issues the same broadcasts. */
static vqc_status nccl_all_gatherv(vqc_comm *c, const void *send,
                                   size_t sendcount, void *recv,
                                   const size_t *counts, vqc_dtype dt) {
  nccl_world *w = c->impl;
  const char *what = "all_gatherv";
  size_t esize = vqc_dtype_size(dt), total = 0, mine_at = 0;
  for (int r = 0; r < c->size; r++) {
    if (r == c->rank) mine_at = total;
    total += counts[r];
  }
  char *mine = (char *)recv + mine_at * esize;
  uint64_t deadline = 0;
  VQC_TRY(check_device_ptr(c, send, sendcount * esize, what, "send"));
  VQC_TRY(check_device_ptr(c, recv, total * esize, what, "recv"));
  if (vqc_ranges_overlap(send, sendcount * esize, recv, total * esize) &&
      send != mine)
    return vqc_error(VQC_EINVAL, "rank %d: %s: send overlaps recv but is not "
                     "this rank's block of it", c->rank, what);
  VQC_TRY(begin(c, what, &deadline));
  VQC_TRY(NCCL_CALL(w, c->rank, ncclGroupStart()));
  vqc_status s = VQC_OK;
  size_t at = 0;
  for (int r = 0; r < c->size && s == VQC_OK; r++) {
    if (counts[r] > 0)
      s = NCCL_CALL(w, c->rank,
                    ncclBroadcast(r == c->rank ? send : (const void *)NULL,
                                  (char *)recv + at * esize, counts[r],
                                  nccl_dtype(dt), r, w->nccl, w->stream));
    at += counts[r];
  }
  /* The group is closed whatever happened, or NCCL stays in group mode. */
  vqc_status end = NCCL_CALL(w, c->rank, ncclGroupEnd());
  if (s != VQC_OK) return s;
  VQC_TRY(end);
  return wait_done(c, deadline, what, recv, total * esize);
}

static vqc_status nccl_broadcast(vqc_comm *c, void *buf, size_t count,
                                 vqc_dtype dt, int root) {
  nccl_world *w = c->impl;
  const char *what = "broadcast";
  uint64_t deadline = 0;
  VQC_TRY(check_device_ptr(c, buf, count * vqc_dtype_size(dt), what, "buf"));
  VQC_TRY(begin(c, what, &deadline));
  VQC_TRY(NCCL_CALL(w, c->rank,
                    ncclBroadcast(buf, buf, count, nccl_dtype(dt), root,
                                  w->nccl, w->stream)));
  /* The root's buffer is its input, intact whatever happened. */
  return wait_done(c, deadline, what, c->rank == root ? NULL : buf,
                   count * vqc_dtype_size(dt));
}

/* NCCL has no barrier: a one-element all_reduce on the comm's scratch. */
static vqc_status nccl_barrier(vqc_comm *c) {
  nccl_world *w = c->impl;
  uint64_t deadline = 0;
  VQC_TRY(begin(c, "barrier", &deadline));
  VQC_TRY(NCCL_CALL(w, c->rank,
                    ncclAllReduce(w->scratch, w->scratch, 1, ncclInt32,
                                  ncclSum, w->nccl, w->stream)));
  return wait_done(c, deadline, "barrier", NULL, 0);
}

/* Any thread: the rank's own thread aborts the NCCL communicator at its next
 * poll or call (see the top). */
static void nccl_abort(vqc_comm *c) {
  nccl_world *w = c->impl;
  __atomic_store_n(&w->abort_flag, 1, __ATOMIC_RELEASE);
}

static const vqc_comm_ops nccl_ops = {
    .all_reduce = nccl_all_reduce,
    .all_gather = nccl_all_gather,
    .all_gatherv = nccl_all_gatherv,
    .broadcast = nccl_broadcast,
    .barrier = nccl_barrier,
    .abort = nccl_abort,
};

/* ---- create / destroy */

/* This process's rank among the ranks of its node, from the launcher's
 * environment; -1 when no launcher says. */
static int node_local_rank(void) {
  const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                        "MPI_LOCALRANKID", "PMI_LOCAL_RANK"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (v && *v) return atoi(v);
  }
  return -1;
}

/* The unique id as rank 0 sends it: a flag first, so that a rank 0 that
 * could not make an id still takes part in the broadcast and every rank
 * fails together instead of waiting for an id that never comes. */
typedef struct id_msg {
  int32_t ok;
  ncclUniqueId id;
} id_msg;

/* Polls a non-blocking NCCL communicator until its pending operation (init
 * or finalize) is done, within `seconds`; vqc_comm_abort (finalize) and
 * vqc_nccl_interrupt (both) cut it short with VQC_EABORTED. The caller
 * gives the communicator up on failure. */
static vqc_status wait_comm_ready(nccl_world *w, int rank, double seconds,
                                  const char *what) {
  uint64_t start = vqc_now_ns();
  uint64_t deadline = start + (uint64_t)(seconds * 1e9);
  for (;;) {
    ncclResult_t async = ncclSuccess;
    VQC_TRY(NCCL_CALL(w, rank, ncclCommGetAsyncError(w->nccl, &async)));
    if (async == ncclSuccess) return VQC_OK;
    if (async != ncclInProgress) return NCCL_CALL(w, rank, async);
    const char *stop = stop_reason(w);
    if (*stop)
      return vqc_error(VQC_EABORTED, "rank %d: %s was cut short (%s)", rank,
                       what, stop);
    uint64_t now = vqc_now_ns();
    if (now > deadline)
      return vqc_error(VQC_ETIMEOUT, "rank %d: %s did not finish within %.3g "
                       "s (did every rank call it?)", rank, what, seconds);
    vqc_poll_pause(now - start);
  }
}

/* Runs the collectives this backend uses once, on a scratch buffer, under
 * the comm's current (creation) timeout, so that NCCL's lazy connection
 * set-up and the first launch of each kernel happen here and not inside a
 * caller's first deadline (see the top). Not in the ledger: comm.c is not
 * involved. */
static vqc_status warm_up(vqc_comm *c) {
  nccl_world *w = c->impl;
  const char *what = "the warm-up collectives at creation";
  const size_t n = WARMUP_COUNT, block = n / (size_t)c->size;
  float *buf = NULL; /* (n) floats, freed below */
  uint64_t deadline = 0;
  VQC_TRY(begin(c, what, &deadline));
  VQC_TRY(CUDA_CALL(c->rank, cudaMalloc((void **)&buf, n * sizeof *buf)));
  vqc_status s =
      CUDA_CALL(c->rank, cudaMemsetAsync(buf, 0, n * sizeof *buf, w->stream));
  if (s == VQC_OK)
    s = NCCL_CALL(w, c->rank, ncclAllReduce(w->scratch, w->scratch, 1,
                                            ncclInt32, ncclSum, w->nccl,
                                            w->stream));
  if (s == VQC_OK) s = wait_on(c, deadline, what, true, NULL, 0);
  if (s == VQC_OK)
    s = NCCL_CALL(w, c->rank, ncclAllReduce(buf, buf, n, ncclFloat32,
                                            ncclMax, w->nccl, w->stream));
  if (s == VQC_OK) s = wait_on(c, deadline, what, true, NULL, 0);
  if (s == VQC_OK && block > 0)
    s = NCCL_CALL(w, c->rank,
                  ncclAllGather(buf + (size_t)c->rank * block, buf, block,
                                ncclFloat32, w->nccl, w->stream));
  if (s == VQC_OK) s = wait_on(c, deadline, what, true, NULL, 0);
  if (s == VQC_OK)
    s = NCCL_CALL(w, c->rank, ncclBroadcast(buf, buf, n, ncclFloat32, 0,
                                            w->nccl, w->stream));
  if (s == VQC_OK) s = wait_done(c, deadline, what, NULL, 0);
  if (s == VQC_OK && c->size > 1)
    s = rank_ordered_sum(c, buf, buf, n, VQC_F32, deadline);
  (void)CUDA_CALL(c->rank, cudaFree(buf));
  return s;
}

vqc_status vqc_nccl_comm_create(int *argc, char ***argv, vqc_comm **out) {
  if (!out) return vqc_error(VQC_EINVAL, "vqc_nccl_comm_create: out is NULL");
  *out = NULL;
  if (!vqc_cuda_available())
    return vqc_error(VQC_ENODEVICE, "the nccl backend needs a CUDA device "
                     "and none answers here (use the mpi backend)");

  nccl_world *w = calloc(1, sizeof *w);
  if (!w) return vqc_error(VQC_ENOMEM, "cannot allocate an nccl comm");
  vqc_status s = vqc_mpi_comm_create(argc, argv, &w->mpi);
  if (s != VQC_OK) {
    free(w);
    return s;
  }
  int rank = vqc_comm_rank(w->mpi), size = vqc_comm_size(w->mpi);
  vqc_comm *side = vqc_comm_side(w->mpi);

  /* One GPU per rank of the node. */
  int ndev = 0;
  s = CUDA_CALL(rank, cudaGetDeviceCount(&ndev));
  if (s == VQC_OK) {
    int local = node_local_rank();
    w->device = (local >= 0 ? local : rank) % (ndev > 0 ? ndev : 1);
    s = CUDA_CALL(rank, cudaSetDevice(w->device));
  }

  /* Rank 0's id to every rank over the MPI side channel. Every rank takes
   * part in the broadcast even if its own steps failed, so none waits. */
  id_msg msg;
  memset(&msg, 0, sizeof msg);
  if (rank == 0 && s == VQC_OK) {
    s = NCCL_CALL(NULL, rank, ncclGetUniqueId(&msg.id));
    msg.ok = s == VQC_OK;
  }
  vqc_status bs = vqc_broadcast(side, &msg, sizeof msg, VQC_U8, 0);
  if (s == VQC_OK) s = bs;
  if (s == VQC_OK && !msg.ok)
    s = vqc_error(VQC_ECOMM, "rank %d: rank 0 could not create the NCCL "
                  "unique id (see rank 0's error)", rank);

  if (s == VQC_OK)
    s = CUDA_CALL(rank, cudaStreamCreateWithFlags(&w->stream,
                                                  cudaStreamNonBlocking));
  if (s == VQC_OK)
    s = CUDA_CALL(rank, cudaEventCreateWithFlags(&w->produced,
                                                 cudaEventDisableTiming));
  if (s == VQC_OK)
    s = CUDA_CALL(rank, cudaMalloc((void **)&w->scratch, sizeof(int32_t)));
  if (s == VQC_OK)
    s = CUDA_CALL(rank, cudaMemset(w->scratch, 0, sizeof(int32_t)));
  if (s == VQC_OK) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0; /* every call returns; we poll (see the top) */
    s = NCCL_CALL(NULL, rank,
                  ncclCommInitRankConfig(&w->nccl, size, msg.id, rank,
                                         &config));
    if (s != VQC_OK) w->nccl = NULL;
  }
  if (s == VQC_OK)
    s = wait_comm_ready(w, rank, VQC_COMM_DEFAULT_TIMEOUT_S,
                        "ncclCommInitRankConfig");
  if (s == VQC_OK)
    s = vqc_comm_init_common(&w->data, &nccl_ops, VQC_BACKEND_NCCL, rank,
                             size, w, false);
  if (s == VQC_OK) s = warm_up(&w->data);
  if (s != VQC_OK) {
    /* The first error stays the one reported: vqc_error keeps only the
     * last message, so it is saved and restored around the clean-up. */
    char why[512];
    snprintf(why, sizeof why, "%s", vqc_last_error());
    if (w->nccl) give_up(w, "creation failed");
    if (w->scratch) (void)CUDA_CALL(rank, cudaFree(w->scratch));
    if (w->gather) (void)CUDA_CALL(rank, cudaFree(w->gather));
    if (w->produced) (void)CUDA_CALL(rank, cudaEventDestroy(w->produced));
    if (w->stream) (void)CUDA_CALL(rank, cudaStreamDestroy(w->stream));
    vqc_comm_fini_common(&w->data);
    vqc_mpi_comm_destroy(w->mpi);
    free(w);
    return vqc_error(s, "%s", why);
  }
  w->data.side = side;
  *out = &w->data;
  return VQC_OK;
}

void vqc_nccl_comm_destroy(vqc_comm *c) {
  if (!c || c->backend != VQC_BACKEND_NCCL || !c->side) return;
  nccl_world *w = c->impl;
  (void)CUDA_CALL(c->rank, cudaSetDevice(w->device));
  if (w->nccl) {
    /* Finalize flushes outstanding work; if a peer never comes, abort. */
    vqc_status s = NCCL_CALL(w, c->rank, ncclCommFinalize(w->nccl));
    if (s == VQC_OK)
      s = wait_comm_ready(w, c->rank, c->timeout_s, "ncclCommFinalize");
    if (s == VQC_OK) {
      (void)ncclCommDestroy(w->nccl);
      w->nccl = NULL;
    } else {
      give_up(w, "destroy"); /* a peer that never came, or an abort */
    }
  }
  (void)CUDA_CALL(c->rank, cudaFree(w->scratch));
  if (w->gather) (void)CUDA_CALL(c->rank, cudaFree(w->gather));
  (void)CUDA_CALL(c->rank, cudaEventDestroy(w->produced));
  (void)CUDA_CALL(c->rank, cudaStreamDestroy(w->stream));
  vqc_comm_fini_common(&w->data);
  vqc_mpi_comm_destroy(w->mpi);
  free(w);
}
