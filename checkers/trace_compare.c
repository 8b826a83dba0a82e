/* trace_compare.c: divergence findings from per-rank trace files (see
 * trace_compare.h for what is compared and which inputs are errors).
 *
 * The loop: every rank's file has one record peeked ahead; the smallest
 * peeked step is the next step; each rank whose next record has that step
 * reads the step's lines (its "group"), the groups are compared, and the
 * loop goes on. A rank whose next step is larger simply has no lines for
 * this step. Groups are matched by tensor name through a name-sorted index,
 * so a step of T tensors on R ranks costs O(R T log T). */
#include "trace_compare.h"

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

#include "trace.h"
#include "utf8.h"

/* One valid line of a trace and where it was. */
typedef struct line_rec {
  vqc_trace_record r;
  long line;
  bool handled;  /* its (tensor, group, shard) was looked at this step */
  bool compared; /* compared (or known to have no replica) */
} line_rec;

/* One rank's file while it is streamed. */
typedef struct rank_file {
  bool present;             /* the rank has a file */
  char path[4096];
  FILE *f;
  char *buf;                /* vqc_jsonl_read_line's buffer */
  size_t cap;
  long lineno;              /* lines read so far (blank ones included) */
  bool has_next;            /* `next` holds the record after the group */
  line_rec next;
  line_rec *group;          /* (n) the current step's lines, file order */
  const line_rec **byname;  /* (n) the same, sorted by tensor name */
  size_t n, gcap;
  int64_t last_step;        /* the last step read; -1 before the first */
  int64_t lines;            /* valid lines read */
  int64_t not_compared;     /* lines some other rank has no match for */
  line_rec first_not_compared;
  char program[VQC_TRACE_NAME_MAX]; /* the first "program" named; "" none */
  long program_line;        /* its line */
  vqc_trace_writer *copy;   /* NULL unless copying */
  char copy_path[4200];
  char copy_tmp[4224];      /* copy_path + ".tmp.<pid>" */
} rank_file;

struct vqc_trace_set {
  char dir[4096];
  int nranks;        /* slots: highest rank with a file + 1, or expected */
  int nfiles;        /* slots that have a file */
  rank_file *ranks;  /* (nranks) */
  json_t *warnings;  /* found while opening; moved into the result */
  bool require_comparison;
  bool compared;
};

