/* trace_compare_read.c: the trace set of trace_compare.h: finding and
 * opening each rank's rank-<r>.trace.jsonl, and reading it streamed: one
 * record peeked ahead (tc_read_next), then a step's lines at a time (the
 * rank's "group", tc_read_group) indexed by tensor name (tc_find_tensor).
 * The errors of the format are found here, naming file:line. What the
 * groups are compared for is trace_compare.c (split out of it: see
 * trace_compare_internal.h). */
#include "trace_compare_internal.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "utf8.h"

void tc_warn(json_t *warnings, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  json_array_append_new(warnings, vqc_json_text(msg, strlen(msg)));
}

/* ---- finding the files */

/* The rank of a canonical "rank-<r>.trace.jsonl" name (what vqc_trace_path
 * writes: decimal, no sign, no leading zero), -1 for any other name, -2 for
 * a name of that shape that is not canonical ("rank-01.trace.jsonl"). A rank
 * above VQC_TRACE_COMPARE_MAX_RANKS comes back as
 * VQC_TRACE_COMPARE_MAX_RANKS + 1 (the digits stop counting there, so
 * messages must show the name, not this number). */
static long rank_of_name(const char *name) {
  static const char prefix[] = "rank-", suffix[] = ".trace.jsonl";
  size_t len = strlen(name), lp = sizeof prefix - 1, ls = sizeof suffix - 1;
  if (len <= lp + ls || strncmp(name, prefix, lp) != 0 ||
      strcmp(name + len - ls, suffix) != 0)
    return -1;
  const char *d = name + lp;
  size_t nd = len - lp - ls;
  long r = 0;
  for (size_t i = 0; i < nd; i++) {
    if (d[i] < '0' || d[i] > '9') return -2;
    if (r > VQC_TRACE_COMPARE_MAX_RANKS) continue; /* too large anyway */
    r = r * 10 + (d[i] - '0');
  }
  if (r > VQC_TRACE_COMPARE_MAX_RANKS) r = VQC_TRACE_COMPARE_MAX_RANKS + 1;
  if (nd > 1 && d[0] == '0') return -2;
  return r;
}

/* "1, 3, 7" (at most 8, then "and N more") into buf. */
void tc_rank_list(const int *ranks, int n, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && i < 8 && used < cap; i++)
    used += (size_t)snprintf(buf + used, cap - used, "%s%d", i ? ", " : "",
                             ranks[i]);
  if (n > 8 && used < cap) snprintf(buf + used, cap - used, " and %d more",
                                    n - 8);
}

static vqc_status open_rank(vqc_trace_set *s, int rank) {
  rank_file *rf = &s->ranks[rank];
  VQC_TRY(vqc_trace_path(s->dir, rank, rf->path, sizeof rf->path));
  struct stat st;
  if (stat(rf->path, &st) != 0)
    return vqc_error(VQC_EIO, "cannot stat %s: %s", rf->path, strerror(errno));
  if (!S_ISREG(st.st_mode))
    return vqc_error(VQC_EINVAL, "%s is not a regular file", rf->path);
  rf->f = fopen(rf->path, "r");
  if (rf->f == NULL) {
    int err = errno;
    return vqc_error(VQC_EIO, "cannot open %s: %s%s", rf->path, strerror(err),
                     err == EMFILE ? " (one file per rank stays open: raise "
                                     "the limit with 'ulimit -n')"
                                   : "");
  }
  return VQC_OK;
}

