/* io_clean.c: a checkpoint written and read back with MPI-IO's
 * collectives, as a simulation writes one: rank 0 makes the file's name
 * and broadcasts it; every rank opens it, writes its own block of rank + 2
 * doubles after the blocks of the ranks before it (MPI_File_write_at_all:
 * each rank its own count), reads it back as one item of a contiguous
 * type of its block's length (MPI_File_read_at_all: each rank its own
 * type) and again with MPI_File_iread_at_all and MPI_Wait, syncs and
 * closes; rank 0 deletes the file. Correct: `vqcheck
 * watch` must be clean (counts and types may differ by rank in MPI-IO's
 * reads and writes) and record each call on the file's group
 * ("world/file1"). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char path[256] = "";
  if (rank == 0) {
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/io_clean.%ld", tmp ? tmp : "/tmp",
             (long)getpid());
  }
  MPI_Bcast(path, (int)sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
  MPI_File fh;
  MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR,
                MPI_INFO_NULL, &fh);
  MPI_File_set_view(fh, 0, MPI_DOUBLE, MPI_DOUBLE, "native", MPI_INFO_NULL);
  const int n = rank + 2;                    /* this rank's block */
  const MPI_Offset at = rank * (rank + 3) / 2; /* the blocks before it */
  double state[8], back[8];
  for (int i = 0; i < n; i++) state[i] = rank + 0.25 * i;
  MPI_File_write_at_all(fh, at, state, n, MPI_DOUBLE, MPI_STATUS_IGNORE);
  MPI_Datatype block;
  MPI_Type_contiguous(n, MPI_DOUBLE, &block);
  MPI_Type_commit(&block);
  MPI_File_read_at_all(fh, at, back, 1, block, MPI_STATUS_IGNORE);
  MPI_Type_free(&block);
  double again[8];
  MPI_Request req;
  MPI_File_iread_at_all(fh, at, again, n, MPI_DOUBLE, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  MPI_File_sync(fh);
  MPI_File_close(&fh);
  const int same = memcmp(state, back, (size_t)n * sizeof *state) == 0 &&
                   memcmp(state, again, (size_t)n * sizeof *state) == 0;
  int all = 0;
  MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("checkpoint read back %s\n", all ? "equal" : "DIFFERENT");
    unlink(path);
  }
  MPI_Finalize();
  return all ? 0 : 1;
}
