/* run_data.c: what the figures are made from, beyond run.json:
 *
 *   the digest grid   from rank-<r>.trace.jsonl: for each step and rank, how
 *                     many tensors' digests differ from the reference
 *                     rank's (the heatmap and the divergence plot), and
 *                     per step how many tensors split the ranks with no
 *                     majority (where the reference is no more right than
 *                     anyone, so no rank is shown as agreeing);
 *   the timeline      from rank-<r>.ledger.jsonl: every rank's record of a
 *                     window of sequence numbers around the collective the
 *                     ranks got stuck in (the collective timeline).
 *
 * Traces are streamed line by line into compact entries (step, name hash,
 * value hash) rather than kept as parsed records: a long run on many ranks
 * has millions of lines. The value hash folds dtype, shape, algorithm and
 * digest, so two entries agree exactly when all of those agree (up to a
 * 64-bit hash collision, which would hide one cell of a picture, not a
 * finding: the findings come from the checkers). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "checker_set.h" /* vqc_checker_reports */
#include "ledger_analysis.h"
#include "report_internal.h"
#include "jsonl.h"
#include "ledger_record.h"
#include "trace.h"

/* Timeline window: this many sequence numbers before the stuck one, and
 * after it (the ranks that went on show where they went). */
#define TL_BEFORE 8
#define TL_AFTER 3

/* ---- hashing (for comparing, never stored in a report) */

static uint64_t fnv1a(const void *data, size_t n, uint64_t h) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

static uint64_t str_hash(const char *s, uint64_t h) {
  return fnv1a(s, strlen(s) + 1, h); /* the NUL separates fields */
}

#define FNV_OFFSET 0xcbf29ce484222325ULL

/* ---- traces */

typedef struct trace_entry {
  int64_t step;
  uint64_t key;    /* hash of the tensor name (and its group and shard) */
  uint64_t value;  /* hash of dtype, shape, algorithm and digest */
  int group_low;   /* a replica group's lowest rank (trace.h "group"), the
                      reference its other ranks are drawn against; -1: no
                      group (the whole world, drawn against the reference
                      rank) */
  int group_size;  /* its ranks; 0: no group */
} trace_entry;

typedef struct trace_entries {
  trace_entry *items;
  size_t n, cap;
} trace_entries;

static int entry_cmp(const void *a, const void *b) {
  const trace_entry *x = a, *y = b;
  if (x->step != y->step) return x->step < y->step ? -1 : 1;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  if (x->value != y->value) return x->value < y->value ? -1 : 1;
  return 0;
}

/* What reading one trace works on. */
typedef struct trace_reading {
  int rank;
  trace_entries *out;
} trace_reading;

/* One line of a trace (jsonl.h) into rd->out. */
static vqc_status trace_line(const vqc_jsonl_line *l, void *user) {
  trace_reading *rd = user;
  trace_entries *out = rd->out;
  vqc_trace_record rec;
  vqc_status s = l->json ? vqc_trace_parse_json(l->json, l->path, l->lineno,
                                                &rec)
                         : vqc_error(VQC_EPARSE, "%s:%ld: not JSON (column "
                                     "%d): %s", l->path, l->lineno,
                                     l->err->column, l->err->text);
  if (s != VQC_OK) {
    /* A line comes without its newline only at the end of the file: the
     * writer was killed mid-line. Every step before it stands. */
    if (l->torn) {
      vqc_clear_error();
      s = VQC_OK;
    }
    return s;
  }
  if (rec.rank != rd->rank)
    return vqc_error(VQC_EPARSE, "%s:%ld: field 'rank': %d in the trace of "
                     "rank %d", l->path, l->lineno, rec.rank, rd->rank);
  if (out->n == out->cap) {
    size_t ncap = out->cap ? 2 * out->cap : 256;
    trace_entry *g = realloc(out->items, ncap * sizeof *g);
    if (!g)
      return vqc_error(VQC_ENOMEM, "no memory for the trace %s", l->path);
    out->items = g;
    out->cap = ncap;
  }
  uint64_t v = str_hash(rec.dtype, FNV_OFFSET);
  v = fnv1a(&rec.ndim, sizeof rec.ndim, v);
  v = fnv1a(rec.shape, (size_t)rec.ndim * sizeof rec.shape[0], v);
  v = str_hash(rec.digest_algo, v);
  v = fnv1a(&rec.digest, sizeof rec.digest, v);
  uint64_t key = str_hash(rec.tensor, FNV_OFFSET);
  int low = -1;
  if (rec.group[0]) { /* another group or shard is another tensor */
    key = str_hash(rec.shard, str_hash(rec.group, key));
    low = atoi(rec.group); /* canonical text starts at the lowest rank */
  }
  out->items[out->n++] =
      (trace_entry){rec.step, key, v, low, rec.group[0] ? rec.group_size : 0};
  return VQC_OK;
}

