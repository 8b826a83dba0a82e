/* instrument.h: vqcheck's checkers inside your own training code.
 *
 * The scenario runner (harness/run/runner.h) trains vqcheck's own models. This
 * API gives any C, C++ or CUDA training loop the same checks: you keep your
 * model, your data and your loop, and tell vqcheck three things: which
 * buffers are replicated state (weights, optimizer moments, buffers that
 * must be bit-identical on every rank), where a step ends, and that the run
 * is over. The checkers then find what they find in the runner:
 *
 *   divergence    replicated state that differs between ranks (first step,
 *                 tensor, outlier ranks, first differing index, ULPs), and
 *                 NaN/Inf in it (`nonfinite`);
 *   lost_inplace  a tensor collective whose result never reaches its tensor;
 *   collective    deadlocks, ranks that fail or leave early, and in strict
 *                 mode mismatched collectives before any data moves;
 *   shape         dead-code replacement counts (library probes, vqc/probe.h);
 *   equivalence   your gradients against a single-process recomputation
 *                 you provide (optional).
 *
 * Your collectives must go through the comm you instrument, with the
 * ledgered calls of vqc/comm.h: vqc_all_reduce, vqc_all_gather,
 * vqc_all_gatherv, vqc_broadcast, vqc_barrier, vqc_all_reduce_tensor and
 * vqc_all_reduce_tensor_out. They are macros that record the call site
 * (file:line, function) in the ledger, which is what the findings name.
 * A collective made around the comm (a raw MPI_Allreduce) is invisible.
 *
 * Usage (every rank runs the same calls in the same order):
 *
 *   vqc_instr_options o = {0};         zero = defaults (see below)
 *   o.run_dir = "runs/demo";
 *   vqc_instr *s = NULL;
 *   VQC_TRY(vqc_instr_create(comm, &o, &s));
 *   vqc_instr_register(s, "fc1.weight", VQC_F32, w1, dw1, 2, (int64_t[]){H, D});
 *   ...                                 every replicated buffer, same order
 *   VQC_TRY(vqc_instr_start(s));        before the first collective
 *   for (step = 0; step < steps && st == VQC_OK; step++) {
 *     st = train_step(comm, step);      uses vqc_all_reduce(comm, ...)
 *     if (st == VQC_OK) st = vqc_instr_step_end(s, step);
 *   }
 *   int nfindings = 0;
 *   vqc_instr_finish(s, st, &nfindings); findings merged, run.json written
 *   vqc_instr_print_findings(s, stdout); rank 0 prints them
 *   vqc_instr_destroy(s);
 *
 * Backends. threads (vqc_threads_run: N ranks as threads of one process;
 * the ranks' sessions share one findings list) and mpi (vqc_mpi_comm_create
 * under mpiexec/srun; each rank's findings travel to rank 0 as JSON over
 * the comm's side channel at finish). The checkers talk over the side
 * channel only, never over the data comm your code uses.
 *
 * The run directory: rank 0 creates it (removing the run.json, reports and
 * rank-* files a previous run left there: rundir.h, vqc_run_dir_prepare)
 * and, at finish, writes run.json: the findings
 * in the finding JSON form of DESIGN.md, how training ended on each rank,
 * rank 0's step times and the exit code, in the same schema as the
 * runner's run.json except that "program" replaces "scenario" (so
 * vqc_run_read_json and the report writers read it). The checkers add
 * rank-<r>.trace.jsonl (per-step digests) and, when a run goes wrong,
 * rank-<r>.ledger.jsonl and rank-<r>.status.json. On several nodes the
 * directory must be on a shared filesystem.
 *
 * Memory: registered buffers are read in place, on the host. Device (CUDA)
 * buffers must be registered through a host mirror you refresh before
 * vqc_instr_step_end.
 *
 * Threads: one session per rank, driven by the thread that drives the
 * rank's comm. vqc_instr_create, _step_end and _finish exchange with the
 * other ranks over the side channel (collective: every rank calls them, in
 * the same order); the other functions are local. */
