/* harness/run/ owns: the runner, run memory estimates, offline analysis of
 *   run directories, the bridge's findings and `vqcheck watch`'s job.
 * May use: models/, scenario/, checkers/, reports/, libvqcheck (never
 *   cli/).
 *
 * runner.h: runs one scenario on a world of ranks with every checker
 * attached, and writes its run directory.
 *
 * The world is either the threads backend (the scenario's ranks as threads
 * of this process) or an MPI world this process is one rank of. Per rank:
 * the model (run_models.h), a vqc_check_ctx whose state is every replicated
 * tensor, the checkers of checker_set.h (collective, divergence, lost in-place,
 * shape, and equivalence where the model has a single-process reference),
 * then the step loop: one training step, then step_end of every checker.
 * A step that fails (a timeout, a vetoed collective, a refused write) ends
 * the rank's loop; every checker's finish then sees how it ended, and the
 * collective checker's finish brings the ranks back together (or reports
 * the ones that never come).
 *
 * Findings of all ranks end up on rank 0 (threads: one shared list; mpi:
 * each rank's findings travel as JSON over the side channel,
 * vqc_findings_gather), merged so a finding several ranks made once each is
 * listed once with all their ranks (vqc_findings_merge_duplicates, whose
 * rule findings.h states).
 *
 * The run directory (DESIGN.md "Run directory"; prepared by rundir.h's
 * vqc_run_dir_prepare) gets run.json in rundir.h's schema, written to a
 * temporary name and renamed, with "scenario" as its subject and
 * environment.device set:
 *   {"schema_version": 1, "scenario": {...}, "environment": {"hostname",
 *    "backend", "device", "ranks", "pid"}, "build": {"version", "build_type",
 *    "compiler", "mpi", "cuda"}, "finished": ISO time, "duration_s",
 *    "training": {"status", "failed_rank", "message", "steps_done"},
 *    "findings": [...], "steps": [{"step", "seconds", "loss", "findings"}],
 *    "exit_code"[, on one rank: "checks" (every kind but divergence) and
 *    "checks_not_run": {"divergence": "1 rank: nothing to compare"}]}
 * beside the checkers' own files (rank-<r>.trace.jsonl, ledger dumps). */
#ifndef VQC_RUNNER_H
#define VQC_RUNNER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "findings.h"
#include "rundir.h"
#include "scenario.h"
#include "vqc/comm.h"
#include "vqc/status.h"

typedef struct vqc_run_options {
  /* The run directory: created if missing; the files a run writes (run.json,
   * reports, rank-*: vqc_run_dir_clear) are removed from it first so stale
   * dumps cannot mislead the analysis. NULL or "": the default,
   * vqcheck-runs/<scenario>-<time> (vqc_run_dir_choose). */
  const char *out_dir;
  /* Progress on `progress` (one line per step on rank 0, findings as they
   * appear); NULL for none. */
  FILE *progress;
} vqc_run_options;

typedef struct vqc_step_summary {
  int64_t step;
  double seconds;   /* wall time of the step on rank 0 (checks included) */
  double loss;      /* rank 0's loss */
  int findings;     /* findings recorded so far (rank 0's view) */
} vqc_step_summary;

typedef struct vqc_run_result {
  int rank;                 /* this process's rank (0 for threads) */
  int ranks;
  vqc_backend backend;
  vqc_device device;        /* where the models' hot paths ran */
  char run_dir[4096];
  /* How training ended on the ranks: VQC_OK, or the first rank's error
   * (by rank) with its message. */
  vqc_status training;
  int failed_rank;          /* -1 when every rank finished its steps */
  char message[1024];
  int64_t steps_done;       /* steps rank 0 completed */
  double seconds;
  vqc_findings findings;    /* merged (on every rank for mpi) */
  vqc_step_summary *steps;  /* (nsteps) rank 0's, owned */
  int nsteps;
} vqc_run_result;

/* Runs sc on sc->ranks threads of this process. On VQC_OK the run happened
 * (whatever it found) and *out holds its result (free with
 * vqc_run_result_free); an error means the run could not be set up (bad run
 * directory, no memory) and nothing was written. */
vqc_status vqc_run_threads(const vqc_scenario *sc, const vqc_run_options *o,
                           vqc_run_result *out);

/* Runs sc with this process as rank vqc_comm_rank(c) of c's world (mpi);
 * vqc_comm_size(c) must equal sc->ranks. Every rank returns the same merged
 * findings; rank 0 writes run.json. */
vqc_status vqc_run_on_comm(const vqc_scenario *sc, const vqc_run_options *o,
                           vqc_comm *c, vqc_run_result *out);

/* The same two on `device`: the models' hot paths on the GPU with
 * VQC_DEVICE_CUDA (run_models.h "Device"); the functions above are these
 * with VQC_DEVICE_CPU. With CUDA the run is refused before anything is
 * written when the scenario has no device path (VQC_EINVAL,
 * vqc_run_check_device) or a rank has no usable device (VQC_ENODEVICE,
 * vqc_run_probe_device; on a comm every rank then returns it). */
vqc_status vqc_run_threads_device(const vqc_scenario *sc,
                                  const vqc_run_options *o, vqc_device device,
                                  vqc_run_result *out);
vqc_status vqc_run_on_comm_device(const vqc_scenario *sc,
                                  const vqc_run_options *o, vqc_device device,
                                  vqc_comm *c, vqc_run_result *out);

void vqc_run_result_free(vqc_run_result *r); /* accepts NULL */

/* The DESIGN.md exit code of a run: 1 when there are findings, 0 when
 * training ended cleanly without any, 3 when training stopped with an error
 * that no checker explained (a checker gap or an environment failure). */
int vqc_run_exit_code(const vqc_run_result *r);

/* Writes r's run.json into r->run_dir (temporary file, then rename). */
vqc_status vqc_run_write_json(const vqc_scenario *sc, const vqc_run_result *r);

/* Reads the findings of a run.json written by vqc_run_write_json into f
 * (initialised by the caller) and its exit code into *exit_code (may be
 * NULL). VQC_EPARSE naming the file and the field otherwise. */
vqc_status vqc_run_read_json(const char *path, vqc_findings *f,
                             int *exit_code);

#endif /* VQC_RUNNER_H */
