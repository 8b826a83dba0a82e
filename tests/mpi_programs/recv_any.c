/* recv_any.c: two ranks that each wait for a message no one sends. Rank 0
 * waits in MPI_Recv from MPI_ANY_SOURCE (tag 3) on MPI_COMM_WORLD; rank 1
 * waits in MPI_Recv with MPI_ANY_TAG from rank 1 of a communicator split
 * with the ranks reversed, which is world rank 0. `vqcheck watch --timeout
 * T` must name each call and its peer as a world rank: "rank 0 waits in
 * MPI_Recv from any rank (tag 3)" and "rank 1 waits in MPI_Recv from rank 0
 * (any tag) on communicator world/split1". Run on 2 ranks. */
#include <mpi.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, x = 0;
  MPI_Status st;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm reversed;
  MPI_Comm_split(MPI_COMM_WORLD, 0, -rank, &reversed);
  if (rank == 0)
    MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &st);
  else
    MPI_Recv(&x, 1, MPI_INT, 1, MPI_ANY_TAG, reversed, &st);
  MPI_Comm_free(&reversed);
  MPI_Finalize();
  return 0;
}
