/* comm.h: one collective interface over several backends, with a ledger.
 *
 * Backends (an ops table behind an opaque vqc_comm, libuv style):
 *   threads  N ranks as threads of one process (the embedded default); real
 *            blocking rendezvous, every wait bounded by the comm's timeout;
 *   mpi      one process per rank under mpiexec / srun (OpenMPI), across
 *            nodes; waits poll nonblocking MPI requests against the deadline,
 *            or call the blocking MPI collectives (see vqc_wait_mode);
 *   nccl     device buffers moved by NCCL, one process per rank under
 *            mpiexec; MPI bootstraps it and is its side channel.
 *
 * Every collective goes through the vqc_* macros below, which capture the
 * call site. Each call appends a record to the rank's ledger (see ledger.h)
 * and raises BEFORE / AFTER events that checkers subscribe to. A BEFORE
 * handler may veto the collective by returning an error (strict mode reports
 * a mismatch before any data moves).
 *
 * Every comm has a side channel: a second comm over the same ranks with its
 * own state (a duplicated MPI communicator; separate rendezvous state for
 * threads) and no ledger events, so checkers can exchange digests without
 * disturbing, or sharing the fate of, the collectives under test.
 *
 * Buffers: `count` is in elements of `dtype`; send and recv may be the same
 * pointer (in place). Reductions over several ranks are applied in rank order
 * on the threads backend, so every rank gets bit-identical results. */
#ifndef VQC_COMM_H
#define VQC_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vqc/ledger.h"
#include "vqc/status.h"
#include "vqc/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vqc_comm vqc_comm;
typedef enum { VQC_BACKEND_THREADS, VQC_BACKEND_MPI, VQC_BACKEND_NCCL } vqc_backend;
const char *vqc_backend_name(vqc_backend b);
/* "threads" | "mpi" | "nccl" -> backend; VQC_EINVAL otherwise. */
vqc_status vqc_backend_from_name(const char *name, vqc_backend *out);
/* Whether this build includes the backend. */
bool vqc_backend_built(vqc_backend b);

/* ---- events
 *
 * Handlers subscribed on a comm are called on the rank's own thread,
 * BEFORE (record ENTERED, data not yet moved; a non-OK return vetoes the
 * collective, which then fails with that status) and AFTER (record closed;
 * the return value is ignored unless the collective succeeded, in which case
 * a non-OK return becomes the collective's status). */
typedef enum { VQC_EVENT_BEFORE = 0, VQC_EVENT_AFTER = 1 } vqc_event_phase;

typedef struct vqc_coll_event {
  vqc_event_phase phase;
  vqc_comm *comm;
  const vqc_ledger_record *record;
  /* The tensor passed to vqc_all_reduce_tensor (NULL for raw buffers). */
  vqc_tensor *tensor;
  /* For ALL_GATHERV: the per-rank counts (size entries); NULL otherwise. */
  const size_t *counts;
} vqc_coll_event;

typedef vqc_status (*vqc_event_fn)(const vqc_coll_event *ev, void *user);

#define VQC_MAX_SUBSCRIBERS 8
/* Handlers run in subscription order. VQC_ENOMEM when the table is full. */
vqc_status vqc_comm_subscribe(vqc_comm *c, vqc_event_fn fn, void *user);
/* Removes the (fn, user) pair; no-op if absent. */
void vqc_comm_unsubscribe(vqc_comm *c, vqc_event_fn fn, void *user);

/* ---- queries and settings */

int vqc_comm_rank(const vqc_comm *c);
int vqc_comm_size(const vqc_comm *c);
vqc_backend vqc_comm_backend(const vqc_comm *c);
/* The side channel (owned by c; do not destroy). */
vqc_comm *vqc_comm_side(vqc_comm *c);
/* The rank's ledger (owned by c). NULL for a side channel. */
vqc_ledger *vqc_comm_ledger(vqc_comm *c);
/* Deadline for every wait, in seconds (default 60; <= 0 restores it). */
void vqc_comm_set_timeout(vqc_comm *c, double seconds);
double vqc_comm_timeout(const vqc_comm *c);
/* One overall deadline, `seconds` from now, for a whole sequence of waits
 * on this comm (<= 0 clears it): each later wait ends at its own deadline
 * (now + timeout) or at this one, whichever comes first, so deadlines in a
 * row do not add up (the runner's end of a failed run: agreement, the
 * checkers' finish, the result gathers, all within one deadline). Once it
 * has passed, a wait that is not already complete fails at once with
 * VQC_ETIMEOUT. Not inherited by the side channel. */
