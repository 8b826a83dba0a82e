/* watch_job.c: run.json's "job" section and `vqcheck watch`'s own findings
 * (see watch_job.h; the rules are in cmd_watch.c's file comment). */
#include "watch_job.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* The largest hang marker read. */
#define HANG_MAX_BYTES 65536

/* Whether name is "rank-<r><suffix>" with r in plain decimal (< 1000000);
 * *rank gets r. */
bool vqc_watch_rank_file(const char *name, const char *suffix, int *rank) {
  const size_t len = strlen(name), ls = strlen(suffix);
  if (strncmp(name, "rank-", 5) != 0 || len <= 5 + ls ||
      strcmp(name + len - ls, suffix) != 0)
    return false;
  const char *d = name + 5, *end = name + len - ls;
  if (d[0] == '0' && end - d > 1) return false;
  long r = 0;
  for (const char *p = d; p < end; p++) {
    if (*p < '0' || *p > '9') return false;
    r = r * 10 + (*p - '0');
    if (r >= 1000000) return false;
  }
  *rank = (int)r;
  return true;
}

bool vqc_watch_failed(const vqc_watch_proc *p) {
  return p->exited &&
         !(WIFEXITED(p->status) && WEXITSTATUS(p->status) == 0);
}

/* "rank 1 (pid 123)" or "the launcher (pid 123)". */
void vqc_watch_proc_name(const vqc_watch_proc *p, char *buf, size_t n) {
  if (p->rank >= 0)
    snprintf(buf, n, "rank %d (pid %ld)", p->rank, (long)p->pid);
  else
    snprintf(buf, n, "the launcher (pid %ld)", (long)p->pid);
}

/* "exited with status 3" / "was killed by signal 9 (Killed)". */
void vqc_watch_end_text(const vqc_watch_proc *p, char *buf, size_t n) {
  if (WIFEXITED(p->status))
    snprintf(buf, n, "exited with status %d", WEXITSTATUS(p->status));
  else if (WIFSIGNALED(p->status))
    snprintf(buf, n, "was killed by signal %d (%s)", WTERMSIG(p->status),
             strsignal(WTERMSIG(p->status)));
  else
    snprintf(buf, n, "ended");
}

/* ---- run.json's "job" section */

/* A JSON string of the bytes b[0..n), which may be anything (a stderr tail
 * cut anywhere): continuation bytes at the start are dropped, invalid UTF-8
 * and control characters other than newline and tab become '?'. */
static json_t *clean_string(const char *b, size_t n) {
  char *out = malloc(n + 1);
  if (!out) return json_string("");
  size_t i = 0, k = 0;
  while (i < n && ((unsigned char)b[i] & 0xC0) == 0x80) i++;
  while (i < n) {
    const unsigned char c = (unsigned char)b[i];
    size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2
                              : (c & 0xF0) == 0xE0 ? 3
                              : (c & 0xF8) == 0xF0 ? 4 : 0;
    bool ok = len > 0 && i + len <= n;
    for (size_t j = 1; ok && j < len; j++)
      ok = ((unsigned char)b[i + j] & 0xC0) == 0x80;
    if (ok && len == 1 && c < 0x20 && c != '\n' && c != '\t') ok = false;
    if (ok && len > 1) {
      memcpy(out + k, b + i, len);
      k += len;
      i += len;
      continue;
    }
    out[k++] = ok ? (char)c : '?';
    i++;
  }
  json_t *j = json_stringn(out, k);
  free(out);
  return j ? j : json_string("");
}

/* (watch_job.h) */
json_t *vqc_watch_job_json(const vqc_watch_opts *o, const char *bridge,
                           const vqc_watch_proc *procs, int n,
                           const char *reason) {
  json_t *cmd = json_array();
  for (int i = 0; i < o->cmd_argc; i++)
    json_array_append_new(cmd, clean_string(o->cmd_argv[i],
                                            strlen(o->cmd_argv[i])));
  json_t *ps = json_array();
  for (int i = 0; i < n; i++) {
    const vqc_watch_proc *p = &procs[i];
    json_t *x = json_object();
    json_object_set_new(x, "rank",
                        p->rank >= 0 ? json_integer(p->rank) : json_null());
    json_object_set_new(x, "pid", json_integer(p->pid));
    json_object_set_new(x, "exit_code",
                        p->exited && WIFEXITED(p->status)
                            ? json_integer(WEXITSTATUS(p->status))
                            : json_null());
    json_object_set_new(x, "signal",
                        p->exited && WIFSIGNALED(p->status)
                            ? json_integer(WTERMSIG(p->status))
                            : json_null());
    json_object_set_new(x, "stopped_by_vqcheck", json_boolean(p->stopped));
    json_object_set_new(x, "stderr_tail", clean_string(p->tail, p->ntail));
    json_array_append_new(ps, x);
  }
  json_t *j = json_object();
  json_object_set_new(j, "command", cmd);
  json_object_set_new(j, "nproc",
                      o->nproc > 0 ? json_integer(o->nproc) : json_null());
  json_object_set_new(j, "interval", json_integer(o->interval));
  json_object_set_new(j, "timeout_s", json_real(o->timeout));
  json_object_set_new(j, "bridge_dir", clean_string(bridge, strlen(bridge)));
  json_object_set_new(j, "stopped", reason[0]
                                        ? clean_string(reason, strlen(reason))
                                        : json_null());
  json_object_set_new(j, "processes", ps);
  return j;
}

