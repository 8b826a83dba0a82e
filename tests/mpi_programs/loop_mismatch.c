/* loop_mismatch.c: a training loop that averages a gradient of 4 doubles
 * and the loss with two MPI_Allreduce calls per step; at step 300 rank 1's
 * batch is short and it reduces 3 gradient values (the count taken from
 * its own batch: a real bug class). Steps before and after are alike, so
 * the interposer writes their calls as short lines (docs/mpi.md "What it
 * costs"); `vqcheck watch` must still name collective #601, rank 1 and
 * the gradients' line. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double grad[4] = {1, 2, 3, 4}, sum[4], loss = 1.0, total = 0.0;
  for (int step = 0; step < 500; step++) {
    const int batch = rank == 1 && step == 300 ? 3 : 4; /* the bug */
    MPI_Allreduce(grad, sum, batch, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&loss, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  if (rank == 0) printf("sum[0] %g, loss %g\n", sum[0], total);
  MPI_Finalize();
  return 0;
}
