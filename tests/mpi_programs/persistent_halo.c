/* persistent_halo.c: a correct halo exchange on a ring written with
 * persistent requests, as stencil codes write it: MPI_Send_init and
 * MPI_Recv_init to both neighbours once, then every iteration MPI_Startall
 * and a completion (MPI_Waitall, or MPI_Testall polled, or MPI_Waitany one
 * by one, or MPI_Waitsome), the received halos checked by the program (exit
 * 1 on a wrong one), and MPI_Request_free at the end. `vqcheck watch` must
 * find nothing, and each rank's messages must be counted (not
 * "uncounted"): 40 per neighbour and direction. 3 ranks. */
#include <mpi.h>
#include <stdio.h>

#define ITERS 40

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size, errs = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  double send_l[4], send_r[4], from_l[4], from_r[4];
  MPI_Request req[4];
  MPI_Recv_init(from_l, 4, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &req[0]);
  MPI_Recv_init(from_r, 4, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, &req[1]);
  MPI_Send_init(send_r, 4, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &req[2]);
  MPI_Send_init(send_l, 4, MPI_DOUBLE, left, 2, MPI_COMM_WORLD, &req[3]);
  for (int it = 0; it < ITERS; it++) {
    for (int k = 0; k < 4; k++) send_l[k] = send_r[k] = 100 * it + rank;
    MPI_Startall(4, req);
    if (it % 4 == 0) {
      MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
    } else if (it % 4 == 1) {
      int flag = 0;
      while (!flag) MPI_Testall(4, req, &flag, MPI_STATUSES_IGNORE);
    } else if (it % 4 == 2) {
      for (int k = 0; k < 4; k++) {
        int idx;
        MPI_Waitany(4, req, &idx, MPI_STATUS_IGNORE);
      }
    } else {
      int done = 0, idx[4];
      while (done < 4) {
        int n;
        MPI_Waitsome(4, req, &n, idx, MPI_STATUSES_IGNORE);
        done += n;
      }
    }
    if (from_l[3] != 100 * it + left || from_r[0] != 100 * it + right) errs++;
  }
  for (int k = 0; k < 4; k++) MPI_Request_free(&req[k]);
  if (errs) fprintf(stderr, "rank %d: %d wrong halos\n", rank, errs);
  MPI_Finalize();
  return errs ? 1 : 0;
}
