/* freed_recv.c: rank 1 posts an MPI_Irecv (line 16) and lets it go with
 * MPI_Request_free (line 17) before it completed; rank 0 frees its
 * MPI_Isend the same way, which is correct MPI. `vqcheck watch` must
 * report one deadlock finding at freed_recv.c:17 naming rank 1, "let its
 * MPI_Irecv from rank 0 (tag 3) (started at freed_recv.c:16) go with
 * MPI_Request_free before it completed". 2 ranks. */
#include <mpi.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, v = 7;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Request r;
  if (rank == 0) MPI_Isend(&v, 1, MPI_INT, 1, 3, MPI_COMM_WORLD, &r);
  else
    MPI_Irecv(&v, 1, MPI_INT, 0, 3, MPI_COMM_WORLD, &r);
  MPI_Request_free(&r);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
