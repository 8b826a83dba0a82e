/* send_send.c: two ranks exchange one int each with MPI_Send first and
 * MPI_Recv second. Small messages are buffered by MPI, so the program
 * runs; MPI does not promise that, and with larger messages (or another
 * MPI) both ranks wait in MPI_Send forever. `vqcheck watch` runs MPI_Send
 * as MPI_Ssend by default, so the exchange hangs at once and is reported:
 * a deadlock naming both ranks' MPI_Send at send_send.c:17. 2 ranks. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int peer = rank ^ 1;
  int out = rank, in = -1;
  MPI_Send(&out, 1, MPI_INT, peer, 7, MPI_COMM_WORLD); /* the bug */
  MPI_Recv(&in, 1, MPI_INT, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Finalize();
  return in == peer ? 0 : 1;
}
