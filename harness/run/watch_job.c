/* watch_job.c: run.json's "job" section and `vqcheck watch`'s own findings
 * (see watch_job.h; the rules are in cmd_watch.c's file comment, and what
 * explains a failed process in vqc_watch_more_findings's).
 *
 * This is where the process facts (exit statuses, signals, stderr tails)
 * meet the ledger analysis. Two ways, one story: before the analysis,
 * vqc_watch_mark_ended writes them into the live records of the ranks that
 * died without an end line, so the ledger analysis names them (and a later
 * `vqcheck analyze` does too); after it, the findings callback tells what
 * the analysis could not have known (a signal not on record) and leaves
 * alone what a finding already explains.
 *
 * A hang is told from the best evidence there is: the hang markers (the
 * bridge saw its collective in flight too long: which one, since when),
 * else the heartbeats as the watcher knew them at its decision
 * (watch_heartbeat.h: no progress for --timeout), each rank placed by the
 * stack it dumped when asked.
 *
 * The code is in three files: this one (the process facts, run.json's
 * "job" section, the rank_failure, and the findings callback, which asks
 * the other two first), watch_hang.c (where each rank is: hang markers,
 * stack dumps; the deadlock told from the markers) and watch_hb_hang.c
 * (the deadlock told from the heartbeats); watch_job_internal.h has what
 * they share. */
#include "watch_job.h"
#include "ledger_analysis.h" /* vqc_signal_text, vqc_live_mark_end */
#include "utf8.h"
#include "watch_job_internal.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

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

/* "exited with status 3" / "was killed by signal 9 (SIGKILL, Killed)". */
void vqc_watch_end_text(const vqc_watch_proc *p, char *buf, size_t n) {
  char sig[96];
  if (WIFEXITED(p->status)) {
    snprintf(buf, n, "exited with status %d", WEXITSTATUS(p->status));
  } else if (WIFSIGNALED(p->status)) {
    vqc_signal_text(WTERMSIG(p->status), sig, sizeof sig);
    snprintf(buf, n, "was killed by %s", sig);
  } else {
    snprintf(buf, n, "ended");
  }
}

/* ---- run.json's "job" section */

/* The bytes b[0..n), which may be anything (a stderr tail cut anywhere),
 * into out (n + 1 bytes, NUL-terminated) by utf8.h's rule: continuation
 * bytes at the start are dropped, invalid UTF-8 and control characters
 * other than newline and tab become '?'. The length written. out may be b. */
static size_t clean_bytes(const char *b, size_t n, char *out) {
  size_t k = 0;
  (void)vqc_utf8_copy(out, n + 1, b, n, VQC_UTF8_TAIL | VQC_UTF8_NO_CONTROLS,
                      &k);
  return k;
}

/* A JSON string of the bytes b[0..n) (clean_bytes). */
json_t *watch_clean_string(const char *b, size_t n) {
  char *out = malloc(n + 1);
  if (!out) return json_string("");
  const size_t k = clean_bytes(b, n, out);
  json_t *j = json_stringn(out, k);
  free(out);
  return j ? j : json_string("");
}

/* The NUL-terminated s made valid UTF-8 in place (clean_bytes). */
void watch_clean_in_place(char *s) { (void)clean_bytes(s, strlen(s), s); }

/* (watch_job.h) */
void vqc_watch_mark_ended(const char *dir, const vqc_watch_proc *procs,
                          int n) {
  for (int i = 0; i < n; i++) {
    const vqc_watch_proc *p = &procs[i];
    if (p->rank < 0 || p->stopped || !vqc_watch_failed(p)) continue;
    vqc_live_info info;
    /* A record with an end of the rank's own (or of whoever ended it) says
     * how it ended already; no record: the bridge never started there. */
    if (vqc_live_scan(dir, p->rank, &info) != VQC_OK || !info.exists ||
        info.finished || info.signal != 0 || info.killed || info.lost)
      continue;
    char words[VQC_WATCH_TAIL_MAX + 1];
    (void)clean_bytes(p->tail, p->ntail, words);
    (void)vqc_live_mark_end(dir, p->rank, "vqcheck watch",
                            WIFSIGNALED(p->status) ? WTERMSIG(p->status) : 0,
                            WIFEXITED(p->status) ? WEXITSTATUS(p->status) : 0,
                            words);
  }
}

