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
 * request forms) are followed until a synchronisation completes them:
 * MPI_Win_fence, MPI_Win_unlock (those to its target), MPI_Win_unlock_all,
 * MPI_Win_flush(_local)(_all), MPI_Win_complete. One still incomplete when
 * the window is freed, or at MPI_Finalize, never happened as far as the
 * program can know (MPI requires every epoch closed before MPI_Win_free):
 * a "never completed" finding at the operation, like a request's.
 *
 * Not checked: races between RMA operations and loads or stores of the
 * window's memory, and the epoch rules (a lock inside a fence epoch, ...).
 * Windows past WINDOWS_MAX at once are not followed. */
#include "vqc_mpi_internal.h"

#define WINDOWS_MAX 64
#define OPS_KEPT 8 /* incomplete operations kept per window (by target) */

typedef struct rma_op {
  const char *call; /* "MPI_Put" */
  const site *s;
  int target;       /* the target's rank in the window's group */
} rma_op;

typedef struct window {
  MPI_Win win;
  comm_info *ci;    /* its group: one reference */
  rma_op ops[OPS_KEPT];
  int nops;         /* kept in ops */
  long long more;   /* incomplete past OPS_KEPT (their targets unknown) */
} window;

static window windows[WINDOWS_MAX];
static int nwindows;

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

/* After a window-making call on comm that returned rc with *win. */
static void win_made(MPI_Comm comm, const MPI_Win *win, int rc) {
  if (!g.on || rc != MPI_SUCCESS || !win || *win == MPI_WIN_NULL) return;
  comm_info *ci = info_derived(info_of(comm), "win");
  if (!ci) return;
  lock();
  const bool room = nwindows < WINDOWS_MAX;
  if (room) windows[nwindows++] = (window){.win = *win, .ci = ci};
  unlock();
  if (!room) info_unref(ci);
}

/* An RMA operation on w to target issued at pc: incomplete until a
 * synchronisation completes it. */
static void issued(MPI_Win w, const char *fn, int target, int rc,
                   uintptr_t pc) {
  if (!g.on || rc != MPI_SUCCESS || target == MPI_PROC_NULL) return;
  const site *s = site_of(pc);
  lock();
  window *x = find(w);
  if (x && x->nops < OPS_KEPT)
    x->ops[x->nops++] = (rma_op){.call = fn, .s = s, .target = target};
  else if (x)
    x->more++;
  unlock();
}

/* w's operations to target complete (target < 0: all of them). A
 * target's completion with operations past OPS_KEPT completes them all:
 * never a finding that may be wrong. */
static void synced(MPI_Win w, int target) {
  if (!g.on) return;
  lock();
  window *x = find(w);
  if (x && (target < 0 || x->more > 0)) {
    x->nops = 0;
    x->more = 0;
  } else if (x) {
    int k = 0;
    for (int i = 0; i < x->nops; i++)
      if (x->ops[i].target != target) x->ops[k++] = x->ops[i];
    x->nops = k;
  }
  unlock();
}

/* The finding for window x's incomplete operations, met at `when`
 * ("MPI_Win_free at x.c:30 (main)", "MPI_Finalize"); x under lock(). */
static void never_completed(const window *x, const char *when) {
  if (x->nops == 0 && x->more == 0) return;
  const rma_op *o = &x->ops[0];
  const site *s = x->nops > 0 && o->s ? o->s : &overflow_site;
  const comm_info *ci = x->ci;
  const int target = x->nops > 0 ? o->target : -1;
  const int wt = target >= 0 && target < ci->size && ci->world
                     ? ci->world[target] : target;
  char file[1100], func[520], name[420], at[700], whenj[800], more[96] = "";
  json_esc(file, sizeof file, s->file);
  json_esc(func, sizeof func, s->func);
  json_esc(name, sizeof name, ci->name);
  json_esc(whenj, sizeof whenj, when);
  snprintf(at, sizeof at, "%.300s:%d (%.200s)", base_name(file), s->line,
           func);
  const long long n = x->nops + x->more;
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
      g.rank, file, s->line, func, g.rank, x->nops > 0 ? o->call : "RMA",
      x->nops > 0 && (strcmp(o->call, "MPI_Get") == 0 ||
                      strcmp(o->call, "MPI_Rget") == 0) ? "from" : "to", wt,
      at, name, more, whenj, x->nops > 0 ? o->call : "", wt, name, n);
  if (k > 0 && (size_t)k < sizeof b) live_write(b, (size_t)k);
}

/* MPI_Finalize: windows never freed, their incomplete operations told. */
void rma_finalize(void) {
  lock();
  for (int i = 0; i < nwindows; i++) {
    never_completed(&windows[i], "MPI_Finalize");
    info_unref(windows[i].ci);
  }
  nwindows = 0;
  unlock();
}

/* ---- making and freeing windows */

int MPI_Win_create(void *base, MPI_Aint size, int disp_unit, MPI_Info info,
                   MPI_Comm comm, MPI_Win *win) {
  call c;
  begin(&c, comm, "win_create", "", MPI_DATATYPE_NULL, 0, -1, RA);
  const int rc = PMPI_Win_create(base, size, disp_unit, info, comm, win);
  end(&c, rc);
  win_made(comm, win, rc);
  return rc;
}

int MPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info,
                     MPI_Comm comm, void *baseptr, MPI_Win *win) {
  call c;
  begin(&c, comm, "win_create", "", MPI_DATATYPE_NULL, 0, -1, RA);
  const int rc = PMPI_Win_allocate(size, disp_unit, info, comm, baseptr, win);
  end(&c, rc);
  win_made(comm, win, rc);
  return rc;
}

