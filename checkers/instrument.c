/* instrument.c: the instrumentation session (see instrument.h).
 *
 * A session is the runner's per-rank body (harness/run/runner.c) turned inside
 * out: instead of driving a model it owns the vqc_check_ctx and the
 * checkers, and the user's loop calls in at step ends. What it adds is the
 * plumbing the runner does around its ranks:
 *
 *   create   rank 0 prepares the run directory and broadcasts its name over
 *            the side channel. On the threads backend the broadcast also
 *            carries the address of one findings list that every rank's
 *            checkers share (the ranks are threads of one process, and the
 *            checkers rely on a shared list there to record each finding
 *            once); it is reference-counted, so whichever rank's session
 *            goes last frees it.
 *   finish   every checker's finish (collective first: it is where the ranks
 *            agree on how the run ended), then an all_gather of how each
 *            rank ended (a barrier too: after it no checker adds findings),
 *            then the findings reach rank 0 (threads: already there; mpi:
 *            JSON over the side channel), are merged and written to
 *            run.json, and rank 0 broadcasts the count and exit code.
 *
 * The run directory, the cross-rank merge of findings and the common part of
 * run.json are shared with the runner (rundir.h, findings.h); what the
 * session adds to run.json is its subject ("program" and "check" where the
 * runner writes "scenario") and its steps. */
#include "vqc/instrument.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "checker_set.h"
#include "collective.h"
#include "findings.h"
#include "rundir.h"
#include "utf8.h"
#include "vqc/clock.h"
#include "vqc/fsutil.h"

/* Side-channel deadline = 2 x the data deadline + this (as the runner). */
#define SIDE_SLACK_S 10.0
#define DEFAULT_TIMEOUT_S 60.0
/* Bytes of a rank's error message carried to rank 0. */
#define RANK_MESSAGE 256

/* The findings list the ranks' checkers record into: one per world on the
 * threads backend (refs = number of sessions still holding it), one per
 * rank on mpi (refs = 1). */
typedef struct shared_findings {
  vqc_findings list;
  long refs; /* changed with __atomic builtins */
} shared_findings;

/* Rank 0's record of one step, for run.json. */
typedef struct step_time {
  int64_t step;
  double seconds;
  int findings;
} step_time;

struct vqc_instr {
  vqc_comm *comm;
  int rank, size;
  char name[128];
  char run_dir[4096];
  unsigned checks;
  vqc_check_options check_opts;
  vqc_instr_reference_fn reference_grads;
  void *reference_user;

  vqc_param_list params;     /* the registered replicated state */
  shared_findings *shared;   /* where the checkers record */
  vqc_findings merged;       /* mpi rank 0: every rank's, merged */
  vqc_check_ctx ctx;
  vqc_checker_set checkers;  /* those of `checks`, over ctx */
  bool started, finished;

  double t_start, t_last;    /* CLOCK_MONOTONIC seconds */
  step_time *steps;          /* rank 0's, (nsteps) of capacity cap_steps */
  int nsteps, cap_steps;
  int64_t steps_done;        /* last step_end + 1 */

  int nfindings;             /* after finish: merged count (every rank) */
  int exit_code;             /* after finish (every rank) */
};

static void shared_release(shared_findings *sh) {
  if (!sh) return;
  if (__atomic_sub_fetch(&sh->refs, 1, __ATOMIC_ACQ_REL) == 0) {
    vqc_findings_free(&sh->list);
    free(sh);
  }
}

/* ---- create, register, start */

/* What rank 0 broadcasts at create. */
typedef struct create_msg {
  char dir[4096];  /* "" when rank 0 failed */
  uint64_t shared; /* threads: address of the shared findings list */
} create_msg;

