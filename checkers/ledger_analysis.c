/* ledger_analysis.c: writes a rank's dump files and analyses the dumps of
 * every rank (see ledger_analysis.h).
 *
 * The analysis reads everything first (a malformed line is an error naming
 * file:line, never a guess), then walks sequence numbers upwards from the
 * first one every dump still holds (the ledger is a ring, so long runs keep
 * only their latest records) and stops at the first that is not DONE with
 * the same collective on every rank. Everything it reports comes from the
 * records at that sequence number and from each rank's history before it.
 *
 * Call sites repeat a lot (a training loop calls the same few collectives
 * thousands of times), so parsed records keep an index into a table of
 * distinct sites instead of their own copies of the strings.
 *
 * Lines are read through jsonl.h (bounded, mended) and a ledger line is
 * written and decoded by ledger_record.h; what is here is what the
 * analysis makes of them (which names it compares, the fingerprints). */
#include "ledger_analysis.h"
#include "utf8.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "rundir.h"
#include "jsonl.h"
#include "ledger_record.h"
#include "trace.h" /* VQC_TRACE_LINE_MAX */
#include "vqc/digest.h"
#include "vqc/fsutil.h"
#include "vqc/tensor.h"

/* ---- fingerprints */

/* Distinct odd multipliers (from splitmix64) so that swapping file and func,
 * or moving a call one line, changes the hash. */
#define MIX_FUNC 0x9E3779B97F4A7C15ull
#define MIX_LINE 0xBF58476D1CE4E5B9ull

static uint64_t site_hash_parts(const char *file, int line, const char *func) {
  file = file ? file : "";
  func = func ? func : "";
  uint64_t hf = vqc_xxh3_64(file, strlen(file));
  uint64_t hg = vqc_xxh3_64(func, strlen(func));
  return hf ^ (hg * MIX_FUNC) ^ ((uint64_t)(uint32_t)line * MIX_LINE);
}

uint64_t vqc_site_hash(vqc_site site) {
  return site_hash_parts(site.file, site.line, site.func);
}

void vqc_fingerprint_of(const vqc_ledger_record *r, vqc_coll_fingerprint *out) {
  memset(out, 0, sizeof *out); /* padding too: fingerprints travel as bytes */
  out->op = (int32_t)r->op;
  out->dtype = (int32_t)r->dtype;
  out->redop = r->op == VQC_COLL_ALL_REDUCE ? (int32_t)r->redop : -1;
  out->root = r->op == VQC_COLL_BROADCAST ? r->root : -1;
  /* all_gatherv: each rank sends its own count by design (a variably
   * sized gather); only the other fields must agree. */
  out->count = r->op == VQC_COLL_ALL_GATHERV ? 0 : r->count;
  out->site_hash = vqc_site_hash(r->site);
}

bool vqc_fingerprint_equal(const vqc_coll_fingerprint *a,
                           const vqc_coll_fingerprint *b) {
  return a->op == b->op && a->dtype == b->dtype && a->redop == b->redop &&
         a->root == b->root && a->count == b->count &&
         a->site_hash == b->site_hash;
}

void vqc_coll_describe(vqc_coll_op op, vqc_dtype dt, size_t count, int root,
                       vqc_redop redop, char *buf, size_t n) {
  const char *name = vqc_coll_name(op);
  switch (op) {
    case VQC_COLL_BARRIER:
      snprintf(buf, n, "%s()", name);
      break;
    case VQC_COLL_BROADCAST:
      snprintf(buf, n, "%s(%s, count %zu, root %d)", name, vqc_dtype_name(dt),
               count, root);
      break;
    case VQC_COLL_ALL_REDUCE:
      /* sum is what nearly every call uses: only other ops are spelled. */
      if (redop != VQC_SUM) {
        snprintf(buf, n, "%s(%s, count %zu, %s)", name, vqc_dtype_name(dt),
                 count, vqc_redop_name(redop));
        break;
      }
      /* fall through */
    default:
      snprintf(buf, n, "%s(%s, count %zu)", name, vqc_dtype_name(dt), count);
      break;
  }
}

void vqc_site_text(vqc_site site, char *buf, size_t n) {
  const char *file = site.file && site.file[0] ? site.file : "?";
  /* The same rule as vqc_finding_set_site, so detail and site agree. */
  const char *rel = strstr(file, "/lib/");
  if (!rel) rel = strstr(file, "/harness/");
  if (!rel) rel = strstr(file, "/examples/");
  snprintf(buf, n, "%s:%d %s", rel ? rel + 1 : file, site.line,
           site.func && site.func[0] ? site.func : "?");
}

int vqc_pick_expected(const vqc_coll_fingerprint *groups, const int *nranks,
                      const int *low_rank, int ngroups,
                      const vqc_coll_fingerprint *history, size_t nhistory) {
  /* What came after the last collective the last time it was called. */
  if (nhistory >= 2) {
    const vqc_coll_fingerprint *last = &history[nhistory - 1];
    for (size_t j = nhistory - 1; j-- > 0;) {
      if (!vqc_fingerprint_equal(&history[j], last)) continue;
      for (int g = 0; g < ngroups; g++)
        if (vqc_fingerprint_equal(&history[j + 1], &groups[g])) return g;
      break; /* the loop changed shape: no prediction */
    }
  }
  int best = 0;
  for (int g = 1; g < ngroups; g++)
    if (nranks[g] > nranks[best] ||
        (nranks[g] == nranks[best] && low_rank[g] < low_rank[best]))
      best = g;
  return best;
}

/* ---- paths */

static vqc_status rank_path(const char *run_dir, int rank, const char *suffix,
                            char *buf, size_t n) {
  if (!run_dir || !buf)
    return vqc_error(VQC_EINVAL, "dump path: run_dir or buffer is NULL");
  int k = snprintf(buf, n, "%s/rank-%d.%s", run_dir, rank, suffix);
  if (k < 0 || (size_t)k >= n)
    return vqc_error(VQC_EINVAL, "dump path too long for run directory %s",
                     run_dir);
  return VQC_OK;
}

vqc_status vqc_ledger_dump_path(const char *run_dir, int rank, char *buf,
                                size_t n) {
  return rank_path(run_dir, rank, "ledger.jsonl", buf, n);
}

vqc_status vqc_status_dump_path(const char *run_dir, int rank, char *buf,
                                size_t n) {
  return rank_path(run_dir, rank, "status.json", buf, n);
}

/* ---- writing */

/* The record as an object with the fields of a ledger line
 * (ledger_record.h). */
static json_t *record_json(const vqc_ledger_record *r) {
  vqc_ledger_line l;
  vqc_ledger_line_of(r, &l);
  return vqc_ledger_line_json(&l);
}

vqc_status vqc_rank_dump_write(const char *run_dir, vqc_ledger *ledger,
                               const vqc_rank_end *end) {
  if (!run_dir || !ledger || !end)
    return vqc_error(VQC_EINVAL, "vqc_rank_dump_write: NULL argument");
  char path[4096];
  VQC_TRY(vqc_ledger_dump_path(run_dir, end->rank, path, sizeof path));
  VQC_TRY(vqc_ledger_dump(ledger, path));

  uint64_t count = vqc_ledger_count(ledger);
  json_t *j = json_object();
  json_object_set_new(j, "rank", json_integer(end->rank));
  json_object_set_new(j, "size", json_integer(end->size));
  json_object_set_new(j, "status", json_string(vqc_status_name(end->status)));
  json_object_set_new(j, "step", json_integer(end->step));
  json_object_set_new(j, "last_seq", json_integer((json_int_t)count - 1));
  json_object_set_new(j, "watchdog", json_boolean(end->watchdog));
  json_object_set_new(j, "in_flight", end->has_in_flight
                                          ? record_json(&end->in_flight)
                                          : json_null());
  vqc_status s = vqc_status_dump_path(run_dir, end->rank, path, sizeof path);
  if (s == VQC_OK)
    s = vqc_json_write_atomic(path, j, JSON_INDENT(2) | JSON_SORT_KEYS);
  json_decref(j);
  return s;
}

/* ---- reading: distinct call sites */

typedef struct site_entry {
  char *file;
  char *func;
  int line;
  uint64_t hash;
} site_entry;

/* Distinct sites, with an open-addressing index (hash -> entry + 1). */
typedef struct site_table {
  site_entry *items;
  size_t n, cap;
  uint32_t *index;
  size_t nindex; /* power of two, at least 2 * cap */
} site_table;

