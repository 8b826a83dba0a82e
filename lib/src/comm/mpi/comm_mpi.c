/* comm_mpi.c: the `mpi` comm backend (one process per rank, OpenMPI).
 *
 * A world is MPI_COMM_WORLD seen through two duplicated communicators: one
 * carries the collectives under test (the data comm, with the ledger), the
 * other is the side channel, so a digest exchange can never match, or wait
 * behind, a collective of the code being checked.
 *
 * Deadlines, in the comm's wait mode (vqc_comm_set_wait_mode):
 *
 * POLL (the default). MPI has no blocking collective with a timeout, so every
 * collective is started nonblocking (MPI_Iallreduce, ...) and completed by
 * polling MPI_Test until it finishes or the comm's deadline passes. A wait
 * spins first (a collective between ranks on one node takes microseconds, and
 * MPI_Wait busy-polls the same way), then yields the CPU and finally sleeps
 * in short naps, so four ranks on two cores still all make progress.
 * bench/bench_comm.c measures the price: the polling and the ledger add at
 * most 3% to MPI_Iallreduce + MPI_Wait at 4 KiB and 1 MiB; the larger gap
 * to blocking MPI_Allreduce (2.0-3.3x at 4 KiB, 1.03-1.44x at 1 MiB with 2
 * ranks on one node, the higher the quieter the machine) is OpenMPI's
 * nonblocking collective engine (libnbc), which any design that keeps a
 * deadline without reimplementing the collectives has to pay.
 *
 * BLOCKING. The blocking collectives (MPI_Allreduce, ...), called exactly as
 * a program would call them, so the only cost on top of MPI is the comm
 * layer's (86-107 ns in a tight loop, 100-285 ns in place at 4 KiB, see
 * bench_comm.c; this backend's own checks are a few ns: begin_collective
 * settles the common case inline). A call whose peers never come does not return: the
 * deadline is the watchdog's (vqc/watchdog.h), which sees the record ENTERED
 * in the ledger for too long and calls its handler (dump, report,
 * MPI_Abort). vqc_comm_abort stops later calls only. No deadline is computed
 * in this mode (a clock read saved), except to finish a stale request.
 *
 * After a timeout the request stays pending inside MPI (a nonblocking
 * collective cannot be cancelled) and so do the buffers passed to it. The
 * comm remembers it as `stale`: the next collective first waits for it (MPI
 * matches collectives in order, so it completes once the late ranks enter
 * theirs), within that collective's own deadline. Normally the caller aborts
 * instead. On a side channel a timeout means a peer is gone or stopped (its
 * deadlines are generous: a merely slow rank is never that late), so later
 * side-channel calls fail at once instead of each waiting out a deadline of
 * its own: a run with a lost rank reaches its report in one side deadline,
 * not in the sum of all of them.
 *
 * A peer's abort. vqc_comm_abort on a data comm is local to the process
 * in MPI itself, yet its peers may sit in a data collective waiting for
 * this rank until their deadline. So abort also sends every peer a notice
 * (a one-word point-to-point message on the side communicator, tag
 * NOTICE_TAG: point-to-point traffic never matches a collective, so it
 * cannot disturb the side channel's exchanges). Each world keeps one receive
 * for it posted from create to destroy; a POLL wait on the data comm tests
 * it once past its spin phase (no cost to a collective that completes at
 * once) and, when a notice has come, marks the data comm aborted and
 * returns VQC_EABORTED naming the rank that gave up. So when one rank's
 * training stops (its own error, or a collective that timed out), the
 * others stop waiting for it at once and meet it on the side channel,
 * which the notice does not touch. A rank that learns of an abort from a
 * notice sends none itself (N ranks send N - 1 notices each at most once,
 * and only the first aborters do). Sent from the thread that aborts when
 * MPI gives MPI_THREAD_MULTIPLE, else from the rank's thread at its next
 * call on either comm.
 *
 * Every MPI call goes through MPI_CALL, which turns a failure into
 * VQC_ECOMM with file:line, the rank, the function name and the MPI error
 * string. The duplicated communicators use MPI_ERRORS_RETURN so that failures
 * reach us instead of killing the job.
 *
 * Not thread-safe across calls on the same comm (one rank thread drives it);
 * vqc_mpi_comm_create and vqc_mpi_comm_destroy are called from one thread. */
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_internal.h"
#include "comm/mpi/mpi_common.h"
#include "vqc/comm.h"

