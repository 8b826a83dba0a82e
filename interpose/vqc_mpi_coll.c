/* vqc_mpi_coll.c: the collective wrappers: blocking, non-blocking, the
 * w-form and the neighbourhood collectives, each recorded as entered and
 * done (vqc_mpi_record.c), its buffers checked (vqc_mpi_buffers.c). */
#include "vqc_mpi_internal.h"

/* The size of c's communicator (for the checks' spans and the per-peer
 * arrays; the remote group's on an intercommunicator: peer_count). */
static int comm_size(MPI_Comm c) { return peer_count(c); }

/* ---- blocking collectives */

/* The communicator rank of this process (for MPI_IN_PLACE at a root). */
static int my_rank(MPI_Comm c) {
  int r = -1;
  PMPI_Comm_rank(c, &r);
  return r;
}

static long long sum_counts(const int *c, MPI_Comm comm) {
  const int n = peer_count(comm);
  long long s = 0;
  for (int i = 0; c && i < n; i++) s += c[i];
  return s;
}

int MPI_Barrier(MPI_Comm comm) {
  call c;
  begin(&c, comm, "barrier", "", MPI_DATATYPE_NULL, 0, -1, RA);
  const int rc = PMPI_Barrier(comm);
  end(&c, rc);
  return rc;
}

int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root,
              MPI_Comm comm) {
  call c;
  begin(&c, comm, "broadcast", "", datatype, count, root, RA);
  const int rc = PMPI_Bcast(buffer, count, datatype, root, comm);
  end(&c, rc);
  return rc;
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count,
               MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm) {
  call c;
  begin(&c, comm, "reduce", redop_name(op), datatype, count, root, RA);
  if (c.ci && my_rank(comm) == root)
    check_overlap(&c, "MPI_Reduce", sendbuf, count, datatype, recvbuf, count,
                  datatype);
  const int rc = PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root,
                             comm);
  end(&c, rc);
  return rc;
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count,
                  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  call c;
  begin(&c, comm, "all_reduce", redop_name(op), datatype, count, -1, RA);
  check_overlap(&c, "MPI_Allreduce", sendbuf, count, datatype, recvbuf, count,
                datatype);
  const int rc = PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  end(&c, rc);
  return rc;
}

int MPI_Scan(const void *sendbuf, void *recvbuf, int count,
             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  call c;
  begin(&c, comm, "scan", redop_name(op), datatype, count, -1, RA);
  check_overlap(&c, "MPI_Scan", sendbuf, count, datatype, recvbuf, count,
                datatype);
  const int rc = PMPI_Scan(sendbuf, recvbuf, count, datatype, op, comm);
  end(&c, rc);
  return rc;
}

int MPI_Exscan(const void *sendbuf, void *recvbuf, int count,
               MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  call c;
  begin(&c, comm, "exscan", redop_name(op), datatype, count, -1, RA);
  check_overlap(&c, "MPI_Exscan", sendbuf, count, datatype, recvbuf, count,
                datatype);
  const int rc = PMPI_Exscan(sendbuf, recvbuf, count, datatype, op, comm);
  end(&c, rc);
  return rc;
}

int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf,
                       const int recvcounts[], MPI_Datatype datatype,
                       MPI_Op op, MPI_Comm comm) {
  call c;
  begin(&c, comm, "reduce_scatter", redop_name(op), datatype,
        g.on ? sum_counts(recvcounts, comm) : 0, -1, RA);
  if (c.ci && recvcounts)
    check_overlap(&c, "MPI_Reduce_scatter", sendbuf,
                  sum_counts(recvcounts, comm), datatype, recvbuf,
                  recvcounts[my_rank(comm)], datatype);
  const int rc =
      PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm);
  end(&c, rc);
  return rc;
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf,
                             int recvcount, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm) {
  call c;
  int n = 0;
  if (g.on) PMPI_Comm_size(comm, &n);
  begin(&c, comm, "reduce_scatter", redop_name(op), datatype,
        (long long)recvcount * n, -1, RA);
  if (c.ci)
    check_overlap(&c, "MPI_Reduce_scatter_block", sendbuf,
                  (long long)recvcount * comm_size(comm), datatype, recvbuf,
                  recvcount, datatype);
  const int rc = PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount,
                                           datatype, op, comm);
  end(&c, rc);
  return rc;
}

/* Gather's side that this rank contributes: its send side, or at a root
 * with MPI_IN_PLACE the receive side. */
