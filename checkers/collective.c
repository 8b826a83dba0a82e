/* collective.c: the collective checker: deadlocks, rank failures and, in
 * strict mode, mismatched collectives (see checkers.h and collective.h).
 *
 * Three jobs:
 *
 * 1. Dumps. When a rank's training ends with an error (timeout, abort,
 *    mismatch), when a peer's did, or when the ranks cannot even agree on
 *    how they ended, every rank writes its ledger and a status file into the
 *    run directory (ledger_analysis.h). In VQC_WAIT_BLOCKING mode a stuck
 *    call never returns, so a watchdog thread writes them instead.
 *
 * 2. Analysis. Rank 0 reads every rank's dump and reports one `deadlock`
 *    (or `rank_failure`) finding. It first waits for the others on the side
 *    channel, with a deadline: a dead rank must not hang the analysis of its
 *    own death. If that wait fails, rank 0 polls the run directory for the
 *    status files until a deadline, then analyses what is there.
 *
 * 3. Strict mode. Before each collective (BEFORE event, data not moved),
 *    the ranks all_gather a small fixed-size message on the side channel
 *    holding the collective's fingerprint (seq, op, dtype, count, root,
 *    redop, call-site hash), like TORCH_DISTRIBUTED_DEBUG=DETAIL. If they
 *    disagree, rank 0 records `collective_mismatch` and every rank vetoes
 *    the collective with VQC_EMISMATCH, so no data moves anywhere.
 *
 * The side-channel protocol. Every exchange of this checker is the same
 * all_reduce (VQC_MAX) of one fixed vector of NV int64 per rank, whatever
 * its purpose (a fingerprint, "I have finished training", "my dump is
 * written"), so exchanges of ranks doing different things still pair up.
 * The vector holds each field of the message twice, as v and as ~v, so one
 * MAX gives every field's maximum and (~ of the second) its minimum: all
 * ranks sent the same value iff the two agree. Beside them: whether any
 * rank ended badly, and the lowest rank that is not at a fingerprint
 * (max of size - rank). So each rank reads what the others are doing from
 * 144 bytes, whatever the rank count: at 1024 ranks an all_gather of the
 * whole messages cost every rank 80 KiB per collective in strict mode, 80
 * MiB in all. A rank that left its training loop early answers a peer's
 * fingerprint exchange with FINISH: the peer then knows at once that the
 * collective will never complete and vetoes it (VQC_EABORTED) instead of
 * waiting out its timeout, and the finished rank repeats its FINISH
 * exchange until every rank has finished. Only when fingerprints differ
 * (a strict-mode mismatch, once per run) do the ranks gather each rank's
 * fingerprint (48 bytes a rank) to tell the groups apart, and the call
 * sites of one rank per group.
 *
 * 4. The live record (ledger_analysis.h). From attach to finish every rank
 *    appends its start (pid, host), each collective as it is entered and as
 *    it ends, each completed step and finally "finished" to
 *    rank-<r>.live.jsonl, one write(2) per line, so a rank killed with
 *    SIGKILL, or a job its launcher tore down, still tells `vqcheck analyze`
 *    (and the supervisor, harness/cli/supervise.h) where every rank was. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "checkers.h"
#include "collective.h"
#include "ledger_analysis.h"
#include "utf8.h"
#include "vqc/clock.h"
#include "vqc/ledger.h"
#include "vqc/watchdog.h"

/* The peers of a finished rank may still sit in a data collective until its
 * deadline (one timeout), and then need a moment to reach finish; the final
 * exchange waits twice the timeout plus this slack, so a merely slow rank
 * (four ranks on two busy cores) is never mistaken for a dead one. */
#define FINISH_SLACK_S 2.0
/* How far back strict mode looks in this rank's ledger to tell which of two
 * mismatched collectives was skipped (vqc_pick_expected). */
#define STRICT_HISTORY 256
/* Polling period while rank 0 waits for status files (a 10 ms nap costs
 * nothing next to the timeouts involved). */
#define POLL_FILES_NS 10000000L

enum { MSG_FINGERPRINT = 1, MSG_FINISH = 2, MSG_DUMPED = 3 };

