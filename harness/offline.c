/* offline.c: run.json skeletons, atomic JSON writes and report regeneration
 * for `vqcheck compare` and `vqcheck analyze` (see offline.h). */
#include "offline.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vqc/version.h"

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

void vqc_offline_iso_time(char *buf, size_t n) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

json_t *vqc_offline_build_json(void) {
  json_t *build = json_object();
  json_object_set_new(build, "version", json_string(VQC_VERSION_STRING));
  json_object_set_new(build, "build_type", json_string(VQC_BUILD_TYPE));
  json_object_set_new(build, "compiler", json_string(VQC_C_COMPILER));
  json_object_set_new(build, "mpi", json_boolean(VQC_WITH_MPI));
  json_object_set_new(build, "cuda", json_boolean(VQC_WITH_CUDA));
  return build;
}

json_t *vqc_offline_run_json(const char *name, const char *path,
                             const char *description, const char *backend,
                             int ranks) {
  json_t *j = json_object();
  json_object_set_new(j, "schema_version", json_integer(1));
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
  json_object_set_new(j, "scenario", sc);
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  json_t *env = json_object();
  v = json_string(host);
  json_object_set_new(env, "hostname", v ? v : json_string("?"));
  json_object_set_new(env, "backend", json_string(backend));
  json_object_set_new(env, "ranks", json_integer(ranks));
  json_object_set_new(env, "pid", json_integer((json_int_t)getpid()));
  json_object_set_new(j, "environment", env);
  json_object_set_new(j, "build", vqc_offline_build_json());
  char when[64];
  vqc_offline_iso_time(when, sizeof when);
  json_object_set_new(j, "finished", json_string(when));
  json_object_set_new(j, "duration_s", json_real(0.0));
  json_t *tr = json_object();
  json_object_set_new(tr, "status", json_string("VQC_OK"));
  json_object_set_new(tr, "failed_rank", json_integer(-1));
  json_object_set_new(tr, "message", json_string(""));
  json_object_set_new(tr, "steps_done", json_integer(0));
  json_object_set_new(j, "training", tr);
  json_object_set_new(j, "findings", json_array());
  json_object_set_new(j, "steps", json_array());
  json_object_set_new(j, "exit_code", json_integer(0));
  return j;
}

vqc_status vqc_offline_write_json(const json_t *j, const char *path) {
  char tmp[4300];
  int n = snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
  if (n < 0 || (size_t)n >= sizeof tmp)
    return vqc_error(VQC_EINVAL, "path too long: %.200s...", path);
  /* Indented and ASCII, like the runner's run.json. */
  if (json_dump_file(j, tmp, JSON_INDENT(2) | JSON_ENSURE_ASCII) != 0) {
    unlink(tmp);
    return vqc_error(VQC_EIO, "cannot write %s", tmp);
  }
  if (rename(tmp, path) != 0) {
    int err = errno;
    unlink(tmp);
    return vqc_error(VQC_EIO, "cannot rename %s to %s: %s", tmp, path,
                     strerror(err));
  }
  return VQC_OK;
}

vqc_status vqc_offline_mkdir_p(const char *dir, bool *created) {
  if (created) *created = false;
  char buf[4096];
  int n = snprintf(buf, sizeof buf, "%s", dir);
  if (n <= 0 || (size_t)n >= sizeof buf)
    return vqc_error(VQC_EINVAL, "directory path empty or too long: %.200s",
                     dir);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
      return vqc_error(VQC_EIO, "cannot create %s: %s", buf, strerror(errno));
    *p = '/';
  }
  if (mkdir(buf, 0777) == 0) {
    if (created) *created = true;
  } else if (errno != EEXIST) {
    return vqc_error(VQC_EIO, "cannot create %s: %s", buf, strerror(errno));
  }
  struct stat st;
  if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
    return vqc_error(VQC_EIO, "%s exists and is not a directory", buf);
  return VQC_OK;
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
    fprintf(f, "  %s at step %" PRId64, vqc_finding_kind_name(x->kind),
            x->step);
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
