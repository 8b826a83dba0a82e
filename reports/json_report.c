/* json_report.c: reads run.json (schema_version 1, harness/run/runner.h) and
 * checks it before any report is made from it, so that a corrupt or foreign
 * file gets one clear error naming the file and the field instead of a
 * half-made report. Also renders the validated document back as JSON
 * (`vqcheck report --format json`).
 *
 * Required (the runner always writes them):
 *   schema_version  1
 *   scenario        object with a non-empty string "name"; or, for a run of
 *                   the instrumentation API (checkers/include/vqc/instrument.h, the
 *                   subject rundir.h names), program: the same
 *   environment     object: "backend" string, "ranks" integer >= 1
 *   build           object
 *   training        object: "status" string, "steps_done" integer >= 0
 *                   ("message" string when present)
 *   findings        array of findings (DESIGN.md): "kind" (a known kind),
 *                   "step" integer, "ranks" integer array, "message"
 *                   string; "tensor", "site" strings and "detail" object
 *                   when present
 *   steps           array of objects with an integer "step"
 *   exit_code       integer 0..3
 * Optional: duration_s (number), finished / started (strings); for a
 * comparison of traces (environment.backend "traces"), "compare"
 * (trace_run.c checks the members the reports read). Unknown keys are
 * ignored, so later writers may add some without a schema bump. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "report_internal.h"
#include "rundir.h"

#define SCHEMA_VERSION 1

const char *rep_str(const json_t *root, const char *path, const char *fallback) {
  char key[128];
  const json_t *cur = root;
  const char *p = path;
  while (cur && *p) {
    const char *dot = strchr(p, '.');
    size_t len = dot ? (size_t)(dot - p) : strlen(p);
    if (len >= sizeof key) return fallback;
    memcpy(key, p, len);
    key[len] = '\0';
    cur = json_is_object(cur) ? json_object_get(cur, key) : NULL;
    p += len + (dot ? 1 : 0);
  }
  return json_is_string(cur) ? json_string_value(cur) : fallback;
}

void rep_ranks_text(const json_t *ranks, char *buf, size_t n) {
  size_t used = 0;
  buf[0] = '\0';
  const size_t count = json_array_size(ranks);
  size_t i;
  const json_t *v;
  if (count > VQC_FINDING_RANGES_FROM) {
    int *list = malloc(count * sizeof *list);
    if (list) {
      json_array_foreach(ranks, i, v) list[i] = (int)json_integer_value(v);
      vqc_rank_ranges_text(list, (int)count, buf, n);
      free(list);
      return;
    }
  }
  json_array_foreach(ranks, i, v) {
    int w = snprintf(buf + used, n - used, "%s%lld", i ? ", " : "",
                     (long long)json_integer_value(v));
    if (w < 0 || (size_t)w >= n - used) break;
    used += (size_t)w;
  }
}

bool rep_json_number(const json_t *v, double *out) {
  if (json_is_number(v)) {
    *out = json_number_value(v);
    return true;
  }
  if (!json_is_string(v)) return false;
  const char *s = json_string_value(v);
  if (strcmp(s, "nan") == 0) *out = NAN;
  else if (strcmp(s, "inf") == 0) *out = INFINITY;
  else if (strcmp(s, "-inf") == 0) *out = -INFINITY;
  else return false;
  return true;
}

const char *rep_verdict(const rep_run *r) {
  if (r->nfindings > 0) return "findings";
  if (r->exit_code == 0) return "clean";
  return "error";
}

void rep_run_free(rep_run *r) {
  if (!r) return;
  json_decref(r->root);
  free(r->findings);
  memset(r, 0, sizeof *r);
}

/* ---- validation helpers: each names the file and the dotted field */

static vqc_status field_error(const rep_run *r, const char *field,
                              const char *what) {
  return vqc_error(VQC_EPARSE, "%s: field '%s': %s", r->path, field, what);
}

static vqc_status need_object(const rep_run *r, const json_t *parent,
                              const char *key, const char *field,
                              const json_t **out) {
  *out = json_object_get(parent, key);
  if (!json_is_object(*out))
    return field_error(r, field, *out ? "expected an object" : "missing");
  return VQC_OK;
}

