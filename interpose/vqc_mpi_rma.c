/* vqc_mpi_rma.c: one-sided communication (RMA windows).
 *
 * A window is made by every member of a communicator at once
 * (MPI_Win_create, _allocate, _allocate_shared, _create_dynamic: recorded
 * as the collective "win_create" of that communicator), and from then on
 * has collectives of its own: MPI_Win_fence and MPI_Win_free, recorded as
 * "win_fence" and "win_free" of the window's group, a comm_info named
 * "<communicator>/win<k>" (info_derived) whose collectives are numbered
 * apart from the communicator's. So a rank that skips a fence, or frees
 * the window while the others fence, is a deadlock or a mismatch like any
 * other collective's, and a rank waiting in a fence is told so.
 *
 * Each rank's RMA operations (MPI_Put, MPI_Get, the accumulates, and their
 * request forms) are kept until a synchronisation completes them:
 * MPI_Win_fence, MPI_Win_unlock (those to its target), MPI_Win_unlock_all,
 * MPI_Win_flush(_local)(_all), MPI_Win_complete. Three checks, each a
 * finding on the live record:
 *   never completed  one still incomplete when the window is freed, or at
 *                    MPI_Finalize, never happened as far as the program
 *                    can know (MPI requires every epoch closed before
 *                    MPI_Win_free): a deadlock finding at the operation,
 *                    like a request's;
 *   origin overlap   an operation whose origin buffer shares bytes with
 *                    an incomplete one's, one of the two writing them (a
 *                    Get into the buffer a Put sends, two Gets into one
 *                    buffer): lost_inplace, once per call site;
 *   origin changed   the bytes a Put or an accumulate sends, hashed when
 *                    it is issued, differ when it completes: the program
 *                    wrote into them meanwhile (lost_inplace, once per
 *                    site).
 * And every completed operation's access to its target's window memory
 * (and its origin buffer's, when that lies in this rank's own window
 * memory) goes to rank-<r>.rma.jsonl (vqc_mpi_rma_record.c), where the
 * analysis finds two ranks' conflicting accesses to one location
 * (harness/run/rma_races.h).
 *
 * Not checked: loads and stores of the window's memory (only MPI calls are
 * seen), and the epoch rules (a lock inside a fence epoch, ...). Origin
 * buffers and target types with holes are not compared. Windows past
 * WINDOWS_MAX at once, and operations past OPS_MAX incomplete on one
 * window, are not followed (never a finding that may be wrong), and the
 * rank's end line says so (record_incomplete: the verdict is then never
 * green). */
#include "vqc_mpi_internal.h"

#include <limits.h>

#define WINDOWS_MAX 64
#define OPS_MAX 65536 /* incomplete operations kept per window */
#define LOCKS_MAX 16 /* locks (MPI_Win_lock) held at once per window */
#define SCAN_MAX 256 /* a window's latest operations a new one's origin
                        buffer is compared with */

typedef struct window {
  MPI_Win win;
  comm_info *ci;      /* its group: one reference */
  uintptr_t base, size; /* this rank's window memory (size 0: unknown) */
  uint64_t fences;    /* MPI_Win_fence calls returned */
  /* This rank's epochs on the window (the epoch rules below). */
  struct held_lock {
    int target;
    bool excl;
    const site *s;    /* its MPI_Win_lock */
  } locks[LOCKS_MAX]; /* held (MPI_Win_lock, not yet unlocked) */
  int nlocks;
  const site *lock_all; /* MPI_Win_lock_all held: its site; NULL: none */
  bool fence_open;    /* the last fence may begin an epoch (it did not
                         assert MPI_MODE_NOSUCCEED) ... */
  const site *fence_site; /* ... at this call */
  const site *inside; /* a passive-target epoch opened since (its lock's
                         site): inside the fence epoch if another fence
                         comes and it made an operation ... */
  const char *inside_call;
  const site *mixed;  /* ... which it did: told at the next fence */
  const char *mixed_call;
  const site *made;   /* its MPI_Win_create */
  bool on_stack;      /* its memory is on the stack of ... */
  pthread_t stack_of; /* ... this thread */
  bool memory_told;   /* a finding on its memory made */
  rma_op *ops;        /* incomplete, in issue order (owned) */
  size_t nops, cap;
  long long more;     /* incomplete past OPS_MAX (their targets unknown) */
} window;

static window windows[WINDOWS_MAX];
static int nwindows;
/* Incomplete operations that write their origin buffer (a Get), on every
 * window: while there are none, a put's buffer cannot conflict and is not
 * compared with the others'. */
static size_t writing;
static uint64_t ops_issued; /* this rank's, numbering them */

/* Window w's entry (under lock()); NULL when not followed. */
static window *find(MPI_Win w) {
  for (int i = 0; i < nwindows; i++)
    if (windows[i].win == w) return &windows[i];
  return NULL;
}

/* Window w's group, with a reference the caller gives back; NULL: none. */
static comm_info *group_of(MPI_Win w) {
  if (!g.on || w == MPI_WIN_NULL) return NULL;
  lock();
  window *x = find(w);
  comm_info *ci = x ? x->ci : NULL;
  if (ci) __atomic_add_fetch(&ci->refs, 1, __ATOMIC_RELAXED);
  unlock();
  return ci;
}

/* A blocking collective of a window's group, recorded as op. */
static void begin_win(call *c, comm_info *ci, const char *op, uintptr_t pc) {
  tinfo t;
  type_info(MPI_DATATYPE_NULL, &t);
  record_ci(c, true, ci, op, "", &t, 0, -1, pc);
}

