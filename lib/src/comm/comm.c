/* comm.c: the public collective entry points shared by every backend.
 *
 * Each call: validate the arguments (a bad call never reaches a backend),
 * open a ledger record, raise BEFORE (a handler may veto), move the data
 * through the backend's ops table, close the record, raise AFTER. Side
 * channels have no ledger: they skip the record and the events.
 *
 * This is the hot path of every collective, budgeted at < 100 ns on top of
 * the backend (bench/bench_comm.c): the record is built once, in place, in
 * the caller's stack frame (the ledger copies it into its ring), validation
 * is a few compares, and events cost nothing without subscribers. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm_internal.h"
#include "vqc/comm.h"
#include "vqc/ledger.h"
#include "vqc/version.h"

/* ---- names */

static const char *const backend_names[] = {"threads", "mpi", "nccl"};

const char *vqc_backend_name(vqc_backend b) {
  return (unsigned)b < 3 ? backend_names[b] : "?";
}

vqc_status vqc_backend_from_name(const char *name, vqc_backend *out) {
  for (int b = 0; b < 3; b++) {
    if (name && strcmp(name, backend_names[b]) == 0) {
      *out = (vqc_backend)b;
      return VQC_OK;
    }
  }
  return vqc_error(VQC_EINVAL,
                   "unknown backend '%s' (expected threads, mpi or nccl)",
                   name ? name : "(null)");
}

bool vqc_backend_built(vqc_backend b) {
  switch (b) {
    case VQC_BACKEND_THREADS: return true;
    case VQC_BACKEND_MPI: return VQC_WITH_MPI;
    case VQC_BACKEND_NCCL: return VQC_WITH_NCCL;
  }
  return false;
}

/* ---- common state */

uint64_t vqc_comm_deadline_ns(const vqc_comm *c) {
  const uint64_t own = vqc_now_ns() + (uint64_t)(c->timeout_s * 1e9);
  return c->until_ns != 0 && c->until_ns < own ? c->until_ns : own;
}

vqc_status vqc_comm_init_common(vqc_comm *c, const vqc_comm_ops *ops,
                                vqc_backend backend, int rank, int size,
                                void *impl, bool is_side) {
  memset(c, 0, sizeof *c);
  c->ops = ops;
  c->backend = backend;
  c->rank = rank;
  c->size = size;
  c->timeout_s = VQC_COMM_DEFAULT_TIMEOUT_S;
  c->impl = impl;
  if (is_side) return VQC_OK;
  return vqc_ledger_create(rank, 0, &c->ledger);
}

void vqc_comm_fini_common(vqc_comm *c) {
  if (!c) return;
  vqc_ledger_destroy(c->ledger);
  c->ledger = NULL;
}

int vqc_comm_rank(const vqc_comm *c) { return c->rank; }
int vqc_comm_size(const vqc_comm *c) { return c->size; }
vqc_backend vqc_comm_backend(const vqc_comm *c) { return c->backend; }
vqc_comm *vqc_comm_side(vqc_comm *c) { return c->side; }
vqc_ledger *vqc_comm_ledger(vqc_comm *c) { return c->ledger; }

void vqc_comm_set_timeout(vqc_comm *c, double seconds) {
  c->timeout_s = seconds > 0 ? seconds : VQC_COMM_DEFAULT_TIMEOUT_S;
  if (c->side) c->side->timeout_s = c->timeout_s;
}

double vqc_comm_timeout(const vqc_comm *c) { return c->timeout_s; }

void vqc_comm_set_overall_deadline(vqc_comm *c, double seconds) {
  c->until_ns = seconds > 0 ? vqc_now_ns() + (uint64_t)(seconds * 1e9) : 0;
}

double vqc_comm_wait_budget(const vqc_comm *c) {
  if (c->until_ns == 0) return c->timeout_s;
  const uint64_t now = vqc_now_ns();
  const double left = c->until_ns > now ? (double)(c->until_ns - now) * 1e-9
                                        : 0.0;
  return left < c->timeout_s ? left : c->timeout_s;
}