/* One rank's side-channel message; sent as bytes, so it is zeroed first
 * (padding included) and every process runs the same build. */
typedef struct side_msg {
  uint32_t kind;            /* MSG_* */
  int32_t rank;
  uint64_t seq;             /* FINGERPRINT: the collective's seq; FINISH:
                               collectives this rank called */
  vqc_coll_fingerprint fp;  /* FINGERPRINT only */
  int32_t status;           /* FINISH: how the rank's training ended */
  int32_t watchdog;         /* FINISH: 1 if its watchdog saw it stuck */
  int64_t step;
} side_msg;

typedef struct coll_impl {
  vqc_comm *comm;
  vqc_comm *side;
  vqc_ledger *ledger;
  vqc_findings *findings;
  char run_dir[4096];
  int rank, size;
  double timeout_s;          /* the collective deadline (opts or comm's) */
  bool strict;
  bool subscribed;
  _Atomic int64_t step;      /* the step being trained: last step_end + 1 */
  bool mismatch_reported;    /* strict mode vetoed a mismatch (every rank) */
  bool not_started;          /* vqc_collective_not_started: no end exchange */
  vqc_watchdog *wd;
  vqc_live *live;            /* rank-<r>.live.jsonl; NULL if it failed */
  bool live_subscribed;

  pthread_mutex_t mu;        /* guards the fields below (watchdog thread) */
  bool watchdog_dumped;
  bool analysed;             /* rank 0: the analysis ran */
  vqc_hang_fn hang_fn;
  void *hang_user;
} coll_impl;

/* The fields of a side_msg that are compared across ranks. */
enum { P_KIND, P_SEQ, P_OP, P_DTYPE, P_REDOP, P_ROOT, P_COUNT, P_SITE,
       NPAIRS };
/* The exchanged vector: each field as v and ~v, then two single maxima. */
enum { V_BAD = 2 * NPAIRS, V_FIRST_OTHER, NV };

/* What one exchange tells every rank (the same on all of them). */
typedef struct side_view {
  int64_t max[NPAIRS], min[NPAIRS];
  bool bad;         /* a rank finished with an error or a stuck watchdog */
  int first_other;  /* the lowest rank not at a fingerprint; -1: none */
} side_view;

/* Whether every rank sent the same value of field f. */
static bool same(const side_view *v, int f) { return v->min[f] == v->max[f]; }

/* Whether every rank sent a message of this kind. */
static bool all_kind(const side_view *v, uint32_t kind) {
  return same(v, P_KIND) && v->max[P_KIND] == (int64_t)kind;
}

static vqc_status exchange(coll_impl *im, const side_msg *mine,
                           side_view *out) {
  const int64_t f[NPAIRS] = {
      (int64_t)mine->kind,     (int64_t)mine->seq,   mine->fp.op,
      mine->fp.dtype,          mine->fp.redop,       mine->fp.root,
      (int64_t)mine->fp.count, (int64_t)mine->fp.site_hash};
  int64_t v[NV], r[NV];
  for (int i = 0; i < NPAIRS; i++) {
    v[2 * i] = f[i];
    v[2 * i + 1] = ~f[i];
  }
  v[V_BAD] = mine->kind == MSG_FINISH &&
             (mine->status != VQC_OK || mine->watchdog);
  v[V_FIRST_OTHER] =
      mine->kind != MSG_FINGERPRINT ? (int64_t)(im->size - im->rank) : 0;
  VQC_TRY(vqc_all_reduce(im->side, v, r, NV, VQC_I64, VQC_MAX));
  for (int i = 0; i < NPAIRS; i++) {
    out->max[i] = r[2 * i];
    out->min[i] = ~r[2 * i + 1];
  }
  out->bad = r[V_BAD] != 0;
  out->first_other =
      r[V_FIRST_OTHER] ? im->size - (int)r[V_FIRST_OTHER] : -1;
  return VQC_OK;
}

/* ---- dumps and analysis */

