/* analyze.h: the offline analysis of a run directory (cmd_analyze.c), as a
 * function: `vqcheck analyze DIR` calls it, and so does the MPI supervisor
 * (supervise.h) once a job it launched has ended without its run.json, so a
 * job a launcher tore down is reported by the same code either way. */
#ifndef VQC_ANALYZE_H
#define VQC_ANALYZE_H

#include <stdbool.h>

typedef struct vqc_analyze_opts {
  const char *run_dir;
  const char *cmd;       /* "analyze", or "run" for messages */
  int ranks;             /* the job's size when known; 0: run.json's, else
                            the highest rank-<r> file's */
  /* For a run.json made from scratch (the job wrote none): the scenario's
   * name and file, and the backend. NULL: the directory's name, "unknown". */
  const char *name;
  const char *path;
  const char *backend;
  const char *why;       /* its training message; NULL: a default */
  bool json;             /* run.json on stdout instead of the summary */
  bool quiet;            /* no summary */
} vqc_analyze_opts;

/* Analyses o->run_dir, rewrites (or writes) its run.json and reports, and
 * prints the summary or the JSON document. Returns the exit code: 0 clean,
 * 1 findings, 2 bad input, 3 I/O error or a run that stopped without a
 * finding that explains it (a job whose ranks left live records but not
 * every one of them finished, and no run.json, is never clean). */
int vqc_analyze_run_dir(const vqc_analyze_opts *o);

#endif /* VQC_ANALYZE_H */
