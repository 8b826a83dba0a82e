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
 * stack it dumped when asked. */
#include "watch_job.h"
#include "ledger_analysis.h" /* vqc_signal_text, vqc_live_mark_end */
#include "rundir.h"
#include "utf8.h"
#include "watch_heartbeat.h"

#include <dirent.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* The largest hang marker read. */
#define HANG_MAX_BYTES 65536

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
static json_t *clean_string(const char *b, size_t n) {
  char *out = malloc(n + 1);
  if (!out) return json_string("");
  const size_t k = clean_bytes(b, n, out);
  json_t *j = json_stringn(out, k);
  free(out);
  return j ? j : json_string("");
}

/* The NUL-terminated s made valid UTF-8 in place (clean_bytes). */
static void clean_in_place(char *s) { (void)clean_bytes(s, strlen(s), s); }

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
  json_t *j = vqc_json_loadb_mended(buf, n, 0, NULL, NULL);
  free(buf);
  if (j && !json_is_object(j)) {
    json_decref(j);
    j = NULL;
  }
  return j;
}

/* ---- where each rank is: hang markers and stack dumps */

/* How much of a stacks file's end is read, and its longest line. */
#define STACKS_TAIL_BYTES (1L << 20)
#define STACKS_LINE_MAX 4096

/* Whether a frame's file is torch's or vqcheck's own code. */
static bool library_file(const char *file) {
  return strstr(file, "/torch/") != NULL || strstr(file, "/vqcheck/") != NULL;
}

/* One line of faulthandler's, `  File "PATH", line N in FUNC`, into *f. */
static bool parse_frame(const char *line, vqc_watch_frame *f) {
  while (*line == ' ' || *line == '\t') line++;
  if (strncmp(line, "File \"", 6) != 0) return false;
  const char *path = line + 6, *q = NULL;
  for (const char *p = strstr(path, "\", line "); p;
       p = strstr(p + 1, "\", line "))
    q = p; /* the last: a path may hold the pattern */
  if (!q) return false;
  const char *d = q + 8;
  long n = 0;
  if (*d < '0' || *d > '9') return false;
  for (; *d >= '0' && *d <= '9'; d++)
    if (n < 100000000) n = n * 10 + (*d - '0');
  if (strncmp(d, " in ", 4) != 0) return false;
  const char *func = d + 4;
  size_t lf = (size_t)(q - path), ln = strcspn(func, "\r\n");
  if (lf >= sizeof f->file) { /* keep the path's end, the file's name */
    path += lf - (sizeof f->file - 1);
    lf = sizeof f->file - 1;
  }
  if (ln >= sizeof f->func) ln = sizeof f->func - 1;
  memcpy(f->file, path, lf);
  f->file[lf] = '\0';
  memcpy(f->func, func, ln);
  f->func[ln] = '\0';
  f->line = n;
  clean_in_place(f->file);
  clean_in_place(f->func);
  return true;
}

/* A thread's block of a dump, as read so far. */
typedef struct stack_block {
  bool current;      /* "Current thread ..." or "Stack ..." */
  bool module;       /* a frame runs "<module>" */
  bool have_top, have_where, have_entry;
  vqc_watch_frame top, where, entry;
  vqc_watch_frame last; /* the frame read last */
  int nframes;
} stack_block;

/* How much a block tells where its rank is: 0 nothing (no frame). */
static int block_rank(const stack_block *b) {
  return !b->have_top ? 0 : b->current ? 3 : b->module ? 2 : 1;
}

/* (watch_job.h) */
bool vqc_watch_stack_position(const char *path, vqc_watch_frame *where,
                              vqc_watch_frame *top) {
  vqc_watch_stack *s = malloc(sizeof *s);
  const bool ok = s && vqc_watch_stack_read(path, s);
  if (ok) {
    *where = s->where;
    *top = s->top;
  }
  free(s);
  return ok;
}

/* (watch_job.h) */
bool vqc_watch_stack_read(const char *path, vqc_watch_stack *out) {
  FILE *f = fopen(path, "r");
  if (!f) return false;
  struct stat st;
  bool skip_partial = false;
  if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) &&
      st.st_size > STACKS_TAIL_BYTES) {
    skip_partial = fseek(f, (long)(st.st_size - STACKS_TAIL_BYTES),
                         SEEK_SET) == 0;
  }
  stack_block best, block;
  memset(&best, 0, sizeof best);
  memset(&block, 0, sizeof block);
  bool in_block = false, dump_current = false, any_dump = false;
  bool prev_blank = false;
  char line[STACKS_LINE_MAX];
  for (;;) {
    /* One line, bounded: a longer one, or one with a NUL, is skipped. */
    size_t len = 0;
    bool bad = false;
    int c;
    while ((c = getc(f)) != EOF && c != '\n') {
      if (c == '\0' || len + 1 >= sizeof line) bad = true;
      else line[len++] = (char)c;
    }
    if (c == EOF && len == 0 && !bad) break;
    line[len] = '\0';
    if (len > 0 && line[len - 1] == '\r') line[--len] = '\0';
    if (skip_partial || bad) { /* a tail's first line may be cut */
      skip_partial = false;
      prev_blank = false;
      if (c == EOF) break;
      continue;
    }
    const bool current = strncmp(line, "Current thread ", 15) == 0 ||
                         strncmp(line, "Stack (most recent call first)",
                                 30) == 0;
    const bool header = current || strncmp(line, "Thread ", 7) == 0;
    vqc_watch_frame fr;
    if (header || line[0] == '\0' ||
        (line[0] != ' ' && line[0] != '\t')) {
      /* The block so far ends. */
      if (in_block && block_rank(&block) > block_rank(&best)) best = block;
      in_block = false;
    }
    if (header) {
      /* A dump starts at a header right after a frame (dumps appended
       * without a blank line) or at a second "Current thread". */
      if (!any_dump || !prev_blank || (current && dump_current)) {
        memset(&best, 0, sizeof best);
        dump_current = false;
        any_dump = true;
      }
      memset(&block, 0, sizeof block);
      block.current = current;
      dump_current = dump_current || current;
      in_block = true;
    } else if (in_block && parse_frame(line, &fr)) {
      if (!block.have_top) {
        block.top = fr;
        block.have_top = true;
      }
      if (!block.have_where && !library_file(fr.file)) {
        block.where = fr;
        block.have_where = true;
        /* The frame before it (most recent first) is the one it called. */
        block.have_entry = block.nframes > 0;
        if (block.have_entry) block.entry = block.last;
      }
      block.last = fr;
      block.nframes++;
      if (strcmp(fr.func, "<module>") == 0) block.module = true;
    }
    prev_blank = line[0] == '\0';
    if (c == EOF) break;
  }
  fclose(f);
  if (in_block && block_rank(&block) > block_rank(&best)) best = block;
  if (block_rank(&best) == 0) return false;
  memset(out, 0, sizeof *out);
  out->top = best.top;
  out->where = best.have_where ? best.where : best.top;
  out->has_entry = best.have_where && best.have_entry;
  if (out->has_entry) out->entry = best.entry;
  out->user_top = !library_file(best.top.file);
  return true;
}