static vqc_status write_dump(coll_impl *im, vqc_status run_status,
                             const vqc_ledger_record *stuck) {
  vqc_rank_end end = {.rank = im->rank,
                      .size = im->size,
                      .status = run_status,
                      .step = atomic_load(&im->step),
                      .watchdog = stuck != NULL};
  if (stuck) {
    end.has_in_flight = true;
    end.in_flight = *stuck;
  } else {
    end.has_in_flight = vqc_ledger_in_flight(im->ledger, &end.in_flight);
  }
  return vqc_rank_dump_write(im->run_dir, im->ledger, &end);
}

/* Waits until every rank's status file exists or `deadline` (now_ns)
 * passes; the analysis then reports the ranks still without one. */
static void wait_for_dumps(coll_impl *im, uint64_t deadline) {
  char path[4200];
  for (int r = 0; r < im->size; r++) {
    if (vqc_status_dump_path(im->run_dir, r, path, sizeof path) != VQC_OK)
      continue;
    while (access(path, F_OK) != 0 && vqc_now_ns() < deadline) {
      struct timespec nap = {0, POLL_FILES_NS};
      nanosleep(&nap, NULL);
    }
  }
}

/* Rank 0: runs the analysis unless it already ran (the watchdog and finish
 * may both get here). */
static vqc_status analyse_once(coll_impl *im) {
  pthread_mutex_lock(&im->mu);
  bool done = im->analysed;
  im->analysed = true;
  pthread_mutex_unlock(&im->mu);
  if (done) return VQC_OK;
  /* step -1: the status files hold each rank's step. The findings go on
   * rank 0's record too, as every finding does (findings_record.h). */
  vqc_findings found;
  vqc_findings_init(&found);
  vqc_status s = vqc_ledger_analyze(im->run_dir, im->size, -1, &found, NULL);
  for (int i = 0; i < found.count && s == VQC_OK; i++) {
    vqc_live_finding(im->live, &found.items[i]);
    s = vqc_findings_add(im->findings, &found.items[i]);
    if (s == VQC_OK) found.items[i].detail = NULL; /* the list owns it */
  }
  vqc_findings_free(&found);
  return s;
}

/* ---- strict mode */

static void fp_json(json_t *o, const vqc_coll_fingerprint *fp) {
  json_object_set_new(o, "op", json_string(vqc_coll_name((vqc_coll_op)fp->op)));
  json_object_set_new(o, "dtype",
                      json_string(vqc_dtype_name((vqc_dtype)fp->dtype)));
  json_object_set_new(o, "count", json_integer((json_int_t)fp->count));
  json_object_set_new(o, "root", json_integer(fp->root));
  json_object_set_new(o, "redop",
                      json_string(fp->redop >= 0
                                      ? vqc_redop_name((vqc_redop)fp->redop)
                                      : ""));
  char hash[17];
  snprintf(hash, sizeof hash, "%016" PRIx64, fp->site_hash);
  json_object_set_new(o, "site_hash", json_string(hash));
}

static void fp_describe(const vqc_coll_fingerprint *fp, char *buf, size_t n) {
  vqc_coll_describe((vqc_coll_op)fp->op, (vqc_dtype)fp->dtype,
                    (size_t)fp->count, fp->root,
                    fp->redop >= 0 ? (vqc_redop)fp->redop : VQC_SUM, buf, n);
}

/* One rank's entry of the mismatch gather: what it was about to call. */
typedef struct fp_entry {
  uint64_t seq;
  vqc_coll_fingerprint fp;
} fp_entry;

/* Same collective: seq and fingerprint. */
static bool entry_same(const fp_entry *a, const fp_entry *b) {
  return a->seq == b->seq && vqc_fingerprint_equal(&a->fp, &b->fp);
}

/* Every rank gets here after the same exchange said the fingerprints of
 * collective r->seq differ. Gathers each rank's fingerprint (48 bytes a
 * rank, once per run) and the call-site text of the lowest rank of each
 * group (only now: the hot path sends a hash), picks the expected
 * collective, has rank 0 record the finding, and returns VQC_EMISMATCH to
 * veto. */