vqc_status vqc_comm_set_wait_mode(vqc_comm *c, vqc_wait_mode mode) {
  if (!c) return vqc_error(VQC_EINVAL, "vqc_comm_set_wait_mode: comm is NULL");
  if (mode != VQC_WAIT_POLL && mode != VQC_WAIT_BLOCKING)
    return vqc_error(VQC_EINVAL, "unknown wait mode %d (expected "
                     "VQC_WAIT_POLL or VQC_WAIT_BLOCKING)", (int)mode);
  /* No ledger, so no watchdog could notice a blocked side channel. */
  if (mode == VQC_WAIT_BLOCKING && !c->ledger)
    return vqc_error(VQC_EINVAL, "a side channel always polls: it has no "
                     "ledger for a watchdog to see it hang");
  c->wait_mode = mode;
  return VQC_OK;
}

vqc_wait_mode vqc_comm_wait_mode(const vqc_comm *c) { return c->wait_mode; }

/* Aborts this comm only: the side channel stays usable, so checkers can
 * still exchange what they saw (e.g. deadlock reports) after the data
 * collectives were given up. */
void vqc_comm_abort(vqc_comm *c) {
  if (c->ops->abort) c->ops->abort(c);
}

/* ---- events */

vqc_status vqc_comm_subscribe(vqc_comm *c, vqc_event_fn fn, void *user) {
  if (!fn) return vqc_error(VQC_EINVAL, "event handler is NULL");
  if (!c->ledger)
    return vqc_error(VQC_EINVAL, "side channels raise no events");
  if (c->nsubs == VQC_MAX_SUBSCRIBERS)
    return vqc_error(VQC_ENOMEM, "at most %d event handlers per comm",
                     VQC_MAX_SUBSCRIBERS);
  c->subs[c->nsubs++] = (vqc_subscriber){fn, user};
  return VQC_OK;
}

void vqc_comm_unsubscribe(vqc_comm *c, vqc_event_fn fn, void *user) {
  for (int i = 0; i < c->nsubs; i++) {
    if (c->subs[i].fn == fn && c->subs[i].user == user) {
      memmove(&c->subs[i], &c->subs[i + 1],
              (size_t)(c->nsubs - i - 1) * sizeof c->subs[0]);
      c->nsubs--;
      return;
    }
  }
}

/* Calls every handler; the first non-OK status wins (the rest still run for
 * AFTER, so every checker sees every completed collective). */
static vqc_status raise_event(vqc_comm *c, vqc_coll_event *ev) {
  vqc_status first = VQC_OK;
  for (int i = 0; i < c->nsubs; i++) {
    vqc_status s = c->subs[i].fn(ev, c->subs[i].user);
    if (s != VQC_OK && first == VQC_OK) {
      first = s;
      if (ev->phase == VQC_EVENT_BEFORE) break;
    }
  }
  return first;
}

/* ---- the one path every collective takes */

/* One call, built by the entry point in its own frame: rec is the record
 * event handlers see (the ledger fills seq, rank, times and state). */
typedef struct coll_call {
  vqc_ledger_record rec; /* op, redop, dtype, count, root, site, buffers */
  vqc_tensor *tensor;
  const size_t *counts;
} coll_call;

/* Sets every field the entry points own, one store each: a designated
 * initializer would first zero the whole call (a `rep stos` costing more
 * than the rest of the record). The ledger sets the other fields of rec. */
static void call_init(coll_call *call, vqc_coll_op op, vqc_dtype dt,
                      size_t count, vqc_site site, const void *send,
                      void *recv) {
  call->rec.op = op;
  call->rec.redop = VQC_SUM; /* meaningful for ALL_REDUCE only */
  call->rec.dtype = dt;
  call->rec.count = count;
  call->rec.root = -1;
  call->rec.site = site;
  call->rec.sendbuf = send;
  call->rec.recvbuf = recv;
  call->tensor = NULL;
  call->counts = NULL;
}

/* Adds the call's logical bytes to c->stats (see vqc_comm_stats). */
static inline void count_traffic(vqc_comm *c, const coll_call *call,
                                 vqc_coll_op op) {
  const vqc_ledger_record *r = &call->rec;
  const uint64_t esz = vqc_comm_dtype_size(r->dtype);
  uint64_t sent = 0, received = 0;
  switch (op) {
    case VQC_COLL_ALL_REDUCE:
      sent = received = r->count * esz;
      break;
    case VQC_COLL_ALL_GATHER:
      sent = r->count * esz;
      received = (uint64_t)c->size * r->count * esz;
      break;
    case VQC_COLL_ALL_GATHERV:
      sent = r->count * esz;
      for (int k = 0; k < c->size; k++) received += call->counts[k] * esz;
      break;
    case VQC_COLL_BROADCAST:
      if (c->rank == r->root) sent = r->count * esz;
      else received = r->count * esz;
      break;
    default:
      break;
  }
  c->stats.calls++;
  c->stats.bytes_sent += sent;
  c->stats.bytes_received += received;
}

