/* watch_output_check.c: the check of watch_output_check.h, shared by the
 * fuzz target and the unit test. */
#include "watch_output_check.h"

#include <dirent.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bridge_findings.h"
#include "findings.h"
#include "findings_record.h"
#include "offline.h"
#include "report.h"
#include "rundir.h"
#include "utf8.h"
#include "watch_job.h"

void woc_split(const uint8_t *data, size_t size, woc_input *in) {
  memset(in, 0, sizeof *in);
  size_t at = 0;
  for (int p = 0; p < WOC_NPARTS; p++) {
    if (at + 2 > size) break;
    size_t len = (size_t)data[at] | (size_t)data[at + 1] << 8;
    at += 2;
    if (len > size - at) len = size - at;
    in->part[p] = (const char *)data + at;
    in->len[p] = len;
    at += len;
  }
}

static char failure[1024];

static const char *fail(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static const char *fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(failure, sizeof failure, fmt, ap);
  va_end(ap);
  return failure;
}

/* Part p as a NUL-terminated copy (up to its first NUL, as a C string
 * handed over by argv or a path would be); the caller frees it. */
static char *cstr(const woc_input *in, woc_part p) {
  const char *b = in->part[p] ? in->part[p] : "";
  const size_t n = in->part[p] ? strnlen(b, in->len[p]) : 0;
  char *s = malloc(n + 1);
  if (!s) abort();
  memcpy(s, b, n);
  s[n] = '\0';
  return s;
}

/* Writes part p as dir/name when it is not empty. */
static void put_file(const char *dir, const char *name, const woc_input *in,
                     woc_part p) {
  if (in->len[p] == 0) return;
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  if (fwrite(in->part[p], 1, in->len[p], f) != in->len[p]) abort();
  fclose(f);
}

/* Removes every file in dir (the check's own and the reports'). */
static void empty_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(d);
}

/* A finding a checker could make from the parts: the message through
 * vqc_finding_init, the tensor and site copied byte for byte into their
 * buffers (cut anywhere), a detail string set the way the checkers set one
 * (json_stringn: refused, so left out, when not UTF-8). */
static void made_finding(const woc_input *in, vqc_findings *list) {
  const char *msg = in->part[WOC_MESSAGE] ? in->part[WOC_MESSAGE] : "";
  const char *tensor = in->part[WOC_TENSOR] ? in->part[WOC_TENSOR] : "";
  const char *site = in->part[WOC_SITE] ? in->part[WOC_SITE] : "";
  const char *detail = in->part[WOC_DETAIL] ? in->part[WOC_DETAIL] : "";
  const int lm = (int)in->len[WOC_MESSAGE];
  vqc_finding x;
  vqc_finding_init(&x, VQC_FINDING_DIVERGENCE, 3, "tensor differs: %.*s", lm,
                   msg);
  vqc_finding_add_rank(&x, 1);
  snprintf(x.tensor, sizeof x.tensor, "%.*s", (int)in->len[WOC_TENSOR],
           tensor);
  snprintf(x.site, sizeof x.site, "%.*s", (int)in->len[WOC_SITE], site);
  json_object_set_new(x.detail, "note",
                      json_stringn(detail, in->len[WOC_DETAIL]));
  if (vqc_findings_add(list, &x) != VQC_OK) abort();
  /* The same message four times over: past the 511 bytes a finding
   * holds, so vsnprintf cuts it wherever the 512th byte falls. */
  vqc_finding_init(&x, VQC_FINDING_NONFINITE, -1, "%.*s%.*s%.*s%.*s", lm,
                   msg, lm, msg, lm, msg, lm, msg);
  if (vqc_findings_add(list, &x) != VQC_OK) abort();
}

/* Checks dir/run.json against list (every finding there, each with a
 * kind and a message) and the job section. NULL when it holds. */