static vqc_status need_string(const rep_run *r, const json_t *parent,
                              const char *key, const char *field,
                              bool nonempty, const char **out) {
  const json_t *v = json_object_get(parent, key);
  if (!json_is_string(v))
    return field_error(r, field, v ? "expected a string" : "missing");
  if (nonempty && json_string_value(v)[0] == '\0')
    return field_error(r, field, "must not be empty");
  *out = json_string_value(v);
  return VQC_OK;
}

/* An optional string member: *out = its value, or "" when absent. */
static vqc_status opt_string(const rep_run *r, const json_t *parent,
                             const char *key, const char *field,
                             const char **out) {
  const json_t *v = json_object_get(parent, key);
  *out = "";
  if (!v) return VQC_OK;
  if (!json_is_string(v)) return field_error(r, field, "expected a string");
  *out = json_string_value(v);
  return VQC_OK;
}

static vqc_status need_int(const rep_run *r, const json_t *parent,
                           const char *key, const char *field, long long lo,
                           long long hi, long long *out) {
  const json_t *v = json_object_get(parent, key);
  if (!v) return field_error(r, field, "missing");
  if (!json_is_integer(v) || json_integer_value(v) < lo ||
      json_integer_value(v) > hi)
    return vqc_error(VQC_EPARSE, "%s: field '%s': expected an integer in "
                     "%lld..%lld", r->path, field, lo, hi);
  *out = json_integer_value(v);
  return VQC_OK;
}

/* findings[i] into *f (pointers borrowed from the document). */
static vqc_status parse_finding(const rep_run *r, size_t i, const json_t *j,
                                rep_finding *f) {
  char field[64];
  memset(f, 0, sizeof *f);
  snprintf(field, sizeof field, "findings[%zu]", i);
  if (!json_is_object(j)) return field_error(r, field, "expected an object");

  snprintf(field, sizeof field, "findings[%zu].kind", i);
  VQC_TRY(need_string(r, j, "kind", field, true, &f->kind));
  vqc_finding_kind k;
  if (vqc_finding_kind_from_name(f->kind, &k) != VQC_OK) {
    char known[256] = "";
    for (int x = 0; x < VQC_FINDING_KIND_COUNT; x++) {
      size_t used = strlen(known);
      snprintf(known + used, sizeof known - used, "%s%s", x ? ", " : "",
               vqc_finding_kind_name((vqc_finding_kind)x));
    }
    return vqc_error(VQC_EPARSE, "%s: field '%s': unknown kind '%s' "
                     "(expected one of %s)", r->path, field, f->kind, known);
  }
  snprintf(field, sizeof field, "findings[%zu].step", i);
  VQC_TRY(need_int(r, j, "step", field, -1, INT64_MAX, &f->step));

  snprintf(field, sizeof field, "findings[%zu].ranks", i);
  f->ranks = json_object_get(j, "ranks");
  if (!json_is_array(f->ranks))
    return field_error(r, field, f->ranks ? "expected an array" : "missing");
  size_t k2;
  const json_t *v;
  json_array_foreach(f->ranks, k2, v) {
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
      snprintf(field, sizeof field, "findings[%zu].ranks[%zu]", i, k2);
      return field_error(r, field, "expected an integer >= 0");
    }
  }
  snprintf(field, sizeof field, "findings[%zu].message", i);
  VQC_TRY(need_string(r, j, "message", field, false, &f->message));
  snprintf(field, sizeof field, "findings[%zu].tensor", i);
  VQC_TRY(opt_string(r, j, "tensor", field, &f->tensor));
  snprintf(field, sizeof field, "findings[%zu].site", i);
  VQC_TRY(opt_string(r, j, "site", field, &f->site));
  f->detail = json_object_get(j, "detail");
  if (f->detail && !json_is_object(f->detail)) {
    snprintf(field, sizeof field, "findings[%zu].detail", i);
    return field_error(r, field, "expected an object");
  }
  return VQC_OK;
}