void vqc_comm_set_overall_deadline(vqc_comm *c, double seconds);
/* How long the next wait on c may last, in seconds: its timeout, or less
 * when an overall deadline comes first (0 once that has passed). For
 * waits outside the comm (polling the run directory) that must end with
 * the comm's. */
double vqc_comm_wait_budget(const vqc_comm *c);
/* What this rank moved through a comm since it was created: collective
 * calls and their LOGICAL bytes, the same on every backend whatever its
 * algorithm: all_reduce sends and receives count elements; all_gather(v)
 * sends its block and receives every rank's; broadcast sends (root) or
 * receives (others) count elements; barrier moves none. This is what the
 * checkers' scale claims are stated in (bytes per rank per step on the side
 * channel: read it from vqc_comm_side(c)). Read by the comm's own rank. */
typedef struct vqc_comm_stats {
  uint64_t calls;
  uint64_t bytes_sent;
  uint64_t bytes_received;
} vqc_comm_stats;
vqc_comm_stats vqc_comm_get_stats(const vqc_comm *c);
/* A side channel's hook, called on this rank before each of its
 * collectives on that side channel (also ones made from inside the hook;
 * the hook must cope). The overlapped divergence check uses it to settle
 * its pending exchange first, so every rank's side traffic stays in the
 * same order whoever reaches the side channel first. A non-OK return
 * fails the collective. One hook per side channel: VQC_EINVAL when one is
 * set (fn NULL clears it) or when c is not a side channel. */
typedef vqc_status (*vqc_comm_hook_fn)(void *user);
vqc_status vqc_comm_set_before_collective(vqc_comm *c, vqc_comm_hook_fn fn,
                                          void *user);
/* How a collective waits for its peers.
 *   VQC_WAIT_POLL (the default): every wait polls against the comm's
 *     deadline and returns VQC_ETIMEOUT when it passes. On the mpi backend
 *     this means MPI's nonblocking collectives (MPI_Iallreduce + MPI_Test),
 *     which OpenMPI runs through a slower engine: with 2 ranks on one node
 *     (OpenMPI 4.1.4) 1.9-2.6x MPI_Allreduce at 4 B, 2.0-3.4x at 4 KiB
 *     and 1.04-1.46x at 1 MiB (the higher, the quieter the machine),
 *     nearly all of it MPI_Iallreduce + MPI_Wait's own (polling and ledger
 *     add at most 3% at 4 KiB and 1 MiB; bench/bench_comm.c).
 *   VQC_WAIT_BLOCKING: the mpi backend calls the blocking collectives
 *     (MPI_Allreduce, MPI_IN_PLACE when in place, ...): the cost over
 *     calling MPI directly is the comm layer's, 86-107 ns per call in a
 *     tight loop and 100-285 ns in place at 4 KiB (1.13-1.29x
 *     MPI_Allreduce at 4 B, 1.04-1.11x at 4 KiB on a busy machine, about
 *     1.13x estimated on a quiet one, 1.00x at 1 MiB), but a call whose
 *     peers never come does not return. The deadline is then enforced by a
 *     watchdog (vqc/watchdog.h) that sees the record stuck in the ledger and
 *     calls a handler (which dumps ledgers and MPI_Aborts); vqc_comm_abort
 *     only stops later calls. Use it with a
 *     watchdog, never alone: "nothing hangs" depends on it.
 * The threads backend ignores the mode (its waits are deadline-bounded and
 * cheap either way). A side channel always polls: it has no ledger, so no
 * watchdog could see it hang (VQC_EINVAL for BLOCKING there). The mode of a
 * data comm does not change its side channel's. VQC_EINVAL for an unknown
 * mode. */
