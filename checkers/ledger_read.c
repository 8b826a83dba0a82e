/* ledger_read.c: reads a run's ledger dumps (rank-<r>.ledger.jsonl),
 * status files and live records' ledger lines into per-rank record arrays,
 * the world's and each process group's (ledger_analysis.h; split out of
 * ledger_analysis.c, see ledger_analysis_internal.h).
 *
 * Call sites repeat a lot (a training loop calls the same few collectives
 * thousands of times), so parsed records keep an index into a table of
 * distinct sites instead of their own copies of the strings.
 *
 * Lines are read through jsonl.h (bounded, mended) and a ledger line is
 * decoded by ledger_record.h; what is here is what the analysis makes of
 * them (which names it compares, the fingerprints). */
#include "ledger_analysis_internal.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ledger_record.h"
#include "vqc/digest.h"

/* ---- reading: distinct call sites */

void sites_free(site_table *t) {
  for (size_t i = 0; i < t->n; i++) {
    free(t->items[i].file);
    free(t->items[i].func);
  }
  free(t->items);
  free(t->index);
  memset(t, 0, sizeof *t);
}

static void index_insert(site_table *t, uint32_t id) {
  size_t mask = t->nindex - 1;
  size_t i = (size_t)t->items[id].hash & mask;
  while (t->index[i]) i = (i + 1) & mask;
  t->index[i] = id + 1;
}

/* The id of (file, line, func), added if new; -1 when out of memory. */
static long sites_intern(site_table *t, const char *file, int line,
                         const char *func) {
  uint64_t h = site_hash_parts(file, line, func);
  if (t->nindex) {
    size_t mask = t->nindex - 1;
    for (size_t i = (size_t)h & mask; t->index[i]; i = (i + 1) & mask) {
      const site_entry *e = &t->items[t->index[i] - 1];
      if (e->hash == h && e->line == line && strcmp(e->file, file) == 0 &&
          strcmp(e->func, func) == 0)
        return (long)(t->index[i] - 1);
    }
  }
  if (t->n == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 16;
    site_entry *items = realloc(t->items, cap * sizeof *items);
    if (!items) return -1;
    t->items = items;
    t->cap = cap;
    /* Rebuild the index at twice the capacity (load <= 1/2). */
    uint32_t *index = calloc(2 * cap, sizeof *index);
    if (!index) return -1;
    free(t->index);
    t->index = index;
    t->nindex = 2 * cap;
    for (size_t i = 0; i < t->n; i++) index_insert(t, (uint32_t)i);
  }
  site_entry *e = &t->items[t->n];
  e->file = strdup(file);
  e->func = strdup(func);
  if (!e->file || !e->func) {
    free(e->file);
    free(e->func);
    return -1;
  }
  e->line = line;
  e->hash = h;
  index_insert(t, (uint32_t)t->n);
  return (long)t->n++;
}

vqc_site site_of(const site_table *t, uint32_t id) {
  const site_entry *e = &t->items[id];
  return (vqc_site){e->file, e->line, e->func};
}

/* ---- reading: what a ledger line may name
 *
 * A dump line is compared, never replayed, so it may name collectives that
 * vqcheck's comm does not have: the Python bridge (`vqcheck watch`) records
 * torch.distributed's in the same format. The first entries are vqcheck's
 * own, in VQC_COLL_LIST order (a record's op is its index here); `redop` and
 * `root` say which fields take part in the fingerprint (the others hold ""
 * and -1). For object collectives and all_to_all the bridge writes count 0:
 * their sizes may legitimately differ by rank. */