/* ---- the window's memory
 *
 * MPI_Win_create exposes memory the program gives. Two mistakes make the
 * other ranks' accesses to it land nowhere, or crash this one: a
 * lost_inplace finding, once per window:
 *   not mapped  the bytes [base, base + size) are not all this process's
 *               memory (a NULL or never set pointer): probed at
 *               MPI_Win_create, a byte in each of up to 256 pages and the
 *               last, with process_vm_readv (an error, never a fault);
 *   dead frame  the memory is on the creating thread's stack, in the frame
 *               of a function that has returned by the time that thread
 *               fences, locks or frees the window: below the stack pointer
 *               of the MPI call's caller, where no live frame is. */

/* The lowest address of the frames live in the caller of the MPI_*
 * wrapper this is written in (a macro: the wrapper's own frame). */
#define LIVE_STACK ((uintptr_t)__builtin_frame_address(0) + 2 * sizeof(void *))

static bool mapped(uintptr_t lo, uintptr_t n) {
  enum { PAGES = 256 };
  char sink[PAGES + 1];
  struct iovec remote[PAGES + 1], local = {sink, 0};
  const uintptr_t step = n / PAGES > 4096 ? n / PAGES : 4096;
  size_t k = 0;
  for (uintptr_t a = lo; a - lo < n && k < PAGES; a += step)
    remote[k++] = (struct iovec){(void *)a, 1};
  remote[k++] = (struct iovec){(void *)(lo + n - 1), 1};
  local.iov_len = k;
  return process_vm_readv(getpid(), &local, 1, remote, k, 0) == (ssize_t)k;
}

/* Whether a is on this thread's stack. */
static bool on_own_stack(uintptr_t a) {
  pthread_attr_t at;
  void *lo = NULL;
  size_t n = 0;
  if (pthread_getattr_np(pthread_self(), &at) != 0) return false;
  const bool ok = pthread_attr_getstack(&at, &lo, &n) == 0;
  pthread_attr_destroy(&at);
  return ok && a >= (uintptr_t)lo && a - (uintptr_t)lo < n;
}

static void memory_finding(const site *s, const char *msg) {
  char detail[200];
  snprintf(detail, sizeof detail,
           "\"mpi_call\":\"MPI_Win_create\",\"window_memory\":true,"
           "\"rma\":true");
  race_finding(s, msg, detail);
}

/* Window x's memory, not all mapped: the finding (under lock()). */
static void tell_unmapped(window *x, uintptr_t base, uintptr_t size) {
  char here[600], msg[1600], addr[32] = "NULL";
  site_at(x->made, here, sizeof here);
  if (base) snprintf(addr, sizeof addr, "%#llx", (unsigned long long)base);
  x->memory_told = true;
  snprintf(msg, sizeof msg,
           "rank %d's MPI_Win_create at %s exposes %llu bytes at %s as "
           "window %s, but they are not all this process's memory (%s): "
           "other ranks' puts into the window land nowhere and their gets "
           "read nothing, or crash this rank (pass the buffer the window "
           "should expose, allocated before the call)",
           g.rank, here, (unsigned long long)size, addr, x->ci->name,
           base ? "not mapped" : "a NULL pointer");
  memory_finding(x->made, msg);
}

/* At call fn (returning to pc) whose caller's live frames start at
 * live_lo: x's memory in a returned frame is a finding (under lock()). */
static void check_dead_frame(window *x, uintptr_t live_lo, const char *fn,
                             uintptr_t pc) {
  if (!x->on_stack || x->memory_told || x->base >= live_lo ||
      !pthread_equal(x->stack_of, pthread_self()))
    return;
  char here[600], made[600], msg[2000];
  site_at(site_of(pc), here, sizeof here);
  site_at(x->made, made, sizeof made);
  x->memory_told = true;
  snprintf(msg, sizeof msg,
           "rank %d's window %s exposes memory on the stack of %s, which "
           "has returned by the time %s at %s uses the window: the "
           "window's %llu bytes now hold other calls' locals, so other "
           "ranks' puts overwrite them and their gets read them (give "
           "MPI_Win_create memory that lives as long as the window: "
           "allocate it, or make it in the function that frees the window)",
           g.rank, x->ci->name, made, fn, here,
           (unsigned long long)x->size);
  memory_finding(x->made, msg);
}

/* After a window-making call fn at pc on comm that returned rc with *win,
 * this rank's memory [base, base + size) in units of disp_unit (given:
 * the program's own, MPI_Win_create's, checked). The window is followed
 * until MPI_Win_free (vqc_mpi_leaks.c). */
static void win_made(MPI_Comm comm, const MPI_Win *win, int rc,
                     const void *base, MPI_Aint size, int disp_unit,
                     bool given, const char *fn, uintptr_t pc) {
  if (!g.on || rc != MPI_SUCCESS || !win || *win == MPI_WIN_NULL) return;
  obj_made(OBJ_WIN, OBJ_KEY(*win), fn, pc);
  comm_info *ci = info_derived(info_of(comm), "win");
  if (!ci) return;
  const site *s = site_of(pc);
  const uintptr_t b = (uintptr_t)base;
  const bool bad = given && size > 0 && !mapped(b, (uintptr_t)size);
  const bool stack = given && size > 0 && !bad && on_own_stack(b);
  lock();
  const bool room = nwindows < WINDOWS_MAX;
  if (room) {
    window *x = &windows[nwindows++];
    *x = (window){.win = *win, .ci = ci, .base = b,
                  .size = !bad && size > 0 ? (uintptr_t)size : 0,
                  .made = s, .on_stack = stack, .stack_of = pthread_self()};
    rma_record_window(ci->name, disp_unit);
    if (bad) tell_unmapped(x, b, (uintptr_t)size);
  }
  unlock();
  if (!room) {
    char at[600];
    site_at(s, at, sizeof at);
    record_incomplete("VQC_EUNSUPPORTED", "its windows past %d at once "
                      "were not followed (%s, made at %s), so their RMA "
                      "operations were not checked", WINDOWS_MAX, ci->name,
                      at);
    info_unref(ci);
  }
}

