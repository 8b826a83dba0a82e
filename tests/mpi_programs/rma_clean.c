/* rma_clean.c: one-sided patterns that are correct, with many accesses
 * to the same locations: each rank puts into its own slot between fences;
 * every rank adds into one counter with MPI_Accumulate and
 * MPI_Fetch_and_op (atomic); every rank reads the same cell with MPI_Get;
 * a put, a fence, then a get of the same cell; passive-target puts to one
 * cell ordered by MPI_Win_flush and a barrier; exclusive locks taken in
 * turn by every rank on one cell; generalized active target (post,
 * start, complete, wait) epochs in turn; a request-based get completed by
 * MPI_Wait before another rank's put into its cell. 3 ranks: clean. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long cells[16] = {0};
  MPI_Win win;
  MPI_Win_create(cells, sizeof cells, sizeof(long), MPI_INFO_NULL,
                 MPI_COMM_WORLD, &win);
  long one = 1, mine = rank + 1, got = 0, old = 0;

  for (int round = 0; round < 3; round++) {
    MPI_Win_fence(0, win);
    MPI_Put(&mine, 1, MPI_LONG, 0, rank, 1, MPI_LONG, win);
    MPI_Accumulate(&one, 1, MPI_LONG, 0, 8, 1, MPI_LONG, MPI_SUM, win);
    MPI_Fetch_and_op(&one, &old, MPI_LONG, 1, 9, MPI_SUM, win);
    MPI_Get(&got, 1, MPI_LONG, 1, 10, 1, MPI_LONG, win);
    MPI_Win_fence(0, win);
    if (rank == 1) MPI_Put(&mine, 1, MPI_LONG, 2, 11, 1, MPI_LONG, win);
    MPI_Win_fence(0, win);
    MPI_Get(&got, 1, MPI_LONG, 2, 11, 1, MPI_LONG, win);
    MPI_Win_fence(0, win);
  }

  MPI_Win_lock_all(0, win);
  for (int turn = 0; turn < size; turn++) {
    if (rank == turn) {
      MPI_Put(&mine, 1, MPI_LONG, 1, 12, 1, MPI_LONG, win);
      MPI_Win_flush(1, win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  MPI_Win_unlock_all(win);

  for (int k = 0; k < 5; k++) {
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 2, 0, win);
    MPI_Get(&got, 1, MPI_LONG, 2, 13, 1, MPI_LONG, win);
    MPI_Win_flush(2, win);
    got += 1;
    MPI_Put(&got, 1, MPI_LONG, 2, 13, 1, MPI_LONG, win);
    MPI_Win_unlock(2, win);
  }

  /* Generalized active target: rank 1 exposes its window twice; rank 0
   * puts into cell 14 in the first epoch, rank 2 in the second. (A window
   * must not be locked while exposed: the barriers keep the lock epochs
   * before and after apart from these.) */
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Group world_group, only1, origin_group;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  const int one_rank = 1;
  MPI_Group_incl(world_group, 1, &one_rank, &only1);
  for (int turn = 0; turn < 2; turn++) {
    const int origin = turn == 0 ? 0 : 2;
    if (rank == 1) {
      MPI_Group_incl(world_group, 1, &origin, &origin_group);
      MPI_Win_post(origin_group, 0, win);
      MPI_Win_wait(win);
      MPI_Group_free(&origin_group);
    } else if (rank == origin) {
      MPI_Win_start(only1, 0, win);
      MPI_Put(&mine, 1, MPI_LONG, 1, 14, 1, MPI_LONG, win);
      MPI_Win_complete(win);
    }
  }
  MPI_Group_free(&only1);
  MPI_Group_free(&world_group);
  MPI_Barrier(MPI_COMM_WORLD);

  /* A request-based get, waited on, then another rank's put into the
   * cell it read, and its buffer reused before the epoch ends. */
  MPI_Win_lock_all(0, win);
  if (rank == 0) {
    MPI_Request req;
    MPI_Rget(&got, 1, MPI_LONG, 2, 15, 1, MPI_LONG, win, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Put(&got, 1, MPI_LONG, 2, 14, 1, MPI_LONG, win);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 1) {
    MPI_Put(&mine, 1, MPI_LONG, 2, 15, 1, MPI_LONG, win);
    MPI_Win_flush(2, win);
  }
  MPI_Win_unlock_all(win);

  MPI_Barrier(MPI_COMM_WORLD);
  printf("rank %d: %ld %ld %ld\n", rank, cells[8], cells[12], cells[13]);
  MPI_Win_free(&win);
  MPI_Finalize();
  return 0;
}
