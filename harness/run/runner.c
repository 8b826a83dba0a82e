/* runner.c: one scenario, every checker, one run directory (see runner.h).
 *
 * The rank body is the same for both backends: build the model, attach the
 * checkers to the rank's data comm, train, finish, destroy. What differs is
 * the world around it: the threads backend runs the body on sc->ranks
 * threads sharing one findings list; the mpi backend runs it once in this
 * process and gathers the other ranks' findings over the side channel
 * afterwards.
 *
 * Deadlines: the data comm's is the scenario's timeout T (a collective whose
 * peers never come returns VQC_ETIMEOUT then). The side channel's is longer,
 * so a rank that already left its loop is still waiting in a side-channel
 * exchange when a peer's data collective gives up and joins it; the
 * checkers' own exchanges rely on that ordering:
 *   threads: 2 T + SIDE_SLACK_S for every side-channel wait (one process:
 *     no rank can be stopped or lost alone, and an abort wakes every rank);
 *   mpi, nccl (launched: a rank may be stopped or gone, and nobody but the
 *     ranks themselves notices under a plain mpiexec): T +
 *     LAUNCHED_SIDE_SLACK_S in the step loop (a peer that rank waits for is
 *     at worst in a data collective that gives up within T), and once this
 *     rank's training has stopped, ONE overall deadline for every side wait
 *     left in the run (the agreement, the checkers' settle and finish, the
 *     result gathers): END_SLACK_S from the stop. A rank that stops aborts
 *     its data comm, which on mpi tells every peer at once (comm.h,
 *     vqc_comm_abort), so the live ranks all reach the agreement within
 *     moments of the first stop; nccl's data waits do not hear of it, so
 *     there the overall deadline is T longer. A stopped or lost rank thus
 *     costs the others T (their data collective) + END_SLACK_S, not one
 *     deadline per exchange in a row (that was 3 T + 10 s and more).
 * A rank that fails before training (its run directory, its model, its
 * checkers) still meets the others at the start agreement, so they learn
 * at once and name it, and no rank runs the checkers' end exchanges then
 * (vqc_collective_not_started): every rank's side traffic stays paired. */
#include "runner.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checker_set.h"
#include "collective.h" /* vqc_collective_not_started */
#include "run_memory.h"
#include "run_models.h"
#include "rundir.h"
#include "vqc/clock.h"
#include "vqc/fsutil.h"

/* Side-channel deadline, threads: 2 x the data deadline + this. */
#define SIDE_SLACK_S 10.0
/* Launched backends: the step loop's side-channel deadline is the data
 * deadline + this: in the loop the ranks meet at every data collective, so
 * they reach a side exchange within moments of each other, and a rank
 * waiting there for a peer stuck in a data collective hears of that
 * peer's stop within T... */
#define LAUNCHED_SIDE_SLACK_S 1.0
/* ...and every side wait after this rank's training stopped ends within
 * this of the stop. The live ranks stop within moments of each other (the
 * first one's abort wakes the rest), and with every rank alive the whole
 * end, agreement to gathered findings, takes milliseconds; 2 s leaves room
 * for a loaded node. A stopped rank is then reported T + 2 s after it
 * stopped (T + 3 s when the others were in a side exchange), inside the
 * T + 5 s the supervisor also keeps. */
#define END_SLACK_S 2.0
/* Bytes of a rank's training message carried to rank 0 (mpi). */
#define RANK_MESSAGE 256

/* How one rank's training ended. */
typedef struct rank_report {
  vqc_status training;
  int64_t steps_done;
  char message[RANK_MESSAGE];
  bool ending; /* the side channel's overall end deadline is set */
} rank_report;