static const char *check_run_json(const char *dir, int nfindings,
                                  int nprocs) {
  char path[4200];
  snprintf(path, sizeof path, "%s/run.json", dir);
  json_t *j = NULL;
  if (vqc_run_json_load(path, &j) != VQC_OK)
    return fail("run.json does not parse back: %s", vqc_last_error());
  const char *why = NULL;
  int code = -1;
  const json_t *fs = json_object_get(j, "findings");
  if (vqc_report_run_exit_code(dir, &code) != VQC_OK)
    why = fail("run.json fails vqcheck's own validation: %s",
               vqc_last_error());
  else if ((int)json_array_size(fs) != nfindings)
    why = fail("run.json holds %zu findings, not %d", json_array_size(fs),
               nfindings);
  for (size_t i = 0; !why && i < json_array_size(fs); i++) {
    const json_t *x = json_array_get(fs, i);
    if (!json_is_string(json_object_get(x, "message")))
      why = fail("findings[%zu] has no message", i);
  }
  const json_t *job = json_object_get(j, "job");
  const json_t *procs = json_object_get(job, "processes");
  if (!why && job && (int)json_array_size(procs) != nprocs)
    why = fail("job.processes holds %zu processes, not %d",
               json_array_size(procs), nprocs);
  for (size_t i = 0; !why && i < json_array_size(procs); i++)
    if (!json_is_string(json_object_get(json_array_get(procs, i),
                                        "stderr_tail")))
      why = fail("job.processes[%zu] has no stderr_tail", i);
  if (!why && job && !json_is_string(json_object_get(job, "bridge_dir")))
    why = fail("job has no bridge_dir");
  json_decref(j);
  return why;
}

/* The three reports of dir: written, and valid UTF-8. */
static const char *check_reports(const char *dir) {
  if (vqc_reports_write(dir, VQC_REPORT_ALL) != VQC_OK)
    return fail("the reports were not written: %s", vqc_last_error());
  static const char *const names[] = {"report.md", "report.html",
                                      "junit.xml"};
  for (int i = 0; i < 3; i++) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    FILE *f = fopen(path, "rb");
    if (!f) return fail("%s was not written", names[i]);
    char *buf = NULL;
    size_t cap = 0, n = 0, got;
    char chunk[65536];
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
      if (n + got > cap) {
        cap = 2 * (n + got);
        buf = realloc(buf, cap);
        if (!buf) abort();
      }
      memcpy(buf + n, chunk, got);
      n += got;
    }
    fclose(f);
    /* The first bad byte, with the text before it (what wrote it). */
    size_t at = 0;
    while (at < n) {
      const size_t l = vqc_utf8_char_len(buf + at, n - at);
      if (l == 0 || buf[at] == '\0') break;
      at += l;
    }
    const char *why = NULL;
    if (at < n) {
      const size_t from = at > 60 ? at - 60 : 0;
      why = fail("%s is not valid UTF-8 at byte %zu (0x%02X), after "
                 "\"%.*s\"", names[i], at, (unsigned char)buf[at],
                 (int)(at - from), buf + from);
    }
    free(buf);
    if (why) return why;
  }
  return NULL;
}

/* Writes doc as dir/run.json, then checks it and the reports. */
static const char *write_and_check(const char *dir, const json_t *doc,
                                   int nprocs) {
  if (vqc_run_json_write(dir, doc) != VQC_OK)
    return fail("run.json was not written: %s", vqc_last_error());
  const int nf = (int)json_array_size(json_object_get(doc, "findings"));
  const char *why = check_run_json(dir, nf, nprocs);
  return why ? why : check_reports(dir);
}