vqc_status vqc_trace_set_open(const char *dir, const vqc_trace_set_options *o,
                              vqc_trace_set **out) {
  if (dir == NULL || out == NULL)
    return vqc_error(VQC_EINVAL, "trace set: NULL directory or out");
  *out = NULL;
  vqc_trace_set_options none = {false, 0, false, false};
  if (o == NULL) o = &none;
  if (o->expected_ranks < 0 || o->expected_ranks > VQC_TRACE_COMPARE_MAX_RANKS)
    return vqc_error(VQC_EINVAL, "trace set: expected_ranks %d outside "
                     "0..%d", o->expected_ranks, VQC_TRACE_COMPARE_MAX_RANKS);

  vqc_trace_set *s = calloc(1, sizeof *s);
  int *found = NULL, *missing = NULL;
  vqc_status st = VQC_OK;
  DIR *d = NULL;
  if (s == NULL || (s->warnings = json_array()) == NULL) goto nomem;
  int len = snprintf(s->dir, sizeof s->dir, "%s", dir);
  if (len < 0 || (size_t)len >= sizeof s->dir - 64) {
    st = vqc_error(VQC_EINVAL, "trace directory path is too long: %.200s...",
                   dir);
    goto fail;
  }
  d = opendir(dir);
  if (d == NULL) {
    int err = errno;
    st = vqc_error(err == ENOENT || err == ENOTDIR ? VQC_EINVAL : VQC_EIO,
                   "cannot read the trace directory %s: %s", dir,
                   strerror(err));
    goto fail;
  }

  /* Which ranks have a file. */
  int nfound = 0, capfound = 0, max_rank = -1;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    long r = rank_of_name(e->d_name);
    if (r == -1) continue;
    if (r == -2) {
      tc_warn(s->warnings, "%s/%s ignored: trace files are named "
              "rank-<r>.trace.jsonl with r in plain decimal", dir, e->d_name);
      continue;
    }
    if (r >= VQC_TRACE_COMPARE_MAX_RANKS ||
        (o->expected_ranks > 0 && r >= o->expected_ranks)) {
      int limit = o->expected_ranks > 0 ? o->expected_ranks
                                        : VQC_TRACE_COMPARE_MAX_RANKS;
      /* The rank as the name spells it: r stopped counting past the
       * maximum. */
      const size_t lp = sizeof "rank-" - 1, ls = sizeof ".trace.jsonl" - 1;
      const int ndigits = (int)(strlen(e->d_name) - lp - ls);
      st = vqc_error(VQC_EINVAL, "%s/%s: rank %.*s, but %s %d ranks (0..%d)",
                     dir, e->d_name, ndigits, e->d_name + lp,
                     o->expected_ranks > 0 ? "the run had" : "at most",
                     limit, limit - 1);
      goto fail;
    }
    if (nfound == capfound) {
      capfound = capfound ? 2 * capfound : 16;
      int *grown = realloc(found, (size_t)capfound * sizeof *grown);
      if (grown == NULL) goto nomem;
      found = grown;
    }
    found[nfound++] = (int)r;
    if (r > max_rank) max_rank = (int)r;
  }
  closedir(d);
  d = NULL;

  s->require_comparison = o->require_comparison;
  if (nfound == 0 && !o->allow_empty) {
    st = vqc_error(VQC_EINVAL, "no trace files in %s (expected "
                   "rank-0.trace.jsonl, rank-1.trace.jsonl, ...: one per "
                   "rank, format in docs/trace-format.md)", dir);
    goto fail;
  }
  s->nranks = o->expected_ranks > 0 ? o->expected_ranks : max_rank + 1;
  s->nfiles = nfound;
  if (s->nranks > 0) {
    s->ranks = calloc((size_t)s->nranks, sizeof *s->ranks);
    missing = malloc((size_t)s->nranks * sizeof *missing);
    if (s->ranks == NULL || missing == NULL) goto nomem;
  }
  for (int i = 0; i < nfound; i++) s->ranks[found[i]].present = true;
  for (int r = 0; r < s->nranks; r++)
    s->ranks[r].last_step = s->ranks[r].not_digested_step = -1;

  /* No file at all (allowed): nothing is missing that could be compared. */
  int nmissing = 0;
  for (int r = 0; r < s->nranks && nfound > 0; r++)
    if (!s->ranks[r].present) missing[nmissing++] = r;
  if (nmissing > 0) {
    char list[256];
    tc_rank_list(missing, nmissing, list, sizeof list);
    if (!o->allow_missing_ranks) {
      st = vqc_error(VQC_EINVAL, "%s: no trace for rank%s %s: ranks 0..%d "
                     "each need rank-<r>.trace.jsonl (%d of %d present; was "
                     "a rank's trace lost or not copied?)", dir,
                     nmissing > 1 ? "s" : "", list, s->nranks - 1, nfound,
                     s->nranks);
      goto fail;
    }
    /* Allowed: the comparison reports them as a rank_failure (they
     * stopped before writing a trace), and compares the others. */
  }
  if (o->require_comparison && s->nranks == 1) {
    st = vqc_error(VQC_EINVAL, "%s holds the trace of rank 0 only: there is "
                   "nothing to compare it with (compare needs the traces of "
                   "2 ranks or more: were the other ranks' traces not "
                   "copied, or did those ranks never start?)", dir);
    goto fail;
  }
  for (int r = 0; r < s->nranks; r++)
    if (s->ranks[r].present && (st = open_rank(s, r)) != VQC_OK) goto fail;

  free(found);
  free(missing);
  *out = s;
  return VQC_OK;