/* A marker's "site" ("/abs/job.py:15 main", or {"file","line","func"}) as
 * a frame; false when it has none. A string that does not parse is the
 * file, line 0. */
static bool marker_site(const json_t *s, vqc_watch_frame *f) {
  memset(f, 0, sizeof *f);
  if (json_is_object(s)) {
    const char *file = json_string_value(json_object_get(s, "file"));
    const char *func = json_string_value(json_object_get(s, "func"));
    const json_t *line = json_object_get(s, "line");
    if (!file || !file[0]) return false;
    snprintf(f->file, sizeof f->file, "%s", file);
    snprintf(f->func, sizeof f->func, "%s", func ? func : "");
    f->line = json_is_integer(line) && json_integer_value(line) > 0
                  ? (long)json_integer_value(line)
                  : 0;
  } else {
    const char *t = json_string_value(s);
    if (!t || !t[0]) return false;
    /* The last ":<digits>" followed by the end or a space. */
    const char *colon = NULL;
    for (const char *p = strchr(t, ':'); p; p = strchr(p + 1, ':')) {
      const char *d = p + 1;
      if (*d < '0' || *d > '9') continue;
      while (*d >= '0' && *d <= '9') d++;
      if (*d == '\0' || *d == ' ') colon = p;
    }
    if (!colon) {
      snprintf(f->file, sizeof f->file, "%s", t);
    } else {
      const size_t lf = (size_t)(colon - t);
      snprintf(f->file, sizeof f->file, "%.*s", (int)lf, t);
      const char *d = colon + 1;
      long n = 0;
      for (; *d >= '0' && *d <= '9'; d++)
        if (n < 100000000) n = n * 10 + (*d - '0');
      f->line = n;
      snprintf(f->func, sizeof f->func, "%s", *d == ' ' ? d + 1 : "");
    }
  }
  clean_in_place(f->file);
  clean_in_place(f->func);
  return true;
}

/* "job.py:15 (main)" (with_func) or "job.py:15": the file's base name. */
static void short_site(const vqc_watch_frame *f, bool with_func, char *buf,
                       size_t n) {
  const char *slash = strrchr(f->file, '/');
  const char *base = slash && slash[1] ? slash + 1 : f->file;
  char line[32] = "";
  if (f->line > 0) snprintf(line, sizeof line, ":%ld", f->line);
  if (with_func && f->func[0])
    snprintf(buf, n, "%.160s%s (%.60s)", base, line, f->func);
  else
    snprintf(buf, n, "%.160s%s", base, line);
}

/* run.json's "file:line func" (as bridge_findings.c): a path too long for
 * buf keeps its end. */
static void full_site(const vqc_watch_frame *f, char *buf, size_t n) {
  char tail[96];
  if (f->func[0])
    snprintf(tail, sizeof tail, ":%ld %.60s", f->line, f->func);
  else
    snprintf(tail, sizeof tail, ":%ld", f->line);
  const size_t lt = strlen(tail), room = n - 1 - lt, lf = strlen(f->file);
  const char *shown = lf > room ? f->file + (lf - room) : f->file;
  const size_t ls = strlen(shown);
  memcpy(buf, shown, ls);
  memcpy(buf + ls, tail, lt + 1);
  clean_in_place(buf); /* a cut path may start inside a character */
}

