/* loop_exit.c: a training loop with an all-reduce per step and an early
 * stop decided on each rank's own loss: rank 2's loss drops under the
 * threshold at step 200 and it leaves the loop, while ranks 0 and 1 wait
 * in the next step's all-reduce forever (the decision was never agreed
 * on). The steps before are written as short lines; `vqcheck watch`
 * must find the deadlock at collective #201 naming rank 2. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double loss = 1.0, mean = 0.0;
  for (int step = 0; step < 1000; step++) {
    loss = rank == 2 && step == 200 ? 0.001 : 1.0 / (step + 1);
    if (loss < 0.002) break; /* the bug: a rank-local early stop */
    MPI_Allreduce(&loss, &mean, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  printf("rank %d: mean loss %g\n", rank, mean / 3);
  MPI_Finalize();
  return 0;
}