/* What the rank bodies share (threads) or what the one rank uses (mpi). */
typedef struct run_world {
  const vqc_scenario *sc;
  const vqc_run_options *o;
  vqc_device device;        /* where the models run */
  const char *run_dir;
  vqc_findings *findings;   /* where checkers record */
  rank_report *reports;     /* threads: (size); mpi: this rank's at [0] */
  /* mpi: why this rank cannot train, found before run_rank (its copy of
   * the run directory); VQC_OK when none. */
  vqc_status start_error;
  char start_message[RANK_MESSAGE];
  vqc_step_summary *steps;  /* (sc->steps) rank 0's */
  int nsteps;
  int printed;              /* findings already shown on progress */
} run_world;

/* ---- progress */

static void print_new_findings(run_world *w) {
  FILE *f = w->o ? w->o->progress : NULL;
  if (!f) return;
  vqc_findings *fl = w->findings;
  pthread_mutex_lock(&fl->lock);
  for (; w->printed < fl->count; w->printed++) {
    const vqc_finding *x = &fl->items[w->printed];
    fprintf(f, "  ! %s at step %" PRId64 "%s%s: %s\n",
            vqc_finding_kind_name(x->kind), x->step, x->tensor[0] ? " in " : "",
            x->tensor, x->message);
  }
  pthread_mutex_unlock(&fl->lock);
  fflush(f);
}

/* ---- one rank */

static void report_error(rank_report *rep, vqc_status s, const char *what) {
  if (rep->training != VQC_OK) return; /* keep the first */
  rep->training = s;
  snprintf(rep->message, sizeof rep->message, "%s: %s", what,
           vqc_last_error()[0] ? vqc_last_error() : vqc_status_message(s));
}

/* The step agreement: the ranks learn whether every one of them is fine,
 * over the side channel, with a fixed-size exchange whose size does not
 * depend on the number of ranks: a MIN all_reduce of one word (the rank's
 * number when its training failed, else `size`) names the lowest failed
 * rank; only then does that rank broadcast its status and step (2 words).
 * A rank calls it at every check step (when the checkers' own exchanges are
 * due: step % interval == 0, and the last step), before those exchanges,
 * and once more when its step fails. Calls pair up whatever the ranks were
 * doing: a rank that failed meets the others at their next check step (or
 * at their own failure), never inside a checker's exchange, whose messages
 * differ in size (on MPI a mismatched exchange is not recoverable). Between
 * check steps nothing is exchanged, so a scenario can let the ranks run
 * apart (unsynced_dropout_seed) and see where the skew surfaces. Returns
 * VQC_OK when every rank is fine; otherwise VQC_EABORTED naming the first
 * rank that is not, or the exchange's own error (a rank gone). */
static vqc_status agree(vqc_comm *c, vqc_status mine, int64_t step,
                        char *why, size_t why_n) {
  const int size = vqc_comm_size(c);
  vqc_comm *side = vqc_comm_side(c);
  int64_t key = mine == VQC_OK ? size : vqc_comm_rank(c), first = size;
  vqc_status s = vqc_all_reduce(side, &key, &first, 1, VQC_I64, VQC_MIN);
  int64_t what[2] = {(int64_t)mine, step};
  if (s == VQC_OK && first < size)
    s = vqc_broadcast(side, what, 2, VQC_I64, (int)first);
  if (s != VQC_OK) {
    snprintf(why, why_n, "the step agreement failed: %s", vqc_last_error());
    return s;
  }
  if (first == size) return VQC_OK;
  snprintf(why, why_n, "rank %d stopped at step %" PRId64 " (%s)",
           (int)first, what[1], vqc_status_name((vqc_status)what[0]));
  return vqc_error(VQC_EABORTED, "%s", why);
}

/* The side channel's deadline in the step loop (see the top). */
static double loop_side_timeout(vqc_comm *c, double timeout_s) {
  return vqc_comm_backend(c) == VQC_BACKEND_THREADS
             ? 2 * timeout_s + SIDE_SLACK_S
             : timeout_s + LAUNCHED_SIDE_SLACK_S;
}

/* Launched backends, once this rank's training has stopped (it failed, a
 * peer did, or it could not start): one overall deadline for every
 * side-channel wait left in the run, set at the first stop only (see the
 * top). */
