/* truncated.c: rank 0 sends 4 ints, rank 1 receives into room for 2
 * (line 15): MPI aborts rank 1 with MPI_ERR_TRUNCATE. `vqcheck watch`
 * must report a rank_failure naming rank 1, MPI's error and the receive it
 * was in, with its sender: "in MPI_Recv from rank 0 (tag 5) at
 * truncated.c:15 (main)". 2 ranks. */
#include <mpi.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, v[4] = {1, 2, 3, 4};
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0)
    MPI_Send(v, 4, MPI_INT, 1, 5, MPI_COMM_WORLD);
  else
    MPI_Recv(v, 2, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Finalize();
  return 0;
}
