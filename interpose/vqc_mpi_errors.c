/* vqc_mpi_errors.c: MPI errors: the interposer's fatal error handler on
 * MPI_COMM_WORLD, which writes the error into the record before it aborts. */
#include "vqc_mpi_internal.h"

/* ---- MPI errors: the rank's last words
 *
 * A program that keeps MPI's default error handler (MPI_ERRORS_ARE_FATAL)
 * on MPI_COMM_WORLD gets this one instead, which does the same (aborts the
 * job with the error's code) after writing the error into the record: a
 * {"event":"lost","why":"MPI error ...","mpi_error":"MPI_ERR_TRUNCATE"}
 * line, so the rank_failure names what MPI said ("MPI_ERR_TRUNCATE:
 * message truncated") rather than only that the rank was killed.
 * Communicators made from the world inherit it, as they would the
 * default. A program that sets its own handler keeps it; one that asks
 * for the world's handler is told MPI_ERRORS_ARE_FATAL. */

static MPI_Errhandler fatal_handler = MPI_ERRHANDLER_NULL;

static void on_mpi_error(MPI_Comm *comm, int *code, ...) {
  char es[MPI_MAX_ERROR_STRING + 1] = "", cls[MPI_MAX_ERROR_STRING + 1] = "";
  int len = 0, klass = 0;
  PMPI_Error_string(*code, es, &len);
  if (PMPI_Error_class(*code, &klass) == MPI_SUCCESS) {
    int cl = 0;
    PMPI_Error_string(klass, cls, &cl);
  }
  char esc[2 * MPI_MAX_ERROR_STRING + 2], name[64] = "";
  json_esc(esc, sizeof esc, es);
  /* OpenMPI's class strings start with the class's name: keep that. */
  sscanf(cls, "%63[A-Z_]", name);
  /* Where: the point-to-point call the rank is in, so a truncated message
   * names its sender too ("in MPI_Recv from rank 0 (tag 5) at ..."). */
  char where[1000] = "", wesc[2100] = "";
  p2p_where(where, sizeof where);
  if (where[0]) {
    char w[1100];
    snprintf(w, sizeof w, ", %s%s", where,
             klass == MPI_ERR_TRUNCATE
                 ? ": the message is longer than this receive takes"
                 : "");
    json_esc(wesc, sizeof wesc, w);
  }
  char *b = malloc(4096);
  if (b) {
    const int k = snprintf(b, 4096, "{\"event\":\"lost\",\"by\":\"libvqcheck_"
                           "mpi\",\"why\":\"MPI error: %.1500s%.1500s (the "
                           "error handler is MPI_ERRORS_ARE_FATAL: the job was "
                           "aborted)\",\"mpi_error\":\"%s\"}\n", esc, wesc,
                           name);
    if (k > 0 && k < 4096) live_write(b, (size_t)k);
    free(b);
  }
  fprintf(stderr, "libvqcheck_mpi: rank %d: MPI error: %s; aborting the job "
          "(MPI_ERRORS_ARE_FATAL)\n", g.rank, es);
  PMPI_Abort(comm ? *comm : MPI_COMM_WORLD, *code ? *code : 1);
}

void install_error_handler(void) {
  MPI_Errhandler cur = MPI_ERRHANDLER_NULL;
  if (PMPI_Comm_get_errhandler(MPI_COMM_WORLD, &cur) != MPI_SUCCESS) return;
  const bool fatal = cur == MPI_ERRORS_ARE_FATAL;
  if (cur != MPI_ERRHANDLER_NULL) PMPI_Errhandler_free(&cur);
  if (!fatal ||
      PMPI_Comm_create_errhandler(on_mpi_error, &fatal_handler) !=
          MPI_SUCCESS)
    return;
  PMPI_Comm_set_errhandler(MPI_COMM_WORLD, fatal_handler);
}

int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler *errhandler) {
  const int rc = PMPI_Comm_get_errhandler(comm, errhandler);
  if (rc == MPI_SUCCESS && fatal_handler != MPI_ERRHANDLER_NULL &&
      *errhandler == fatal_handler) {
    PMPI_Errhandler_free(errhandler);
    *errhandler = MPI_ERRORS_ARE_FATAL;
  }
  return rc;
}
