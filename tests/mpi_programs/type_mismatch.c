/* type_mismatch.c: rank 0 sends four messages of doubles (tag 7) to rank
 * 1, which receives the third as MPI_LONG: the same 8 bytes each, so MPI
 * delivers them without a word, read as integers. Around it, correct
 * messages that must not be findings: a vector of doubles received as
 * plain MPI_DOUBLE (the same type signature), a wildcard receive, MPI_BYTE
 * on both sides. `vqcheck watch` must report one collective_mismatch at
 * the receive of line 38: message 3 of tag 7 received as int64 (MPI_LONG),
 * sent as float64 (MPI_DOUBLE) at line 36. 2 ranks. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double grid[4][3] = {{0}};
  MPI_Datatype column;
  MPI_Type_vector(4, 1, 3, MPI_DOUBLE, &column);
  MPI_Type_commit(&column);
  if (rank == 0) {
    for (int i = 0; i < 4; i++) grid[i][1] = i;
    MPI_Send(&grid[0][1], 1, column, 1, 1, MPI_COMM_WORLD);
    MPI_Send("ok", 3, MPI_BYTE, 1, 2, MPI_COMM_WORLD);
  } else {
    double col[4];
    char ok[3];
    MPI_Recv(col, 4, MPI_DOUBLE, 0, MPI_ANY_TAG, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
    MPI_Recv(ok, 3, MPI_BYTE, MPI_ANY_SOURCE, 2, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
  }
  MPI_Type_free(&column);
  double x[2] = {1.5, 2.5};
  long y[2];
  for (int m = 0; m < 4; m++) {
    if (rank == 0) MPI_Send(x, 2, MPI_DOUBLE, 1, 7, MPI_COMM_WORLD);
    if (rank == 1) {
      if (m == 2) MPI_Recv(y, 2, MPI_LONG, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      else MPI_Recv(x, 2, MPI_DOUBLE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  }
  MPI_Finalize();
  return 0;
}