vqc_status vqc_instr_create(vqc_comm *comm, const vqc_instr_options *opts,
                            vqc_instr **out) {
  if (!comm || !out)
    return vqc_error(VQC_EINVAL, "vqc_instr_create: NULL comm or out");
  *out = NULL;
  vqc_instr_options o;
  memset(&o, 0, sizeof o);
  if (opts) o = *opts;
  if (!vqc_comm_side(comm) || !vqc_comm_ledger(comm))
    return vqc_error(VQC_EINVAL, "vqc_instr_create: pass a data comm (one with "
                     "a ledger and a side channel), not a side channel");
  unsigned checks = o.checks ? o.checks : (unsigned)VQC_INSTR_DEFAULT;
  if ((checks & VQC_INSTR_EQUIVALENCE) && !o.reference_grads)
    return vqc_error(VQC_EINVAL, "vqc_instr_create: the equivalence checker "
                     "needs options.reference_grads");

  vqc_instr *s = calloc(1, sizeof *s);
  if (!s) return vqc_error(VQC_ENOMEM, "vqc_instr_create: no memory");
  s->comm = comm;
  s->rank = vqc_comm_rank(comm);
  s->size = vqc_comm_size(comm);
  snprintf(s->name, sizeof s->name, "%s",
           o.name && o.name[0] ? o.name : "instrumented");
  s->checks = checks;
  s->check_opts.interval = o.interval >= 1 ? o.interval : 1;
  s->check_opts.timeout_s = o.timeout_s > 0 ? o.timeout_s : DEFAULT_TIMEOUT_S;
  s->check_opts.tolerance = o.tolerance;
  s->check_opts.strict = o.strict;
  s->check_opts.overlap = o.overlap && !o.strict; /* see runner.c */
  s->reference_grads = o.reference_grads;
  s->reference_user = o.reference_user;
  vqc_checker_set_init(&s->checkers, &s->ctx);
  vqc_param_list_init(&s->params);
  vqc_findings_init(&s->merged);
  vqc_comm_set_timeout(comm, s->check_opts.timeout_s);
  vqc_comm_set_timeout(vqc_comm_side(comm),
                       2 * s->check_opts.timeout_s + SIDE_SLACK_S);

  const bool threads = vqc_comm_backend(comm) == VQC_BACKEND_THREADS;
  create_msg *msg = calloc(1, sizeof *msg); /* 4 KiB: not on the stack */
  if (!msg) {
    free(s);
    return vqc_error(VQC_ENOMEM, "vqc_instr_create: no memory");
  }
  vqc_status s0 = VQC_OK; /* rank 0's own failure */
  shared_findings *mine = NULL;
  if (s->rank == 0) {
    vqc_run_dir_choose(o.run_dir, s->name, msg->dir, sizeof msg->dir);
    s0 = vqc_run_dir_prepare(msg->dir); /* takes its lock */
    if (s0 == VQC_OK && !(mine = calloc(1, sizeof *mine))) {
      vqc_run_dir_unlock(msg->dir);
      s0 = vqc_error(VQC_ENOMEM, "vqc_instr_create: no memory");
    }
    if (s0 == VQC_OK) {
      vqc_findings_init(&mine->list);
      /* Threads: one reference per rank's session, taken by each rank when
       * it receives the address below. */
      mine->refs = threads ? s->size : 1;
      msg->shared = (uint64_t)(uintptr_t)mine;
    }
    if (s0 != VQC_OK) msg->dir[0] = '\0';
  }
  vqc_status b = vqc_broadcast(vqc_comm_side(comm), msg, sizeof *msg, VQC_U8, 0);
  vqc_status st = s0;
  if (st == VQC_OK && b != VQC_OK) st = b;
  if (st == VQC_OK && msg->dir[0] == '\0')
    st = vqc_error(VQC_EIO, "instrument: rank 0 could not prepare the run "
                   "directory");
  if (st == VQC_OK) {
    snprintf(s->run_dir, sizeof s->run_dir, "%s", msg->dir);
    /* Several nodes: the directory is on a shared filesystem, and mkdir of
     * an existing one is harmless; one node: it exists already. */
    if (s->rank != 0) st = vqc_mkdir_p(s->run_dir);
  }
  if (st == VQC_OK) {
    if (threads) {
      s->shared = (shared_findings *)(uintptr_t)msg->shared;
    } else if (s->rank == 0) {
      s->shared = mine;
    } else if (!(s->shared = calloc(1, sizeof *s->shared))) {
      st = vqc_error(VQC_ENOMEM, "vqc_instr_create: no memory");
    } else {
      vqc_findings_init(&s->shared->list);
      s->shared->refs = 1;
    }
  } else if (threads && b == VQC_OK && msg->shared != 0 && s->rank != 0) {
    /* Rank 0 shared a list but this rank failed after: hand its reference
     * back so the list is still freed. */
    shared_release((shared_findings *)(uintptr_t)msg->shared);
  } else if (s->rank == 0 && mine && !(threads && b != VQC_OK)) {
    vqc_findings_free(&mine->list);
    free(mine);
  }
  /* (threads, rank 0, failed broadcast: the other ranks may or may not hold
   * the list, so it is left allocated rather than freed under them.) */
  if (st != VQC_OK && s->rank == 0 && s0 == VQC_OK)
    vqc_run_dir_unlock(msg->dir); /* prepared, but no session to hold it */
  free(msg);
  if (st != VQC_OK) {
    vqc_findings_free(&s->merged);
    free(s);
    return st;
  }
  s->ctx.comm = comm;
  s->ctx.rank = s->rank;
  s->ctx.size = s->size;
  s->ctx.state = &s->params;
  s->ctx.findings = &s->shared->list;
  s->ctx.opts = s->check_opts;
  s->ctx.run_dir = s->run_dir;
  s->ctx.reference_grads = s->reference_grads;
  s->ctx.reference_user = s->reference_user;
  *out = s;
  return VQC_OK;
}

