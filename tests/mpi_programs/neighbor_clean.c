/* neighbor_clean.c: a periodic ring (MPI_Cart_create, one dimension)
 * whose ranks exchange with both neighbours through every neighbourhood
 * collective, blocking and non-blocking, then an MPI_Alltoallw on the
 * world. Each result is checked (exit 1 when one is wrong). Correct:
 * `vqcheck watch` must find nothing and record every call, entered and
 * done, on the ring's communicator (world/cart1). Run on 4 ranks. */
#include <mpi.h>
#include <stdio.h>

/* A cart's neighbours come in order: the rank below, then the one above. */
static int check(const char *what, const int got[2], int below, int above) {
  if (got[0] == below && got[1] == above) return 0;
  fprintf(stderr, "%s: got %d, %d; expected %d, %d\n", what, got[0], got[1],
          below, above);
  return 1;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size, bad = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int dims[1] = {size}, periods[1] = {1};
  MPI_Comm ring;
  MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
  const int below = (rank + size - 1) % size, above = (rank + 1) % size;

  /* to the rank below, to the rank above: 10 x sender + direction */
  int out[2] = {10 * rank, 10 * rank + 1}, got[2] = {-1, -1};
  int counts[2] = {1, 1}, displs[2] = {0, 1};
  MPI_Aint bytes[2] = {0, sizeof(int)};
  MPI_Datatype types[2] = {MPI_INT, MPI_INT};

  MPI_Neighbor_allgather(&rank, 1, MPI_INT, got, 1, MPI_INT, ring);
  bad |= check("MPI_Neighbor_allgather", got, below, above);
  MPI_Neighbor_allgatherv(&rank, 1, MPI_INT, got, counts, displs, MPI_INT,
                          ring);
  bad |= check("MPI_Neighbor_allgatherv", got, below, above);
  /* from below: what it sent up (x1); from above: what it sent down */
  MPI_Neighbor_alltoall(out, 1, MPI_INT, got, 1, MPI_INT, ring);
  bad |= check("MPI_Neighbor_alltoall", got, 10 * below + 1, 10 * above);
  MPI_Neighbor_alltoallv(out, counts, displs, MPI_INT, got, counts, displs,
                         MPI_INT, ring);
  bad |= check("MPI_Neighbor_alltoallv", got, 10 * below + 1, 10 * above);
  MPI_Neighbor_alltoallw(out, counts, bytes, types, got, counts, bytes, types,
                         ring);
  bad |= check("MPI_Neighbor_alltoallw", got, 10 * below + 1, 10 * above);

  MPI_Request req;
  MPI_Ineighbor_allgather(&rank, 1, MPI_INT, got, 1, MPI_INT, ring, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  bad |= check("MPI_Ineighbor_allgather", got, below, above);
  MPI_Ineighbor_allgatherv(&rank, 1, MPI_INT, got, counts, displs, MPI_INT,
                           ring, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  bad |= check("MPI_Ineighbor_allgatherv", got, below, above);
  MPI_Ineighbor_alltoall(out, 1, MPI_INT, got, 1, MPI_INT, ring, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  bad |= check("MPI_Ineighbor_alltoall", got, 10 * below + 1, 10 * above);
  MPI_Ineighbor_alltoallv(out, counts, displs, MPI_INT, got, counts, displs,
                          MPI_INT, ring, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  bad |= check("MPI_Ineighbor_alltoallv", got, 10 * below + 1, 10 * above);
  MPI_Ineighbor_alltoallw(out, counts, bytes, types, got, counts, bytes,
                          types, ring, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  bad |= check("MPI_Ineighbor_alltoallw", got, 10 * below + 1, 10 * above);

  /* Alltoallw on the world: rank r sends 100 r + d to rank d. */
  int all_out[64], all_in[64], ones[64], at[64];
  MPI_Datatype ints[64];
  for (int d = 0; d < size && d < 64; d++) {
    all_out[d] = 100 * rank + d;
    all_in[d] = -1;
    ones[d] = 1;
    at[d] = d * (int)sizeof(int);
    ints[d] = MPI_INT;
  }
  MPI_Alltoallw(all_out, ones, at, ints, all_in, ones, at, ints,
                MPI_COMM_WORLD);
  for (int s = 0; s < size && s < 64; s++)
    if (all_in[s] != 100 * s + rank) {
      fprintf(stderr, "MPI_Alltoallw: from %d got %d\n", s, all_in[s]);
      bad = 1;
    }

  MPI_Comm_free(&ring);
  MPI_Finalize();
  return bad;
}
