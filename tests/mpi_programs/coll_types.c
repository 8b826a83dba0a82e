/* coll_types.c: an MPI_Allgather that sends MPI_INT and receives
 * MPI_FLOAT (line 26) on every rank: the sizes match, so MPI moves the
 * bytes and the floats hold integers' bits. Correct twins around it: an
 * MPI_Alltoall of MPI_INT received as contiguous(2, MPI_INT) (the same
 * type signature), an MPI_Gather of MPI_BYTE. `vqcheck watch` must report
 * one collective_mismatch at coll_types.c:26 naming int32 (MPI_INT) and
 * float32 (MPI_FLOAT). 3 ranks. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int out[8] = {rank, rank, rank, rank, rank, rank, rank, rank}, in[8];
  MPI_Datatype pair;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  MPI_Type_commit(&pair);
  MPI_Alltoall(out, 2, MPI_INT, in, 1, pair, MPI_COMM_WORLD);
  char b = (char)rank, bs[8];
  MPI_Gather(&b, 1, MPI_BYTE, bs, 1, MPI_BYTE, 0, MPI_COMM_WORLD);
  MPI_Type_free(&pair);
  float f[8];
  /* the bug: ints sent, floats received */
  MPI_Allgather(out, 1, MPI_INT, f, 1, MPI_FLOAT, MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