static vqc_status report_mismatch(coll_impl *im, const vqc_ledger_record *r) {
  const int size = im->size;
  fp_entry mine;
  memset(&mine, 0, sizeof mine); /* sent as bytes: padding too */
  mine.seq = r->seq;
  vqc_fingerprint_of(r, &mine.fp);
  char mysite[256];
  memset(mysite, 0, sizeof mysite);
  vqc_site_text(r->site, mysite, sizeof mysite);

  fp_entry *all = calloc((size_t)size, sizeof *all);
  int *group = calloc((size_t)size, sizeof *group);
  int *gn = calloc((size_t)size, sizeof *gn);
  int *glow = calloc((size_t)size, sizeof *glow);
  int *granks = calloc((size_t)size, sizeof *granks);
  size_t *counts = calloc((size_t)size, sizeof *counts);
  vqc_coll_fingerprint *gfp = calloc((size_t)size, sizeof *gfp);
  vqc_ledger_record *hist = malloc(STRICT_HISTORY * sizeof *hist);
  vqc_coll_fingerprint *hfp = malloc(STRICT_HISTORY * sizeof *hfp);
  char (*sites)[256] = NULL; /* (ngroups) the groups' call sites */
  vqc_status s = VQC_OK;
  if (!all || !group || !gn || !glow || !granks || !counts || !gfp || !hist ||
      !hfp) {
    s = vqc_error(VQC_ENOMEM, "strict mode: no memory to report a mismatch");
    goto done;
  }
  s = vqc_all_gather(im->side, &mine, all, sizeof mine, VQC_U8);
  if (s != VQC_OK) {
    s = vqc_error(VQC_EMISMATCH, "strict mode: ranks disagree on "
                  "collective #%" PRIu64 " (and the fingerprint exchange "
                  "failed: %s)", r->seq, vqc_status_name(s));
    goto done;
  }

  /* Groups of ranks that called the same collective, numbered by their
   * lowest rank. */
  int ngroups = 0;
  for (int k = 0; k < size; k++) {
    int g = 0;
    while (g < ngroups && !entry_same(&all[glow[g]], &all[k])) g++;
    if (g == ngroups) {
      glow[g] = k;
      gfp[g] = all[k].fp;
      ngroups++;
    }
    gn[g]++;
    group[k] = g;
  }
  /* The call sites of each group's lowest rank, in group order. */
  for (int g = 0; g < ngroups; g++) counts[glow[g]] = sizeof mysite;
  sites = calloc((size_t)ngroups, sizeof *sites);
  s = sites ? vqc_all_gatherv(im->side, mysite, counts[im->rank], sites,
                              counts, VQC_U8)
            : vqc_error(VQC_ENOMEM, "strict mode: no memory for %d call "
                        "sites", ngroups);
  if (s != VQC_OK) {
    s = vqc_error(VQC_EMISMATCH, "strict mode: ranks disagree on "
                  "collective #%" PRIu64 " (and the call-site exchange "
                  "failed: %s)", r->seq, vqc_status_name(s));
    goto done;
  }
  for (int g = 0; g < ngroups; g++) sites[g][255] = '\0';

  /* This rank's history: every rank agreed on it (each earlier collective
   * passed this same check), so every rank picks the same group. */
  size_t nh = vqc_ledger_snapshot(im->ledger, hist, STRICT_HISTORY);
  size_t nhfp = 0;
  for (size_t i = 0; i < nh; i++)
    if (hist[i].seq < r->seq) vqc_fingerprint_of(&hist[i], &hfp[nhfp++]);
  int expected = vqc_pick_expected(gfp, gn, glow, ngroups, hfp, nhfp);

  /* The message: each other group, then what the majority called. */
  char desc[128], msg[1024];
  size_t k = 0;
  fp_describe(&gfp[expected], desc, sizeof desc);
  k += (size_t)snprintf(msg, sizeof msg, "collective #%" PRIu64 " differs "
                        "across ranks: ",
                        r->seq);
  for (int g = 0; g < ngroups && k < sizeof msg; g++) {
    if (g == expected) continue;
    char d[128], ranks[256];
    int n = 0;
    for (int x = 0; x < size; x++)
      if (group[x] == g) granks[n++] = x;
    vqc_rank_ranges_text(granks, n, ranks, sizeof ranks);
    fp_describe(&gfp[g], d, sizeof d);
    k += (size_t)snprintf(msg + k, sizeof msg - k, "rank%s %s called %s at "
                          "%s; ",
                          gn[g] == 1 ? "" : "s", ranks, d, sites[g]);
  }
  if (k < sizeof msg)
    snprintf(msg + k, sizeof msg - k, "the others called %s at %s (vetoed "
             "before any data moved)",
             desc, sites[expected]);

  if (im->rank == 0) {
    vqc_finding f;
    vqc_finding_init(&f, VQC_FINDING_COLLECTIVE_MISMATCH,
                     atomic_load(&im->step), "%s", msg);
    snprintf(f.site, sizeof f.site, "%s", sites[expected]);
    for (int x = 0; x < size; x++)
      if (group[x] != expected) vqc_finding_add_rank(&f, x);
    json_t *det = f.detail;
    json_object_set_new(det, "seq", json_integer((json_int_t)r->seq));
    json_t *exp = json_object();
    fp_json(exp, &gfp[expected]);
    json_object_set_new(exp, "site", vqc_json_text(sites[expected], strlen(sites[expected])));
    json_object_set_new(exp, "describe", json_string(desc));
    json_object_set_new(det, "expected", exp);
    /* One entry per distinct collective, with its ranks (what a person
     * reads at 1024 ranks), then one per rank. */
    json_t *groups = json_array();
    for (int g = 0; g < ngroups; g++) {
      json_t *o = json_object();
      char d[128], ranks[512];
      int n = 0;
      for (int x = 0; x < size; x++)
        if (group[x] == g) granks[n++] = x;
      json_t *jr = json_array();
      for (int i = 0; i < n; i++) json_array_append_new(jr, json_integer(granks[i]));
      vqc_rank_ranges_text(granks, n, ranks, sizeof ranks);
      fp_describe(&gfp[g], d, sizeof d);
      json_object_set_new(o, "ranks", jr);
      json_object_set_new(o, "rank_ranges", json_string(ranks));
      json_object_set_new(o, "seq", json_integer((json_int_t)all[glow[g]].seq));
      fp_json(o, &gfp[g]);
      json_object_set_new(o, "site", vqc_json_text(sites[g], strlen(sites[g])));
      json_object_set_new(o, "describe", json_string(d));
      json_object_set_new(o, "expected", json_boolean(g == expected));
      json_array_append_new(groups, o);
    }
    json_object_set_new(det, "groups", groups);
    /* Each rank's own entry too (readers index it by rank): its group's
     * site, which its own call shares (same site hash). */
    json_t *fps = json_array();
    for (int x = 0; x < size; x++) {
      json_t *o = json_object();
      char d[128];
      fp_describe(&all[x].fp, d, sizeof d);
      json_object_set_new(o, "rank", json_integer(x));
      json_object_set_new(o, "seq", json_integer((json_int_t)all[x].seq));
      fp_json(o, &all[x].fp);
      json_object_set_new(o, "site", vqc_json_text(sites[group[x]], strlen(sites[group[x]])));
      json_object_set_new(o, "describe", json_string(d));
      json_array_append_new(fps, o);
    }
    json_object_set_new(det, "fingerprints", fps);
    vqc_live_finding(im->live, &f); /* on record as it is made */
    s = vqc_findings_add(im->findings, &f);
    if (s != VQC_OK) {
      json_decref(f.detail);
      goto done;
    }
  }
  im->mismatch_reported = true;
  s = vqc_error(VQC_EMISMATCH, "rank %d: strict mode: %s", im->rank, msg);
done:
  free(all);
  free(group);
  free(gn);
  free(glow);
  free(granks);
  free(counts);
  free(gfp);
  free(hist);
  free(hfp);
  free(sites);
  return s;
}

