/* vqc_mpi_wait.c: requests and their completion: non-blocking collectives
 * pending until a wait or test completes their request, and the MPI_Wait,
 * MPI_Test (any, some, all), MPI_Request_free and MPI_Cancel wrappers. */
#include "vqc_mpi_internal.h"

/* ---- non-blocking collectives: pending until their request completes */

typedef struct pend {
  MPI_Request req;
  call c;
} pend;
static pend *pends;
static int npend, cap_pend;

/* After an I-call that returned rc with *req: pending, or its end. */
void posted(call *c, int rc, const MPI_Request *req) {
  if (!c->ci) return;
  if (rc != MPI_SUCCESS) {
    end(c, rc);
    return;
  }
  beat(HB_RUNNING, c->seq, "");
  lock();
  if (npend == cap_pend) {
    const int cap = cap_pend ? 2 * cap_pend : 16;
    pend *p = realloc(pends, sizeof *p * (size_t)cap);
    if (!p) {
      unlock();
      return; /* it stays "entered": reported as never completed */
    }
    pends = p;
    cap_pend = cap;
  }
  if (c->ci != &world_info) __atomic_add_fetch(&c->ci->refs, 1,
                                                __ATOMIC_RELAXED);
  pends[npend].req = *req;
  pends[npend].c = *c;
  npend++;
  unlock();
}

/* Takes the last pending collective out into *out (MPI_Finalize: those
 * left were never completed); false when none. */
bool pending_pop(call *out) {
  if (npend == 0) return false;
  *out = pends[npend - 1].c;
  npend--;
  return true;
}

/* Takes the pending entry of request r out into *out; false when r is not
 * a pending collective's. */
static bool take(MPI_Request r, call *out) {
  if (r == MPI_REQUEST_NULL) return false;
  bool found = false;
  lock();
  for (int i = 0; i < npend; i++) {
    if (pends[i].req != r) continue;
    *out = pends[i].c;
    pends[i] = pends[--npend];
    found = true;
    break;
  }
  unlock();
  return found;
}

static bool is_pending(MPI_Request r, const char **op, uint64_t *seq) {
  bool found = false;
  lock();
  for (int i = 0; i < npend && !found; i++)
    if (pends[i].req == r) {
      found = true;
      *op = pends[i].c.op;
      *seq = pends[i].c.seq;
    }
  unlock();
  return found;
}

/* Request r's collective completed (rc) by a call returning to pc (0: let
 * go with MPI_Request_free, its buffers not compared). */
static void completed(MPI_Request r, int rc, uintptr_t pc) {
  call c;
  if (!take(r, &c)) return;
  if (rc == MPI_SUCCESS && pc) race_coll_completed(&c, pc);
  call_line(&c, now_ns(), rc == MPI_SUCCESS ? "done" : "failed",
            rc == MPI_SUCCESS ? "VQC_OK" : "VQC_ECOMM");
  info_unref(c.ci);
}

/* Before a wait on reqs[0..n): the heartbeat says in a collective when one
 * of them is a pending collective's. */
static bool wait_begins(const MPI_Request *reqs, int n) {
  if (!g.on || __atomic_load_n(&npend, __ATOMIC_RELAXED) == 0) return false;
  for (int i = 0; i < n; i++) {
    const char *op;
    uint64_t seq;
    if (is_pending(reqs[i], &op, &seq)) {
      beat(HB_IN_COLLECTIVE, seq, op);
      return true;
    }
  }
  return false;
}

static bool copy_reqs(req_copy *c, const MPI_Request *reqs, int n) {
  c->r = NULL;
  c->st = NULL;
  if (!g.on || n <= 0 ||
      (__atomic_load_n(&npend, __ATOMIC_RELAXED) == 0 &&
       __atomic_load_n(&p2p_reqs.n, __ATOMIC_RELAXED) == 0))
    return false;
  c->r = n <= 16 ? c->small : malloc(sizeof *c->r * (size_t)n);
  if (!c->r) return false;
  memcpy(c->r, reqs, sizeof *c->r * (size_t)n);
  return true;
}

static void free_reqs(req_copy *c) {
  if (c->r && c->r != c->small) free(c->r);
  if (c->st && c->st != c->st_small) free(c->st);
}

/* The statuses to pass MPI for n requests (or n completions): the
 * program's, or ours where it ignores them (user is MPI_STATUS_IGNORE or
 * MPI_STATUSES_IGNORE), so that a receive's source and tag are known.
 * NULL (the program's ignore passed on) when memory runs out. */