#define SEND_SIDE(sendbuf, sc, st, rc_, rt)                                 \
  (sendbuf) == MPI_IN_PLACE ? (rt) : (st), (sendbuf) == MPI_IN_PLACE ? (rc_) \
                                                                     : (sc)

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
               void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
               MPI_Comm comm) {
  call c;
  begin(&c, comm, "gather", "", SEND_SIDE(sendbuf, sendcount, sendtype,
                                          recvcount, recvtype), root, RA);
  if (c.ci && my_rank(comm) == root && sendbuf != MPI_IN_PLACE) {
    check_overlap(&c, "MPI_Gather", sendbuf, sendcount, sendtype, recvbuf,
                  (long long)recvcount * comm_size(comm), recvtype);
    check_fits(&c, "MPI_Gather", sendcount, sendtype, recvcount, recvtype);
  }
  const int rc = PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                             recvtype, root, comm);
  end(&c, rc);
  return rc;
}

int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                void *recvbuf, const int recvcounts[], const int displs[],
                MPI_Datatype recvtype, int root, MPI_Comm comm) {
  call c;
  const int own = g.on && sendbuf == MPI_IN_PLACE && recvcounts
                      ? recvcounts[my_rank(comm)] : 0;
  begin(&c, comm, "gatherv", "", SEND_SIDE(sendbuf, sendcount, sendtype,
                                           own, recvtype), root, RA);
  if (c.ci && my_rank(comm) == root && sendbuf != MPI_IN_PLACE && recvcounts) {
    check_overlap(&c, "MPI_Gatherv", sendbuf, sendcount, sendtype, recvbuf,
                  v_items(recvcounts, displs, comm), recvtype);
    check_fits(&c, "MPI_Gatherv", sendcount, sendtype,
               recvcounts[my_rank(comm)], recvtype);
  }
  const int rc = PMPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts,
                              displs, recvtype, root, comm);
  end(&c, rc);
  return rc;
}

int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                MPI_Comm comm) {
  call c;
  const bool in = recvbuf == MPI_IN_PLACE;
  begin(&c, comm, "scatter", "", in ? sendtype : recvtype,
        in ? sendcount : recvcount, root, RA);
  if (c.ci && my_rank(comm) == root && recvbuf != MPI_IN_PLACE) {
    check_overlap(&c, "MPI_Scatter", sendbuf,
                  (long long)sendcount * comm_size(comm), sendtype, recvbuf,
                  recvcount, recvtype);
    check_fits(&c, "MPI_Scatter", sendcount, sendtype, recvcount, recvtype);
  }
  const int rc = PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf,
                              recvcount, recvtype, root, comm);
  end(&c, rc);
  return rc;
}

int MPI_Scatterv(const void *sendbuf, const int sendcounts[],
                 const int displs[], MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root,
                 MPI_Comm comm) {
  call c;
  const bool in = recvbuf == MPI_IN_PLACE;
  const int own = g.on && in && sendcounts ? sendcounts[my_rank(comm)] : 0;
  begin(&c, comm, "scatterv", "", in ? sendtype : recvtype,
        in ? own : recvcount, root, RA);
  if (c.ci && my_rank(comm) == root && recvbuf != MPI_IN_PLACE && sendcounts) {
    check_overlap(&c, "MPI_Scatterv", sendbuf,
                  v_items(sendcounts, displs, comm), sendtype, recvbuf,
                  recvcount, recvtype);
    check_fits(&c, "MPI_Scatterv", sendcounts[my_rank(comm)], sendtype,
               recvcount, recvtype);
  }
  const int rc = PMPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf,
                               recvcount, recvtype, root, comm);
  end(&c, rc);
  return rc;
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                  void *recvbuf, int recvcount, MPI_Datatype recvtype,
                  MPI_Comm comm) {
  call c;
  begin(&c, comm, "all_gather", "", SEND_SIDE(sendbuf, sendcount, sendtype,
                                              recvcount, recvtype), -1, RA);
  if (c.ci && sendbuf != MPI_IN_PLACE) {
    check_overlap(&c, "MPI_Allgather", sendbuf, sendcount, sendtype, recvbuf,
                  (long long)recvcount * comm_size(comm), recvtype);
    check_fits(&c, "MPI_Allgather", sendcount, sendtype, recvcount, recvtype);
  }
  const int rc = PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf,
                                recvcount, recvtype, comm);
  end(&c, rc);
  return rc;
}