/* ---- this command's findings (analyze.h more_findings) */

static bool has_kind(const vqc_findings *a, const vqc_findings *b,
                     vqc_finding_kind k) {
  for (int i = 0; i < a->count; i++)
    if (a->items[i].kind == k) return true;
  for (int i = 0; b && i < b->count; i++)
    if (b->items[i].kind == k) return true;
  return false;
}

/* Whether a finding of a or b names rank r with a kind that says how a
 * rank ended (rank_failure, deadlock, collective_mismatch); r < 0: any. */
static bool end_explained(const vqc_findings *a, const vqc_findings *b,
                          int r) {
  const vqc_findings *lists[2] = {a, b};
  for (int l = 0; l < 2; l++) {
    for (int i = 0; lists[l] && i < lists[l]->count; i++) {
      const vqc_finding *x = &lists[l]->items[i];
      if (x->kind != VQC_FINDING_RANK_FAILURE &&
          x->kind != VQC_FINDING_DEADLOCK &&
          x->kind != VQC_FINDING_COLLECTIVE_MISMATCH)
        continue;
      if (r < 0) return true;
      for (int k = 0; k < x->nranks; k++)
        if (x->ranks[k] == r) return true;
    }
  }
  return false;
}

/* Reads dir/rank-<r>.hang (a JSON object) into a new reference; NULL when
 * it is not one (the marker still counts). */
static json_t *read_hang(const char *dir, int r) {
  char path[4200];
  snprintf(path, sizeof path, "%s/rank-%d.hang", dir, r);
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  char *buf = malloc(HANG_MAX_BYTES + 1);
  size_t n = buf ? fread(buf, 1, HANG_MAX_BYTES, f) : 0;
  fclose(f);
  if (!buf) return NULL;
  buf[n] = '\0';
  json_t *j = json_loadb(buf, n, 0, NULL);
  free(buf);
  if (j && !json_is_object(j)) {
    json_decref(j);
    j = NULL;
  }
  return j;
}

/* A deadlock finding from the hang markers, if any. */
static void hang_finding(const vqc_watch_ctx *c, vqc_findings *known,
                         vqc_findings *out) {
  enum { MAXR = 1000000 };
  int max = -1;
  DIR *d = opendir(c->dir);
  struct dirent *e;
  int nmark = 0;
  while (d && (e = readdir(d)) != NULL) {
    int r;
    if (!vqc_watch_rank_file(e->d_name, ".hang", &r)) continue;
    nmark++;
    if (r > max) max = r;
  }
  if (d) closedir(d);
  if (nmark == 0 || max >= MAXR) return;
  if (has_kind(known, out, VQC_FINDING_DEADLOCK) ||
      has_kind(known, out, VQC_FINDING_COLLECTIVE_MISMATCH))
    return;
  vqc_finding x;
  vqc_finding_init(&x, VQC_FINDING_DEADLOCK, -1, "%s", "");
  json_t *markers = json_object();
  char ranks[256] = "", first_op[96] = "";
  size_t k = 0;
  int first = -1;
  int64_t step = -1;
  for (int r = 0; r <= max; r++) {
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/rank-%d.hang", c->dir, r);
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (first < 0) first = r;
    vqc_finding_add_rank(&x, r);
    int w = snprintf(ranks + k, sizeof ranks - k, "%s%d", k ? ", " : "", r);
    if (w > 0 && k + (size_t)w < sizeof ranks) k += (size_t)w;
    json_t *m = read_hang(c->dir, r);
    const json_t *s = json_object_get(m, "step");
    if (json_is_integer(s) && json_integer_value(s) >= 0 &&
        (step < 0 || json_integer_value(s) < step))
      step = json_integer_value(s);
    const char *op = json_string_value(json_object_get(m, "op"));
    if (!op) op = json_string_value(json_object_get(m, "collective"));
    if (op && !first_op[0]) snprintf(first_op, sizeof first_op, "%s", op);
    char key[16];
    snprintf(key, sizeof key, "%d", r);
    json_object_set_new(markers, key, m ? m : json_null());
  }
  x.step = step;
  snprintf(x.message, sizeof x.message,
           "rank%s %s had a collective%s%s in flight for longer than the "
           "%g s timeout (rank-%d.hang); vqcheck watch stopped the job",
           x.nranks == 1 ? "" : "s", ranks, first_op[0] ? " " : "",
           first_op, c->o->timeout, first);
  json_object_set_new(x.detail, "timeout_s", json_real(c->o->timeout));
  json_object_set_new(x.detail, "hang_markers", markers);
  (void)vqc_findings_add(out, &x);
}