/* dispatch and run_collective are inlined into each entry point (always:
 * the compiler would otherwise keep them as shared functions), and the
 * collective is handed to them as `op`, read before any call the compiler
 * cannot see into (a handler could not change call->rec, but the compiler
 * cannot know): op is then the entry point's constant, the switches fold
 * away, and each collective's common path is one stretch of code. Between two
 * collectives the wrapped library evicts much of the cache, so every
 * separate function on the path is another cold fetch (bench_comm.c). */
#define HOT_INLINE static inline __attribute__((always_inline))

HOT_INLINE vqc_status dispatch(vqc_comm *c, const coll_call *call,
                               vqc_coll_op op) {
  const vqc_ledger_record *r = &call->rec;
  count_traffic(c, call, op);
  switch (op) {
    case VQC_COLL_ALL_REDUCE:
      return c->ops->all_reduce(c, r->sendbuf, r->recvbuf, r->count, r->dtype,
                                r->redop);
    case VQC_COLL_ALL_GATHER:
      return c->ops->all_gather(c, r->sendbuf, r->recvbuf, r->count, r->dtype);
    case VQC_COLL_ALL_GATHERV:
      return c->ops->all_gatherv(c, r->sendbuf, r->count, r->recvbuf,
                                 call->counts, r->dtype);
    case VQC_COLL_BROADCAST:
      return c->ops->broadcast(c, r->recvbuf, r->count, r->dtype, r->root);
    case VQC_COLL_BARRIER:
      return c->ops->barrier(c);
    default:
      return vqc_error(VQC_EINTERNAL, "unknown collective %d", (int)r->op);
  }
}

vqc_comm_stats vqc_comm_get_stats(const vqc_comm *c) {
  vqc_comm_stats none = {0, 0, 0};
  return c ? c->stats : none;
}

vqc_status vqc_comm_set_before_collective(vqc_comm *c, vqc_comm_hook_fn fn,
                                          void *user) {
  if (c == NULL || c->ledger != NULL)
    return vqc_error(VQC_EINVAL, "the collective hook is for side channels");
  if (fn != NULL && c->before_collective != NULL)
    return vqc_error(VQC_EINVAL, "the side channel already has a hook");
  c->before_collective = fn;
  c->before_collective_user = fn ? user : NULL;
  return VQC_OK;
}

HOT_INLINE vqc_status run_collective(vqc_comm *c, coll_call *call) {
  const vqc_coll_op op = call->rec.op; /* see HOT_INLINE */
  if (!c->ledger) { /* side channel */
    if (c->before_collective)
      VQC_TRY(c->before_collective(c->before_collective_user));
    return dispatch(c, call, op);
  }

  vqc_ledger_open(c->ledger, &call->rec);
  vqc_coll_event ev = {VQC_EVENT_BEFORE, c, &call->rec, call->tensor,
                       call->counts};
  vqc_status s = c->nsubs ? raise_event(c, &ev) : VQC_OK;
  if (s == VQC_OK) s = dispatch(c, call, op);
  vqc_ledger_close(c->ledger, &call->rec, s);
  if (c->nsubs) {
    ev.phase = VQC_EVENT_AFTER;
    vqc_status after = raise_event(c, &ev);
    if (s == VQC_OK) s = after;
  }
  return s;
}

static vqc_status check_common(const vqc_comm *c, vqc_dtype dt, size_t count,
                               const void *send, const void *recv,
                               const char *what, vqc_site site) {
  if (!c) return vqc_error(VQC_EINVAL, "%s at %s:%d: comm is NULL", what,
                           site.file, site.line);
  if ((unsigned)dt >= VQC_DTYPE_COUNT) /* what vqc_dtype_size calls bad */
    return vqc_error(VQC_EDTYPE, "%s at %s:%d: bad dtype %d", what, site.file,
                     site.line, (int)dt);
  if (count > 0 && (!send || !recv))
    return vqc_error(VQC_EINVAL, "%s at %s:%d: NULL buffer with count %zu",
                     what, site.file, site.line, count);
  return VQC_OK;
}