int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                   void *recvbuf, const int recvcounts[], const int displs[],
                   MPI_Datatype recvtype, MPI_Comm comm) {
  call c;
  const int own = g.on && sendbuf == MPI_IN_PLACE && recvcounts
                      ? recvcounts[my_rank(comm)] : 0;
  begin(&c, comm, "all_gatherv", "", SEND_SIDE(sendbuf, sendcount, sendtype,
                                               own, recvtype), -1, RA);
  if (c.ci && sendbuf != MPI_IN_PLACE && recvcounts) {
    check_overlap(&c, "MPI_Allgatherv", sendbuf, sendcount, sendtype, recvbuf,
                  v_items(recvcounts, displs, comm), recvtype);
    check_fits(&c, "MPI_Allgatherv", sendcount, sendtype,
               recvcounts[my_rank(comm)], recvtype);
  }
  const int rc = PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf,
                                 recvcounts, displs, recvtype, comm);
  end(&c, rc);
  return rc;
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype,
                 MPI_Comm comm) {
  call c;
  begin(&c, comm, "all_to_all", "", SEND_SIDE(sendbuf, sendcount, sendtype,
                                              recvcount, recvtype), -1, RA);
  if (c.ci && sendbuf != MPI_IN_PLACE) {
    check_overlap(&c, "MPI_Alltoall", sendbuf,
                  (long long)sendcount * comm_size(comm), sendtype, recvbuf,
                  (long long)recvcount * comm_size(comm), recvtype);
    check_fits(&c, "MPI_Alltoall", sendcount, sendtype, recvcount, recvtype);
  }
  const int rc = PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf,
                               recvcount, recvtype, comm);
  end(&c, rc);
  return rc;
}

int MPI_Alltoallv(const void *sendbuf, const int sendcounts[],
                  const int sdispls[], MPI_Datatype sendtype, void *recvbuf,
                  const int recvcounts[], const int rdispls[],
                  MPI_Datatype recvtype, MPI_Comm comm) {
  call c;
  const bool in = sendbuf == MPI_IN_PLACE;
  begin(&c, comm, "all_to_allv", "", in ? recvtype : sendtype,
        g.on ? sum_counts(in ? recvcounts : sendcounts, comm) : 0, -1, RA);
  if (c.ci && sendbuf != MPI_IN_PLACE && sendcounts && recvcounts) {
    check_overlap(&c, "MPI_Alltoallv", sendbuf,
                  v_items(sendcounts, sdispls, comm), sendtype, recvbuf,
                  v_items(recvcounts, rdispls, comm), recvtype);
    check_fits(&c, "MPI_Alltoallv", sendcounts[my_rank(comm)], sendtype,
               recvcounts[my_rank(comm)], recvtype);
  }
  const int rc = PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype,
                                recvbuf, recvcounts, rdispls, recvtype, comm);
  end(&c, rc);
  return rc;
}

/* ---- the w-form and the neighbourhood collectives
 *
 * MPI_Alltoallw takes a type per peer; the neighbourhood collectives
 * (MPI_Neighbor_*, MPI_Ineighbor_*) exchange with the neighbours of a
 * communicator's topology only (cart: 2 per dimension; graph; dist graph:
 * in- and out-degree). Each is recorded as the others are (entered, done;
 * the non-blocking forms until their request completes), on that
 * communicator: op all_to_allw, neighbor_all_gather(v), neighbor_all_to_
 * all(v|w); dtype: the send type's element (for a w form, the one element
 * every peer's type is made of, else ""); count: the type signature's
 * length of what the rank sends (to each neighbour for neighbor_all_gather
 * and neighbor_all_to_all, as Allgather and Alltoall; summed over the
 * peers for the v and w forms). The analysis compares op and dtype, not
 * the count (a rank's counts need only match its neighbours'), and pairs
 * them in the communicator's order, so a rank that skips one or calls
 * another is a deadlock or collective_mismatch. Their buffers are not
 * checked (no overlap or size finding). */

/* The in- and out-degree of c's topology; false (0, 0) without one. */
static bool neighbours(MPI_Comm c, int *in, int *out) {
  int topo = MPI_UNDEFINED;
  *in = *out = 0;
  if (PMPI_Topo_test(c, &topo) != MPI_SUCCESS) return false;
  if (topo == MPI_CART) {
    int nd = 0;
    if (PMPI_Cartdim_get(c, &nd) != MPI_SUCCESS) return false;
    *in = *out = 2 * nd;
    return true;
  }
  if (topo == MPI_GRAPH) {
    int n = 0;
    if (PMPI_Graph_neighbors_count(c, my_rank(c), &n) != MPI_SUCCESS)
      return false;
    *in = *out = n;
    return true;
  }
  if (topo == MPI_DIST_GRAPH) {
    int weighted = 0;
    return PMPI_Dist_graph_neighbors_count(c, in, out, &weighted) ==
           MPI_SUCCESS;
  }
  return false;
}

