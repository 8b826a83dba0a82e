/* overlap_type.c: a column of floats described with a byte stride of 3
 * (MPI_Type_create_hvector(16, 1, 3, MPI_FLOAT)): its elements overlap.
 * Sending with it is legal (bytes read twice); receiving into it is not
 * (bytes written twice), and rank 1 does (line 28). A correct twin: the
 * stride 4 * 16 (one float per row of a 16 x 16 matrix), sent and
 * received. `vqcheck watch` must report one lost_inplace at
 * overlap_type.c:28, "receives into a datatype whose elements overlap".
 * 2 ranks. */
#include <mpi.h>
#include <stdio.h>

static float m[16 * 16];

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Datatype good, bad;
  MPI_Type_create_hvector(16, 1, 16 * sizeof(float), MPI_FLOAT, &good);
  MPI_Type_create_hvector(16, 1, 3, MPI_FLOAT, &bad);
  MPI_Type_commit(&good);
  MPI_Type_commit(&bad);
  if (rank == 0) {
    MPI_Send(m, 1, good, 1, 1, MPI_COMM_WORLD);
    MPI_Send(m, 1, bad, 1, 2, MPI_COMM_WORLD);
  } else {
    MPI_Recv(m, 1, good, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Recv(m, 1, bad, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  MPI_Type_free(&good);
  MPI_Type_free(&bad);
  MPI_Finalize();
  return 0;
}
