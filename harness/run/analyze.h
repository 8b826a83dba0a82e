/* analyze.h: the offline analysis of a run directory (analyze.c), as a
 * function: `vqcheck analyze DIR` calls it (cmd_analyze.c), and so do the
 * MPI supervisor (supervise.h) once a job it launched has ended without its
 * run.json, and `vqcheck watch` once its job has ended, so a job a
 * launcher tore down is reported by the same code either way. It prints
 * nothing: what it found and wrote comes back in a vqc_analyze_result,
 * which the CLI prints (vqc_cli_analyze, cli.h). */
#ifndef VQC_ANALYZE_H
#define VQC_ANALYZE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "findings.h"
#include "vqc/status.h"

typedef struct vqc_analyze_opts {
  const char *run_dir;
  int ranks;             /* the job's size when known; 0: run.json's, else
                            the highest rank-<r> file's */
  /* For a run.json made from scratch (the job wrote none): the scenario's
   * name and file, and the backend. NULL: the directory's name, "unknown". */
  const char *name;
  const char *path;
  const char *backend;
  const char *why;       /* its training message; NULL: a default */
  /* Its scenario.description; NULL: "rebuilt by vqcheck analyze ...". */
  const char *description;
  /* > 0: the job's wall time in seconds, run.json's duration_s (a run.json
   * made from scratch has 0 otherwise: nothing measured it). */
  double duration_s;
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
   * findings (but see unchecked_found). */
  const char *unchecked;
  /* With unchecked: findings still make the exit code 1 (ranks of an MPI
   * program that failed before MPI_Init: the program's failure, found,
   * though nothing else could be checked). */
  bool unchecked_found;
  /* The ranks' collectives are the job's check (watch with the MPI
   * interposer, libvqcheck_mpi.so: no digest traces by design): collectives
   * that two ranks or more recorded in their live records count as
   * compared, so such a run without findings is clean. */
  bool ledger_checks;
  /* How the calling thread's library error (vqc_last_error) is worded
   * wherever the analysis quotes one: in run.json (a warning, its
   * "validation_error") and in the result's messages. The CLI passes
   * vqc_cli_error_text; NULL: vqc_last_error as it is. */
  const char *(*error_text)(void);
} vqc_analyze_opts;

/* What the analysis found and wrote (counts as run.json's "analysis"
 * section has them). */
typedef struct vqc_analyze_result {
  /* 0 clean, 1 findings, 2 bad input, 3 I/O error or a run that stopped
   * without a finding that explains it (a job whose ranks left live
   * records but not every one of them finished, and no run.json, is never
   * clean); on an error, vqc_status_exit_code of it. */
  int exit_code;
  const char *run_dir;    /* o->run_dir (borrowed) */
  json_t *run_json;       /* the run.json written (owned); NULL on error */
  json_t *warnings;       /* strings, each a warning of the analysis (owned;
                             also in run.json's analysis.warnings) */
  vqc_findings findings;  /* every finding of run.json */
  bool had_run_json;      /* run.json was there (and updated) */
  int ledger_dumps, status_dumps, live_records, recorded_findings;
  int trace_files, findings_files;
  int64_t digests_compared;
  int64_t no_replica, no_replica_tensors; /* lines, tensors */
  int64_t not_digested;   /* times a tensor was left out of the digests */
  int added, already_known; /* new findings; those run.json had already */
  /* The first run.json failed vqcheck's own validation: why ("" when it
   * passed); it was rebuilt from the findings (its "validation_error"). */
  char invalid[1024];
  /* The rebuilt one failed too: why (""). No reports were written then. */
  char rebuilt_invalid[1024];
  /* On an error: what went wrong (""). */
  char error[1024];
} vqc_analyze_result;

/* Analyses o->run_dir, rewrites (or writes) its run.json and regenerates
 * its reports. The findings are those of run.json, the ledger dumps and
 * live records, the traces, and the Python bridge's findings files
 * (bridge_findings.h). VQC_OK when the verdict was delivered (r->exit_code
 * 0, 1 or 3); otherwise the error (the directory refused or locked, a
 * corrupt input, a failed write), with r->error and r->exit_code set and
 * no verdict. Free r with vqc_analyze_result_free either way. */
vqc_status vqc_analyze_run_dir(const vqc_analyze_opts *o,
                               vqc_analyze_result *r);

void vqc_analyze_result_free(vqc_analyze_result *r);

#endif /* VQC_ANALYZE_H */