vqc_status vqc_all_reduce_at(vqc_comm *c, const void *send, void *recv,
                             size_t count, vqc_dtype dt, vqc_redop op,
                             vqc_site site) {
  VQC_TRY(check_common(c, dt, count, send, recv, "all_reduce", site));
  if ((unsigned)op >= VQC_REDOP_COUNT)
    return vqc_error(VQC_EINVAL, "all_reduce at %s:%d: bad reduction op %d",
                     site.file, site.line, (int)op);
  coll_call call;
  call_init(&call, VQC_COLL_ALL_REDUCE, dt, count, site, send, recv);
  call.rec.redop = op;
  return run_collective(c, &call);
}

vqc_status vqc_all_gather_at(vqc_comm *c, const void *send, void *recv,
                             size_t count, vqc_dtype dt, vqc_site site) {
  VQC_TRY(check_common(c, dt, count, send, recv, "all_gather", site));
  coll_call call;
  call_init(&call, VQC_COLL_ALL_GATHER, dt, count, site, send, recv);
  return run_collective(c, &call);
}

vqc_status vqc_all_gatherv_at(vqc_comm *c, const void *send, size_t sendcount,
                              void *recv, const size_t *counts, vqc_dtype dt,
                              vqc_site site) {
  VQC_TRY(check_common(c, dt, 0, send, recv, "all_gatherv", site));
  if (!counts)
    return vqc_error(VQC_EINVAL, "all_gatherv at %s:%d: counts is NULL",
                     site.file, site.line);
  size_t total = 0;
  for (int r = 0; r < c->size; r++) total += counts[r];
  if (counts[c->rank] != sendcount)
    return vqc_error(VQC_EINVAL,
                     "all_gatherv at %s:%d: rank %d sends %zu elements but "
                     "counts[%d] = %zu",
                     site.file, site.line, c->rank, sendcount, c->rank,
                     counts[c->rank]);
  if ((sendcount > 0 && !send) || (total > 0 && !recv))
    return vqc_error(VQC_EINVAL, "all_gatherv at %s:%d: NULL buffer",
                     site.file, site.line);
  coll_call call;
  call_init(&call, VQC_COLL_ALL_GATHERV, dt, sendcount, site, send, recv);
  call.counts = counts;
  return run_collective(c, &call);
}

vqc_status vqc_broadcast_at(vqc_comm *c, void *buf, size_t count, vqc_dtype dt,
                            int root, vqc_site site) {
  VQC_TRY(check_common(c, dt, count, buf, buf, "broadcast", site));
  if (root < 0 || root >= c->size)
    return vqc_error(VQC_EINVAL, "broadcast at %s:%d: root %d outside 0..%d",
                     site.file, site.line, root, c->size - 1);
  coll_call call;
  call_init(&call, VQC_COLL_BROADCAST, dt, count, site, buf, buf);
  call.rec.root = root;
  return run_collective(c, &call);
}

vqc_status vqc_barrier_at(vqc_comm *c, vqc_site site) {
  if (!c) return vqc_error(VQC_EINVAL, "barrier at %s:%d: comm is NULL",
                           site.file, site.line);
  coll_call call;
  call_init(&call, VQC_COLL_BARRIER, VQC_U8, 0, site, NULL, NULL);
  return run_collective(c, &call);
}