vqc_status vqc_instr_register(vqc_instr *s, const char *name, vqc_dtype dt,
                              void *data, float *grad, int ndim,
                              const int64_t *shape) {
  if (!s || !name || !data || (ndim > 0 && !shape))
    return vqc_error(VQC_EINVAL, "vqc_instr_register: NULL argument");
  if (s->started)
    return vqc_error(VQC_EINVAL, "vqc_instr_register(%s): the session has "
                     "started; register every tensor before vqc_instr_start",
                     name);
  if (ndim < 0 || ndim > VQC_MAX_DIMS)
    return vqc_error(VQC_EINVAL, "vqc_instr_register(%s): ndim %d not in "
                     "0..%d", name, ndim, VQC_MAX_DIMS);
  for (int k = 0; k < ndim; k++)
    if (shape[k] < 0)
      return vqc_error(VQC_EINVAL, "vqc_instr_register(%s): shape[%d] = %"
                       PRId64 " is negative", name, k, shape[k]);
  return vqc_param_list_add(&s->params, name, dt, data, grad, ndim, shape);
}

vqc_status vqc_instr_register_tensor(vqc_instr *s, const char *name,
                                     const vqc_tensor *t, float *grad) {
  if (!s || !t || !t->storage)
    return vqc_error(VQC_EINVAL, "vqc_instr_register_tensor: NULL or empty "
                     "tensor");
  if (t->storage->device != VQC_DEVICE_CPU || !vqc_tensor_is_contiguous(t))
    return vqc_error(VQC_EINVAL, "vqc_instr_register_tensor(%s): the tensor "
                     "must be contiguous and on the CPU (register a host "
                     "copy of a device tensor, or .contiguous() of a view)",
                     name ? name : "?");
  /* The untracked address: registering is not a use of the tensor's
   * contents in the lost-in-place checker's sense. */
  return vqc_instr_register(s, name, t->dtype, vqc_tensor_data_untracked(t),
                            grad, t->ndim, t->shape);
}

vqc_status vqc_instr_start(vqc_instr *s) {
  if (!s) return vqc_error(VQC_EINVAL, "vqc_instr_start: NULL session");
  if (s->started)
    return vqc_error(VQC_EINVAL, "vqc_instr_start: called twice");
  s->started = true;
  /* In checker_set.h's order (the collective checker first). */
  VQC_TRY(vqc_checker_set_attach(&s->checkers, s->checks));
  s->t_start = s->t_last = vqc_now_s();
  return VQC_OK;
}

/* ---- steps */

static void record_step(vqc_instr *s, int64_t step) {
  const double t = vqc_now_s();
  if (s->nsteps == s->cap_steps) {
    int cap = s->cap_steps ? 2 * s->cap_steps : 64;
    step_time *p = realloc(s->steps, (size_t)cap * sizeof *p);
    if (!p) return; /* run.json then lists fewer steps; not worth failing */
    s->steps = p;
    s->cap_steps = cap;
  }
  step_time *r = &s->steps[s->nsteps++];
  r->step = step;
  r->seconds = t - s->t_last;
  r->findings = vqc_findings_count(&s->shared->list);
  s->t_last = t;
}

