/* ledger_analysis.c: analyses the dumps of every rank (see
 * ledger_analysis.h); ledger_dump.c writes a rank's dump files.
 *
 * The analysis reads everything first (a malformed line is an error naming
 * file:line, never a guess), then walks sequence numbers upwards from the
 * first one every dump still holds (the ledger is a ring, so long runs keep
 * only their latest records) and stops at the first that is not DONE with
 * the same collective on every rank. Everything it reports comes from the
 * records at that sequence number and from each rank's history before it.
 *
 * The code is split by job (ledger_analysis_internal.h lists the files);
 * this one holds the analysis proper: the passes (the world's, then each
 * process group's) and report() with its stages. */
#include "ledger_analysis_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "findings.h"
#include "utf8.h"

/* ---- the analysis */

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

/* How far back the skip heuristic looks: a few training steps' worth of
 * collectives, bounded so the analysis stays linear in practice. */
#define HISTORY_MAX 4096
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

/* The step rank dump d's live record says it was in (the Python bridge's:
 * its step lines); -1 without a start line, and for an MPI program's
 * (libvqcheck_mpi.so: "mpi": true), which has no steps: its findings carry
 * no step ("no step applies") rather than step 0. */
static int64_t live_step(const rank_dump *d) {
  return d->live.started && !d->live.mpi ? d->live.steps_done : -1;
}

/* fstep when known (>= 0); else the first step a status dump gives; else,
 * from live records only (the Python bridge), the step the first started
 * of ranks[0..n) was in; else -1. */
static int64_t known_step(const analysis *a, int64_t fstep, const int *ranks,
                          int n) {
  for (int r = 0; fstep < 0 && r < a->size; r++)
    if (a->dumps[r].has_status && a->dumps[r].step >= 0)
      fstep = a->dumps[r].step;
  for (int i = 0; fstep < 0 && i < n; i++)
    fstep = live_step(&a->dumps[ranks[i]]);
  return fstep;
}

/* Whether rank dump d (from a live record) ends with its own deadline
 * firing: its last collective failed with VQC_ETIMEOUT. */