/* The world rank of rank r of ci's group. */
static int world_of(const comm_info *ci, int r) {
  return r >= 0 && r < ci->size && ci->world ? ci->world[r] : r;
}

/* ---- an operation's bytes */

/* The bytes count items of target type dt cover at the target: *off from
 * the displacement, *bytes of them; false for a type with holes (its span
 * covers bytes it does not touch, which another rank may use). */
static bool target_span(int count, MPI_Datatype dt, long long *off,
                        long long *bytes) {
  MPI_Aint tlb = 0, text = 0, lb = 0, ext = 0;
  int size = 0;
  if (count <= 0 || dt == MPI_DATATYPE_NULL ||
      PMPI_Type_get_true_extent(dt, &tlb, &text) != MPI_SUCCESS ||
      PMPI_Type_get_extent(dt, &lb, &ext) != MPI_SUCCESS ||
      PMPI_Type_size(dt, &size) != MPI_SUCCESS || size <= 0 || text <= 0)
    return false;
  const long long span = (long long)(count - 1) * (long long)ext + text;
  if ((long long)size * count != span) return false;
  *off = (long long)tlb;
  *bytes = span;
  return true;
}

/* An operation fn issued at pc: access at the target, target_count items
 * of target_dt at target_disp of target. Origin spans are added by the
 * caller (reads, writes). */
static rma_op op_new(const char *fn, char access, int target,
                     MPI_Aint target_disp, int target_count,
                     MPI_Datatype target_dt, uintptr_t pc) {
  rma_op o = {.call = fn, .s = site_of(pc), .target = target,
              .access = access, .disp = (long long)target_disp,
              .t0 = now_ns()};
  if (!target_span(target_count, target_dt, &o.off, &o.bytes)) o.bytes = 0;
  return o;
}

/* o reads count items of dt at buf (hashed now). */
static void reads(rma_op *o, const void *buf, int count, MPI_Datatype dt) {
  if (solid_span(buf, count, dt, &o->rlo, &o->rhi) && o->rhi > o->rlo)
    o->rhashed = hash_span(o->rlo, o->rhi, &o->rhash);
  else
    o->rlo = o->rhi = 0;
}

/* o writes count items of dt at buf. */
static void writes(rma_op *o, void *buf, int count, MPI_Datatype dt) {
  if (!solid_span(buf, count, dt, &o->wlo, &o->whi) || o->whi <= o->wlo)
    o->wlo = o->whi = 0;
}

/* Bytes [alo, ahi) and [blo, bhi) share: how many (0: none). */
static uintptr_t shared(uintptr_t alo, uintptr_t ahi, uintptr_t blo,
                        uintptr_t bhi) {
  const uintptr_t lo = alo > blo ? alo : blo, hi = ahi < bhi ? ahi : bhi;
  return ahi > alo && bhi > blo && lo < hi ? hi - lo : 0;
}

/* ---- the checks */

/* New operation o against the incomplete ones (under lock(); the last
 * SCAN_MAX of each window): the first whose origin bytes o's share, one
 * of the two writing them, into *other with how many bytes; 0 when none. */
static uintptr_t origin_conflict(const rma_op *o, rma_op *other) {
  for (int i = 0; i < nwindows; i++)
    for (size_t k = windows[i].nops > SCAN_MAX ? windows[i].nops - SCAN_MAX
                                               : 0;
         k < windows[i].nops; k++) {
      const rma_op *q = &windows[i].ops[k];
      uintptr_t n = shared(o->wlo, o->whi, q->rlo, q->rhi);
      if (!n) n = shared(o->wlo, o->whi, q->wlo, q->whi);
      if (!n) n = shared(o->rlo, o->rhi, q->wlo, q->whi);
      if (n) {
        *other = *q;
        return n;
      }
    }
  return 0;
}

static void tell_origin_conflict(const rma_op *o, const rma_op *q,
                                 uintptr_t n) {
  char here[600], there[600], msg[2600], detail[900];
  site_at(o->s, here, sizeof here);
  site_at(q->s ? q->s : &overflow_site, there, sizeof there);
  const bool o_writes = o->whi > o->wlo &&
                        shared(o->wlo, o->whi, q->rlo, q->rhi) +
                        shared(o->wlo, o->whi, q->wlo, q->whi) > 0;
  snprintf(msg, sizeof msg,
           "rank %d's %s at %s %s %llu bytes of the origin buffer of its %s "
           "at %s, which no synchronisation has completed yet: %s (complete "
           "the first with MPI_Win_fence, MPI_Win_flush or MPI_Win_unlock, "
           "or use another buffer)",
           g.rank, o->call, here, o_writes ? "writes" : "reads",
           (unsigned long long)n, q->call, there,
           q->whi > q->wlo
               ? "MPI writes an RMA result into its origin buffer at a moment "
                 "the program does not know, so these bytes may be "
                 "overwritten or half written"
               : "MPI may still be reading that operation's origin buffer, "
                 "so it may carry the old bytes, the new ones or a mix");
  snprintf(detail, sizeof detail,
           "\"mpi_call\":\"%s\",\"in_flight\":\"%s\",\"in_flight_site\":"
           "\"%.300s\",\"overlap_bytes\":%llu,\"race\":true,\"rma\":true",
           o->call, q->call, there, (unsigned long long)n);
  race_finding(o->s, msg, detail);
}

/* o completed by `how` at pc: a finding when the bytes it reads changed
 * since it was issued (under lock()). */