const record_op record_ops[] = {
    {"all_reduce", true, false},
    {"all_gather", false, false},
    {"all_gatherv", false, false},
    {"broadcast", false, true},
    {"barrier", false, false},
    /* torch.distributed (and its private aliases torch itself calls) */
    {"all_reduce_coalesced", true, false},
    {"all_gather_into_tensor", false, false},
    {"_all_gather_base", false, false},
    {"all_gather_object", false, false},
    {"reduce_scatter", true, false},
    {"reduce_scatter_tensor", true, false},
    {"_reduce_scatter_base", true, false},
    {"all_gather_single", false, false},    /* torch 2.x, FSDP2 */
    {"reduce_scatter_single", true, false},
    {"broadcast_object_list", false, true},
    {"all_to_all", false, false},
    {"all_to_all_single", false, false},
    {"reduce", true, true},
    {"gather", false, true},
    {"scatter", false, true},
    {"gather_object", false, true},
    {"scatter_object_list", false, true},
    /* torch.distributed._functional_collectives' own names */
    {"all_gather_tensor", false, false},
    {"all_gather_into_tensor_coalesced", false, false},
    {"reduce_scatter_tensor_coalesced", true, false},
    /* MPI (interpose/vqc_mpi.c, libvqcheck_mpi.so); its count is the type
     * signature's length. Communicator creation is collective too. */
    {"gatherv", false, true},
    {"scatterv", false, true},
    {"all_to_allv", false, false},
    {"scan", true, false},
    {"exscan", true, false},
    {"comm_split", false, false},
    {"comm_dup", false, false},
    {"comm_create", false, false},
    {"comm_spawn", false, true}, /* rooted: the root starts the processes */
    /* RMA windows (interpose/vqc_mpi_rma.c): made on a communicator, then
     * fenced and freed by the window's own group */
    {"win_create", false, false},
    {"win_fence", false, false},
    {"win_free", false, false},
    /* MPI_Alltoallw (a type per peer) and the neighbourhood collectives of
     * a communicator with a topology (cart, graph, dist graph): each rank
     * exchanges only with its neighbours, so its counts need not equal a
     * non-neighbour's (none of their counts is compared). */
    {"all_to_allw", false, false},
    {"neighbor_all_gather", false, false},
    {"neighbor_all_gatherv", false, false},
    {"neighbor_all_to_all", false, false},
    {"neighbor_all_to_allv", false, false},
    {"neighbor_all_to_allw", false, false},
    /* MPI's non-blocking collectives, under their own names: MPI never
     * matches one with a blocking call (MPI 4.1, 6.12), so a rank's
     * MPI_Ibcast where another called MPI_Bcast is an op mismatch. */
    {"ibarrier", false, false},
    {"ibroadcast", false, true},
    {"ireduce", true, true},
    {"iall_reduce", true, false},
    {"iscan", true, false},
    {"iexscan", true, false},
    /* MPI-IO (interpose/vqc_mpi_io.c): a file opened on a communicator,
     * then its collectives on the file's own group; reads and writes carry
     * each rank's own element type and count (not compared: varcount_op,
     * vartype_op) */
    {"file_open", false, false},
    {"file_close", false, false},
    {"file_set_view", false, false},
    {"file_set_size", false, false},
    {"file_preallocate", false, false},
    {"file_set_atomicity", false, false},
    {"file_set_info", false, false},
    {"file_sync", false, false},
    {"file_seek_shared", false, false},
    {"file_read_all", false, false},
    {"file_write_all", false, false},
    {"file_read_at_all", false, false},
    {"file_write_at_all", false, false},
    {"file_read_ordered", false, false},
    {"file_write_ordered", false, false},
    {"file_read_all_begin", false, false},
    {"file_read_all_end", false, false},
    {"file_write_all_begin", false, false},
    {"file_write_all_end", false, false},
    {"file_read_at_all_begin", false, false},
    {"file_read_at_all_end", false, false},
    {"file_write_at_all_begin", false, false},
    {"file_write_at_all_end", false, false},
    {"ifile_read_all", false, false},
    {"ifile_write_all", false, false},
    {"ifile_read_at_all", false, false},
    {"ifile_write_at_all", false, false},
    {"ireduce_scatter", true, false},
    {"igather", false, true},
    {"igatherv", false, true},
    {"iscatter", false, true},
    {"iscatterv", false, true},
    {"iall_gather", false, false},
    {"iall_gatherv", false, false},
    {"iall_to_all", false, false},
    {"iall_to_allv", false, false},
    {"iall_to_allw", false, false},
    {"ineighbor_all_gather", false, false},
    {"ineighbor_all_gatherv", false, false},
    {"ineighbor_all_to_all", false, false},
    {"ineighbor_all_to_allv", false, false},
    {"ineighbor_all_to_allw", false, false},
};
#define NRECORD_OPS ((int)(sizeof record_ops / sizeof record_ops[0]))