/* BEFORE every collective (strict mode only): the fingerprint exchange. */
static vqc_status on_event(const vqc_coll_event *ev, void *user) {
  if (ev->phase != VQC_EVENT_BEFORE) return VQC_OK;
  coll_impl *im = user;
  const vqc_ledger_record *r = ev->record;
  side_msg mine;
  memset(&mine, 0, sizeof mine);
  mine.kind = MSG_FINGERPRINT;
  mine.rank = im->rank;
  mine.seq = r->seq;
  vqc_fingerprint_of(r, &mine.fp);
  mine.step = atomic_load_explicit(&im->step, memory_order_relaxed);
  side_view v;
  vqc_status s = exchange(im, &mine, &v);
  if (s != VQC_OK) {
    char d[128], site[256];
    fp_describe(&mine.fp, d, sizeof d);
    vqc_site_text(r->site, site, sizeof site);
    return vqc_error(s, "rank %d: strict mode: the fingerprint exchange "
                     "before collective #%" PRIu64 " %s at %s failed (%s): "
                     "did every rank reach a collective?",
                     im->rank, r->seq, d, site, vqc_status_name(s));
  }
  if (v.first_other >= 0) {
    /* A peer has left its training loop: it will never enter this
     * collective, so do not wait out the deadline for it. */
    char d[128], site[256];
    fp_describe(&mine.fp, d, sizeof d);
    vqc_site_text(r->site, site, sizeof site);
    return vqc_error(VQC_EABORTED, "rank %d: collective #%" PRIu64 " %s at "
                     "%s: rank %d has left its training loop and will "
                     "never enter it",
                     im->rank, r->seq, d, site, v.first_other);
  }
  bool agree = true;
  for (int f = 0; f < NPAIRS; f++) agree = agree && same(&v, f);
  return agree ? VQC_OK : report_mismatch(im, r);
}

