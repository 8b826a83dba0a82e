/* watch_hang.c: where each rank is when the job hangs, and the deadlock
 * `vqcheck watch` tells from the hang markers (watch_hang_finding; the
 * rules are vqc_watch_more_findings's, watch_job.h). Split from
 * watch_job.c (its file comment has the whole story).
 *
 * A rank whose bridge saw its collective in flight too long left a hang
 * marker (rank-<r>.hang: which collective, since when, the last one
 * completed); the others are placed by the stack they dumped when vqcheck
 * watch sent them SIGUSR1 (rank-<r>.stacks.txt, faulthandler's dumps:
 * vqc_watch_stack_read), or told why there is none. The site texts and
 * message helpers here (watch_short_site, watch_full_site, watch_appendf,
 * watch_rank_names, watch_proc_of) serve the heartbeats' finding
 * (watch_hb_hang.c) too. */
#include "watch_job.h"
#include "watch_symbols.h"
#include "rundir.h"
#include "utf8.h"
#include "watch_heartbeat.h" /* vqc_proc_stopped_text */
#include "watch_job_internal.h"

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

/* Whether a frame's file is Python's own or an installed package's (the
 * standard library, site-packages, dist-packages, a frozen module): not
 * the program's line a person looks for ("selectors.py:415 select" is
 * where a DataLoader waits, not where the program is). */
static bool installed_file(const char *file) {
  return strncmp(file, "<frozen ", 8) == 0 ||
         strstr(file, "/site-packages/") != NULL ||
         strstr(file, "/dist-packages/") != NULL ||
         (strstr(file, "/lib/python") != NULL &&
          strstr(file, "/lib/python") == strstr(file, "/lib/python3"));
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
  /* A native frame the MPI interposer left as an object and an address:
   * named from the object's debug information where it has some, else
   * told by its symbol (the address dropped). */
  uint64_t vaddr = 0;
  char object[1024];
  size_t stem = 0;
  if (n == 0 && vqc_watch_vaddr_parse(func, ln, &vaddr, object,
                                      sizeof object, &stem)) {
    if (vqc_watch_symbolize(object, vaddr, f->file, sizeof f->file,
                            &f->line, f->func, sizeof f->func)) {
      watch_clean_in_place(f->file);
      watch_clean_in_place(f->func);
      return true;
    }
    ln = stem;
  }
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
  watch_clean_in_place(f->file);
  watch_clean_in_place(f->func);
  return true;
}