/* Reductions: vqcheck's (VQC_REDOP_LIST order), then torch's ReduceOp
 * names in lower case. */
const char *const record_redops[] = {
    "sum", "min", "max", "product", "avg", "band", "bor", "bxor",
    "premul_sum",
    /* MPI's (libvqcheck_mpi.so); "user": an MPI_Op_create reduction */
    "land", "lor", "lxor", "maxloc", "minloc", "replace", "no_op", "user"};
#define NRECORD_REDOPS ((int)(sizeof record_redops / sizeof record_redops[0]))

static int name_index(const char *const *names, int n, const char *s) {
  for (int k = 0; k < n; k++)
    if (strcmp(s, names[k]) == 0) return k;
  return -1;
}

static int record_op_index(const char *s) {
  for (int k = 0; k < NRECORD_OPS; k++)
    if (strcmp(s, record_ops[k].name) == 0) return k;
  return -1;
}

/* MPI's v- and w-forms and neighbourhood collectives: each rank's count
 * may differ, so it is not compared. */
static bool varcount_op(const char *name) {
  if (name[0] == 'i' && record_op_index(name) >= 0) name++; /* "igatherv" */
  return strcmp(name, "gatherv") == 0 || strcmp(name, "scatterv") == 0 ||
         strcmp(name, "all_gatherv") == 0 ||
         strcmp(name, "all_to_allv") == 0 ||
         strcmp(name, "all_to_allw") == 0 ||
         strncmp(name, "neighbor_", 9) == 0 || strncmp(name, "file_", 5) == 0;
}

/* Whether ranks may legitimately call op with other element types:
 * MPI-IO's reads and writes, each rank with its own data. */
static bool vartype_op(const char *name) {
  if (name[0] == 'i' && record_op_index(name) >= 0) name++; /* "ifile_" */
  return strncmp(name, "file_", 5) == 0;
}


/* Element type names: the digest's (vqcheck's dtypes and every other
 * framework's, lib/include/vqc/digest.h), by code; 0 is "" (no data). */
const char *dtype_text(uint8_t code) {
  vqc_digest_type t;
  if (code == 0 || vqc_digest_type_by_code(code, &t) != VQC_OK) return "";
  return t.name;
}

/* ---- reading: one rank's dump */

/* The most process groups one analysis keeps (a 3-D mesh of 1024 ranks has
 * about 3 x 1024 / 4 groups a rank never sees; each rank sees a few). */
#define PROC_GROUPS_MAX 4096

/* Reads member `key` of line object j as an integer in [lo, hi]. */
static vqc_status get_int(const json_t *j, const char *key, long long lo,
                          long long hi, const char *path, long line,
                          long long *out) {
  const json_t *v = json_object_get(j, key);
  if (!json_is_integer(v) || json_integer_value(v) < lo ||
      json_integer_value(v) > hi)
    return vqc_error(VQC_EPARSE, "%s:%ld: field '%s': expected an integer "
                     "in %lld..%lld",
                     path, line, key, lo, hi);
  *out = json_integer_value(v);
  return VQC_OK;
}

static vqc_status get_str(const json_t *j, const char *key, const char *path,
                          long line, const char **out) {
  const json_t *v = json_object_get(j, key);
  if (!json_is_string(v))
    return vqc_error(VQC_EPARSE, "%s:%ld: field '%s': expected a string",
                     path, line, key);
  *out = json_string_value(v);
  return VQC_OK;
}

/* One decoded ledger line l (line `line` of path) into *r: the names it
 * uses checked against what the analysis compares. */