#ifndef VQC_INSTRUMENT_H
#define VQC_INSTRUMENT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "vqc/comm.h"
#include "vqc/ledger.h"
#include "vqc/nn.h"
#include "vqc/status.h"
#include "vqc/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vqc_instr vqc_instr;
/* The findings list of findings.h (vqc_finding items, JSON form). */
typedef struct vqc_findings vqc_findings;

/* Which checkers a session attaches (bits of vqc_instr_options.checks). */
enum {
  VQC_INSTR_DIVERGENCE = 1u << 0,
  VQC_INSTR_LOST_INPLACE = 1u << 1,
  VQC_INSTR_COLLECTIVE = 1u << 2,
  VQC_INSTR_SHAPE = 1u << 3,
  VQC_INSTR_EQUIVALENCE = 1u << 4, /* needs reference_grads */
  /* Every checker that needs nothing from you. */
  VQC_INSTR_DEFAULT = VQC_INSTR_DIVERGENCE | VQC_INSTR_LOST_INPLACE |
                      VQC_INSTR_COLLECTIVE | VQC_INSTR_SHAPE
};

/* For the equivalence checker: fill `grads` (the registered entries that
 * have a gradient, same names, shapes and order) with the gradient of
 * step's GLOBAL batch computed in one process, averaged as your data
 * parallelism averages. The same signature as checker.h's
 * vqc_reference_grads_fn. */
typedef vqc_status (*vqc_instr_reference_fn)(void *user, int64_t step,
                                             vqc_param_list *grads);

/* For VQC_WAIT_BLOCKING comms: called on the collective checker's watchdog
 * thread once a collective is stuck past the timeout and its ledger is
 * dumped (`analysed` is true on rank 0 once the deadlock finding exists).
 * See checkers/collective.h: the hook typically calls MPI_Abort. */
typedef void (*vqc_instr_hang_fn)(const vqc_ledger_record *stuck,
                                  bool analysed, void *user);

/* A zeroed struct is the default everywhere. */
typedef struct vqc_instr_options {
  const char *name;      /* names the run in run.json and the default run
                            directory; NULL: "instrumented" */
  const char *run_dir;   /* NULL or "": vqcheck-runs/<name>-<time> */
  unsigned checks;       /* VQC_INSTR_* bits; 0: VQC_INSTR_DEFAULT */
  int interval;          /* check replicated state every N steps (steps 0,
                            N, 2N, ... and the last); <= 0: 1 */
  double timeout_s;      /* collective deadline, also set on the comm;
                            <= 0: 60 s */
  double tolerance;      /* equivalence: relative error allowed; <= 0:
                            1e-4 (float32 sums in another order) */
  bool strict;           /* exchange a fingerprint of every collective
                            before it runs (a side-channel all_gather per
                            collective; see bench/bench_overhead.c) */
  bool overlap;          /* digest the registered state on a helper thread
                            after vqc_instr_step_end while training goes
                            on. You then MUST call
                            vqc_instr_state_will_change before anything
                            writes registered state (optimizer step,
                            codebook update, a broadcast into weights);
                            a write before it makes the digest read torn
                            data. Needs a spare core to pay off. */
  vqc_instr_reference_fn reference_grads; /* with VQC_INSTR_EQUIVALENCE */
  void *reference_user;
} vqc_instr_options;

/* Creates rank vqc_comm_rank(comm)'s session (collective: every rank calls
 * it). Rank 0 prepares the run directory and shares its name. Sets the
 * comm's deadline to opts->timeout_s and its side channel's to twice that
 * plus 10 s (a rank that gave up on a collective must still find its peers
 * in the checkers' exchanges). opts may be NULL (defaults). On success *out
 * is the session (free with vqc_instr_destroy). VQC_EINVAL for bad options
 * (equivalence without reference_grads), VQC_EIO when the directory cannot
 * be made. */
vqc_status vqc_instr_create(vqc_comm *comm, const vqc_instr_options *opts,
                            vqc_instr **out);