vqc_status vqc_instr_step_end(vqc_instr *s, int64_t step) {
  if (!s) return vqc_error(VQC_EINVAL, "vqc_instr_step_end: NULL session");
  if (!s->started || s->finished)
    return vqc_error(VQC_EINVAL, "vqc_instr_step_end(%" PRId64 "): call it "
                     "between vqc_instr_start and vqc_instr_finish", step);
  VQC_TRY(vqc_checker_set_step_end(&s->checkers, step, NULL));
  s->steps_done = step + 1;
  if (s->rank == 0) record_step(s, step);
  return VQC_OK;
}

vqc_status vqc_instr_state_will_change(vqc_instr *s) {
  if (!s)
    return vqc_error(VQC_EINVAL, "vqc_instr_state_will_change: NULL session");
  if (!s->started || s->finished) return VQC_OK; /* nothing runs then */
  return vqc_checker_set_settle(&s->checkers, false);
}

/* ---- finish */

/* How one rank ended, as exchanged at finish (bytes, zeroed first). */
typedef struct rank_end {
  int64_t training;   /* vqc_status */
  int64_t checks;     /* vqc_status of the checkers' finish */
  int64_t steps_done;
  char message[RANK_MESSAGE];
} rank_end;

/* The summary of every rank's end, for run.json. */
typedef struct run_summary {
  vqc_status training; /* first failing rank's (by rank), VQC_OK if none */
  int failed_rank;     /* -1 when every rank trained and checked cleanly */
  char message[RANK_MESSAGE + 64];
  int64_t steps_done;  /* rank 0's */
  bool any_error;      /* a training or checker error on some rank */
} run_summary;

static void summarise(run_summary *sum, const rank_end *ends, int n) {
  memset(sum, 0, sizeof *sum);
  sum->failed_rank = -1;
  sum->steps_done = ends[0].steps_done;
  for (int r = 0; r < n; r++) {
    vqc_status bad = ends[r].training != VQC_OK ? (vqc_status)ends[r].training
                                                : (vqc_status)ends[r].checks;
    if (bad == VQC_OK) continue;
    sum->any_error = true;
    if (sum->failed_rank >= 0) continue;
    sum->failed_rank = r;
    sum->training = bad;
    snprintf(sum->message, sizeof sum->message, "rank %d: %.*s", r,
             RANK_MESSAGE - 1, ends[r].message);
  }
}

/* The names of the checkers of `checks`, "collective,divergence,...", in
 * checker_set.h's order. */
static const char *checker_names(unsigned checks, char *buf, size_t n) {
  static const struct {
    unsigned bit;
    const char *name;
  } names[] = {
#define NAME_OF(name, bit, ctor, kinds) {bit, #name},
      VQC_CHECKER_LIST(NAME_OF)
#undef NAME_OF
  };
  size_t pos = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    if (!(checks & names[i].bit)) continue;
    int w = snprintf(buf + pos, n - pos, "%s%s", pos ? "," : "", names[i].name);
    if (w < 0 || (size_t)w >= n - pos) break;
    pos += (size_t)w;
  }
  return buf;
}

/* run.json in the run directory (rundir.h): the session's subject, the
 * common part, and rank 0's step times. */