/* Reads rank `rank`'s trace at path into *out (sorted by step, then name).
 * *present = false (and VQC_OK) when the file does not exist. */
static vqc_status read_trace(const char *path, int rank, trace_entries *out,
                             bool *present) {
  trace_reading rd = {rank, out};
  /* Lines longer than VQC_TRACE_LINE_MAX are an error, found without
   * holding them (jsonl.h); a cut-off last line (a NUL, or not JSON) is
   * what a crash leaves: skipped. */
  const vqc_jsonl_opts opts = {VQC_JSONL_SKIP_TORN, JSON_REJECT_DUPLICATES,
                               NULL, NULL};
  vqc_status s = vqc_jsonl_read(path, &opts, trace_line, &rd, present);
  if (s == VQC_OK && out->n > 1)
    qsort(out->items, out->n, sizeof *out->items, entry_cmp);
  return s;
}

/* Entries of `step` in e starting at *pos (entries sorted by step): returns
 * the first index and advances *pos past them. */
static size_t step_range(const trace_entries *e, size_t *pos, int64_t step,
                         size_t *end) {
  while (*pos < e->n && e->items[*pos].step < step) (*pos)++;
  size_t begin = *pos;
  while (*pos < e->n && e->items[*pos].step == step) (*pos)++;
  *end = *pos;
  return begin;
}

/* Tensors that differ between two sorted runs of one step's entries: a name
 * on one side only, or the same name with another value. Entries of a
 * replica group are left out (group_differing draws them). */
static int count_differing(const trace_entry *a, size_t na,
                           const trace_entry *b, size_t nb) {
  size_t i = 0, j = 0;
  int diff = 0;
  for (;;) {
    while (i < na && a[i].group_size > 0) i++;
    while (j < nb && b[j].group_size > 0) j++;
    if (i == na && j == nb) break;
    if (j == nb || (i < na && a[i].key < b[j].key)) {
      diff++;
      i++;
    } else if (i == na || b[j].key < a[i].key) {
      diff++;
      j++;
    } else {
      if (a[i].value != b[j].value) diff++;
      i++;
      j++;
    }
  }
  return diff;
}

/* The entry of `key` among e[begin, end) (sorted by key), or NULL. */
static const trace_entry *find_key(const trace_entries *e, size_t begin,
                                   size_t end, uint64_t key) {
  while (begin < end) {
    size_t mid = begin + (end - begin) / 2;
    if (e->items[mid].key == key) return &e->items[mid];
    if (e->items[mid].key < key) begin = mid + 1;
    else end = mid;
  }
  return NULL;
}

/* Of rank r's entries of step si (e[r].items[rbeg, rend)), those of a
 * replica group that differ from the group's lowest rank's (missing there
 * counts as differing): each rank is drawn against its own group, never
 * against ranks that rightly hold other shards. */
static int group_differing(const trace_entries *e, int nranks, int r,
                           size_t rbeg, size_t rend, int64_t step) {
  int diff = 0;
  for (size_t i = rbeg; i < rend; i++) {
    const trace_entry *x = &e[r].items[i];
    if (x->group_size == 0 || x->group_low == r) continue;
    const trace_entry *y = NULL;
    if (x->group_low >= 0 && x->group_low < nranks) {
      const trace_entries *g = &e[x->group_low];
      size_t lo = 0, hi = g->n;
      while (lo < hi) { /* the first entry of the step */
        size_t mid = lo + (hi - lo) / 2;
        if (g->items[mid].step < step) lo = mid + 1;
        else hi = mid;
      }
      size_t end = lo;
      while (end < g->n && g->items[end].step == step) end++;
      y = find_key(g, lo, end, x->key);
    }
    if (!y || y->value != x->value) diff++;
  }
  return diff;
}

