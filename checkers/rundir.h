/* rundir.h: the run directory and its run.json (DESIGN.md "Run directory"),
 * in one place for everything that writes one: the scenario runner and
 * `vqcheck suite` (harness/), the instrumentation API (instrument.h, this
 * layer), and the offline commands `vqcheck compare` and `analyze`
 * (harness/). It lives in checkers/ because the instrumentation API is here
 * and the harness sits above; lib/ knows nothing of runs.
 *
 * run.json, schema_version 1, whoever writes it:
 *   {"schema_version": 1,
 *    <the writer's subject: "scenario" (runner, compare, analyze), or
 *     "program" and "check" (instrumentation API)>,
 *    "environment": {"hostname", "backend", ["device",] "ranks", "pid"},
 *    "build": {"version", "build_type", "compiler", "mpi", "cuda"},
 *    "finished": ISO time (UTC), "duration_s",
 *    "training": {"status", "failed_rank", "message", "steps_done"},
 *    "findings": [finding, ...], "steps": [...], "exit_code",
 *    <anything a writer adds after: "compare", "checks", "analysis">}
 * vqc_run_json_new builds all but the subject and the steps' contents; the
 * writers differ only there. */
#ifndef VQC_RUNDIR_H
#define VQC_RUNDIR_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "findings.h"
#include "vqc/status.h"

/* ---- the directory */

/* "vqcheck-runs/<name>-<YYYYmmdd-HHMMSS>" into buf (local time). */
void vqc_run_default_dir(const char *name, char *buf, size_t n);

/* The run directory to use, into buf: `wanted` when it is neither NULL nor
 * "", else vqc_run_default_dir(name) with -2, -3, ... appended when that
 * name is taken (a run of the same second). */
void vqc_run_dir_choose(const char *wanted, const char *name, char *buf,
                        size_t n);

/* Removes what an earlier run left in dir of the files a run writes, so
 * they cannot be taken for this run's: a stale ledger dump would be
 * analysed as part of this run, a stale run.json or report read as its
 * verdict. Removed, when they are regular files:
 *   run.json, report.md, report.html, junit.xml;
 *   every rank-* file (traces, ledger and status dumps);
 *   the temporaries of an atomic write of those that was interrupted
 *   ("<name>.tmp.<pid>", vqc/fsutil.h).
 * Anything else (a log, the user's notes, subdirectories) is left alone.
 * VQC_EIO naming the file that cannot be read or removed. */
vqc_status vqc_run_dir_clear(const char *dir);

/* Makes dir ready for a run: vqc_mkdir_p(dir), then vqc_run_dir_clear(dir).
 * On several ranks only one prepares (the others vqc_mkdir_p, after it). */
vqc_status vqc_run_dir_prepare(const char *dir);

/* ---- run.json */

#define VQC_RUN_JSON_SCHEMA 1

/* The members every run.json has (see the file comment). */
typedef struct vqc_run_json_info {
  const char *backend;   /* environment.backend ("threads", "mpi", "traces") */
  const char *device;    /* environment.device ("cpu", "cuda"); NULL: none */
  int ranks;             /* environment.ranks */
  double duration_s;
  vqc_status training;   /* training.status: how training ended */
  int failed_rank;       /* training.failed_rank; -1 when none */
  const char *message;   /* training.message; NULL: "" */
  int64_t steps_done;    /* training.steps_done */
  vqc_findings *findings; /* NULL: an empty array */
  int exit_code;
} vqc_run_json_info;

/* A new run.json document (new reference): schema_version, then the
 * members of `head` in their order (the writer's subject; the reference is
 * taken, head may be NULL), then environment (this host and process),
 * build (this build), finished (now), duration_s, training, findings,
 * "steps": [] (the writer appends its steps) and exit_code, from info. */
json_t *vqc_run_json_new(json_t *head, const vqc_run_json_info *info);

/* "2024-05-01T12:00:00Z" (now, UTC) into buf: run.json's time stamps. */
void vqc_run_json_time(char *buf, size_t n);

/* Writes j to path atomically (vqc_write_atomic) with jansson's dump
 * `flags`. VQC_EIO naming the file otherwise. */
vqc_status vqc_json_write_atomic(const char *path, const json_t *j,
                                 size_t flags);

/* Writes j as run_dir/run.json, atomically, indented and ASCII (what every
 * run.json writer uses, so the files diff cleanly). */
vqc_status vqc_run_json_write(const char *run_dir, const json_t *j);

#endif /* VQC_RUNDIR_H */