/* The out-degree of a neighbourhood collective's communicator. */
static int out_degree(MPI_Comm c) {
  int in = 0, out = 0;
  (void)neighbours(c, &in, &out);
  return out;
}

/* *t and the summed count of n peers' counts[i] items of types[i] (a w
 * form): the type signature's length in basic elements, the element
 * every type is made of (else ""). Returns the count. */
static long long w_info(const int *counts, const MPI_Datatype *types, int n,
                        tinfo *t) {
  t->dtype = "";
  t->elems = 1;
  snprintf(t->extra, sizeof t->extra, "\"mpi_type\":\"a type per peer\",");
  if (!counts || !types) return 0;
  long long total = 0;
  const char *common = NULL;
  bool mixed = false;
  MPI_Datatype last = MPI_DATATYPE_NULL;
  tinfo one = {.dtype = "", .elems = 0};
  for (int i = 0; i < n; i++) {
    if (counts[i] <= 0) continue;
    if (types[i] != last) { /* one decode per run of equal types */
      type_info(types[i], &one);
      last = types[i];
    }
    /* an empty type moves nothing: no element to agree on (count 0 of
     * MPI_INT on one rank, 1 of contiguous(0, MPI_INT) on another) */
    if (one.elems == 0) continue;
    total += (long long)counts[i] * one.elems;
    if (!one.dtype[0] || (common && strcmp(common, one.dtype) != 0))
      mixed = true;
    common = one.dtype;
  }
  if (common && !mixed) t->dtype = common;
  return total;
}

int MPI_Alltoallw(const void *sendbuf, const int sendcounts[],
                  const int sdispls[], const MPI_Datatype sendtypes[],
                  void *recvbuf, const int recvcounts[], const int rdispls[],
                  const MPI_Datatype recvtypes[], MPI_Comm comm) {
  call c;
  c.ci = NULL;
  if (g.on) {
    const bool in = sendbuf == MPI_IN_PLACE;
    tinfo t;
    const long long n = w_info(in ? recvcounts : sendcounts,
                               in ? recvtypes : sendtypes, comm_size(comm),
                               &t);
    record_t(&c, true, comm, "all_to_allw", "", &t, n, -1, RA);
  }
  const int rc = PMPI_Alltoallw(sendbuf, sendcounts, sdispls, sendtypes,
                                recvbuf, recvcounts, rdispls, recvtypes, comm);
  end(&c, rc);
  return rc;
}

int MPI_Neighbor_allgather(const void *sendbuf, int sendcount,
                           MPI_Datatype sendtype, void *recvbuf,
                           int recvcount, MPI_Datatype recvtype,
                           MPI_Comm comm) {
  call c;
  begin(&c, comm, "neighbor_all_gather", "", sendtype, sendcount, -1, RA);
  const int rc = PMPI_Neighbor_allgather(sendbuf, sendcount, sendtype,
                                         recvbuf, recvcount, recvtype, comm);
  end(&c, rc);
  return rc;
}

int MPI_Neighbor_allgatherv(const void *sendbuf, int sendcount,
                            MPI_Datatype sendtype, void *recvbuf,
                            const int recvcounts[], const int displs[],
                            MPI_Datatype recvtype, MPI_Comm comm) {
  call c;
  begin(&c, comm, "neighbor_all_gatherv", "", sendtype, sendcount, -1, RA);
  const int rc = PMPI_Neighbor_allgatherv(sendbuf, sendcount, sendtype,
                                          recvbuf, recvcounts, displs,
                                          recvtype, comm);
  end(&c, rc);
  return rc;
}

int MPI_Neighbor_alltoall(const void *sendbuf, int sendcount,
                          MPI_Datatype sendtype, void *recvbuf, int recvcount,
                          MPI_Datatype recvtype, MPI_Comm comm) {
  call c;
  begin(&c, comm, "neighbor_all_to_all", "", sendtype, sendcount, -1, RA);
  const int rc = PMPI_Neighbor_alltoall(sendbuf, sendcount, sendtype, recvbuf,
                                        recvcount, recvtype, comm);
  end(&c, rc);
  return rc;
}

