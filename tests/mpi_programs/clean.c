/* clean.c: a correct MPI program, written as users write them (no vqcheck
 * header), that `vqcheck watch -- mpiexec` must find clean (exit 0): it
 * uses MPI_IN_PLACE, a derived type on one side of a broadcast and basic
 * elements on the other (equal type signatures), a split communicator, a
 * gather with MPI_IN_PLACE at its root, and a non-blocking all-reduce
 * waited on. It checks its own results, exactly (integer sums), so the
 * interposer is seen not to change them: exit 1 on a wrong value. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size, bad = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  /* sum of ranks, out of place then in place */
  int mine = rank, sum = -1;
  MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  bad |= sum != size * (size - 1) / 2;
  int v[4] = {rank, 1, 2 * rank, 3};
  MPI_Allreduce(MPI_IN_PLACE, v, 4, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  bad |= v[0] != size - 1 || v[1] != 1 || v[2] != 2 * (size - 1) || v[3] != 3;

  /* the root sends one contiguous(4, MPI_INT), the others receive 4 ints */
  MPI_Datatype four;
  MPI_Type_contiguous(4, MPI_INT, &four);
  MPI_Type_commit(&four);
  int b[4] = {0, 0, 0, 0};
  if (rank == 0) {
    b[0] = 7; b[1] = 8; b[2] = 9; b[3] = 10;
    MPI_Bcast(b, 1, four, 0, MPI_COMM_WORLD);
  } else {
    MPI_Bcast(b, 4, MPI_INT, 0, MPI_COMM_WORLD);
  }
  bad |= b[0] != 7 || b[3] != 10;
  MPI_Type_free(&four);

  /* even and odd ranks: a sum within each half */
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  int hs = -1, hsize;
  MPI_Comm_size(half, &hsize);
  MPI_Allreduce(&mine, &hs, 1, MPI_INT, MPI_SUM, half);
  int expect = 0;
  for (int r = rank % 2; r < size; r += 2) expect += r;
  bad |= hs != expect;

  /* gather into the root's own buffer */
  int all[64];
  all[rank] = 100 + rank;
  if (rank == 0)
    MPI_Gather(MPI_IN_PLACE, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD);
  else
    MPI_Gather(&all[rank], 1, MPI_INT, NULL, 0, MPI_INT, 0, MPI_COMM_WORLD);
  for (int r = 0; rank == 0 && r < size; r++) bad |= all[r] != 100 + r;

  /* non-blocking, waited on */
  MPI_Request req;
  double d = 1.5, dsum = 0.0;
  MPI_Iallreduce(&d, &dsum, 1, MPI_DOUBLE, MPI_SUM, half, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  bad |= dsum != 1.5 * hsize;
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  int done = 0;
  while (!done) MPI_Test(&req, &done, MPI_STATUS_IGNORE);

  MPI_Comm_free(&half);
  if (bad) fprintf(stderr, "clean: rank %d: a wrong result\n", rank);
  MPI_Finalize();
  return bad;
}
