/* vqc_mpi_persist.c: persistent point-to-point requests (MPI_Send_init,
 * MPI_Bsend_init, MPI_Ssend_init, MPI_Rsend_init, MPI_Recv_init, and
 * MPI_Start, MPI_Startall), followed as the non-blocking ones are.
 *
 * A persistent request is made once and started many times (a halo
 * exchange's every iteration). Each is kept here, by handle, from its
 * _init call until MPI_Request_free: what it is (send or receive, peer,
 * tag, communicator, element type, the _init's call site). Each start puts
 * a copy, marked persistent, into the table of requests in flight
 * (p2p_reqs, vqc_mpi_p2p.c): a wait then names it ("MPI_Wait for
 * MPI_Recv_init from rank 2 (tag 7)"), MPI_Finalize reports one started
 * and never completed, and its messages are counted like an MPI_Isend's
 * (when started) and an MPI_Irecv's (when complete, from its status).
 * Completion differs from a non-blocking request's only in that MPI leaves
 * the handle as it is (inactive, not MPI_REQUEST_NULL): p2p_done asks
 * p2p_started_persistent which requests those are. Under vqcheck watch's
 * synchronous sends (g.sync_sends), MPI_Send_init is made as
 * MPI_Ssend_init, as MPI_Send runs as MPI_Ssend.
 *
 * A started send's buffer is hashed at each start and compared when a
 * wait or test completes it, as a non-blocking send's is
 * (vqc_mpi_races.c: a buffer changed in flight); the overlap checks of
 * other calls against it are not made. */
#include "vqc_mpi_internal.h"

/* Every persistent request made and not freed, by handle, under lock();
 * each entry holds a reference on its comm_info. Its dtype and tname are
 * the message's element type, for sends as for receives. */
static vqc_reqs kept_persistent;

/* After an _init call that returned rc with *req: the request kept. */
static void persist_made(const char *name, int rc, const MPI_Request *req,
                         const void *buf, int count, MPI_Comm comm, int peer,
                         int tag, MPI_Datatype dt, bool recv, uintptr_t pc) {
  if (!g.on || rc != MPI_SUCCESS || !req || *req == MPI_REQUEST_NULL) return;
  obj_made(OBJ_REQUEST, OBJ_KEY(*req), name, pc); /* until MPI_Request_free */
  comm_info *ci = info_of(comm);
  if (!ci) return;
  const msg_sig sig = msg_sig_of(dt);
  if (ci != &world_info) __atomic_add_fetch(&ci->refs, 1, __ATOMIC_RELAXED);
  vqc_p2p_req v = {.call = name, .ci = ci, .peer = peer, .tag = tag,
                   .recv = recv, .site = site_of(pc), .dtype = sig.dtype,
                   .tname = sig.name, .persistent = true};
  race_note(&v, buf, count, dt); /* its span: hashed again at each start */
  vqc_p2p_req old;
  bool replaced = false;
  lock();
  const bool kept = vqc_reqs_put(&kept_persistent, *req, &v, &old, &replaced);
  unlock();
  if (!kept) {
    info_unref(ci);
    msgs_uncounted("a persistent request could not be kept (no memory)");
    record_incomplete("VQC_EUNSUPPORTED", "a persistent request of its "
                      "could not be kept (no memory), so its messages were "
                      "not all paired with other ranks'");
  }
  if (replaced) info_unref(old.ci);
}

/* Request r was started: its message counted if a send, and it is in
 * flight until a wait or test completes it. Both name the request by its
 * _init call and site (which persistent request it is), not the start's. */
static void started(MPI_Request r) {
  if (r == MPI_REQUEST_NULL) return;
  lock();
  const vqc_p2p_req *p = vqc_reqs_find(&kept_persistent, r);
  vqc_p2p_req v;
  if (p) v = *p;
  unlock();
  if (!p) return; /* made before MPI_Init was recorded, or not kept */
  if (!v.recv && v.peer != MPI_PROC_NULL)
    msg_sent_on((comm_info *)v.ci, v.peer, v.tag,
                (msg_sig){.dtype = v.dtype, .name = v.tname}, v.call,
                v.site);
  /* in flight, told as MPI_Send_init's send is: synchronous under
   * vqcheck watch; the entry's own reference on its comm_info */
  if (g.sync_sends && strcmp(v.call, "MPI_Send_init") == 0)
    v.call = "MPI_Send_init (synchronous)";
  race_restart(&v); /* the send's bytes as this start leaves them */
  comm_info *ci = v.ci;
  if (ci != &world_info) __atomic_add_fetch(&ci->refs, 1, __ATOMIC_RELAXED);
  vqc_p2p_req old;
  bool replaced = false;
  lock();
  const bool kept = vqc_reqs_put(&p2p_reqs, r, &v, &old, &replaced);
  unlock();
  if (!kept) info_unref(ci);
  if (replaced) info_unref(old.ci);
}