static vqc_status write_run_json(const vqc_instr *s, vqc_findings *fl,
                                 const run_summary *sum, int exit_code) {
  json_t *head = json_object();
  json_t *prog = json_object();
  json_object_set_new(prog, "name", vqc_json_text(s->name, strlen(s->name)));
  json_object_set_new(prog, "instrumented", json_true());
  json_object_set_new(head, "program", prog);
  json_t *chk = json_object();
  char names[128];
  json_object_set_new(chk, "checkers",
                      json_string(checker_names(s->checks, names, sizeof names)));
  json_object_set_new(chk, "interval", json_integer(s->check_opts.interval));
  json_object_set_new(chk, "timeout_s", json_real(s->check_opts.timeout_s));
  json_object_set_new(chk, "tolerance", json_real(s->check_opts.tolerance));
  json_object_set_new(chk, "strict", json_boolean(s->check_opts.strict));
  json_object_set_new(chk, "tensors", json_integer(s->params.count));
  json_object_set_new(head, "check", chk);
  const vqc_run_json_info info = {
      .backend = vqc_backend_name(vqc_comm_backend(s->comm)),
      .device = NULL, /* the session reads host buffers only */
      .ranks = s->size,
      .duration_s = vqc_now_s() - s->t_start,
      .training = sum->training,
      .failed_rank = sum->failed_rank,
      .message = sum->message,
      .steps_done = sum->steps_done,
      .findings = fl,
      .exit_code = exit_code};
  json_t *j = vqc_run_json_new(head, &info);
  json_t *steps = json_object_get(j, "steps");
  for (int i = 0; i < s->nsteps; i++) {
    json_t *o = json_object();
    json_object_set_new(o, "step", json_integer(s->steps[i].step));
    json_object_set_new(o, "seconds", json_real(s->steps[i].seconds));
    json_object_set_new(o, "findings", json_integer(s->steps[i].findings));
    json_array_append_new(steps, o);
  }
  vqc_status st = vqc_run_json_write(s->run_dir, j);
  json_decref(j);
  return st;
}

vqc_status vqc_instr_finish(vqc_instr *s, vqc_status training,
                            int *nfindings) {
  if (nfindings) *nfindings = 0;
  if (!s) return vqc_error(VQC_EINVAL, "vqc_instr_finish: NULL session");
  if (s->finished) return vqc_error(VQC_EINVAL, "vqc_instr_finish: called twice");
  s->finished = true;

  rank_end mine;
  memset(&mine, 0, sizeof mine);
  mine.training = training;
  mine.steps_done = s->steps_done;
  if (training != VQC_OK) {
    snprintf(mine.message, sizeof mine.message, "%s",
             vqc_last_error()[0] ? vqc_last_error()
                                 : vqc_status_message(training));
    /* Peers waiting in a data collective for this rank stop now instead of
     * at their deadline; the side channel stays up for the checkers. */
    vqc_comm_abort(s->comm);
  }
  /* Background checks first: their exchange pairs with the peers' settle
   * (in their state_will_change or their own finish). */
  vqc_status checks =
      s->started ? vqc_checker_set_settle(&s->checkers, training != VQC_OK)
                 : VQC_OK;
  if (checks != VQC_OK && training == VQC_OK)
    snprintf(mine.message, sizeof mine.message, "%s", vqc_last_error());
  for (int i = 0; i < s->checkers.attached; i++) {
    vqc_checker *c = &s->checkers.chk[i];
    vqc_status f = c->finish(c, &s->ctx, training);
    if (f != VQC_OK && checks == VQC_OK) {
      checks = f;
      if (mine.message[0] == '\0')
        snprintf(mine.message, sizeof mine.message, "%s checker: %s",
                 c->name, vqc_last_error());
    }
  }
  mine.checks = checks;

  /* How every rank ended; completing this exchange also means every rank's
   * checkers are done adding findings. */
  vqc_comm *side = vqc_comm_side(s->comm);
  rank_end *ends = calloc((size_t)s->size, sizeof *ends);
  vqc_status g = ends ? vqc_all_gather(side, &mine, ends, sizeof mine, VQC_U8)
                      : vqc_error(VQC_ENOMEM, "instrument: %d ranks", s->size);
  const bool threads = vqc_comm_backend(s->comm) == VQC_BACKEND_THREADS;
  /* mpi: every rank's findings to rank 0 (threads: already shared). */
  if (g == VQC_OK && !threads)
    g = vqc_findings_gather(side, &s->shared->list,
                            s->rank == 0 ? &s->merged : NULL);

  run_summary sum;
  if (g == VQC_OK) {
    summarise(&sum, ends, s->size);
  } else {
    /* A peer is gone: this rank's own view, and the failure itself. */
    summarise(&sum, &mine, 1);
    if (sum.failed_rank >= 0) sum.failed_rank = s->rank;
    if (!sum.any_error) {
      sum.any_error = true;
      sum.failed_rank = s->rank;
      sum.training = g;
      snprintf(sum.message, sizeof sum.message, "rank %d could not gather "
               "the other ranks' results: %.200s", s->rank, vqc_last_error());
    }
  }
  free(ends);

  /* Rank 0 merges, writes run.json and tells everyone the outcome. */
  int64_t outcome[2] = {0, 0}; /* findings, exit code */
  vqc_status w = VQC_OK;
  if (s->rank == 0) {
    vqc_findings *fl = &s->shared->list;
    if (!threads) {
      if (g != VQC_OK) {
        vqc_findings_free(&s->merged);
        vqc_findings_init(&s->merged);
        vqc_findings_copy(&s->merged, &s->shared->list);
      }
      fl = &s->merged;
    }
    vqc_findings_merge_duplicates(fl);
    outcome[0] = vqc_findings_count(fl);
    outcome[1] = outcome[0] > 0 ? 1 : sum.any_error ? 3 : 0;
    w = write_run_json(s, fl, &sum, (int)outcome[1]);
  }
  vqc_status b = g == VQC_OK
                     ? vqc_broadcast(side, outcome, 2, VQC_I64, 0)
                     : g;
  if (b != VQC_OK && s->rank != 0) {
    /* No word from rank 0: what this rank knows. */
    outcome[0] = vqc_findings_count(&s->shared->list);
    outcome[1] = outcome[0] > 0 ? 1 : 3;
  }
  s->nfindings = (int)outcome[0];
  s->exit_code = (int)outcome[1];
  if (nfindings) *nfindings = s->nfindings;
  if (checks != VQC_OK) return checks;
  if (g != VQC_OK) return g;
  if (w != VQC_OK) return w;
  return b;
}

