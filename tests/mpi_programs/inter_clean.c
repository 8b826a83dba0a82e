/* inter_clean.c: two groups (even and odd world ranks) joined by an
 * intercommunicator, as coupled codes are: a broadcast from group 0's
 * first rank to group 1 (MPI_ROOT / MPI_PROC_NULL on the root's side), an
 * all-reduce, an all-gather where each group sends a different count,
 * point-to-point messages across, a barrier, then the two merged into one
 * communicator for an all-reduce. 4 ranks: clean, and the program checks
 * its own results (exit 1 otherwise). */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int color = rank % 2;
  MPI_Comm half, inter, merged;
  MPI_Comm_split(MPI_COMM_WORLD, color, rank, &half);
  int hrank, hsize;
  MPI_Comm_rank(half, &hrank);
  MPI_Comm_size(half, &hsize);
  /* the other group's leader is world rank 1 (for group 0) or 0 */
  MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, 1 - color, 7, &inter);
  int bad = 0;

  int value = color == 0 ? 42 : -1;
  const int root = color == 0 ? (hrank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
  MPI_Bcast(&value, 1, MPI_INT, root, inter);
  if (color == 1 && value != 42) bad = 1;

  int mine = rank + 1, theirs = 0;
  MPI_Allreduce(&mine, &theirs, 1, MPI_INT, MPI_SUM, inter);
  /* the other group's sum: odd ranks 1+3 -> 2+4 = 6, even 0+2 -> 1+3 = 4 */
  if (theirs != (color == 0 ? 6 : 4)) bad = 1;

  int out[2] = {rank, rank}, in[8] = {0};
  const int sends = color == 0 ? 1 : 2, takes = color == 0 ? 2 : 1;
  MPI_Allgather(out, sends, MPI_INT, in, takes, MPI_INT, inter);

  int msg = rank, got = -1;
  MPI_Sendrecv(&msg, 1, MPI_INT, hrank, 3, &got, 1, MPI_INT, hrank, 3, inter,
               MPI_STATUS_IGNORE);
  if (got != (color == 0 ? rank + 1 : rank - 1)) bad = 1;
  MPI_Barrier(inter);

  MPI_Intercomm_merge(inter, color, &merged);
  int total = 0;
  MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, merged);
  if (total != size * (size + 1) / 2) bad = 1;

  MPI_Comm_free(&merged);
  MPI_Comm_free(&inter);
  MPI_Comm_free(&half);
  printf("rank %d: %s\n", rank, bad ? "WRONG" : "ok");
  MPI_Finalize();
  return bad;
}