static void begin_end(vqc_comm *c, rank_report *rep, double timeout_s) {
  const vqc_backend b = vqc_comm_backend(c);
  if (b == VQC_BACKEND_THREADS || rep->ending) return;
  rep->ending = true;
  vqc_comm_set_overall_deadline(
      vqc_comm_side(c),
      END_SLACK_S + (b == VQC_BACKEND_MPI ? 0.0 : timeout_s));
}

/* Settles what the checkers left running after step_end (checker.h): before
 * the model writes its state (failed = false, from the model's hook), and
 * on a failure before agree (failed = true, vqc_checker_set_settle), so the
 * exchanges pair up. */
static vqc_status settle_before_update(void *user) {
  return vqc_checker_set_settle(user, false);
}

/* The divergence checker digests on a helper thread while the next step
 * trains (checker.h overlap) unless VQC_OVERLAP=0 is set, or in strict
 * mode (its fingerprint exchanges on the side channel before every data
 * collective could meet a failed peer's agreement, checker.h settle). */
static bool overlap_wanted(void) {
  const char *v = getenv("VQC_OVERLAP");
  return v == NULL || strcmp(v, "0") != 0;
}

static void run_rank(vqc_comm *c, run_world *w, rank_report *rep) {
  const vqc_scenario *sc = w->sc;
  const int rank = vqc_comm_rank(c);
  rep->training = VQC_OK;
  rep->steps_done = 0;
  rep->message[0] = '\0';
  rep->ending = false;
  vqc_comm_set_timeout(c, sc->timeout_s);
  vqc_comm_set_timeout(vqc_comm_side(c),
                       loop_side_timeout(c, sc->timeout_s));
  char why[512];

  vqc_run_model *m = NULL;
  vqc_status s = w->start_error;
  if (s != VQC_OK) {
    rep->training = s;
    snprintf(rep->message, sizeof rep->message, "%s", w->start_message);
  } else if ((s = vqc_run_model_create_device(sc, c, w->device, &m))) {
    report_error(rep, s, "building the model");
  }
  if (s != VQC_OK) {
    /* The others wait for this rank at the start agreement: meet them
     * there, so they learn at once that the run cannot start, and name
     * this rank. */
    vqc_comm_abort(c);
    begin_end(c, rep, sc->timeout_s);
    agree(c, s, -1, why, sizeof why);
    return;
  }
  vqc_check_ctx ctx = {
      .comm = c,
      .rank = rank,
      .size = vqc_comm_size(c),
      .state = vqc_run_model_state(m),
      .findings = w->findings,
      .opts = {sc->interval, sc->timeout_s, sc->tolerance, sc->strict,
               overlap_wanted() && !sc->strict},
      .run_dir = w->run_dir,
      .reference_grads =
          vqc_run_model_has_reference(m) ? vqc_run_model_reference_grads : NULL,
      .reference_user = m};
  /* Every checker, in checker_set.h's order (the collective one first). */
  vqc_checker_set set;
  vqc_checker_set_init(&set, &ctx);
  s = vqc_checker_set_attach(&set, VQC_CHECKER_ALL);
  if (s != VQC_OK) report_error(rep, s, "attaching the checkers");
  vqc_run_model_set_before_update(m, settle_before_update, &set);
  /* Train only if every rank is ready: a rank that could not attach (its
   * run directory unwritable, say) must not leave the others training. */
  if (s != VQC_OK) {
    vqc_comm_abort(c);
    begin_end(c, rep, sc->timeout_s);
  }
  vqc_status ready = agree(c, s, -1, why, sizeof why);
  if (s == VQC_OK && ready != VQC_OK) {
    s = ready;
    rep->training = s;
    snprintf(rep->message, sizeof rep->message, "did not start: %.200s", why);
  }
  if (ready != VQC_OK) {
    /* The same answer on every rank that got here, so none of them runs
     * the collective checker's end exchanges (a rank that could not
     * attach it has none to run): the side channel stays paired. */
    begin_end(c, rep, sc->timeout_s);
    if (set.collective >= 0)
      (void)vqc_collective_not_started(&set.chk[set.collective]);
  }

  const int interval = sc->interval >= 1 ? sc->interval : 1;
  for (int64_t step = 0; s == VQC_OK && step < sc->steps; step++) {
    const double t0 = vqc_now_s();
    double loss = 0.0;
    s = vqc_run_model_step(m, step, &loss);
    if (s != VQC_OK) {
      report_error(rep, s, "training");
      /* Peers waiting in a data collective for this rank stop now (threads:
       * the shared flag; mpi: a notice to every peer) instead of at their
       * deadline. The side channel stays up for the checkers. */
      vqc_comm_abort(c);
      begin_end(c, rep, sc->timeout_s);
      vqc_checker_set_settle(&set, true);
      agree(c, s, step, why, sizeof why);
      break;
    }
    if (step % interval == 0 || step == sc->steps - 1) {
      s = agree(c, VQC_OK, step, why, sizeof why);
      if (s != VQC_OK) {
        /* A peer failed: this rank stops too, its training intact. */
        rep->training = s;
        snprintf(rep->message, sizeof rep->message, "stopped at step %"
                 PRId64 ": %.200s", step, why);
        vqc_comm_abort(c);
        begin_end(c, rep, sc->timeout_s);
        break;
      }
    }
    const char *failed = NULL;
    s = vqc_checker_set_step_end(&set, step, &failed);
    if (s != VQC_OK) report_error(rep, s, failed);
    if (s != VQC_OK) {
      vqc_comm_abort(c);
      begin_end(c, rep, sc->timeout_s);
      vqc_checker_set_settle(&set, true);
      agree(c, s, step, why, sizeof why);
      break;
    }
    rep->steps_done = step + 1;
    if (rank == 0 && step < w->nsteps) {
      vqc_step_summary *st = &w->steps[step];
      st->step = step;
      st->seconds = vqc_now_s() - t0;
      st->loss = loss;
      st->findings = vqc_findings_count(w->findings);
      if (w->o && w->o->progress) {
        /* Steps count from 0, as in findings and expectations. */
        fprintf(w->o->progress, "step %4" PRId64 "/%d  loss %-12.6g %8.3fs  "
                "findings %d\n", step, sc->steps - 1, loss, st->seconds,
                st->findings);
        print_new_findings(w);
      }
    }
  }

  /* Every checker sees how this rank's training ended, a checker's own
   * failure at the end included. */
  for (int i = 0; i < set.attached; i++) {
    vqc_checker *k = &set.chk[i];
    vqc_status f = k->finish(k, &ctx, rep->training);
    if (f != VQC_OK && rep->training == VQC_OK) {
      char what[64];
      snprintf(what, sizeof what, "%s checker at the end", k->name);
      report_error(rep, f, what);
    }
  }
  vqc_checker_set_destroy(&set);
  vqc_run_model_destroy(m);
}