/* Appends printf-style text to buf (n bytes) at *k, truncating. */
static void appendf(char *buf, size_t *k, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void appendf(char *buf, size_t *k, size_t n, const char *fmt, ...) {
  if (*k + 1 >= n) return;
  va_list ap;
  va_start(ap, fmt);
  const int w = vsnprintf(buf + *k, n - *k, fmt, ap);
  va_end(ap);
  if (w < 0) return;
  *k = *k + (size_t)w < n ? *k + (size_t)w : n - 1;
}

static int cmp_int(const void *a, const void *b) {
  const int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Where one rank is when the job hangs (hang_finding). */
enum { PLACE_WAITING, PLACE_ELSEWHERE, PLACE_NONE };
typedef struct rank_place {
  int rank;
  int kind;
  json_t *marker;       /* WAITING: its marker (NULL: not a JSON object) */
  const char *op;       /* WAITING: the collective, NULL when unknown */
  long long seq;        /* WAITING: its number, -1 when unknown */
  double waited;        /* WAITING: seconds, < 0 when unknown */
  bool has_site;
  vqc_watch_frame site; /* WAITING: the marker's; ELSEWHERE: where it is */
  vqc_watch_frame top;  /* ELSEWHERE: its top frame */
  char why[160];        /* NONE: why there is no stack */
  const char *verb;     /* NONE: "had ended" wording instead of "no stack" */
  bool left;            /* NONE: it had exited with status 0 (left early) */
  bool stopped;         /* NONE: it was stopped (process state T or t) */
  char key[1400];       /* places with the same key are told together */
  bool told;
} rank_place;

/* The most ranks placed, the most groups of one kind told by name. */
#define PLACE_MAX 4096
#define GROUPS_TOLD 3

/* The ranks to place: 0..nproc-1, and every rank that left a marker (with
 * a launcher, every rank that left a marker, stacks or a live record).
 * A new array of *n ranks, ascending; NULL when none (or no memory). */
static int *ranks_to_place(const vqc_watch_ctx *c, int *n) {
  enum { MAXR = 1000000 };
  *n = 0;
  bool *seen = calloc(MAXR, sizeof *seen);
  if (!seen) return NULL;
  for (int r = 0; r < c->o->nproc && r < MAXR; r++) seen[r] = true;
  static const char *const launched[] = {".stacks.txt", ".live.jsonl",
                                         ".trace.jsonl"};
  DIR *d = opendir(c->dir);
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    int r;
    bool any = vqc_run_dir_rank_file(e->d_name, ".hang", &r);
    for (size_t k = 0; !any && c->o->nproc == 0 && k < 3; k++)
      any = vqc_run_dir_rank_file(e->d_name, launched[k], &r);
    if (any) seen[r] = true;
  }
  if (d) closedir(d);
  int *ranks = malloc(PLACE_MAX * sizeof *ranks);
  for (int r = 0; ranks && r < MAXR && *n < PLACE_MAX; r++)
    if (seen[r]) ranks[(*n)++] = r;
  free(seen);
  return ranks;
}

/* The process of rank r, NULL when none. */
static const vqc_watch_proc *proc_of(const vqc_watch_ctx *c, int r) {
  for (int i = 0; i < c->nprocs; i++)
    if (c->procs[i].rank == r) return &c->procs[i];
  return NULL;
}

/* Fills a waiting place from its marker. */
static void place_waiting(rank_place *p, json_t *m) {
  p->kind = PLACE_WAITING;
  p->marker = m;
  p->op = json_string_value(json_object_get(m, "op"));
  if (!p->op) p->op = json_string_value(json_object_get(m, "collective"));
  const json_t *seq = json_object_get(m, "seq");
  p->seq = json_is_integer(seq) && json_integer_value(seq) >= 0
               ? (long long)json_integer_value(seq)
               : -1;
  const json_t *w = json_object_get(m, "waited_s");
  p->waited = json_is_number(w) && json_number_value(w) >= 0
                  ? json_number_value(w)
                  : -1.0;
  p->has_site = marker_site(json_object_get(m, "site"), &p->site);
}

/* "its collective #7; last completed: all_reduce at job.py:14" (its or
 * their), "" when the marker tells neither. */
static void marker_history(const rank_place *p, bool plural, char *buf,
                           size_t n) {
  size_t k = 0;
  buf[0] = '\0';
  if (p->seq >= 0)
    appendf(buf, &k, n, "%s collective #%lld", plural ? "their" : "its",
            p->seq);
  const json_t *last = json_object_get(p->marker, "last_completed");
  if (json_is_null(last)) {
    appendf(buf, &k, n, "%snone completed before it", k ? "; " : "");
  } else if (json_is_object(last)) {
    const char *op = json_string_value(json_object_get(last, "op"));
    vqc_watch_frame f;
    char at[200] = "";
    if (marker_site(json_object_get(last, "site"), &f))
      short_site(&f, false, at, sizeof at);
    appendf(buf, &k, n, "%slast completed: %.64s%s%s", k ? "; " : "",
            op ? op : "a collective", at[0] ? " at " : "", at);
  }
}

/* What follows the rank list in the message for place p (told with
 * `plural` ranks; `one` when every waiting rank waits in the same
 * collective, which "it" then names, and whose history is told only
 * then); waited: the group's longest. */
static void place_text(const rank_place *p, bool plural, bool one,
                       double waited, char *buf, size_t n) {
  size_t k = 0;
  char at[256];
  buf[0] = '\0';
  if (p->kind == PLACE_WAITING) {
    appendf(buf, &k, n, " wait%s in %.64s", plural ? "" : "s",
            p->op ? p->op : "a collective");
    if (p->has_site) {
      short_site(&p->site, true, at, sizeof at);
      appendf(buf, &k, n, " at %s", at);
    }
    if (waited >= 0) appendf(buf, &k, n, " for %.1f s", waited);
    char hist[400] = "";
    if (one) /* with several collectives, the detail tells (room) */
      marker_history(p, plural, hist, sizeof hist);
    if (hist[0]) appendf(buf, &k, n, " (%s)", hist);
  } else if (p->kind == PLACE_ELSEWHERE) {
    short_site(&p->site, true, at, sizeof at);
    if (strstr(p->top.file, "/torch/distributed/")) {
      const bool below = strcmp(p->top.file, p->site.file) != 0 ||
                         p->top.line != p->site.line;
      appendf(buf, &k, n, " %s in %.64s (torch.distributed)",
              plural ? "are" : "is", p->top.func);
      if (below) appendf(buf, &k, n, ", called at %s", at);
    } else {
      appendf(buf, &k, n, " %s: %s at %s",
              one ? "never entered it"
                  : plural ? "are not in a collective"
                           : "is not in a collective",
              plural ? "they are" : "it is", at);
    }
  } else if (p->stopped) {
    appendf(buf, &k, n, "%s %s stopped (process state %s)",
            one ? " never entered it:" : "",
            one ? (plural ? "they are" : "it is") : plural ? "are" : "is",
            p->why);
  } else if (p->verb) {
    if (one)
      appendf(buf, &k, n, " never entered it: %s %s %s",
              plural ? "they" : "it", p->verb, p->why);
    else
      appendf(buf, &k, n, " %s %s", p->verb, p->why);
  } else {
    appendf(buf, &k, n, ": no stack (%s)", p->why);
  }
}

/* "rank 3" or "ranks 0, 2, 5" (at most 8 named, then "and N more"). */
static void rank_names(const int *ranks, int n, char *buf, size_t cap) {
  size_t k = 0;
  buf[0] = '\0';
  appendf(buf, &k, cap, "rank%s ", n == 1 ? "" : "s");
  for (int i = 0; i < n && i < 8; i++)
    appendf(buf, &k, cap, "%s%d", i ? ", " : "", ranks[i]);
  if (n > 8) appendf(buf, &k, cap, " and %d more", n - 8);
}

/* Where rank r is, when it wrote no marker: its stacks, else why none. */
static void place_other(const vqc_watch_ctx *c, rank_place *p,
                        const char *stacks) {
  if (vqc_watch_stack_position(stacks, &p->site, &p->top)) {
    p->kind = PLACE_ELSEWHERE;
    p->has_site = true;
    return;
  }
  p->kind = PLACE_NONE;
  const vqc_watch_proc *pr = proc_of(c, p->rank);
  const char *why = "the bridge did not answer";
  if (c->o->nproc == 0)
    why = "vqcheck watch does not signal a launcher's ranks";
  else if (!pr)
    why = "no process of vqcheck watch had this rank";
  else if (pr->at_hang == VQC_WATCH_AT_HANG_NO_BRIDGE)
    why = "the bridge had not started there: no live record";
  else if (pr->at_hang == VQC_WATCH_AT_HANG_ASKED && pr->exited &&
           WIFSIGNALED(pr->status) && WTERMSIG(pr->status) == SIGUSR1)
    why = "SIGUSR1 ended it: its bridge had set up no stack dump";
  if (pr && pr->at_hang == VQC_WATCH_AT_HANG_STOPPED) {
    p->stopped = true;
    snprintf(p->why, sizeof p->why, "%s",
             vqc_proc_stopped_text(pr->stop_letter));
  } else if (pr && pr->at_hang == VQC_WATCH_AT_HANG_ENDED) {
    p->verb = "had";
    vqc_watch_end_text(pr, p->why, sizeof p->why);
    p->left = WIFEXITED(pr->status) && WEXITSTATUS(pr->status) == 0;
  } else if (pr && pr->at_hang == VQC_WATCH_AT_HANG_FINISHED) {
    p->verb = "had";
    snprintf(p->why, sizeof p->why, "finished (its live record says so)");
  } else {
    snprintf(p->why, sizeof p->why, "%s", why);
  }
}

bool vqc_watch_any_hang(const char *dir) {
  bool any = false;
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && !any && (e = readdir(d)) != NULL) {
    int r;
    any = vqc_run_dir_rank_file(e->d_name, ".hang", &r);
  }
  if (d) closedir(d);
  return any;
}