/* BEFORE and AFTER every collective: the live record. */
static vqc_status on_live(const vqc_coll_event *ev, void *user) {
  coll_impl *im = user;
  vqc_live_record(im->live, ev->record);
  return VQC_OK;
}

/* ---- the watchdog (VQC_WAIT_BLOCKING) */

static void on_stuck(const vqc_ledger_record *stuck, void *user) {
  coll_impl *im = user;
  /* No status to return from a thread: a failed dump is reported by the
   * analysis as a missing dump. */
  (void)write_dump(im, VQC_ETIMEOUT, stuck);
  pthread_mutex_lock(&im->mu);
  im->watchdog_dumped = true;
  pthread_mutex_unlock(&im->mu);
  bool analysed = false;
  if (im->rank == 0) {
    /* Stuck peers dump within a poll of this; ranks that left training dump
     * when their final exchange gives up (2 timeouts + slack). */
    double wait_s = 2 * im->timeout_s + 2 * FINISH_SLACK_S;
    wait_for_dumps(im, vqc_now_ns() + (uint64_t)(wait_s * 1e9));
    analysed = analyse_once(im) == VQC_OK;
  }
  pthread_mutex_lock(&im->mu);
  vqc_hang_fn fn = im->hang_fn;
  void *fn_user = im->hang_user;
  pthread_mutex_unlock(&im->mu);
  if (fn) fn(stuck, analysed, fn_user);
  else vqc_comm_abort(im->comm);
}

vqc_status vqc_collective_not_started(vqc_checker *chk) {
  if (!chk || !chk->impl || !chk->name || strcmp(chk->name, "collective") != 0)
    return vqc_error(VQC_EINVAL, "vqc_collective_not_started: not an "
                     "attached collective checker");
  coll_impl *im = chk->impl;
  im->not_started = true;
  return VQC_OK;
}

vqc_status vqc_collective_on_hang(vqc_checker *chk, vqc_hang_fn fn,
                                  void *user) {
  if (!chk || !chk->impl || !chk->name || strcmp(chk->name, "collective") != 0)
    return vqc_error(VQC_EINVAL, "vqc_collective_on_hang: not an attached "
                     "collective checker");
  coll_impl *im = chk->impl;
  pthread_mutex_lock(&im->mu);
  im->hang_fn = fn;
  im->hang_user = user;
  pthread_mutex_unlock(&im->mu);
  return VQC_OK;
}

