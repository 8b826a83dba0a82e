/* neighbor_skip.c: a periodic ring of 3 ranks (MPI_Cart_create) that
 * gathers its neighbours' ranks twice; rank 2 skips the second gather and
 * goes on to MPI_Finalize, so ranks 0 and 1 wait for it forever.
 * `vqcheck watch --timeout T` must report a deadlock in the ring's
 * communicator naming rank 2 and the MPI_Neighbor_allgather of line 22. */
#include <mpi.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int dims[1] = {size}, periods[1] = {1};
  MPI_Comm ring;
  MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
  int got[2];
  MPI_Neighbor_allgather(&rank, 1, MPI_INT, got, 1, MPI_INT, ring);
  /* every rank has its neighbours' ranks; rank 2 thinks it is done */
  if (rank != 2) {
    got[0] += 1;
    got[1] += 1;
    MPI_Neighbor_allgather(&rank, 1, MPI_INT, got, 1, MPI_INT, ring);
  }
  MPI_Comm_free(&ring);
  MPI_Finalize();
  return 0;
}
