/* offline.c: run.json skeletons, report regeneration and the findings
 * summary for `vqcheck compare` and `vqcheck analyze` (see offline.h). */
#include "offline.h"

#include <inttypes.h>
#include <stdio.h>

/* The report writers are a library of their own (reports/); this file
 * builds with or without them, and picks them up once the harness links
 * them (their include directory then comes with the target). */
#if defined(__has_include)
#if __has_include("report.h")
#include "report.h"
#define VQC_HAVE_REPORTS 1
#endif
#endif
#ifndef VQC_HAVE_REPORTS
#define VQC_HAVE_REPORTS 0
#endif

json_t *vqc_offline_run_json(const char *name, const char *path,
                             const char *description, const char *backend,
                             int ranks) {
  /* json_string refuses text that is not UTF-8 (a path can be anything):
   * fall back to a placeholder rather than losing the field. */
  json_t *sc = json_object();
  json_t *v = json_string(name);
  json_object_set_new(sc, "name", v ? v : json_string("(not UTF-8)"));
  v = json_string(path);
  json_object_set_new(sc, "path", v ? v : json_string("(not UTF-8)"));
  v = json_string(description);
  json_object_set_new(sc, "description", v ? v : json_string(""));
  json_object_set_new(sc, "model", json_string("unknown"));
  json_t *head = json_object();
  json_object_set_new(head, "scenario", sc);
  const vqc_run_json_info info = {.backend = backend,
                                  .device = NULL,
                                  .ranks = ranks,
                                  .duration_s = 0.0,
                                  .training = VQC_OK,
                                  .failed_rank = -1,
                                  .message = "",
                                  .steps_done = 0,
                                  .findings = NULL,
                                  .exit_code = 0};
  return vqc_run_json_new(head, &info);
}

vqc_status vqc_offline_write_reports(const char *run_dir) {
#if VQC_HAVE_REPORTS
  return vqc_reports_write(run_dir, VQC_REPORT_ALL);
#else
  (void)run_dir;
  return VQC_OK;
#endif
}

void vqc_offline_print_findings(FILE *f, vqc_findings *fl) {
  pthread_mutex_lock(&fl->lock);
  fprintf(f, "findings: %d\n", fl->count);
  for (int i = 0; i < fl->count; i++) {
    const vqc_finding *x = &fl->items[i];
    /* A finding with no step (-1: an MPI program's, a job's own) says
     * none. */
    fprintf(f, "  %s", vqc_finding_kind_name(x->kind));
    if (x->step >= 0) fprintf(f, " at step %" PRId64, x->step);
    if (x->tensor[0]) fprintf(f, " in %s", x->tensor);
    if (x->nranks > 0) {
      fprintf(f, " (rank%s", x->nranks > 1 ? "s" : "");
      for (int k = 0; k < x->nranks; k++)
        fprintf(f, "%s%d", k ? ", " : " ", x->ranks[k]);
      fprintf(f, ")");
    }
    if (x->site[0]) fprintf(f, " at %s", x->site);
    fprintf(f, ":\n    %s\n", x->message);
  }
  pthread_mutex_unlock(&fl->lock);
}