static MPI_Status *statuses(req_copy *c, MPI_Status *user, bool ignored,
                            int n) {
  if (!ignored) return user;
  c->st = n <= 16 ? c->st_small : malloc(sizeof *c->st * (size_t)n);
  return c->st ? c->st : user;
}

/* ---- completion */

int MPI_Wait(MPI_Request *request, MPI_Status *status) {
  p2p_enter_wait("MPI_Wait", request, 1, RA);
  req_copy rc0;
  if (!copy_reqs(&rc0, request, 1))
    return p2p_leave(PMPI_Wait(request, status));
  (void)wait_begins(rc0.r, 1);
  MPI_Status *st = statuses(&rc0, status, status == MPI_STATUS_IGNORE, 1);
  const int rc = PMPI_Wait(request, st);
  completed(rc0.r[0], rc, RA);
  p2p_done(&rc0, request, 1, rc, st == MPI_STATUS_IGNORE ? NULL : st, NULL,
           0, true, RA);
  (void)p2p_leave(rc); /* progress, collective or not */
  free_reqs(&rc0);
  return rc;
}

int MPI_Waitall(int count, MPI_Request array_of_requests[],
                MPI_Status *array_of_statuses) {
  p2p_enter_wait("MPI_Waitall", array_of_requests, count, RA);
  req_copy rc0;
  if (!copy_reqs(&rc0, array_of_requests, count))
    return p2p_leave(
        PMPI_Waitall(count, array_of_requests, array_of_statuses));
  (void)wait_begins(rc0.r, count);
  MPI_Status *st = statuses(&rc0, array_of_statuses,
                            array_of_statuses == MPI_STATUSES_IGNORE, count);
  const int rc = PMPI_Waitall(count, array_of_requests, st);
  for (int i = 0; i < count; i++) completed(rc0.r[i], rc, RA);
  p2p_done(&rc0, array_of_requests, count, rc,
           st == MPI_STATUSES_IGNORE ? NULL : st, NULL, 0, true, RA);
  (void)p2p_leave(rc); /* progress, collective or not */
  free_reqs(&rc0);
  return rc;
}

int MPI_Waitany(int count, MPI_Request array_of_requests[], int *index,
                MPI_Status *status) {
  p2p_enter_wait("MPI_Waitany", array_of_requests, count, RA);
  req_copy rc0;
  if (!copy_reqs(&rc0, array_of_requests, count))
    return p2p_leave(PMPI_Waitany(count, array_of_requests, index, status));
  (void)wait_begins(rc0.r, count);
  MPI_Status *st = statuses(&rc0, status, status == MPI_STATUS_IGNORE, 1);
  const int rc = PMPI_Waitany(count, array_of_requests, index, st);
  if (*index != MPI_UNDEFINED && *index >= 0 && *index < count)
    completed(rc0.r[*index], rc, RA);
  p2p_done(&rc0, array_of_requests, count, rc,
           st == MPI_STATUS_IGNORE ? NULL : st, index, 1, false, RA);
  (void)p2p_leave(rc); /* progress, collective or not */
  free_reqs(&rc0);
  return rc;
}

int MPI_Waitsome(int incount, MPI_Request array_of_requests[], int *outcount,
                 int array_of_indices[], MPI_Status array_of_statuses[]) {
  p2p_enter_wait("MPI_Waitsome", array_of_requests, incount, RA);
  req_copy rc0;
  if (!copy_reqs(&rc0, array_of_requests, incount))
    return p2p_leave(PMPI_Waitsome(incount, array_of_requests, outcount,
                         array_of_indices, array_of_statuses));
  (void)wait_begins(rc0.r, incount);
  MPI_Status *st = statuses(&rc0, array_of_statuses,
                            array_of_statuses == MPI_STATUSES_IGNORE, incount);
  const int rc = PMPI_Waitsome(incount, array_of_requests, outcount,
                               array_of_indices, st);
  for (int i = 0; *outcount != MPI_UNDEFINED && i < *outcount; i++)
    if (array_of_indices[i] >= 0 && array_of_indices[i] < incount)
      completed(rc0.r[array_of_indices[i]], rc, RA);
  p2p_done(&rc0, array_of_requests, incount, rc,
           st == MPI_STATUSES_IGNORE ? NULL : st, array_of_indices,
           *outcount == MPI_UNDEFINED ? 0 : *outcount, false, RA);
  (void)p2p_leave(rc); /* progress, collective or not */
  free_reqs(&rc0);
  return rc;
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status) {
  req_copy rc0;
  if (!copy_reqs(&rc0, request, 1)) return PMPI_Test(request, flag, status);
  MPI_Status *st = statuses(&rc0, status, status == MPI_STATUS_IGNORE, 1);
  const int rc = PMPI_Test(request, flag, st);
  if (*flag) completed(rc0.r[0], rc, RA);
  p2p_done(&rc0, request, 1, rc,
           *flag && st != MPI_STATUS_IGNORE ? st : NULL, NULL, 0, *flag != 0,
           RA);
  free_reqs(&rc0);
  return rc;
}