/* A deadlock finding from the hang markers, if any: where every rank is,
 * those in a collective (their markers) and the others (the stacks they
 * dumped when vqcheck watch sent them SIGUSR1). */
static void hang_finding(const vqc_watch_ctx *c, vqc_findings *known,
                         vqc_findings *out) {
  if (has_kind(known, out, VQC_FINDING_DEADLOCK) ||
      has_kind(known, out, VQC_FINDING_COLLECTIVE_MISMATCH))
    return;
  if (!vqc_watch_any_hang(c->dir)) return;
  int n = 0;
  int *ranks = ranks_to_place(c, &n);
  rank_place *pl = ranks && n > 0 ? calloc((size_t)n, sizeof *pl) : NULL;
  if (!pl) {
    free(ranks);
    return;
  }
  vqc_finding x;
  vqc_finding_init(&x, VQC_FINDING_DEADLOCK, -1, "%s", "");
  json_t *markers = json_object(), *stacks = json_array();
  int64_t step = -1;
  int nwait = 0;
  for (int i = 0; i < n; i++) {
    rank_place *p = &pl[i];
    p->rank = ranks[i];
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/rank-%d.stacks.txt", c->dir, p->rank);
    if (lstat(path, &st) == 0 && S_ISREG(st.st_mode))
      json_array_append_new(stacks, clean_string(path, strlen(path)));
    char hang[4200];
    snprintf(hang, sizeof hang, "%s/rank-%d.hang", c->dir, p->rank);
    if (lstat(hang, &st) != 0 || !S_ISREG(st.st_mode)) {
      place_other(c, p, path);
      continue;
    }
    json_t *m = read_hang(c->dir, p->rank);
    place_waiting(p, m);
    nwait++;
    const json_t *s = json_object_get(m, "step");
    if (json_is_integer(s) && json_integer_value(s) >= 0 &&
        (step < 0 || json_integer_value(s) < step))
      step = json_integer_value(s);
    char key[16];
    snprintf(key, sizeof key, "%d", p->rank);
    json_object_set(markers, key, m ? m : json_null());
  }
  if (nwait == 0) { /* no marker: nothing hung */
    json_decref(markers);
    json_decref(stacks);
    json_decref(x.detail);
    free(pl);
    free(ranks);
    return;
  }
  x.step = step;
  /* The ranks to look at: those that had left early (exit status 0 while
   * the others went on: they are why the others wait), if any; else those
   * waiting (which collective) and those placed elsewhere (where the
   * program went instead). Not the ranks without a stack otherwise: one
   * that died keeps its own rank_failure. Those elsewhere first, should
   * there be more than a finding holds. */
  int nleft = 0, nstopped = 0;
  int *left = malloc((size_t)n * sizeof *left);
  for (int i = 0; i < n; i++)
    if (pl[i].kind == PLACE_NONE && pl[i].stopped) {
      vqc_finding_add_rank(&x, pl[i].rank); /* a stopped rank: the cause */
      nstopped++;
    }
  for (int i = 0; left && nstopped == 0 && i < n; i++)
    if (pl[i].kind == PLACE_NONE && pl[i].left) left[nleft++] = pl[i].rank;
  for (int i = 0; i < nleft; i++) vqc_finding_add_rank(&x, left[i]);
  for (int kind = PLACE_ELSEWHERE;
       nleft == 0 && nstopped == 0 && kind >= PLACE_WAITING; kind--)
    for (int i = 0; i < n; i++)
      if (pl[i].kind == kind) vqc_finding_add_rank(&x, pl[i].rank);
  qsort(x.ranks, (size_t)x.nranks, sizeof x.ranks[0], cmp_int);

  /* Who waits in the same collective, who is at the same place. */
  int nkeys_wait = 0;
  for (int i = 0; i < n; i++) {
    rank_place *p = &pl[i];
    char site[256] = "", hist[400];
    if (p->has_site) full_site(&p->site, site, sizeof site);
    if (p->kind == PLACE_WAITING) {
      marker_history(p, false, hist, sizeof hist);
      snprintf(p->key, sizeof p->key, "w|%s|%s|%s", p->op ? p->op : "",
               site, hist);
    } else if (p->kind == PLACE_ELSEWHERE) {
      char top[256];
      full_site(&p->top, top, sizeof top);
      snprintf(p->key, sizeof p->key, "e|%s|%s", site, top);
    } else {
      snprintf(p->key, sizeof p->key, "n|%d|%s|%s", p->stopped,
               p->verb ? p->verb : "", p->why);
    }
  }
  for (int i = 0; i < n; i++) {
    if (pl[i].kind != PLACE_WAITING || pl[i].told) continue;
    nkeys_wait++;
    for (int j = i; j < n; j++)
      if (strcmp(pl[j].key, pl[i].key) == 0) pl[j].told = true;
  }
  const bool one = nkeys_wait == 1;
  for (int i = 0; i < n; i++) pl[i].told = false;

  /* The message: the waiting ranks, then the others, grouped. */
  size_t k = 0;
  if (nleft > 0) {
    char names[128];
    rank_names(left, nleft, names, sizeof names);
    appendf(x.message, &k, sizeof x.message, "%s left early (exited with "
            "status 0 while the others went on):", names);
  } else {
    appendf(x.message, &k, sizeof x.message, "deadlock:");
  }
  free(left);
  bool first = true;
  for (int kind = PLACE_WAITING; kind <= PLACE_NONE; kind++) {
    int groups = 0, untold = 0;
    for (int i = 0; i < n; i++) {
      if (pl[i].kind != kind || pl[i].told) continue;
      int grp[PLACE_MAX], ng = 0;
      double waited = -1.0;
      for (int j = i; j < n; j++) {
        if (pl[j].kind != kind || strcmp(pl[j].key, pl[i].key) != 0)
          continue;
        pl[j].told = true;
        grp[ng++] = pl[j].rank;
        if (pl[j].waited > waited) waited = pl[j].waited;
      }
      if (groups++ >= GROUPS_TOLD) {
        untold += ng;
        continue;
      }
      char names[128], text[700];
      rank_names(grp, ng, names, sizeof names);
      place_text(&pl[i], ng > 1, one, waited, text, sizeof text);
      appendf(x.message, &k, sizeof x.message, "%s %s%s", first ? "" : ";",
              names, text);
      first = false;
    }
    if (untold > 0)
      appendf(x.message, &k, sizeof x.message, "; %d more rank%s %s (see "
              "the detail)", untold, untold == 1 ? "" : "s",
              kind == PLACE_WAITING ? "waiting elsewhere"
              : kind == PLACE_ELSEWHERE ? "elsewhere" : "without a stack");
  }
  clean_in_place(x.message); /* a cut may fall inside a character */

  /* The detail, and the site: the first waiting rank's. */
  json_t *jw = json_array(), *je = json_array(), *jn = json_array();
  for (int i = 0; i < n; i++) {
    const rank_place *p = &pl[i];
    char site[256] = "";
    if (p->has_site) full_site(&p->site, site, sizeof site);
    if (p->kind == PLACE_WAITING) {
      if (!x.site[0] && site[0]) snprintf(x.site, sizeof x.site, "%s", site);
      const json_t *last = json_object_get(p->marker, "last_completed");
      json_array_append_new(
          jw, json_pack("{s:i,s:o,s:o,s:o,s:o,s:O}", "rank", p->rank, "op",
                        p->op ? json_string(p->op) : json_null(), "seq",
                        p->seq >= 0 ? json_integer(p->seq) : json_null(),
                        "site", site[0] ? json_string(site) : json_null(),
                        "waited_s",
                        p->waited >= 0 ? json_real(p->waited) : json_null(),
                        "last_completed", last ? last : json_null()));
    } else if (p->kind == PLACE_ELSEWHERE) {
      char top[256], path[4200];
      full_site(&p->top, top, sizeof top);
      snprintf(path, sizeof path, "%s/rank-%d.stacks.txt", c->dir, p->rank);
      json_array_append_new(
          je, json_pack("{s:i,s:s,s:s,s:o}", "rank", p->rank, "site", site,
                        "top", top, "stack_file",
                        clean_string(path, strlen(path))));
    } else {
      char why[200];
      if (p->stopped)
        snprintf(why, sizeof why, "stopped (process state %s)", p->why);
      else
        snprintf(why, sizeof why, "%s%s%s", p->verb ? p->verb : "",
                 p->verb ? " " : "", p->why);
      json_array_append_new(jn, json_pack("{s:i,s:s}", "rank", p->rank,
                                          "why", why));
    }
  }
  json_object_set_new(x.detail, "ranks_waiting", jw);
  json_object_set_new(x.detail, "ranks_elsewhere", je);
  json_object_set_new(x.detail, "ranks_without_stack", jn);
  json_object_set_new(x.detail, "stacks", stacks);
  json_object_set_new(x.detail, "timeout_s", json_real(c->o->timeout));
  json_object_set_new(x.detail, "hang_markers", markers);
  for (int i = 0; i < n; i++) json_decref(pl[i].marker);
  free(pl);
  free(ranks);
  (void)vqc_findings_add(out, &x);
}