int MPI_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info info,
                            MPI_Comm comm, void *baseptr, MPI_Win *win) {
  call c;
  begin(&c, comm, "win_create", "", MPI_DATATYPE_NULL, 0, -1, RA);
  const int rc =
      PMPI_Win_allocate_shared(size, disp_unit, info, comm, baseptr, win);
  end(&c, rc);
  win_made(comm, win, rc);
  return rc;
}

int MPI_Win_create_dynamic(MPI_Info info, MPI_Comm comm, MPI_Win *win) {
  call c;
  begin(&c, comm, "win_create", "", MPI_DATATYPE_NULL, 0, -1, RA);
  const int rc = PMPI_Win_create_dynamic(info, comm, win);
  end(&c, rc);
  win_made(comm, win, rc);
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
    if (x) never_completed(x, when);
    unlock();
    begin_win(&c, ci, "win_free", RA);
  }
  const int rc = PMPI_Win_free(win);
  end(&c, rc);
  if (ci && rc == MPI_SUCCESS) {
    lock();
    window *x = find(w);
    comm_info *own = NULL;
    if (x) {
      own = x->ci;
      *x = windows[--nwindows];
    }
    unlock();
    info_unref(own);
  }
  info_unref(ci);
  return rc;
}

/* ---- synchronisation */

int MPI_Win_fence(int assert, MPI_Win win) {
  comm_info *ci = group_of(win);
  call c;
  c.ci = NULL;
  if (ci) begin_win(&c, ci, "win_fence", RA);
  const int rc = PMPI_Win_fence(assert, win);
  end(&c, rc);
  if (rc == MPI_SUCCESS) synced(win, -1);
  info_unref(ci);
  return rc;
}

int MPI_Win_unlock(int rank, MPI_Win win) {
  const int rc = PMPI_Win_unlock(rank, win);
  if (rc == MPI_SUCCESS) synced(win, rank);
  return rc;
}

int MPI_Win_unlock_all(MPI_Win win) {
  const int rc = PMPI_Win_unlock_all(win);
  if (rc == MPI_SUCCESS) synced(win, -1);
  return rc;
}

int MPI_Win_flush(int rank, MPI_Win win) {
  const int rc = PMPI_Win_flush(rank, win);
  if (rc == MPI_SUCCESS) synced(win, rank);
  return rc;
}

int MPI_Win_flush_all(MPI_Win win) {
  const int rc = PMPI_Win_flush_all(win);
  if (rc == MPI_SUCCESS) synced(win, -1);
  return rc;
}

int MPI_Win_flush_local(int rank, MPI_Win win) {
  const int rc = PMPI_Win_flush_local(rank, win);
  if (rc == MPI_SUCCESS) synced(win, rank);
  return rc;
}

int MPI_Win_flush_local_all(MPI_Win win) {
  const int rc = PMPI_Win_flush_local_all(win);
  if (rc == MPI_SUCCESS) synced(win, -1);
  return rc;
}

int MPI_Win_complete(MPI_Win win) {
  const int rc = PMPI_Win_complete(win);
  if (rc == MPI_SUCCESS) synced(win, -1);
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
  issued(win, "MPI_Put", target_rank, rc, RA);
  return rc;
}

int MPI_Get(void *origin_addr, int origin_count,
            MPI_Datatype origin_datatype, int target_rank,
            MPI_Aint target_disp, int target_count,
            MPI_Datatype target_datatype, MPI_Win win) {
  const int rc = PMPI_Get(origin_addr, origin_count, origin_datatype,
                          target_rank, target_disp, target_count,
                          target_datatype, win);
  issued(win, "MPI_Get", target_rank, rc, RA);
  return rc;
}

int MPI_Accumulate(const void *origin_addr, int origin_count,
                   MPI_Datatype origin_datatype, int target_rank,
                   MPI_Aint target_disp, int target_count,
                   MPI_Datatype target_datatype, MPI_Op op, MPI_Win win) {
  const int rc = PMPI_Accumulate(origin_addr, origin_count, origin_datatype,
                                 target_rank, target_disp, target_count,
                                 target_datatype, op, win);
  issued(win, "MPI_Accumulate", target_rank, rc, RA);
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
  issued(win, "MPI_Get_accumulate", target_rank, rc, RA);
  return rc;
}

int MPI_Fetch_and_op(const void *origin_addr, void *result_addr,
                     MPI_Datatype datatype, int target_rank,
                     MPI_Aint target_disp, MPI_Op op, MPI_Win win) {
  const int rc = PMPI_Fetch_and_op(origin_addr, result_addr, datatype,
                                   target_rank, target_disp, op, win);
  issued(win, "MPI_Fetch_and_op", target_rank, rc, RA);
  return rc;
}

int MPI_Compare_and_swap(const void *origin_addr, const void *compare_addr,
                         void *result_addr, MPI_Datatype datatype,
                         int target_rank, MPI_Aint target_disp,
                         MPI_Win win) {
  const int rc = PMPI_Compare_and_swap(origin_addr, compare_addr,
                                       result_addr, datatype, target_rank,
                                       target_disp, win);
  issued(win, "MPI_Compare_and_swap", target_rank, rc, RA);
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
  issued(win, "MPI_Rput", target_rank, rc, RA);
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
  issued(win, "MPI_Rget", target_rank, rc, RA);
  return rc;
}