/* ---- result */

static void result_init(vqc_run_result *r, const vqc_scenario *sc,
                        vqc_device device) {
  memset(r, 0, sizeof *r);
  vqc_findings_init(&r->findings);
  r->ranks = sc->ranks;
  r->failed_rank = -1;
  r->device = device;
}

/* Whether sc can run on device d over backend b (a device path, a usable
 * device): checked before the run directory is touched, so a refused run
 * writes nothing. */
static vqc_status check_device(const vqc_scenario *sc, vqc_device d,
                               vqc_backend b) {
  VQC_TRY(vqc_run_check_device(sc, d, b));
  return d == VQC_DEVICE_CUDA ? vqc_run_probe_device() : VQC_OK;
}

void vqc_run_result_free(vqc_run_result *r) {
  if (!r) return;
  /* The run directory's lock (vqc_run_dir_prepare) lives as long as the
   * result: the caller's reports are written under it. A no-op where this
   * process holds none (other mpi ranks, a run refused before). */
  vqc_run_dir_unlock(r->run_dir);
  vqc_findings_free(&r->findings);
  free(r->steps);
  r->steps = NULL;
  r->nsteps = 0;
}

int vqc_run_exit_code(const vqc_run_result *r) {
  vqc_findings *f = (vqc_findings *)&r->findings;
  if (vqc_findings_count(f) > 0) return 1;
  return r->training == VQC_OK ? 0 : 3;
}

