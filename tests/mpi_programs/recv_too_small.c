/* recv_too_small.c: every rank sends 4 ints to an all-gather whose receive
 * side was sized for 2 per rank (the count changed in one place only).
 * `vqcheck watch` must name it before any data moves, at the MPI_Allgather
 * line, on every rank. Run on 2 ranks. */
#include <mpi.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int mine[4] = {rank, rank, rank, rank}, all[64];
  MPI_Allgather(mine, 4, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
