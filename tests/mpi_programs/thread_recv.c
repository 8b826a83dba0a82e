/* thread_recv.c: an MPI_THREAD_MULTIPLE program with a receiver thread:
 * on rank 0 a thread waits for a "done" message (tag 5) from rank 1 that
 * rank 1 never sends (the bug: it sends tag 6), while the main thread
 * exchanges 20 pings with rank 1 (each a blocking call that comes and
 * goes) and then joins the thread; rank 1, after the pings, waits in
 * MPI_Barrier. `vqcheck watch` must say that rank 0 waits in MPI_Recv
 * from rank 1 (tag 5) at line 17, in a thread (the main thread's calls
 * used to hide it: one slot per process, cleared by each ping). */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static void *receiver(void *arg) {
  (void)arg;
  int done = 0;
  MPI_Recv(&done, 1, MPI_INT, 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  return NULL;
}

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    printf("no MPI_THREAD_MULTIPLE (%d)\n", provided);
    MPI_Abort(MPI_COMM_WORLD, 77);
  }
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  pthread_t t;
  if (rank == 0) {
    pthread_create(&t, NULL, receiver, NULL);
    usleep(200000); /* the receiver waits before the pings start */
  }
  double x = 0.0;
  for (int i = 0; i < 20; i++) {
    if (rank == 0) {
      MPI_Send(&x, 1, MPI_DOUBLE, 1, 1, MPI_COMM_WORLD);
      MPI_Recv(&x, 1, MPI_DOUBLE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
      MPI_Recv(&x, 1, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(&x, 1, MPI_DOUBLE, 0, 2, MPI_COMM_WORLD);
    }
  }
  if (rank == 1) {
    const int done = 1;
    MPI_Send(&done, 1, MPI_INT, 0, 6, MPI_COMM_WORLD); /* the bug: tag 6 */
  }
  if (rank == 0) pthread_join(t, NULL);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
