/* persistent_lost.c: rank 0 starts its persistent send to rank 1 (made
 * at line 18) three times, rank 1 its persistent receive twice: the third
 * message is never received. Under vqcheck watch's synchronous sends the
 * third send never completes: a deadlock naming rank 0's MPI_Wait (line
 * 24) for its MPI_Send_init to rank 1 (tag 4). With --buffered-sends MPI
 * sends it eagerly, both ranks reach MPI_Finalize, and the messages paired
 * across the ranks say it: rank 0 sent 3 messages to rank 1 (tag 4) with
 * MPI_Send_init at line 18, rank 1 received only 2. 2 ranks. */
#include <mpi.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double v[2] = {1, 2};
  MPI_Request req;
  if (rank == 0)
    MPI_Send_init(v, 2, MPI_DOUBLE, 1, 4, MPI_COMM_WORLD, &req);
  else
    MPI_Recv_init(v, 2, MPI_DOUBLE, 0, 4, MPI_COMM_WORLD, &req);
  const int starts = rank == 0 ? 3 : 2; /* the bug: one start too many */
  for (int i = 0; i < starts; i++) {
    MPI_Start(&req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  }
  MPI_Request_free(&req);
  MPI_Finalize();
  return 0;
}