static void sites_free(site_table *t) {
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

static vqc_site site_of(const site_table *t, uint32_t id) {
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
typedef struct record_op {
  const char *name;
  bool redop, root;
} record_op;

static const record_op record_ops[] = {
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
};
#define NRECORD_OPS ((int)(sizeof record_ops / sizeof record_ops[0]))

/* Reductions: vqcheck's (VQC_REDOP_LIST order), then torch's ReduceOp
 * names in lower case. */
static const char *const record_redops[] = {
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

/* MPI's v-forms: each rank's count may differ, so it is not compared. */
static bool varcount_op(const char *name) {
  return strcmp(name, "gatherv") == 0 || strcmp(name, "scatterv") == 0 ||
         strcmp(name, "all_to_allv") == 0;
}

static int record_op_index(const char *s) {
  for (int k = 0; k < NRECORD_OPS; k++)
    if (strcmp(s, record_ops[k].name) == 0) return k;
  return -1;
}

/* Element type names: the digest's (vqcheck's dtypes and every other
 * framework's, lib/include/vqc/digest.h), by code; 0 is "" (no data). */
static const char *dtype_text(uint8_t code) {
  vqc_digest_type t;
  if (code == 0 || vqc_digest_type_by_code(code, &t) != VQC_OK) return "";
  return t.name;
}

/* ---- reading: one rank's dump */

typedef struct drec {
  uint64_t seq;
  int32_t op;             /* index into record_ops */
  int32_t redop;          /* index into record_redops; -1 if none */
  uint8_t dtype;          /* digest type code; 0 for none */
  uint64_t count;
  int root;
  uint32_t site;          /* index into the site table */
  vqc_record_state state;
  char status[24];
  vqc_coll_fingerprint fp;
} drec;

typedef struct rank_dump {
  bool present;           /* records to compare: a dump, else a live file */
  bool dumped;            /* rank-<r>.ledger.jsonl exists */
  bool failed;            /* no dump and no end of its own (see the .h) */
  bool terminated;        /* no dump; ended by others (signal, killed) */
  vqc_live_info live;     /* rank-<r>.live.jsonl, when read */
  drec *recs;             /* by increasing seq */
  size_t n, cap;
  bool has_status;        /* rank-<r>.status.json exists */
  char status[24];        /* its "status" */
  int64_t step;
  bool watchdog;
} rank_dump;

/* A process group other than the world (a torch sub-group: a DeviceMesh
 * dimension, DDP(process_group=g), a pipeline stage's replicas). Its ledger
 * lines carry "group" (its world ranks) and "group_name", and their "seq"
 * counts that group's collectives only, so they are compared among its
 * members, in a pass of their own (ledger_analysis.h "Process groups"). */
typedef struct proc_group {
  char name[64];   /* "group_name"; "" when the line had none */
  int *ranks;      /* its world ranks, in the order written */
  int n;
  rank_dump *dumps; /* the run's size entries; members' records only */
} proc_group;

typedef struct proc_groups {
  proc_group *items;
  size_t n, cap;
  int size; /* the run's ranks */
} proc_groups;

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

  /* The fields strict mode compares (vqc_fingerprint_of); for vqcheck's own
   * collectives the same values, as op and dtype codes coincide. */
  memset(&r->fp, 0, sizeof r->fp);
  r->fp.op = r->op;
  r->fp.dtype = r->dtype;
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

/* What a reader of one rank's ledger lines works on. */
typedef struct ledger_reading {
  int rank;
  site_table *sites;
  rank_dump *d;         /* the world's records */
  proc_groups *groups;  /* NULL: lines naming a group are the world's */
  vqc_live_info *info;  /* a live record's events; NULL for a dump */
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

static vqc_status read_ledger(const char *path, int rank, site_table *sites,
                              rank_dump *d) {
  /* Bounded lines (jsonl.h): a dump that is not one cannot make this hold
   * a gigabyte line. */
  ledger_reading rd = {rank, sites, d, NULL, NULL};
  const vqc_jsonl_opts opts = {0, JSON_REJECT_DUPLICATES, NULL};
  bool present = false; /* no dump: d->present stays false */
  vqc_status s = vqc_jsonl_read(path, &opts, dump_line, &rd, &present);
  if (present) d->present = d->dumped = true;
  return s;
}

/* Reads rank-<r>.status.json if there is one. *size_out gets its "size". */
static vqc_status read_status(const char *path, int rank, rank_dump *d,
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
static int size_from_names(const char *run_dir) {
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

/* ---- the live record (ledger_analysis.h "The live record") */

vqc_status vqc_live_path(const char *run_dir, int rank, char *buf, size_t n) {
  return rank_path(run_dir, rank, "live.jsonl", buf, n);
}

struct vqc_live {
  int fd;
  bool write_failed; /* a line was lost: later ones are not attempted */
};

/* The descriptor vqc_live_note_signal writes to; -1 when none. Only set
 * once main-level code asked for it (vqc_live_signals), and then never
 * closed: a handler on another thread (MPI runs progress threads) could
 * otherwise write to a number reused by some other file. */
static _Atomic int live_signal_fd = -1;
static _Atomic bool live_signals_wanted = false;

void vqc_live_signals(void) { atomic_store(&live_signals_wanted, true); }

/* Appends s as the body of a JSON string (no quotes) to buf at *k. */
static void append_escaped(char *buf, size_t *k, size_t n, const char *s) {
  for (; s && *s && *k + 8 < n; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') {
      buf[(*k)++] = '\\';
      buf[(*k)++] = (char)ch;
    } else if (ch < 0x20) {
      *k += (size_t)snprintf(buf + *k, n - *k, "\\u%04x", ch);
    } else {
      buf[(*k)++] = (char)ch;
    }
  }
  buf[*k] = '\0';
}

/* One write(2) of a whole line: with O_APPEND, lines of the rank, of its
 * signal handler and of a supervisor never interleave. */
static void live_write(vqc_live *l, const char *line, size_t len) {
  if (!l || l->fd < 0 || l->write_failed) return;
  ssize_t w = write(l->fd, line, len);
  if (w != (ssize_t)len) l->write_failed = true;
}

vqc_status vqc_live_open(const char *run_dir, int rank, int size,
                         vqc_live **out) {
  if (!out) return vqc_error(VQC_EINVAL, "vqc_live_open: out is NULL");
  *out = NULL;
  char path[4200];
  VQC_TRY(vqc_live_path(run_dir, rank, path, sizeof path));
  vqc_live *l = calloc(1, sizeof *l);
  if (!l) return vqc_error(VQC_ENOMEM, "no memory for a live record");
  /* Never through a link or into a file of other names (vqc/fsutil.h
   * "Links"): VQC_EINVAL naming it, nothing truncated. */
  vqc_status s = vqc_open_write(path, true, true, &l->fd);
  if (s != VQC_OK) {
    free(l);
    return s;
  }
  char host[256] = "", line[1024];
  gethostname(host, sizeof host - 1);
  size_t k = (size_t)snprintf(line, sizeof line, "{\"event\":\"start\","
                              "\"rank\":%d,\"size\":%d,\"pid\":%ld,"
                              "\"host\":\"", rank, size, (long)getpid());
  append_escaped(line, &k, sizeof line - 4, host);
  k += (size_t)snprintf(line + k, sizeof line - k, "\"}\n");
  live_write(l, line, k);
  if (l->write_failed) {
    int err = errno;
    close(l->fd);
    free(l);
    return vqc_error(VQC_EIO, "cannot write %s: %s", path, strerror(err));
  }
  if (atomic_load(&live_signals_wanted)) atomic_store(&live_signal_fd, l->fd);
  *out = l;
  return VQC_OK;
}

void vqc_live_record(vqc_live *l, const vqc_ledger_record *r) {
  if (!l || !r) return;
  vqc_ledger_line ll; /* ledger_record.h */
  vqc_ledger_line_of(r, &ll);
  char line[2048];
  const size_t k = vqc_ledger_line_format(&ll, 0, line, sizeof line);
  if (k < sizeof line) {
    live_write(l, line, k);
    return;
  }
  char *big = malloc(k + 1); /* a site name of kilobytes */
  if (!big) {
    l->write_failed = true; /* the record is no longer complete */
    return;
  }
  vqc_ledger_line_format(&ll, 0, big, k + 1);
  live_write(l, big, k);
  free(big);
}

void vqc_live_step(vqc_live *l, int64_t step) {
  char line[96];
  int k = snprintf(line, sizeof line, "{\"event\":\"step\",\"step\":%" PRId64
                   "}\n", step);
  live_write(l, line, (size_t)k);
}

void vqc_live_finished(vqc_live *l, vqc_status status, int64_t step) {
  char line[160];
  int k = snprintf(line, sizeof line, "{\"event\":\"finished\",\"status\":"
                   "\"%s\",\"step\":%" PRId64 "}\n", vqc_status_name(status),
                   step);
  live_write(l, line, (size_t)k);
}

/* The finding line for the live record (malloc'd, ending in a newline), or
 * NULL. bare: without its detail and message, and with its tensor and site
 * made ASCII, for a finding whose full line cannot be written (a string
 * that is not UTF-8, which jansson refuses, or a line over the readers'
 * VQC_TRACE_LINE_MAX). */
static char *finding_line(const vqc_finding *x, bool bare) {
  /* On the heap: a finding is ~5 KiB and this runs on rank threads, whose
   * stacks are small (comm_threads.c). */
  vqc_finding *b = NULL;
  if (bare) {
    b = malloc(sizeof *b);
    if (!b) return NULL;
    *b = *x;
    b->detail = NULL;
    snprintf(b->message, sizeof b->message, "(the full finding could not be "
             "recorded: a string not UTF-8, or too long)");
    for (char *p = b->tensor; *p; p++)
      if ((unsigned char)*p >= 0x80) *p = '?';
    for (char *p = b->site; *p; p++)
      if ((unsigned char)*p >= 0x80) *p = '?';
    x = b;
  }
  json_t *f = vqc_finding_to_json(x);
  /* jansson leaves out a string member that is not UTF-8. */
  if (!json_object_get(f, "message") ||
      (x->tensor[0] && !json_object_get(f, "tensor")) ||
      (x->site[0] && !json_object_get(f, "site"))) {
    json_decref(f);
    free(b);
    return NULL;
  }
  json_t *line = json_pack("{s:s,s:o}", "event", "finding", "finding", f);
  char *text = line ? json_dumps(line, JSON_COMPACT | JSON_ENSURE_ASCII)
                    : NULL;
  json_decref(line);
  free(b);
  if (!text) return NULL;
  const size_t len = strlen(text);
  char *whole = len + 2 <= VQC_TRACE_LINE_MAX ? realloc(text, len + 2) : NULL;
  if (!whole) {
    free(text);
    return NULL;
  }
  whole[len] = '\n';
  whole[len + 1] = '\0';
  return whole;
}

void vqc_live_finding(vqc_live *l, const vqc_finding *x) {
  if (!l || !x) return;
  char *line = finding_line(x, false);
  if (!line) line = finding_line(x, true);
  if (!line) {
    l->write_failed = true; /* the record is no longer complete */
    return;
  }
  live_write(l, line, strlen(line));
  free(line);
}

void vqc_live_close(vqc_live *l) {
  if (!l) return;
  /* The signal handler's descriptor stays open to the end of the process
   * (see live_signal_fd). */
  if (l->fd >= 0 && l->fd != atomic_load(&live_signal_fd)) close(l->fd);
  free(l);
}

void vqc_live_note_signal(int sig) {
  int fd = atomic_load(&live_signal_fd);
  if (fd < 0) return;
  /* No stdio in a handler: the digits by hand. */
  static const char head[] = "{\"event\":\"signal\",\"signal\":";
  char line[sizeof head + 16];
  size_t k = sizeof head - 1;
  memcpy(line, head, k);
  char digits[12];
  int nd = 0;
  unsigned v = sig > 0 ? (unsigned)sig : 0u;
  do {
    digits[nd++] = (char)('0' + v % 10);
    v /= 10;
  } while (v && nd < (int)sizeof digits);
  while (nd > 0) line[k++] = digits[--nd];
  line[k++] = '}';
  line[k++] = '\n';
  ssize_t w = write(fd, line, k);
  (void)w;
}

vqc_status vqc_live_mark(const char *run_dir, int rank, const char *event,
                         const char *by, const char *why) {
  char path[4200], line[1024];
  VQC_TRY(vqc_live_path(run_dir, rank, path, sizeof path));
  size_t k = (size_t)snprintf(line, sizeof line, "{\"event\":\"");
  append_escaped(line, &k, 64, event);
  k += (size_t)snprintf(line + k, sizeof line - k, "\",\"by\":\"");
  append_escaped(line, &k, 200, by);
  k += (size_t)snprintf(line + k, sizeof line - k, "\",\"why\":\"");
  append_escaped(line, &k, sizeof line - 8, why);
  k += (size_t)snprintf(line + k, sizeof line - k, "\"}\n");
  int fd = -1;
  VQC_TRY(vqc_open_write(path, false, true, &fd)); /* no link followed */
  ssize_t w = write(fd, line, k);
  int err = errno;
  close(fd);
  if (w != (ssize_t)k)
    return vqc_error(VQC_EIO, "cannot write %s: %s", path, strerror(err));
  return VQC_OK;
}

/* The signals a rank's process is seen killed by, with their names: the
 * name is what a person searches for ("SIGABRT gloo"), strsignal's text
 * what they read. */
static const struct {
  int sig;
  const char *name;
} signal_names[] = {
    {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"},
    {SIGILL, "SIGILL"},   {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"},
    {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"},
    {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
    {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},
    {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"},
};

void vqc_signal_text(int sig, char *buf, size_t n) {
  const char *name = NULL;
  for (size_t i = 0; i < sizeof signal_names / sizeof signal_names[0]; i++)
    if (signal_names[i].sig == sig) name = signal_names[i].name;
  if (name)
    snprintf(buf, n, "signal %d (%s, %s)", sig, name, strsignal(sig));
  else
    snprintf(buf, n, "signal %d (%s)", sig, strsignal(sig));
}

vqc_status vqc_live_mark_end(const char *run_dir, int rank, const char *by,
                             int signal, int exit_code,
                             const char *last_words) {
  char path[4200], why[128], sig[96];
  VQC_TRY(vqc_live_path(run_dir, rank, path, sizeof path));
  if (signal > 0) {
    vqc_signal_text(signal, sig, sizeof sig);
    snprintf(why, sizeof why, "killed by %s", sig);
  } else {
    snprintf(why, sizeof why, "exited with status %d", exit_code);
  }
  json_t *j = json_object();
  json_object_set_new(j, "event", json_string("lost"));
  json_object_set_new(j, "by", json_string(by ? by : ""));
  json_object_set_new(j, "why", json_string(why));
  json_object_set_new(j, signal > 0 ? "signal" : "exit_code",
                      json_integer(signal > 0 ? signal : exit_code));
  if (last_words && last_words[0]) {
    /* Its end, from a character's start (the cut may fall inside one). */
    size_t len = strlen(last_words), from = 0;
    if (len > VQC_LIVE_LAST_WORDS - 1) from = len - (VQC_LIVE_LAST_WORDS - 1);
    while (from < len && ((unsigned char)last_words[from] & 0xC0) == 0x80)
      from++;
    /* Bytes that are not UTF-8 become '?' (utf8.h): the words stay. */
    json_object_set_new(j, "last_words",
                        vqc_json_text_opts(last_words + from, len - from,
                                           VQC_UTF8_TAIL |
                                               VQC_UTF8_NO_CONTROLS,
                                           NULL));
  }
  char *text = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
  json_decref(j);
  if (!text) return vqc_error(VQC_ENOMEM, "no memory for a live record line");
  /* One write(2) of the whole line (O_APPEND): never interleaved. */
  const size_t k = strlen(text);
  char *line = realloc(text, k + 2);
  if (!line) {
    free(text);
    return vqc_error(VQC_ENOMEM, "no memory for a live record line");
  }
  line[k] = '\n';
  line[k + 1] = '\0';
  int fd = -1;
  vqc_status s = vqc_open_write(path, false, true, &fd); /* no link */
  if (s != VQC_OK) {
    free(line);
    return s;
  }
  ssize_t w = write(fd, line, k + 1);
  int err = errno;
  close(fd);
  free(line);
  if (w != (ssize_t)(k + 1))
    return vqc_error(VQC_EIO, "cannot write %s: %s", path, strerror(err));
  return VQC_OK;
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

/* Drops an incomplete character at the end of s (a copy cut to its
 * buffer), so that the text stays UTF-8 for the findings it goes into. */
static void utf8_cut(char *s) {
  size_t k = strlen(s), lead = k;
  while (lead > 0 && ((unsigned char)s[lead - 1] & 0xC0) == 0x80) lead--;
  if (lead == 0 || (unsigned char)s[lead - 1] < 0xC0) return;
  const unsigned char c = (unsigned char)s[lead - 1];
  const size_t want = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
  if (k - (lead - 1) < want) s[lead - 1] = '\0';
}

/* Applies event line j (it has "event") to *info. */
static void live_event(const json_t *j, vqc_live_info *info) {
  const char *ev = json_string_value(json_object_get(j, "event"));
  const json_t *v;
  if (!ev) return;
  if (strcmp(ev, "start") == 0) {
    info->started = true;
    if (json_is_integer(v = json_object_get(j, "size")))
      info->size = (int)json_integer_value(v);
    if (json_is_integer(v = json_object_get(j, "pid")))
      info->pid = (long)json_integer_value(v);
    if (json_is_string(v = json_object_get(j, "host")))
      snprintf(info->host, sizeof info->host, "%s", json_string_value(v));
  } else if (strcmp(ev, "step") == 0) {
    if (json_is_integer(v = json_object_get(j, "step")))
      info->steps_done = (int64_t)json_integer_value(v) + 1;
  } else if (strcmp(ev, "finished") == 0) {
    info->finished = true;
    if (json_is_string(v = json_object_get(j, "status")))
      snprintf(info->status, sizeof info->status, "%s",
               json_string_value(v));
  } else if (strcmp(ev, "signal") == 0) {
    if (json_is_integer(v = json_object_get(j, "signal")))
      info->signal = (int)json_integer_value(v);
    if (info->signal <= 0) info->signal = -1;
  } else if (strcmp(ev, "lost") == 0 || strcmp(ev, "killed") == 0) {
    bool lost = ev[0] == 'l';
    if (lost) info->lost = true;
    else info->killed = true;
    if ((lost || !info->why[0]) &&
        json_is_string(v = json_object_get(j, "why")))
      snprintf(info->why, sizeof info->why, "%s", json_string_value(v));
    /* How the process ended, as its supervisor saw it (vqc_live_mark_end). */
    if (lost && json_is_integer(v = json_object_get(j, "signal")) &&
        json_integer_value(v) > 0 && json_integer_value(v) < 256)
      info->end_signal = (int)json_integer_value(v);
    if (lost && json_is_string(v = json_object_get(j, "last_words"))) {
      snprintf(info->last_words, sizeof info->last_words, "%s",
               json_string_value(v));
      utf8_cut(info->last_words);
    }
  }
}

static void groups_free(proc_groups *g) {
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

/* One line of a live record (jsonl.h). */
static vqc_status live_line(const vqc_jsonl_line *l, void *user) {
  ledger_reading *rd = user;
  if (!json_is_object(l->json)) {
    if (!rd->d || l->torn) return VQC_OK; /* lenient, or a cut last line */
    return vqc_error(VQC_EPARSE, "%s:%ld: not a JSON object%s%s", l->path,
                     l->lineno, l->json ? "" : ": ",
                     l->json ? "" : l->err->text);
  }
  if (json_object_get(l->json, "event")) {
    live_event(l->json, rd->info);
    return VQC_OK;
  }
  rd->info->records++;
  if (!rd->d) return VQC_OK;
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
  return s;
}

/* Reads rank-<r>.live.jsonl into *info and, when d is given, its ledger
 * lines into d (strictly: a malformed line is VQC_EPARSE naming file:line,
 * except a last line without its newline, which a full disk can cut).
 * Without d, lines that do not parse are skipped. */
static vqc_status read_live(const char *path, int rank, site_table *sites,
                            rank_dump *d, proc_groups *groups,
                            vqc_live_info *info) {
  memset(info, 0, sizeof *info);
  ledger_reading rd = {rank, sites, d, groups, info};
  const vqc_jsonl_opts opts = {d ? VQC_JSONL_SKIP_TORN : VQC_JSONL_SKIP_BAD,
                               JSON_REJECT_DUPLICATES, NULL};
  return vqc_jsonl_read(path, &opts, live_line, &rd, &info->exists);
}

vqc_status vqc_live_scan(const char *run_dir, int rank, vqc_live_info *out) {
  if (!out) return vqc_error(VQC_EINVAL, "vqc_live_scan: out is NULL");
  memset(out, 0, sizeof *out);
  char path[4200];
  VQC_TRY(vqc_live_path(run_dir, rank, path, sizeof path));
  return read_live(path, rank, NULL, NULL, NULL, out);
}

/* ---- the analysis */

/* Index of seq in d's records, or -1. */
static long find_seq(const rank_dump *d, uint64_t seq) {
  size_t lo = 0, hi = d->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (d->recs[mid].seq < seq) lo = mid + 1;
    else hi = mid;
  }
  return lo < d->n && d->recs[lo].seq == seq ? (long)lo : -1;
}

/* "0, 2, 3", "0-1021, 1023": folded ranges (findings.h), so that a
 * message about 1024 ranks stays a sentence. */
static void rank_list(const int *ranks, int n, char *buf, size_t len) {
  vqc_rank_ranges_text(ranks, n, buf, len);
}

/* Appends printf output to buf (length *k, capacity n), truncating. */
static void appendf(char *buf, size_t *k, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void appendf(char *buf, size_t *k, size_t n, const char *fmt, ...) {
  if (*k >= n) return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(buf + *k, n - *k, fmt, ap);
  va_end(ap);
  if (w > 0) *k = *k + (size_t)w < n ? *k + (size_t)w : n - 1;
}

/* vqc_coll_describe's text, for any record (torch's collectives too):
 * "all_reduce(float32, count 16)", "reduce_scatter(bfloat16, count 8, avg)",
 * "broadcast(float32, count 4, root 0)", "barrier()". */
static void describe_rec(const drec *r, char *buf, size_t n) {
  const record_op *kind = &record_ops[r->op];
  size_t k = 0;
  appendf(buf, &k, n, "%s(", kind->name);
  if (r->op == VQC_COLL_BARRIER) {
    appendf(buf, &k, n, ")");
    return;
  }
  if (r->dtype != 0) appendf(buf, &k, n, "%s, ", dtype_text(r->dtype));
  appendf(buf, &k, n, "count %" PRIu64, r->count);
  if (kind->root) appendf(buf, &k, n, ", root %d", r->root);
  if (kind->redop && r->redop > 0)
    appendf(buf, &k, n, ", %s", record_redops[r->redop]);
  appendf(buf, &k, n, ")");
}

/* The state of one analysis (everything read from the run directory). */
typedef struct analysis {
  const char *run_dir;
  int size;
  rank_dump *dumps;   /* size entries */
  site_table sites;
  /* A process group's pass (group_pass): its members (size entries), whose
   * dumps hold the group's records; NULL in the world's pass. */
  const bool *member;
} analysis;

/* Whether rank r takes part in this pass: every rank in the world's, the
 * members in a process group's. */
static bool in_pass(const analysis *a, int r) {
  return !a->member || a->member[r];
}

static json_t *record_detail(const analysis *a, const drec *r) {
  char desc[128], site[512];
  describe_rec(r, desc, sizeof desc);
  vqc_site_text(site_of(&a->sites, r->site), site, sizeof site);
  json_t *j = json_object();
  json_object_set_new(j, "seq", json_integer((json_int_t)r->seq));
  json_object_set_new(j, "op", json_string(record_ops[r->op].name));
  json_object_set_new(j, "dtype", json_string(dtype_text(r->dtype)));
  json_object_set_new(j, "count", json_integer((json_int_t)r->count));
  if (record_ops[r->op].root)
    json_object_set_new(j, "root", json_integer(r->root));
  if (record_ops[r->op].redop)
    json_object_set_new(j, "redop", json_string(record_redops[r->redop]));
  json_object_set_new(j, "site", json_string(site));
  json_object_set_new(j, "state", json_string(vqc_record_state_name(r->state)));
  json_object_set_new(j, "status", json_string(r->status));
  json_object_set_new(j, "describe", json_string(desc));
  return j;
}

/* Whether rank d reached its end cleanly: a status file, or a live record
 * whose end line, says VQC_OK. */
static bool ended_cleanly(const rank_dump *d) {
  if (d->has_status) return strcmp(d->status, "VQC_OK") == 0;
  return d->live.finished && strcmp(d->live.status, "VQC_OK") == 0;
}

/* A process's last stderr lines (a "lost" line's last_words) for a message:
 * at most the last 3 lines, joined by " / ", in buf (room bytes with its
 * NUL). When they do not fit, their end (what a process says last tells
 * most), from a character's start, after "... ". "" when there are none. */
static void last_words_text(const char *w, char *buf, size_t room) {
  buf[0] = '\0';
  if (room < 16) return;
  size_t end = strlen(w);
  while (end > 0 && (w[end - 1] == '\n' || w[end - 1] == '\r' ||
                     w[end - 1] == ' '))
    end--;
  size_t start = end;
  int lines = 0;
  while (start > 0 && !(w[start - 1] == '\n' && ++lines == 3)) start--;
  /* Joined, from the end backwards: a newline becomes " / ". */
  char joined[3 * VQC_LIVE_LAST_WORDS];
  size_t m = sizeof joined - 1, stop = start;
  joined[m] = '\0';
  for (size_t i = end; i > start && m >= 3; i--) {
    const char c = w[i - 1];
    if (c == '\r') continue;
    if (c == '\n') {
      m -= 3;
      memcpy(joined + m, " / ", 3);
    } else {
      joined[--m] = c;
    }
    stop = i - 1;
  }
  const char *from = joined + m;
  const size_t len = sizeof joined - 1 - m;
  if (stop == start && len + 1 <= room) {
    memcpy(buf, from, len + 1);
    return;
  }
  static const char cut[] = "... ";
  if (len > room - sizeof cut) from += len - (room - sizeof cut);
  while (*from && ((unsigned char)*from & 0xC0) == 0x80) from++;
  snprintf(buf, room, "%s%s", cut, from);
}

/* Where rank r is instead of collective `seq`: one phrase for the detail and
 * the message. */
static void where_of(const analysis *a, int r, uint64_t seq, char *buf,
                     size_t n) {
  const rank_dump *d = &a->dumps[r];
  char desc[128], site[512];
  size_t k = 0;
  buf[0] = '\0';
  if (!d->present) {
    appendf(buf, &k, n, "no ledger dump (rank failed)");
    return;
  }
  long i = find_seq(d, seq);
  if (i >= 0) {
    const drec *x = &d->recs[i];
    describe_rec(x, desc, sizeof desc);
    vqc_site_text(site_of(&a->sites, x->site), site, sizeof site);
    if (x->state == VQC_REC_DONE)
      appendf(buf, &k, n, "called %s at %s instead (it completed)", desc,
              site);
    else if (x->state == VQC_REC_ENTERED)
      appendf(buf, &k, n, "waiting in %s at %s", desc, site);
    else
      appendf(buf, &k, n, "waiting in %s at %s (ended %s)", desc, site,
              x->status);
    return;
  }
  /* No record at seq: where it stopped. */
  const drec *last = NULL;
  for (size_t j = d->n; j > 0 && !last; j--)
    if (d->recs[j - 1].seq < seq && d->recs[j - 1].state == VQC_REC_DONE)
      last = &d->recs[j - 1];
  if (last) {
    describe_rec(last, desc, sizeof desc);
    vqc_site_text(site_of(&a->sites, last->site), site, sizeof site);
    appendf(buf, &k, n, "last completed seq %" PRIu64 " %s at %s", last->seq,
            desc, site);
  } else if (d->n > 0) {
    appendf(buf, &k, n, "never completed a collective");
  } else {
    appendf(buf, &k, n, "never called a collective");
  }
  char sig[96] = "";
  if (d->live.signal > 0) vqc_signal_text(d->live.signal, sig, sizeof sig);
  if (d->has_status && strcmp(d->status, "VQC_OK") == 0)
    appendf(buf, &k, n, "; it left its training loop (VQC_OK)");
  else if (d->has_status)
    appendf(buf, &k, n, "; its training ended with %s", d->status);
  else if (d->failed)
    appendf(buf, &k, n, "; its record stops there (%s)",
            d->live.lost && d->live.why[0] ? d->live.why : "no end record");
  else if (ended_cleanly(d)) /* a live record only (the Python bridge) */
    appendf(buf, &k, n, "; it left its training loop (VQC_OK) after %" PRId64
            " step%s", d->live.steps_done,
            d->live.steps_done == 1 ? "" : "s");
  else if (d->live.finished)
    appendf(buf, &k, n, "; its training ended with %s", d->live.status);
  else if (d->live.signal > 0)
    appendf(buf, &k, n, "; then terminated by %s", sig);
  else if (d->live.killed)
    appendf(buf, &k, n, "; then killed (%s)", d->live.why);
}

/* Whether sequence number seq is DONE with one collective on every rank
 * that left a dump. */
static bool seq_settled(const analysis *a, uint64_t seq) {
  const drec *first = NULL;
  for (int r = 0; r < a->size; r++) {
    const rank_dump *d = &a->dumps[r];
    if (!d->present) continue;
    long i = find_seq(d, seq);
    if (i < 0 || d->recs[i].state != VQC_REC_DONE) return false;
    if (!first) first = &d->recs[i];
    else if (!vqc_fingerprint_equal(&first->fp, &d->recs[i].fp)) return false;
  }
  return true;
}

/* The history before seq (fingerprints, oldest first) from rank r's dump,
 * at most `max` entries; *n gets how many. Caller frees. */
static vqc_coll_fingerprint *history_of(const rank_dump *d, uint64_t seq,
                                        size_t max, size_t *n) {
  *n = 0;
  size_t end = 0;
  while (end < d->n && d->recs[end].seq < seq) end++;
  size_t start = end > max ? end - max : 0;
  vqc_coll_fingerprint *h = malloc((end - start + 1) * sizeof *h);
  if (!h) return NULL;
  for (size_t i = start; i < end; i++) h[(*n)++] = d->recs[i].fp;
  return h;
}

/* How far back the skip heuristic looks: a few training steps' worth of
 * collectives, bounded so the analysis stays linear in practice. */
#define HISTORY_MAX 4096
/* How many distinct places of missing ranks a deadlock message names (the
 * detail lists every rank's). */
#define WHERE_SHOWN 4
/* How many failed ranks a rank_failure message tells one by one. */
#define FAILED_SHOWN 3

static vqc_status report(analysis *a, uint64_t seq, bool stuck, int64_t step,
                         vqc_findings *out, int *nadded);

/* The first sequence number of a's dumps that is not settled, and whether
 * there is one (*stuck): the window every dump still holds runs from the
 * latest first record (the rings dropped older ones) to past the last
 * record of any rank. */
static uint64_t first_unsettled(const analysis *a, bool *stuck) {
  uint64_t lo = 0, hi = 0;
  for (int r = 0; r < a->size; r++) {
    const rank_dump *d = &a->dumps[r];
    if (!d->present || d->n == 0) continue;
    if (d->recs[0].seq > lo) lo = d->recs[0].seq;
    if (d->recs[d->n - 1].seq + 1 > hi) hi = d->recs[d->n - 1].seq + 1;
  }
  uint64_t seq = lo;
  while (seq < hi && seq_settled(a, seq)) seq++;
  *stuck = seq < hi;
  return seq;
}

/* The analysis of process group g's collectives among its members, after
 * the world's (whose dumps, `world`, say how each rank ended): a deadlock
 * or collective_mismatch there, its message starting "in process group
 * NAME (ranks ...): " and its detail holding "process_group": {"name",
 * "ranks"}. Nothing when the group's calls all settled. */
static vqc_status group_pass(const analysis *world, const proc_groups *all,
                             proc_group *g, int64_t step, vqc_findings *out,
                             int *nadded) {
  const int size = world->size;
  /* A member with no call in g but calls in another group of the same
   * ranks: the ranks did not name their group alike (torch's
   * use_local_synchronization names a group by a per-process counter), so
   * its calls cannot be aligned by name: not compared, never a finding. */
  for (int i = 0; i < g->n; i++) {
    const int r = g->ranks[i];
    if (g->dumps[r].n > 0 || !world->dumps[r].present) continue;
    for (size_t k = 0; k < all->n; k++) {
      const proc_group *h = &all->items[k];
      if (h != g && h->n == g->n && h->dumps[r].n > 0 &&
          memcmp(h->ranks, g->ranks, (size_t)g->n * sizeof *g->ranks) == 0)
        return VQC_OK;
    }
  }
  bool *member = calloc((size_t)size, sizeof *member);
  if (!member) return vqc_error(VQC_ENOMEM, "no memory for a group pass");
  for (int i = 0; i < g->n; i++) {
    const int r = g->ranks[i];
    member[r] = true;
    /* How the rank ended is the world's story; the records are the
     * group's. */
    rank_dump *d = &g->dumps[r];
    drec *recs = d->recs;
    const size_t n = d->n, cap = d->cap;
    *d = world->dumps[r];
    d->recs = recs;
    d->n = n;
    d->cap = cap;
  }
  analysis a = {.run_dir = world->run_dir, .size = size, .dumps = g->dumps,
                .sites = world->sites, .member = member};
  bool stuck = false;
  const uint64_t seq = first_unsettled(&a, &stuck);
  const int before = out->count;
  int added = 0;
  vqc_status s = stuck ? report(&a, seq, true, step, out, &added) : VQC_OK;
  char rl[256], head[384];
  rank_list(g->ranks, g->n, rl, sizeof rl);
  snprintf(head, sizeof head, "in process group %s%s(rank%s %s): ",
           g->name, g->name[0] ? " " : "", g->n == 1 ? "" : "s", rl);
  for (int i = before; s == VQC_OK && i < out->count; i++) {
    vqc_finding *f = &out->items[i];
    char msg[sizeof f->message];
    size_t k = 0;
    appendf(msg, &k, sizeof msg, "%s", head);
    appendf(msg, &k, sizeof msg, "%s", f->message);
    memcpy(f->message, msg, sizeof msg);
    utf8_cut(f->message);
    json_t *pg = json_object(), *jr = json_array();
    for (int m = 0; m < g->n; m++)
      json_array_append_new(jr, json_integer(g->ranks[m]));
    json_object_set_new(pg, "name", vqc_json_text(g->name, strlen(g->name)));
    json_object_set_new(pg, "ranks", jr);
    json_object_set_new(f->detail, "process_group", pg);
  }
  if (nadded) *nadded += added;
  free(member);
  return s;
}

vqc_status vqc_ledger_analyze(const char *run_dir, int size, int64_t step,
                              vqc_findings *out, int *nadded) {
  if (nadded) *nadded = 0;
  if (!run_dir || !out)
    return vqc_error(VQC_EINVAL, "vqc_ledger_analyze: NULL argument");
  analysis a = {.run_dir = run_dir};
  vqc_status s = VQC_OK;
  char path[4096];

  /* The size: given, else from a status file, else from the file names. */
  if (size <= 0) {
    int names = size_from_names(run_dir);
    for (int r = 0; r < names && size <= 0; r++) {
      rank_dump tmp = {0};
      int sz = 0;
      VQC_TRY(vqc_status_dump_path(run_dir, r, path, sizeof path));
      VQC_TRY(read_status(path, r, &tmp, &sz));
      if (tmp.has_status) size = sz;
      if (size <= 0 && vqc_live_scan(run_dir, r, &tmp.live) == VQC_OK &&
          tmp.live.size > 0)
        size = tmp.live.size;
    }
    if (size < names) size = names;
    if (size <= 0)
      return vqc_error(VQC_EINVAL, "%s holds no rank-<r>.ledger.jsonl or "
                       "rank-<r>.status.json dumps to analyse",
                       run_dir);
  }
  a.size = size;
  a.dumps = calloc((size_t)size, sizeof *a.dumps);
  if (!a.dumps) return vqc_error(VQC_ENOMEM, "no memory for %d dumps", size);
  proc_groups groups = {.size = size};

  int present = 0;
  for (int r = 0; r < size && s == VQC_OK; r++) {
    int sz = 0;
    a.dumps[r].step = -1;
    s = vqc_ledger_dump_path(run_dir, r, path, sizeof path);
    if (s == VQC_OK) s = read_ledger(path, r, &a.sites, &a.dumps[r]);
    if (s == VQC_OK) s = vqc_status_dump_path(run_dir, r, path, sizeof path);
    if (s == VQC_OK) s = read_status(path, r, &a.dumps[r], &sz);
    if (s == VQC_OK && a.dumps[r].has_status && sz != size)
      s = vqc_error(VQC_EPARSE, "%s:1: field 'size': %d, but the run has %d "
                    "ranks", path, sz, size);
    /* No dump: the live record stands in for it, and says how the rank
     * ended (ledger_analysis.h). */
    rank_dump *d = &a.dumps[r];
    if (s == VQC_OK && !d->dumped) {
      s = vqc_live_path(run_dir, r, path, sizeof path);
      if (s == VQC_OK)
        s = read_live(path, r, &a.sites, d, &groups, &d->live);
      if (s == VQC_OK && d->live.exists) d->present = true;
      const bool ended_by_others = d->live.signal != 0 || d->live.killed;
      /* A status file without its ledger dump (written first) means the
       * dump is lost: failed, as a rank without either. */
      d->failed = d->has_status || !d->live.exists || d->live.lost ||
                  (!d->live.finished && !ended_by_others);
      d->terminated = !d->failed && !d->has_status && !d->live.finished;
    }
    if (d->present) present++;
  }
  if (s == VQC_OK && present == 0)
    s = vqc_error(VQC_EINVAL, "%s holds no ledger dumps or live records "
                  "of ranks 0..%d (rank-<r>.ledger.jsonl, "
                  "rank-<r>.live.jsonl)", run_dir, size - 1);

  if (s == VQC_OK) {
    bool stuck = false;
    const uint64_t seq = first_unsettled(&a, &stuck);
    s = report(&a, seq, stuck, step, out, nadded);
  }
  /* Then each process group's collectives among its members. */
  for (size_t i = 0; s == VQC_OK && i < groups.n; i++)
    s = group_pass(&a, &groups, &groups.items[i], step, out, nadded);

  for (int r = 0; r < size; r++) free(a.dumps[r].recs);
  free(a.dumps);
  groups_free(&groups);
  sites_free(&a.sites);
  return s;
}

/* ---- one call site, other arguments: collective_mismatch */

/* How a rank's call of the mismatched collective ended. */
typedef enum {
  END_RETURNED,   /* it returned (the backend paired the calls) */
  END_FAILED,     /* it returned an error (its status) */
  END_DIED,       /* the rank's record stops there: its process died */
  END_DIED_AFTER, /* it returned, then died with nothing else recorded */
  END_WAITING,    /* still in it when the record was read */
  END_TERMINATED  /* in it when others ended the rank (signal, killed) */
} call_end;

static const char *const call_end_names[] = {
    "returned", "failed", "died", "died after it returned", "waiting",
    "terminated"};

/* How rank r's call at seq ended: the code, and for END_FAILED the status,
 * for END_DIED why (what killed it, when its supervisor saw it). */
static call_end call_ending(const analysis *a, int r, uint64_t seq,
                            char *why, size_t n) {
  const rank_dump *d = &a->dumps[r];
  const long i = find_seq(d, seq);
  const drec *x = &d->recs[i];
  why[0] = '\0';
  /* Its record stops at this call and it reached no end: it died there. */
  if (d->failed && i == (long)d->n - 1) {
    if (d->live.end_signal > 0) {
      char sig[96];
      vqc_signal_text(d->live.end_signal, sig, sizeof sig);
      /* An abort inside a collective is the backend's (gloo's enforce,
       * NCCL's, c10's): it checked the sizes and gave up. */
      snprintf(why, n, "killed by %s%s", sig,
               d->live.end_signal == SIGABRT && x->state != VQC_REC_DONE
                   ? ": the backend aborted on the mismatch"
                   : "");
    } else if (d->live.lost && d->live.why[0]) {
      snprintf(why, n, "%s", d->live.why);
    } else {
      snprintf(why, n, "its record stops there, with no end record");
    }
    utf8_cut(why); /* the copy of a "why" may be cut inside a character */
    return x->state == VQC_REC_DONE ? END_DIED_AFTER : END_DIED;
  }
  if (x->state == VQC_REC_DONE) return END_RETURNED;
  if (x->state == VQC_REC_FAILED) {
    snprintf(why, n, "%s", x->status[0] ? x->status : "an error");
    return END_FAILED;
  }
  return d->terminated ? END_TERMINATED : END_WAITING;
}

/* The phrase for ranks `rl` (n of them) whose calls ended as `e`. */
static void ending_text(call_end e, const char *rl, int n, const char *why,
                        char *buf, size_t cap) {
  const bool one = n == 1;
  switch (e) {
    case END_RETURNED:
      snprintf(buf, cap, "rank%s %s returned from it", one ? "" : "s", rl);
      break;
    case END_FAILED:
      if (one)
        snprintf(buf, cap, "rank %s's call failed (%s)", rl, why);
      else
        snprintf(buf, cap, "the calls of ranks %s failed (%s)", rl, why);
      break;
    case END_DIED:
    case END_DIED_AFTER:
      snprintf(buf, cap, "rank%s %s died %s (%s)", one ? "" : "s", rl,
               e == END_DIED ? "in it" : "after it returned", why);
      break;
    case END_WAITING:
      snprintf(buf, cap, "rank%s %s wait%s in it", one ? "" : "s", rl,
               one ? "s" : "");
      break;
    case END_TERMINATED:
      snprintf(buf, cap, "rank%s %s %s terminated while waiting in it",
               one ? "" : "s", rl, one ? "was" : "were");
      break;
  }
}

/* Whether every group at seq is the same collective at the same call site
 * (only count, dtype, root or reduction differ): the same line called with
 * other arguments, not a skipped or extra call. */
static bool same_call(const vqc_coll_fingerprint *gfp, int ngroups) {
  for (int g = 1; g < ngroups; g++)
    if (gfp[g].op != gfp[0].op || gfp[g].site_hash != gfp[0].site_hash)
      return false;
  return ngroups > 1;
}

/* The collective_mismatch of one call site called with other arguments at
 * seq (ledger_analysis.h). group[r]: rank r's group at seq (-1: no record
 * there); gfp, gn, grec: each group's fingerprint, size and first record;
 * expected: vqc_pick_expected's group. */
static vqc_status report_mismatch(const analysis *a, uint64_t seq,
                                  int64_t step, const int *group,
                                  const vqc_coll_fingerprint *gfp,
                                  const int *gn, const drec *const *grec,
                                  int ngroups, int expected,
                                  vqc_findings *out, int *nadded) {
  const int size = a->size;
  int *ranks = malloc((size_t)size * sizeof *ranks);
  int *ends = malloc((size_t)size * sizeof *ends);
  char (*whys)[256] = malloc((size_t)size * sizeof *whys);
  if (!ranks || !ends || !whys) {
    free(ranks);
    free(ends);
    free(whys);
    return vqc_error(VQC_ENOMEM, "no memory for the analysis of %d ranks",
                     size);
  }

  /* What differs: the fields the fingerprint compares, site and op aside. */
  bool dcount = false, ddtype = false, droot = false, dredop = false;
  for (int g = 1; g < ngroups; g++) {
    dcount |= gfp[g].count != gfp[0].count;
    ddtype |= gfp[g].dtype != gfp[0].dtype;
    droot |= gfp[g].root != gfp[0].root;
    dredop |= gfp[g].redop != gfp[0].redop;
  }
  const char *fields[4];
  int nfields = 0;
  if (dcount) fields[nfields++] = "count";
  if (ddtype) fields[nfields++] = "dtype";
  if (droot) fields[nfields++] = "root";
  if (dredop) fields[nfields++] = "reduction";
  char differs[64] = "";
  size_t kd = 0;
  for (int i = 0; i < nfields; i++)
    appendf(differs, &kd, sizeof differs, "%s%s",
            i == 0 ? "" : i == nfields - 1 ? " and " : ", ", fields[i]);

  const drec *x = grec[expected];
  const vqc_site site = site_of(&a->sites, x->site);
  char stext[512];
  vqc_site_text(site, stext, sizeof stext);

  /* The ranks named: outside a strict majority, else every caller (1
   * against 1 says nothing about which side is wrong). */
  int ncalled = 0;
  for (int g = 0; g < ngroups; g++) ncalled += gn[g];
  const bool majority = 2 * gn[expected] > ncalled;

  vqc_finding f;
  vqc_finding_init(&f, VQC_FINDING_COLLECTIVE_MISMATCH, step, "%s", "");
  vqc_finding_set_site(&f, site);
  for (int r = 0; r < size; r++)
    if (group[r] >= 0 && !(majority && group[r] == expected))
      vqc_finding_add_rank(&f, r);

  char *msg = f.message;
  const size_t cap = sizeof f.message;
  size_t k = 0;
  appendf(msg, &k, cap, "collective #%" PRIu64 " %s at %s was called with a "
          "different %s on different ranks: ", seq, record_ops[x->op].name,
          stext, differs);
  /* Each group's call, the expected one first. */
  for (int i = 0, shown = 0; i < ngroups; i++) {
    const int g = i == 0 ? expected : i <= expected ? i - 1 : i;
    int n = 0;
    for (int r = 0; r < size; r++)
      if (group[r] == g) ranks[n++] = r;
    if (shown == WHERE_SHOWN) {
      appendf(msg, &k, cap, ", %d more calls", ngroups - shown);
      break;
    }
    char rl[256], desc[128];
    rank_list(ranks, n, rl, sizeof rl);
    describe_rec(grec[g], desc, sizeof desc);
    appendf(msg, &k, cap, "%srank%s %s %s", shown ? ", " : "",
            n == 1 ? "" : "s", rl, desc);
    shown++;
  }

  /* How each call ended, ranks with the same ending told together. */
  bool all_returned = true;
  for (int r = 0; r < size; r++) {
    if (group[r] < 0) continue;
    ends[r] = (int)call_ending(a, r, seq, whys[r], sizeof whys[r]);
    all_returned &= ends[r] == END_RETURNED;
  }
  if (all_returned) {
    appendf(msg, &k, cap, "; every rank returned from it, so the backend "
            "paired calls that do not match and their results are not what "
            "the program asked for");
  } else {
    bool *told = calloc((size_t)size, sizeof *told);
    for (int r = 0, first = 1; told && r < size; r++) {
      if (group[r] < 0 || told[r]) continue;
      int n = 0;
      for (int q = r; q < size; q++)
        if (group[q] >= 0 && !told[q] && ends[q] == ends[r] &&
            strcmp(whys[q], whys[r]) == 0) {
          ranks[n++] = q;
          told[q] = true;
        }
      char rl[256], text[640];
      rank_list(ranks, n, rl, sizeof rl);
      ending_text((call_end)ends[r], rl, n, whys[r], text, sizeof text);
      appendf(msg, &k, cap, "%s%s", first ? "; " : ", ", text);
      first = 0;
    }
    free(told);
  }
  appendf(msg, &k, cap, "; one call site must pass the same %s on every "
          "rank", differs);
  utf8_cut(msg); /* cut to its size, maybe inside a character */

  /* The detail: the collective, what differs, every rank's call. */
  json_t *det = f.detail;
  json_object_set_new(det, "seq", json_integer((json_int_t)seq));
  json_object_set_new(det, "op", json_string(record_ops[x->op].name));
  json_object_set_new(det, "site", json_string(stext));
  json_object_set_new(det, "misaligned", json_true());
  json_t *jd = json_array();
  for (int i = 0; i < nfields; i++)
    json_array_append_new(jd, json_string(fields[i]));
  json_object_set_new(det, "differs", jd);
  json_t *calls = json_array(), *absent = json_array();
  for (int r = 0; r < size; r++) {
    if (!in_pass(a, r)) continue;
    const rank_dump *d = &a->dumps[r];
    json_t *o = json_object();
    json_object_set_new(o, "rank", json_integer(r));
    if (group[r] < 0) {
      char where[768];
      where_of(a, r, seq, where, sizeof where);
      json_object_set_new(o, "where", json_string(where));
      json_array_append_new(absent, o);
      continue;
    }
    json_object_set_new(o, "record",
                        record_detail(a, &d->recs[find_seq(d, seq)]));
    json_object_set_new(o, "ended", json_string(call_end_names[ends[r]]));
    if (whys[r][0]) json_object_set_new(o, "why", json_string(whys[r]));
    if (d->live.last_words[0])
      json_object_set_new(o, "last_words", json_string(d->live.last_words));
    json_array_append_new(calls, o);
  }
  json_object_set_new(det, "calls", calls);
  json_object_set_new(det, "absent", absent);

  free(ranks);
  free(ends);
  free(whys);
  vqc_status s = vqc_findings_add(out, &f);
  if (s != VQC_OK) {
    json_decref(f.detail);
    return s;
  }
  if (nadded) (*nadded)++;
  return VQC_OK;
}

/* Appends the findings for sequence number seq: the first one not settled
 * (stuck) or, when !stuck, one past the last record (only failed ranks can
 * be reported then). */
/* ---- report(): group, classify, emit
 *
 * What the ranks did at seq, in three stages: the ranks grouped by the
 * collective they have there (verdict_group), what that is
 * (verdict_classify: a mismatch, ranks that failed, a hang, calls that
 * returned apart), then the findings it makes (emit_mismatch,
 * emit_deadlock, emit_rank_failure, in that order). */

/* What the stages find at one sequence number; per-rank arrays of a->size
 * entries. */
typedef struct verdict {
  uint64_t seq;
  bool stuck;
  /* verdict_group */
  int *failed, nfailed;          /* failed ranks (rank_dump.failed) */
  int *group;                    /* per rank: its group at seq; -1 none */
  vqc_coll_fingerprint *gfp;     /* per group: the collective */
  int *gn, *glow;                /* per group: how many ranks, the lowest */
  const drec **grec;             /* per group: the lowest rank's record */
  int ngroups;
  int expected;                  /* the group of "the" collective; -1 */
  bool args_differ;              /* one call site, other arguments */
  int *entered, nentered;        /* ranks in the expected group */
  int *missing, nmissing;        /* the others of this pass */
  char (*where)[768];            /* per missing rank: where it is */
  /* verdict_classify */
  bool mismatch;                 /* a collective_mismatch at seq */
  bool only_failed;              /* failed ranks alone explain seq */
  bool returned_apart;           /* different calls that all returned */
  bool left_early;               /* every missing rank ended cleanly */
  /* scratch for emit_deadlock */
  int *wgroup, *wranks;
} verdict;

static void verdict_free(verdict *v) {
  free(v->failed);
  free(v->group);
  free(v->gfp);
  free(v->gn);
  free(v->glow);
  free(v->grec);
  free(v->entered);
  free(v->missing);
  free(v->where);
  free(v->wgroup);
  free(v->wranks);
}

static vqc_status verdict_alloc(verdict *v, int size, uint64_t seq,
                                bool stuck) {
  memset(v, 0, sizeof *v);
  v->seq = seq;
  v->stuck = stuck;
  v->expected = -1;
  v->failed = malloc((size_t)size * sizeof *v->failed);
  v->group = malloc((size_t)size * sizeof *v->group);
  v->gfp = malloc((size_t)size * sizeof *v->gfp);
  v->gn = calloc((size_t)size, sizeof *v->gn);
  v->glow = malloc((size_t)size * sizeof *v->glow);
  v->grec = malloc((size_t)size * sizeof *v->grec);
  v->entered = malloc((size_t)size * sizeof *v->entered);
  v->missing = malloc((size_t)size * sizeof *v->missing);
  v->where = malloc((size_t)size * sizeof *v->where);
  v->wgroup = malloc((size_t)size * sizeof *v->wgroup);
  v->wranks = malloc((size_t)size * sizeof *v->wranks);
  if (!v->failed || !v->group || !v->gfp || !v->gn || !v->glow || !v->grec ||
      !v->entered || !v->missing || !v->where || !v->wgroup || !v->wranks)
    return vqc_error(VQC_ENOMEM, "no memory for the analysis of %d ranks",
                     size);
  return VQC_OK;
}

/* The failed ranks, and (when stuck) the ranks grouped by the collective
 * they have at seq: which group is "the" collective, who entered it, who
 * did not and where they are. */
static void verdict_group(const analysis *a, verdict *v) {
  const int size = a->size;
  const uint64_t seq = v->seq;
  for (int r = 0; r < size; r++)
    if (a->dumps[r].failed) v->failed[v->nfailed++] = r;
  if (!v->stuck) return;

  int *group = v->group, *gn = v->gn, *glow = v->glow;
  vqc_coll_fingerprint *gfp = v->gfp;
  int ngroups = 0;
  for (int r = 0; r < size; r++) {
    group[r] = -1;
    const rank_dump *d = &a->dumps[r];
    long i = d->present ? find_seq(d, seq) : -1;
    if (i < 0) continue;
    const drec *x = &d->recs[i];
    int g = 0;
    while (g < ngroups && !vqc_fingerprint_equal(&gfp[g], &x->fp)) g++;
    if (g == ngroups) {
      gfp[g] = x->fp;
      glow[g] = r;
      v->grec[g] = x;
      ngroups++;
    }
    gn[g]++;
    group[r] = g;
  }
  v->ngroups = ngroups;
  /* History from the lowest rank with records before seq: before seq
   * every rank agreed, so any of them tells the common story. */
  size_t nhist = 0;
  vqc_coll_fingerprint *hist = NULL;
  for (int r = 0; r < size && !hist; r++)
    if (a->dumps[r].present && a->dumps[r].n > 0)
      hist = history_of(&a->dumps[r], seq, HISTORY_MAX, &nhist);
  v->expected = ngroups > 0 ? vqc_pick_expected(gfp, gn, glow, ngroups,
                                                hist, nhist)
                            : -1;
  /* One call site called with other arguments, unless every call there
   * is one the program made before: a loop over tensors of several sizes
   * at one line (each gradient all_reduced in turn), where a rank that
   * skipped one pairs its next with the others' skipped one. That is a
   * misaligned call, told as one. */
  bool args_differ = same_call(gfp, ngroups);
  bool all_made_before = args_differ;
  for (int g = 0; all_made_before && g < ngroups; g++) {
    bool made = false;
    for (size_t j = 0; j < nhist && !made; j++)
      made = vqc_fingerprint_equal(&hist[j], &gfp[g]);
    all_made_before = made;
  }
  if (all_made_before) args_differ = false;
  v->args_differ = args_differ;
  free(hist);
  for (int r = 0; r < size; r++) {
    if (!in_pass(a, r)) continue;
    if (v->expected >= 0 && group[r] == v->expected) {
      v->entered[v->nentered++] = r;
    } else {
      where_of(a, r, seq, v->where[v->nmissing], sizeof v->where[0]);
      v->missing[v->nmissing++] = r;
    }
  }
}

/* What the groups make: a collective_mismatch (then the failed ranks whose
 * record stops in that call died of it, and are its story, not failures
 * of their own), failed ranks that explain the stuck collective alone,
 * calls that returned apart, ranks that left early. */
static void verdict_classify(const analysis *a, verdict *v) {
  const uint64_t seq = v->seq;
  /* ---- collective_mismatch: one call site called with other arguments
   * (ledger_analysis.h). */
  v->mismatch = v->stuck && v->expected >= 0 && v->args_differ;
  if (v->mismatch) {
    int kept = 0;
    for (int i = 0; i < v->nfailed; i++) {
      const rank_dump *d = &a->dumps[v->failed[i]];
      const bool died_in_it = v->group[v->failed[i]] >= 0 &&
                              find_seq(d, seq) == (long)d->n - 1;
      if (!died_in_it) v->failed[kept++] = v->failed[i];
    }
    v->nfailed = kept;
  }

  /* ---- deadlock: unless failed ranks alone explain the stuck collective.
   * When a rank failed, ranks that were then ended by others (a launcher's
   * SIGTERM, a supervisor's kill) are excused too: they were cut off on
   * their way, not stuck. */
  int nexcused = 0;
  for (int i = 0; i < v->nmissing; i++) {
    const rank_dump *d = &a->dumps[v->missing[i]];
    if (d->failed || (v->nfailed > 0 && d->terminated)) nexcused++;
  }
  v->only_failed = v->ngroups <= 1 && nexcused == v->nmissing &&
                   (v->nfailed > 0 || v->nmissing == 0);
  /* Different collectives at seq that every rank completed, in a run where
   * no rank was left waiting in any collective: the backend paired calls
   * that do not match (gloo and NCCL check neither op, root nor call site,
   * and the size only sometimes), so their results are not what the
   * program asked for and nothing hung. That is a collective_mismatch at
   * the odd call's site. When the misalignment did end in a hang (or
   * vqcheck's comm refused it) it stays a deadlock, as the catalogue's
   * skipped collective (spec/bugs.md #3). */
  bool returned_apart = v->stuck && v->ngroups > 1;
  for (int r = 0; r < a->size && returned_apart; r++) {
    const rank_dump *d = &a->dumps[r];
    if (!d->present) continue;
    long i = find_seq(d, seq);
    if (i >= 0 && d->recs[i].state != VQC_REC_DONE) returned_apart = false;
    for (size_t j = 0; j < d->n && returned_apart; j++)
      if (d->recs[j].state == VQC_REC_ENTERED) returned_apart = false;
    if (d->has_status && strcmp(d->status, "VQC_OK") != 0)
      returned_apart = false;
  }
  v->returned_apart = returned_apart;
  /* Every missing rank ended cleanly: it left early, and the others went
   * on without it (ledger_analysis.h). */
  bool left_early = v->nmissing > 0;
  for (int i = 0; i < v->nmissing && left_early; i++)
    left_early = ended_cleanly(&a->dumps[v->missing[i]]);
  v->left_early = left_early;
}

/* The collective_mismatch at seq, named at that site with every rank's
 * call and how it ended (report_mismatch). */
static vqc_status emit_mismatch(const analysis *a, const verdict *v,
                                int64_t step, vqc_findings *out,
                                int *nadded) {
  int64_t fstep = step;
  for (int r = 0; fstep < 0 && r < a->size; r++)
    if (v->group[r] >= 0 && a->dumps[r].has_status && a->dumps[r].step >= 0)
      fstep = a->dumps[r].step;
  /* Live records only (the Python bridge): the step they were in. */
  for (int r = 0; fstep < 0 && r < a->size; r++)
    if (v->group[r] >= 0 && a->dumps[r].live.started)
      fstep = a->dumps[r].live.steps_done;
  return report_mismatch(a, v->seq, fstep, v->group, v->gfp, v->gn, v->grec,
                         v->ngroups, v->expected, out, nadded);
}

/* The deadlock at seq (or, for calls that returned apart, the
 * collective_mismatch at the odd call's site). */
static vqc_status emit_deadlock(const analysis *a, verdict *v, int64_t step,
                                vqc_findings *out, int *nadded) {
  const uint64_t seq = v->seq;
  const int *entered = v->entered, *missing = v->missing;
  const int nentered = v->nentered, nmissing = v->nmissing;
  char (*where)[768] = v->where;
  int *wgroup = v->wgroup, *wranks = v->wranks;
  const int ngroups = v->ngroups;
  bool returned_apart = v->returned_apart;
  const bool left_early = v->left_early;
  const drec *x = v->grec[v->expected];
  vqc_site site = site_of(&a->sites, x->site);
  char desc[128], stext[512], ent[256], mis[256], msg[1024];
  describe_rec(x, desc, sizeof desc);
  vqc_site_text(site, stext, sizeof stext);
  rank_list(entered, nentered, ent, sizeof ent);
  rank_list(missing, nmissing, mis, sizeof mis);
  size_t k = 0;
  const drec *odd = NULL; /* the first call of another group */
  for (int i = 0; i < nmissing && !odd; i++) {
    const rank_dump *d = &a->dumps[missing[i]];
    long j = d->present ? find_seq(d, seq) : -1;
    if (j >= 0) odd = &d->recs[j];
  }
  if (returned_apart && odd) {
    char odesc[128], otext[512];
    describe_rec(odd, odesc, sizeof odesc);
    vqc_site_text(site_of(&a->sites, odd->site), otext, sizeof otext);
    appendf(msg, &k, sizeof msg, "collective #%" PRIu64 " differs across "
            "ranks: rank%s %s called %s at %s where rank%s %s called %s at "
            "%s; every rank returned from it, so the backend paired calls "
            "that do not match and their results are not what the program "
            "asked for",
            seq, nmissing == 1 ? "" : "s", mis, odesc, otext,
            nentered == 1 ? "" : "s", ent, desc, stext);
    site = site_of(&a->sites, odd->site);
  } else {
    returned_apart = false;
    if (left_early)
      appendf(msg, &k, sizeof msg, "rank%s %s left early (%s cleanly "
              "while rank%s %s went on): ", nmissing == 1 ? "" : "s", mis,
              nmissing == 1 ? "it ended" : "they ended",
              nentered == 1 ? "" : "s", ent);
    appendf(msg, &k, sizeof msg, "collective #%" PRIu64 " %s at %s was "
            "entered by rank%s %s but never by rank%s %s",
            seq, desc, stext, nentered == 1 ? "" : "s", ent,
            nmissing == 1 ? "" : "s", nmissing ? mis : "(none)");
  }
  /* The missing ranks grouped by where they are (wgroup[i]: the index
   * of the first missing rank with the same text), so 1000 ranks waiting
   * in the same place are one clause. */
  int nwhere = 0;
  for (int i = 0; i < nmissing; i++) {
    int j = 0;
    while (j < i && !(wgroup[j] == j && strcmp(where[j], where[i]) == 0))
      j++;
    wgroup[i] = j; /* i itself when its place is new */
    nwhere += j == i;
  }
  if (returned_apart) {
    /* the message already says where each group was */
  } else if (nmissing > 0 && nwhere == 1) {
    appendf(msg, &k, sizeof msg, " (%s)", where[0]);
  } else if (nmissing > 0) {
    appendf(msg, &k, sizeof msg, " (");
    int shown = 0;
    for (int i = 0; i < nmissing; i++) {
      if (wgroup[i] != i) continue;
      if (shown == WHERE_SHOWN) {
        appendf(msg, &k, sizeof msg, "; %d more places", nwhere - shown);
        break;
      }
      int n = 0;
      for (int j = i; j < nmissing; j++)
        if (wgroup[j] == i) wranks[n++] = missing[j];
      char rt[256];
      rank_list(wranks, n, rt, sizeof rt);
      appendf(msg, &k, sizeof msg, "%srank%s %s: %s", shown ? "; " : "",
              n == 1 ? "" : "s", rt, where[i]);
      shown++;
    }
    appendf(msg, &k, sizeof msg, ")");
  } else {
    appendf(msg, &k, sizeof msg, "; every rank entered it and none "
            "completed it");
  }

  int64_t fstep = step;
  if (fstep < 0 && nentered > 0 && a->dumps[entered[0]].has_status)
    fstep = a->dumps[entered[0]].step;
  for (int r = 0; fstep < 0 && r < a->size; r++)
    if (a->dumps[r].has_status && a->dumps[r].step >= 0)
      fstep = a->dumps[r].step;
  /* Live records only (the Python bridge): the step they were in. */
  for (int i = 0; fstep < 0 && i < nentered; i++)
    if (a->dumps[entered[i]].live.started)
      fstep = a->dumps[entered[i]].live.steps_done;

  vqc_finding f;
  vqc_finding_init(&f, returned_apart ? VQC_FINDING_COLLECTIVE_MISMATCH
                                      : VQC_FINDING_DEADLOCK,
                   fstep, "%s", msg);
  vqc_finding_set_site(&f, site);
  for (int i = 0; i < nmissing; i++) vqc_finding_add_rank(&f, missing[i]);
  json_t *det = record_detail(a, x);
  json_object_del(det, "state");
  json_object_del(det, "status");
  json_object_set_new(det, "misaligned", json_boolean(ngroups > 1));
  json_object_set_new(det, "left_early",
                      json_boolean(left_early && !returned_apart));
  json_t *je = json_array();
  for (int i = 0; i < nentered; i++) {
    const rank_dump *d = &a->dumps[entered[i]];
    const drec *y = &d->recs[find_seq(d, seq)];
    json_t *o = json_object();
    json_object_set_new(o, "rank", json_integer(entered[i]));
    json_object_set_new(o, "site", json_string(stext));
    json_object_set_new(o, "state",
                        json_string(vqc_record_state_name(y->state)));
    json_object_set_new(o, "status", json_string(y->status));
    json_array_append_new(je, o);
  }
  json_object_set_new(det, "entered", je);
  json_t *jm = json_array();
  for (int i = 0; i < nmissing; i++) {
    const rank_dump *d = &a->dumps[missing[i]];
    json_t *o = json_object();
    json_object_set_new(o, "rank", json_integer(missing[i]));
    json_object_set_new(o, "where", json_string(where[i]));
    long j = d->present ? find_seq(d, seq) : -1;
    if (j >= 0) json_object_set_new(o, "record",
                                    record_detail(a, &d->recs[j]));
    if (d->has_status)
      json_object_set_new(o, "status", json_string(d->status));
    json_array_append_new(jm, o);
  }
  json_object_set_new(det, "missing", jm);
  /* The same sets as a person reads them ("0-1021", "1022, 1023"). */
  char er[1024], mr[1024];
  rank_list(entered, nentered, er, sizeof er);
  rank_list(missing, nmissing, mr, sizeof mr);
  json_object_set_new(det, "entered_ranges", json_string(er));
  json_object_set_new(det, "missing_ranges", json_string(mr));
  json_decref(f.detail);
  f.detail = det;
  vqc_status s = vqc_findings_add(out, &f);
  if (s != VQC_OK) {
    json_decref(det);
    return s;
  }
  if (nadded) (*nadded)++;
  return VQC_OK;
}

/* The rank_failure: ranks that left no dump at all (the world's pass tells
 * them; a process group's pass only lets them explain a wait). */
static vqc_status emit_rank_failure(const analysis *a, const verdict *v,
                                    int64_t step, vqc_findings *out,
                                    int *nadded) {
  const uint64_t seq = v->seq;
  const int *failed = v->failed;
  const int nfailed = v->nfailed;
  char fl[256], msg[1024];
  rank_list(failed, nfailed, fl, sizeof fl);
  size_t k = 0;
  int nlive = 0;
  for (int i = 0; i < nfailed; i++)
    if (a->dumps[failed[i]].live.exists) nlive++;
  if (nlive == 0)
    appendf(msg, &k, sizeof msg, "rank%s %s left no ledger dump (crashed, "
            "killed or never finished)", nfailed == 1 ? "" : "s", fl);
  json_t *jlost = json_array();
  /* Each failed rank's story, the first FAILED_SHOWN of them in the
   * message (all in the detail); then the rest as ranges. */
  for (int i = 0; i < nfailed && nlive > 0; i++) {
    const rank_dump *d = &a->dumps[failed[i]];
    json_t *o = json_object();
    json_object_set_new(o, "rank", json_integer(failed[i]));
    /* Past FAILED_SHOWN, appendf gets a full position: it writes
     * nothing. */
    size_t full = sizeof msg;
    size_t *kk = i < FAILED_SHOWN ? &k : &full;
    if (i > 0) appendf(msg, kk, sizeof msg, "; ");
    if (!d->live.exists) {
      appendf(msg, kk, sizeof msg, "rank %d left no ledger dump and no "
              "live record (it died before it started)", failed[i]);
      json_object_set_new(o, "why", json_string("no live record"));
      json_array_append_new(jlost, o);
      continue;
    }
    const char *why =
        d->live.lost && d->live.why[0] ? d->live.why
        : d->has_status ? "its status file is there, its dump is not"
                        : "no end record: killed (kill -9, the OOM "
                          "killer), crashed or stopped";
    /* What its supervisor saw of its end (vqc_live_mark_end): its last
     * words on stderr say what went wrong in its own terms. */
    char words[200] = "";
    last_words_text(d->live.last_words, words, 160);
    appendf(msg, kk, sizeof msg, "rank %d left no ledger dump and its "
            "live record stops in step %" PRId64 " (%s%s%s)", failed[i],
            d->live.steps_done, why, words[0] ? "; its stderr ended: " : "",
            words);
    json_object_set_new(o, "step", json_integer(d->live.steps_done));
    json_object_set_new(o, "why", json_string(why));
    if (d->live.end_signal > 0)
      json_object_set_new(o, "signal", json_integer(d->live.end_signal));
    if (d->live.last_words[0])
      json_object_set_new(o, "last_words",
                          json_string(d->live.last_words));
    json_object_set_new(o, "pid", json_integer(d->live.pid));
    json_object_set_new(o, "host", json_string(d->live.host));
    if (d->n > 0) {
      const drec *x = &d->recs[d->n - 1];
      char desc[128], stext[512];
      describe_rec(x, desc, sizeof desc);
      vqc_site_text(site_of(&a->sites, x->site), stext, sizeof stext);
      appendf(msg, kk, sizeof msg, "; its last collective was #%" PRIu64
              " %s at %s (%s)", x->seq, desc, stext,
              x->state == VQC_REC_DONE      ? "completed"
              : x->state == VQC_REC_ENTERED ? "entered, never completed"
                                            : "failed");
      json_object_set_new(o, "last_collective", record_detail(a, x));
    } else {
      appendf(msg, kk, sizeof msg, "; it never called a collective");
      json_object_set_new(o, "last_collective", json_null());
    }
    json_array_append_new(jlost, o);
  }
  if (nlive > 0 && nfailed > FAILED_SHOWN) {
    char rest[256];
    rank_list(failed + FAILED_SHOWN, nfailed - FAILED_SHOWN, rest,
              sizeof rest);
    appendf(msg, &k, sizeof msg, "; rank%s %s left no ledger dump either "
            "(%d failed ranks in all; the detail has each one)",
            nfailed - FAILED_SHOWN == 1 ? "" : "s", rest, nfailed);
  }
  if (seq > 0)
    appendf(msg, &k, sizeof msg, "; the other ranks completed collectives "
            "up to #%" PRIu64, seq - 1);
  else
    appendf(msg, &k, sizeof msg, "; the other ranks completed no "
            "collective");
  json_t *det = json_object();
  json_t *jf = json_array();
  for (int i = 0; i < nfailed; i++)
    json_array_append_new(jf, json_integer(failed[i]));
  json_object_set_new(det, "failed", jf);
  json_object_set_new(det, "failed_ranks", jlost);
  json_object_set_new(det, "last_completed_seq",
                      json_integer((json_int_t)seq - 1));
  int64_t fstep = step;
  vqc_site site = {0};
  if (v->stuck && v->expected >= 0) {
    const drec *x = v->grec[v->expected];
    char desc[128], stext[512];
    describe_rec(x, desc, sizeof desc);
    site = site_of(&a->sites, x->site);
    vqc_site_text(site, stext, sizeof stext);
    appendf(msg, &k, sizeof msg, " and wait in #%" PRIu64 " %s at %s", seq,
            desc, stext);
    json_object_set_new(det, "waiting_in", record_detail(a, x));
    if (fstep < 0 && a->dumps[v->glow[v->expected]].has_status)
      fstep = a->dumps[v->glow[v->expected]].step;
  } else {
    json_object_set_new(det, "waiting_in", json_null());
  }
  for (int r = 0; fstep < 0 && r < a->size; r++)
    if (a->dumps[r].has_status && a->dumps[r].step >= 0)
      fstep = a->dumps[r].step;
  /* Else the step the (first) failed rank was in. */
  for (int i = 0; fstep < 0 && i < nfailed; i++)
    if (a->dumps[failed[i]].live.started)
      fstep = a->dumps[failed[i]].live.steps_done;
  vqc_finding f;
  vqc_finding_init(&f, VQC_FINDING_RANK_FAILURE, fstep, "%s", msg);
  utf8_cut(f.message); /* cut to its size, maybe inside a character */
  if (site.file) vqc_finding_set_site(&f, site);
  for (int i = 0; i < nfailed; i++) vqc_finding_add_rank(&f, failed[i]);
  json_decref(f.detail);
  f.detail = det;
  vqc_status s = vqc_findings_add(out, &f);
  if (s != VQC_OK) {
    json_decref(det);
    return s;
  }
  if (nadded) (*nadded)++;
  return VQC_OK;
}

static vqc_status report(analysis *a, uint64_t seq, bool stuck, int64_t step,
                         vqc_findings *out, int *nadded) {
  verdict v;
  vqc_status s = verdict_alloc(&v, a->size, seq, stuck);
  if (s == VQC_OK) {
    verdict_group(a, &v);
    verdict_classify(a, &v);
  }
  if (s == VQC_OK && v.mismatch)
    s = emit_mismatch(a, &v, step, out, nadded);
  if (s == VQC_OK && stuck && v.expected >= 0 && !v.only_failed &&
      !v.mismatch)
    s = emit_deadlock(a, &v, step, out, nadded);
  if (s == VQC_OK && v.nfailed > 0 && !a->member)
    s = emit_rank_failure(a, &v, step, out, nadded);
  verdict_free(&v);
  return s;
}