/* ---- a hang from the heartbeats: no progress for --timeout */

/* Where one rank is, from what the watcher knew at the decision and the
 * stack the rank dumped then (hb_finding). */
enum {
  HB_STOPPED,    /* process state T or t */
  HB_COLLECTIVE, /* its heartbeat says: in a collective */
  HB_PROGRAM,    /* its innermost frame is the program's */
  HB_LIBRARY,    /* its innermost frame is torch's or vqcheck's */
  HB_NO_STACK,   /* no stack to tell */
  HB_NO_BEAT,    /* alive, never beat */
  HB_ENDED,      /* ended, or finished */
  HB_MOVING      /* alive, made progress within the timeout */
};
static const char *const hb_kind_names[] = {
    "stopped",  "in_collective", "program", "torch",
    "no_stack", "no_heartbeat",  "ended",   "progressing"};

typedef struct hb_place {
  const vqc_hb_rank *r;
  int kind;
  bool has_stack;
  vqc_watch_stack st;
  char stack_file[4200];
  char why[160];         /* NO_STACK: why; ENDED: how */
  vqc_hb_place rule;     /* vqc_hb_culprits's view */
  char key[1400];        /* places told together share it */
  bool told;
} hb_place;

/* "torch's backward (_tensor.py:623)": the owner of a library frame, its
 * function and where. */