/* One rank's entry of one step, for the majority count. */
typedef struct step_entry {
  uint64_t key, value;
  int group_size; /* its replica group's ranks; 0: every rank */
} step_entry;

static int step_entry_cmp(const void *a, const void *b) {
  const step_entry *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  if (x->value != y->value) return x->value < y->value ? -1 : 1;
  return 0;
}

/* Tensors of one step whose ranks split with no majority: among the
 * `traced` ranks that traced the step, group the ranks by the tensor's
 * value (a rank without the tensor is one more group); no group strictly
 * larger than every other means no majority (divergence.c's rule). `es`
 * holds every such rank's entries of the step (n), sorted here. */
static int count_no_majority(step_entry *es, size_t n, int traced) {
  if (traced < 2 || n == 0) return 0;
  qsort(es, n, sizeof *es, step_entry_cmp);
  int nomaj = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    int best = 0, nbest = 0, present = 0;
    while (j < n && es[j].key == es[i].key) {
      size_t k = j;
      while (k < n && es[k].key == es[j].key && es[k].value == es[j].value)
        k++;
      int count = (int)(k - j);
      present += count;
      if (count > best) {
        best = count;
        nbest = 1;
      } else if (count == best) {
        nbest++;
      }
      j = k;
    }
    /* A replica group's tensor is held by its group's ranks only. */
    const int holders = es[i].group_size > 0 ? es[i].group_size : traced;
    const int absent = holders > present ? holders - present : 0;
    if (absent > best) {
      best = absent;
      nbest = 1;
    } else if (absent > 0 && absent == best) {
      nbest++;
    }
    if (nbest > 1) nomaj++;
    i = j;
  }
  return nomaj;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* The divergence checker names its reference rank; other runs use the
 * lowest rank that left a trace. */
static int choose_ref(const rep_run *run, const rep_grid *g) {
  for (int i = 0; i < run->nfindings; i++) {
    const rep_finding *f = &run->findings[i];
    if (strcmp(f->kind, "divergence") != 0 || !f->detail) continue;
    const json_t *v = json_object_get(f->detail, "reference_rank");
    if (json_is_integer(v) && json_integer_value(v) >= 0 &&
        json_integer_value(v) < g->nranks &&
        g->has_trace[json_integer_value(v)])
      return (int)json_integer_value(v);
  }
  for (int r = 0; r < g->nranks; r++)
    if (g->has_trace[r]) return r;
  return -1;
}

