/* offline.h: what `vqcheck compare` and `vqcheck analyze` share. Both work
 * on files a job left behind rather than on a live run: they build or update
 * a run.json in the runner's schema (runner.h, schema_version 1), write it
 * atomically, regenerate the reports, and print findings the way `vqcheck
 * run` does. */
#ifndef VQC_OFFLINE_H
#define VQC_OFFLINE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "findings.h"
#include "vqc/status.h"

/* A run.json skeleton for a run that did not come from a scenario (new
 * reference): schema_version 1, scenario {"name", "path", "description",
 * "model": "unknown"},
 * environment {"hostname", "backend", "ranks", "pid"}, build {...} as the
 * runner writes them, finished (now), duration_s 0, training {"status":
 * "VQC_OK", "failed_rank": -1, "message": "", "steps_done": 0}, empty
 * findings and steps, exit_code 0. Callers fill in the rest. */
json_t *vqc_offline_run_json(const char *name, const char *path,
                             const char *description, const char *backend,
                             int ranks);

/* The runner's "build" object (version, build_type, compiler, mpi, cuda). */
json_t *vqc_offline_build_json(void);

/* "2024-05-01T12:00:00Z" (UTC) into buf. */
void vqc_offline_iso_time(char *buf, size_t n);

/* Writes j to path through "<path>.tmp.<pid>" and a rename, so a reader
 * never sees half a file (VQC_EIO otherwise; the temporary is removed). */
vqc_status vqc_offline_write_json(const json_t *j, const char *path);

/* Creates dir and its parents (VQC_EIO when it cannot, or is a file).
 * *created: whether dir itself was made now (may be NULL). */
vqc_status vqc_offline_mkdir_p(const char *dir, bool *created);

/* Regenerates report.md, report.html and junit.xml from run_dir (reports/).
 * VQC_OK without writing anything when this build has no report writers. */
vqc_status vqc_offline_write_reports(const char *run_dir);

/* The findings, one paragraph each, as `vqcheck run` prints them. */
void vqc_offline_print_findings(FILE *f, vqc_findings *fl);

#endif /* VQC_OFFLINE_H */