vqc_status rep_run_load(const char *run_dir, rep_run *r) {
  memset(r, 0, sizeof *r);
  int n = snprintf(r->run_dir, sizeof r->run_dir, "%s", run_dir ? run_dir : "");
  if (!run_dir || n <= 0 || (size_t)n >= sizeof r->run_dir)
    return vqc_error(VQC_EINVAL, "bad run directory '%s'",
                     run_dir ? run_dir : "(null)");
  snprintf(r->path, sizeof r->path, "%s/run.json", run_dir);

  /* A missing run.json is the user naming the wrong directory (exit 2);
   * any other failure to read it is the environment's (exit 3). A link,
   * a file over rundir.h's VQC_RUN_JSON_MAX_BYTES, invalid JSON or not an
   * object: vqc_run_json_load's errors, naming the file. */
  struct stat st;
  if (lstat(r->path, &st) != 0 && errno == ENOENT)
    return vqc_error(VQC_EINVAL, "%s: no such file (is %s a vqcheck run "
                     "directory?)", r->path, run_dir);
  VQC_TRY(vqc_run_json_load(r->path, &r->root));

  long long v;
  const json_t *sv = json_object_get(r->root, "schema_version");
  if (!sv) return field_error(r, "schema_version", "missing");
  if (!json_is_integer(sv))
    return field_error(r, "schema_version", "expected an integer");
  if (json_integer_value(sv) != SCHEMA_VERSION)
    return vqc_error(VQC_EPARSE, "%s: field 'schema_version': version %lld "
                     "is not supported (this vqcheck reads version %d)",
                     r->path, (long long)json_integer_value(sv),
                     SCHEMA_VERSION);

  /* The run's subject (rundir.h): a scenario (runner, compare, analyze) or
   * an instrumented program; either names the run. */
  const json_t *sc, *env, *build, *tr;
  const bool program = !json_object_get(r->root, "scenario") &&
                       json_object_get(r->root, "program");
  if (program) {
    VQC_TRY(need_object(r, r->root, "program", "program", &sc));
    VQC_TRY(need_string(r, sc, "name", "program.name", true, &r->name));
  } else {
    VQC_TRY(need_object(r, r->root, "scenario", "scenario", &sc));
    VQC_TRY(need_string(r, sc, "name", "scenario.name", true, &r->name));
  }
  VQC_TRY(need_object(r, r->root, "environment", "environment", &env));
  VQC_TRY(need_string(r, env, "backend", "environment.backend", true,
                      &r->backend));
  VQC_TRY(need_int(r, env, "ranks", "environment.ranks", 1, 1000000, &v));
  r->ranks = (int)v;
  VQC_TRY(need_object(r, r->root, "build", "build", &build));
  VQC_TRY(need_object(r, r->root, "training", "training", &tr));
  VQC_TRY(need_string(r, tr, "status", "training.status", true,
                      &r->training_status));
  VQC_TRY(need_int(r, tr, "steps_done", "training.steps_done", 0, INT64_MAX,
                   &r->steps_done));
  VQC_TRY(opt_string(r, tr, "message", "training.message",
                     &r->training_message));
  VQC_TRY(need_int(r, r->root, "exit_code", "exit_code", 0, 3, &v));
  r->exit_code = (int)v;

  const json_t *d = json_object_get(r->root, "duration_s");
  if (d && !json_is_number(d))
    return field_error(r, "duration_s", "expected a number");
  r->duration_s = d ? json_number_value(d) : 0.0;

  const json_t *steps = json_object_get(r->root, "steps");
  if (!json_is_array(steps))
    return field_error(r, "steps", steps ? "expected an array" : "missing");
  size_t i;
  const json_t *x;
  json_array_foreach(steps, i, x) {
    char field[64];
    snprintf(field, sizeof field, "steps[%zu]", i);
    if (!json_is_object(x)) return field_error(r, field, "expected an object");
    snprintf(field, sizeof field, "steps[%zu].step", i);
    VQC_TRY(need_int(r, x, "step", field, 0, INT64_MAX, &v));
  }

  const json_t *fs = json_object_get(r->root, "findings");
  if (!json_is_array(fs))
    return field_error(r, "findings", fs ? "expected an array" : "missing");
  const size_t nf = json_array_size(fs);
  if (nf > 0) {
    r->findings = calloc(nf, sizeof *r->findings);
    if (!r->findings) return vqc_error(VQC_ENOMEM, "no memory for findings");
  }
  json_array_foreach(fs, i, x) {
    VQC_TRY(parse_finding(r, i, x, &r->findings[i]));
    r->nfindings++;
  }
  /* A comparison of traces: what it compared (trace_run.c). */
  return rep_traces_load(r);
}

vqc_status rep_render_json(const rep_run *r, FILE *out) {
  /* Indented like the runner writes it; ASCII so any terminal shows it. */
  if (json_dumpf(r->root, out, JSON_INDENT(2) | JSON_ENSURE_ASCII) != 0)
    return vqc_error(VQC_EIO, "cannot write the JSON report");
  fputc('\n', out);
  return VQC_OK;
}