static vqc_status load_grid(const rep_run *run, rep_grid *g) {
  const int nranks = run->ranks < REP_MAX_RANKS ? run->ranks : REP_MAX_RANKS;
  g->nranks = nranks;
  g->ref_rank = -1;
  g->has_trace = calloc((size_t)nranks, sizeof *g->has_trace);
  trace_entries *e = calloc((size_t)nranks, sizeof *e);
  vqc_status s = VQC_OK;
  if (!g->has_trace || !e) {
    s = vqc_error(VQC_ENOMEM, "no memory for %d traces", nranks);
    goto done;
  }
  size_t total = 0;
  for (int r = 0; r < nranks && s == VQC_OK; r++) {
    char path[4200];
    s = vqc_trace_path(run->run_dir, r, path, sizeof path);
    if (s == VQC_OK) s = read_trace(path, r, &e[r], &g->has_trace[r]);
    total += e[r].n;
    if (g->has_trace[r]) g->any = true;
  }
  if (s != VQC_OK || !g->any) goto done;
  g->ref_rank = choose_ref(run, g);

  /* Every step some rank traced, once, in order. */
  g->steps = malloc((total ? total : 1) * sizeof *g->steps);
  if (!g->steps) {
    s = vqc_error(VQC_ENOMEM, "no memory for trace steps");
    goto done;
  }
  size_t k = 0;
  for (int r = 0; r < nranks; r++)
    for (size_t i = 0; i < e[r].n; i++)
      if (i == 0 || e[r].items[i].step != e[r].items[i - 1].step)
        g->steps[k++] = e[r].items[i].step;
  qsort(g->steps, k, sizeof *g->steps, cmp_i64);
  size_t nsteps = 0;
  for (size_t i = 0; i < k; i++)
    if (nsteps == 0 || g->steps[i] != g->steps[nsteps - 1])
      g->steps[nsteps++] = g->steps[i];
  g->nsteps = (int)nsteps;

  g->cell = malloc((size_t)nranks * (nsteps ? nsteps : 1) * sizeof *g->cell);
  g->ntensors = calloc(nsteps ? nsteps : 1, sizeof *g->ntensors);
  g->nomajority = calloc(nsteps ? nsteps : 1, sizeof *g->nomajority);
  if (!g->cell || !g->ntensors || !g->nomajority) {
    s = vqc_error(VQC_ENOMEM, "no memory for the digest grid");
    goto done;
  }
  const trace_entries *ref = &e[g->ref_rank];
  for (int r = 0; r < nranks; r++) {
    size_t pr = 0, pf = 0;
    for (size_t si = 0; si < nsteps; si++) {
      size_t rend, fend;
      size_t rbeg = step_range(&e[r], &pr, g->steps[si], &rend);
      size_t fbeg = step_range(ref, &pf, g->steps[si], &fend);
      g->ntensors[si] = (int)(fend - fbeg);
      int *c = &g->cell[(size_t)r * nsteps + si];
      if (rend == rbeg || fend == fbeg)
        *c = REP_CELL_MISSING;
      else
        *c = count_differing(e[r].items + rbeg, rend - rbeg,
                             ref->items + fbeg, fend - fbeg) +
             group_differing(e, nranks, r, rbeg, rend, g->steps[si]);
    }
  }
  /* Steps where some tensor has no majority: there the reference rank is
   * no more right than the others (every rank that traced the step is
   * shown as disagreeing). One pass over every rank per step. */
  step_entry *es = malloc((total ? total : 1) * sizeof *es);
  size_t *pos = calloc((size_t)nranks, sizeof *pos);
  if (!es || !pos) {
    free(es);
    free(pos);
    s = vqc_error(VQC_ENOMEM, "no memory for the digest grid");
    goto done;
  }
  for (size_t si = 0; si < nsteps; si++) {
    size_t n = 0;
    int traced = 0;
    for (int r = 0; r < nranks; r++) {
      size_t end, beg = step_range(&e[r], &pos[r], g->steps[si], &end);
      if (end > beg) traced++;
      for (size_t i = beg; i < end; i++)
        es[n++] = (step_entry){e[r].items[i].key, e[r].items[i].value,
                               e[r].items[i].group_size};
    }
    g->nomajority[si] = count_no_majority(es, n, traced);
  }
  free(es);
  free(pos);
done:
  for (int r = 0; e && r < nranks; r++) free(e[r].items);
  free(e);
  return s;
}

int rep_grid_worst(const rep_grid *g, int si) {
  int worst = REP_CELL_MISSING;
  for (int r = 0; r < g->nranks; r++) {
    int c = g->cell[(size_t)r * g->nsteps + si];
    if (c > worst) worst = c;
  }
  return worst;
}

/* ---- folding ranks */

typedef uint64_t (*row_hash_fn)(const void *ctx, int r);
typedef bool (*row_same_fn)(const void *ctx, int a, int b);

/* Groups ranks 0..n-1 by identical rows: a row's hash first, then a full
 * compare with each group's lowest rank where the hashes match, so a 1024
 * ranks x 300 steps grid costs one pass plus O(n x groups) hash compares. */
static int group_rows(int n, row_hash_fn hash, row_same_fn same,
                      const void *ctx, int *group_of) {
  uint64_t *h = malloc((size_t)(n > 0 ? n : 1) * sizeof *h);
  int *low = malloc((size_t)(n > 0 ? n : 1) * sizeof *low);
  if (!h || !low) {
    free(h);
    free(low);
    for (int r = 0; r < n; r++) group_of[r] = r;
    return n;
  }
  int ng = 0;
  for (int r = 0; r < n; r++) h[r] = hash(ctx, r);
  for (int r = 0; r < n; r++) {
    int g = 0;
    while (g < ng && !(h[low[g]] == h[r] && same(ctx, low[g], r))) g++;
    if (g == ng) low[ng++] = r;
    group_of[r] = g;
  }
  free(h);
  free(low);
  return ng;
}