static vqc_status parse_record(const vqc_ledger_line *l, const char *path,
                               long line, site_table *sites, drec *r) {
  memset(r, 0, sizeof *r);
  r->seq = l->seq;
  r->op = record_op_index(l->op);
  if (r->op < 0)
    return vqc_error(VQC_EPARSE, "%s:%ld: field 'op': unknown collective "
                     "'%s' (expected one of vqcheck's, all_reduce, "
                     "all_gather, all_gatherv, broadcast or barrier, or a "
                     "torch.distributed collective such as reduce_scatter)",
                     path, line, l->op);
  const record_op *kind = &record_ops[r->op];

  r->redop = -1;
  if (kind->redop) {
    r->redop = name_index(record_redops, NRECORD_REDOPS, l->redop);
    if (r->redop < 0)
      return vqc_error(VQC_EPARSE, "%s:%ld: field 'redop': unknown reduction "
                       "'%s' (expected sum, min, max, product, avg, band, "
                       "bor, bxor, premul_sum, or MPI's land, lor, lxor, "
                       "maxloc, minloc, replace, no_op, user)",
                       path, line, l->redop);
  }

  vqc_digest_type dt;
  if (l->dtype[0] == '\0')
    r->dtype = 0;
  else if (vqc_digest_type_by_name(l->dtype, &dt) == VQC_OK)
    r->dtype = dt.code;
  else
    return vqc_error(VQC_EPARSE, "%s:%ld: field 'dtype': unknown dtype '%s' "
                     "(expected float32, bfloat16, int64, ... or \"\" for "
                     "none)",
                     path, line, l->dtype);
  r->count = l->count;
  r->root = l->root;

  long id = sites_intern(sites, l->file, l->line, l->func);
  if (id < 0) return vqc_error(VQC_ENOMEM, "no memory for call sites");
  r->site = (uint32_t)id;
  r->state = l->state;
  snprintf(r->status, sizeof r->status, "%s", l->status);
  r->t_enter_ns = l->t_enter_ns;

  /* The fields strict mode compares (vqc_fingerprint_of); for vqcheck's own
   * collectives the same values, as op and dtype codes coincide. */
  memset(&r->fp, 0, sizeof r->fp);
  r->fp.op = r->op;
  r->fp.dtype = vartype_op(kind->name) ? 0 : r->dtype;
  r->fp.redop = r->redop;
  r->fp.root = kind->root ? r->root : -1;
  r->fp.count = r->op == VQC_COLL_ALL_GATHERV || varcount_op(kind->name)
                    ? 0 : r->count; /* as above */
  r->fp.site_hash = vqc_site_hash(site_of(sites, r->site));
  /* "any_site": true (libvqcheck_mpi.so): MPI pairs a communicator's
   * collectives by their order alone, and a program may legally call one
   * from different lines on different ranks (the root's branch and the
   * others'), so the call site is told but not compared. */
  if (l->any_site) r->fp.site_hash = 0;
  return VQC_OK;
}

static vqc_status push_record(rank_dump *d, const drec *r) {
  if (d->n == d->cap) {
    size_t cap = d->cap ? 2 * d->cap : 64;
    drec *recs = realloc(d->recs, cap * sizeof *recs);
    if (!recs) return vqc_error(VQC_ENOMEM, "no memory for ledger records");
    d->recs = recs;
    d->cap = cap;
  }
  d->recs[d->n++] = *r;
  return VQC_OK;
}

/* The most heads a live record's start line may say it keeps. */
#define LIVE_HEADS_MAX 64

/* What a reader of one rank's ledger lines works on. */
typedef struct ledger_reading {
  int rank;
  site_table *sites;
  rank_dump *d;         /* the world's records */
  proc_groups *groups;  /* NULL: lines naming a group are the world's */
  vqc_live_info *info;  /* a live record's events; NULL for a dump */
  /* Short lines of a live record ({"same":..}: libvqcheck_mpi.so's for a
   * loop's collectives; read_short): the kept heads (the k-th full
   * "entered" line's record, and where it went, in slot k % nheads), the
   * last entered line's time, and the short call not yet done. */
  int nheads;           /* the start line's "heads"; 0: no short lines */
  uint64_t nfull;       /* full entered lines read */
  struct {
    bool has;
    drec r;
    rank_dump *into;
  } heads[LIVE_HEADS_MAX];
  uint64_t last_t_enter;
  bool open;
  uint64_t open_seq;
  rank_dump *open_into;
} ledger_reading;