static void library_frame_text(const vqc_watch_frame *f, char *buf,
                               size_t n) {
  char at[256];
  short_site(f, false, at, sizeof at);
  const char *owner = strstr(f->file, "/torch/")     ? "torch's "
                      : strstr(f->file, "/vqcheck/") ? "vqcheck's "
                                                     : "";
  snprintf(buf, n, "%s%.60s (%s)", owner, f->func[0] ? f->func : "?", at);
}

/* What follows "rank R " / "ranks R, S " for place p; idle: the group's
 * longest time without progress. */
static void hb_place_text(const hb_place *p, bool plural, double idle,
                          char *buf, size_t n) {
  size_t k = 0;
  char at[256], lib[400];
  const char *is = plural ? "are" : "is";
  buf[0] = '\0';
  switch (p->kind) {
  case HB_STOPPED:
    appendf(buf, &k, n, "%s stopped (process state %s)", is,
            vqc_proc_stopped_text(p->r->letter));
    break;
  case HB_COLLECTIVE:
    appendf(buf, &k, n, "wait%s in %.16s (%s collective #%llu)",
            plural ? "" : "s", p->r->hb.op[0] ? p->r->hb.op : "a collective",
            plural ? "their" : "its", (unsigned long long)p->r->hb.seq);
    if (p->has_stack) {
      short_site(&p->st.where, true, at, sizeof at);
      appendf(buf, &k, n, " at %s", at);
    }
    appendf(buf, &k, n, " for %.1f s", idle);
    break;
  case HB_PROGRAM:
    short_site(&p->st.top, true, at, sizeof at);
    appendf(buf, &k, n, "%s at %s, outside any collective (no progress for "
            "%.1f s)", is, at, idle);
    break;
  case HB_LIBRARY:
    short_site(&p->st.where, true, at, sizeof at);
    library_frame_text(p->st.has_entry ? &p->st.entry : &p->st.top, lib,
                       sizeof lib);
    if (p->st.has_entry)
      appendf(buf, &k, n, "%s in %s, called at %s (no progress for %.1f s)",
              is, lib, at, idle);
    else
      appendf(buf, &k, n, "%s in %s (no progress for %.1f s)", is, lib,
              idle);
    break;
  case HB_NO_STACK:
    appendf(buf, &k, n, "made no progress for %.1f s (no stack: %s)", idle,
            p->why);
    break;
  case HB_NO_BEAT:
    appendf(buf, &k, n, "never made progress (no heartbeat %.1f s after the "
            "first rank's: %s)", idle, p->why);
    break;
  case HB_ENDED:
    appendf(buf, &k, n, "had %s", p->why);
    break;
  default:
    /* Not (yet) stuck for the --timeout: say how long since its last
     * progress, no more (a rank stuck a little later reads so too). */
    appendf(buf, &k, n, "last made progress %.1f s ago (within the "
            "--timeout)", idle);
    if (p->has_stack) {
      short_site(&p->st.where, true, at, sizeof at);
      appendf(buf, &k, n, " (at %s)", at);
    }
    break;
  }
}

/* Why rank p has no stack (it was live, not stopped). */
static void hb_no_stack_why(const vqc_watch_ctx *c, hb_place *p) {
  const vqc_watch_proc *pr = proc_of(c, p->r->rank);
  const char *why = "the bridge did not answer SIGUSR1";
  if (c->o->nproc == 0 && !p->r->asked)
    why = "not asked: not a process vqcheck watch started on this machine";
  else if (c->o->nproc > 0 && pr &&
           pr->at_hang == VQC_WATCH_AT_HANG_NO_BRIDGE)
    why = "the bridge had not started there: no live record";
  else if (pr && pr->exited && WIFSIGNALED(pr->status) &&
           WTERMSIG(pr->status) == SIGUSR1 && pr->asked_pid == pr->pid)
    why = "SIGUSR1 ended it: its bridge had set up no stack dump";
  snprintf(p->why, sizeof p->why, "%s", why);
}