int MPI_Neighbor_alltoallv(const void *sendbuf, const int sendcounts[],
                           const int sdispls[], MPI_Datatype sendtype,
                           void *recvbuf, const int recvcounts[],
                           const int rdispls[], MPI_Datatype recvtype,
                           MPI_Comm comm) {
  call c;
  long long n = 0;
  for (int i = 0, d = g.on && sendcounts ? out_degree(comm) : 0; i < d; i++)
    n += sendcounts[i];
  begin(&c, comm, "neighbor_all_to_allv", "", sendtype, n, -1, RA);
  const int rc = PMPI_Neighbor_alltoallv(sendbuf, sendcounts, sdispls,
                                         sendtype, recvbuf, recvcounts,
                                         rdispls, recvtype, comm);
  end(&c, rc);
  return rc;
}

int MPI_Neighbor_alltoallw(const void *sendbuf, const int sendcounts[],
                           const MPI_Aint sdispls[],
                           const MPI_Datatype sendtypes[], void *recvbuf,
                           const int recvcounts[], const MPI_Aint rdispls[],
                           const MPI_Datatype recvtypes[], MPI_Comm comm) {
  call c;
  c.ci = NULL;
  if (g.on) {
    tinfo t;
    const long long n = w_info(sendcounts, sendtypes, out_degree(comm), &t);
    record_t(&c, true, comm, "neighbor_all_to_allw", "", &t, n, -1, RA);
  }
  const int rc = PMPI_Neighbor_alltoallw(sendbuf, sendcounts, sdispls,
                                         sendtypes, recvbuf, recvcounts,
                                         rdispls, recvtypes, comm);
  end(&c, rc);
  return rc;
}

