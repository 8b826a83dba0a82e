/* halo_clean.c: a correct halo exchange as stencil codes write it. Each
 * rank holds an 8 x 8 block of one array with a ring of ghost cells;
 * columns go to the left and right neighbours with a vector type
 * (MPI_Isend/MPI_Irecv into the same array: their spans interleave, their
 * bytes do not), the interior is updated while they are in flight, and
 * the rows go with MPI_Sendrecv. `vqcheck watch` must find nothing: exit
 * 0, and the program's own check of its ghost cells passes. 3 ranks. */
#include <mpi.h>
#include <stdio.h>

#define N 8
static double a[N + 2][N + 2];

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int left = (rank + size - 1) % size, right = (rank + 1) % size;
  MPI_Datatype column;
  MPI_Type_vector(N, 1, N + 2, MPI_DOUBLE, &column);
  MPI_Type_commit(&column);
  for (int i = 0; i < N + 2; i++)
    for (int j = 0; j < N + 2; j++) a[i][j] = rank;
  int errs = 0;
  for (int step = 0; step < 3; step++) {
    MPI_Request r[4];
    MPI_Irecv(&a[1][0], 1, column, left, 1, MPI_COMM_WORLD, &r[0]);
    MPI_Irecv(&a[1][N + 1], 1, column, right, 2, MPI_COMM_WORLD, &r[1]);
    MPI_Isend(&a[1][1], 1, column, left, 2, MPI_COMM_WORLD, &r[2]);
    MPI_Isend(&a[1][N], 1, column, right, 1, MPI_COMM_WORLD, &r[3]);
    for (int i = 2; i < N; i++) /* the interior, meanwhile */
      for (int j = 2; j < N; j++) a[i][j] += 0.0;
    MPI_Waitall(4, r, MPI_STATUSES_IGNORE);
    MPI_Sendrecv(&a[1][0], N + 2, MPI_DOUBLE, left, 3, &a[N + 1][0], N + 2,
                 MPI_DOUBLE, right, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    errs += a[4][0] != left || a[4][N + 1] != right || a[N + 1][4] != right;
  }
  MPI_Type_free(&column);
  if (errs) printf("rank %d: %d wrong ghost cells\n", rank, errs);
  MPI_Finalize();
  return errs ? 1 : 0;
}