int MPI_Testall(int count, MPI_Request array_of_requests[], int *flag,
                MPI_Status array_of_statuses[]) {
  req_copy rc0;
  if (!copy_reqs(&rc0, array_of_requests, count))
    return PMPI_Testall(count, array_of_requests, flag, array_of_statuses);
  MPI_Status *st = statuses(&rc0, array_of_statuses,
                            array_of_statuses == MPI_STATUSES_IGNORE, count);
  const int rc = PMPI_Testall(count, array_of_requests, flag, st);
  for (int i = 0; *flag && i < count; i++) completed(rc0.r[i], rc, RA);
  p2p_done(&rc0, array_of_requests, count, rc,
           *flag && st != MPI_STATUSES_IGNORE ? st : NULL, NULL, 0,
           *flag != 0, RA);
  free_reqs(&rc0);
  return rc;
}

int MPI_Testany(int count, MPI_Request array_of_requests[], int *index,
                int *flag, MPI_Status *status) {
  req_copy rc0;
  if (!copy_reqs(&rc0, array_of_requests, count))
    return PMPI_Testany(count, array_of_requests, index, flag, status);
  MPI_Status *st = statuses(&rc0, status, status == MPI_STATUS_IGNORE, 1);
  const int rc = PMPI_Testany(count, array_of_requests, index, flag, st);
  if (*flag && *index != MPI_UNDEFINED && *index >= 0 && *index < count)
    completed(rc0.r[*index], rc, RA);
  p2p_done(&rc0, array_of_requests, count, rc,
           *flag && st != MPI_STATUS_IGNORE ? st : NULL, *flag ? index : NULL,
           *flag ? 1 : 0, false, RA);
  free_reqs(&rc0);
  return rc;
}

int MPI_Testsome(int incount, MPI_Request array_of_requests[], int *outcount,
                 int array_of_indices[], MPI_Status array_of_statuses[]) {
  req_copy rc0;
  if (!copy_reqs(&rc0, array_of_requests, incount))
    return PMPI_Testsome(incount, array_of_requests, outcount,
                         array_of_indices, array_of_statuses);
  MPI_Status *st = statuses(&rc0, array_of_statuses,
                            array_of_statuses == MPI_STATUSES_IGNORE, incount);
  const int rc = PMPI_Testsome(incount, array_of_requests, outcount,
                               array_of_indices, st);
  for (int i = 0; *outcount != MPI_UNDEFINED && i < *outcount; i++)
    if (array_of_indices[i] >= 0 && array_of_indices[i] < incount)
      completed(rc0.r[array_of_indices[i]], rc, RA);
  p2p_done(&rc0, array_of_requests, incount, rc,
           st == MPI_STATUSES_IGNORE ? NULL : st, array_of_indices,
           *outcount == MPI_UNDEFINED ? 0 : *outcount, false, RA);
  free_reqs(&rc0);
  return rc;
}

/* A freed request's collective completes unobserved: done as far as the
 * program is concerned; a freed point-to-point request is forgotten (an
 * MPI_Isend let go so is correct MPI; an active receive is a finding,
 * vqc_mpi_p2p.c). */
int MPI_Request_free(MPI_Request *request) {
  const MPI_Request r = request ? *request : MPI_REQUEST_NULL;
  const int rc = PMPI_Request_free(request);
  if (g.on && rc == MPI_SUCCESS) {
    completed(r, rc, 0);
    p2p_forget(r, RA);
    persist_freed(r);
    obj_freed(OBJ_REQUEST, OBJ_KEY(r)); /* a persistent one: leaks.c */
  }
  return rc;
}

/* A cancelled point-to-point request is forgotten at once: it may never
 * be matched, so a wait on it is no longer a wait for its peer, and the
 * program may let it go with MPI_Request_free. */
int MPI_Cancel(MPI_Request *request) {
  const MPI_Request r = request ? *request : MPI_REQUEST_NULL;
  const int rc = PMPI_Cancel(request);
  if (g.on && rc == MPI_SUCCESS) p2p_cancelled(r);
  return rc;
}