static bool timed_out_waiting(const rank_dump *d) {
  return !d->dumped && d->n > 0 && d->recs[d->n - 1].state == VQC_REC_FAILED &&
         strcmp(d->recs[d->n - 1].status, "VQC_ETIMEOUT") == 0;
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
  /* A rank whose own deadline fired (its last collective failed with
   * VQC_ETIMEOUT) was alive and waiting on the others. When the job ended
   * before it could write its end (a launcher's teardown after another
   * rank failed, on a loaded machine), and another rank failed with no
   * such sign, it was cut off on its way, as a rank ended by others: the
   * rank that stopped or died is the one named. */
  int failed_silent = 0;
  for (int r = 0; r < size && s == VQC_OK; r++)
    if (a.dumps[r].failed && !timed_out_waiting(&a.dumps[r])) failed_silent++;
  for (int r = 0; r < size && s == VQC_OK && failed_silent > 0; r++) {
    rank_dump *d = &a.dumps[r];
    if (!d->failed || !timed_out_waiting(d) || d->has_status || d->live.lost)
      continue;
    d->failed = false;
    d->terminated = true;
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
  bool cut_in_flight;            /* ended from outside mid-call, no hang */
  bool returned_apart;           /* different calls that all returned */
  bool refused_apart;            /* different calls strict mode refused */
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
/* Whether the job was ended from outside while seq was in flight (scancel,
 * Ctrl-C, a launcher's SIGTERM to every rank), rather than hung: no rank
 * failed; every rank, waiting at seq or not there yet, noted the signal
 * that ended it; and each waiting rank had waited less than its own
 * collective deadline when its signal came (the signal's t_ns and the
 * call's t_enter_ns are one rank's clock). By the run's own definition
 * nothing hung then: no deadlock, and the run is cut short (never clean).
 * Records that do not say when, or what the deadline was, keep the
 * deadlock. */
static bool cut_in_flight(const analysis *a, const verdict *v) {
  if (!v->stuck || v->expected < 0 || v->ngroups != 1 || v->nfailed > 0 ||
      v->nentered == 0 || v->nmissing == 0)
    return false;
  for (int i = 0; i < v->nmissing; i++) {
    const rank_dump *d = &a->dumps[v->missing[i]];
    if (!d->terminated || d->live.signal <= 0) return false;
  }
  for (int i = 0; i < v->nentered; i++) {
    const rank_dump *d = &a->dumps[v->entered[i]];
    const long j = find_seq(d, v->seq);
    if (!d->terminated || d->live.signal <= 0 || d->live.timeout_s <= 0 ||
        j < 0 || d->recs[j].state != VQC_REC_ENTERED)
      return false;
    const uint64_t t0 = d->recs[j].t_enter_ns, t1 = d->live.signal_t_ns;
    if (t0 == 0 || t1 < t0 || (double)(t1 - t0) * 1e-9 >= d->live.timeout_s)
      return false;
  }
  return true;
}

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
  v->cut_in_flight = cut_in_flight(a, v);
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
  /* Different collectives at seq that strict mode refused on every rank
   * before data moved (an MPI program's interposer: every call failed
   * VQC_EINVAL, vqc_mpi.c): the same collective_mismatch, found in time. */
  bool refused = v->stuck && v->ngroups > 1;
  for (int r = 0; r < a->size && refused; r++) {
    const rank_dump *d = &a->dumps[r];
    if (!in_pass(a, r)) continue;
    const long i = d->present ? find_seq(d, seq) : -1;
    refused = i >= 0 && d->live.mpi && d->recs[i].state == VQC_REC_FAILED &&
              strcmp(d->recs[i].status, "VQC_EINVAL") == 0;
  }
  v->refused_apart = refused;
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
    if (v->group[r] >= 0) fstep = live_step(&a->dumps[r]);
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
  const bool refused_apart = v->refused_apart;
  bool returned_apart = v->returned_apart || refused_apart;
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
  /* MPI_Ibcast against MPI_Bcast: the same collective, but MPI never
   * matches a non-blocking call with a blocking one. */
  bool nb_apart = false;
  if (odd) {
    const char *on = record_ops[odd->op].name, *xn = record_ops[x->op].name;
    nb_apart = (on[0] == 'i' && strcmp(on + 1, xn) == 0) ||
               (xn[0] == 'i' && strcmp(xn + 1, on) == 0);
  }
  static const char nb_text[] =
      " (MPI never matches a non-blocking collective with a blocking one)";
  if (returned_apart && odd) {
    char odesc[128], otext[512];
    describe_rec(odd, odesc, sizeof odesc);
    vqc_site_text(site_of(&a->sites, odd->site), otext, sizeof otext);
    appendf(msg, &k, sizeof msg, "collective #%" PRIu64 " differs across "
            "ranks: rank%s %s called %s at %s where rank%s %s called %s at "
            "%s%s; %s",
            seq, nmissing == 1 ? "" : "s", mis, odesc, otext,
            nentered == 1 ? "" : "s", ent, desc, stext,
            nb_apart ? nb_text : "",
            refused_apart
                ? "vqcheck's strict mode stopped it before any data moved "
                  "(every call failed VQC_EINVAL)"
                : "every rank returned from it, so the backend paired "
                  "calls that do not match and their results are not what "
                  "the program asked for");
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

  if (nb_apart && !returned_apart) appendf(msg, &k, sizeof msg, "%s", nb_text);

  int64_t fstep = step;
  if (fstep < 0 && nentered > 0 && a->dumps[entered[0]].has_status)
    fstep = a->dumps[entered[0]].step;
  fstep = known_step(a, fstep, entered, nentered);

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
  return add_finding(out, &f, det, nadded);
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
    /* An MPI program has no steps: it ended before MPI_Finalize, or
     * reached it and something after made its record incomplete (another
     * job's rank of its number, interpose/vqc_mpi.c record_taken). */
    if (d->live.mpi && d->live.finished && d->live.lost)
      appendf(msg, kk, sizeof msg, "rank %d reached MPI_Finalize, but %s",
              failed[i], why);
    else if (d->live.mpi)
      appendf(msg, kk, sizeof msg, "rank %d never reached MPI_Finalize "
              "(%s%s%s)", failed[i], why,
              words[0] ? "; its stderr ended: " : "", words);
    else
      appendf(msg, kk, sizeof msg, "rank %d left no ledger dump and its "
              "live record stops in step %" PRId64 " (%s%s%s)", failed[i],
              d->live.steps_done, why,
              words[0] ? "; its stderr ended: " : "", words);
    /* (an MPI program's rank has none: -1, as its finding's) */
    json_object_set_new(o, "step",
                        json_integer(d->live.mpi ? -1 : d->live.steps_done));
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
      appendf(msg, kk, sizeof msg, "; no collective of it was recorded");
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
  /* The ranks others ended (a launcher's SIGTERM after the failure, noted
   * by the rank itself): victims, named as such, never the culprit. */
  int ended[8], nended = 0;
  for (int r = 0; r < a->size; r++)
    if (a->dumps[r].terminated && a->dumps[r].live.signal > 0) {
      if (nended < 8) ended[nended] = r;
      nended++;
    }
  if (nended > 0) {
    char el[128], sig[96];
    rank_list(ended, nended < 8 ? nended : 8, el, sizeof el);
    vqc_signal_text(a->dumps[ended[0]].live.signal, sig, sizeof sig);
    char from[64] = "";
    if (a->dumps[ended[0]].live.signal_from_pid > 0)
      snprintf(from, sizeof from, " from pid %ld",
               a->dumps[ended[0]].live.signal_from_pid);
    appendf(msg, &k, sizeof msg, "; rank%s %s%s %s then ended by %s%s (as "
            "a launcher stops the other ranks when one dies)",
            nended == 1 ? "" : "s", el, nended > 8 ? " and more" : "",
            nended == 1 ? "was" : "were", sig, from);
  }
  if (nfailed >= a->size) /* every rank: there are no others */
    ;
  else if (seq > 0)
    appendf(msg, &k, sizeof msg, "; the other ranks completed collectives "
            "up to #%" PRIu64, seq - 1);
  else
    appendf(msg, &k, sizeof msg, "; the other ranks completed no "
            "collective on record");
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
  fstep = known_step(a, fstep, failed, nfailed);
  vqc_finding f;
  vqc_finding_init(&f, VQC_FINDING_RANK_FAILURE, fstep, "%s", msg);
  utf8_cut(f.message); /* cut to its size, maybe inside a character */
  if (site.file) vqc_finding_set_site(&f, site);
  for (int i = 0; i < nfailed; i++) vqc_finding_add_rank(&f, failed[i]);
  return add_finding(out, &f, det, nadded);
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
      !v.mismatch && !v.cut_in_flight)
    s = emit_deadlock(a, &v, step, out, nadded);
  if (s == VQC_OK && v.nfailed > 0 && !a->member)
    s = emit_rank_failure(a, &v, step, out, nadded);
  verdict_free(&v);
  return s;
}