static uint64_t grid_row_hash(const void *ctx, int r) {
  const rep_grid *g = ctx;
  uint64_t h = fnv1a(&g->has_trace[r], sizeof g->has_trace[r], FNV_OFFSET);
  return fnv1a(&g->cell[(size_t)r * g->nsteps], (size_t)g->nsteps *
               sizeof *g->cell, h);
}

static bool grid_row_same(const void *ctx, int a, int b) {
  const rep_grid *g = ctx;
  return g->has_trace[a] == g->has_trace[b] &&
         memcmp(&g->cell[(size_t)a * g->nsteps],
                &g->cell[(size_t)b * g->nsteps],
                (size_t)g->nsteps * sizeof *g->cell) == 0;
}

int rep_grid_groups(const rep_grid *g, int *group_of) {
  return group_rows(g->nranks, grid_row_hash, grid_row_same, g, group_of);
}

typedef struct tl_rows {
  const rep_timeline *t;
  int c0, c1; /* the columns compared: [c0, c1) */
} tl_rows;

static uint64_t coll_hash(const rep_coll *k, int64_t last_seq, uint64_t h) {
  h = fnv1a(&k->state, sizeof k->state, h);
  h = str_hash(k->describe, h);
  h = str_hash(k->site, h);
  h = str_hash(k->status, h);
  if (k->state == REP_COLL_ABSENT) h = fnv1a(&last_seq, sizeof last_seq, h);
  return h;
}

static uint64_t tl_row_hash(const void *ctx, int r) {
  const tl_rows *x = ctx;
  const rep_timeline *t = x->t;
  uint64_t h = fnv1a(&t->has_dump[r], sizeof t->has_dump[r], FNV_OFFSET);
  if (!t->has_dump[r]) return h;
  for (int c = x->c0; c < x->c1; c++)
    h = coll_hash(&t->cells[(size_t)r * t->ncols + c], t->last_seq[r], h);
  return h;
}

static bool tl_row_same(const void *ctx, int a, int b) {
  const tl_rows *x = ctx;
  const rep_timeline *t = x->t;
  if (t->has_dump[a] != t->has_dump[b]) return false;
  if (!t->has_dump[a]) return true;
  for (int c = x->c0; c < x->c1; c++) {
    const rep_coll *p = &t->cells[(size_t)a * t->ncols + c];
    const rep_coll *q = &t->cells[(size_t)b * t->ncols + c];
    if (p->state != q->state || strcmp(p->describe, q->describe) != 0 ||
        strcmp(p->site, q->site) != 0 || strcmp(p->status, q->status) != 0 ||
        (p->state == REP_COLL_ABSENT && t->last_seq[a] != t->last_seq[b]))
      return false;
  }
  return true;
}

int rep_timeline_groups(const rep_timeline *t, int col, int *group_of) {
  tl_rows x = {t, col < 0 ? 0 : col, col < 0 ? t->ncols : col + 1};
  return group_rows(t->nranks, tl_row_hash, tl_row_same, &x, group_of);
}

void rep_group_text(const int *group_of, int nranks, int g, char *buf,
                    size_t n, int *count) {
  int *list = malloc((size_t)(nranks > 0 ? nranks : 1) * sizeof *list);
  int k = 0;
  buf[0] = '\0';
  for (int r = 0; r < nranks; r++)
    if (group_of[r] == g) {
      if (list) list[k] = r;
      k++;
    }
  if (list) vqc_rank_ranges_text(list, k, buf, n);
  else snprintf(buf, n, "(%d ranks)", k);
  free(list);
  if (count) *count = k;
}

/* ---- ledger dumps */

/* What one pass over the dumps keeps of a line. */
typedef struct ledger_line {
  uint64_t seq;
  rep_coll c;
} ledger_line;

/* Parses one dump line (ledger_record.h, read leniently: the fields a
 * picture needs, seq, rank, op and state, are required; the rest is shown
 * when present). */