nomem:
  st = vqc_error(VQC_ENOMEM, "trace set: no memory for the traces of %s", dir);
fail:
  if (d) closedir(d);
  free(found);
  free(missing);
  vqc_trace_set_close(s);
  return st;
}

int vqc_trace_set_ranks(const vqc_trace_set *s) { return s ? s->nranks : 0; }
int vqc_trace_set_files(const vqc_trace_set *s) { return s ? s->nfiles : 0; }

/* Closes the copy writer; removes its temporary file unless `keep`. */
void tc_close_copy(rank_file *rf, bool keep) {
  if (rf->copy == NULL) return;
  vqc_trace_writer_close(rf->copy);
  rf->copy = NULL;
  if (!keep) unlink(rf->copy_tmp);
}

void vqc_trace_set_close(vqc_trace_set *s) {
  if (s == NULL) return;
  for (int r = 0; r < s->nranks && s->ranks; r++) {
    rank_file *rf = &s->ranks[r];
    if (rf->f) fclose(rf->f);
    tc_close_copy(rf, false);
    free(rf->buf);
    free(rf->group);
    free(rf->byname);
  }
  free(s->ranks);
  json_decref(s->warnings);
  free(s);
}

/* ---- reading */

static bool blank(const char *p) {
  for (; *p; p++)
    if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n') return false;
  return true;
}

/* True when a line that failed to parse looks cut off rather than wrong:
 * it is not complete JSON (jsonl.h ends a line at zeros, the tail a crash
 * can leave). Complete JSON with a bad field is an error, newline or
 * not. */
static bool looks_cut_off(const char *line) {
  json_error_t err;
  json_t *j = vqc_json_loadb_mended(line, strlen(line), 0, &err, NULL);
  if (j == NULL) return true;
  json_decref(j);
  return false;
}

/* rf->next, a not_digested line (trace.h), taken into rf->not_digested
 * and copied at once (the lines before it are copied already: it is read
 * past, never part of a step's group). */
static vqc_status take_not_digested(rank_file *rf) {
  const vqc_trace_record *r = &rf->next.r;
  rf->not_digested_step = r->step;
  rf->lines++;
  if (rf->not_digested)
    VQC_TRY(vqc_not_digested_add(rf->not_digested, r->rank, r->tensor,
                                 r->not_digested, r->step, r->unchecked));
  return rf->copy ? vqc_trace_write(rf->copy, r) : VQC_OK;
}

/* Reads the next valid record of rf into rf->next (has_next stays false at
 * the end of the file); not_digested lines are taken on the way. */
vqc_status tc_read_next(rank_file *rf, int rank, json_t *warnings) {
  rf->has_next = false;
  for (;;) {
    size_t len = 0;
    VQC_TRY(vqc_jsonl_read_line(rf->f, rf->path, rf->lineno + 1, &rf->buf,
                                &rf->cap, &len));
    if (len == 0) return VQC_OK; /* the end of the file */
    rf->lineno++;
    const bool terminated = rf->buf[len - 1] == '\n';
    if (blank(rf->buf)) continue;
    vqc_status s =
        vqc_trace_parse_line(rf->buf, rf->path, rf->lineno, &rf->next.r);
    if (s != VQC_OK) {
      /* A line comes without its newline at the end of the file, or
       * before zeros (jsonl.h): a killed writer leaves exactly this. */
      if (!terminated && looks_cut_off(rf->buf)) {
        const int c = getc(rf->f);
        if (c != EOF) ungetc(c, rf->f);
        tc_warn(warnings, "%s:%ld: the %s is cut off (no newline, not complete "
                "JSON: was the job killed while writing it?); ignored",
                rf->path, rf->lineno,
                c == EOF ? "last line" : "line before a run of zero bytes");
        vqc_clear_error();
        continue;
      }
      return s;
    }
    if (rf->next.r.rank != rank)
      return vqc_error(VQC_EPARSE, "%s:%ld: field 'rank' is %d in the trace "
                       "of rank %d (each rank writes its own "
                       "rank-<r>.trace.jsonl)", rf->path, rf->lineno,
                       rf->next.r.rank, rank);
    /* Steps never go back past a not_digested line's, nor such a line's
     * past the last group's (tc_read_group checks a group's lines). */
    const bool left_out = rf->next.r.not_digested[0] != '\0';
    int64_t least = rf->not_digested_step;
    if (left_out && rf->last_step > least) least = rf->last_step;
    if (rf->next.r.step < least)
      return vqc_error(VQC_EPARSE, "%s:%ld: step %" PRId64 " after step %"
                       PRId64 ": a trace lists its steps in order, each "
                       "step's lines together (one run per file)", rf->path,
                       rf->lineno, rf->next.r.step, least);
    if (left_out) {
      VQC_TRY(take_not_digested(rf));
      continue;
    }
    rf->next.line = rf->lineno;
    rf->has_next = true;
    rf->lines++;
    if (rf->program[0] == '\0' && rf->next.r.program[0] != '\0') {
      memcpy(rf->program, rf->next.r.program, sizeof rf->program);
      rf->program_line = rf->lineno;
    }
    return VQC_OK;
  }
}