/* One line of a dump (jsonl.h). */
static vqc_status dump_line(const vqc_jsonl_line *l, void *user) {
  ledger_reading *rd = user;
  rank_dump *d = rd->d;
  if (!l->json)
    return vqc_error(VQC_EPARSE, "%s:%ld: not a JSON object: %s (column %d)",
                     l->path, l->lineno, l->err->text, l->err->column);
  if (!json_is_object(l->json))
    return vqc_error(VQC_EPARSE, "%s:%ld: expected a JSON object per line",
                     l->path, l->lineno);
  drec r;
  vqc_ledger_line ll; /* ledger_record.h */
  vqc_status s = vqc_ledger_line_decode(l->json, rd->rank, l->path,
                                        l->lineno, 0, &ll);
  if (s == VQC_OK) s = parse_record(&ll, l->path, l->lineno, rd->sites, &r);
  vqc_ledger_line_release(&ll);
  if (s != VQC_OK) return s;
  if (d->n > 0 && r.seq <= d->recs[d->n - 1].seq)
    return vqc_error(VQC_EPARSE, "%s:%ld: field 'seq': %" PRIu64 " after %"
                     PRIu64 " (sequence numbers must increase)",
                     l->path, l->lineno, r.seq, d->recs[d->n - 1].seq);
  return push_record(d, &r);
}

vqc_status read_ledger(const char *path, int rank, site_table *sites,
                              rank_dump *d) {
  /* Bounded lines (jsonl.h): a dump that is not one cannot make this hold
   * a gigabyte line. */
  ledger_reading rd = {.rank = rank, .sites = sites, .d = d};
  const vqc_jsonl_opts opts = {0, JSON_REJECT_DUPLICATES, NULL, NULL};
  bool present = false; /* no dump: d->present stays false */
  vqc_status s = vqc_jsonl_read(path, &opts, dump_line, &rd, &present);
  if (present) d->present = d->dumped = true;
  return s;
}

/* Reads rank-<r>.status.json if there is one. *size_out gets its "size". */
vqc_status read_status(const char *path, int rank, rank_dump *d,
                              int *size_out) {
  if (access(path, F_OK) != 0) return VQC_OK; /* optional */
  json_error_t err;
  json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
  if (!j)
    return vqc_error(VQC_EPARSE, "%s:%d: not valid JSON: %s", path, err.line,
                     err.text);
  vqc_status s = VQC_OK;
  long long v = 0;
  const char *str = NULL;
  if (!json_is_object(j)) {
    s = vqc_error(VQC_EPARSE, "%s:1: expected a JSON object", path);
  } else if ((s = get_int(j, "rank", 0, INT32_MAX, path, 1, &v)) == VQC_OK &&
             v != rank) {
    s = vqc_error(VQC_EPARSE, "%s:1: field 'rank': %lld in the status file "
                  "of rank %d", path, v, rank);
  }
  if (s == VQC_OK && (s = get_int(j, "size", 1, INT32_MAX, path, 1, &v)) ==
                         VQC_OK)
    *size_out = (int)v;
  if (s == VQC_OK && (s = get_str(j, "status", path, 1, &str)) == VQC_OK)
    snprintf(d->status, sizeof d->status, "%s", str);
  if (s == VQC_OK &&
      (s = get_int(j, "step", -1, INT64_MAX, path, 1, &v)) == VQC_OK)
    d->step = v;
  if (s == VQC_OK) {
    const json_t *w = json_object_get(j, "watchdog");
    d->watchdog = json_is_true(w);
    d->has_status = true;
  }
  json_decref(j);
  return s;
}

/* The highest r with a rank-<r>.ledger.jsonl or .status.json, plus one; 0
 * when there is none. */
int size_from_names(const char *run_dir) {
  DIR *dir = opendir(run_dir);
  if (!dir) return 0;
  int size = 0;
  struct dirent *e;
  while ((e = readdir(dir)) != NULL) {
    int r = -1, used = 0;
    if (sscanf(e->d_name, "rank-%d.%n", &r, &used) == 1 && used > 0 &&
        r >= 0 && r < 1 << 20 &&
        (strcmp(e->d_name + used, "ledger.jsonl") == 0 ||
         strcmp(e->d_name + used, "status.json") == 0 ||
         strcmp(e->d_name + used, "live.jsonl") == 0) &&
        r + 1 > size)
      size = r + 1;
  }
  closedir(dir);
  return size;
}