/* Fills training, failed_rank and message from the per-rank reports. */
static void summarise(vqc_run_result *r, const rank_report *reps, int size) {
  r->training = VQC_OK;
  r->failed_rank = -1;
  r->message[0] = '\0';
  /* The first rank that failed by itself; ranks that only stopped because
   * a peer did (VQC_EABORTED) are the last resort. */
  for (int pass = 0; pass < 2 && r->failed_rank < 0; pass++) {
    for (int k = 0; k < size; k++) {
      if (reps[k].training == VQC_OK) continue;
      if (pass == 0 && reps[k].training == VQC_EABORTED) continue;
      r->training = reps[k].training;
      r->failed_rank = k;
      snprintf(r->message, sizeof r->message, "rank %d: %.900s", k,
               reps[k].message);
      break;
    }
  }
  r->steps_done = reps[0].steps_done;
}

/* ---- threads */

static vqc_status thread_body(vqc_comm *c, void *arg) {
  run_world *w = arg;
  run_rank(c, w, &w->reports[vqc_comm_rank(c)]);
  /* Always OK: a non-OK return would make vqc_threads_run abort the side
   * channels under ranks still finishing; how training ended is in the
   * report. */
  return VQC_OK;
}

static vqc_status world_init(run_world *w, const vqc_scenario *sc,
                             const vqc_run_options *o, vqc_device device,
                             const char *run_dir, vqc_findings *findings,
                             int nreports) {
  memset(w, 0, sizeof *w);
  w->sc = sc;
  w->o = o;
  w->device = device;
  w->run_dir = run_dir;
  w->findings = findings;
  w->reports = calloc((size_t)nreports, sizeof *w->reports);
  w->nsteps = sc->steps;
  w->steps = calloc((size_t)sc->steps + 1, sizeof *w->steps);
  if (!w->reports || !w->steps) {
    free(w->reports);
    free(w->steps);
    return vqc_error(VQC_ENOMEM, "runner: no memory for %d steps", sc->steps);
  }
  return VQC_OK;
}

/* Moves rank 0's step summaries into the result. */
static void take_steps(vqc_run_result *r, run_world *w) {
  r->steps = w->steps;
  r->nsteps = (int)(r->steps_done < w->nsteps ? r->steps_done : w->nsteps);
  w->steps = NULL;
}

vqc_status vqc_run_threads(const vqc_scenario *sc, const vqc_run_options *o,
                           vqc_run_result *out) {
  return vqc_run_threads_device(sc, o, VQC_DEVICE_CPU, out);
}