static void check_changed(const rma_op *o, const char *how, uintptr_t pc) {
  uint64_t now;
  if (!o->rhashed || !hash_span(o->rlo, o->rhi, &now) || now == o->rhash ||
      !o->s || !site_first_locked(o->s, REPORTED_CHANGED))
    return;
  char here[600], done[600], msg[2600], detail[800];
  site_at(o->s, here, sizeof here);
  site_at(site_of(pc), done, sizeof done);
  snprintf(msg, sizeof msg,
           "rank %d changed the origin buffer of its %s (%llu bytes) at %s "
           "before the operation completed (completed by %s at %s): MPI may "
           "send the old bytes, the new ones or a mix (an RMA operation's "
           "origin buffer must not change until a fence, unlock, flush or "
           "complete ends it)",
           g.rank, o->call, (unsigned long long)(o->rhi - o->rlo), here, how,
           done);
  snprintf(detail, sizeof detail,
           "\"mpi_call\":\"%s\",\"completed_at\":\"%.300s\",\"bytes\":%llu,"
           "\"changed_in_flight\":true,\"rma\":true", o->call, done,
           (unsigned long long)(o->rhi - o->rlo));
  race_finding(o->s, msg, detail);
}

/* Operation o of window x complete at t1 (by a fence: fence): its
 * accesses recorded (under lock()). */
static void record_accesses(const window *x, const rma_op *o, bool fence,
                            uint64_t t1) {
  if (o->unrecorded) return;
  if (o->bytes > 0)
    rma_record_access(x->ci->name, o, o->access, world_of(x->ci, o->target),
                      o->disp, 0, o->off, o->bytes, fence, t1);
  /* Its origin buffer inside this rank's own window memory: an access of
   * that memory too (a Get into it writes it). */
  const uintptr_t lo = x->base, hi = x->base + x->size;
  if (x->size > 0 && o->whi > o->wlo && o->wlo >= lo && o->whi <= hi)
    rma_record_access(x->ci->name, o, 'w', g.rank, (long long)(o->wlo - lo),
                      1, 0, (long long)(o->whi - o->wlo), fence, t1);
  else if (x->size > 0 && o->rhi > o->rlo && o->rlo >= lo && o->rhi <= hi)
    rma_record_access(x->ci->name, o, 'r', g.rank, (long long)(o->rlo - lo),
                      1, 0, (long long)(o->rhi - o->rlo), fence, t1);
}

/* ---- issued and completed */

/* Operation o on w issued (its call returned rc): kept until a
 * synchronisation completes it. */
static void issued(MPI_Win w, rma_op o, int rc) {
  if (!g.on || rc != MPI_SUCCESS || o.target == MPI_PROC_NULL) return;
  rma_op other;
  uintptr_t n = 0;
  lock();
  window *x = find(w);
  if (x) {
    o.id = ++ops_issued;
    o.epoch = x->fences;
    for (int i = 0; i < x->nlocks && !o.excl; i++)
      o.excl = x->locks[i].excl && x->locks[i].target == o.target;
    if (x->inside && !x->mixed) {
      x->mixed = x->inside;
      x->mixed_call = x->inside_call;
    }
    if (writing > 0 || o.whi > o.wlo) n = origin_conflict(&o, &other);
    if (n && !site_first_locked(o.s, REPORTED_RACE)) n = 0;
    if (x->nops == x->cap && x->cap < OPS_MAX) {
      const size_t c = x->cap ? 2 * x->cap : 8;
      rma_op *grown = realloc(x->ops, c * sizeof *grown);
      if (grown) {
        x->ops = grown;
        x->cap = c;
      }
    }
    if (x->nops < x->cap) {
      x->ops[x->nops++] = o;
      if (o.whi > o.wlo) writing++;
    } else {
      if (x->more++ == 0)
        record_incomplete("VQC_EUNSUPPORTED", "its RMA operations past "
                          "%d in flight at once on window %s were not "
                          "followed, so they were not checked", OPS_MAX,
                          x->ci->name);
    }
  }
  unlock();
  if (n) tell_origin_conflict(&o, &other, n);
}

/* How a synchronisation completes operations, for their record. */
enum { BY_FENCE, BY_PASSIVE /* unlock, flush */, BY_COMPLETE };

/* w's operations to target complete (target < 0: all of them), by the
 * call `how` returning to pc. A target's completion with operations past
 * OPS_MAX completes them all: never a finding that may be wrong.
 * MPI_Win_complete's are not recorded: a generalized active-target
 * epoch's next access may be issued (MPI_Win_start need not wait for the
 * target's post) before the last epoch's MPI_Win_complete returns, so
 * their times do not order them (rma_races.h). */
static void synced(MPI_Win w, int target, const char *how, int by,
                   uintptr_t pc) {
  const bool fence = by == BY_FENCE;
  if (!g.on) return;
  const uint64_t t1 = now_ns();
  lock();
  window *x = find(w);
  if (x) {
    const bool all = target < 0 || x->more > 0;
    size_t k = 0;
    for (size_t i = 0; i < x->nops; i++) {
      const rma_op *o = &x->ops[i];
      if (!all && o->target != target) {
        x->ops[k++] = *o;
        continue;
      }
      check_changed(o, how, pc);
      if (by != BY_COMPLETE) record_accesses(x, o, fence, t1);
      if (o->whi > o->wlo) writing--;
    }
    x->nops = k;
    if (all) x->more = 0;
    rma_record_flush();
  }
  unlock();
}

/* The finding for window x's incomplete operations, met at `when`
 * ("MPI_Win_free at x.c:30 (main)", "MPI_Finalize"); x under lock(). */