static vqc_status parse_ledger_line(const json_t *o, const char *path,
                                    long lineno, int rank, ledger_line *out) {
  memset(out, 0, sizeof *out);
  if (!json_is_object(o))
    return vqc_error(VQC_EPARSE, "%s:%ld: a line must be a JSON object", path,
                     lineno);
  vqc_ledger_line l;
  vqc_status s = vqc_ledger_line_decode(o, rank, path, lineno,
                                        VQC_LEDGER_LENIENT, &l);
  vqc_ledger_line_release(&l); /* the group is not drawn */
  if (s != VQC_OK) return s;
  out->seq = l.seq;
  const char *op = l.op;
  switch (l.state) {
    case VQC_REC_ENTERED: out->c.state = REP_COLL_ENTERED; break;
    case VQC_REC_DONE: out->c.state = REP_COLL_DONE; break;
    case VQC_REC_FAILED: out->c.state = REP_COLL_FAILED; break;
  }
  snprintf(out->c.op, sizeof out->c.op, "%s", op);
  snprintf(out->c.status, sizeof out->c.status, "%s", l.status);

  /* "all_reduce(float32, count 16, sum)", as ledger_analysis words it. */
  if (strcmp(op, "barrier") == 0) {
    snprintf(out->c.describe, sizeof out->c.describe, "barrier()");
  } else {
    int w = snprintf(out->c.describe, sizeof out->c.describe, "%s(%s, count "
                     "%lld", op, l.dtype, (long long)l.count);
    size_t used = w > 0 ? (size_t)w : 0;
    if (used < sizeof out->c.describe && strcmp(op, "broadcast") == 0)
      used += (size_t)snprintf(out->c.describe + used,
                               sizeof out->c.describe - used, ", root %d",
                               l.root);
    if (used < sizeof out->c.describe && strcmp(op, "all_reduce") == 0 &&
        l.redop[0])
      used += (size_t)snprintf(out->c.describe + used,
                               sizeof out->c.describe - used, ", %s",
                               l.redop);
    if (used < sizeof out->c.describe)
      snprintf(out->c.describe + used, sizeof out->c.describe - used, ")");
  }
  vqc_site site = {l.file, l.line, l.func};
  if (site.file[0]) vqc_site_text(site, out->c.site, sizeof out->c.site);
  return VQC_OK;
}

/* What a pass over one dump works on. */
typedef struct dump_reading {
  int rank;
  void (*visit)(const ledger_line *, int, void *);
  void *user;
} dump_reading;

/* One line of a dump (jsonl.h). */
static vqc_status dump_line(const vqc_jsonl_line *l, void *user) {
  const dump_reading *rd = user;
  if (!l->json)
    return vqc_error(VQC_EPARSE, "%s:%ld: not JSON (column %d): %s", l->path,
                     l->lineno, l->err->column, l->err->text);
  ledger_line line;
  VQC_TRY(parse_ledger_line(l->json, l->path, l->lineno, rd->rank, &line));
  rd->visit(&line, rd->rank, rd->user);
  return VQC_OK;
}

/* Reads rank `rank`'s dump; for each line calls visit(line, user). Sets
 * *present = false when the dump does not exist. */
static vqc_status scan_dump(const char *run_dir, int rank, bool *present,
                            void (*visit)(const ledger_line *, int, void *),
                            void *user) {
  char path[4200];
  *present = false;
  VQC_TRY(vqc_ledger_dump_path(run_dir, rank, path, sizeof path));
  dump_reading rd = {rank, visit, user};
  return vqc_jsonl_read(path, NULL, dump_line, &rd, present);
}

/* Pass 1 (only when no finding names the stuck collective): per rank, the
 * first seq that is not done and the last seq. */
typedef struct first_pass {
  uint64_t *first_not_done; /* UINT64_MAX: every record done */
  int64_t *last_seq;
} first_pass;

static void visit_first(const ledger_line *l, int rank, void *user) {
  first_pass *p = user;
  if (l->c.state != REP_COLL_DONE && l->seq < p->first_not_done[rank])
    p->first_not_done[rank] = l->seq;
  if ((int64_t)l->seq > p->last_seq[rank]) p->last_seq[rank] = (int64_t)l->seq;
}

static void visit_window(const ledger_line *l, int rank, void *user) {
  rep_timeline *t = user;
  if ((int64_t)l->seq > t->last_seq[rank]) t->last_seq[rank] = (int64_t)l->seq;
  if (l->seq < t->first || l->seq >= t->first + (uint64_t)t->ncols) return;
  t->cells[(size_t)rank * t->ncols + (l->seq - t->first)] = l->c;
}

