/* rundir.c: run directory preparation and the common part of run.json
 * (see rundir.h). */
#include "rundir.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vqc/fsutil.h"
#include "vqc/version.h"

/* ---- the directory */

void vqc_run_default_dir(const char *name, char *buf, size_t n) {
  time_t t = time(NULL);
  struct tm tm;
  localtime_r(&t, &tm);
  char stamp[32];
  strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  snprintf(buf, n, "vqcheck-runs/%s-%s", name, stamp);
}

void vqc_run_dir_choose(const char *wanted, const char *name, char *buf,
                        size_t n) {
  if (wanted && wanted[0]) {
    snprintf(buf, n, "%s", wanted);
    return;
  }
  char base[2048];
  vqc_run_default_dir(name, base, sizeof base);
  snprintf(buf, n, "%s", base);
  struct stat st;
  for (int k = 2; stat(buf, &st) == 0 && k < 1000; k++)
    snprintf(buf, n, "%s-%d", base, k);
}

/* The files of a run besides the rank-* ones (rundir.h). */
static const char *const run_files[] = {"run.json", "report.md",
                                        "report.html", "junit.xml"};

/* Whether `name` (a directory entry) is one vqc_run_dir_clear removes. */
static bool is_run_file(const char *name) {
  if (strncmp(name, "rank-", 5) == 0) return true; /* their temporaries too */
  for (size_t i = 0; i < sizeof run_files / sizeof run_files[0]; i++) {
    const size_t l = strlen(run_files[i]);
    if (strncmp(name, run_files[i], l) != 0) continue;
    if (name[l] == '\0' || strncmp(name + l, ".tmp.", 5) == 0) return true;
  }
  return false;
}

vqc_status vqc_run_dir_clear(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return vqc_error(VQC_EIO, "cannot read %s: %s", dir, strerror(errno));
  struct dirent *e;
  vqc_status s = VQC_OK;
  while ((e = readdir(d)) != NULL && s == VQC_OK) {
    if (!is_run_file(e->d_name)) continue;
    char path[8192]; /* dir (< 4096) + "/" + a file name (< 256) */
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    /* lstat: a link or a directory of that name is not ours to remove. */
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && unlink(path) != 0 &&
        errno != ENOENT)
      s = vqc_error(VQC_EIO, "cannot remove the stale %s: %s", path,
                    strerror(errno));
  }
  closedir(d);
  return s;
}

vqc_status vqc_run_dir_prepare(const char *dir) {
  VQC_TRY(vqc_mkdir_p(dir));
  return vqc_run_dir_clear(dir);
}

/* ---- run.json */

void vqc_run_json_time(char *buf, size_t n) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* A JSON string of s, or of `fallback` when s is not UTF-8 (a host name or
 * a message can be anything; jansson refuses what is not UTF-8, and the
 * field would then be missing). */
static json_t *string_or(const char *s, const char *fallback) {
  json_t *v = json_string(s ? s : "");
  return v ? v : json_string(fallback);
}

json_t *vqc_run_json_new(json_t *head, const vqc_run_json_info *info) {
  json_t *j = json_object();
  json_object_set_new(j, "schema_version", json_integer(VQC_RUN_JSON_SCHEMA));
  if (head) {
    json_object_update(j, head); /* keeps head's order */
    json_decref(head);
  }

  char host[256] = "";
  gethostname(host, sizeof host - 1);
  json_t *env = json_object();
  json_object_set_new(env, "hostname", string_or(host, "?"));
  json_object_set_new(env, "backend", string_or(info->backend, "?"));
  if (info->device)
    json_object_set_new(env, "device", string_or(info->device, "?"));
  json_object_set_new(env, "ranks", json_integer(info->ranks));
  json_object_set_new(env, "pid", json_integer((json_int_t)getpid()));
  json_object_set_new(j, "environment", env);

  json_t *build = json_object();
  json_object_set_new(build, "version", json_string(VQC_VERSION_STRING));
  json_object_set_new(build, "build_type", json_string(VQC_BUILD_TYPE));
  json_object_set_new(build, "compiler", json_string(VQC_C_COMPILER));
  json_object_set_new(build, "mpi", json_boolean(VQC_WITH_MPI));
  json_object_set_new(build, "cuda", json_boolean(VQC_WITH_CUDA));
  json_object_set_new(j, "build", build);

  char when[64];
  vqc_run_json_time(when, sizeof when);
  json_object_set_new(j, "finished", json_string(when));
  json_object_set_new(j, "duration_s", json_real(info->duration_s));
  json_t *tr = json_object();
  json_object_set_new(tr, "status", json_string(vqc_status_name(info->training)));
  json_object_set_new(tr, "failed_rank", json_integer(info->failed_rank));
  json_object_set_new(tr, "message", string_or(info->message, "(not UTF-8)"));
  json_object_set_new(tr, "steps_done", json_integer(info->steps_done));
  json_object_set_new(j, "training", tr);
  json_object_set_new(j, "findings", info->findings
                                         ? vqc_findings_to_json(info->findings)
                                         : json_array());
  json_object_set_new(j, "steps", json_array());
  json_object_set_new(j, "exit_code", json_integer(info->exit_code));
  return j;
}

/* What vqc_json_write_atomic hands vqc_write_atomic. */
typedef struct json_dump {
  const char *path; /* for the message */
  const json_t *j;
  size_t flags;
} json_dump;

static vqc_status write_json(FILE *f, void *user) {
  const json_dump *d = user;
  if (json_dumpf(d->j, f, d->flags) != 0)
    return vqc_error(VQC_EIO, "cannot write %s: %s", d->path, strerror(errno));
  return VQC_OK;
}

vqc_status vqc_json_write_atomic(const char *path, const json_t *j,
                                 size_t flags) {
  if (!j) return vqc_error(VQC_EINVAL, "vqc_json_write_atomic: no document");
  json_dump d = {path, j, flags};
  return vqc_write_atomic(path, write_json, &d);
}

vqc_status vqc_run_json_write(const char *run_dir, const json_t *j) {
  char path[4200];
  int n = snprintf(path, sizeof path, "%s/run.json", run_dir);
  if (n < 0 || (size_t)n >= sizeof path)
    return vqc_error(VQC_EINVAL, "run directory path too long: %.200s...",
                     run_dir);
  return vqc_json_write_atomic(path, j, JSON_INDENT(2) | JSON_ENSURE_ASCII);
}