static void never_completed(const window *x, const char *when) {
  if (x->nops == 0 && x->more == 0) return;
  const rma_op *o = x->nops > 0 ? &x->ops[0] : NULL;
  const site *s = o && o->s ? o->s : &overflow_site;
  const comm_info *ci = x->ci;
  const int wt = o ? world_of(ci, o->target) : -1;
  char file[1100], func[520], name[420], at[700], whenj[800], more[96] = "";
  json_esc(file, sizeof file, s->file);
  json_esc(func, sizeof func, s->func);
  json_esc(name, sizeof name, ci->name);
  json_esc(whenj, sizeof whenj, when);
  snprintf(at, sizeof at, "%.300s:%d (%.200s)", base_name(file), s->line,
           func);
  const long long n = (long long)x->nops + x->more;
  if (n > 1) snprintf(more, sizeof more, " (and %lld more)", n - 1);
  char b[4096];
  const int k = snprintf(b, sizeof b,
      "{\"event\":\"finding\",\"finding\":{\"kind\":\"deadlock\","
      "\"step\":-1,\"ranks\":[%d],\"site\":{\"file\":\"%.400s\","
      "\"line\":%d,\"func\":\"%.200s\"},\"message\":\"rank %d's %s %s rank "
      "%d at %s on window %s%s never completed: no MPI_Win_fence, "
      "MPI_Win_unlock, MPI_Win_flush or MPI_Win_complete after it before "
      "%s, so the program cannot know that it happened (MPI requires every "
      "access epoch closed before MPI_Win_free)\",\"detail\":{\"call\":"
      "\"%s\",\"target\":%d,\"window\":\"%s\",\"incomplete\":%lld,"
      "\"never_completed\":true,\"rma\":true}}}\n",
      g.rank, file, s->line, func, g.rank, o ? o->call : "RMA",
      o && o->access == 'r' ? "from" : "to", wt, at, name, more, whenj,
      o ? o->call : "", wt, name, n);
  if (k > 0 && (size_t)k < sizeof b) live_write(b, (size_t)k);
}

/* Window x let go (under lock()): its group's reference, to give back. */
static comm_info *let_go(window *x) {
  comm_info *own = x->ci;
  for (size_t i = 0; i < x->nops; i++)
    if (x->ops[i].whi > x->ops[i].wlo) writing--;
  free(x->ops);
  *x = windows[--nwindows];
  return own;
}

/* MPI_Finalize: windows never freed, their incomplete operations told. */
void rma_finalize(void) {
  lock();
  while (nwindows > 0) {
    never_completed(&windows[0], "MPI_Finalize");
    info_unref(let_go(&windows[0]));
  }
  rma_record_close();
  unlock();
}

/* ---- making and freeing windows */

int MPI_Win_create(void *base, MPI_Aint size, int disp_unit, MPI_Info info,
                   MPI_Comm comm, MPI_Win *win) {
  call c;
  begin(&c, comm, "win_create", "", MPI_DATATYPE_NULL, 0, -1, RA);
  const int rc = PMPI_Win_create(base, size, disp_unit, info, comm, win);
  end(&c, rc);
  win_made(comm, win, rc, base, size, disp_unit, true, "MPI_Win_create", RA);
  return rc;
}

int MPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info,
                     MPI_Comm comm, void *baseptr, MPI_Win *win) {
  call c;
  begin(&c, comm, "win_create", "", MPI_DATATYPE_NULL, 0, -1, RA);
  const int rc = PMPI_Win_allocate(size, disp_unit, info, comm, baseptr, win);
  end(&c, rc);
  win_made(comm, win, rc, rc == MPI_SUCCESS ? *(void **)baseptr : NULL, size,
           disp_unit, false, "MPI_Win_allocate", RA);
  return rc;
}

int MPI_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info info,
                            MPI_Comm comm, void *baseptr, MPI_Win *win) {
  call c;
  begin(&c, comm, "win_create", "", MPI_DATATYPE_NULL, 0, -1, RA);
  const int rc =
      PMPI_Win_allocate_shared(size, disp_unit, info, comm, baseptr, win);
  end(&c, rc);
  win_made(comm, win, rc, rc == MPI_SUCCESS ? *(void **)baseptr : NULL, size,
           disp_unit, false, "MPI_Win_allocate_shared", RA);
  return rc;
}

int MPI_Win_create_dynamic(MPI_Info info, MPI_Comm comm, MPI_Win *win) {
  call c;
  begin(&c, comm, "win_create", "", MPI_DATATYPE_NULL, 0, -1, RA);
  const int rc = PMPI_Win_create_dynamic(info, comm, win);
  end(&c, rc);
  /* Displacements are addresses (MPI_Win_attach): unit 1, no memory. */
  win_made(comm, win, rc, NULL, 0, 1, false, "MPI_Win_create_dynamic", RA);
  return rc;
}

int MPI_Win_free(MPI_Win *win) {
  const MPI_Win w = win ? *win : MPI_WIN_NULL;
  comm_info *ci = group_of(w);
  call c;
  c.ci = NULL;
  if (ci) {
    const site *s = site_of(RA);
    char when[700];
    snprintf(when, sizeof when, "MPI_Win_free at %.300s:%d (%.200s)",
             base_name(s->file), s->line, s->func);
    lock();
    window *x = find(w);
    if (x) {
      check_dead_frame(x, LIVE_STACK, "MPI_Win_free", RA);
      never_completed(x, when);
    }
    unlock();
    begin_win(&c, ci, "win_free", RA);
  }
  const int rc = PMPI_Win_free(win);
  end(&c, rc);
  if (rc == MPI_SUCCESS && w != MPI_WIN_NULL)
    obj_freed(OBJ_WIN, OBJ_KEY(w)); /* vqc_mpi_leaks.c */
  if (ci && rc == MPI_SUCCESS) {
    lock();
    window *x = find(w);
    comm_info *own = x ? let_go(x) : NULL;
    unlock();
    info_unref(own);
  }
  info_unref(ci);
  return rc;
}