/* The last lines (at most 3, at most `room` bytes) of p's stderr, joined
 * by " / ", into buf. */
static void last_lines(const vqc_watch_proc *p, char *buf, size_t room) {
  buf[0] = '\0';
  size_t end = p->ntail;
  while (end > 0 && (p->tail[end - 1] == '\n' || p->tail[end - 1] == '\r' ||
                     p->tail[end - 1] == ' '))
    end--;
  size_t start = end;
  int lines = 0;
  while (start > 0 && lines < 3) {
    if (p->tail[start - 1] == '\n') lines++;
    if (lines < 3) start--;
  }
  if (end - start > room) start = end - room;
  json_t *s = clean_string(p->tail + start, end - start);
  size_t k = 0;
  for (const char *c = json_string_value(s); *c && k + 4 < room + 4; c++) {
    if (*c == '\n') {
      if (k + 3 >= room) break;
      memcpy(buf + k, " / ", 3);
      k += 3;
    } else if (k + 1 < room) {
      buf[k++] = *c;
    } else {
      break;
    }
  }
  buf[k] = '\0';
  json_decref(s);
}

/* Whether process p's failure goes into the rank_failure (see the file
 * comment); `others`: another process's failure does. */
static bool unexplained(const vqc_watch_ctx *c, const vqc_watch_proc *p,
                        vqc_findings *known, vqc_findings *out, bool others) {
  if (!vqc_watch_failed(p)) return false;
  if (p->stopped) /* the reason vqcheck stopped it is reported */
    return !(c->interrupted || others || known->count + out->count > 0);
  return !end_explained(known, out, p->rank);
}

/* One rank_failure for every failed process no finding explains, the
 * first to end named first. */
static void failure_finding(const vqc_watch_ctx *c, vqc_findings *known,
                            vqc_findings *out) {
  bool own = false; /* a process failed by itself, unexplained */
  for (int i = 0; i < c->nprocs && !own; i++)
    own = !c->procs[i].stopped &&
          unexplained(c, &c->procs[i], known, out, false);
  vqc_finding x;
  vqc_finding_init(&x, VQC_FINDING_RANK_FAILURE, -1, "%s", "");
  json_t *list = json_array();
  int nfail = 0;
  size_t k = 0;
  for (int order = 1; order <= c->nprocs; order++) {
    const vqc_watch_proc *p = NULL;
    for (int i = 0; i < c->nprocs && !p; i++)
      if (c->procs[i].exit_order == order) p = &c->procs[i];
    if (!p || !unexplained(c, p, known, out, own)) continue;
    if (p->rank >= 0) vqc_finding_add_rank(&x, p->rank);
    char who[64], how[96], lines[220];
    vqc_watch_proc_name(p, who, sizeof who);
    vqc_watch_end_text(p, how, sizeof how);
    last_lines(p, lines, sizeof lines);
    int w;
    if (nfail == 0)
      w = snprintf(x.message, sizeof x.message, "%s %s%s%s%s", who, how,
                   p->stopped ? " after vqcheck watch stopped it" : "",
                   lines[0] ? "; its stderr ended: " : " (no stderr)",
                   lines);
    else
      w = snprintf(x.message + k, sizeof x.message - k, "; also %s %s", who,
                   how);
    if (w > 0 && k + (size_t)w < sizeof x.message) k += (size_t)w;
    else k = sizeof x.message - 1;
    json_array_append_new(
        list, json_pack("{s:o,s:I,s:o,s:o,s:b,s:o}", "rank",
                        p->rank >= 0 ? json_integer(p->rank) : json_null(),
                        "pid", (json_int_t)p->pid, "exit_code",
                        WIFEXITED(p->status)
                            ? json_integer(WEXITSTATUS(p->status))
                            : json_null(),
                        "signal",
                        WIFSIGNALED(p->status)
                            ? json_integer(WTERMSIG(p->status))
                            : json_null(),
                        "stopped_by_vqcheck", p->stopped, "stderr_tail",
                        clean_string(p->tail, p->ntail)));
    nfail++;
  }
  if (nfail == 0) {
    json_decref(list);
    json_decref(x.detail);
    return;
  }
  json_object_set_new(x.detail, "processes", list);
  (void)vqc_findings_add(out, &x);
}

void vqc_watch_more_findings(void *ctx, vqc_findings *known,
                             vqc_findings *out) {
  const vqc_watch_ctx *c = ctx;
  hang_finding(c, known, out);
  failure_finding(c, known, out);
}