/* ---- error checking */

/* VQC_OK when rc is MPI_SUCCESS, else VQC_ECOMM with the MPI error string.
 * file and line are those of the MPI_CALL use, not of this function. */
static vqc_status mpi_check(int rc, const char *file, int line, int rank,
                            const char *fn) {
  if (rc == MPI_SUCCESS) return VQC_OK;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) {
    snprintf(msg, sizeof msg, "MPI error code %d", rc);
  }
  return vqc_error_at(VQC_ECOMM, file, line, "rank %d: %s failed: %s", rank,
                      fn, msg);
}
/* Usage: VQC_TRY(MPI_CALL(rank, MPI_Test, &req, &done, MPI_STATUS_IGNORE)); */
#define MPI_CALL(rank, fn, ...) \
  mpi_check(fn(__VA_ARGS__), __FILE__, __LINE__, (rank), #fn)

/* ---- state */

/* The tag of a peer's abort notice on the side communicator (see the top;
 * collectives use no tags, so any value that MPI_TAG_UB allows will do). */
#define NOTICE_TAG 7651

struct mpi_world;

/* One communicator (data or side). */
typedef struct mpi_comm_impl {
  struct mpi_world *world; /* the world this comm belongs to */
  MPI_Comm comm;     /* our duplicate of MPI_COMM_WORLD; MPI_COMM_NULL if none */
  int aborted;       /* set by ops->abort (any thread); read with __atomic */
  MPI_Request stale; /* a collective that timed out and is still pending */
  /* Iallgatherv's counts and displacements (size entries each). They must
   * outlive the request, so they live here rather than on the stack. */
  int *counts;
  int *displs;
} mpi_comm_impl;

/* The allocation behind a vqc_mpi_comm_create handle. */
typedef struct mpi_world {
  vqc_comm data; /* returned to the caller */
  vqc_comm side; /* data.side points here */
  mpi_comm_impl data_impl;
  mpi_comm_impl side_impl;
  int thread_provided; /* what MPI_Init_thread / MPI_Query_thread gave */
  /* Peers' abort notices (see the top): the posted receive and its buffer,
   * who sent the first one (-1: none yet), and this rank's own notice
   * (its buffer must outlive the sends, so it lives here too). */
  MPI_Request notice_req;
  int64_t notice_in;
  int notice_from;      /* rank thread only */
  int64_t notice_out;
  int notice_pending;   /* abort asked for the notices to be sent (__atomic) */
} mpi_world;

/* Whether vqc called MPI_Init_thread (then the last destroy finalizes), and
 * how many worlds are alive. Touched only by create/destroy (one thread). */
static bool vqc_owns_mpi = false;
static int live_worlds = 0;

/* ---- waiting against the deadline (pacing: mpi_common.h) */

static bool is_aborted(const mpi_comm_impl *m) {
  return __atomic_load_n(&m->aborted, __ATOMIC_ACQUIRE) != 0;
}

/* Sends this rank's abort notice to every peer, once (rank thread, or any
 * thread under MPI_THREAD_MULTIPLE). The sends are small, hence buffered
 * by MPI: their requests are freed at once, and a stopped peer that never
 * receives holds nobody up. Best effort: a failed send only means that
 * peer waits out its own deadline, as it would without notices. */
static void send_notices(vqc_comm *c) {
  struct mpi_world *w = ((mpi_comm_impl *)c->impl)->world;
  /* A plain load first: this runs before most collectives (all but the
   * common case begin_collective settles inline). */
  if (!__atomic_load_n(&w->notice_pending, __ATOMIC_RELAXED) ||
      !__atomic_exchange_n(&w->notice_pending, 0, __ATOMIC_ACQ_REL))
    return;
  w->notice_out = c->rank;
  for (int r = 0; r < c->size; r++) {
    if (r == c->rank) continue;
    MPI_Request req;
    if (MPI_Isend(&w->notice_out, 1, MPI_INT64_T, r, NOTICE_TAG,
                  w->side_impl.comm, &req) == MPI_SUCCESS)
      MPI_Request_free(&req);
  }
}

/* Whether a peer's abort notice has come (rank thread only). The first one
 * marks the data comm aborted; the receive is not posted again: one notice
 * is all a rank needs to stop waiting in data collectives. */
static bool notice_seen(struct mpi_world *w) {
  if (w->notice_from >= 0) return true;
  if (w->notice_req == MPI_REQUEST_NULL) return false;
  int done = 0;
  MPI_Status st;
  if (MPI_Test(&w->notice_req, &done, &st) != MPI_SUCCESS || !done)
    return false;
  w->notice_from = st.MPI_SOURCE;
  __atomic_store_n(&w->data_impl.aborted, 1, __ATOMIC_RELEASE);
  return true;
}

/* VQC_EABORTED for `what` on an aborted comm, naming the peer whose notice
 * aborted it when one did. */
static vqc_status aborted_error(const vqc_comm *c, const char *what) {
  const struct mpi_world *w = ((const mpi_comm_impl *)c->impl)->world;
  if (c->ledger && w->notice_from >= 0)
    return vqc_error(VQC_EABORTED, "rank %d: %s: rank %d gave up its "
                     "collectives (its training stopped), so this one "
                     "cannot complete", c->rank, what, w->notice_from);
  return vqc_error(VQC_EABORTED, "rank %d: %s: the comm was aborted",
                   c->rank, what);
}

/* Polls *req until it completes (VQC_OK, *req becomes MPI_REQUEST_NULL), the
 * comm is aborted (VQC_EABORTED) or `deadline` passes (VQC_ETIMEOUT; *req
 * stays pending). `what` names the collective for messages. */
static vqc_status wait_request(vqc_comm *c, MPI_Request *req,
                               uint64_t deadline, const char *what) {
  mpi_comm_impl *m = c->impl;
  uint64_t start = vqc_now_ns();
  for (;;) {
    int done = 0;
    VQC_TRY(MPI_CALL(c->rank, MPI_Test, req, &done, MPI_STATUS_IGNORE));
    if (done) return VQC_OK;
    uint64_t now = vqc_now_ns();
    /* Past the spin phase only: a peer's notice (see the top). */
    if (c->ledger && now - start > VQC_POLL_SPIN_NS) (void)notice_seen(m->world);
    if (is_aborted(m)) return aborted_error(c, what);
    if (now > deadline)
      return vqc_error(VQC_ETIMEOUT,
                       "rank %d: %s did not complete within %.3g s (did every "
                       "rank enter it?); the MPI request stays pending",
                       c->rank, what, (double)(now - start) * 1e-9);
    vqc_poll_pause(now - start);
  }
}

/* Whether this call uses the blocking MPI collectives (see the top). */
static bool blocking(const vqc_comm *c) {
  return c->wait_mode == VQC_WAIT_BLOCKING;
}

/* begin_collective (below) in full: every case but the common one. */
static vqc_status begin_collective_slow(vqc_comm *c, uint64_t *deadline,
                                        const char *what) {
  mpi_comm_impl *m = c->impl;
  *deadline = 0;
  send_notices(c); /* an abort's, when it could not send them itself */
  if (is_aborted(m)) return aborted_error(c, what);
  if (!blocking(c) || m->stale != MPI_REQUEST_NULL)
    *deadline = vqc_comm_deadline_ns(c);
  if (m->stale == MPI_REQUEST_NULL) return VQC_OK;
  if (!c->ledger) { /* a side channel: see the top of the file */
    int done = 0;
    VQC_TRY(MPI_CALL(c->rank, MPI_Test, &m->stale, &done, MPI_STATUS_IGNORE));
    if (!done)
      return vqc_error(VQC_ETIMEOUT, "rank %d: side channel %s not started: "
                       "an earlier side-channel exchange timed out and is "
                       "still pending (a rank is gone or stopped)",
                       c->rank, what);
    return VQC_OK;
  }
  vqc_status s = wait_request(c, &m->stale, *deadline,
                              "the earlier collective that timed out");
  if (s == VQC_OK) return VQC_OK;
  /* Copied: vqc_error must not read the buffer it is writing. */
  char why[512];
  snprintf(why, sizeof why, "%s", vqc_last_error());
  return vqc_error(s, "rank %d: %s not started: an earlier collective on this "
                      "comm timed out and is still pending (%s)",
                   c->rank, what, why);
}

/* Every collective starts here: refuses when aborted, and first finishes a
 * collective that timed out earlier (see the top of the file), within this
 * call's deadline. Sets *deadline: now + timeout in POLL mode, or when a
 * stale request must be waited for; 0 (unused) otherwise.
 * The common case is decided inline, from the comm's first cache line and
 * the impl's: a data comm in BLOCKING mode, not aborted, nothing stale.
 * Then there is nothing to do: no notice is pending (mpi_abort marks the
 * data comm aborted before it asks for them), no deadline is needed and
 * nothing to wait for. Everything else takes begin_collective_slow. */
static inline __attribute__((always_inline)) vqc_status
begin_collective(vqc_comm *c, uint64_t *deadline, const char *what) {
  const mpi_comm_impl *m = c->impl;
  if (c->ledger && blocking(c) && !is_aborted(m) &&
      m->stale == MPI_REQUEST_NULL) {
    *deadline = 0;
    return VQC_OK;
  }
  return begin_collective_slow(c, deadline, what);
}

/* Completes a started request; on timeout keeps it as the comm's stale one. */
static vqc_status finish_collective(vqc_comm *c, MPI_Request *req,
                                    uint64_t deadline, const char *what) {
  vqc_status s = wait_request(c, req, deadline, what);
  if (s == VQC_ETIMEOUT || s == VQC_EABORTED) {
    mpi_comm_impl *m = c->impl;
    m->stale = *req;
  }
  return s;
}

/* ---- argument conversion */

static MPI_Datatype mpi_dtype(vqc_dtype dt) {
  switch (dt) {
    case VQC_F32: return MPI_FLOAT;
    case VQC_F64: return MPI_DOUBLE;
    case VQC_I32: return MPI_INT32_T;
    case VQC_I64: return MPI_INT64_T;
    case VQC_U8: return MPI_UINT8_T;
    default: return MPI_DATATYPE_NULL; /* validated by comm.c: unreachable */
  }
}

static MPI_Op mpi_op(vqc_redop op) {
  switch (op) {
    case VQC_SUM: return MPI_SUM;
    case VQC_MIN: return MPI_MIN;
    case VQC_MAX: return MPI_MAX;
    default: return MPI_OP_NULL; /* validated by comm.c: unreachable */
  }
}

/* MPI counts are int: larger counts are refused rather than truncated. */
static vqc_status to_int_count(const vqc_comm *c, size_t n, const char *what,
                               int *out) {
  if (n > (size_t)INT_MAX)
    return vqc_error(VQC_EINVAL,
                     "rank %d: %s: count %zu exceeds INT_MAX (%d), the largest "
                     "count MPI accepts; split the buffer",
                     c->rank, what, n, INT_MAX);
  *out = (int)n;
  return VQC_OK;
}

/* ---- the ops */

static vqc_status mpi_all_reduce(vqc_comm *c, const void *send, void *recv,
                                 size_t count, vqc_dtype dt, vqc_redop op) {
  mpi_comm_impl *m = c->impl;
  uint64_t deadline = 0;
  int n = 0;
  VQC_TRY(to_int_count(c, count, "all_reduce", &n));
  VQC_TRY(begin_collective(c, &deadline, "all_reduce"));
  /* In place when the buffers coincide; a partial overlap is made in place
   * by moving the input into recv first (MPI forbids aliased buffers). */
  const void *sendarg = send;
  size_t bytes = count * vqc_comm_dtype_size(dt);
  if (send == recv || vqc_ranges_overlap(send, bytes, recv, bytes)) {
    if (send != recv) memmove(recv, send, bytes);
    sendarg = MPI_IN_PLACE;
  }
  if (blocking(c))
    return MPI_CALL(c->rank, MPI_Allreduce, sendarg, recv, n, mpi_dtype(dt),
                    mpi_op(op), m->comm);
  MPI_Request req;
  VQC_TRY(MPI_CALL(c->rank, MPI_Iallreduce, sendarg, recv, n, mpi_dtype(dt),
                   mpi_op(op), m->comm, &req));
  return finish_collective(c, &req, deadline, "all_reduce");
}

static vqc_status mpi_all_gather(vqc_comm *c, const void *send, void *recv,
                                 size_t count, vqc_dtype dt) {
  mpi_comm_impl *m = c->impl;
  uint64_t deadline = 0;
  int n = 0;
  VQC_TRY(to_int_count(c, count, "all_gather", &n));
  VQC_TRY(begin_collective(c, &deadline, "all_gather"));
  /* recv: (size, count). If send lies inside recv (send == recv, or NCCL's
   * in-place convention send == recv + rank*count), move it to this rank's
   * block and let MPI gather in place. */
  size_t block = count * vqc_dtype_size(dt);
  char *mine = (char *)recv + (size_t)c->rank * block;
  const void *sendarg = send;
  if (vqc_ranges_overlap(send, block, recv, block * (size_t)c->size)) {
    if (send != mine) memmove(mine, send, block);
    sendarg = MPI_IN_PLACE;
  }
  if (blocking(c))
    return MPI_CALL(c->rank, MPI_Allgather, sendarg, n, mpi_dtype(dt), recv,
                    n, mpi_dtype(dt), m->comm);
  MPI_Request req;
  VQC_TRY(MPI_CALL(c->rank, MPI_Iallgather, sendarg, n, mpi_dtype(dt), recv,
                   n, mpi_dtype(dt), m->comm, &req));
  return finish_collective(c, &req, deadline, "all_gather");
}

static vqc_status mpi_all_gatherv(vqc_comm *c, const void *send,
                                  size_t sendcount, void *recv,
                                  const size_t *counts, vqc_dtype dt) {
  mpi_comm_impl *m = c->impl;
  uint64_t deadline = 0;
  int n = 0;
  VQC_TRY(to_int_count(c, sendcount, "all_gatherv", &n));
  /* Displacements are int too, so the running total must fit as well. */
  size_t total = 0;
  for (int r = 0; r < c->size; r++) {
    int unused = 0;
    VQC_TRY(to_int_count(c, counts[r], "all_gatherv", &unused));
    total += counts[r];
    VQC_TRY(to_int_count(c, total, "all_gatherv (total)", &unused));
  }
  /* Only now touch the scratch: a stale request may still be reading it. */
  VQC_TRY(begin_collective(c, &deadline, "all_gatherv"));
  int displ = 0;
  for (int r = 0; r < c->size; r++) {
    m->counts[r] = (int)counts[r];
    m->displs[r] = displ;
    displ += m->counts[r];
  }
  /* Same in-place rule as all_gather, with this rank's block at displs. */
  size_t esize = vqc_dtype_size(dt);
  size_t block = sendcount * esize;
  char *mine = (char *)recv + (size_t)m->displs[c->rank] * esize;
  const void *sendarg = send;
  if (vqc_ranges_overlap(send, block, recv, total * esize)) {
    if (send != mine) memmove(mine, send, block);
    sendarg = MPI_IN_PLACE;
  }
  if (blocking(c))
    return MPI_CALL(c->rank, MPI_Allgatherv, sendarg, n, mpi_dtype(dt), recv,
                    m->counts, m->displs, mpi_dtype(dt), m->comm);
  MPI_Request req;
  VQC_TRY(MPI_CALL(c->rank, MPI_Iallgatherv, sendarg, n, mpi_dtype(dt), recv,
                   m->counts, m->displs, mpi_dtype(dt), m->comm, &req));
  return finish_collective(c, &req, deadline, "all_gatherv");
}

static vqc_status mpi_broadcast(vqc_comm *c, void *buf, size_t count,
                                vqc_dtype dt, int root) {
  mpi_comm_impl *m = c->impl;
  uint64_t deadline = 0;
  int n = 0;
  VQC_TRY(to_int_count(c, count, "broadcast", &n));
  VQC_TRY(begin_collective(c, &deadline, "broadcast"));
  if (blocking(c))
    return MPI_CALL(c->rank, MPI_Bcast, buf, n, mpi_dtype(dt), root, m->comm);
  MPI_Request req;
  VQC_TRY(MPI_CALL(c->rank, MPI_Ibcast, buf, n, mpi_dtype(dt), root, m->comm,
                   &req));
  return finish_collective(c, &req, deadline, "broadcast");
}

static vqc_status mpi_barrier(vqc_comm *c) {
  mpi_comm_impl *m = c->impl;
  uint64_t deadline = 0;
  VQC_TRY(begin_collective(c, &deadline, "barrier"));
  if (blocking(c)) return MPI_CALL(c->rank, MPI_Barrier, m->comm);
  MPI_Request req;
  VQC_TRY(MPI_CALL(c->rank, MPI_Ibarrier, m->comm, &req));
  return finish_collective(c, &req, deadline, "barrier");
}

/* This rank's pending POLL waits and its future calls return VQC_EABORTED;
 * on a data comm the peers get a notice (see the top), so their POLL waits
 * on the data comm end too. A BLOCKING call already inside MPI cannot be
 * woken (only MPI_Abort, left to main, ends it). */
static void mpi_abort(vqc_comm *c) {
  mpi_comm_impl *m = c->impl;
  const bool was = __atomic_exchange_n(&m->aborted, 1, __ATOMIC_ACQ_REL);
  /* A data comm's first abort tells the peers, unless a peer's notice is
   * what aborted it (they know). */
  if (!c->ledger || was) return;
  __atomic_store_n(&m->world->notice_pending, 1, __ATOMIC_RELEASE);
  if (m->world->thread_provided == MPI_THREAD_MULTIPLE) send_notices(c);
}

static const vqc_comm_ops mpi_ops = {
    .all_reduce = mpi_all_reduce,
    .all_gather = mpi_all_gather,
    .all_gatherv = mpi_all_gatherv,
    .broadcast = mpi_broadcast,
    .barrier = mpi_barrier,
    .abort = mpi_abort,
};

/* ---- create / destroy */

/* Duplicates MPI_COMM_WORLD into m (errors returned, not fatal) and allocates
 * the gatherv scratch for `size` ranks. */
static vqc_status impl_init(mpi_world *w, mpi_comm_impl *m, int rank,
                            int size) {
  m->world = w;
  m->comm = MPI_COMM_NULL;
  m->stale = MPI_REQUEST_NULL;
  m->aborted = 0;
  VQC_TRY(MPI_CALL(rank, MPI_Comm_dup, MPI_COMM_WORLD, &m->comm));
  VQC_TRY(MPI_CALL(rank, MPI_Comm_set_errhandler, m->comm, MPI_ERRORS_RETURN));
  m->counts = calloc((size_t)size, sizeof *m->counts);
  m->displs = calloc((size_t)size, sizeof *m->displs);
  if (!m->counts || !m->displs)
    return vqc_error(VQC_ENOMEM, "rank %d: cannot allocate gatherv counts for "
                     "%d ranks", rank, size);
  return VQC_OK;
}

/* Frees what impl_init made. If a timed-out collective is still pending, MPI
 * may still write the scratch arrays and use the communicator, so both are
 * deliberately left alone (a small leak beats a use after free). */
static void impl_fini(mpi_comm_impl *m) {
  if (m->stale != MPI_REQUEST_NULL) {
    int done = 0;
    if (MPI_Test(&m->stale, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done)
      return;
  }
  if (m->comm != MPI_COMM_NULL) MPI_Comm_free(&m->comm);
  free(m->counts);
  free(m->displs);
  m->counts = m->displs = NULL;
}

/* Withdraws the posted notice receive (before its communicator is freed). */
static void notice_cancel(mpi_world *w) {
  if (w->notice_req == MPI_REQUEST_NULL) return;
  int done = 0;
  if (MPI_Test(&w->notice_req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
      !done && MPI_Cancel(&w->notice_req) == MPI_SUCCESS)
    MPI_Wait(&w->notice_req, MPI_STATUS_IGNORE);
  w->notice_req = MPI_REQUEST_NULL;
}

vqc_status vqc_mpi_comm_create(int *argc, char ***argv, vqc_comm **out) {
  if (!out) return vqc_error(VQC_EINVAL, "vqc_mpi_comm_create: out is NULL");
  *out = NULL;

  int initialized = 0, finalized = 0;
  VQC_TRY(MPI_CALL(-1, MPI_Initialized, &initialized));
  VQC_TRY(MPI_CALL(-1, MPI_Finalized, &finalized));
  if (finalized)
    return vqc_error(VQC_ECOMM,
                     "MPI is already finalized and cannot be started again; "
                     "create every mpi comm before destroying the last one");

  /* On a cache line of its own: the data comm (the first member) then keeps
   * its per-call fields on one line (comm_internal.h). aligned_alloc wants
   * a size that is a multiple of the alignment. */
  size_t bytes = (sizeof(mpi_world) + 63) / 64 * 64;
  mpi_world *w = aligned_alloc(64, bytes);
  if (!w) return vqc_error(VQC_ENOMEM, "cannot allocate an mpi comm");
  memset(w, 0, bytes);
  w->data_impl.comm = w->side_impl.comm = MPI_COMM_NULL;
  w->data_impl.stale = w->side_impl.stale = MPI_REQUEST_NULL;
  w->notice_req = MPI_REQUEST_NULL;
  w->notice_from = -1;

  vqc_status s;
  if (!initialized) {
    /* MULTIPLE lets a watchdog thread use MPI while the rank thread waits;
     * fewer is accepted (recorded in thread_provided) since the rank thread
     * alone drives the comm. */
    s = MPI_CALL(-1, MPI_Init_thread, argc, argv, MPI_THREAD_MULTIPLE,
                 &w->thread_provided);
    if (s != VQC_OK) goto fail;
    vqc_owns_mpi = true;
  } else {
    s = MPI_CALL(-1, MPI_Query_thread, &w->thread_provided);
    if (s != VQC_OK) goto fail;
  }

  int rank = -1, size = 0;
  s = MPI_CALL(-1, MPI_Comm_rank, MPI_COMM_WORLD, &rank);
  if (s == VQC_OK) s = MPI_CALL(rank, MPI_Comm_size, MPI_COMM_WORLD, &size);
  if (s == VQC_OK) s = impl_init(w, &w->data_impl, rank, size);
  if (s == VQC_OK) s = impl_init(w, &w->side_impl, rank, size);
  if (s == VQC_OK)
    s = MPI_CALL(rank, MPI_Irecv, &w->notice_in, 1, MPI_INT64_T,
                 MPI_ANY_SOURCE, NOTICE_TAG, w->side_impl.comm,
                 &w->notice_req);
  if (s != VQC_OK) goto fail;

  s = vqc_comm_init_common(&w->data, &mpi_ops, VQC_BACKEND_MPI, rank, size,
                           &w->data_impl, false);
  if (s != VQC_OK) goto fail;
  s = vqc_comm_init_common(&w->side, &mpi_ops, VQC_BACKEND_MPI, rank, size,
                           &w->side_impl, true);
  if (s != VQC_OK) goto fail;
  w->data.side = &w->side;

  live_worlds++;
  *out = &w->data;
  return VQC_OK;

fail:
  /* MPI itself stays initialised (it cannot be restarted once finalized);
   * vqc_owns_mpi makes a later destroy finalize it. */
  notice_cancel(w);
  vqc_comm_fini_common(&w->data);
  impl_fini(&w->data_impl);
  impl_fini(&w->side_impl);
  free(w);
  return s;
}

void vqc_mpi_comm_destroy(vqc_comm *c) {
  /* Only a handle from vqc_mpi_comm_create: an MPI data comm (not a side). */
  if (!c || c->backend != VQC_BACKEND_MPI || !c->side) return;
  mpi_world *w = (mpi_world *)c; /* data is the first member */
  notice_cancel(w);
  vqc_comm_fini_common(&w->data);
  vqc_comm_fini_common(&w->side);
  impl_fini(&w->data_impl);
  impl_fini(&w->side_impl);
  free(w);
  live_worlds--;
  if (live_worlds == 0 && vqc_owns_mpi) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
    vqc_owns_mpi = false;
  }
}