vqc_status vqc_run_threads_device(const vqc_scenario *sc,
                                  const vqc_run_options *o, vqc_device device,
                                  vqc_run_result *out) {
  if (!sc || !out) return vqc_error(VQC_EINVAL, "run: NULL argument");
  result_init(out, sc, device);
  out->backend = VQC_BACKEND_THREADS;
  VQC_TRY(vqc_run_check_memory(sc)); /* before any rank allocates */
  VQC_TRY(vqc_run_check_fault(sc));
  VQC_TRY(check_device(sc, device, VQC_BACKEND_THREADS));
  vqc_run_dir_choose(o ? o->out_dir : NULL, sc->name, out->run_dir,
                     sizeof out->run_dir);
  /* Refuses a directory that is not vqcheck's or that another process is
   * writing (VQC_EINVAL); on success this process holds its lock until
   * vqc_run_result_free(out) (rundir.h). */
  vqc_status s = vqc_run_dir_prepare(out->run_dir);
  if (s != VQC_OK) return s;
  run_world w;
  if ((s = world_init(&w, sc, o, device, out->run_dir, &out->findings,
                      sc->ranks)))
    return s;
  const double t0 = vqc_now_s();
  s = vqc_threads_run(sc->ranks, sc->timeout_s, thread_body, &w, NULL);
  out->seconds = vqc_now_s() - t0;
  if (s == VQC_OK) {
    summarise(out, w.reports, sc->ranks);
    take_steps(out, &w);
    vqc_findings_merge_duplicates(&out->findings);
    if (w.o && w.o->progress) print_new_findings(&w);
    s = vqc_run_write_json(sc, out);
  }
  free(w.reports);
  free(w.steps);
  return s;
}

/* ---- mpi */

/* Wire form of a rank's report for the side-channel gather. */
typedef struct report_msg {
  int64_t training;
  int64_t steps_done;
  char message[RANK_MESSAGE];
} report_msg;

vqc_status vqc_run_on_comm(const vqc_scenario *sc, const vqc_run_options *o,
                           vqc_comm *c, vqc_run_result *out) {
  return vqc_run_on_comm_device(sc, o, VQC_DEVICE_CPU, c, out);
}

