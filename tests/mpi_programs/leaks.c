/* leaks.c: MPI objects made and, unless argv[1] is "free", never freed
 * (the kind of leak MPI checkers tell, MPI Bugs Initiative's ResLeak):
 * every step duplicates the world communicator for a library call and
 * never frees the copy (20 steps); a vector type, a group of the world
 * (asked for twice: MPI counts two references), a subgroup, a reduction
 * operation, a pair of persistent requests, an RMA window and an MPI-IO
 * file ($TMPDIR/leaks.dat, deleted on close) are made once. An empty
 * subgroup (MPI_GROUP_EMPTY, predefined: nobody's to free) is never
 * freed in either form. With "free", each is freed once done with: the
 * correct twin. Checks its own results; exit 1 when they are wrong. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void max_abs(void *in, void *inout, int *len, MPI_Datatype *type) {
  (void)type;
  int *a = in, *b = inout;
  for (int i = 0; i < *len; i++) {
    const int x = a[i] < 0 ? -a[i] : a[i], y = b[i] < 0 ? -b[i] : b[i];
    b[i] = x > y ? x : y;
  }
}

int main(int argc, char **argv) {
  const int tidy = argc > 1 && strcmp(argv[1], "free") == 0;
  MPI_Init(&argc, &argv);
  int rank, size, bad = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int step = 0; step < 20; step++) {
    MPI_Comm lib;
    MPI_Comm_dup(MPI_COMM_WORLD, &lib);
    int one = 1, n = 0;
    MPI_Allreduce(&one, &n, 1, MPI_INT, MPI_SUM, lib);
    bad |= n != size;
    if (tidy) MPI_Comm_free(&lib);
  }
  MPI_Datatype pairs;
  MPI_Type_vector(2, 1, 2, MPI_INT, &pairs);
  MPI_Type_commit(&pairs);
  int v[4] = {rank, -1, rank, -1};
  MPI_Bcast(v, 1, pairs, 0, MPI_COMM_WORLD);
  bad |= v[0] != 0 || v[2] != 0;
  MPI_Group world, again, first, none;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  MPI_Comm_group(MPI_COMM_WORLD, &again);
  const int zero = 0;
  MPI_Group_incl(world, 1, &zero, &first);
  MPI_Group_incl(world, 0, &zero, &none);
  int gsize = 0;
  MPI_Group_size(first, &gsize);
  bad |= gsize != 1;
  MPI_Op op;
  MPI_Op_create(max_abs, 1, &op);
  int mine = -rank, most = 0;
  MPI_Allreduce(&mine, &most, 1, MPI_INT, op, MPI_COMM_WORLD);
  bad |= most != size - 1;
  int out = rank, in = -1;
  MPI_Request req[2];
  MPI_Send_init(&out, 1, MPI_INT, (rank + 1) % size, 4, MPI_COMM_WORLD,
                &req[0]);
  MPI_Recv_init(&in, 1, MPI_INT, (rank + size - 1) % size, 4,
                MPI_COMM_WORLD, &req[1]);
  MPI_Startall(2, req);
  MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
  bad |= in != (rank + size - 1) % size;
  int *cells = NULL;
  MPI_Win win;
  MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD,
                   &cells, &win);
  const char *tmp = getenv("TMPDIR");
  char path[512];
  snprintf(path, sizeof path, "%s/leaks.dat", tmp ? tmp : "/tmp");
  MPI_File fh;
  bad |= MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY
                       | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh)
         != MPI_SUCCESS;
  if (tidy) {
    MPI_Type_free(&pairs);
    MPI_Group_free(&world);
    MPI_Group_free(&again);
    MPI_Group_free(&first);
    MPI_Op_free(&op);
    MPI_Request_free(&req[0]);
    MPI_Request_free(&req[1]);
    MPI_Win_free(&win);
    MPI_File_close(&fh);
  } else {
    MPI_Group_free(&again); /* one of the world group's two references */
  }
  if (bad) fprintf(stderr, "rank %d: wrong results\n", rank);
  MPI_Finalize();
  return bad;
}