/* ---- after finish */

int vqc_instr_exit_code(const vqc_instr *s) {
  if (!s || !s->finished) return 3;
  return s->exit_code;
}

const vqc_findings *vqc_instr_findings(const vqc_instr *s) {
  if (!s || !s->finished || s->rank != 0) return NULL;
  return vqc_comm_backend(s->comm) == VQC_BACKEND_THREADS ? &s->shared->list
                                                          : &s->merged;
}

void vqc_instr_print_findings(const vqc_instr *s, FILE *f) {
  vqc_findings *fl = (vqc_findings *)vqc_instr_findings(s);
  if (!fl || !f) return;
  pthread_mutex_lock(&fl->lock);
  for (int i = 0; i < fl->count; i++) {
    const vqc_finding *x = &fl->items[i];
    fprintf(f, "%s", vqc_finding_kind_name(x->kind));
    if (x->step >= 0) fprintf(f, " at step %" PRId64, x->step);
    if (x->tensor[0]) fprintf(f, " in %s", x->tensor);
    if (x->nranks > 0) {
      fprintf(f, " (rank%s", x->nranks > 1 ? "s" : "");
      for (int r = 0; r < x->nranks; r++)
        fprintf(f, "%s%d", r ? "," : " ", x->ranks[r]);
      fprintf(f, ")");
    }
    if (x->site[0]) fprintf(f, " at %s", x->site);
    fprintf(f, ": %s\n", x->message);
  }
  fprintf(f, "%d finding%s; run directory %s\n", fl->count,
          fl->count == 1 ? "" : "s", s->run_dir);
  pthread_mutex_unlock(&fl->lock);
}

const char *vqc_instr_run_dir(const vqc_instr *s) {
  return s ? s->run_dir : NULL;
}

vqc_status vqc_instr_on_hang(vqc_instr *s, vqc_instr_hang_fn fn, void *user) {
  if (!s || s->checkers.collective < 0)
    return vqc_error(VQC_EINVAL, "vqc_instr_on_hang: the session has no "
                     "attached collective checker (call vqc_instr_start "
                     "first, with VQC_INSTR_COLLECTIVE enabled)");
  return vqc_collective_on_hang(&s->checkers.chk[s->checkers.collective],
                                fn, user);
}

void vqc_instr_destroy(vqc_instr *s) {
  if (!s) return;
  vqc_checker_set_destroy(&s->checkers);
  vqc_param_list_free(&s->params);
  vqc_findings_free(&s->merged);
  shared_release(s->shared);
  /* Rank 0 took the run directory's lock when it prepared it
   * (vqc_run_dir_prepare); the session is over, so is the lock. */
  if (s->rank == 0 && s->run_dir[0]) vqc_run_dir_unlock(s->run_dir);
  free(s->steps);
  free(s);
}