/* ---- synchronisation */

/* ---- the epoch rules
 *
 * MPI keeps a window's synchronisations apart: an epoch of one kind must
 * not begin inside another's. Told once per call site, each a deadlock
 * finding (an MPI may refuse the call, hang, or let the operations land
 * at no defined time: the program's own rma_clean.c hung this way when a
 * window was locked while exposed):
 *   - MPI_Win_fence while this rank holds a lock (MPI_Win_lock or
 *     MPI_Win_lock_all) on the window;
 *   - MPI_Win_lock on a target this rank has locked already, or while its
 *     MPI_Win_lock_all holds; MPI_Win_lock_all while it holds a lock;
 *   - a passive-target epoch (a lock, then operations) between two fences,
 *     when the first did not assert MPI_MODE_NOSUCCEED: the fence epoch
 *     holds it (told at the second fence, which proves the fence epoch). */

/* A finding of this rank at s: message msg (JSON-escaped here), detail
 * the members of its "detail". */
static void epoch_finding(const site *s, const char *msg,
                          const char *detail) {
  char file[1100], func[520], m[9000], b[12000];
  json_esc(file, sizeof file, s->file);
  json_esc(func, sizeof func, s->func);
  json_esc(m, sizeof m, msg);
  const int k = snprintf(b, sizeof b,
      "{\"event\":\"finding\",\"finding\":{\"kind\":\"deadlock\","
      "\"step\":-1,\"ranks\":[%d],\"site\":{\"file\":\"%.400s\","
      "\"line\":%d,\"func\":\"%.200s\"},\"message\":\"%s\",\"detail\":"
      "{%s,\"epochs_mixed\":true,\"rma\":true}}}\n",
      g.rank, file, s->line, func, m, detail);
  if (k > 0 && (size_t)k < sizeof b) live_write(b, (size_t)k);
}

/* The window name and a lock's description for a finding (x under
 * lock()): "MPI_Win_lock of rank 1 at a.c:12 (main)". */
static void held_text(const window *x, char *b, size_t n) {
  char at[600];
  if (x->lock_all) {
    site_at(x->lock_all, at, sizeof at);
    snprintf(b, n, "its MPI_Win_lock_all at %s", at);
  } else if (x->nlocks > 0) {
    site_at(x->locks[0].s, at, sizeof at);
    snprintf(b, n, "its MPI_Win_lock of rank %d at %s",
             world_of(x->ci, x->locks[0].target), at);
  } else {
    snprintf(b, n, "a lock");
  }
}

/* MPI_Win_fence at pc entered on w: the rules above (under lock()). */
static void fence_rules(window *x, uintptr_t pc) {
  const site *s = site_of(pc);
  char here[600], held[800], msg[4400], det[900], name[420];
  site_at(s, here, sizeof here);
  json_esc(name, sizeof name, x->ci->name);
  if ((x->nlocks > 0 || x->lock_all) &&
      site_first_locked(s, REPORTED_EPOCH)) {
    held_text(x, held, sizeof held);
    snprintf(msg, sizeof msg,
             "rank %d calls MPI_Win_fence at %s on window %s while %s "
             "still holds: a fence epoch must not begin inside a "
             "passive-target one (call MPI_Win_unlock first)",
             g.rank, here, x->ci->name, held);
    snprintf(det, sizeof det, "\"call\":\"MPI_Win_fence\",\"window\":"
             "\"%s\"", name);
    epoch_finding(s, msg, det);
  }
  if (x->mixed && site_first_locked(x->mixed, REPORTED_EPOCH)) {
    char lk[600], opened[600];
    site_at(x->mixed, lk, sizeof lk);
    site_at(x->fence_site ? x->fence_site : &overflow_site, opened,
            sizeof opened);
    snprintf(msg, sizeof msg,
             "rank %d's %s at %s opens a passive-target epoch, and makes RMA "
             "operations in it, inside the fence epoch on window %s that "
             "MPI_Win_fence at %s opened and MPI_Win_fence at %s closes: "
             "MPI forbids two kinds of epoch at once on one window, so "
             "those operations complete at no defined time (pass "
             "MPI_MODE_NOSUCCEED to the fence at %s when no fence epoch "
             "follows it, and MPI_MODE_NOPRECEDE to the next)",
             g.rank, x->mixed_call, lk, x->ci->name, opened, here, opened);
    snprintf(det, sizeof det, "\"call\":\"%s\",\"window\":\"%s\","
             "\"fence_site\":\"%.300s\"", x->mixed_call, name, opened);
    epoch_finding(x->mixed, msg, det);
  }
}

/* A lock (fn: "MPI_Win_lock" of target, or "MPI_Win_lock_all" when
 * target < 0) taken at s on x: the rules above, then kept (under
 * lock()). */
static void lock_rules(window *x, const char *fn, int target, bool excl,
                       const site *s) {
  char here[600], held[800], msg[2400], det[900], name[420];
  bool again_target = false;
  for (int i = 0; target >= 0 && i < x->nlocks; i++)
    again_target |= x->locks[i].target == target;
  if ((x->lock_all || (target < 0 && x->nlocks > 0) || again_target) &&
      site_first_locked(s, REPORTED_EPOCH)) {
    site_at(s, here, sizeof here);
    held_text(x, held, sizeof held);
    json_esc(name, sizeof name, x->ci->name);
    snprintf(msg, sizeof msg,
             "rank %d's %s at %s on window %s comes while %s still holds: "
             "MPI forbids a second lock on a window a rank has locked "
             "(unlock first, or lock every target once with "
             "MPI_Win_lock_all)",
             g.rank, fn, here, x->ci->name, held);
    snprintf(det, sizeof det, "\"call\":\"%s\",\"window\":\"%s\"",
             fn, name);
    epoch_finding(s, msg, det);
  }
  if (target < 0)
    x->lock_all = s;
  else if (x->nlocks < LOCKS_MAX)
    x->locks[x->nlocks++] = (struct held_lock){target, excl, s};
  if (x->fence_open && !x->inside) {
    x->inside = s;
    x->inside_call = fn;
  }
}