/* The seq the findings say the ranks are stuck in, if any. */
static bool focus_from_findings(const rep_run *run, uint64_t *seq,
                                char *why, size_t n) {
  static const char *const kinds[] = {"deadlock", "collective_mismatch",
                                      "rank_failure"};
  for (int k = 0; k < 3; k++) {
    for (int i = 0; i < run->nfindings; i++) {
      const rep_finding *f = &run->findings[i];
      if (strcmp(f->kind, kinds[k]) != 0 || !f->detail) continue;
      const json_t *v = json_object_get(f->detail, "seq");
      if (!v) v = json_object_get(json_object_get(f->detail, "waiting_in"),
                                  "seq");
      if (json_is_integer(v) && json_integer_value(v) >= 0) {
        *seq = (uint64_t)json_integer_value(v);
        snprintf(why, n, "the %s finding", kinds[k]);
        return true;
      }
      v = json_object_get(f->detail, "last_completed_seq");
      if (json_is_integer(v) && json_integer_value(v) >= -1) {
        *seq = (uint64_t)(json_integer_value(v) + 1);
        snprintf(why, n, "the %s finding", kinds[k]);
        return true;
      }
    }
  }
  return false;
}

static vqc_status load_timeline(const rep_run *run, rep_timeline *t) {
  const int nranks = run->ranks < REP_MAX_RANKS ? run->ranks : REP_MAX_RANKS;
  t->nranks = nranks;
  t->has_dump = calloc((size_t)nranks, sizeof *t->has_dump);
  t->last_seq = malloc((size_t)nranks * sizeof *t->last_seq);
  if (!t->has_dump || !t->last_seq)
    return vqc_error(VQC_ENOMEM, "no memory for %d ledger dumps", nranks);
  for (int r = 0; r < nranks; r++) t->last_seq[r] = -1;

  t->has_focus = focus_from_findings(run, &t->focus, t->focus_why,
                                     sizeof t->focus_why);
  if (!t->has_focus) {
    /* No finding names it: the lowest seq some rank did not complete, or
     * did not reach while another rank did. */
    first_pass p = {malloc((size_t)nranks * sizeof(uint64_t)),
                    malloc((size_t)nranks * sizeof(int64_t))};
    vqc_status s = (p.first_not_done && p.last_seq) ? VQC_OK
                   : vqc_error(VQC_ENOMEM, "no memory for ledger dumps");
    for (int r = 0; r < nranks && s == VQC_OK; r++) {
      p.first_not_done[r] = UINT64_MAX;
      p.last_seq[r] = -1;
      s = scan_dump(run->run_dir, r, &t->has_dump[r], visit_first, &p);
      if (t->has_dump[r]) t->any = true;
    }
    int64_t max_last = -1;
    for (int r = 0; r < nranks; r++)
      if (p.last_seq[r] > max_last) max_last = p.last_seq[r];
    uint64_t focus = UINT64_MAX;
    for (int r = 0; s == VQC_OK && r < nranks; r++) {
      if (!t->has_dump[r]) continue;
      if (p.first_not_done[r] < focus) focus = p.first_not_done[r];
      if (p.last_seq[r] < max_last && (uint64_t)(p.last_seq[r] + 1) < focus)
        focus = (uint64_t)(p.last_seq[r] + 1);
    }
    if (focus != UINT64_MAX) {
      t->has_focus = true;
      t->focus = focus;
      snprintf(t->focus_why, sizeof t->focus_why, "the first collective not "
               "done on every rank");
    }
    /* Without one, show the last collectives. */
    t->first = max_last >= 0 ? (uint64_t)max_last : 0;
    free(p.first_not_done);
    free(p.last_seq);
    if (s != VQC_OK) return s;
    if (!t->any) return VQC_OK;
  }
  const uint64_t anchor = t->has_focus ? t->focus : t->first;
  t->first = anchor > TL_BEFORE ? anchor - TL_BEFORE : 0;
  t->ncols = (int)(anchor + TL_AFTER + 1 - t->first);
  t->cells = calloc((size_t)nranks * (size_t)t->ncols, sizeof *t->cells);
  if (!t->cells) return vqc_error(VQC_ENOMEM, "no memory for the timeline");
  for (int r = 0; r < nranks; r++) {
    t->last_seq[r] = -1;
    VQC_TRY(scan_dump(run->run_dir, r, &t->has_dump[r], visit_window, t));
    if (t->has_dump[r]) t->any = true;
  }
  /* Trim columns past the last seq any rank reached (but keep the focus). */
  int64_t max_last = -1;
  for (int r = 0; r < nranks; r++)
    if (t->last_seq[r] > max_last) max_last = t->last_seq[r];
  int64_t last_col = max_last - (int64_t)t->first;
  if (t->has_focus && (int64_t)(t->focus - t->first) > last_col)
    last_col = (int64_t)(t->focus - t->first);
  if (last_col >= 0 && last_col + 1 < t->ncols) {
    const int ncols = (int)last_col + 1;
    for (int r = 0; r < nranks; r++)
      memmove(&t->cells[(size_t)r * ncols], &t->cells[(size_t)r * t->ncols],
              (size_t)ncols * sizeof *t->cells);
    t->ncols = ncols;
  }
  return VQC_OK;
}