static int by_name(const void *a, const void *b) {
  const line_rec *x = *(const line_rec *const *)a;
  const line_rec *y = *(const line_rec *const *)b;
  return strcmp(x->r.tensor, y->r.tensor);
}

/* Reads every line of `step` into rf's group (empty when rf's next step is
 * another) and indexes it by name. */
vqc_status tc_read_group(rank_file *rf, int rank, int64_t step,
                         json_t *warnings) {
  rf->n = 0;
  while (rf->has_next && rf->next.r.step == step) {
    if (rf->n == rf->gcap) {
      size_t cap = rf->gcap ? 2 * rf->gcap : 64;
      line_rec *g = realloc(rf->group, cap * sizeof *g);
      if (g == NULL)
        return vqc_error(VQC_ENOMEM, "%s: no memory for %zu lines of step %"
                         PRId64, rf->path, cap, step);
      rf->group = g;
      const line_rec **b = realloc(rf->byname, cap * sizeof *b);
      if (b == NULL)
        return vqc_error(VQC_ENOMEM, "%s: no memory for %zu lines of step %"
                         PRId64, rf->path, cap, step);
      rf->byname = b;
      rf->gcap = cap;
    }
    rf->group[rf->n] = rf->next;
    rf->group[rf->n].handled = rf->group[rf->n].compared = false;
    rf->n++;
    if (rf->copy) VQC_TRY(vqc_trace_write(rf->copy, &rf->next.r));
    VQC_TRY(tc_read_next(rf, rank, warnings));
  }
  if (rf->has_next && rf->next.r.step < step)
    return vqc_error(VQC_EPARSE, "%s:%ld: step %" PRId64 " after step %"
                     PRId64 ": a trace lists its steps in order, each step's "
                     "lines together (one run per file)", rf->path,
                     rf->next.line, rf->next.r.step, step);
  if (rf->n > 0) rf->last_step = step;
  for (size_t i = 0; i < rf->n; i++) rf->byname[i] = &rf->group[i];
  /* qsort's array must not be NULL, even for 0 elements. */
  if (rf->n > 1) qsort(rf->byname, rf->n, sizeof *rf->byname, by_name);
  for (size_t i = 1; i < rf->n; i++) {
    const line_rec *a = rf->byname[i - 1], *b = rf->byname[i];
    if (strcmp(a->r.tensor, b->r.tensor) == 0) {
      const line_rec *later = a->line > b->line ? a : b;
      const line_rec *first = a->line > b->line ? b : a;
      return vqc_error(VQC_EPARSE, "%s:%ld: tensor '%s' appears twice in step "
                       "%" PRId64 " (first at line %ld); names are unique "
                       "within a step", rf->path, later->line,
                       later->r.tensor, step, first->line);
    }
  }
  return VQC_OK;
}

const line_rec *tc_find_tensor(const rank_file *rf, const char *name) {
  size_t lo = 0, hi = rf->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(rf->byname[mid]->r.tensor, name);
    if (c == 0) return rf->byname[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return NULL;
}
