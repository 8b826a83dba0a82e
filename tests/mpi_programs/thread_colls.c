/* thread_colls.c: an MPI_THREAD_MULTIPLE program whose two threads on
 * each rank run loops of MPI_Allreduce at once, each thread on a
 * communicator of its own (duplicates of the world): the interposer's
 * short lines under MPI_THREAD_MULTIPLE, which interleave in the record.
 * With no argument, rank 1's second thread reduces with MPI_PROD where
 * the others use MPI_SUM at its 601st call (line 41, the bug; MPI runs
 * it and the sums are wrong): `vqcheck watch` must report one
 * collective_mismatch at collective #601 naming rank 1's MPI_PROD at
 * thread_colls.c:41. With "clean" every call matches: exit 0. 2 ranks. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define CALLS 800

typedef struct job {
  MPI_Comm comm;
  int rank, thread;
  int bug;
} job;

/* The two threads of a rank start their loops together. */
static pthread_barrier_t start;

static void *loop(void *arg) {
  const job *j = arg;
  double x = 1, y = 0;
  pthread_barrier_wait(&start);
  for (int i = 0; i < CALLS; i++) {
    MPI_Op op = i % 2 == 0 ? MPI_SUM : MPI_MAX;
    if (j->bug && j->rank == 1 && j->thread == 1 && i == 600) op = MPI_PROD;
    /* rank 1's threads come late now and then, the first for 20 ms at
     * every 100th call, the second for 2 ms at others: each of rank 0's
     * threads waits in a call while the other makes calls of its own, so
     * their lines interleave whatever the scheduling (the second's loop
     * used to end within 2 ms, and a thread started late met none) */
    if (j->rank == 1 && j->thread == 0 && i % 100 == 50) usleep(20000);
    if (j->rank == 1 && j->thread == 1 && i % 100 == 0) usleep(2000);
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, op, j->comm);
  }
  return NULL;
}

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    printf("no MPI_THREAD_MULTIPLE (%d)\n", provided);
    MPI_Finalize();
    return 0;
  }
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int bug = !(argc > 1 && strcmp(argv[1], "clean") == 0);
  job jobs[2];
  pthread_t threads[2];
  for (int t = 0; t < 2; t++) {
    jobs[t] = (job){.rank = rank, .thread = t, .bug = bug};
    MPI_Comm_dup(MPI_COMM_WORLD, &jobs[t].comm);
  }
  pthread_barrier_init(&start, NULL, 2);
  for (int t = 0; t < 2; t++) pthread_create(&threads[t], NULL, loop, &jobs[t]);
  for (int t = 0; t < 2; t++) pthread_join(threads[t], NULL);
  pthread_barrier_destroy(&start);
  for (int t = 0; t < 2; t++) MPI_Comm_free(&jobs[t].comm);
  MPI_Finalize();
  return 0;
}
