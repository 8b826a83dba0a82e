/* offline.h: what `vqcheck compare` and `vqcheck analyze` share. Both work
 * on files a job left behind rather than on a live run: they build or update
 * a run.json in the common schema (checkers/rundir.h, schema_version 1),
 * write it atomically (vqc_run_json_write), regenerate the reports, and print
 * findings the way `vqcheck run` does. */
#ifndef VQC_OFFLINE_H
#define VQC_OFFLINE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "findings.h"
#include "rundir.h"
#include "vqc/status.h"

/* A run.json skeleton for a run that did not come from a scenario (new
 * reference): vqc_run_json_new with the subject scenario {"name", "path",
 * "description", "model": "unknown"}, environment.backend `backend` and
 * ranks `ranks` (no device), duration_s 0, training {"status": "VQC_OK",
 * "failed_rank": -1, "message": "", "steps_done": 0}, empty findings and
 * steps, exit_code 0. Callers fill in the rest. */
json_t *vqc_offline_run_json(const char *name, const char *path,
                             const char *description, const char *backend,
                             int ranks);

/* Regenerates report.md, report.html and junit.xml from run_dir (reports/).
 * VQC_OK without writing anything when this build has no report writers. */
vqc_status vqc_offline_write_reports(const char *run_dir);

/* The findings, one paragraph each, as `vqcheck run` prints them. */
void vqc_offline_print_findings(FILE *f, vqc_findings *fl);

#endif /* VQC_OFFLINE_H */
