/* vqc_mpi_strict.c: strict mode ($VQC_MPI_STRICT=1): the members of a
 * communicator agree on each blocking collective before data moves. */
#include "vqc_mpi_internal.h"

/* ---- strict mode: agree before data moves
 *
 * With $VQC_MPI_STRICT=1 (`vqcheck watch --strict`), every blocking
 * collective and communicator creation is preceded by one small
 * all-gather on the communicator's duplicate (made when the communicator
 * was: MPI_Init for the world, the split/dup/create call for the others;
 * never on the program's own communicator): each member's op, datatype,
 * count, root and reduction, 64 bytes. When they disagree (the fields the
 * analysis compares, the same way: the v forms' counts and an unnamed
 * datatype are not compared), no data has moved yet: each member marks
 * the call failed and its record finished with VQC_EINVAL, and the job is
 * stopped (MPI_Abort) before a truncated message, a hang or a wrong
 * result. The analysis then names the mismatch from the records, as
 * always. Non-blocking collectives are not agreed on at their I-call
 * (it must not block); they are checked after the fact. A program that
 * relies on a blocking collective not synchronising (a root's MPI_Bcast
 * returning before the others enter) may then wait: MPI does not promise
 * it either. */

typedef struct agreement {
  char op[24], dtype[16], redop[16];
  int64_t count;
  int32_t root, pad;
} agreement; /* 64 bytes, all of it set */

static bool varcount(const char *op) {
  return strcmp(op, "gatherv") == 0 || strcmp(op, "scatterv") == 0 ||
         strcmp(op, "all_to_allv") == 0 || strcmp(op, "all_gatherv") == 0 ||
         strcmp(op, "all_to_allw") == 0 || strncmp(op, "neighbor_", 9) == 0 ||
         strncmp(op, "file_", 5) == 0;
}

/* Whether ranks may call op with other element types: MPI-IO's reads and
 * writes (each rank its own data, vqc_mpi_io.c). */
static bool vartype(const char *op) { return strncmp(op, "file_", 5) == 0; }

static bool agree_same(const agreement *a, const agreement *b) {
  return strcmp(a->op, b->op) == 0 && strcmp(a->redop, b->redop) == 0 &&
         a->count == b->count && a->root == b->root &&
         (!a->dtype[0] || !b->dtype[0] || strcmp(a->dtype, b->dtype) == 0);
}

void agree(const call *c, const char *dtype, long long count,
           int root, const char *redop) {
  comm_info *ci = c->ci;
  const int n = ci == &world_info ? g.size : ci->size;
  agreement mine, *all = malloc(sizeof *all * (size_t)n);
  if (!all) return;
  memset(&mine, 0, sizeof mine);
  snprintf(mine.op, sizeof mine.op, "%s", c->op);
  snprintf(mine.dtype, sizeof mine.dtype, "%s", vartype(c->op) ? "" : dtype);
  snprintf(mine.redop, sizeof mine.redop, "%s", redop);
  mine.count = varcount(c->op) ? 0 : count;
  mine.root = root;
  if (PMPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all,
                     (int)sizeof mine, MPI_BYTE, ci->shadow) != MPI_SUCCESS) {
    free(all);
    return;
  }
  bool same = true;
  for (int i = 1; i < n && same; i++) same = agree_same(&all[0], &all[i]);
  free(all);
  if (same) return;
  /* Every member has the same table: all of them stop here. */
  call_line(c, now_ns(), "failed", "VQC_EINVAL");
  char b[400];
  const int k = snprintf(b, sizeof b, "{\"event\":\"finished\",\"status\":"
                         "\"VQC_EINVAL\",\"step\":-1,\"why\":\"vqcheck's "
                         "strict mode stopped the job before collective "
                         "#%llu (%s) moved any data: its members called it "
                         "differently\"}\n",
                         (unsigned long long)c->seq, c->op);
  if (k > 0 && (size_t)k < sizeof b) live_write(b, (size_t)k);
  beat(HB_FINISHED, c->seq, c->op);
  fprintf(stderr, "libvqcheck_mpi: rank %d: strict mode: the members of "
          "communicator %s called collective #%llu differently; stopping "
          "the job before it moves any data (the report names the calls)\n",
          g.rank, ci->name, (unsigned long long)c->seq);
  rec_close();
  PMPI_Barrier(ci->shadow); /* every member's record is written */
  PMPI_Abort(ci->shadow, 1);
}