/* ---- the checker interface */

static void coll_destroy(vqc_checker *self, vqc_check_ctx *ctx) {
  coll_impl *im = self ? self->impl : NULL;
  if (!im) return;
  if (ctx && ctx->live == im->live) ctx->live = NULL;
  vqc_watchdog_stop(im->wd);
  if (im->subscribed) vqc_comm_unsubscribe(im->comm, on_event, im);
  if (im->live_subscribed) vqc_comm_unsubscribe(im->comm, on_live, im);
  vqc_live_close(im->live);
  pthread_mutex_destroy(&im->mu);
  free(im);
  self->impl = NULL;
}

static vqc_status coll_attach(vqc_checker *self, vqc_check_ctx *ctx) {
  if (!ctx || !ctx->comm || !ctx->findings || !ctx->run_dir)
    return vqc_error(VQC_EINVAL, "collective checker: the context needs a "
                     "comm, a findings list and a run directory");
  vqc_comm *side = vqc_comm_side(ctx->comm);
  vqc_ledger *ledger = vqc_comm_ledger(ctx->comm);
  if (!side || !ledger)
    return vqc_error(VQC_EINVAL, "collective checker: attach it to a data "
                     "comm (with a ledger and a side channel)");
  coll_impl *im = calloc(1, sizeof *im);
  if (!im) return vqc_error(VQC_ENOMEM, "collective checker: no memory");
  pthread_mutex_init(&im->mu, NULL);
  self->impl = im;
  im->comm = ctx->comm;
  im->side = side;
  im->ledger = ledger;
  im->findings = ctx->findings;
  im->rank = vqc_comm_rank(ctx->comm);
  im->size = vqc_comm_size(ctx->comm);
  im->strict = ctx->opts.strict;
  im->timeout_s = ctx->opts.timeout_s > 0 ? ctx->opts.timeout_s
                                          : vqc_comm_timeout(ctx->comm);
  atomic_init(&im->step, 0);
  vqc_status s = VQC_OK;
  int n = snprintf(im->run_dir, sizeof im->run_dir, "%s", ctx->run_dir);
  if (n < 0 || (size_t)n >= sizeof im->run_dir) {
    s = vqc_error(VQC_EINVAL, "collective checker: run directory path too "
                  "long");
    goto fail;
  }
  /* First, so the live record has every collective this rank entered,
   * even one a later subscriber vetoes. */
  if ((s = vqc_live_open(im->run_dir, im->rank, im->size, im->timeout_s,
                         &im->live)) != VQC_OK)
    goto fail;
  ctx->live = im->live; /* every checker's findings go on record there */
  if ((s = vqc_comm_subscribe(im->comm, on_live, im)) != VQC_OK) goto fail;
  im->live_subscribed = true;
  if (im->strict) {
    if ((s = vqc_comm_subscribe(im->comm, on_event, im)) != VQC_OK) goto fail;
    im->subscribed = true;
  }
  if (vqc_comm_wait_mode(im->comm) == VQC_WAIT_BLOCKING) {
    s = vqc_watchdog_start(im->comm, im->timeout_s, on_stuck, im, &im->wd);
    if (s != VQC_OK) goto fail;
  }
  return VQC_OK;
fail:
  coll_destroy(self, ctx);
  return s;
}

static vqc_status coll_step_end(vqc_checker *self, vqc_check_ctx *ctx,
                                int64_t step) {
  (void)ctx;
  coll_impl *im = self->impl;
  if (!im) return VQC_OK;
  atomic_store(&im->step, step + 1);
  vqc_live_step(im->live, step);
  return VQC_OK;
}

/* The FINISH exchange, repeated while peers are still in strict-mode
 * fingerprint exchanges (they see our FINISH and stop) or, on the threads
 * backend, while a peer's different side-channel exchange mismatches ours.
 * True when every rank finished; then *any_bad says whether one of them
 * ended with an error or was seen stuck by its watchdog (the same answer
 * on every rank, so they all dump, or none does). */