/* (watch_job.h) */
json_t *vqc_watch_job_json(const vqc_watch_opts *o, const char *bridge,
                           const vqc_watch_proc *procs, int n,
                           const char *reason) {
  json_t *cmd = json_array();
  for (int i = 0; i < o->cmd_argc; i++)
    json_array_append_new(cmd, watch_clean_string(o->cmd_argv[i],
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
    json_object_set_new(x, "stderr_tail",
                        watch_clean_string(p->tail, p->ntail));
    json_array_append_new(ps, x);
  }
  json_t *j = json_object();
  json_object_set_new(j, "command", cmd);
  json_object_set_new(j, "nproc",
                      o->nproc > 0 ? json_integer(o->nproc) : json_null());
  json_object_set_new(j, "interval", json_integer(o->interval));
  json_object_set_new(j, "timeout_s", json_real(o->timeout));
  json_object_set_new(j, "bridge_dir",
                      watch_clean_string(bridge, strlen(bridge)));
  json_object_set_new(j, "stopped",
                      reason[0] ? watch_clean_string(reason, strlen(reason))
                                : json_null());
  json_object_set_new(j, "processes", ps);
  return j;
}

/* ---- this command's findings (analyze.h more_findings) */

bool watch_has_kind(const vqc_findings *a, const vqc_findings *b,
                    vqc_finding_kind k) {
  for (int i = 0; i < a->count; i++)
    if (a->items[i].kind == k) return true;
  for (int i = 0; b && i < b->count; i++)
    if (b->items[i].kind == k) return true;
  return false;
}

/* Whether finding x is about rank r: it names r, or its detail lists r's
 * call of the collective it is about (a deadlock's "entered", a
 * collective_mismatch's "calls"). */
static bool about_rank(const vqc_finding *x, int r) {
  for (int k = 0; k < x->nranks; k++)
    if (x->ranks[k] == r) return true;
  static const char *const lists[] = {"entered", "calls"};
  for (size_t l = 0; l < sizeof lists / sizeof lists[0]; l++) {
    const json_t *arr = json_object_get(x->detail, lists[l]);
    for (size_t i = 0; i < json_array_size(arr); i++) {
      const json_t *rank = json_object_get(json_array_get(arr, i), "rank");
      if (json_is_integer(rank) && json_integer_value(rank) == r) return true;
    }
  }
  return false;
}

/* A finding of a or b of a kind that says how a rank ended (rank_failure,
 * deadlock, collective_mismatch) and is about rank r (about_rank; r < 0:
 * any); only_failure: a rank_failure only. NULL when none. */
static const vqc_finding *end_finding(const vqc_findings *a,
                                      const vqc_findings *b, int r,
                                      bool only_failure) {
  const vqc_findings *lists[2] = {a, b};
  for (int l = 0; l < 2; l++) {
    for (int i = 0; lists[l] && i < lists[l]->count; i++) {
      const vqc_finding *x = &lists[l]->items[i];
      if (x->kind != VQC_FINDING_RANK_FAILURE &&
          (only_failure || (x->kind != VQC_FINDING_DEADLOCK &&
                            x->kind != VQC_FINDING_COLLECTIVE_MISMATCH)))
        continue;
      if (r < 0 || about_rank(x, r)) return x;
    }
  }
  return NULL;
}

/* The last lines (at most 3) of p's stderr, joined by " / ", into buf
 * (room bytes, its NUL included). When they do not fit, their end: what a
 * process says last tells most (gloo's "Received data size doesn't match
 * expected size" ends a line of 260 bytes), from a word's start, after
 * "... ". Valid UTF-8 (clean_bytes). */
static void last_lines(const vqc_watch_proc *p, char *buf, size_t room) {
  buf[0] = '\0';
  if (room < 16) return;
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
  json_t *s = watch_clean_string(p->tail + start, end - start);
  const char *t = json_string_value(s);
  /* Joined: a newline becomes " / " (3 bytes for 1). */
  char *joined = malloc(3 * strlen(t) + 1);
  if (!joined) {
    json_decref(s);
    return;
  }
  size_t m = 0;
  for (const char *c = t; *c; c++) {
    if (*c == '\r') continue;
    if (*c == '\n') {
      memcpy(joined + m, " / ", 3);
      m += 3;
    } else {
      joined[m++] = *c;
    }
  }
  joined[m] = '\0';
  if (m + 1 <= room) {
    memcpy(buf, joined, m + 1);
  } else {
    static const char cut[] = "... ";
    const char *from = joined + (m - (room - sizeof cut)); /* fits after */
    while (*from && ((unsigned char)*from & 0xC0) == 0x80) from++;
    /* From the next word, unless that is far. */
    const char *space = strchr(from, ' ');
    if (space && space - from < 24) from = space + 1;
    snprintf(buf, room, "%s%s", cut, from);
  }
  free(joined);
  json_decref(s);
}

/* Whether p was killed by a signal of its own (not one vqcheck sent), and
 * the analysis did not have it: its live record holds no such end
 * (vqc_watch_mark_ended). */
static bool signal_is_news(const vqc_watch_ctx *c, const vqc_watch_proc *p) {
  if (p->stopped || !p->exited || !WIFSIGNALED(p->status) || p->rank < 0)
    return false;
  vqc_live_info info;
  return vqc_live_scan(c->dir, p->rank, &info) != VQC_OK ||
         !(info.lost && info.end_signal == WTERMSIG(p->status));
}

/* Whether process p's failure goes into the rank_failure (watch_job.h);
 * `others`: another process's failure does. */
static bool unexplained(const vqc_watch_ctx *c, const vqc_watch_proc *p,
                        vqc_findings *known, vqc_findings *out, bool others) {
  if (!vqc_watch_failed(p)) return false;
  if (p->stopped) /* the reason vqcheck stopped it is reported */
    return !(c->interrupted || others || known->count + out->count > 0);
  return !end_finding(known, out, p->rank, signal_is_news(c, p));
}

/* " after it finished (...)" when rank p's live record has its end line:
 * the process failed on its way out (at interpreter exit, say), after the
 * steps it recorded, whose checks stand; "" otherwise. *finished says
 * which. */
static void after_finish_text(const vqc_watch_ctx *c, const vqc_watch_proc *p,
                              char *buf, size_t n, bool *finished) {
  vqc_live_info info;
  *finished = p->rank >= 0 && vqc_live_scan(c->dir, p->rank, &info) == VQC_OK &&
              info.exists && info.finished && !info.lost;
  buf[0] = '\0';
  if (*finished)
    snprintf(buf, n, " after it finished (its end line follows %lld "
             "step%s: it failed on its way out, after the checks of its "
             "steps)", (long long)info.steps_done,
             info.steps_done == 1 ? "" : "s");
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
    char who[64], how[128], lines[320], in[400] = "", after[160];
    bool finished;
    vqc_watch_proc_name(p, who, sizeof who);
    vqc_watch_end_text(p, how, sizeof how);
    after_finish_text(c, p, after, sizeof after, &finished);
    /* Killed inside what another finding is about (a collective_mismatch,
     * a deadlock): where it died, and an abort there is the backend's. */
    const vqc_finding *about =
        p->rank >= 0 && WIFSIGNALED(p->status)
            ? end_finding(known, out, p->rank, false)
            : NULL;
    if (about) {
      snprintf(in, sizeof in, " in the %s%s%.256s%s",
               vqc_finding_kind_name(about->kind), about->site[0] ? " at " : "",
               about->site,
               WTERMSIG(p->status) == SIGABRT
                   ? ": the backend aborted the process on it"
                   : "");
      if (nfail == 0 && about->site[0])
        snprintf(x.site, sizeof x.site, "%s", about->site);
      if (nfail == 0) x.step = about->step;
    }
    /* Its last words get what the message has left (their end is what
     * tells most), at least 120 bytes, at most the buffer. */
    const size_t said =
        strlen(who) + strlen(how) + strlen(after) + strlen(in) + 64;
    size_t room = said < sizeof x.message ? sizeof x.message - said : 0;
    if (room < 120) room = 120;
    if (room > sizeof lines) room = sizeof lines;
    last_lines(p, lines, room);
    int w;
    if (nfail == 0)
      w = snprintf(x.message, sizeof x.message, "%s %s%s%s%s%s%s", who, how,
                   p->stopped ? " after vqcheck watch stopped it" : "", after,
                   in, lines[0] ? "; its stderr ended: " : " (no stderr)",
                   lines);
    else
      w = snprintf(x.message + k, sizeof x.message - k, "; also %s %s%s",
                   who, how, after);
    if (w > 0 && k + (size_t)w < sizeof x.message) k += (size_t)w;
    else k = sizeof x.message - 1;
    json_array_append_new(
        list, json_pack("{s:o,s:I,s:o,s:o,s:b,s:b,s:o}", "rank",
                        p->rank >= 0 ? json_integer(p->rank) : json_null(),
                        "pid", (json_int_t)p->pid, "exit_code",
                        WIFEXITED(p->status)
                            ? json_integer(WEXITSTATUS(p->status))
                            : json_null(),
                        "signal",
                        WIFSIGNALED(p->status)
                            ? json_integer(WTERMSIG(p->status))
                            : json_null(),
                        "stopped_by_vqcheck", p->stopped, "after_finish",
                        finished, "stderr_tail",
                        watch_clean_string(p->tail, p->ntail)));
    nfail++;
  }
  if (nfail == 0) {
    json_decref(list);
    json_decref(x.detail);
    return;
  }
  json_object_set_new(x.detail, "processes", list);
  watch_clean_in_place(x.message); /* a cut may fall inside a character */
  (void)vqc_findings_add(out, &x);
}

void vqc_watch_more_findings(void *ctx, vqc_findings *known,
                             vqc_findings *out) {
  const vqc_watch_ctx *c = ctx;
  watch_hang_finding(c, known, out);
  watch_hb_finding(c, known, out);
  failure_finding(c, known, out);
}