/* Fills place p of rank r. */
static void hb_place_fill(const vqc_watch_ctx *c, hb_place *p,
                          const vqc_hb_rank *r) {
  memset(p, 0, sizeof *p);
  p->r = r;
  snprintf(p->stack_file, sizeof p->stack_file, "%s/rank-%d.stacks.txt",
           c->dir, r->rank);
  p->has_stack = vqc_watch_stack_read(p->stack_file, &p->st);
  const bool finished = r->beaten && r->hb.state == VQC_HB_FINISHED;
  if (r->ended || finished) {
    p->kind = HB_ENDED;
    if (r->exit_code >= 0)
      snprintf(p->why, sizeof p->why, "exited with status %d%s",
               r->exit_code, finished ? " (finished)" : "");
    else if (r->signal > 0) {
      char sig[96];
      vqc_signal_text(r->signal, sig, sizeof sig);
      snprintf(p->why, sizeof p->why, "been killed by %s", sig);
    } else
      snprintf(p->why, sizeof p->why, "%s", finished ? "finished" : "ended");
  } else if (r->proc == VQC_PROC_STOPPED) {
    p->kind = HB_STOPPED;
  } else if (!r->beaten) {
    p->kind = HB_NO_BEAT;
    const vqc_watch_proc *pr = proc_of(c, r->rank);
    vqc_live_info info;
    snprintf(p->why, sizeof p->why, "%s",
             vqc_live_scan(c->dir, r->rank, &info) == VQC_OK && info.exists
                 ? "its bridge had started"
             : pr || c->o->nproc == 0 ? "the bridge had not started there"
                                      : "no process had this rank");
  } else if (!r->stalled) {
    p->kind = HB_MOVING;
  } else if (r->hb.state == VQC_HB_IN_COLLECTIVE) {
    p->kind = HB_COLLECTIVE;
  } else if (p->has_stack) {
    p->kind = p->st.user_top ? HB_PROGRAM : HB_LIBRARY;
  } else {
    p->kind = HB_NO_STACK;
    hb_no_stack_why(c, p);
  }
  if (p->kind == HB_ENDED) p->has_stack = false; /* an old dump tells */
  p->rule.rank = r->rank;
  p->rule.stalled = r->stalled;
  p->rule.stopped = p->kind == HB_STOPPED;
  p->rule.in_collective = p->kind == HB_COLLECTIVE;
  p->rule.user_code = p->kind == HB_PROGRAM;
  p->rule.ended_ok = p->kind == HB_ENDED &&
                     (r->exit_code == 0 || finished);
  /* The grouping key: what the text says but the seconds. */
  char a[256] = "", b[256] = "";
  if (p->has_stack) {
    full_site(&p->st.where, a, sizeof a);
    full_site(p->st.has_entry ? &p->st.entry : &p->st.top, b, sizeof b);
  }
  snprintf(p->key, sizeof p->key, "%d|%c|%s|%llu|%s|%s|%s", p->kind,
           r->letter ? r->letter : '-', r->hb.op,
           p->kind == HB_COLLECTIVE ? (unsigned long long)r->hb.seq : 0ULL,
           a, b, p->why);
}

/* One rank's detail. */
static json_t *hb_place_json(const hb_place *p) {
  const vqc_hb_rank *r = p->r;
  char letter[2] = {r->letter, '\0'};
  json_t *j = json_pack(
      "{s:i,s:s,s:b,s:o,s:o,s:f}", "rank", r->rank, "place",
      hb_kind_names[p->kind], "culprit", p->rule.culprit, "pid",
      r->pid > 0 ? json_integer(r->pid) : json_null(), "process_state",
      r->letter ? json_string(letter) : json_null(), "no_progress_s",
      r->idle_s);
  if (r->beaten)
    json_object_set_new(
        j, "heartbeat",
        json_pack("{s:i,s:I,s:I,s:I,s:s}", "state", (int)r->hb.state,
                  "beats", (json_int_t)r->hb.beats, "seq",
                  (json_int_t)r->hb.seq, "step", (json_int_t)r->hb.step,
                  "op", r->hb.op));
  else
    json_object_set_new(j, "heartbeat", json_null());
  if (p->has_stack) {
    char site[256];
    full_site(&p->st.where, site, sizeof site);
    json_object_set_new(j, "site", json_string(site));
    full_site(&p->st.top, site, sizeof site);
    json_object_set_new(j, "top", json_string(site));
    if (p->st.has_entry) {
      full_site(&p->st.entry, site, sizeof site);
      json_object_set_new(j, "entry", json_string(site));
    }
    json_object_set_new(j, "stack_file",
                        clean_string(p->stack_file, strlen(p->stack_file)));
  }
  if (p->why[0]) json_object_set_new(j, "why", json_string(p->why));
  if (r->ended) {
    json_object_set_new(j, "exit_code", r->exit_code >= 0
                                            ? json_integer(r->exit_code)
                                            : json_null());
    json_object_set_new(j, "signal",
                        r->signal > 0 ? json_integer(r->signal) : json_null());
  }
  return j;
}

/* The rule, told in every such finding (docs/pytorch.md "Hangs"). */
static const char hb_rule_text[] =
    " A rank slower than --timeout between two signs of progress (a "
    "collective entered or left, a step end) counts as a hang.";

/* A deadlock from the heartbeats when the watcher decided one (ctx->hb)
 * and no hang marker, deadlock or collective_mismatch tells it already. */