/* Records ledger line r in d (the later line for a seq replaces the earlier;
 * a nested collective can close after the next one opened, so lines are not
 * strictly in seq order). */
static vqc_status merge_record(rank_dump *d, const drec *r) {
  if (d->n == 0 || r->seq > d->recs[d->n - 1].seq) return push_record(d, r);
  size_t lo = 0, hi = d->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (d->recs[mid].seq < r->seq) lo = mid + 1;
    else hi = mid;
  }
  if (lo < d->n && d->recs[lo].seq == r->seq) {
    d->recs[lo] = *r;
    return VQC_OK;
  }
  VQC_TRY(push_record(d, r)); /* grows; then moved into place */
  memmove(&d->recs[lo + 1], &d->recs[lo], (d->n - 1 - lo) * sizeof *d->recs);
  d->recs[lo] = *r;
  return VQC_OK;
}

void groups_free(proc_groups *g) {
  for (size_t i = 0; i < g->n; i++) {
    free(g->items[i].ranks);
    for (int r = 0; g->items[i].dumps && r < g->size; r++)
      free(g->items[i].dumps[r].recs);
    free(g->items[i].dumps);
  }
  free(g->items);
  memset(g, 0, sizeof *g);
}

/* *out: the group named `name` with world ranks ranks[0..n), added when
 * new. */
static vqc_status group_find(proc_groups *g, const char *name,
                             const int *ranks, int n, proc_group **out) {
  for (size_t i = 0; i < g->n; i++) {
    proc_group *x = &g->items[i];
    if (x->n == n && strcmp(x->name, name) == 0 &&
        memcmp(x->ranks, ranks, (size_t)n * sizeof *ranks) == 0) {
      *out = x;
      return VQC_OK;
    }
  }
  if (g->n == PROC_GROUPS_MAX)
    return vqc_error(VQC_EPARSE, "more than %d process groups in the "
                     "ledgers", PROC_GROUPS_MAX);
  if (g->n == g->cap) {
    size_t cap = g->cap ? 2 * g->cap : 8;
    proc_group *items = realloc(g->items, cap * sizeof *items);
    if (!items) return vqc_error(VQC_ENOMEM, "no memory for process groups");
    g->items = items;
    g->cap = cap;
  }
  proc_group *x = &g->items[g->n];
  memset(x, 0, sizeof *x);
  x->ranks = malloc((size_t)n * sizeof *ranks);
  x->dumps = calloc((size_t)g->size, sizeof *x->dumps);
  if (!x->ranks || !x->dumps) {
    free(x->ranks);
    free(x->dumps);
    return vqc_error(VQC_ENOMEM, "no memory for a process group of %d "
                     "ranks", n);
  }
  memcpy(x->ranks, ranks, (size_t)n * sizeof *ranks);
  x->n = n;
  snprintf(x->name, sizeof x->name, "%s", name);
  g->n++;
  *out = x;
  return VQC_OK;
}

/* When ledger line l names a process group ("group": its world ranks,
 * "group_name"), *into becomes that group's dump of `rank`; else it stays.
 * VQC_EPARSE naming path:line for a group that is not one: not an array of
 * distinct ranks of the run holding `rank`. */