/* A lock let go (target < 0: MPI_Win_unlock_all) (under lock()). */
static void unlock_rules(window *x, int target) {
  if (target < 0) x->lock_all = NULL;
  for (int i = 0; target >= 0 && i < x->nlocks; i++)
    if (x->locks[i].target == target) {
      x->locks[i] = x->locks[--x->nlocks];
      break;
    }
  if (x->nlocks == 0 && !x->lock_all) x->inside = NULL;
}

int MPI_Win_fence(int assert, MPI_Win win) {
  comm_info *ci = group_of(win);
  call c;
  c.ci = NULL;
  if (ci) {
    lock();
    window *x = find(win);
    if (x) {
      check_dead_frame(x, LIVE_STACK, "MPI_Win_fence", RA);
      fence_rules(x, RA);
    }
    unlock();
    begin_win(&c, ci, "win_fence", RA);
  }
  const int rc = PMPI_Win_fence(assert, win);
  end(&c, rc);
  if (rc == MPI_SUCCESS) {
    synced(win, -1, "MPI_Win_fence", BY_FENCE, RA);
    lock();
    window *x = g.on ? find(win) : NULL;
    if (x) {
      x->fences++;
      x->fence_open = !(assert & MPI_MODE_NOSUCCEED);
      x->fence_site = site_of(RA);
      x->inside = x->mixed = NULL;
    }
    unlock();
  }
  info_unref(ci);
  return rc;
}

int MPI_Win_lock(int lock_type, int rank, int assert, MPI_Win win) {
  const int rc = PMPI_Win_lock(lock_type, rank, assert, win);
  if (rc == MPI_SUCCESS && g.on) {
    const site *s = site_of(RA);
    lock();
    window *x = find(win);
    if (x) check_dead_frame(x, LIVE_STACK, "MPI_Win_lock", RA);
    if (x)
      lock_rules(x, "MPI_Win_lock", rank, lock_type == MPI_LOCK_EXCLUSIVE,
                 s);
    unlock();
  }
  return rc;
}

int MPI_Win_lock_all(int assert, MPI_Win win) {
  const int rc = PMPI_Win_lock_all(assert, win);
  if (rc == MPI_SUCCESS && g.on) {
    const site *s = site_of(RA);
    lock();
    window *x = find(win);
    if (x) check_dead_frame(x, LIVE_STACK, "MPI_Win_lock_all", RA);
    if (x) lock_rules(x, "MPI_Win_lock_all", -1, false, s);
    unlock();
  }
  return rc;
}

int MPI_Win_unlock(int rank, MPI_Win win) {
  const int rc = PMPI_Win_unlock(rank, win);
  if (rc == MPI_SUCCESS) {
    synced(win, rank, "MPI_Win_unlock", BY_PASSIVE, RA);
    lock();
    window *x = g.on ? find(win) : NULL;
    if (x) unlock_rules(x, rank);
    unlock();
  }
  return rc;
}

int MPI_Win_unlock_all(MPI_Win win) {
  const int rc = PMPI_Win_unlock_all(win);
  if (rc == MPI_SUCCESS) {
    synced(win, -1, "MPI_Win_unlock_all", BY_PASSIVE, RA);
    lock();
    window *x = g.on ? find(win) : NULL;
    if (x) unlock_rules(x, -1);
    unlock();
  }
  return rc;
}

int MPI_Win_flush(int rank, MPI_Win win) {
  const int rc = PMPI_Win_flush(rank, win);
  if (rc == MPI_SUCCESS) synced(win, rank, "MPI_Win_flush", BY_PASSIVE, RA);
  return rc;
}

int MPI_Win_flush_all(MPI_Win win) {
  const int rc = PMPI_Win_flush_all(win);
  if (rc == MPI_SUCCESS) synced(win, -1, "MPI_Win_flush_all", BY_PASSIVE, RA);
  return rc;
}

int MPI_Win_flush_local(int rank, MPI_Win win) {
  const int rc = PMPI_Win_flush_local(rank, win);
  if (rc == MPI_SUCCESS)
    synced(win, rank, "MPI_Win_flush_local", BY_PASSIVE, RA);
  return rc;
}

int MPI_Win_flush_local_all(MPI_Win win) {
  const int rc = PMPI_Win_flush_local_all(win);
  if (rc == MPI_SUCCESS)
    synced(win, -1, "MPI_Win_flush_local_all", BY_PASSIVE, RA);
  return rc;
}

int MPI_Win_complete(MPI_Win win) {
  const int rc = PMPI_Win_complete(win);
  if (rc == MPI_SUCCESS) synced(win, -1, "MPI_Win_complete", BY_COMPLETE, RA);
  return rc;
}

/* ---- operations */

int MPI_Put(const void *origin_addr, int origin_count,
            MPI_Datatype origin_datatype, int target_rank,
            MPI_Aint target_disp, int target_count,
            MPI_Datatype target_datatype, MPI_Win win) {
  const int rc = PMPI_Put(origin_addr, origin_count, origin_datatype,
                          target_rank, target_disp, target_count,
                          target_datatype, win);
  if (!g.on || rc != MPI_SUCCESS) return rc;
  rma_op o = op_new("MPI_Put", 'w', target_rank, target_disp, target_count,
                    target_datatype, RA);
  reads(&o, origin_addr, origin_count, origin_datatype);
  issued(win, o, rc);
  return rc;
}

