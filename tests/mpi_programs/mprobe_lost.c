/* mprobe_lost.c: messages of a size the receiver learns by probing. The
 * worker (rank 1) sends 3 results of growing length (tag 9); the
 * coordinator takes the first with MPI_Mprobe + MPI_Mrecv, the second with
 * MPI_Improbe + MPI_Imrecv, and never the third (the bug: its loop ends a
 * message early). With buffered sends the third one waits in MPI's buffer
 * and the program ends "fine"; under vqcheck watch's synchronous sends the
 * worker hangs in its third MPI_Send (line 40). 2 ranks. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static double *recv_any_size(MPI_Comm comm, int nonblocking, int *n) {
  MPI_Message msg;
  MPI_Status st;
  if (nonblocking) {
    int flag = 0;
    while (!flag) MPI_Improbe(1, 9, comm, &flag, &msg, &st);
  } else {
    MPI_Mprobe(1, 9, comm, &msg, &st);
  }
  MPI_Get_count(&st, MPI_DOUBLE, n);
  double *v = malloc(sizeof *v * (size_t)(*n > 0 ? *n : 1));
  if (nonblocking) {
    MPI_Request req;
    MPI_Imrecv(v, *n, MPI_DOUBLE, &msg, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  } else {
    MPI_Mrecv(v, *n, MPI_DOUBLE, &msg, MPI_STATUS_IGNORE);
  }
  return v;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 1) {
    double v[3] = {1, 2, 3};
    for (int k = 1; k <= 3; k++)
      MPI_Send(v, k, MPI_DOUBLE, 0, 9, MPI_COMM_WORLD);
  } else if (rank == 0) {
    for (int k = 1; k < 3; k++) { /* the bug: 3 were sent */
      int n = 0;
      double *v = recv_any_size(MPI_COMM_WORLD, k == 2, &n);
      printf("result %d: %d values\n", k, n);
      free(v);
    }
  }
  MPI_Finalize();
  return 0;
}
