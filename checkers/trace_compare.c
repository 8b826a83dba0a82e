/* trace_compare.c: divergence findings from per-rank trace files (see
 * trace_compare.h for what is compared and which inputs are errors).
 *
 * The loop: every rank's file has one record peeked ahead; the smallest
 * peeked step is the next step; each rank whose next record has that step
 * reads the step's lines (its "group"), the groups are compared, and the
 * loop goes on. A rank whose next step is larger simply has no lines for
 * this step. Groups are matched by tensor name through a name-sorted index,
 * so a step of T tensors on R ranks costs O(R T log T).
 *
 * This file holds the comparison: the loop and the alignment of (step,
 * tensor, group, shard) across ranks. Reading the files is
 * trace_compare_read.c, the findings and warnings it produces
 * trace_compare_findings.c (trace_compare_internal.h). */
#include "trace_compare_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "utf8.h"

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

bool tc_same_layout(const vqc_trace_record *a, const vqc_trace_record *b) {
  if (strcmp(a->dtype, b->dtype) != 0 || a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return false;
  return true;
}

bool tc_same_state(const vqc_trace_record *a, const vqc_trace_record *b) {
  return a->digest == b->digest && tc_same_layout(a, b);
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
 * name (tc_find_tensor), group and shard. */
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
    line_rec *b = (line_rec *)tc_find_tensor(&s->ranks[q], a->r.tensor);
    if (b == NULL) {
      *complete = false;
      continue;
    }
    if (!same_key(a, b)) {
      *complete = false;
      if (!cs->group_warned && strcmp(a->r.group, b->r.group) != 0) {
        cs->group_warned = true;
        tc_warn(warnings, "%s:%ld: tensor '%s' of step %" PRId64 " names group "
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
        if (!tc_same_state(&b->r, &a->r)) differ = true;
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
    st = tc_add_finding(s, step, cs->first, also, out);
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
  VQC_TRY(vqc_not_digested_init(&res->not_digested));
  const int n = s->nranks;
  for (int r = 0; r < n; r++) s->ranks[r].not_digested = &res->not_digested;
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
    if (s->ranks[r].present) st = tc_read_next(&s->ranks[r], r, res->warnings);
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
        st = tc_read_group(&s->ranks[r], r, step, res->warnings);
    if (st == VQC_OK) st = grow_steps(res, &cap);
    if (st == VQC_OK)
      st = compare_step(s, &cs, step, out, res, &res->steps[res->nsteps]);
    if (st == VQC_OK) res->nsteps++;
  }
  for (int r = 0; r < n; r++) res->lines_read += s->ranks[r].lines;
  if (st == VQC_OK) {
    bool added = false;
    st = tc_stopped_early(s, out, &added);
    if (added) res->rank_failures++;
    /* Uneven ends already explain what was not compared. */
    if (st == VQC_OK && !added) st = tc_check_something_compared(s, res);
  }
  if (st == VQC_OK) tc_end_warnings(s, res->warnings);
  if (st == VQC_OK) tc_pick_program(s, res, res->warnings);
  if (st == VQC_OK) st = tc_fill_last_steps(s, res);

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
  for (int r = 0; r < n; r++) tc_close_copy(&s->ranks[r], false);
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
  vqc_not_digested_free(&r->not_digested);
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
