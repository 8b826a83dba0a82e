/* io_many.c: one file per field, all open at once, as a program that
 * writes a file per variable keeps them: 70 files opened with
 * MPI_File_open on the world, a collective write to each, then all
 * closed. Correct, but the interposer follows 64 files at once: the
 * collectives of the last 6 are not checked, and `vqcheck watch` must say
 * so (exit 3, "not everything was checked": every rank's files past 64),
 * never exit 0. 2 ranks. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define FILES 70

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  long id = (long)getpid();
  MPI_Bcast(&id, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  const char *tmp = getenv("TMPDIR");
  MPI_File fh[FILES];
  for (int f = 0; f < FILES; f++) {
    char path[300];
    snprintf(path, sizeof path, "%s/io_many.%ld.%d", tmp ? tmp : "/tmp", id,
             f);
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR |
                  MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh[f]);
    const double x = rank + f;
    MPI_File_write_at_all(fh[f], rank * (MPI_Offset)sizeof x, &x, 1,
                          MPI_DOUBLE, MPI_STATUS_IGNORE);
  }
  for (int f = 0; f < FILES; f++) MPI_File_close(&fh[f]);
  MPI_Finalize();
  return 0;
}