vqc_status vqc_run_on_comm_device(const vqc_scenario *sc,
                                  const vqc_run_options *o, vqc_device device,
                                  vqc_comm *c, vqc_run_result *out) {
  if (!sc || !c || !out) return vqc_error(VQC_EINVAL, "run: NULL argument");
  result_init(out, sc, device);
  const int rank = vqc_comm_rank(c), size = vqc_comm_size(c);
  out->rank = rank;
  out->ranks = size;
  out->backend = vqc_comm_backend(c);
  vqc_comm *side = vqc_comm_side(c);
  VQC_TRY(vqc_run_check_fault(sc));
  if (size != sc->ranks)
    return vqc_error(VQC_EINVAL, "%s: the scenario has %d ranks but the "
                     "launcher started %d (pass --ranks %d to run it on %d)",
                     sc->path, sc->ranks, size, size, size);
  VQC_TRY(vqc_run_check_memory_comm(sc, c)); /* every rank: same answer */
  vqc_comm_set_timeout(side, loop_side_timeout(c, sc->timeout_s));
  /* Every rank checks the scenario and its own device before the run
   * directory is touched. The scenario check gives every rank the same
   * answer; the device may not, so with cuda the ranks agree first (one
   * rank returning alone would leave the others in the broadcast below). */
  vqc_status dev = check_device(sc, device, out->backend);
  if (device == VQC_DEVICE_CUDA) {
    char why[1024];
    snprintf(why, sizeof why, "%s", vqc_last_error());
    int64_t bad = dev != VQC_OK, any_bad = 0;
    VQC_TRY(vqc_all_reduce(side, &bad, &any_bad, 1, VQC_I64, VQC_MAX));
    if (dev != VQC_OK) return vqc_error(dev, "%s", why);
    if (any_bad)
      return vqc_error(VQC_ENODEVICE, "another rank has no usable CUDA device "
                       "(its own message says why): run with --device cpu");
  }
  if (dev != VQC_OK) return dev;

  /* Rank 0 names and prepares the directory; the broadcast of its name is
   * also the barrier that keeps the others from writing into it before the
   * stale files are gone. A failure travels as an empty name. */
  char dir[4096] = "";
  vqc_status s = VQC_OK;
  if (rank == 0) {
    vqc_run_dir_choose(o ? o->out_dir : NULL, sc->name, dir, sizeof dir);
    /* Rank 0's process alone checks, locks (until vqc_run_result_free)
     * and clears. */
    s = vqc_run_dir_prepare(dir);
    if (s != VQC_OK) dir[0] = '\0';
  }
  vqc_status b = vqc_broadcast(side, dir, sizeof dir, VQC_U8, 0);
  if (s != VQC_OK) return s;
  if (b != VQC_OK) return b;
  if (dir[0] == '\0')
    return vqc_error(VQC_EIO, "rank 0 could not prepare the run directory");
  snprintf(out->run_dir, sizeof out->run_dir, "%s", dir);
  /* A rank that cannot reach the directory still runs run_rank, which
   * takes it to the start agreement (the others wait for it there). */
  vqc_status start = rank != 0 ? vqc_mkdir_p(dir) : VQC_OK;
  char start_why[RANK_MESSAGE] = "";
  if (start != VQC_OK)
    snprintf(start_why, sizeof start_why, "preparing the run directory: %s",
             vqc_last_error());

  vqc_findings mine;
  vqc_findings_init(&mine);
  run_world w;
  if ((s = world_init(&w, sc, o, device, out->run_dir, &mine, 1))) {
    vqc_findings_free(&mine);
    return s;
  }
  w.start_error = start;
  snprintf(w.start_message, sizeof w.start_message, "%s", start_why);
  const double t0 = vqc_now_s();
  run_rank(c, &w, &w.reports[0]);
  out->seconds = vqc_now_s() - t0;

  /* Every rank's report, then every rank's findings. If a rank is gone the
   * gathers time out: keep what this rank knows and say so. */
  report_msg msg, *msgs = calloc((size_t)size, sizeof *msgs);
  rank_report *reps = calloc((size_t)size, sizeof *reps);
  memset(&msg, 0, sizeof msg);
  msg.training = w.reports[0].training;
  msg.steps_done = w.reports[0].steps_done;
  snprintf(msg.message, sizeof msg.message, "%s", w.reports[0].message);
  vqc_status g = msgs && reps ? vqc_all_gather(side, &msg, msgs, sizeof msg,
                                               VQC_U8)
                              : VQC_ENOMEM;
  if (g == VQC_OK) {
    for (int r = 0; r < size; r++) {
      reps[r].training = (vqc_status)msgs[r].training;
      reps[r].steps_done = msgs[r].steps_done;
      msgs[r].message[RANK_MESSAGE - 1] = '\0';
      snprintf(reps[r].message, sizeof reps[r].message, "%s", msgs[r].message);
    }
    summarise(out, reps, size);
    g = vqc_findings_gather(side, &mine, &out->findings);
  }
  if (g != VQC_OK) {
    /* This rank's own view only. */
    summarise(out, w.reports, 1);
    if (out->training != VQC_OK) {
      out->failed_rank = rank;
      snprintf(out->message, sizeof out->message, "rank %d: %.900s", rank,
               w.reports[0].message);
    }
    vqc_findings_free(&out->findings);
    vqc_findings_init(&out->findings);
    /* Best effort: run.json then lists what it could. */
    (void)vqc_findings_copy(&out->findings, &mine);
    if (out->training == VQC_OK) {
      out->training = g;
      snprintf(out->message, sizeof out->message, "rank %d could not gather "
               "the other ranks' results: %.900s", rank, vqc_last_error());
    }
  }
  free(msgs);
  free(reps);
  take_steps(out, &w);
  vqc_findings_merge_duplicates(&out->findings);
  w.findings = &out->findings;
  w.printed = 0;
  s = VQC_OK;
  if (rank == 0) s = vqc_run_write_json(sc, out);
  /* The others wait until run.json is in place: a rank that exits first
   * with a non-zero code makes the launcher kill the job, rank 0 too. */
  int64_t written = s;
  if (vqc_broadcast(side, &written, 1, VQC_I64, 0) == VQC_OK && rank != 0 &&
      written != VQC_OK)
    s = vqc_error((vqc_status)written, "rank 0 could not write run.json");
  /* The caller's own exchanges have their own deadlines. */
  vqc_comm_set_overall_deadline(side, 0);
  free(w.reports);
  free(w.steps);
  vqc_findings_free(&mine);
  return s;
}