const char *woc_check(const char *dir, const woc_input *in) {
  put_file(dir, "rank-0.findings.jsonl", in, WOC_FINDINGS);
  put_file(dir, "rank-1.live.jsonl", in, WOC_LIVE);
  put_file(dir, "rank-0.hang", in, WOC_HANG);
  put_file(dir, "rank-1.stacks.txt", in, WOC_STACKS);
  char *message = cstr(in, WOC_MESSAGE), *site = cstr(in, WOC_SITE);
  char *arg = cstr(in, WOC_ARG);
  /* Arguments of any length: reports/job.c joins the command into 2048
   * bytes and cleans the cut (it once cut a character: found here). */

  /* The findings analyze gathers: made in memory, the bridge's, the live
   * records'. A file the readers refuse is bad input (exit 2, named): the
   * check goes on without it. */
  vqc_findings list, more;
  vqc_findings_init(&list);
  vqc_findings_init(&more);
  made_finding(in, &list);
  if (vqc_bridge_findings_read(dir, &list, NULL) != VQC_OK) vqc_clear_error();
  if (vqc_recorded_findings_read(dir, &list, NULL) != VQC_OK)
    vqc_clear_error();

  /* watch's own findings and job section: rank 1 exited with status 3
   * after the stderr given; rank 0 was killed by vqcheck. */
  char *argv[3] = {"python", arg, NULL};
  vqc_watch_opts o = {.nproc = 2, .interval = 1, .timeout = 1.0,
                      .cmd_argc = 2, .cmd_argv = argv};
  vqc_watch_proc procs[2];
  memset(procs, 0, sizeof procs);
  for (int r = 0; r < 2; r++) {
    procs[r].pid = 1000 + r;
    procs[r].rank = r;
    procs[r].err_fd = -1;
    procs[r].exited = true;
  }
  procs[0].status = 9; /* killed by SIGKILL, as the wait status reads */
  procs[0].stopped = true;
  procs[0].exit_order = 2;
  procs[1].status = 3 << 8; /* exit status 3 */
  procs[1].exit_order = 1;
  size_t nt = in->len[WOC_STDERR];
  const char *tail = in->part[WOC_STDERR] ? in->part[WOC_STDERR] : "";
  if (nt > VQC_WATCH_TAIL_MAX) { /* the last bytes, as watch keeps them */
    tail += nt - VQC_WATCH_TAIL_MAX;
    nt = VQC_WATCH_TAIL_MAX;
  }
  memcpy(procs[1].tail, tail, nt);
  procs[1].ntail = nt;
  vqc_watch_ctx ctx = {.dir = dir, .o = &o, .procs = procs, .nprocs = 2,
                       .interrupted = false};
  vqc_watch_more_findings(&ctx, &list, &more);
  if (vqc_findings_copy(&list, &more) != VQC_OK) abort();
  json_t *job = vqc_watch_job_json(&o, site, procs, 2, message);

  /* run.json as analyze makes it (offline.c), with watch's sections. */
  json_t *doc = vqc_offline_run_json("fuzz", arg, "woc_check", "watch", 2);
  json_object_set_new(doc, "findings", vqc_findings_to_json(&list));
  json_object_set_new(doc, "job", job);
  json_object_set_new(json_object_get(doc, "training"), "message",
                      vqc_json_text_opts(in->part[WOC_MESSAGE],
                                         in->len[WOC_MESSAGE], VQC_UTF8_NOTE,
                                         NULL));
  json_object_set_new(doc, "exit_code", json_integer(1));
  const char *why = write_and_check(dir, doc, 2);
  json_decref(doc);

  /* run.json as the runner and the instrumentation API make it
   * (rundir.h vqc_run_json_new), every string of its info from outside. */
  if (!why) {
    char *device = cstr(in, WOC_TENSOR);
    json_t *head = json_pack("{s:{s:s}}", "scenario", "name", "fuzz");
    const vqc_run_json_info info = {.backend = arg, .device = device,
                                    .ranks = 2, .training = VQC_EABORTED,
                                    .failed_rank = 1, .message = message,
                                    .findings = &list, .exit_code = 1};
    doc = vqc_run_json_new(head, &info);
    why = write_and_check(dir, doc, 0);
    json_decref(doc);
    free(device);
  }
  vqc_findings_free(&more);
  vqc_findings_free(&list);
  free(message);
  free(site);
  free(arg);
  empty_dir(dir);
  return why;
}