vqc_status vqc_all_reduce_tensor_at(vqc_comm *c, vqc_tensor *t, vqc_redop op,
                                    vqc_site site) {
  if (!t || !t->storage)
    return vqc_error(VQC_EINVAL, "all_reduce at %s:%d: empty tensor",
                     site.file, site.line);
  if (!vqc_tensor_is_contiguous(t))
    return vqc_error(VQC_ESHAPE,
                     "all_reduce at %s:%d: tensor is not contiguous; reduce a "
                     "contiguous copy and write it back "
                     "(vqc_tensor_contiguous + vqc_tensor_copy_to_origin)",
                     site.file, site.line);
  size_t count = (size_t)vqc_tensor_numel(t);
  /* Untracked: moving the bytes is not a use of the result (see the access
   * count in vqc/tensor.h, read by the lost-in-place checker). */
  void *data = vqc_tensor_data_untracked(t);
  VQC_TRY(check_common(c, t->dtype, count, data, data, "all_reduce", site));
  if ((unsigned)op >= VQC_REDOP_COUNT)
    return vqc_error(VQC_EINVAL, "all_reduce at %s:%d: bad reduction op %d",
                     site.file, site.line, (int)op);
  coll_call call;
  call_init(&call, VQC_COLL_ALL_REDUCE, t->dtype, count, site, data, data);
  call.rec.redop = op;
  call.tensor = t;
  return run_collective(c, &call);
}

vqc_status vqc_all_reduce_tensor_out_at(vqc_comm *c, const vqc_tensor *in,
                                        vqc_tensor *out, vqc_redop op,
                                        vqc_site site) {
  if (!in || !in->storage || !out || !out->storage)
    return vqc_error(VQC_EINVAL, "all_reduce at %s:%d: empty tensor",
                     site.file, site.line);
  if (!vqc_tensor_is_contiguous(in) || !vqc_tensor_is_contiguous(out))
    return vqc_error(VQC_ESHAPE, "all_reduce at %s:%d: %s tensor is not "
                     "contiguous", site.file, site.line,
                     vqc_tensor_is_contiguous(in) ? "output" : "input");
  if (in->dtype != out->dtype)
    return vqc_error(VQC_EDTYPE, "all_reduce at %s:%d: input is %s but "
                     "output is %s", site.file, site.line,
                     vqc_dtype_name(in->dtype), vqc_dtype_name(out->dtype));
  size_t count = (size_t)vqc_tensor_numel(in);
  if ((size_t)vqc_tensor_numel(out) != count)
    return vqc_error(VQC_ESHAPE, "all_reduce at %s:%d: input has %zu "
                     "elements but output has %lld", site.file, site.line,
                     count, (long long)vqc_tensor_numel(out));
  const void *send = vqc_tensor_data_untracked(in);
  void *recv = vqc_tensor_data_untracked(out);
  VQC_TRY(check_common(c, in->dtype, count, send, recv, "all_reduce", site));
  if ((unsigned)op >= VQC_REDOP_COUNT)
    return vqc_error(VQC_EINVAL, "all_reduce at %s:%d: bad reduction op %d",
                     site.file, site.line, (int)op);
  coll_call call;
  call_init(&call, VQC_COLL_ALL_REDUCE, in->dtype, count, site, send, recv);
  call.rec.redop = op;
  call.tensor = out;
  return run_collective(c, &call);
}

/* ---- reductions shared by CPU backends */

/* Integer sums wrap (two's complement, like MPI implementations in
 * practice) instead of overflowing, which C leaves undefined: UT is the
 * unsigned twin of T. */
#define REDUCE_LOOP(T, UT)                                                   \
  do {                                                                       \
    T *d = dst;                                                              \
    const T *s = src;                                                        \
    switch (op) {                                                            \
      case VQC_SUM:                                                          \
        for (size_t i = 0; i < count; i++) d[i] = (T)((UT)d[i] + (UT)s[i]);  \
        break;                                                               \
      case VQC_MIN:                                                          \
        for (size_t i = 0; i < count; i++) d[i] = s[i] < d[i] ? s[i] : d[i]; \
        break;                                                               \
      case VQC_MAX:                                                          \
        for (size_t i = 0; i < count; i++) d[i] = s[i] > d[i] ? s[i] : d[i]; \
        break;                                                               \
      default: break;                                                        \
    }                                                                        \
  } while (0)

void vqc_reduce_into(void *dst, const void *src, size_t count, vqc_dtype dt,
                     vqc_redop op) {
  switch (dt) {
    case VQC_F32: REDUCE_LOOP(float, float); break;
    case VQC_F64: REDUCE_LOOP(double, double); break;
    case VQC_I32: REDUCE_LOOP(int32_t, uint32_t); break;
    case VQC_I64: REDUCE_LOOP(int64_t, uint64_t); break;
    case VQC_U8: REDUCE_LOOP(uint8_t, uint8_t); break;
    default: break;
  }
}