/* ---- non-blocking collectives */

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request) {
  call c;
  begin_nb(&c, comm, "ibarrier", "", MPI_DATATYPE_NULL, 0, -1, RA);
  const int rc = PMPI_Ibarrier(comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root,
               MPI_Comm comm, MPI_Request *request) {
  call c;
  begin_nb(&c, comm, "ibroadcast", "", datatype, count, root, RA);
  if (c.ci && my_rank(comm) == root)
    race_note_coll(&c, "MPI_Ibcast", buffer, count, datatype);
  const int rc = PMPI_Ibcast(buffer, count, datatype, root, comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count,
                MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm,
                MPI_Request *request) {
  call c;
  begin_nb(&c, comm, "ireduce", redop_name(op), datatype, count, root, RA);
  if (c.ci && my_rank(comm) == root)
    check_overlap(&c, "MPI_Ireduce", sendbuf, count, datatype, recvbuf, count,
                  datatype);
  race_note_coll(&c, "MPI_Ireduce", sendbuf, count, datatype);
  const int rc = PMPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root,
                              comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count,
                   MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Request *request) {
  call c;
  begin_nb(&c, comm, "iall_reduce", redop_name(op), datatype, count, -1, RA);
  check_overlap(&c, "MPI_Iallreduce", sendbuf, count, datatype, recvbuf, count,
                datatype);
  race_note_coll(&c, "MPI_Iallreduce", sendbuf, count, datatype);
  const int rc = PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm,
                                 request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Iscan(const void *sendbuf, void *recvbuf, int count,
              MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
              MPI_Request *request) {
  call c;
  begin_nb(&c, comm, "iscan", redop_name(op), datatype, count, -1, RA);
  check_overlap(&c, "MPI_Iscan", sendbuf, count, datatype, recvbuf, count,
                datatype);
  race_note_coll(&c, "MPI_Iscan", sendbuf, count, datatype);
  const int rc = PMPI_Iscan(sendbuf, recvbuf, count, datatype, op, comm,
                            request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Iexscan(const void *sendbuf, void *recvbuf, int count,
                MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                MPI_Request *request) {
  call c;
  begin_nb(&c, comm, "iexscan", redop_name(op), datatype, count, -1, RA);
  check_overlap(&c, "MPI_Iexscan", sendbuf, count, datatype, recvbuf, count,
                datatype);
  race_note_coll(&c, "MPI_Iexscan", sendbuf, count, datatype);
  const int rc = PMPI_Iexscan(sendbuf, recvbuf, count, datatype, op, comm,
                              request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf,
                        const int recvcounts[], MPI_Datatype datatype,
                        MPI_Op op, MPI_Comm comm, MPI_Request *request) {
  call c;
  begin_nb(&c, comm, "ireduce_scatter", redop_name(op), datatype,
        g.on ? sum_counts(recvcounts, comm) : 0, -1, RA);
  if (c.ci && recvcounts)
    check_overlap(&c, "MPI_Ireduce_scatter", sendbuf,
                  sum_counts(recvcounts, comm), datatype, recvbuf,
                  recvcounts[my_rank(comm)], datatype);
  const int rc = PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype,
                                      op, comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf,
                              int recvcount, MPI_Datatype datatype,
                              MPI_Op op, MPI_Comm comm,
                              MPI_Request *request) {
  call c;
  int n = 0;
  if (g.on) PMPI_Comm_size(comm, &n);
  begin_nb(&c, comm, "ireduce_scatter", redop_name(op), datatype,
        (long long)recvcount * n, -1, RA);
  if (c.ci)
    check_overlap(&c, "MPI_Ireduce_scatter_block", sendbuf,
                  (long long)recvcount * comm_size(comm), datatype, recvbuf,
                  recvcount, datatype);
  const int rc = PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount,
                                            datatype, op, comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                MPI_Comm comm, MPI_Request *request) {
  call c;
  begin_nb(&c, comm, "igather", "", SEND_SIDE(sendbuf, sendcount, sendtype,
                                          recvcount, recvtype), root, RA);
  if (c.ci && my_rank(comm) == root && sendbuf != MPI_IN_PLACE) {
    check_overlap(&c, "MPI_Igather", sendbuf, sendcount, sendtype, recvbuf,
                  (long long)recvcount * comm_size(comm), recvtype);
    check_fits(&c, "MPI_Igather", sendcount, sendtype, recvcount, recvtype);
  }
  race_note_coll(&c, "MPI_Igather", sendbuf, sendcount, sendtype);
  const int rc = PMPI_Igather(sendbuf, sendcount, sendtype, recvbuf,
                              recvcount, recvtype, root, comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                 void *recvbuf, const int recvcounts[], const int displs[],
                 MPI_Datatype recvtype, int root, MPI_Comm comm,
                 MPI_Request *request) {
  call c;
  const int own = g.on && sendbuf == MPI_IN_PLACE && recvcounts
                      ? recvcounts[my_rank(comm)] : 0;
  begin_nb(&c, comm, "igatherv", "", SEND_SIDE(sendbuf, sendcount, sendtype, own,
                                           recvtype), root, RA);
  if (c.ci && my_rank(comm) == root && sendbuf != MPI_IN_PLACE && recvcounts) {
    check_overlap(&c, "MPI_Igatherv", sendbuf, sendcount, sendtype, recvbuf,
                  v_items(recvcounts, displs, comm), recvtype);
    check_fits(&c, "MPI_Igatherv", sendcount, sendtype,
               recvcounts[my_rank(comm)], recvtype);
  }
  const int rc =
      PMPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                    recvtype, root, comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype,
                 int root, MPI_Comm comm, MPI_Request *request) {
  call c;
  const bool in = recvbuf == MPI_IN_PLACE;
  begin_nb(&c, comm, "iscatter", "", in ? sendtype : recvtype,
        in ? sendcount : recvcount, root, RA);
  if (c.ci && my_rank(comm) == root && recvbuf != MPI_IN_PLACE) {
    check_overlap(&c, "MPI_Iscatter", sendbuf,
                  (long long)sendcount * comm_size(comm), sendtype, recvbuf,
                  recvcount, recvtype);
    check_fits(&c, "MPI_Iscatter", sendcount, sendtype, recvcount, recvtype);
  }
  if (c.ci && my_rank(comm) == root)
    race_note_coll(&c, "MPI_Iscatter", sendbuf,
                   (long long)sendcount * comm_size(comm), sendtype);
  const int rc = PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf,
                               recvcount, recvtype, root, comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Iscatterv(const void *sendbuf, const int sendcounts[],
                  const int displs[], MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, int root,
                  MPI_Comm comm, MPI_Request *request) {
  call c;
  const bool in = recvbuf == MPI_IN_PLACE;
  const int own = g.on && in && sendcounts ? sendcounts[my_rank(comm)] : 0;
  begin_nb(&c, comm, "iscatterv", "", in ? sendtype : recvtype,
        in ? own : recvcount, root, RA);
  if (c.ci && my_rank(comm) == root && recvbuf != MPI_IN_PLACE && sendcounts) {
    check_overlap(&c, "MPI_Iscatterv", sendbuf,
                  v_items(sendcounts, displs, comm), sendtype, recvbuf,
                  recvcount, recvtype);
    check_fits(&c, "MPI_Iscatterv", sendcounts[my_rank(comm)], sendtype,
               recvcount, recvtype);
  }
  const int rc = PMPI_Iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf,
                                recvcount, recvtype, root, comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                   void *recvbuf, int recvcount, MPI_Datatype recvtype,
                   MPI_Comm comm, MPI_Request *request) {
  call c;
  begin_nb(&c, comm, "iall_gather", "", SEND_SIDE(sendbuf, sendcount, sendtype,
                                              recvcount, recvtype), -1, RA);
  if (c.ci && sendbuf != MPI_IN_PLACE) {
    check_overlap(&c, "MPI_Iallgather", sendbuf, sendcount, sendtype, recvbuf,
                  (long long)recvcount * comm_size(comm), recvtype);
    check_fits(&c, "MPI_Iallgather", sendcount, sendtype, recvcount, recvtype);
  }
  race_note_coll(&c, "MPI_Iallgather", sendbuf, sendcount, sendtype);
  const int rc = PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf,
                                 recvcount, recvtype, comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                    void *recvbuf, const int recvcounts[], const int displs[],
                    MPI_Datatype recvtype, MPI_Comm comm,
                    MPI_Request *request) {
  call c;
  const int own = g.on && sendbuf == MPI_IN_PLACE && recvcounts
                      ? recvcounts[my_rank(comm)] : 0;
  begin_nb(&c, comm, "iall_gatherv", "", SEND_SIDE(sendbuf, sendcount, sendtype,
                                               own, recvtype), -1, RA);
  if (c.ci && sendbuf != MPI_IN_PLACE && recvcounts) {
    check_overlap(&c, "MPI_Iallgatherv", sendbuf, sendcount, sendtype, recvbuf,
                  v_items(recvcounts, displs, comm), recvtype);
    check_fits(&c, "MPI_Iallgatherv", sendcount, sendtype,
               recvcounts[my_rank(comm)], recvtype);
  }
  const int rc = PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf,
                                  recvcounts, displs, recvtype, comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                  void *recvbuf, int recvcount, MPI_Datatype recvtype,
                  MPI_Comm comm, MPI_Request *request) {
  call c;
  begin_nb(&c, comm, "iall_to_all", "", SEND_SIDE(sendbuf, sendcount, sendtype,
                                              recvcount, recvtype), -1, RA);
  if (c.ci && sendbuf != MPI_IN_PLACE) {
    check_overlap(&c, "MPI_Ialltoall", sendbuf,
                  (long long)sendcount * comm_size(comm), sendtype, recvbuf,
                  (long long)recvcount * comm_size(comm), recvtype);
    check_fits(&c, "MPI_Ialltoall", sendcount, sendtype, recvcount, recvtype);
  }
  if (c.ci)
    race_note_coll(&c, "MPI_Ialltoall", sendbuf,
                   (long long)sendcount * comm_size(comm), sendtype);
  const int rc = PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf,
                                recvcount, recvtype, comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Ialltoallv(const void *sendbuf, const int sendcounts[],
                   const int sdispls[], MPI_Datatype sendtype, void *recvbuf,
                   const int recvcounts[], const int rdispls[],
                   MPI_Datatype recvtype, MPI_Comm comm,
                   MPI_Request *request) {
  call c;
  const bool in = sendbuf == MPI_IN_PLACE;
  begin_nb(&c, comm, "iall_to_allv", "", in ? recvtype : sendtype,
        g.on ? sum_counts(in ? recvcounts : sendcounts, comm) : 0, -1, RA);
  if (c.ci && sendbuf != MPI_IN_PLACE && sendcounts && recvcounts) {
    check_overlap(&c, "MPI_Ialltoallv", sendbuf,
                  v_items(sendcounts, sdispls, comm), sendtype, recvbuf,
                  v_items(recvcounts, rdispls, comm), recvtype);
    check_fits(&c, "MPI_Ialltoallv", sendcounts[my_rank(comm)], sendtype,
               recvcounts[my_rank(comm)], recvtype);
  }
  const int rc = PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype,
                                 recvbuf, recvcounts, rdispls, recvtype, comm,
                                 request);
  posted(&c, rc, request);
  return rc;
}

/* ---- non-blocking w-form and neighbourhood collectives (as above;
 * done when their request completes) */

int MPI_Ialltoallw(const void *sendbuf, const int sendcounts[],
                   const int sdispls[], const MPI_Datatype sendtypes[],
                   void *recvbuf, const int recvcounts[], const int rdispls[],
                   const MPI_Datatype recvtypes[], MPI_Comm comm,
                   MPI_Request *request) {
  call c;
  c.ci = NULL;
  if (g.on) {
    const bool in = sendbuf == MPI_IN_PLACE;
    tinfo t;
    const long long n = w_info(in ? recvcounts : sendcounts,
                               in ? recvtypes : sendtypes, comm_size(comm),
                               &t);
    record_t(&c, false, comm, "iall_to_allw", "", &t, n, -1, RA);
  }
  const int rc = PMPI_Ialltoallw(sendbuf, sendcounts, sdispls, sendtypes,
                                 recvbuf, recvcounts, rdispls, recvtypes,
                                 comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Ineighbor_allgather(const void *sendbuf, int sendcount,
                            MPI_Datatype sendtype, void *recvbuf,
                            int recvcount, MPI_Datatype recvtype,
                            MPI_Comm comm, MPI_Request *request) {
  call c;
  begin_nb(&c, comm, "ineighbor_all_gather", "", sendtype, sendcount, -1, RA);
  const int rc = PMPI_Ineighbor_allgather(sendbuf, sendcount, sendtype,
                                          recvbuf, recvcount, recvtype, comm,
                                          request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Ineighbor_allgatherv(const void *sendbuf, int sendcount,
                             MPI_Datatype sendtype, void *recvbuf,
                             const int recvcounts[], const int displs[],
                             MPI_Datatype recvtype, MPI_Comm comm,
                             MPI_Request *request) {
  call c;
  begin_nb(&c, comm, "ineighbor_all_gatherv", "", sendtype, sendcount, -1,
           RA);
  const int rc = PMPI_Ineighbor_allgatherv(sendbuf, sendcount, sendtype,
                                           recvbuf, recvcounts, displs,
                                           recvtype, comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Ineighbor_alltoall(const void *sendbuf, int sendcount,
                           MPI_Datatype sendtype, void *recvbuf,
                           int recvcount, MPI_Datatype recvtype,
                           MPI_Comm comm, MPI_Request *request) {
  call c;
  begin_nb(&c, comm, "ineighbor_all_to_all", "", sendtype, sendcount, -1, RA);
  const int rc = PMPI_Ineighbor_alltoall(sendbuf, sendcount, sendtype,
                                         recvbuf, recvcount, recvtype, comm,
                                         request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Ineighbor_alltoallv(const void *sendbuf, const int sendcounts[],
                            const int sdispls[], MPI_Datatype sendtype,
                            void *recvbuf, const int recvcounts[],
                            const int rdispls[], MPI_Datatype recvtype,
                            MPI_Comm comm, MPI_Request *request) {
  call c;
  long long n = 0;
  for (int i = 0, d = g.on && sendcounts ? out_degree(comm) : 0; i < d; i++)
    n += sendcounts[i];
  begin_nb(&c, comm, "ineighbor_all_to_allv", "", sendtype, n, -1, RA);
  const int rc = PMPI_Ineighbor_alltoallv(sendbuf, sendcounts, sdispls,
                                          sendtype, recvbuf, recvcounts,
                                          rdispls, recvtype, comm, request);
  posted(&c, rc, request);
  return rc;
}

int MPI_Ineighbor_alltoallw(const void *sendbuf, const int sendcounts[],
                            const MPI_Aint sdispls[],
                            const MPI_Datatype sendtypes[], void *recvbuf,
                            const int recvcounts[], const MPI_Aint rdispls[],
                            const MPI_Datatype recvtypes[], MPI_Comm comm,
                            MPI_Request *request) {
  call c;
  c.ci = NULL;
  if (g.on) {
    tinfo t;
    const long long n = w_info(sendcounts, sendtypes, out_degree(comm), &t);
    record_t(&c, false, comm, "ineighbor_all_to_allw", "", &t, n, -1, RA);
  }
  const int rc = PMPI_Ineighbor_alltoallw(sendbuf, sendcounts, sdispls,
                                          sendtypes, recvbuf, recvcounts,
                                          rdispls, recvtypes, comm, request);
  posted(&c, rc, request);
  return rc;
}