/* A thread's block of a dump, as read so far. */
typedef struct stack_block {
  bool current;      /* "Current thread ..." or "Stack ..." */
  bool module;       /* a frame runs "<module>" */
  bool have_top, have_where, have_entry;
  vqc_watch_frame top, where, entry;
  /* The innermost frame that is not torch's or vqcheck's, installed code
   * or not: where, when every such frame is installed code */
  bool have_outer;
  vqc_watch_frame outer, outer_entry;
  bool have_outer_entry;
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
      if (!block.have_outer && !library_file(fr.file)) {
        block.outer = fr;
        block.have_outer = true;
        block.have_outer_entry = block.nframes > 0;
        if (block.have_outer_entry) block.outer_entry = block.last;
      }
      if (!block.have_where && !library_file(fr.file) &&
          !installed_file(fr.file)) {
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
  if (!best.have_where && best.have_outer) { /* installed code only */
    best.where = best.outer;
    best.have_where = true;
    best.have_entry = best.have_outer_entry;
    best.entry = best.outer_entry;
  }
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
  watch_clean_in_place(f->file);
  watch_clean_in_place(f->func);
  return true;
}

/* "job.py:15 (main)" (with_func) or "job.py:15": the file's base name. */
void watch_short_site(const vqc_watch_frame *f, bool with_func, char *buf,
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
void watch_full_site(const vqc_watch_frame *f, char *buf, size_t n) {
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
  watch_clean_in_place(buf); /* a cut path may start inside a character */
}

/* Appends printf-style text to buf (n bytes) at *k, truncating. */
void watch_appendf(char *buf, size_t *k, size_t n, const char *fmt, ...) {
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

/* Where one rank is when the job hangs (watch_hang_finding). */
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

/* The most groups of one kind told by name (the most ranks placed,
 * WATCH_PLACE_MAX, is in watch_job_internal.h). */
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
  int *ranks = malloc(WATCH_PLACE_MAX * sizeof *ranks);
  for (int r = 0; ranks && r < MAXR && *n < WATCH_PLACE_MAX; r++)
    if (seen[r]) ranks[(*n)++] = r;
  free(seen);
  return ranks;
}

/* The process of rank r, NULL when none. */
const vqc_watch_proc *watch_proc_of(const vqc_watch_ctx *c, int r) {
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
    watch_appendf(buf, &k, n, "%s collective #%lld", plural ? "their" : "its",
                  p->seq);
  const json_t *last = json_object_get(p->marker, "last_completed");
  if (json_is_null(last)) {
    watch_appendf(buf, &k, n, "%snone completed before it", k ? "; " : "");
  } else if (json_is_object(last)) {
    const char *op = json_string_value(json_object_get(last, "op"));
    vqc_watch_frame f;
    char at[200] = "";
    if (marker_site(json_object_get(last, "site"), &f))
      watch_short_site(&f, false, at, sizeof at);
    watch_appendf(buf, &k, n, "%slast completed: %.64s%s%s", k ? "; " : "",
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
    watch_appendf(buf, &k, n, " wait%s in %.64s", plural ? "" : "s",
                  p->op ? p->op : "a collective");
    if (p->has_site) {
      watch_short_site(&p->site, true, at, sizeof at);
      watch_appendf(buf, &k, n, " at %s", at);
    }
    if (waited >= 0) watch_appendf(buf, &k, n, " for %.1f s", waited);
    char hist[400] = "";
    if (one) /* with several collectives, the detail tells (room) */
      marker_history(p, plural, hist, sizeof hist);
    if (hist[0]) watch_appendf(buf, &k, n, " (%s)", hist);
  } else if (p->kind == PLACE_ELSEWHERE) {
    watch_short_site(&p->site, true, at, sizeof at);
    if (strstr(p->top.file, "/torch/distributed/")) {
      const bool below = strcmp(p->top.file, p->site.file) != 0 ||
                         p->top.line != p->site.line;
      watch_appendf(buf, &k, n, " %s in %.64s (torch.distributed)",
                    plural ? "are" : "is", p->top.func);
      if (below) watch_appendf(buf, &k, n, ", called at %s", at);
    } else {
      watch_appendf(buf, &k, n, " %s: %s at %s",
                    one ? "never entered it"
                        : plural ? "are not in a collective"
                                 : "is not in a collective",
                    plural ? "they are" : "it is", at);
    }
  } else if (p->stopped) {
    watch_appendf(buf, &k, n, "%s %s stopped (process state %s)",
                  one ? " never entered it:" : "",
                  one ? (plural ? "they are" : "it is") : plural ? "are" : "is",
                  p->why);
  } else if (p->verb) {
    if (one)
      watch_appendf(buf, &k, n, " never entered it: %s %s %s",
                    plural ? "they" : "it", p->verb, p->why);
    else
      watch_appendf(buf, &k, n, " %s %s", p->verb, p->why);
  } else {
    watch_appendf(buf, &k, n, ": no stack (%s)", p->why);
  }
}

/* "rank 3" or "ranks 0, 2, 5" (at most 8 named, then "and N more"). */
void watch_rank_names(const int *ranks, int n, char *buf, size_t cap) {
  size_t k = 0;
  buf[0] = '\0';
  watch_appendf(buf, &k, cap, "rank%s ", n == 1 ? "" : "s");
  for (int i = 0; i < n && i < 8; i++)
    watch_appendf(buf, &k, cap, "%s%d", i ? ", " : "", ranks[i]);
  if (n > 8) watch_appendf(buf, &k, cap, " and %d more", n - 8);
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
  const vqc_watch_proc *pr = watch_proc_of(c, p->rank);
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
void watch_hang_finding(const vqc_watch_ctx *c, vqc_findings *known,
                        vqc_findings *out) {
  if (watch_has_kind(known, out, VQC_FINDING_DEADLOCK) ||
      watch_has_kind(known, out, VQC_FINDING_COLLECTIVE_MISMATCH))
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
      json_array_append_new(stacks, watch_clean_string(path, strlen(path)));
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
    if (p->has_site) watch_full_site(&p->site, site, sizeof site);
    if (p->kind == PLACE_WAITING) {
      marker_history(p, false, hist, sizeof hist);
      snprintf(p->key, sizeof p->key, "w|%s|%s|%s", p->op ? p->op : "",
               site, hist);
    } else if (p->kind == PLACE_ELSEWHERE) {
      char top[256];
      watch_full_site(&p->top, top, sizeof top);
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
    watch_rank_names(left, nleft, names, sizeof names);
    watch_appendf(x.message, &k, sizeof x.message, "%s left early (exited with "
                  "status 0 while the others went on):", names);
  } else {
    watch_appendf(x.message, &k, sizeof x.message, "deadlock:");
  }
  free(left);
  bool first = true;
  for (int kind = PLACE_WAITING; kind <= PLACE_NONE; kind++) {
    int groups = 0, untold = 0;
    for (int i = 0; i < n; i++) {
      if (pl[i].kind != kind || pl[i].told) continue;
      int grp[WATCH_PLACE_MAX], ng = 0;
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
      watch_rank_names(grp, ng, names, sizeof names);
      place_text(&pl[i], ng > 1, one, waited, text, sizeof text);
      watch_appendf(x.message, &k, sizeof x.message, "%s %s%s",
                    first ? "" : ";", names, text);
      first = false;
    }
    if (untold > 0)
      watch_appendf(x.message, &k, sizeof x.message, "; %d more rank%s %s "
                    "(see the detail)", untold, untold == 1 ? "" : "s",
                    kind == PLACE_WAITING     ? "waiting elsewhere"
                    : kind == PLACE_ELSEWHERE ? "elsewhere"
                                              : "without a stack");
  }
  watch_clean_in_place(x.message); /* a cut may fall inside a character */

  /* The detail, and the site: the first waiting rank's. */
  json_t *jw = json_array(), *je = json_array(), *jn = json_array();
  for (int i = 0; i < n; i++) {
    const rank_place *p = &pl[i];
    char site[256] = "";
    if (p->has_site) watch_full_site(&p->site, site, sizeof site);
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
      watch_full_site(&p->top, top, sizeof top);
      snprintf(path, sizeof path, "%s/rank-%d.stacks.txt", c->dir, p->rank);
      json_array_append_new(
          je, json_pack("{s:i,s:s,s:s,s:o}", "rank", p->rank, "site", site,
                        "top", top, "stack_file",
                        watch_clean_string(path, strlen(path))));
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

