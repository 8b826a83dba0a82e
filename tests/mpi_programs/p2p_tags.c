/* p2p_tags.c: a tag per step, as a program that numbers its messages
 * does: 40000 steps in which rank 0 sends rank 1 a value of tag `step` and
 * gets one back of the same tag: 80000 (communicator, peer, tag) channels
 * per rank, more than the interposer keeps one by one (65536), so the
 * rest share a many-tags channel and the analysis compares the pair's
 * messages in all. With "clean" that is all: exit 0. Without, rank 0 then
 * sends one more message (tag 40007, line 34) that rank 1 never receives:
 * with --buffered-sends the program ends, and `vqcheck watch` must report
 * rank 0's 40001 messages to rank 1 of which 40000 were received (before,
 * the rank's counts were dropped past 65536 channels: green). 2 ranks. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define STEPS 40000

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int lose = !(argc > 1 && strcmp(argv[1], "clean") == 0);
  double x = rank, y = 0;
  for (int step = 0; step < STEPS; step++) {
    if (rank == 0) {
      MPI_Send(&x, 1, MPI_DOUBLE, 1, step, MPI_COMM_WORLD);
      MPI_Recv(&y, 1, MPI_DOUBLE, 1, step, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
      MPI_Recv(&y, 1, MPI_DOUBLE, 0, step, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(&x, 1, MPI_DOUBLE, 0, step, MPI_COMM_WORLD);
    }
  }
  if (lose && rank == 0) {
    const double last = 1;
    MPI_Send(&last, 1, MPI_DOUBLE, 1, STEPS + 7, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