typedef enum { VQC_WAIT_POLL = 0, VQC_WAIT_BLOCKING = 1 } vqc_wait_mode;
vqc_status vqc_comm_set_wait_mode(vqc_comm *c, vqc_wait_mode mode);
vqc_wait_mode vqc_comm_wait_mode(const vqc_comm *c);
/* Marks this comm's world aborted: every rank's pending and future
 * collectives on it return VQC_EABORTED promptly (threads: shared flag; mpi:
 * local, plus MPI_Abort is left to main). The side channel is a separate comm
 * and stays usable (abort it separately if needed), so checkers can still
 * exchange reports. Safe to call from a watchdog thread. */
void vqc_comm_abort(vqc_comm *c);

/* ---- collectives (use the macros; the _at functions take the site) */

vqc_status vqc_all_reduce_at(vqc_comm *c, const void *send, void *recv,
                             size_t count, vqc_dtype dt, vqc_redop op,
                             vqc_site site);
/* recv holds size*count elements, rank r's block at r*count. */
vqc_status vqc_all_gather_at(vqc_comm *c, const void *send, void *recv,
                             size_t count, vqc_dtype dt, vqc_site site);
/* Variable sizes: rank r sends counts[r] elements; recv holds sum(counts) in
 * rank order. counts (size entries) must be the same on every rank. */
vqc_status vqc_all_gatherv_at(vqc_comm *c, const void *send, size_t sendcount,
                              void *recv, const size_t *counts, vqc_dtype dt,
                              vqc_site site);
vqc_status vqc_broadcast_at(vqc_comm *c, void *buf, size_t count, vqc_dtype dt,
                            int root, vqc_site site);
vqc_status vqc_barrier_at(vqc_comm *c, vqc_site site);
/* In-place all_reduce of a tensor that must be contiguous on this comm's
 * device. The tensor (and so its origin link, if it is a copy of a strided
 * tensor) is visible to event handlers: this is how the lost-in-place checker
 * sees all_reduce(embed_sum.contiguous()). */
vqc_status vqc_all_reduce_tensor_at(vqc_comm *c, vqc_tensor *t, vqc_redop op,
                                    vqc_site site);
/* Out-of-place all_reduce of tensors: out = reduce(in) over the ranks; in is
 * left unchanged. Both contiguous, same dtype and element count (shapes may
 * differ), on this comm's device. Event handlers see `out` as the tensor, so
 * the lost-in-place checker can tell when the result is never read
 * (Megatron-LM #5337, LFQ's discarded distributed mean). */
vqc_status vqc_all_reduce_tensor_out_at(vqc_comm *c, const vqc_tensor *in,
                                        vqc_tensor *out, vqc_redop op,
                                        vqc_site site);

#define vqc_all_reduce(c, send, recv, count, dt, op) \
  vqc_all_reduce_at((c), (send), (recv), (count), (dt), (op), VQC_SITE)
#define vqc_all_gather(c, send, recv, count, dt) \
  vqc_all_gather_at((c), (send), (recv), (count), (dt), VQC_SITE)
#define vqc_all_gatherv(c, send, sendcount, recv, counts, dt) \
  vqc_all_gatherv_at((c), (send), (sendcount), (recv), (counts), (dt), VQC_SITE)
#define vqc_broadcast(c, buf, count, dt, root) \
  vqc_broadcast_at((c), (buf), (count), (dt), (root), VQC_SITE)
#define vqc_barrier(c) vqc_barrier_at((c), VQC_SITE)
#define vqc_all_reduce_tensor(c, t, op) \
  vqc_all_reduce_tensor_at((c), (t), (op), VQC_SITE)
#define vqc_all_reduce_tensor_out(c, in, out, op) \
  vqc_all_reduce_tensor_out_at((c), (in), (out), (op), VQC_SITE)

/* ---- threads backend */

/* The body each rank thread runs. Its status is collected per rank. */
typedef vqc_status (*vqc_rank_fn)(vqc_comm *c, void *arg);

/* Runs fn on `size` threads, one comm each (timeout in seconds, <= 0 for the
 * default), joins them all and fills statuses[r] (may be NULL). Returns
 * VQC_OK when every rank returned VQC_OK, else the status of the first rank
 * that failed other than with VQC_EABORTED (the cause, not its victims), and
 * records that rank's message as "rank r: ...". A rank that fails aborts the
 * world (data and side channels) so the others do not wait out their
 * deadline. */