/* Registers a replicated buffer for the digest checks, before
 * vqc_instr_start (VQC_EINVAL after). data: `numel` contiguous elements of
 * dt in host memory, laid out row-major as shape (ndim <= VQC_MAX_DIMS);
 * grad: its float32 gradient of the same shape, or NULL (optimizer moments,
 * buffers, counters). Both stay owned by you and must stay valid until
 * vqc_instr_destroy. Names are unique ("fc1.weight", "fc1.weight.exp_avg")
 * and every rank registers the same names, dtypes and shapes in the same
 * order. */
vqc_status vqc_instr_register(vqc_instr *s, const char *name, vqc_dtype dt,
                              void *data, float *grad, int ndim,
                              const int64_t *shape);
/* The same for a vqc_tensor: it must be contiguous and on the CPU
 * (VQC_EINVAL otherwise); its storage must outlive the session. */
vqc_status vqc_instr_register_tensor(vqc_instr *s, const char *name,
                                     const vqc_tensor *t, float *grad);

/* Attaches the checkers (the collective checker first, so in strict mode it
 * sees every collective before any other subscriber). Call it once, after
 * the registrations and before the first collective you want checked. */
vqc_status vqc_instr_start(vqc_instr *s);

/* Marks the end of training step `step` (0, 1, 2, ...; after the optimizer
 * step): the checkers compare state across ranks (collective). A non-OK
 * return means the checks could not run (a peer is gone, the registrations
 * differ between ranks): stop training and pass it to vqc_instr_finish.
 * Findings are not errors: training goes on, they are reported at finish. */
vqc_status vqc_instr_step_end(vqc_instr *s, int64_t step);

/* With opts.overlap: call it (collective: every rank, at the same point of
 * the step) right before anything writes registered state, e.g. before
 * optimizer.step(). It waits for the digest started at the last step end
 * and exchanges it; returns VQC_EABORTED when another rank's training
 * failed meanwhile (stop training and pass it to vqc_instr_finish).
 * Without opts.overlap it does nothing and returns VQC_OK. */
vqc_status vqc_instr_state_will_change(vqc_instr *s);

/* Ends the run (collective). `training` is how training ended on this rank:
 * VQC_OK, or the error that stopped it (then the data comm is aborted first,
 * so peers waiting for this rank in a collective stop now). Runs every
 * checker's finish (the deadlock analysis among them), merges the findings
 * of all ranks on rank 0 (a finding several ranks made once each becomes
 * one finding with all their ranks) and writes run.json there.
 * *nfindings (may be NULL): the number of merged findings, the same on
 * every rank; > 0 means vqcheck found bugs. Returns VQC_OK when the
 * checks completed, else the first error (run.json is still written when
 * rank 0 can). Call it once, also after a failed start or step_end. */
vqc_status vqc_instr_finish(vqc_instr *s, vqc_status training, int *nfindings);

/* After finish: 1 with findings, 0 when clean, 3 when some rank's training
 * or checks ended with an error no finding explains (DESIGN.md exit codes),
 * the same on every rank. */
int vqc_instr_exit_code(const vqc_instr *s);

/* After finish, on rank 0: the merged findings (owned by the session);
 * NULL on other ranks and before finish. */
const vqc_findings *vqc_instr_findings(const vqc_instr *s);

/* After finish, on rank 0: one line per merged finding to f,
 *   "divergence at step 2 in fc1.weight (ranks 3): <message>"
 * and the run directory. Other ranks print nothing. */
void vqc_instr_print_findings(const vqc_instr *s, FILE *f);

/* The run directory (owned by the session). */
const char *vqc_instr_run_dir(const vqc_instr *s);

/* Sets the collective checker's hang hook (after vqc_instr_start; the
 * collective checker must be enabled, VQC_EINVAL otherwise). */
vqc_status vqc_instr_on_hang(vqc_instr *s, vqc_instr_hang_fn fn, void *user);

/* Detaches the checkers and frees the session; accepts NULL. Call it on
 * every rank after vqc_instr_finish (or instead of it after a failed
 * create path), before destroying the comm. */
void vqc_instr_destroy(vqc_instr *s);

#ifdef __cplusplus
}
#endif
#endif /* VQC_INSTRUMENT_H */