/* ---- run.json */

/* On one rank, divergence has no second copy to compare: run.json says so
 * ("checks" lists every other kind, "checks_not_run" gives the reason), so
 * no report can show it as passed (reports/report_internal.h rep_check). */
static void record_one_rank_checks(json_t *j, int ranks) {
  if (ranks >= 2) return;
  json_t *checks = json_array();
  for (int k = 0; k < VQC_FINDING_KIND_COUNT; k++)
    if (k != VQC_FINDING_DIVERGENCE)
      json_array_append_new(
          checks, json_string(vqc_finding_kind_name((vqc_finding_kind)k)));
  json_object_set_new(j, "checks", checks);
  json_object_set_new(j, "checks_not_run",
                      json_pack("{s:s}", "divergence",
                                "1 rank: nothing to compare"));
}

vqc_status vqc_run_write_json(const vqc_scenario *sc, const vqc_run_result *r) {
  json_t *head = json_object();
  json_object_set_new(head, "scenario", vqc_scenario_to_json(sc));
  const vqc_run_json_info info = {
      .backend = vqc_backend_name(r->backend),
      .device = r->device == VQC_DEVICE_CUDA ? "cuda" : "cpu",
      .ranks = r->ranks,
      .duration_s = r->seconds,
      .training = r->training,
      .failed_rank = r->failed_rank,
      .message = r->message,
      .steps_done = r->steps_done,
      .findings = (vqc_findings *)&r->findings, /* locked, not changed */
      .exit_code = vqc_run_exit_code(r)};
  json_t *j = vqc_run_json_new(head, &info);
  json_t *steps = json_object_get(j, "steps");
  for (int i = 0; i < r->nsteps; i++) {
    json_t *o = json_object();
    json_object_set_new(o, "step", json_integer(r->steps[i].step));
    json_object_set_new(o, "seconds", json_real(r->steps[i].seconds));
    json_object_set_new(o, "loss", isfinite(r->steps[i].loss)
                                       ? json_real(r->steps[i].loss)
                                       : json_string("nonfinite"));
    json_object_set_new(o, "findings", json_integer(r->steps[i].findings));
    json_array_append_new(steps, o);
  }
  record_one_rank_checks(j, r->ranks);
  vqc_status s = vqc_run_json_write(r->run_dir, j);
  json_decref(j);
  return s;
}

vqc_status vqc_run_read_json(const char *path, vqc_findings *f,
                             int *exit_code) {
  /* Bounded and checked (rundir.h): a link or an oversized file is
   * refused before it is parsed. */
  json_t *j = NULL;
  VQC_TRY(vqc_run_json_load(path, &j));
  vqc_status s = VQC_OK;
  const json_t *v = json_object_get(j, "schema_version");
  const json_t *fs = json_object_get(j, "findings");
  const json_t *ec = json_object_get(j, "exit_code");
  if (!json_is_integer(v) || json_integer_value(v) != 1)
    s = vqc_error(VQC_EPARSE, "%s: schema_version: expected 1", path);
  else if (!json_is_array(fs))
    s = vqc_error(VQC_EPARSE, "%s: findings: expected an array", path);
  else if (!json_is_integer(ec))
    s = vqc_error(VQC_EPARSE, "%s: exit_code: expected an integer", path);
  for (size_t i = 0; s == VQC_OK && i < json_array_size(fs); i++) {
    vqc_finding x;
    s = vqc_finding_from_json(json_array_get(fs, i), &x);
    if (s != VQC_OK) {
      s = vqc_error(VQC_EPARSE, "%s: findings[%zu]: %s", path, i,
                    vqc_last_error());
      break;
    }
    s = vqc_findings_add(f, &x);
  }
  if (s == VQC_OK && exit_code) *exit_code = (int)json_integer_value(ec);
  json_decref(j);
  return s;
}