int MPI_Get(void *origin_addr, int origin_count,
            MPI_Datatype origin_datatype, int target_rank,
            MPI_Aint target_disp, int target_count,
            MPI_Datatype target_datatype, MPI_Win win) {
  const int rc = PMPI_Get(origin_addr, origin_count, origin_datatype,
                          target_rank, target_disp, target_count,
                          target_datatype, win);
  if (!g.on || rc != MPI_SUCCESS) return rc;
  rma_op o = op_new("MPI_Get", 'r', target_rank, target_disp, target_count,
                    target_datatype, RA);
  writes(&o, origin_addr, origin_count, origin_datatype);
  issued(win, o, rc);
  return rc;
}

int MPI_Accumulate(const void *origin_addr, int origin_count,
                   MPI_Datatype origin_datatype, int target_rank,
                   MPI_Aint target_disp, int target_count,
                   MPI_Datatype target_datatype, MPI_Op op, MPI_Win win) {
  const int rc = PMPI_Accumulate(origin_addr, origin_count, origin_datatype,
                                 target_rank, target_disp, target_count,
                                 target_datatype, op, win);
  if (!g.on || rc != MPI_SUCCESS) return rc;
  rma_op o = op_new("MPI_Accumulate", 'a', target_rank, target_disp,
                    target_count, target_datatype, RA);
  reads(&o, origin_addr, origin_count, origin_datatype);
  issued(win, o, rc);
  return rc;
}

int MPI_Get_accumulate(const void *origin_addr, int origin_count,
                       MPI_Datatype origin_datatype, void *result_addr,
                       int result_count, MPI_Datatype result_datatype,
                       int target_rank, MPI_Aint target_disp,
                       int target_count, MPI_Datatype target_datatype,
                       MPI_Op op, MPI_Win win) {
  const int rc = PMPI_Get_accumulate(
      origin_addr, origin_count, origin_datatype, result_addr, result_count,
      result_datatype, target_rank, target_disp, target_count,
      target_datatype, op, win);
  if (!g.on || rc != MPI_SUCCESS) return rc;
  rma_op o = op_new("MPI_Get_accumulate", 'a', target_rank, target_disp,
                    target_count, target_datatype, RA);
  if (op != MPI_NO_OP) reads(&o, origin_addr, origin_count, origin_datatype);
  writes(&o, result_addr, result_count, result_datatype);
  issued(win, o, rc);
  return rc;
}

int MPI_Fetch_and_op(const void *origin_addr, void *result_addr,
                     MPI_Datatype datatype, int target_rank,
                     MPI_Aint target_disp, MPI_Op op, MPI_Win win) {
  const int rc = PMPI_Fetch_and_op(origin_addr, result_addr, datatype,
                                   target_rank, target_disp, op, win);
  if (!g.on || rc != MPI_SUCCESS) return rc;
  rma_op o = op_new("MPI_Fetch_and_op", 'a', target_rank, target_disp, 1,
                    datatype, RA);
  if (op != MPI_NO_OP) reads(&o, origin_addr, 1, datatype);
  writes(&o, result_addr, 1, datatype);
  issued(win, o, rc);
  return rc;
}

int MPI_Compare_and_swap(const void *origin_addr, const void *compare_addr,
                         void *result_addr, MPI_Datatype datatype,
                         int target_rank, MPI_Aint target_disp,
                         MPI_Win win) {
  const int rc = PMPI_Compare_and_swap(origin_addr, compare_addr,
                                       result_addr, datatype, target_rank,
                                       target_disp, win);
  if (!g.on || rc != MPI_SUCCESS) return rc;
  rma_op o = op_new("MPI_Compare_and_swap", 'a', target_rank, target_disp, 1,
                    datatype, RA);
  reads(&o, origin_addr, 1, datatype);
  writes(&o, result_addr, 1, datatype);
  issued(win, o, rc);
  return rc;
}

int MPI_Rput(const void *origin_addr, int origin_count,
             MPI_Datatype origin_datatype, int target_rank,
             MPI_Aint target_disp, int target_count,
             MPI_Datatype target_datatype, MPI_Win win,
             MPI_Request *request) {
  const int rc = PMPI_Rput(origin_addr, origin_count, origin_datatype,
                           target_rank, target_disp, target_count,
                           target_datatype, win, request);
  if (!g.on || rc != MPI_SUCCESS) return rc;
  /* Its origin buffer is the program's again when MPI_Wait completes the
   * request (before any unlock): not hashed, not compared. */
  const rma_op o = op_new("MPI_Rput", 'w', target_rank, target_disp,
                          target_count, target_datatype, RA);
  issued(win, o, rc);
  return rc;
}

int MPI_Rget(void *origin_addr, int origin_count,
             MPI_Datatype origin_datatype, int target_rank,
             MPI_Aint target_disp, int target_count,
             MPI_Datatype target_datatype, MPI_Win win,
             MPI_Request *request) {
  const int rc = PMPI_Rget(origin_addr, origin_count, origin_datatype,
                           target_rank, target_disp, target_count,
                           target_datatype, win, request);
  if (!g.on || rc != MPI_SUCCESS) return rc;
  /* MPI_Wait on its request ends its read and fills its origin buffer
   * (before any unlock): neither its buffer nor its access is compared. */
  rma_op o = op_new("MPI_Rget", 'r', target_rank, target_disp, target_count,
                    target_datatype, RA);
  o.unrecorded = true;
  issued(win, o, rc);
  return rc;
}