static void hb_finding(const vqc_watch_ctx *c, vqc_findings *known,
                       vqc_findings *out) {
  if (!c->hb || c->hb_n <= 0 || vqc_watch_any_hang(c->dir) ||
      has_kind(known, out, VQC_FINDING_DEADLOCK) ||
      has_kind(known, out, VQC_FINDING_COLLECTIVE_MISMATCH))
    return;
  const int n = c->hb_n < PLACE_MAX ? c->hb_n : PLACE_MAX;
  hb_place *pl = calloc((size_t)n, sizeof *pl);
  vqc_hb_place *rule = calloc((size_t)n, sizeof *rule);
  if (!pl || !rule) {
    free(pl);
    free(rule);
    return;
  }
  for (int i = 0; i < n; i++) {
    hb_place_fill(c, &pl[i], &c->hb[i]);
    rule[i] = pl[i].rule;
  }
  (void)vqc_hb_culprits(rule, n);
  for (int i = 0; i < n; i++) pl[i].rule.culprit = rule[i].culprit;
  free(rule);

  vqc_finding x;
  vqc_finding_init(&x, VQC_FINDING_DEADLOCK, -1, "%s", "");
  for (int i = 0; i < n; i++) {
    if (!pl[i].rule.culprit) continue;
    vqc_finding_add_rank(&x, pl[i].r->rank);
    if (x.step < 0 && pl[i].r->beaten)
      x.step = (int64_t)(pl[i].r->hb.step < INT64_MAX ? pl[i].r->hb.step
                                                       : INT64_MAX);
    if (!x.site[0] && pl[i].has_stack)
      full_site(&pl[i].st.where, x.site, sizeof x.site);
  }
  for (int i = 0; !x.site[0] && i < n; i++)
    if (pl[i].has_stack && pl[i].r->stalled)
      full_site(&pl[i].st.where, x.site, sizeof x.site);

  /* The message: the culprits' places, then the others', grouped; the
   * rule always fits at its end. */
  size_t k = 0;
  const size_t room = sizeof x.message - sizeof hb_rule_text;
  appendf(x.message, &k, room, "no progress for %g s (the --timeout):",
          c->o->timeout);
  bool first = true;
  int untold = 0;
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < n; i++) {
      if (pl[i].told || pl[i].rule.culprit != (pass == 0)) continue;
      int grp[PLACE_MAX], ng = 0;
      double idle = 0.0;
      for (int j = i; j < n; j++) {
        if (pl[j].told || pl[j].rule.culprit != pl[i].rule.culprit ||
            strcmp(pl[j].key, pl[i].key) != 0)
          continue;
        pl[j].told = true;
        grp[ng++] = pl[j].r->rank;
        if (pl[j].r->idle_s > idle) idle = pl[j].r->idle_s;
      }
      char names[128], text[700], part[900];
      rank_names(grp, ng, names, sizeof names);
      hb_place_text(&pl[i], ng > 1, idle, text, sizeof text);
      snprintf(part, sizeof part, "%s %s %s", first ? "" : ";", names, text);
      /* Room kept for "; N more ranks (see the detail)." */
      if (untold > 0 || k + strlen(part) + 40 >= room) {
        untold += ng;
        continue;
      }
      appendf(x.message, &k, room, "%s", part);
      first = false;
    }
  }
  if (untold > 0)
    appendf(x.message, &k, room, "; %d more rank%s (see the detail)", untold,
            untold == 1 ? "" : "s");
  appendf(x.message, &k, room, ".");
  appendf(x.message, &k, sizeof x.message, "%s", hb_rule_text);
  clean_in_place(x.message);

  json_t *places = json_array(), *culprits = json_array(),
         *stacks = json_array();
  for (int i = 0; i < n; i++) {
    json_array_append_new(places, hb_place_json(&pl[i]));
    if (pl[i].rule.culprit)
      json_array_append_new(culprits, json_integer(pl[i].r->rank));
    struct stat st;
    if (lstat(pl[i].stack_file, &st) == 0 && S_ISREG(st.st_mode))
      json_array_append_new(stacks, clean_string(pl[i].stack_file,
                                                 strlen(pl[i].stack_file)));
  }
  json_object_set_new(x.detail, "rule",
                      json_string("no progress for timeout_s: no collective "
                                  "entered or left and no step ended"));
  json_object_set_new(x.detail, "timeout_s", json_real(c->o->timeout));
  json_object_set_new(x.detail, "culprits", culprits);
  json_object_set_new(x.detail, "places", places);
  json_object_set_new(x.detail, "stacks", stacks);
  free(pl);
  (void)vqc_findings_add(out, &x);
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
  json_t *s = clean_string(p->tail + start, end - start);
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
    char who[64], how[128], lines[320], in[400] = "";
    vqc_watch_proc_name(p, who, sizeof who);
    vqc_watch_end_text(p, how, sizeof how);
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
    const size_t said = strlen(who) + strlen(how) + strlen(in) + 64;
    size_t room = said < sizeof x.message ? sizeof x.message - said : 0;
    if (room < 120) room = 120;
    if (room > sizeof lines) room = sizeof lines;
    last_lines(p, lines, room);
    int w;
    if (nfail == 0)
      w = snprintf(x.message, sizeof x.message, "%s %s%s%s%s%s", who, how,
                   p->stopped ? " after vqcheck watch stopped it" : "", in,
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
  clean_in_place(x.message); /* a cut may fall inside a character */
  (void)vqc_findings_add(out, &x);
}

void vqc_watch_more_findings(void *ctx, vqc_findings *known,
                             vqc_findings *out) {
  const vqc_watch_ctx *c = ctx;
  hang_finding(c, known, out);
  hb_finding(c, known, out);
  failure_finding(c, known, out);
}