static bool finish_exchange(coll_impl *im, vqc_status run_status,
                            bool watchdog_dumped, bool *any_bad) {
  side_msg mine;
  memset(&mine, 0, sizeof mine);
  mine.kind = MSG_FINISH;
  mine.rank = im->rank;
  mine.seq = vqc_ledger_count(im->ledger);
  mine.status = (int32_t)run_status;
  mine.watchdog = watchdog_dumped;
  mine.step = atomic_load(&im->step);
  double wait_s = 2 * im->timeout_s + FINISH_SLACK_S;
  uint64_t until = vqc_now_ns() + (uint64_t)(wait_s * 1e9);
  for (;;) {
    side_view v;
    vqc_status s = exchange(im, &mine, &v);
    if (s == VQC_OK) {
      if (all_kind(&v, MSG_FINISH)) {
        *any_bad = v.bad;
        return true;
      }
    } else if (s != VQC_EMISMATCH) {
      return false; /* timed out or aborted: some rank is unreachable */
    }
    if (vqc_now_ns() > until) return false;
  }
}

static vqc_status coll_finish(vqc_checker *self, vqc_check_ctx *ctx,
                              vqc_status run_status) {
  (void)ctx;
  coll_impl *im = self->impl;
  if (!im) return VQC_OK;
  /* Training is over on this rank: no collective can get stuck any more.
   * (Waits for the watchdog's handler if it is running.) */
  vqc_watchdog_stop(im->wd);
  im->wd = NULL;

  if (im->not_started) { /* every rank knows why; no exchange to pair */
    vqc_live_finished(im->live, run_status, atomic_load(&im->step));
    return VQC_OK;
  }
  pthread_mutex_lock(&im->mu);
  bool watchdog_dumped = im->watchdog_dumped;
  pthread_mutex_unlock(&im->mu);
  double old_timeout = vqc_comm_timeout(im->side);
  vqc_comm_set_timeout(im->side, 2 * im->timeout_s + FINISH_SLACK_S);
  bool any_bad = false;
  bool exchanged = finish_exchange(im, run_status, watchdog_dumped, &any_bad);
  /* Unreachable peers are a failure in themselves: dump, so that whoever
   * analyses (rank 0, or `vqcheck analyze` later) has this rank's side. */
  bool dump = !exchanged || any_bad;

  vqc_status s = VQC_OK;
  if (dump) s = write_dump(im, run_status, NULL);

  /* Rank 0 reads the dumps once every rank says its own is written. */
  bool all_dumped = false;
  if (exchanged && dump) {
    side_msg mine;
    memset(&mine, 0, sizeof mine);
    mine.kind = MSG_DUMPED;
    mine.rank = im->rank;
    side_view v;
    all_dumped = exchange(im, &mine, &v) == VQC_OK;
  }
  vqc_comm_set_timeout(im->side, old_timeout);

  /* A strict-mode mismatch is already the finding for this run's end. */
  if (dump && im->rank == 0 && !im->mismatch_reported) {
    if (!all_dumped) {
      /* No longer than the side channel's overall deadline, when the
       * caller set one (the runner's end of a failed run, comm.h): the
       * dumps that are missing then are the ranks' that are gone. */
      double wait_s = im->timeout_s + FINISH_SLACK_S;
      const double budget = vqc_comm_wait_budget(im->side);
      if (budget < wait_s) wait_s = budget;
      wait_for_dumps(im, vqc_now_ns() + (uint64_t)(wait_s * 1e9));
    }
    vqc_status a = analyse_once(im);
    if (s == VQC_OK) s = a;
  }
  /* Last: the rank reached its end (its dump, if any, is written). */
  vqc_live_finished(im->live, run_status, atomic_load(&im->step));
  return s;
}

vqc_status vqc_checker_collective(vqc_checker *out) {
  if (!out) return vqc_error(VQC_EINVAL, "vqc_checker_collective: out is NULL");
  memset(out, 0, sizeof *out);
  out->name = "collective";
  out->attach = coll_attach;
  out->step_end = coll_step_end;
  out->finish = coll_finish;
  out->destroy = coll_destroy;
  return VQC_OK;
}
