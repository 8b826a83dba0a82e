/* io_inflight.c: an asynchronous checkpoint (MPI_File_iwrite_at_all, so
 * the step goes on while the file system writes) whose buffer the next
 * step overwrites before MPI_Wait: the file may hold the old state, the
 * new one or a mix. `vqcheck watch` must name each rank's write at line
 * 30 and its completion at line 32. */
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
    snprintf(path, sizeof path, "%s/io_inflight.%ld", tmp ? tmp : "/tmp",
             (long)getpid());
  }
  MPI_Bcast(path, (int)sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
  MPI_File fh;
  MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY,
                MPI_INFO_NULL, &fh);
  double state[64];
  for (int i = 0; i < 64; i++) state[i] = rank + i;
  const MPI_Offset at = (MPI_Offset)rank * sizeof state;
  MPI_Request req;
  /* the checkpoint of step 0, written while step 1 runs */
  MPI_File_iwrite_at_all(fh, at, state, 64, MPI_DOUBLE, &req);
  for (int i = 0; i < 64; i++) state[i] *= 0.5; /* the bug: step 1 */
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  MPI_File_close(&fh);
  if (rank == 0) unlink(path);
  MPI_Finalize();
  return 0;
}