static vqc_status group_line(const vqc_ledger_line *l, int rank,
                             const char *path, long line,
                             proc_groups *groups, rank_dump **into) {
  if (!l->has_group || !groups) return VQC_OK;
  const int n = l->ngroup;
  if (n <= 0 || n > groups->size)
    return vqc_error(VQC_EPARSE, "%s:%ld: field 'group': expected an array "
                     "of 1 to %d ranks (the process group's world ranks)",
                     path, line, groups->size);
  const int *ranks = l->group;
  bool holds = false;
  for (int i = 0; i < n; i++) {
    if (ranks[i] < 0 || ranks[i] >= groups->size)
      return vqc_error(VQC_EPARSE, "%s:%ld: field 'group': element %d is "
                       "not a rank of the run (0..%d)", path, line, i,
                       groups->size - 1);
    holds |= ranks[i] == rank;
    for (int k = 0; k < i; k++)
      if (ranks[k] == ranks[i])
        return vqc_error(VQC_EPARSE, "%s:%ld: field 'group': rank %d twice",
                         path, line, ranks[i]);
  }
  if (!holds)
    return vqc_error(VQC_EPARSE, "%s:%ld: field 'group': rank %d's line "
                     "names a group without rank %d", path, line, rank, rank);
  proc_group *g = NULL;
  VQC_TRY(group_find(groups, l->group_name, ranks, n, &g));
  *into = &g->dumps[rank];
  return VQC_OK;
}

/* A non-negative integer field of a short line, or -1 when absent or not
 * one. */
static long long short_field(const json_t *j, const char *key) {
  const json_t *v = json_object_get(j, key);
  if (!json_is_integer(v) || json_integer_value(v) < 0) return -1;
  return (long long)json_integer_value(v);
}

/* A short line (ledger_analysis.h "The live record"):
 *   {"same":SEQ,"as":K,"in":DT}  collective SEQ entered, DT ns after the
 *                                last collective entered; every other
 *                                field is slot K's (the full entered line
 *                                read when nfull % nheads was K);
 *   {"same":SEQ,"out":DT}        that call returned MPI_SUCCESS, DT ns
 *                                after it entered;
 * without "in" or "out" when DT is 0.
 * VQC_EPARSE naming path:line for one that is not such a line, names an
 * empty slot (or the start line keeps none), or is done without being
 * the short call entered last. */
static vqc_status read_short(ledger_reading *rd, const vqc_jsonl_line *l) {
  const json_t *j = l->json;
  const long long seq = short_field(j, "same"), k = short_field(j, "as");
  /* "in" and "out" absent: 0 ns (the writer leaves a 0 out) */
  const bool has_in = json_object_get(j, "in") != NULL;
  const bool has_out = json_object_get(j, "out") != NULL;
  const long long in = has_in ? short_field(j, "in") : 0;
  const long long out = has_out ? short_field(j, "out") : 0;
  const bool is_in = in >= 0 && k >= 0 && !has_out &&
                     json_object_size(j) == 2u + has_in;
  const bool is_out = out >= 0 && !has_in && !json_object_get(j, "as") &&
                      json_object_size(j) == 1u + has_out;
  if (seq < 1 || (!is_in && !is_out))
    return vqc_error(VQC_EPARSE, "%s:%ld: a short collective line is "
                     "{\"same\":SEQ,\"as\":K[,\"in\":NS]} or {\"same\":SEQ"
                     "[,\"out\":NS]}, with SEQ >= 1, K >= 0 and NS >= 0",
                     l->path, l->lineno);
  if (is_in) {
    if (k >= rd->nheads || !rd->heads[k].has)
      return vqc_error(VQC_EPARSE, "%s:%ld: a short collective line "
                       "(\"same\":%lld) takes its fields from kept head %lld, "
                       "but %s", l->path, l->lineno, seq, k,
                       rd->nheads == 0 ? "the start line keeps none "
                       "(\"heads\")" : k >= rd->nheads ? "the start line "
                       "keeps fewer" : "no full \"entered\" line before it "
                       "went there");
    drec r = rd->heads[k].r;
    r.seq = (uint64_t)seq;
    r.state = VQC_REC_ENTERED;
    r.status[0] = '\0';
    r.t_enter_ns = rd->last_t_enter + (uint64_t)in;
    rd->last_t_enter = r.t_enter_ns;
    rd->open = true;
    rd->open_seq = r.seq;
    rd->open_into = rd->heads[k].into;
    return merge_record(rd->open_into, &r);
  }
  const rank_dump *d = rd->open_into;
  long i = -1;
  if (rd->open && rd->open_seq == (uint64_t)seq) /* most often the last */
    i = d->n > 0 && d->recs[d->n - 1].seq == rd->open_seq
            ? (long)d->n - 1 : find_seq(d, rd->open_seq);
  if (i < 0)
    return vqc_error(VQC_EPARSE, "%s:%ld: collective %lld is done (\"out\") "
                     "but was not the short call entered last", l->path,
                     l->lineno, seq);
  drec *r = &rd->open_into->recs[i];
  r->state = VQC_REC_DONE;
  snprintf(r->status, sizeof r->status, "VQC_OK");
  rd->open = false;
  return VQC_OK;
}