/* ---- which checks ran */

rep_check_state rep_check(const rep_run *r, vqc_finding_kind k,
                          const char **why) {
  const char *kind = vqc_finding_kind_name(k);
  *why = "";
  for (int i = 0; i < r->nfindings; i++)
    if (strcmp(r->findings[i].kind, kind) == 0) return REP_CHECK_FAILED;
  /* Divergence compares ranks' copies: one rank has nothing to compare
   * with, whatever "checks" claims (an older run.json, another writer). */
  if (k == VQC_FINDING_DIVERGENCE && r->ranks < 2) {
    *why = REP_ONE_RANK_WHY;
    return REP_CHECK_NOT_RUN;
  }

  const json_t *checks = json_object_get(r->root, "checks");
  if (json_is_array(checks)) {
    size_t i;
    const json_t *v;
    json_array_foreach(checks, i, v)
      if (json_is_string(v) && strcmp(json_string_value(v), kind) == 0)
        return REP_CHECK_PASSED;
    const json_t *reason =
        json_object_get(json_object_get(r->root, "checks_not_run"), kind);
    *why = json_is_string(reason)
               ? json_string_value(reason)
               : "not among the checks this run recorded as run (run.json "
                 "\"checks\")";
    return REP_CHECK_NOT_RUN;
  }
  /* No "checks": decide from the writer (see report_internal.h). */
  const json_t *sc = json_object_get(r->root, "scenario");
  if (json_is_string(json_object_get(sc, "fault"))) return REP_CHECK_PASSED;
  const json_t *checkers =
      json_object_get(json_object_get(r->root, "check"), "checkers");
  if (json_is_string(checkers)) {
    const char *p = json_string_value(checkers);
    while (*p) {
      size_t len = strcspn(p, ",");
      /* the kinds each checker reports: checkers/checker_set.h */
      if (vqc_checker_reports(p, len, k)) return REP_CHECK_PASSED;
      p += len + (p[len] == ',');
    }
    *why = "the instrumented program did not enable the checker for it "
           "(run.json \"check.checkers\")";
    return REP_CHECK_NOT_RUN;
  }
  *why = "run.json does not record that this check ran (no \"checks\"), "
         "so it is not reported as passed";
  return REP_CHECK_NOT_RUN;
}

/* ---- everything */

vqc_status rep_data_load(const char *run_dir, bool with_traces, rep_data *d) {
  memset(d, 0, sizeof *d);
  VQC_TRY(rep_run_load(run_dir, &d->run));
  if (!with_traces) return VQC_OK;
  VQC_TRY(load_grid(&d->run, &d->grid));
  return load_timeline(&d->run, &d->tl);
}

void rep_data_free(rep_data *d) {
  if (!d) return;
  rep_run_free(&d->run);
  free(d->grid.has_trace);
  free(d->grid.steps);
  free(d->grid.cell);
  free(d->grid.ntensors);
  free(d->grid.nomajority);
  free(d->tl.has_dump);
  free(d->tl.last_seq);
  free(d->tl.cells);
  memset(d, 0, sizeof *d);
}
