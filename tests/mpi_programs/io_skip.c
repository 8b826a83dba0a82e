/* io_skip.c: a checkpoint where a rank with nothing to write leaves the
 * collective write out (`if (n > 0) MPI_File_write_at_all(...)`: every
 * rank of the file's communicator must call it, with count 0 if need
 * be); rank 2 has no particles, goes on to MPI_File_close, and the
 * others wait in the write. `vqcheck watch` must name rank 2 and the
 * write at line 32 on the file's group. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char path[256] = "";
  if (rank == 0) {
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/io_skip.%ld", tmp ? tmp : "/tmp",
             (long)getpid());
  }
  MPI_Bcast(path, (int)sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
  MPI_File fh;
  MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY,
                MPI_INFO_NULL, &fh);
  const int n = rank == 2 ? 0 : 1000; /* rank 2 holds no particles */
  double *particles = calloc(1000, sizeof *particles);
  const MPI_Offset at = (MPI_Offset)rank * 1000 * sizeof(double);
  if (n > 0) /* the bug: a collective call skipped where there is no data */
    MPI_File_write_at_all(fh, at, particles, n, MPI_DOUBLE,
                          MPI_STATUS_IGNORE);
  MPI_File_close(&fh);
  if (rank == 0) unlink(path);
  free(particles);
  MPI_Finalize();
  return 0;
}