vqc_status vqc_threads_run(int size, double timeout, vqc_rank_fn fn, void *arg,
                           vqc_status *statuses);

/* Lower level: a world whose comms the caller drives from its own threads.
 * vqc_threads_world_comm gives rank r's comm (owned by the world). */
typedef struct vqc_threads_world vqc_threads_world;
vqc_status vqc_threads_world_create(int size, vqc_threads_world **out);
vqc_comm *vqc_threads_world_comm(vqc_threads_world *w, int rank);
void vqc_threads_world_destroy(vqc_threads_world *w); /* accepts NULL */

/* ---- mpi backend (VQC_WITH_MPI builds; VQC_EUNSUPPORTED otherwise) */

/* Initialises MPI if needed (MPI_THREAD_MULTIPLE requested so a watchdog
 * thread may dump the ledger) and builds a comm over MPI_COMM_WORLD with a
 * duplicated communicator for data and another for the side channel. */
vqc_status vqc_mpi_comm_create(int *argc, char ***argv, vqc_comm **out);
/* Destroys the comm (accepts NULL); finalizes MPI if vqc initialised it. */
void vqc_mpi_comm_destroy(vqc_comm *c);
/* True when this process was started by mpiexec/srun (environment check; no
 * MPI call), so a CLI can pick the mpi backend by default. */
bool vqc_mpi_launched(void);

/* ---- nccl backend (VQC_WITH_NCCL builds; VQC_EUNSUPPORTED otherwise)
 *
 * Data collectives run on DEVICE buffers through NCCL, on a stream of the
 * comm's own; the side channel is the MPI side channel (its backend is
 * "mpi"), so checkers' digest exchanges never share fate with NCCL. The
 * same comm.c entry points write the same ledger records and raise the same
 * events. Every collective is launched asynchronously and its completion
 * polled (cudaStreamQuery + ncclCommGetAsyncError) against the comm's
 * deadline: one that passes it aborts the NCCL communicator
 * (ncclCommAbort) and returns VQC_ETIMEOUT; later calls on the comm return
 * VQC_EABORTED. The wait mode is ignored (NCCL calls are always polled).
 * Buffers that are not device memory are VQC_EINVAL. */

/* Initialises MPI if needed (vqc_mpi_comm_create), picks the GPU of this
 * rank's node-local rank (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID or
 * MPI_LOCALRANKID, modulo the device count; else the world rank), creates
 * the ncclUniqueId on rank 0 and broadcasts it over the MPI side channel,
 * then the NCCL communicator (non-blocking init, bounded by the default
 * timeout), and warms it up (the collectives the backend uses, once, under
 * the same timeout) so that NCCL's lazy connection set-up is not charged
 * to the first collective's deadline. VQC_ENODEVICE without a usable GPU.
 *
 * Also: float SUMs (F32, F64) add the ranks in rank order, as the threads
 * backend does (all_gather + an ordered add on the device), so they equal
 * a threads or mpi run's bits; a collective that failed leaves its receive
 * buffer filled with 0xFF bytes (NaN floats, -1 integers), never a partial
 * result; and each collective is ordered after all work queued on the
 * legacy default stream before it (vqc/gpu_base.h "Streams"). */
vqc_status vqc_nccl_comm_create(int *argc, char ***argv, vqc_comm **out);
/* Destroys the comm (accepts NULL): NCCL communicator (finalized within
 * the timeout, else aborted; vqc_comm_abort or vqc_nccl_interrupt cut the
 * finalize short), stream, then the MPI comm under it. */
void vqc_nccl_comm_destroy(vqc_comm *c);

/* Makes every wait of every nccl comm of this process give up at its next
 * poll (within about a millisecond) with VQC_EABORTED, aborting the NCCL
 * communicator: creation (init and warm-up: the only way to cut short a
 * creation whose peers never come before its timeout, since no comm
 * handle exists yet), collectives and finalize alike. Sticky until
 * vqc_nccl_interrupt_clear. Async-signal-safe (sets a flag), so a SIGINT
 * handler may call it. No-ops without the nccl backend. */
void vqc_nccl_interrupt(void);
void vqc_nccl_interrupt_clear(void);

#ifdef __cplusplus
}
#endif
#endif /* VQC_COMM_H */
