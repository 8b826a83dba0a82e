/* analyze.h: the offline analysis of a run directory (cmd_analyze.c), as a
 * function: `vqcheck analyze DIR` calls it, and so does the MPI supervisor
 * (supervise.h) once a job it launched has ended without its run.json, so a
 * job a launcher tore down is reported by the same code either way. */
#ifndef VQC_ANALYZE_H
#define VQC_ANALYZE_H

#include <jansson.h>
#include <stdbool.h>

#include "findings.h"

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
  /* `vqcheck watch` (cmd_watch.c): its run.json section "job" (borrowed;
   * set as it is), NULL: none. */
  const json_t *job;
  /* Findings decided once every other one is known (watch: a process that
   * failed with no finding to explain it). Called after the merge with
   * every finding so far; what it appends to `out` is added to run.json.
   * NULL: none. */
  void (*more_findings)(void *ctx, vqc_findings *known, vqc_findings *out);
  void *more_ctx;
  /* The caller reports hangs itself from better evidence (watch: the hang
   * markers and every rank's stacks): the ledger's deadlock findings in
   * which the ranks agree on the collective (not "misaligned") are left
   * out. Misaligned ones and collective_mismatch stay: only the ledger sees
   * which calls were paired. */
  bool caller_reports_hangs;
  /* Non-NULL: the job was not checked, and why (watch: no rank wrote
   * anything, the bridge never loaded). training.status becomes
   * VQC_EUNSUPPORTED with this message, and the exit code 3 whatever the
   * findings. */
  const char *unchecked;
  /* The ranks' collectives are the job's check (watch with the MPI
   * interposer, libvqcheck_mpi.so: no digest traces by design): collectives
   * that two ranks or more recorded in their live records count as
   * compared, so such a run without findings is clean. */
  bool ledger_checks;
} vqc_analyze_opts;

/* Analyses o->run_dir, rewrites (or writes) its run.json and reports, and
 * prints the summary or the JSON document. Returns the exit code: 0 clean,
 * 1 findings, 2 bad input, 3 I/O error or a run that stopped without a
 * finding that explains it (a job whose ranks left live records but not
 * every one of them finished, and no run.json, is never clean). The
 * findings are those of run.json, the ledger dumps and live records, the
 * traces, and the Python bridge's findings files (bridge_findings.h). */
int vqc_analyze_run_dir(const vqc_analyze_opts *o);

#endif /* VQC_ANALYZE_H */