/* One line of a live record (jsonl.h). */
static vqc_status live_line(const vqc_jsonl_line *l, void *user) {
  ledger_reading *rd = user;
  if (!json_is_object(l->json)) {
    if (!rd->d || l->torn) return VQC_OK; /* lenient, or a cut last line */
    return vqc_error(VQC_EPARSE, "%s:%ld: not a JSON object%s%s", l->path,
                     l->lineno, l->json ? "" : ": ",
                     l->json ? "" : l->err->text);
  }
  const json_t *event = json_object_get(l->json, "event");
  if (event) {
    live_event(l->json, rd->info);
    /* "heads": how many full entered lines' heads short lines name */
    const json_t *h = json_object_get(l->json, "heads");
    if (json_is_string(event) && strcmp(json_string_value(event), "start")
        == 0 && json_is_integer(h)) {
      const json_int_t n = json_integer_value(h);
      if (rd->d && (n < 0 || n > LIVE_HEADS_MAX))
        return vqc_error(VQC_EPARSE, "%s:%ld: field 'heads': %lld (expected "
                         "0 to %d)", l->path, l->lineno, (long long)n,
                         LIVE_HEADS_MAX);
      rd->nheads = n < 0 || n > LIVE_HEADS_MAX ? 0 : (int)n;
    }
    return VQC_OK;
  }
  rd->info->records++;
  if (!rd->d) return VQC_OK;
  if (json_object_get(l->json, "same")) return read_short(rd, l);
  drec r;
  rank_dump *into = rd->d; /* the world's, or a process group's */
  vqc_ledger_line ll; /* ledger_record.h */
  vqc_status s = vqc_ledger_line_decode(l->json, rd->rank, l->path,
                                        l->lineno, 0, &ll);
  if (s == VQC_OK)
    s = group_line(&ll, rd->rank, l->path, l->lineno, rd->groups, &into);
  if (s == VQC_OK) s = parse_record(&ll, l->path, l->lineno, rd->sites, &r);
  vqc_ledger_line_release(&ll);
  if (s == VQC_OK) s = merge_record(into, &r);
  if (s == VQC_OK && r.state == VQC_REC_ENTERED) {
    /* a head later short lines may name (read_short) */
    if (rd->nheads > 0) {
      const int k = (int)(rd->nfull % (uint64_t)rd->nheads);
      rd->heads[k].has = true;
      rd->heads[k].r = r;
      rd->heads[k].into = into;
    }
    rd->nfull++;
    rd->last_t_enter = r.t_enter_ns;
  }
  return s;
}

/* Reads rank-<r>.live.jsonl into *info and, when d is given, its ledger
 * lines into d (strictly: a malformed line is VQC_EPARSE naming file:line,
 * except a last line without its newline, which a full disk can cut).
 * Without d, lines that do not parse are skipped. */
vqc_status read_live(const char *path, int rank, site_table *sites,
                            rank_dump *d, proc_groups *groups,
                            vqc_live_info *info) {
  memset(info, 0, sizeof *info);
  ledger_reading rd = {.rank = rank, .sites = sites, .d = d,
                       .groups = groups, .info = info};
  /* Without d only the events are read: the ledger lines (those without
   * "event") are counted, not parsed (a long run holds millions). */
  unsigned long ledger_lines = 0;
  const vqc_jsonl_opts opts = {d ? VQC_JSONL_SKIP_TORN : VQC_JSONL_SKIP_BAD,
                               JSON_REJECT_DUPLICATES,
                               d ? NULL : "\"event\"",
                               d ? NULL : &ledger_lines};
  const vqc_status s =
      vqc_jsonl_read(path, &opts, live_line, &rd, &info->exists);
  info->records += ledger_lines;
  return s;
}
