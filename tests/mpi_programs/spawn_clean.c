/* spawn_clean.c: a job that starts helpers with MPI_Comm_spawn. The 2
 * ranks of the job spawn 3 workers (a world of their own, ranks 0-2);
 * rank 0 hands each a task over the intercommunicator and collects the
 * answers, then the job's ranks all-reduce the total. Correct: under
 * vqcheck watch the workers are not recorded (their rank numbers are the
 * job's too: rank 0 and 1 would overwrite the job's records, rank 2 would
 * pose as a third rank of the job), and the job's 2 ranks are checked:
 * exit 0. 2 ranks (+ 3 spawned). */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm parent;
  MPI_Comm_get_parent(&parent);
  if (parent != MPI_COMM_NULL) { /* a worker */
    double task = 0;
    MPI_Recv(&task, 1, MPI_DOUBLE, 0, 1, parent, MPI_STATUS_IGNORE);
    task *= 2;
    MPI_Send(&task, 1, MPI_DOUBLE, 0, 2, parent);
    MPI_Comm_disconnect(&parent);
    MPI_Finalize();
    return 0;
  }
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm workers;
  MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 3, MPI_INFO_NULL, 0,
                 MPI_COMM_WORLD, &workers, MPI_ERRCODES_IGNORE);
  double total = 0;
  if (rank == 0) {
    for (int w = 0; w < 3; w++) {
      double task = w + 1.0;
      MPI_Send(&task, 1, MPI_DOUBLE, w, 1, workers);
    }
    for (int w = 0; w < 3; w++) {
      double answer = 0;
      MPI_Recv(&answer, 1, MPI_DOUBLE, w, 2, workers, MPI_STATUS_IGNORE);
      total += answer;
    }
  }
  double sum = 0;
  MPI_Allreduce(&total, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  printf("rank %d: %g\n", rank, sum);
  MPI_Comm_disconnect(&workers);
  MPI_Finalize();
  return sum == 12.0 ? 0 : 1;
}