/* (vqc_mpi_internal.h) */
bool p2p_started_persistent(MPI_Request r) {
  if (r == MPI_REQUEST_NULL ||
      __atomic_load_n(&p2p_reqs.n, __ATOMIC_RELAXED) == 0)
    return false;
  lock();
  const vqc_p2p_req *q = vqc_reqs_find(&p2p_reqs, r);
  const bool yes = q && q->persistent;
  unlock();
  return yes;
}

/* (vqc_mpi_internal.h) */
void persist_freed(MPI_Request r) {
  if (r == MPI_REQUEST_NULL ||
      __atomic_load_n(&kept_persistent.n, __ATOMIC_RELAXED) == 0)
    return;
  vqc_p2p_req q;
  lock();
  const bool had = vqc_reqs_take(&kept_persistent, r, &q);
  unlock();
  if (had) info_unref(q.ci);
}

/* (vqc_mpi_internal.h) */
void persist_clear(void) {
  vqc_p2p_req q;
  lock();
  while (vqc_reqs_pop(&kept_persistent, &q)) info_unref(q.ci);
  vqc_reqs_clear(&kept_persistent);
  unlock();
}

int MPI_Send_init(const void *buf, int count, MPI_Datatype datatype,
                  int dest, int tag, MPI_Comm comm, MPI_Request *request) {
  const bool sync = g.on && g.sync_sends; /* see MPI_Send */
  const int rc =
      sync ? PMPI_Ssend_init(buf, count, datatype, dest, tag, comm, request)
           : PMPI_Send_init(buf, count, datatype, dest, tag, comm, request);
  persist_made("MPI_Send_init", rc, request, buf, count, comm, dest, tag,
               datatype,
               false, RA);
  return rc;
}

int MPI_Bsend_init(const void *buf, int count, MPI_Datatype datatype,
                   int dest, int tag, MPI_Comm comm, MPI_Request *request) {
  const int rc =
      PMPI_Bsend_init(buf, count, datatype, dest, tag, comm, request);
  persist_made("MPI_Bsend_init", rc, request, buf, count, comm, dest, tag,
               datatype,
               false, RA);
  return rc;
}

int MPI_Ssend_init(const void *buf, int count, MPI_Datatype datatype,
                   int dest, int tag, MPI_Comm comm, MPI_Request *request) {
  const int rc =
      PMPI_Ssend_init(buf, count, datatype, dest, tag, comm, request);
  persist_made("MPI_Ssend_init", rc, request, buf, count, comm, dest, tag,
               datatype,
               false, RA);
  return rc;
}

int MPI_Rsend_init(const void *buf, int count, MPI_Datatype datatype,
                   int dest, int tag, MPI_Comm comm, MPI_Request *request) {
  const int rc =
      PMPI_Rsend_init(buf, count, datatype, dest, tag, comm, request);
  persist_made("MPI_Rsend_init", rc, request, buf, count, comm, dest, tag,
               datatype,
               false, RA);
  return rc;
}

int MPI_Recv_init(void *buf, int count, MPI_Datatype datatype, int source,
                  int tag, MPI_Comm comm, MPI_Request *request) {
  const int rc =
      PMPI_Recv_init(buf, count, datatype, source, tag, comm, request);
  persist_made("MPI_Recv_init", rc, request, buf, count, comm, source, tag,
               datatype,
               true, RA);
  return rc;
}

int MPI_Start(MPI_Request *request) {
  const MPI_Request r = request ? *request : MPI_REQUEST_NULL;
  const int rc = PMPI_Start(request);
  if (g.on && rc == MPI_SUCCESS) {
    started(r);
    beat(HB_RUNNING, 0, ""); /* a point-to-point call returned: progress */
  }
  return rc;
}

int MPI_Startall(int count, MPI_Request array_of_requests[]) {
  const int rc = PMPI_Startall(count, array_of_requests);
  if (g.on && rc == MPI_SUCCESS && array_of_requests) {
    for (int i = 0; i < count; i++) started(array_of_requests[i]);
    beat(HB_RUNNING, 0, "");
  }
  return rc;
}