static void warn(json_t *warnings, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void warn(json_t *warnings, const char *fmt, ...) {
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
static void rank_list(const int *ranks, int n, char *buf, size_t cap) {
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
      warn(s->warnings, "%s/%s ignored: trace files are named "
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
  for (int r = 0; r < s->nranks; r++) s->ranks[r].last_step = -1;

  /* No file at all (allowed): nothing is missing that could be compared. */
  int nmissing = 0;
  for (int r = 0; r < s->nranks && nfound > 0; r++)
    if (!s->ranks[r].present) missing[nmissing++] = r;
  if (nmissing > 0) {
    char list[256];
    rank_list(missing, nmissing, list, sizeof list);
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
static void close_copy(rank_file *rf, bool keep) {
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
    close_copy(rf, false);
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

/* Reads the next valid record of rf into rf->next (has_next stays false at
 * the end of the file). */
static vqc_status read_next(rank_file *rf, int rank, json_t *warnings) {
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
        warn(warnings, "%s:%ld: the %s is cut off (no newline, not complete "
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
static vqc_status read_group(rank_file *rf, int rank, int64_t step,
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
    VQC_TRY(read_next(rf, rank, warnings));
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

static const line_rec *find_tensor(const rank_file *rf, const char *name) {
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

/* ---- the set of tensors already reported (sorted names) */

typedef struct name_set {
  char **names;
  size_t n, cap;
} name_set;

/* Index where name is or would go. */
static size_t name_pos(const name_set *ns, const char *name, bool *found) {
  size_t lo = 0, hi = ns->n;
  *found = false;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(ns->names[mid], name);
    if (c == 0) {
      *found = true;
      return mid;
    }
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static bool name_set_has(const name_set *ns, const char *name) {
  bool found;
  name_pos(ns, name, &found);
  return found;
}

static vqc_status name_set_add(name_set *ns, const char *name) {
  bool found;
  size_t at = name_pos(ns, name, &found);
  if (found) return VQC_OK;
  if (ns->n == ns->cap) {
    size_t cap = ns->cap ? 2 * ns->cap : 16;
    char **g = realloc(ns->names, cap * sizeof *g);
    if (g == NULL) return vqc_error(VQC_ENOMEM, "trace compare: no memory");
    ns->names = g;
    ns->cap = cap;
  }
  char *copy = strdup(name);
  if (copy == NULL) return vqc_error(VQC_ENOMEM, "trace compare: no memory");
  memmove(ns->names + at + 1, ns->names + at, (ns->n - at) * sizeof *ns->names);
  ns->names[at] = copy;
  ns->n++;
  return VQC_OK;
}

static void name_set_free(name_set *ns) {
  for (size_t i = 0; i < ns->n; i++) free(ns->names[i]);
  free(ns->names);
}

/* ---- comparing */

static bool same_layout(const vqc_trace_record *a, const vqc_trace_record *b) {
  if (strcmp(a->dtype, b->dtype) != 0 || a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return false;
  return true;
}

static bool same_state(const vqc_trace_record *a, const vqc_trace_record *b) {
  return a->digest == b->digest && same_layout(a, b);
}

/* "[32, 16]" ("[]" for a scalar). */
static void shape_str(const vqc_trace_record *r, char *buf, size_t n) {
  size_t used = (size_t)snprintf(buf, n, "[");
  for (int d = 0; d < r->ndim && used < n; d++)
    used += (size_t)snprintf(buf + used, n - used, "%s%" PRId64, d ? ", " : "",
                             r->shape[d]);
  if (used < n) snprintf(buf + used, n - used, "]");
}

static json_t *shape_json(const vqc_trace_record *r) {
  json_t *a = json_array();
  for (int d = 0; d < r->ndim; d++)
    json_array_append_new(a, json_integer(r->shape[d]));
  return a;
}

static json_t *where_json(const rank_file *rf, int rank, const line_rec *x) {
  char at[4200];
  snprintf(at, sizeof at, "%s:%ld", rf->path, x->line);
  return json_pack("{s:i,s:s}", "rank", rank, "at", at);
}

/* Records the divergence of the tensor whose per-rank lines are recs[r]
 * (NULL for ranks without a file). Mirrors divergence.c's localise, from
 * digests alone. */
static vqc_status add_finding(const vqc_trace_set *s, int64_t step,
                              const line_rec *const *recs, json_t *also,
                              vqc_findings *out) {
  const int n = s->nranks;
  int *group_of = malloc((size_t)n * sizeof *group_of);
  int *outliers = malloc((size_t)n * sizeof *outliers);
  if (group_of == NULL || outliers == NULL) {
    free(group_of);
    free(outliers);
    return vqc_error(VQC_ENOMEM, "trace compare: no memory for %d ranks", n);
  }
  /* Groups of equal (digest, dtype, shape), numbered by their lowest rank. */
  int ngroups = 0;
  for (int r = 0; r < n; r++) {
    group_of[r] = -1;
    if (recs[r] == NULL) continue;
    for (int q = 0; q < r && group_of[r] < 0; q++)
      if (recs[q] && same_state(&recs[q]->r, &recs[r]->r))
        group_of[r] = group_of[q];
    if (group_of[r] < 0) group_of[r] = ngroups++;
  }
  /* A majority is a group strictly larger than every other. Without one
   * (3 ranks, 3 digests; any 1-1 or 2-2 split) no rank is the odd one out:
   * every rank is named, and group 0 (the lowest rank's) only anchors the
   * wording of the message. */
  int ref = 0, best = 0, nbest = 0;
  for (int g = 0; g < ngroups; g++) {
    int count = 0;
    for (int r = 0; r < n; r++) count += group_of[r] == g;
    if (count > best) {
      best = count;
      ref = g;
      nbest = 1;
    } else if (count == best) {
      nbest++;
    }
  }
  const bool majority = nbest == 1;
  if (!majority) ref = 0;
  int nout = 0, ref_rank = -1;
  for (int r = 0; r < n; r++) {
    if (group_of[r] < 0) continue;
    if (group_of[r] != ref) outliers[nout++] = r;
    else if (ref_rank < 0) ref_rank = r;
  }
  if (nout == 0 || ref_rank < 0) { /* callers pass a tensor that differs */
    free(group_of);
    free(outliers);
    return vqc_error(VQC_EINTERNAL, "trace compare: no outlier to report");
  }
  const vqc_trace_record *rr = &recs[ref_rank]->r;
  const vqc_trace_record *ro = &recs[outliers[0]]->r;

  char who[200], what[400];
  if (majority) {
    snprintf(who, sizeof who, "%s", nout == 1 ? "rank " : "ranks ");
    rank_list(outliers, nout, who + strlen(who), sizeof who - strlen(who));
  } else {
    vqc_no_majority_text(group_of, n, ngroups, who, sizeof who);
  }
  if (!same_layout(ro, rr)) {
    char so[96], sr[96];
    shape_str(ro, so, sizeof so);
    shape_str(rr, sr, sizeof sr);
    snprintf(what, sizeof what, "rank %d has %s %s, rank %d has %s %s",
             outliers[0], ro->dtype, so, ref_rank, rr->dtype, sr);
  } else {
    snprintf(what, sizeof what, "digest %016" PRIx64 " on rank %d vs %016"
             PRIx64 " on rank %d", ro->digest, outliers[0], rr->digest,
             ref_rank);
  }
  /* Within a replica group (trace.h "group"), the finding says so: the
   * other ranks hold other shards and were rightly not compared. */
  char scope[VQC_TRACE_SHARD_MAX + 1100] = "";
  int *grp = NULL, ngrp = 0;
  if (rr->group[0]) {
    grp = malloc(VQC_TRACE_GROUP_MAX_RANKS * sizeof *grp);
    ngrp = grp ? vqc_trace_group_ranks(rr->group, grp,
                                       VQC_TRACE_GROUP_MAX_RANKS)
               : 0;
    char ranges[1024];
    vqc_rank_ranges_text(grp, ngrp > 0 ? ngrp : 0, ranges, sizeof ranges);
    if (rr->shard[0])
      snprintf(scope, sizeof scope, " (shard '%s', replica group {%s})",
               rr->shard, ranges);
    else
      snprintf(scope, sizeof scope, " (replica group {%s})", ranges);
  } else if (rr->shard[0]) {
    snprintf(scope, sizeof scope, " (shard '%s')", rr->shard);
  }
  vqc_finding f;
  if (majority)
    vqc_finding_init(&f, VQC_FINDING_DIVERGENCE, step,
                     "tensor '%s'%s differs on %s from rank %d at step %"
                     PRId64 " (%s; from traces, so digests only: no "
                     "element-level detail)", rr->tensor, scope, who,
                     ref_rank, step, what);
  else
    vqc_finding_init(&f, VQC_FINDING_DIVERGENCE, step,
                     "tensor '%s'%s differs across ranks at step %" PRId64
                     " with no majority: %s, so no rank can be told to be the "
                     "wrong one (%s; from traces, so digests only: no "
                     "element-level detail)", rr->tensor, scope, step, who,
                     what);
  snprintf(f.tensor, sizeof f.tensor, "%.127s", rr->tensor); /* may cut */
  if (majority) {
    for (int i = 0; i < nout; i++) vqc_finding_add_rank(&f, outliers[i]);
  } else {
    for (int r = 0; r < n; r++)
      if (group_of[r] >= 0) vqc_finding_add_rank(&f, r);
  }

  json_t *det = f.detail;
  json_object_set_new(det, "source", json_string("traces"));
  json_object_set_new(det, "element_detail",
                      json_string("not available: traces hold digests only, "
                                  "so the first differing index, the values "
                                  "there and the max abs/rel/ULP difference "
                                  "are unknown (a vqcheck run of the same "
                                  "program reports them)"));
  json_object_set_new(det, "digest_algo", json_string(rr->digest_algo));
  json_object_set_new(det, "dtype", json_string(rr->dtype));
  json_object_set_new(det, "shape", shape_json(rr));
  /* numel only when the product fits (foreign writers may lie about it). */
  int64_t numel = 1;
  bool fits = true;
  for (int d = 0; d < rr->ndim && fits; d++) {
    if (rr->shape[d] != 0 && numel > INT64_MAX / rr->shape[d]) fits = false;
    else numel *= rr->shape[d];
  }
  if (fits) json_object_set_new(det, "numel", json_integer(numel));
  json_object_set_new(det, "majority", json_boolean(majority));
  if (rr->group[0]) {
    json_t *g = json_array();
    for (int i = 0; i < ngrp && i < VQC_TRACE_GROUP_MAX_RANKS; i++)
      json_array_append_new(g, json_integer(grp[i]));
    json_object_set_new(det, "group", g);
  }
  free(grp);
  if (rr->shard[0]) json_object_set_new(det, "shard", json_string(rr->shard));
  /* Without a majority the lowest rank only anchors the wording ("base",
   * as the live checker calls it): it is no reference. */
  json_object_set_new(det, majority ? "reference_rank" : "base_rank",
                      json_integer(ref_rank));

  json_t *groups = json_array();
  for (int g = 0; g < ngroups; g++) {
    json_t *ranks = json_array();
    uint64_t digest = 0;
    for (int r = 0; r < n; r++) {
      if (group_of[r] != g) continue;
      digest = recs[r]->r.digest;
      json_array_append_new(ranks, json_integer(r));
    }
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, digest);
    json_array_append_new(groups, json_pack("{s:s,s:o}", "digest", hex,
                                            "ranks", ranks));
  }
  json_object_set_new(det, "groups", groups);

  bool layouts_differ = false;
  for (int r = 0; r < n; r++)
    if (recs[r] && !same_layout(&recs[r]->r, rr)) layouts_differ = true;
  if (layouts_differ) {
    json_t *l = json_array();
    for (int r = 0; r < n; r++) {
      if (recs[r] == NULL) continue;
      json_array_append_new(l, json_pack("{s:i,s:s,s:o}", "rank", r, "dtype",
                                         recs[r]->r.dtype, "shape",
                                         shape_json(&recs[r]->r)));
    }
    json_object_set_new(det, "layouts", l);
  }
  json_object_set(det, "also_differing", also);
  /* Where to look: the reference line (without a majority: the lowest
   * rank's) and each other rank's (at most 64). */
  json_t *lines = json_array();
  json_array_append_new(lines, where_json(&s->ranks[ref_rank], ref_rank,
                                          recs[ref_rank]));
  for (int i = 0; i < nout && i < VQC_FINDING_MAX_RANKS; i++)
    json_array_append_new(lines, where_json(&s->ranks[outliers[i]],
                                            outliers[i], recs[outliers[i]]));
  json_object_set_new(det, "trace_lines", lines);

  free(group_of);
  free(outliers);
  vqc_status st = vqc_findings_add(out, &f);
  if (st != VQC_OK) json_decref(f.detail); /* the list did not take it */
  return st;
}

/* ---- pieces without a replica (trace_compare.h): counted and named */

/* An open-addressing set of 64-bit hashes of (tensor, shard), load at most
 * 1/2; 0 marks an empty slot. Holds at most VQC_TRACE_NO_REPLICA_COUNT_MAX
 * hashes (2^21 slots, 16 MiB). Two pieces whose hashes collide (FNV-1a,
 * 1 in 2^64 a pair) count once: a count in a report, never a verdict. */
typedef struct hash_set {
  uint64_t *slots; /* (cap) owned; cap 0 or a power of two */
  size_t cap, n;
} hash_set;

static uint64_t piece_hash(const char *tensor, const char *shard) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const char *p = tensor; *p; p++)
    h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
  h = h * 0x100000001b3ULL; /* a NUL byte (h ^ 0): no name holds one */
  for (const char *p = shard; *p; p++)
    h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
  return h ? h : 1; /* 0 is the empty slot */
}

static void hash_set_put(uint64_t *slots, size_t cap, uint64_t h) {
  size_t i = (size_t)h & (cap - 1);
  while (slots[i] != 0 && slots[i] != h) i = (i + 1) & (cap - 1);
  slots[i] = h;
}

/* Adds h. *added: it was not there. *full: it was not there and the set
 * is at its cap (not added). */
static vqc_status hash_set_add(hash_set *hs, uint64_t h, bool *added,
                               bool *full) {
  *added = *full = false;
  if (hs->cap > 0) {
    size_t i = (size_t)h & (hs->cap - 1);
    while (hs->slots[i] != 0) {
      if (hs->slots[i] == h) return VQC_OK;
      i = (i + 1) & (hs->cap - 1);
    }
  }
  if ((int64_t)hs->n >= VQC_TRACE_NO_REPLICA_COUNT_MAX) {
    *full = true;
    return VQC_OK;
  }
  if (2 * (hs->n + 1) > hs->cap) { /* grow: double, rehash */
    size_t cap = hs->cap ? 2 * hs->cap : 256;
    uint64_t *g = calloc(cap, sizeof *g);
    if (g == NULL)
      return vqc_error(VQC_ENOMEM, "trace compare: no memory for %zu "
                       "tensors without a replica", hs->n + 1);
    for (size_t i = 0; i < hs->cap; i++)
      if (hs->slots[i] != 0) hash_set_put(g, cap, hs->slots[i]);
    free(hs->slots);
    hs->slots = g;
    hs->cap = cap;
  }
  hash_set_put(hs->slots, hs->cap, h);
  hs->n++;
  *added = true;
  return VQC_OK;
}

/* Line r has no replica: counted, its piece counted once, and listed
 * while fewer than VQC_TRACE_NO_REPLICA_LISTED are. */
static vqc_status note_no_replica(hash_set *seen,
                                  vqc_trace_compare_result *res,
                                  const vqc_trace_record *r) {
  res->no_replica++;
  bool added, full;
  VQC_TRY(hash_set_add(seen, piece_hash(r->tensor, r->shard), &added, &full));
  if (full) res->no_replica_tensors_capped = true;
  if (!added) return VQC_OK;
  res->no_replica_tensors++;
  if (res->nno_replica_listed >= VQC_TRACE_NO_REPLICA_LISTED) return VQC_OK;
  if (res->no_replica_listed == NULL) {
    res->no_replica_listed = calloc(VQC_TRACE_NO_REPLICA_LISTED,
                                    sizeof *res->no_replica_listed);
    if (res->no_replica_listed == NULL)
      return vqc_error(VQC_ENOMEM, "trace compare: no memory");
  }
  vqc_trace_piece *p = &res->no_replica_listed[res->nno_replica_listed++];
  memcpy(p->tensor, r->tensor, sizeof p->tensor);
  memcpy(p->shard, r->shard, sizeof p->shard);
  return VQC_OK;
}

/* What one step's comparison needs besides the set. */
typedef struct compare_state {
  const line_rec **cur;    /* (nranks) this tensor's line per rank */
  const line_rec **first;  /* (nranks) the first differing tensor's lines */
  size_t *matched;         /* (nranks) lines of the step that were compared */
  int *members;            /* (VQC_TRACE_GROUP_MAX_RANKS) a group's ranks */
  name_set reported;       /* "tensor\x1fgroup\x1fshard" of every finding */
  hash_set no_replica;     /* the pieces without a replica seen so far */
  bool group_warned;       /* ranks disagreeing on a group were warned of */
} compare_state;

/* Whether b is the same tensor as a in the eyes of replica groups: the same
 * name (find_tensor), group and shard. */
static bool same_key(const line_rec *a, const line_rec *b) {
  return strcmp(a->r.group, b->r.group) == 0 &&
         strcmp(a->r.shard, b->r.shard) == 0;
}

/* The ranks that must hold equal bits of a's tensor, and their lines, into
 * cs->cur (NULL for the other ranks); *complete: every one of them wrote
 * it (with the same group and shard). Without a group: every rank that has
 * a file. Marks each line found as handled. *nmembers: the group's size. */
static void gather_group(vqc_trace_set *s, compare_state *cs,
                         const line_rec *a, const char *apath, int64_t step,
                         bool *complete, int *nmembers, json_t *warnings) {
  const int n = s->nranks;
  for (int r = 0; r < n; r++) cs->cur[r] = NULL;
  *complete = true;
  int m = 0;
  if (a->r.group[0]) {
    m = vqc_trace_group_ranks(a->r.group, cs->members,
                              VQC_TRACE_GROUP_MAX_RANKS);
  } else {
    for (int r = 0; r < n; r++)
      if (s->ranks[r].present) cs->members[m++] = r;
  }
  *nmembers = m;
  for (int i = 0; i < m; i++) {
    const int q = cs->members[i];
    if (q >= n || !s->ranks[q].present) {
      *complete = false;
      continue;
    }
    line_rec *b = (line_rec *)find_tensor(&s->ranks[q], a->r.tensor);
    if (b == NULL) {
      *complete = false;
      continue;
    }
    if (!same_key(a, b)) {
      *complete = false;
      if (!cs->group_warned && strcmp(a->r.group, b->r.group) != 0) {
        cs->group_warned = true;
        warn(warnings, "%s:%ld: tensor '%s' of step %" PRId64 " names group "
             "{%s} but %s:%ld names {%s}: the ranks of a replica group must "
             "write the same group; not compared",
             s->ranks[q].path, b->line, b->r.tensor, step,
             b->r.group[0] ? b->r.group : "every rank", apath, a->line,
             a->r.group[0] ? a->r.group : "every rank");
      }
      continue;
    }
    b->handled = true;
    cs->cur[q] = b;
  }
}

static vqc_status grow_steps(vqc_trace_compare_result *res, int64_t *cap) {
  if (res->nsteps < *cap) return VQC_OK;
  int64_t ncap = *cap ? 2 * *cap : 64;
  vqc_trace_step *g = realloc(res->steps, (size_t)ncap * sizeof *g);
  if (g == NULL) return vqc_error(VQC_ENOMEM, "trace compare: no memory for "
                                  "%" PRId64 " steps", ncap);
  res->steps = g;
  *cap = ncap;
  return VQC_OK;
}

static vqc_status compare_step(vqc_trace_set *s, compare_state *cs,
                               int64_t step, vqc_findings *out,
                               vqc_trace_compare_result *res,
                               vqc_trace_step *summary) {
  const int n = s->nranks;
  summary->step = step;
  summary->compared = summary->differing = 0;
  for (int r = 0; r < n; r++) cs->matched[r] = 0;
  json_t *also = json_array();
  if (also == NULL) return vqc_error(VQC_ENOMEM, "trace compare: no memory");
  bool have_first = false;
  vqc_status st = VQC_OK;
  /* Every (tensor, group, shard) once, in the order of the lowest rank
   * that wrote it: a tensor is compared among its group's ranks (the whole
   * world without a group) when each of them wrote it. */
  for (int r = 0; r < n && st == VQC_OK; r++) {
    rank_file *rf = &s->ranks[r];
    if (!rf->present) continue;
    for (size_t i = 0; i < rf->n && st == VQC_OK; i++) {
      line_rec *a = &rf->group[i];
      if (a->handled) continue;
      a->handled = true;
      bool complete;
      int members;
      gather_group(s, cs, a, rf->path, step, &complete, &members,
                   res->warnings);
      if (!complete) continue;
      for (int q = 0; q < n; q++)
        if (cs->cur[q]) ((line_rec *)cs->cur[q])->compared = true;
      if (members < 2) { /* nothing to compare it with */
        /* Its group is its own rank: no replica. Without a group it is a
         * world of one trace (trace_compare.h): not counted. */
        if (a->r.group[0]) st = note_no_replica(&cs->no_replica, res, &a->r);
        continue;
      }
      bool differ = false;
      for (int q = 0; q < n; q++) {
        const line_rec *b = cs->cur[q];
        if (b == NULL) continue;
        cs->matched[q]++;
        if (strcmp(b->r.digest_algo, a->r.digest_algo) != 0) {
          st = vqc_error(VQC_EPARSE, "%s:%ld: tensor '%s' of step %" PRId64
                         " has digest_algo '%s' but %s:%ld has '%s': digests "
                         "are comparable only under one algorithm",
                         s->ranks[q].path, b->line, b->r.tensor, step,
                         b->r.digest_algo, rf->path, a->line,
                         a->r.digest_algo);
          break;
        }
        if (!same_state(&b->r, &a->r)) differ = true;
      }
      if (st != VQC_OK) break;
      summary->compared++;
      if (!differ) continue;
      summary->differing++;
      char key[VQC_TRACE_NAME_MAX + VQC_TRACE_GROUP_MAX +
               VQC_TRACE_SHARD_MAX + 4];
      snprintf(key, sizeof key, "%s\x1f%s\x1f%s", a->r.tensor, a->r.group,
               a->r.shard);
      if (name_set_has(&cs->reported, key)) continue;
      st = name_set_add(&cs->reported, key);
      if (!have_first) {
        have_first = true;
        memcpy(cs->first, cs->cur, (size_t)n * sizeof *cs->first);
      } else {
        json_array_append_new(also, json_string(a->r.tensor));
      }
    }
  }
  if (st == VQC_OK && have_first) {
    st = add_finding(s, step, cs->first, also, out);
    if (st == VQC_OK) res->findings++;
  }
  json_decref(also);
  res->digests_compared += summary->compared;
  summary->findings = res->findings;

  /* Lines this step that were not compared, per rank: the first in file
   * order is named in the warning. */
  for (int r = 0; r < n && st == VQC_OK; r++) {
    rank_file *rf = &s->ranks[r];
    if (!rf->present) continue;
    int64_t missed = 0;
    for (size_t i = 0; i < rf->n; i++) {
      if (rf->group[i].compared) continue;
      if (rf->not_compared == 0 && missed == 0)
        rf->first_not_compared = rf->group[i];
      missed++;
    }
    rf->not_compared += missed;
    res->lines_not_compared += missed;
  }
  return st;
}

/* How far a rank's trace got: its last step, -1 for a file without a line,
 * -2 for a rank without a file. */
static int64_t reach_of(const rank_file *rf) {
  if (!rf->present) return -2;
  return rf->lines == 0 ? -1 : rf->last_step;
}

/* "rank 2 at step 4" / "rank 3 before its first step (empty trace)" /
 * "rank 5 with no trace file" into buf. */
static void reach_text(int rank, int64_t reach, char *buf, size_t n) {
  if (reach >= 0)
    snprintf(buf, n, "rank %d at step %" PRId64, rank, reach);
  else if (reach == -1)
    snprintf(buf, n, "rank %d before its first step (empty trace)", rank);
  else
    snprintf(buf, n, "rank %d with no trace file", rank);
}

/* The rank_failure finding for traces that stop early (see
 * trace_compare.h): ranks whose trace reaches a lower step than another
 * rank's, an empty trace counting as no step and a missing file as less
 * than that; with require_comparison, also traces in which no rank reached
 * a step at all. *added: whether one was added. */
static vqc_status stopped_early(const vqc_trace_set *s, vqc_findings *out,
                                bool *added) {
  *added = false;
  if (s->nfiles == 0) return VQC_OK;
  int64_t max_reach = -2, min_reach = INT64_MAX;
  for (int r = 0; r < s->nranks; r++) {
    int64_t x = reach_of(&s->ranks[r]);
    if (x > max_reach) max_reach = x;
    if (x < min_reach) min_reach = x;
  }
  const bool none_reached = max_reach < 0 && min_reach == max_reach;
  if (min_reach == max_reach && !(none_reached && s->require_comparison))
    return VQC_OK;

  /* The ranks named: those below the furthest, or every rank when none got
   * anywhere. */
  char list[200], where[400];
  size_t lused = 0, wused = 0;
  int nearly = 0;
  list[0] = where[0] = '\0';
  vqc_finding f;
  memset(&f, 0, sizeof f);
  json_t *early = json_array(), *last = json_array();
  if (early == NULL || last == NULL) {
    json_decref(early);
    json_decref(last);
    return vqc_error(VQC_ENOMEM, "trace compare: no memory");
  }
  int64_t first_missing = INT64_MAX; /* the first step an early rank lacks */
  for (int r = 0; r < s->nranks; r++) {
    const rank_file *rf = &s->ranks[r];
    const int64_t x = reach_of(rf);
    json_array_append_new(last, x >= 0 ? json_integer(x) : json_null());
    if (!none_reached && x == max_reach) continue;
    if (x + 1 < first_missing) first_missing = x < 0 ? 0 : x + 1;
    json_t *o = json_pack("{s:i,s:o,s:s}", "rank", r, "last_step",
                          x >= 0 ? json_integer(x) : json_null(), "trace",
                          x >= 0 ? "ends early" : x == -1 ? "empty"
                                                          : "missing");
    json_t *path = vqc_json_text(rf->path, strlen(rf->path));
    if (x >= -1 && path) json_object_set_new(o, "path", path);
    else json_decref(path);
    json_array_append_new(early, o);
    if (nearly < 8) {
      char one[96];
      reach_text(r, x, one, sizeof one);
      if (lused < sizeof list)
        lused += (size_t)snprintf(list + lused, sizeof list - lused, "%s%d",
                                  nearly ? ", " : "", r);
      if (wused < sizeof where)
        wused += (size_t)snprintf(where + wused, sizeof where - wused, "%s%s",
                                  nearly ? ", " : "", one);
    } else if (nearly == 8) {
      if (lused < sizeof list)
        lused += (size_t)snprintf(list + lused, sizeof list - lused, ", ...");
      if (wused < sizeof where)
        wused += (size_t)snprintf(where + wused, sizeof where - wused,
                                  ", ...");
    }
    nearly++;
  }
  if (none_reached) {
    vqc_finding_init(&f, VQC_FINDING_RANK_FAILURE, 0,
                     "no trace holds a step (rank%s %s: every trace is "
                     "empty): every rank died, hung or was killed before "
                     "its first check, so nothing was compared",
                     nearly > 1 ? "s" : "", list);
  } else {
    const bool one = nearly == 1;
    char others[96];
    if (max_reach >= 0)
      snprintf(others, sizeof others, "the other ranks reach step %" PRId64,
               max_reach);
    else
      snprintf(others, sizeof others, "the other ranks' traces exist but "
               "hold no step");
    vqc_finding_init(&f, VQC_FINDING_RANK_FAILURE, first_missing,
                     "%s %s stop%s early: %s (%s): %s died, hung or %s "
                     "killed before the others stopped",
                     one ? "the trace of rank" : "traces of ranks", list,
                     one ? "s" : "", where, others,
                     one ? "that rank" : "those ranks",
                     one ? "was" : "were");
  }
  for (int r = 0; r < s->nranks; r++)
    if (none_reached || reach_of(&s->ranks[r]) != max_reach)
      vqc_finding_add_rank(&f, r);
  json_object_set_new(f.detail, "source", json_string("traces"));
  json_object_set_new(f.detail, "stopped_early", early);
  json_object_set_new(f.detail, "last_step", last);
  json_object_set_new(f.detail, "furthest_step",
                      max_reach >= 0 ? json_integer(max_reach) : json_null());
  vqc_status st = vqc_findings_add(out, &f);
  if (st != VQC_OK) json_decref(f.detail); /* the list did not take it */
  else *added = true;
  return st;
}

/* Warnings about what was not compared, once everything was read (ranks
 * that stop early are a finding, not a warning: stopped_early). */
static void end_warnings(const vqc_trace_set *s, json_t *warnings) {
  int empty = 0;
  for (int r = 0; r < s->nranks; r++) empty += s->ranks[r].present &&
                                              s->ranks[r].lines == 0;
  if (s->nfiles == 1)
    warn(warnings, "%s: one rank's trace only: there is nothing to compare "
         "it with", s->dir);
  if (empty > 0 && empty == s->nfiles) {
    warn(warnings, "%s: no trace has a line (did the job stop before its "
         "first check?): nothing was compared", s->dir);
    return;
  }
  for (int r = 0; r < s->nranks; r++) {
    const rank_file *rf = &s->ranks[r];
    if (!rf->present || rf->not_compared == 0) continue;
    warn(warnings, "%s: %" PRId64 " line%s not compared because some rank "
         "has no line for the same step and tensor (first: line %ld, step %"
         PRId64 ", tensor '%s')", rf->path, rf->not_compared,
         rf->not_compared > 1 ? "s" : "", rf->first_not_compared.line,
         rf->first_not_compared.r.step, rf->first_not_compared.r.tensor);
  }
}

/* res->program: the lowest rank's program among the ranks that name one;
 * a warning names the first rank that names another. */
static void pick_program(const vqc_trace_set *s, vqc_trace_compare_result *res,
                         json_t *warnings) {
  int from = -1;
  for (int r = 0; r < s->nranks; r++) {
    const rank_file *rf = &s->ranks[r];
    if (!rf->present || rf->program[0] == '\0') continue;
    if (from < 0) {
      from = r;
      memcpy(res->program, rf->program, sizeof res->program);
    } else if (strcmp(rf->program, res->program) != 0) {
      const rank_file *kept = &s->ranks[from];
      warn(warnings, "%s:%ld: field 'program' is '%.200s' but %s:%ld names "
           "'%.200s': were these traces written by different programs? "
           "The reports name rank %d's", rf->path, rf->program_line,
           rf->program, kept->path, kept->program_line, kept->program, from);
      return;
    }
  }
}

/* res->rank_last_step: how far each rank's trace got (-1: no step). */
static vqc_status fill_last_steps(const vqc_trace_set *s,
                                  vqc_trace_compare_result *res) {
  if (s->nranks == 0) return VQC_OK;
  res->rank_last_step = malloc((size_t)s->nranks * sizeof *res->rank_last_step);
  if (res->rank_last_step == NULL)
    return vqc_error(VQC_ENOMEM, "trace compare: no memory for %d ranks",
                     s->nranks);
  res->nranks = s->nranks;
  for (int r = 0; r < s->nranks; r++) {
    const int64_t x = reach_of(&s->ranks[r]);
    res->rank_last_step[r] = x >= 0 ? x : -1;
  }
  return VQC_OK;
}

/* With require_comparison: traces whose ranks all reach the same step but
 * share no (step, tensor) compared nothing, and that is an error, not a
 * clean result. */
static vqc_status check_something_compared(const vqc_trace_set *s,
                                           const vqc_trace_compare_result
                                               *res) {
  if (!s->require_comparison || res->digests_compared > 0) return VQC_OK;
  for (int r = 0; r < s->nranks; r++) {
    const rank_file *rf = &s->ranks[r];
    if (!rf->present || rf->not_compared == 0) continue;
    return vqc_error(VQC_EINVAL, "%s: nothing was compared: no (step, "
                     "tensor) is in the trace of every rank (e.g. %s:%ld, "
                     "step %" PRId64 ", tensor '%s', is missing from some "
                     "rank's trace): do the ranks write the same tensor "
                     "names and steps?", s->dir, rf->path,
                     rf->first_not_compared.line,
                     rf->first_not_compared.r.step,
                     rf->first_not_compared.r.tensor);
  }
  if (res->no_replica > 0)
    return vqc_error(VQC_EINVAL, "%s: nothing was compared: every tensor's "
                     "replica group (its lines' \"group\") is one rank, so "
                     "no two ranks must hold equal bits (a fully sharded "
                     "job with no replica has nothing for compare to check)",
                     s->dir);
  return vqc_error(VQC_EINVAL, "%s: nothing was compared (no (step, tensor) "
                   "is in the trace of every rank)", s->dir);
}

vqc_status vqc_trace_set_compare(vqc_trace_set *s, const char *copy_dir,
                                 vqc_findings *out,
                                 vqc_trace_compare_result *res) {
  if (res) memset(res, 0, sizeof *res);
  if (s == NULL || out == NULL || res == NULL)
    return vqc_error(VQC_EINVAL, "trace compare: NULL argument");
  if (s->compared)
    return vqc_error(VQC_EINVAL, "trace compare: a set is compared once");
  s->compared = true;
  res->warnings = json_deep_copy(s->warnings);
  if (res->warnings == NULL)
    return vqc_error(VQC_ENOMEM, "trace compare: no memory");
  const int n = s->nranks;
  compare_state cs;
  memset(&cs, 0, sizeof cs);
  vqc_status st = VQC_OK;
  if (n > 0) {
    cs.cur = calloc((size_t)n, sizeof *cs.cur);
    cs.first = calloc((size_t)n, sizeof *cs.first);
    cs.matched = calloc((size_t)n, sizeof *cs.matched);
    cs.members = calloc(VQC_TRACE_GROUP_MAX_RANKS, sizeof *cs.members);
    if (!cs.cur || !cs.first || !cs.matched || !cs.members) {
      st = vqc_error(VQC_ENOMEM, "trace compare: no memory for %d ranks", n);
      goto done;
    }
  }

  /* Copies go to temporary names first: a bad line later in a file must
   * not leave a run directory holding part of a trace. */
  for (int r = 0; r < n && copy_dir; r++) {
    rank_file *rf = &s->ranks[r];
    if (!rf->present) continue;
    if ((st = vqc_trace_path(copy_dir, r, rf->copy_path,
                             sizeof rf->copy_path)) != VQC_OK)
      goto done;
    snprintf(rf->copy_tmp, sizeof rf->copy_tmp, "%s.tmp.%d", rf->copy_path,
             (int)getpid());
    if ((st = vqc_trace_writer_open(rf->copy_tmp, &rf->copy)) != VQC_OK)
      goto done;
  }

  for (int r = 0; r < n && st == VQC_OK; r++)
    if (s->ranks[r].present) st = read_next(&s->ranks[r], r, res->warnings);
  int64_t cap = 0;
  while (st == VQC_OK) {
    bool any = false;
    int64_t step = 0;
    for (int r = 0; r < n; r++) {
      const rank_file *rf = &s->ranks[r];
      if (!rf->has_next) continue;
      if (!any || rf->next.r.step < step) step = rf->next.r.step;
      any = true;
    }
    if (!any) break;
    for (int r = 0; r < n && st == VQC_OK; r++)
      if (s->ranks[r].present)
        st = read_group(&s->ranks[r], r, step, res->warnings);
    if (st == VQC_OK) st = grow_steps(res, &cap);
    if (st == VQC_OK)
      st = compare_step(s, &cs, step, out, res, &res->steps[res->nsteps]);
    if (st == VQC_OK) res->nsteps++;
  }
  for (int r = 0; r < n; r++) res->lines_read += s->ranks[r].lines;
  if (st == VQC_OK) {
    bool added = false;
    st = stopped_early(s, out, &added);
    if (added) res->rank_failures++;
    /* Uneven ends already explain what was not compared. */
    if (st == VQC_OK && !added) st = check_something_compared(s, res);
  }
  if (st == VQC_OK) end_warnings(s, res->warnings);
  if (st == VQC_OK) pick_program(s, res, res->warnings);
  if (st == VQC_OK) st = fill_last_steps(s, res);

  /* Copies: close and rename every one (the others are removed below). */
  for (int r = 0; r < n && st == VQC_OK && copy_dir; r++) {
    rank_file *rf = &s->ranks[r];
    if (!rf->copy) continue;
    st = vqc_trace_flush(rf->copy);
    if (st != VQC_OK) break;
    vqc_trace_writer_close(rf->copy);
    rf->copy = NULL;
    if (rename(rf->copy_tmp, rf->copy_path) != 0) {
      st = vqc_error(VQC_EIO, "cannot rename %s to %s: %s", rf->copy_tmp,
                     rf->copy_path, strerror(errno));
      unlink(rf->copy_tmp);
    }
  }
done:
  for (int r = 0; r < n; r++) close_copy(&s->ranks[r], false);
  free(cs.cur);
  free(cs.first);
  free(cs.matched);
  free(cs.members);
  name_set_free(&cs.reported);
  free(cs.no_replica.slots);
  return st;
}

void vqc_trace_compare_result_free(vqc_trace_compare_result *r) {
  if (r == NULL) return;
  free(r->steps);
  free(r->rank_last_step);
  free(r->no_replica_listed);
  json_decref(r->warnings);
  memset(r, 0, sizeof *r);
}

json_t *vqc_trace_no_replica_json(const vqc_trace_compare_result *r) {
  json_t *a = json_array();
  for (int i = 0; a && i < r->nno_replica_listed; i++) {
    const vqc_trace_piece *p = &r->no_replica_listed[i];
    json_array_append_new(
        a, json_pack("{s:o,s:o}", "tensor",
                     vqc_json_text(p->tensor, strlen(p->tensor)), "shard",
                     vqc_json_text(p->shard, strlen(p->shard))));
  }
  return a;
}
