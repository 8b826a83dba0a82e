/* p2p_ring.c: a correct ring exchange in every non-blocking form, each
 * request completed another way: MPI_Isend/MPI_Irecv with MPI_Waitall,
 * MPI_Issend with MPI_Waitany, MPI_Irsend (its receive posted first) with
 * MPI_Waitsome, MPI_Ibsend with an MPI_Test loop and MPI_Testall, an
 * MPI_Isend let go with MPI_Request_free, an MPI_Irecv cancelled and then
 * waited on. `vqcheck watch` must find nothing (exit 0); the program
 * checks every value it received and exits 1 when one is wrong. 3 ranks. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int bad;
static void check(const char *what, int got, int want) {
  if (got != want) {
    fprintf(stderr, "p2p_ring: %s: got %d, expected %d\n", what, got, want);
    bad = 1;
  }
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  MPI_Request r[2];
  int in = -1, out;
  /* 1: Isend + Irecv, Waitall */
  out = 100 + rank;
  MPI_Irecv(&in, 1, MPI_INT, left, 1, MPI_COMM_WORLD, &r[0]);
  MPI_Isend(&out, 1, MPI_INT, right, 1, MPI_COMM_WORLD, &r[1]);
  MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
  check("Isend/Irecv", in, 100 + left);
  /* 2: Issend, Waitany twice */
  out = 200 + rank;
  MPI_Irecv(&in, 1, MPI_INT, left, 2, MPI_COMM_WORLD, &r[0]);
  MPI_Issend(&out, 1, MPI_INT, right, 2, MPI_COMM_WORLD, &r[1]);
  for (int k = 0, idx; k < 2; k++)
    MPI_Waitany(2, r, &idx, MPI_STATUS_IGNORE);
  check("Issend", in, 200 + left);
  /* 3: Irsend (the receive posted before the barrier), Waitsome */
  out = 300 + rank;
  MPI_Irecv(&in, 1, MPI_INT, left, 3, MPI_COMM_WORLD, &r[0]);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Irsend(&out, 1, MPI_INT, right, 3, MPI_COMM_WORLD, &r[1]);
  for (int done = 0; done < 2;) {
    int n, idx[2];
    MPI_Waitsome(2, r, &n, idx, MPI_STATUSES_IGNORE);
    done += n;
  }
  check("Irsend", in, 300 + left);
  /* 4: Ibsend, MPI_Test on the receive, MPI_Testall on both */
  int bsize = 0;
  MPI_Pack_size(1, MPI_INT, MPI_COMM_WORLD, &bsize);
  bsize += MPI_BSEND_OVERHEAD;
  void *bbuf = malloc((size_t)bsize);
  MPI_Buffer_attach(bbuf, bsize);
  out = 400 + rank;
  MPI_Irecv(&in, 1, MPI_INT, left, 4, MPI_COMM_WORLD, &r[0]);
  MPI_Ibsend(&out, 1, MPI_INT, right, 4, MPI_COMM_WORLD, &r[1]);
  for (int flag = 0; !flag;) MPI_Test(&r[0], &flag, MPI_STATUS_IGNORE);
  for (int flag = 0; !flag;) MPI_Testall(2, r, &flag, MPI_STATUSES_IGNORE);
  check("Ibsend", in, 400 + left);
  MPI_Buffer_detach(&bbuf, &bsize);
  free(bbuf);
  /* 5: an Isend let go (MPI_Request_free), its message received */
  out = 500 + rank;
  MPI_Isend(&out, 1, MPI_INT, right, 5, MPI_COMM_WORLD, &r[1]);
  MPI_Request_free(&r[1]);
  MPI_Recv(&in, 1, MPI_INT, left, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  check("Request_free", in, 500 + left);
  /* 6: an Irecv no one answers, cancelled and then waited on */
  MPI_Status st;
  int cancelled = 0;
  MPI_Irecv(&in, 1, MPI_INT, MPI_ANY_SOURCE, 6, MPI_COMM_WORLD, &r[0]);
  MPI_Cancel(&r[0]);
  MPI_Wait(&r[0], &st);
  MPI_Test_cancelled(&st, &cancelled);
  check("Cancel", cancelled, 1);
  MPI_Barrier(MPI_COMM_WORLD); /* out is not reused before all received */
  MPI_Finalize();
  return bad;
}
