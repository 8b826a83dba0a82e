/* type_reuse.c: a type made, used and freed per field, as a loop over a
 * program's fields does it; MPI gives the next type the freed one's
 * handle. Field 0: every rank broadcasts contiguous(2, MPI_DOUBLE).
 * Field 1: ranks 0 and 2 broadcast contiguous(2, MPI_INT), rank 1
 * contiguous(2, MPI_FLOAT) (the bug, line 30: the sizes match, so MPI
 * moves the bytes and rank 1's floats hold integers' bits). `vqcheck
 * watch` must report one collective_mismatch at type_reuse.c:30 naming
 * rank 1 and float32 (a type kept by its handle past MPI_Type_free would
 * name float64 on every rank and find nothing). 3 ranks. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double d[2] = {rank, rank};
  int i[2] = {rank, rank};
  MPI_Datatype field;
  MPI_Datatype first = MPI_DATATYPE_NULL;
  for (int f = 0; f < 2; f++) {
    MPI_Type_contiguous(2, f == 0 ? MPI_DOUBLE
                           : rank == 1 ? MPI_FLOAT : MPI_INT, &field);
    MPI_Type_commit(&field);
    if (f == 0) first = field;
    else if (rank == 0)
      printf("the second type %s the first's handle\n",
             field == first ? "has" : "does not have");
    if (f == 0) MPI_Bcast(d, 1, field, 0, MPI_COMM_WORLD);
    else MPI_Bcast(i, 1, field, 0, MPI_COMM_WORLD);
    MPI_Type_free(&field);
  }
  MPI_Finalize();
  return 0;
}
