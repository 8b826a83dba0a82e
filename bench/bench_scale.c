/* bench_scale.c: what vqcheck's checks cost as the number of ranks P grows,
 * measured where this machine can run it and modelled beyond.
 *
 * Four parts, each validated before it is timed:
 *
 *   1. The divergence checker's side channel (checkers/divergence.c), on the
 *      threads backend, P = 2, 4, ..., 1024 ranks in this process. Every
 *      rank registers T small float32 tensors (T = 64 of 256 elements; also
 *      T = 1000 of 64 at a few P) and drives the checker as the runner does
 *      (attach, step_end per step, settle, finish; tests/unit/
 *      test_divergence_scale.c). Validation, per P: a first checker sees the
 *      last rank change one element at step 1 and must report exactly that
 *      divergence (tensor, step, rank; both ranks at P = 2, where there is
 *      no majority); a second, timed checker must report nothing. Timed, in
 *      interleaved repetitions (order rotated each repetition), each a
 *      block of S steps with the ranks lined up by a barrier first:
 *        check      step_end + settle: digest T tensors, one side-channel
 *                   agreement;
 *        allreduce  a bare side-channel all_reduce (MIN, int64) of as many
 *                   words as a clean check's exchange moved (read from the
 *                   counters at an untimed step): the exchange alone, the
 *                   baseline of the check's ratio;
 *        allgather  the old design's exchange: all_gather of 32 bytes per
 *                   tensor per rank (4T int64), timed where its P^2 memory
 *                   fits (32 T P^2 <= 128 MiB in this one process).
 *      Figures per P: side-channel bytes per rank per check (vqc_comm_get_
 *      stats on the side channel: logical bytes sent + received, the max
 *      over ranks), calls per check, wall time per check (rank 0's block
 *      time / S: every rank's check has to be done before the agreement
 *      completes), and CPU time per rank per check (CLOCK_THREAD_CPUTIME_
 *      ID around step_end, mean over ranks): the rank's own work, which a
 *      cluster gives each rank its own core for. FAIL (exit 1) when the
 *      bytes at the largest P exceed 2x those at P = 2: the agreement must
 *      be flat in P. The old design's bytes per rank per check,
 *        old = 32 T (sent) + 32 T P (received: every rank's block) =
 *              32 T (P + 1),
 *      are checked against the counters where its exchange is timed.
 *   2. The deadlock analysis (vqc_ledger_analyze, checkers/ledger_analysis.h)
 *      over P synthetic dumps (rank-<r>.ledger.jsonl + rank-<r>.status.json,
 *      the format vqc_rank_dump_write writes): N collectives per rank from a
 *      4-collective training step; every rank completed seq 0..N-2; at seq
 *      N-1 all ranks but one or two (rank P/2 from 4 ranks, and the last)
 *      entered the same collective and are stuck (status VQC_ETIMEOUT,
 *      in_flight set), the others left their loop. P = 2 .. 2048 (--max-
 *      files, up to 4096) with N = 64, and P = 64 with N = 1024 to see
 *      that the cost per record does not depend on N. Validation: exactly
 *      one deadlock finding at seq N-1 naming exactly the missing ranks,
 *      with P - missing ranks entered. Baseline: reading the same files and
 *      parsing every line with jansson (the floor of any JSON-lines
 *      analysis), timed interleaved with it. Figures: wall time and the
 *      process's CPU time; the model is fitted to the CPU time, which the
 *      other jobs of a shared machine do not inflate (these analyses are
 *      single-threaded and read from the page cache, so on an idle machine
 *      wall ~ CPU).
 *   3. The trace comparison (`vqcheck compare`: vqc_trace_set_open +
 *      vqc_trace_set_compare, checkers/trace_compare.h) over P traces
 *      (rank-<r>.trace.jsonl, vqc_trace_write) of T tensors x S steps in
 *      which one rank's digest of one tensor differs at one step.
 *      Validation: exactly one divergence finding at that step and tensor
 *      naming that rank (both at P = 2), every (step, tensor) compared, no
 *      rank_failure. T = 16, S = 4; P as in part 2. Baseline and figures
 *      as in part 2.
 *   4. The model: fits of the measurements, and one table from P = 2 to
 *      65536 whose every cell says whether it was measured (m) or modelled
 *      (~), with the formulas printed beside it (see print_model).
 *
 * Synthetic inputs: the ledgers and traces are generated, not recorded from
 * a job; their digests are arbitrary 64-bit values (compare only tests
 * equality) and their call sites name this file. The dumps and traces go to
 * a fresh directory under $TMPDIR (else /tmp), read from the page cache,
 * and every file this bench wrote there is removed at the end.
 *
 * Honesty about part 1: P threads on a few shared cores are not P ranks on
 * a cluster. The wall time per check grows with P here because P ranks'
 * work shares the cores; that says nothing about a network. The cluster
 * model of part 4 therefore combines the measured per-rank CPU time of a
 * check with an assumed network: a small all_reduce done as a tree
 * (recursive doubling) costs ceil(log2 P) (alpha + m beta) for m bytes;
 * alpha and beta are assumptions (--alpha-us, --beta-ns-per-byte), not
 * measurements.
 *
 * Usage: bench_scale [--quick] [--json] [--reps N] [--max-ranks P]
 *                    [--max-files P] [--alpha-us A] [--beta-ns-per-byte B]
 * The default run takes about 3 minutes on 2 shared cores. --quick: a
 * smaller sweep (threads to 64 ranks, files to 256; ~15 s), run by ctest as
 * bench.scale_quick, which asserts only the validations, never timings. --json prints, instead of the text, one JSON
 * object per figure (bench_stats.h); modelled figures have "reps": 0.
 * Exit codes: 0 every validation passed; 1 one failed; 2 usage; 3 the
 * environment (temporary directory, I/O, no 2 rank threads). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_stats.h"
#include "checker_set.h"
#include "findings.h"
#include "ledger_analysis.h"
#include "trace.h"
#include "trace_compare.h"
#include "vqc/clock.h"
#include "vqc/comm.h"
#include "vqc/nn.h"
#include "vqc/status.h"

#define BENCH "bench_scale"
#define MAX_SWEEP 16        /* 2^1 .. 2^16 */
#define MODEL_MAX_LOG2 16   /* the model table goes to 65536 ranks */
/* The old design's exchange is timed while its receive buffers, P blocks of
 * 32 T bytes on each of P ranks in this one process, fit in 128 MiB. */
#define OLD_DESIGN_BYTES_CAP ((double)(128u << 20))
/* The ranks missing from the synthetic deadlock (missing_ranks): a few at
 * any P, as a real hang usually is one or two ranks that went elsewhere. */
#define MAX_MISSING 2

static bool json_out;
static bool failed_validation;

/* Text output (suppressed by --json). */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
  if (json_out) return;
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  fflush(stdout);
}

/* A validation failure: always on stderr, and the exit code becomes 1. */
static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs(BENCH ": VALIDATION FAILED: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  failed_validation = true;
}

static const char *fmt_time(double s, char *buf, size_t n) {
  if (!isfinite(s)) snprintf(buf, n, "-");
  else if (s < 1e-3) snprintf(buf, n, "%.1f us", s * 1e6);
  else if (s < 1.0) snprintf(buf, n, "%.2f ms", s * 1e3);
  else if (s < 120.0) snprintf(buf, n, "%.2f s", s);
  else if (s < 7200.0) snprintf(buf, n, "%.1f min", s / 60.0);
  else snprintf(buf, n, "%.1f h", s / 3600.0);
  return buf;
}

static const char *fmt_bytes(double b, char *buf, size_t n) {
  if (!isfinite(b)) snprintf(buf, n, "-");
  else if (b < 10240.0) snprintf(buf, n, "%.0f B", b);
  else if (b < 10.0 * 1048576.0) snprintf(buf, n, "%.1f KiB", b / 1024.0);
  else if (b < 10.0 * 1073741824.0) snprintf(buf, n, "%.1f MiB", b / 1048576.0);
  else snprintf(buf, n, "%.1f GiB", b / 1073741824.0);
  return buf;
}

/* "1.23 ms [1.20 .. 1.40]" */
static const char *fmt_summary(bench_summary s, char *buf, size_t n) {
  char a[24], b[24], c[24];
  snprintf(buf, n, "%s [%s .. %s]", fmt_time(s.median, a, sizeof a),
           fmt_time(s.min, b, sizeof b), fmt_time(s.max, c, sizeof c));
  return buf;
}

static int ceil_log2(long long p) {
  int k = 0;
  while ((1LL << k) < p) k++;
  return k;
}

static uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* ------------------------------------------------------------------ fits */

/* y ~ a + b x, least squares on relative error (weights 1 / y^2: the
 * figures span orders of magnitude, and the model is read in ratios). A
 * negative intercept is refitted through the origin, so the model never
 * predicts a negative time. max_rel: the largest |fit / y - 1|. */
typedef struct fit {
  double a, b, max_rel;
  int n;
} fit;

static fit fit_linear(const double *x, const double *y, int n) {
  fit f = {NAN, NAN, NAN, n};
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (int i = 0; i < n; i++) {
    double w = 1.0 / (y[i] * y[i]);
    sw += w;
    sx += w * x[i];
    sy += w * y[i];
    sxx += w * x[i] * x[i];
    sxy += w * x[i] * y[i];
  }
  double det = sw * sxx - sx * sx;
  if (n >= 2 && det > 0) {
    f.b = (sw * sxy - sx * sy) / det;
    f.a = (sy - f.b * sx) / sw;
  }
  if (!(f.a >= 0) && sxx > 0) {
    f.a = 0;
    f.b = sxy / sxx;
  }
  f.max_rel = 0;
  for (int i = 0; i < n; i++) {
    double r = fabs((f.a + f.b * x[i]) / y[i] - 1.0);
    if (r > f.max_rel) f.max_rel = r;
  }
  return f;
}

static double fit_at(fit f, double x) { return f.a + f.b * x; }

/* ------------------------------------------- part 1: the side channel */

enum { CASE_CHECK, CASE_ALLREDUCE, CASE_ALLGATHER, NCASES };

typedef struct side_run {
  /* in */
  int P, T, numel, steps, reps;
  bool old_design;       /* also time the old all_gather exchange */
  /* out */
  atomic_int started;    /* rank threads that began */
  vqc_findings vfind;    /* the validation checker's findings */
  vqc_findings tfind;    /* the timed checker's: must stay empty */
  double *wall;          /* (NCASES, reps) rank 0's wall time per call */
  uint64_t *bytes;       /* (NCASES, reps, P) side bytes over the block */
  uint64_t *calls;       /* (NCASES, reps, P) side calls over the block */
  double *cpu;           /* (reps, P) thread CPU per check */
  atomic_int bad_baseline; /* ranks whose baseline results were wrong */
} side_run;

/* The tensor the validation changes, and the element. */
static int planted_tensor(int T) { return T / 2; }
#define PLANTED_INDEX 5

static void tensor_name(int t, char *buf, size_t n) {
  snprintf(buf, n, "block%04d.weight", t);
}

/* The divergence checker's life on a rank, as the runner drives it
 * (checker_set.h): attach, then the caller's steps, then the end. */
static vqc_status checker_start(vqc_checker_set *set, vqc_check_ctx *ctx) {
  vqc_checker_set_init(set, ctx);
  return vqc_checker_set_attach(set, VQC_INSTR_DIVERGENCE);
}

static vqc_status checker_end(vqc_checker_set *set, vqc_status s) {
  if (s == VQC_OK) s = vqc_checker_set_settle(set, false);
  for (int i = 0; s == VQC_OK && i < set->attached; i++)
    s = set->chk[i].finish(&set->chk[i], set->ctx, VQC_OK);
  vqc_checker_set_destroy(set);
  return s;
}

static vqc_status checker_step(vqc_checker_set *set, int64_t step) {
  VQC_TRY(vqc_checker_set_step_end(set, step, NULL));
  /* The runner settles before the state is next written (a no-op without
   * opts.overlap, kept so the step is the runner's). */
  return vqc_checker_set_settle(set, false);
}

static vqc_status side_rank(vqc_comm *c, void *arg) {
  side_run *run = arg;
  atomic_fetch_add(&run->started, 1);
  const int rank = vqc_comm_rank(c), P = vqc_comm_size(c), T = run->T;
  const int numel = run->numel, reps = run->reps, S = run->steps;
  const size_t ag_words = 4 * (size_t)T; /* 32 bytes per tensor */
  const int ncases = run->old_design ? NCASES : CASE_ALLGATHER;
  vqc_comm *side = vqc_comm_side(c);
  vqc_status s = VQC_OK;
  size_t words = 0; /* the bare all_reduce's size: the check's, measured */
  int64_t *msg = NULL, *red = NULL;

  /* (T, numel) the replicated state, the same on every rank. */
  float *state = malloc((size_t)T * (size_t)numel * sizeof *state);
  int64_t *ag_send = NULL, *ag_recv = NULL;
  if (run->old_design) {
    ag_send = malloc(ag_words * sizeof *ag_send);
    ag_recv = malloc(ag_words * (size_t)P * sizeof *ag_recv);
  }
  vqc_param_list list;
  vqc_param_list_init(&list);
  if (!state || (run->old_design && (!ag_send || !ag_recv))) {
    s = vqc_error(VQC_ENOMEM, "rank %d: no memory for the state", rank);
    goto out;
  }
  for (size_t i = 0; i < (size_t)T * (size_t)numel; i++)
    state[i] = (float)((int)(i % 97) - 48) * 0.25f;
  for (int t = 0; t < T && s == VQC_OK; t++) {
    char name[64];
    tensor_name(t, name, sizeof name);
    int64_t shape[2] = {numel / 16, 16};
    s = vqc_param_list_add(&list, name, VQC_F32, state + (size_t)t * numel,
                           NULL, 2, shape);
  }
  if (s != VQC_OK) goto out;

  /* 1. Validation: the checker finds a planted divergence. */
  vqc_checker_set chk;
  vqc_check_ctx vctx = {.comm = c, .rank = rank, .size = P, .state = &list,
                        .findings = &run->vfind, .opts = {.interval = 1}};
  s = checker_start(&chk, &vctx);
  if (s == VQC_OK) s = checker_step(&chk, 0);
  float *planted = state + (size_t)planted_tensor(T) * numel + PLANTED_INDEX;
  const float kept = *planted;
  if (rank == P - 1) *planted = kept + 1.0f;
  if (s == VQC_OK) s = checker_step(&chk, 1);
  *planted = kept;
  s = checker_end(&chk, s);
  if (s != VQC_OK) goto out;

  /* 2. The timed checker, fresh. Step 0 also compares the registries (a
   * one-off exchange), so it is an untimed warm-up; step 1, untimed too,
   * tells the size of a clean check's exchange, which the bare all_reduce
   * then copies (every rank reads the same figure: it counts logical
   * bytes, sent + received, 16 per word of an all_reduce). */
  vqc_check_ctx ctx = {.comm = c, .rank = rank, .size = P, .state = &list,
                       .findings = &run->tfind, .opts = {.interval = 1}};
  s = checker_start(&chk, &ctx);
  if (s == VQC_OK) s = checker_step(&chk, 0);
  vqc_comm_stats before = vqc_comm_get_stats(side);
  if (s == VQC_OK) s = checker_step(&chk, 1);
  vqc_comm_stats after = vqc_comm_get_stats(side);
  words = ((after.bytes_sent + after.bytes_received) -
           (before.bytes_sent + before.bytes_received)) / 16;
  if (words == 0) words = 1;
  msg = malloc(words * sizeof *msg);
  red = malloc(words * sizeof *red);
  if (s == VQC_OK && (!msg || !red))
    s = vqc_error(VQC_ENOMEM, "rank %d: no memory for %zu words", rank, words);

  /* The baselines give exact results: MIN over ranks of (rank + 1) (i + 1)
   * is i + 1; the gather puts rank r's r n + i at r n + i. */
  for (size_t i = 0; s == VQC_OK && i < words; i++)
    msg[i] = (int64_t)(rank + 1) * (int64_t)(i + 1);
  for (size_t i = 0; i < ag_words && ag_send; i++)
    ag_send[i] = (int64_t)rank * (int64_t)ag_words + (int64_t)i;
  if (s == VQC_OK) s = vqc_all_reduce(side, msg, red, words, VQC_I64, VQC_MIN);
  for (size_t i = 0; s == VQC_OK && i < words; i++)
    if (red[i] != (int64_t)(i + 1)) {
      atomic_fetch_add(&run->bad_baseline, 1);
      break;
    }
  if (s == VQC_OK && run->old_design) {
    s = vqc_all_gather(side, ag_send, ag_recv, ag_words, VQC_I64);
    for (size_t i = 0; s == VQC_OK && i < ag_words * (size_t)P; i++)
      if (ag_recv[i] != (int64_t)i) {
        atomic_fetch_add(&run->bad_baseline, 1);
        break;
      }
  }

  int64_t step = 2;
  for (int rep = 0; rep < reps && s == VQC_OK; rep++) {
    for (int k = 0; k < ncases && s == VQC_OK; k++) {
      const int cs = (k + rep) % ncases;
      s = vqc_barrier(c); /* the data comm: the side counters stay clean */
      if (s != VQC_OK) break;
      before = vqc_comm_get_stats(side);
      const double cpu0 = vqc_thread_cpu_s(), t0 = vqc_now_s();
      for (int i = 0; i < S && s == VQC_OK; i++) {
        if (cs == CASE_CHECK)
          s = checker_step(&chk, step++);
        else if (cs == CASE_ALLREDUCE)
          s = vqc_all_reduce(side, msg, red, words, VQC_I64, VQC_MIN);
        else
          s = vqc_all_gather(side, ag_send, ag_recv, ag_words, VQC_I64);
      }
      const double t1 = vqc_now_s(), cpu1 = vqc_thread_cpu_s();
      after = vqc_comm_get_stats(side);
      const size_t at = ((size_t)cs * reps + rep) * P + rank;
      run->bytes[at] = (after.bytes_sent + after.bytes_received) -
                       (before.bytes_sent + before.bytes_received);
      run->calls[at] = after.calls - before.calls;
      if (cs == CASE_CHECK) run->cpu[(size_t)rep * P + rank] = (cpu1 - cpu0) / S;
      if (rank == 0) run->wall[cs * reps + rep] = (t1 - t0) / S;
    }
  }
  s = checker_end(&chk, s);

out:
  vqc_param_list_free(&list);
  free(state);
  free(msg);
  free(red);
  free(ag_send);
  free(ag_recv);
  return s;
}

/* What part 1 keeps per (T, P). */
typedef struct side_point {
  int P, T, reps;
  bool ran;
  double bytes;          /* side bytes per rank per check: max over ranks */
  double bytes_min;      /* min over ranks */
  double calls;          /* side calls per check, rank 0 */
  double old_bytes;      /* measured old exchange per call (NAN: not run) */
  bench_summary wall[NCASES]; /* per call; n = 0 where not run */
  bench_summary ratio_check_ar;  /* check / allreduce */
  bench_summary ratio_ag_ar;     /* allgather / allreduce */
  bench_summary cpu;     /* per rank per check */
} side_point;

/* Runs part 1 at (P, T). Returns 0 when it ran (validated or not), -1 when
 * the P rank threads could not all start (the sweep stops there). */
static int side_measure(int P, int T, int numel, int reps, side_point *pt) {
  memset(pt, 0, sizeof *pt);
  pt->P = P;
  pt->T = T;
  pt->reps = reps;
  pt->old_bytes = NAN;
  side_run run = {.P = P, .T = T, .numel = numel, .reps = reps};
  /* S steps per block: ~2 ms blocks at small P, at least 4 checks at
   * 1024 ranks (where one check is tens of ms here). */
  int S = (int)(2048 / ((long long)P * (T > 100 ? 8 : 1)));
  run.steps = S < 4 ? 4 : S > 64 ? 64 : S;
  run.old_design = 32.0 * T * (double)P * (double)P <= OLD_DESIGN_BYTES_CAP;
  atomic_init(&run.started, 0);
  atomic_init(&run.bad_baseline, 0);
  vqc_findings_init(&run.vfind);
  vqc_findings_init(&run.tfind);
  run.wall = calloc((size_t)NCASES * reps, sizeof *run.wall);
  run.bytes = calloc((size_t)NCASES * reps * P, sizeof *run.bytes);
  run.calls = calloc((size_t)NCASES * reps * P, sizeof *run.calls);
  run.cpu = calloc((size_t)reps * P, sizeof *run.cpu);
  double *v = calloc((size_t)(reps > P ? reps : P), sizeof *v);
  int result = 0;
  if (!run.wall || !run.bytes || !run.calls || !run.cpu || !v) {
    fprintf(stderr, BENCH ": no memory for %d ranks\n", P);
    exit(3);
  }

  vqc_status s = vqc_threads_run(P, 300.0, side_rank, &run, NULL);
  if (atomic_load(&run.started) < P) {
    say("  P = %d: only %d of %d rank threads started (%s): the sweep "
        "stops at the previous P\n",
        P, atomic_load(&run.started), P, vqc_last_error());
    result = -1;
    goto out;
  }
  if (s != VQC_OK) {
    fail("%d ranks, T = %d: the run failed: %s: %s", P, T, vqc_status_name(s),
         vqc_last_error());
    goto out;
  }
  pt->ran = true;

  /* Validation. */
  const int want_rank = P - 1;
  char want_tensor[64];
  tensor_name(planted_tensor(T), want_tensor, sizeof want_tensor);
  if (run.vfind.count != 1 ||
      run.vfind.items[0].kind != VQC_FINDING_DIVERGENCE) {
    fail("%d ranks, T = %d: the planted divergence gave %d findings (want 1 "
         "divergence)%s%s",
         P, T, run.vfind.count, run.vfind.count ? ": " : "",
         run.vfind.count ? run.vfind.items[0].message : "");
  } else {
    const vqc_finding *x = &run.vfind.items[0];
    bool ranks_ok = P >= 3 ? (x->nranks == 1 && x->ranks[0] == want_rank)
                           : x->nranks == P;
    if (x->step != 1 || strcmp(x->tensor, want_tensor) != 0 || !ranks_ok)
      fail("%d ranks, T = %d: the divergence planted on rank %d in %s at "
           "step 1 was reported as: %s",
           P, T, want_rank, want_tensor, x->message);
  }
  if (run.tfind.count != 0)
    fail("%d ranks, T = %d: the clean timed run gave %d findings: %s", P, T,
         run.tfind.count, run.tfind.items[0].message);
  if (atomic_load(&run.bad_baseline) != 0)
    fail("%d ranks: the baseline exchanges gave wrong results on %d ranks", P,
         atomic_load(&run.bad_baseline));

  /* Bytes per check: every rank, every repetition. */
  const int S2 = run.steps;
  uint64_t bmax = 0, bmin = UINT64_MAX;
  for (int rep = 0; rep < reps; rep++)
    for (int r = 0; r < P; r++) {
      uint64_t b = run.bytes[((size_t)CASE_CHECK * reps + rep) * P + r];
      if (b > bmax) bmax = b;
      if (b < bmin) bmin = b;
    }
  pt->bytes = (double)bmax / S2;
  pt->bytes_min = (double)bmin / S2;
  pt->calls = (double)run.calls[((size_t)CASE_CHECK * reps) * P] / S2;
  if (run.old_design) {
    uint64_t omax = 0;
    for (int rep = 0; rep < reps; rep++)
      for (int r = 0; r < P; r++) {
        uint64_t b = run.bytes[((size_t)CASE_ALLGATHER * reps + rep) * P + r];
        if (b > omax) omax = b;
      }
    pt->old_bytes = (double)omax / S2;
    double want = 32.0 * T * (P + 1);
    if (pt->old_bytes != want)
      fail("%d ranks, T = %d: the old design's all_gather moved %.0f bytes "
           "per rank per call; 32 T (P + 1) = %.0f",
           P, T, pt->old_bytes, want);
  }
  for (int cs = 0; cs < NCASES; cs++)
    if (cs != CASE_ALLGATHER || run.old_design)
      pt->wall[cs] = bench_summarize(run.wall + (size_t)cs * reps, reps);
  pt->ratio_check_ar = bench_ratios(run.wall + (size_t)CASE_CHECK * reps,
                                    run.wall + (size_t)CASE_ALLREDUCE * reps,
                                    reps);
  if (run.old_design)
    pt->ratio_ag_ar = bench_ratios(run.wall + (size_t)CASE_ALLGATHER * reps,
                                   run.wall + (size_t)CASE_ALLREDUCE * reps,
                                   reps);
  for (int rep = 0; rep < reps; rep++) {
    double sum = 0;
    for (int r = 0; r < P; r++) sum += run.cpu[(size_t)rep * P + r];
    v[rep] = sum / P;
  }
  pt->cpu = bench_summarize(v, reps);

out:
  vqc_findings_free(&run.vfind);
  vqc_findings_free(&run.tfind);
  free(run.wall);
  free(run.bytes);
  free(run.calls);
  free(run.cpu);
  free(v);
  return result;
}

static void side_print(const side_point *pt) {
  char a[64], b[64], c[64], d[24], e[24], g[24];
  if (!json_out) {
    say("  %5d %5d  %9s  %4.1f  %13s  %-30s %-30s %6.2f  %-30s %s\n", pt->P,
        pt->T, fmt_bytes(pt->bytes, d, sizeof d), pt->calls,
        isfinite(pt->old_bytes) ? fmt_bytes(pt->old_bytes, e, sizeof e)
                                : "(not run)",
        fmt_summary(pt->wall[CASE_CHECK], a, sizeof a),
        fmt_summary(pt->wall[CASE_ALLREDUCE], b, sizeof b),
        pt->ratio_check_ar.median, fmt_summary(pt->cpu, c, sizeof c),
        pt->wall[CASE_ALLGATHER].n
            ? fmt_time(pt->wall[CASE_ALLGATHER].median, g, sizeof g)
            : "-");
    return;
  }
  char shape[32];
  snprintf(shape, sizeof shape, "T%d", pt->T);
  const double old = 32.0 * pt->T * (pt->P + 1);
  bench_figure f = {.bench = BENCH, .figure = "side_bytes_per_rank_step",
                    .shape = shape, .ranks = pt->P, .unit = "bytes",
                    .value = {pt->bytes, pt->bytes_min, pt->bytes, pt->reps},
                    .baseline_name = "old_allgather_bytes",
                    .baseline = {old, old, old, 0},
                    .ratio = {pt->bytes / old, pt->bytes_min / old,
                              pt->bytes / old, pt->reps}};
  bench_print_figure(stdout, &f);
  f = (bench_figure){.bench = BENCH, .figure = "check_time", .shape = shape,
                     .ranks = pt->P, .unit = "s",
                     .value = pt->wall[CASE_CHECK],
                     .baseline_name = "side_allreduce_time",
                     .baseline = pt->wall[CASE_ALLREDUCE],
                     .ratio = pt->ratio_check_ar};
  bench_print_figure(stdout, &f);
  f = (bench_figure){.bench = BENCH, .figure = "check_cpu_per_rank",
                     .shape = shape, .ranks = pt->P, .unit = "s",
                     .value = pt->cpu};
  bench_print_figure(stdout, &f);
  if (pt->wall[CASE_ALLGATHER].n) {
    f = (bench_figure){.bench = BENCH, .figure = "old_allgather_time",
                       .shape = shape, .ranks = pt->P, .unit = "s",
                       .value = pt->wall[CASE_ALLGATHER],
                       .baseline_name = "side_allreduce_time",
                       .baseline = pt->wall[CASE_ALLREDUCE],
                       .ratio = pt->ratio_ag_ar};
    bench_print_figure(stdout, &f);
  }
}

static void side_header(void) {
  say("  %5s %5s  %9s  %4s  %13s  %-30s %-30s %6s  %-30s %s\n", "P", "T",
      "B/rank/ck", "call", "old B/rk/call", "check wall/call [min..max]",
      "bare all_reduce/call", "ratio", "check CPU/rank", "old all_gather");
}

/* ----------------------------------------- files in the temporary dir */

static char tmp_root[4096];

static void rank_file(const char *dir, int r, const char *suffix, char *buf,
                      size_t n) {
  /* A path that does not fit is cut; the bench's own directory is short. */
  if (snprintf(buf, n, "%s/rank-%d.%s", dir, r, suffix) >= (int)n && n > 0)
    buf[n - 1] = '\0';
}

/* Removes exactly the files this bench wrote into dir, then dir. */
static void remove_dir(const char *dir, int P, const char *const *suffixes,
                       int nsuffixes) {
  char path[4200];
  for (int r = 0; r < P; r++)
    for (int k = 0; k < nsuffixes; k++) {
      rank_file(dir, r, suffixes[k], path, sizeof path);
      if (unlink(path) != 0 && errno != ENOENT)
        fprintf(stderr, BENCH ": cannot remove %s: %s\n", path,
                strerror(errno));
    }
  if (rmdir(dir) != 0)
    fprintf(stderr, BENCH ": cannot remove %s: %s\n", dir, strerror(errno));
}

static void make_dir(const char *dir) {
  if (mkdir(dir, 0700) != 0) {
    fprintf(stderr, BENCH ": cannot create %s: %s\n", dir, strerror(errno));
    exit(3);
  }
}

static FILE *open_or_die(const char *path, const char *mode) {
  FILE *f = fopen(path, mode);
  if (!f) {
    fprintf(stderr, BENCH ": cannot open %s: %s\n", path, strerror(errno));
    exit(3);
  }
  return f;
}

/* The floor of any JSON-lines analysis: read each file line by line and
 * parse every line with jansson, as both analyses do. Returns the lines. */
static long parse_floor(const char *dir, int P, const char *const *suffixes,
                        int nsuffixes) {
  char path[4200];
  char *line = NULL;
  size_t cap = 0;
  long lines = 0;
  for (int r = 0; r < P; r++)
    for (int k = 0; k < nsuffixes; k++) {
      rank_file(dir, r, suffixes[k], path, sizeof path);
      FILE *f = fopen(path, "r");
      if (!f) continue;
      ssize_t len;
      if (strstr(suffixes[k], ".json") && !strstr(suffixes[k], "jsonl")) {
        json_t *j = json_loadf(f, JSON_REJECT_DUPLICATES, NULL);
        lines += j != NULL;
        json_decref(j);
      } else {
        while ((len = getline(&line, &cap, f)) > 0) {
          json_t *j = json_loadb(line, (size_t)len, JSON_REJECT_DUPLICATES,
                                 NULL);
          lines += j != NULL;
          json_decref(j);
        }
      }
      fclose(f);
    }
  free(line);
  return lines;
}

/* ------------------------------------------ part 2: ledger analysis */

static const char *const ledger_suffixes[] = {"ledger.jsonl", "status.json"};

/* One training step's collectives (synthetic sites of this file). */
typedef struct coll_site {
  const char *op, *redop, *dtype;
  long long count;
  int root, line;
  const char *func;
} coll_site;
static const coll_site step_sites[] = {
    {"all_reduce", "sum", "float32", 16777216, -1, 101, "grads"},
    {"all_reduce", "sum", "float32", 4096, -1, 102, "ema_counts"},
    {"all_reduce", "sum", "float32", 262144, -1, 103, "ema_sums"},
    {"broadcast", "", "int64", 1, 0, 104, "dead_codes"},
};
#define NSITES ((int)(sizeof step_sites / sizeof step_sites[0]))

static void write_record(FILE *f, uint64_t seq, int rank, bool entered) {
  const coll_site *x = &step_sites[seq % NSITES];
  fprintf(f, "{\"seq\":%" PRIu64 ",\"rank\":%d,\"op\":\"%s\",\"redop\":\"%s\","
          "\"dtype\":\"%s\",\"count\":%lld,\"root\":%d,\"file\":"
          "\"bench/bench_scale.c\",\"line\":%d,\"func\":\"%s\","
          "\"t_enter_ns\":%" PRIu64 ",\"t_exit_ns\":%" PRIu64 ",\"state\":"
          "\"%s\",\"status\":\"VQC_OK\"}",
          seq, rank, x->op, x->redop, x->dtype, x->count, x->root, x->line,
          x->func, 1000000 * seq + (uint64_t)rank,
          entered ? 0 : 1000000 * seq + 500000 + (uint64_t)rank,
          entered ? "entered" : "done");
}

/* The missing ranks at P: the last, and the middle one from 4 ranks. */
static int missing_ranks(int P, int *out) {
  int n = 0;
  if (P >= 4) out[n++] = P / 2;
  out[n++] = P - 1;
  return n;
}

static void gen_ledgers(const char *dir, int P, int N) {
  char path[4200];
  int missing[MAX_MISSING];
  const int nmissing = missing_ranks(P, missing);
  for (int r = 0; r < P; r++) {
    bool is_missing = false;
    for (int i = 0; i < nmissing; i++) is_missing |= missing[i] == r;
    const int nrec = is_missing ? N - 1 : N;
    rank_file(dir, r, "ledger.jsonl", path, sizeof path);
    FILE *f = open_or_die(path, "w");
    for (int q = 0; q < nrec; q++) {
      write_record(f, (uint64_t)q, r, !is_missing && q == N - 1);
      fputc('\n', f);
    }
    if (fclose(f) != 0) {
      fprintf(stderr, BENCH ": cannot write %s\n", path);
      exit(3);
    }
    rank_file(dir, r, "status.json", path, sizeof path);
    f = open_or_die(path, "w");
    fprintf(f, "{\"rank\":%d,\"size\":%d,\"status\":\"%s\",\"step\":%d,"
            "\"last_seq\":%d,\"watchdog\":%s,\"in_flight\":",
            r, P, is_missing ? "VQC_OK" : "VQC_ETIMEOUT", (nrec - 1) / NSITES,
            nrec - 1, is_missing ? "false" : "true");
    if (is_missing) fputs("null", f);
    else write_record(f, (uint64_t)N - 1, r, true);
    fputs("}\n", f);
    if (fclose(f) != 0) {
      fprintf(stderr, BENCH ": cannot write %s\n", path);
      exit(3);
    }
  }
}

/* Checks one analysis' findings; returns false (and says why) if wrong. */
static bool ledger_valid(int P, int N, const vqc_findings *fs, int nadded,
                         vqc_status s) {
  int missing[MAX_MISSING];
  const int nmissing = missing_ranks(P, missing);
  if (s != VQC_OK) {
    fail("ledger analysis at %d ranks: %s: %s", P, vqc_status_name(s),
         vqc_last_error());
    return false;
  }
  if (nadded != 1 || fs->count != 1 ||
      fs->items[0].kind != VQC_FINDING_DEADLOCK) {
    fail("ledger analysis at %d ranks: %d findings (want 1 deadlock)%s%s", P,
         fs->count, fs->count ? ": " : "",
         fs->count ? fs->items[0].message : "");
    return false;
  }
  const vqc_finding *x = &fs->items[0];
  bool ok = x->nranks == nmissing;
  for (int i = 0; ok && i < nmissing; i++) ok = x->ranks[i] == missing[i];
  const json_t *seq = json_object_get(x->detail, "seq");
  const json_t *entered = json_object_get(x->detail, "entered");
  ok = ok && json_is_integer(seq) && json_integer_value(seq) == N - 1 &&
       json_is_array(entered) &&
       json_array_size(entered) == (size_t)(P - nmissing);
  if (!ok)
    fail("ledger analysis at %d ranks: the deadlock at seq %d (missing: rank "
         "%d%s%.0d) was reported as: %s",
         P, N - 1, missing[0], nmissing > 1 ? " and rank " : "",
         nmissing > 1 ? missing[1] : 0, x->message);
  return ok;
}

/* One offline analysis at one P, against the parse floor. Wall time is
 * the figure a user waits for; CPU time (the process's: the analyses are
 * single-threaded) is what the other jobs on a shared machine do not
 * inflate, so the model is fitted to it. */
typedef struct file_point {
  int P;
  long long units;       /* records (ledger) or lines (trace) in all */
  int N, T, S;           /* N: records per rank; T x S: trace lines */
  bool ran;
  bench_summary wall, cpu, floor_wall, floor_cpu, ratio_cpu;
} file_point;

/* The case and its floor, each returning false on a wrong result. */
typedef bool (*timed_fn)(void *ctx);

/* reps interleaved repetitions of (analysis, floor), the order swapped
 * every repetition; fills pt and sets pt->ran when every run was right. */
static void time_file_point(timed_fn analysis, timed_fn floor_fn, void *ctx,
                            int reps, file_point *pt) {
  double *v = calloc(4 * (size_t)reps, sizeof *v);
  if (!v) exit(3);
  double *tw = v, *tc = v + reps, *fw = v + 2 * reps, *fc = v + 3 * reps;
  bool ok = true;
  for (int rep = 0; ok && rep < reps; rep++)
    for (int k = 0; ok && k < 2; k++) {
      const bool is_floor = (k + rep) % 2 == 1;
      const double c0 = vqc_process_cpu_s(), t0 = vqc_now_s();
      ok = is_floor ? floor_fn(ctx) : analysis(ctx);
      const double t1 = vqc_now_s(), c1 = vqc_process_cpu_s();
      (is_floor ? fw : tw)[rep] = t1 - t0;
      (is_floor ? fc : tc)[rep] = c1 - c0;
    }
  if (ok) {
    pt->ran = true;
    pt->wall = bench_summarize(tw, reps);
    pt->cpu = bench_summarize(tc, reps);
    pt->floor_wall = bench_summarize(fw, reps);
    pt->floor_cpu = bench_summarize(fc, reps);
    pt->ratio_cpu = bench_ratios(tc, fc, reps);
  }
  free(v);
}

typedef struct ledger_ctx {
  const char *dir;
  int P, N;
} ledger_ctx;

static bool ledger_analysis_run(void *arg) {
  const ledger_ctx *x = arg;
  vqc_findings fs;
  vqc_findings_init(&fs);
  int n = 0;
  vqc_status s = vqc_ledger_analyze(x->dir, x->P, -1, &fs, &n);
  /* Validated in full before timing; here only that it still finds it. */
  bool ok = s == VQC_OK && n == 1 && fs.count == 1;
  if (!ok) ledger_valid(x->P, x->N, &fs, n, s);
  vqc_findings_free(&fs);
  return ok;
}

static bool ledger_floor_run(void *arg) {
  const ledger_ctx *x = arg;
  long lines = parse_floor(x->dir, x->P, ledger_suffixes, 2);
  int missing[MAX_MISSING];
  const long want = (long)x->P * x->N - missing_ranks(x->P, missing) + x->P;
  if (lines != want)
    fail("parse floor at %d ranks: %ld lines parsed, %ld written", x->P,
         lines, want);
  return lines == want;
}

static void ledger_measure(const char *dir, int P, int N, int reps,
                           file_point *pt) {
  memset(pt, 0, sizeof *pt);
  pt->P = P;
  pt->N = N;
  pt->units = (long long)P * N;
  make_dir(dir);
  gen_ledgers(dir, P, N);
  vqc_findings fs;
  vqc_findings_init(&fs);
  int n = 0;
  vqc_status s = vqc_ledger_analyze(dir, P, -1, &fs, &n);
  bool ok = ledger_valid(P, N, &fs, n, s);
  vqc_findings_free(&fs);
  ledger_ctx x = {dir, P, N};
  if (ok) time_file_point(ledger_analysis_run, ledger_floor_run, &x, reps, pt);
  remove_dir(dir, P, ledger_suffixes, 2);
}

/* -------------------------------------------- part 3: trace compare */

static const char *const trace_suffixes[] = {"trace.jsonl"};

static void trace_odd(int P, int T, int S, int *rank, int *step, int *tensor) {
  *rank = P > 2 ? P / 3 : P - 1;
  *step = S / 2;
  *tensor = T / 3;
}

static void gen_traces(const char *dir, int P, int T, int S) {
  char path[4200];
  int odd_rank, odd_step, odd_tensor;
  trace_odd(P, T, S, &odd_rank, &odd_step, &odd_tensor);
  vqc_trace_record rec;
  memset(&rec, 0, sizeof rec);
  snprintf(rec.dtype, sizeof rec.dtype, "float32");
  snprintf(rec.digest_algo, sizeof rec.digest_algo, "%s",
           VQC_TRACE_DIGEST_ALGO);
  rec.ndim = 2;
  rec.shape[0] = 256;
  rec.shape[1] = 64;
  for (int r = 0; r < P; r++) {
    vqc_trace_writer *w = NULL;
    vqc_status s = vqc_trace_path(dir, r, path, sizeof path);
    if (s == VQC_OK) s = vqc_trace_writer_open(path, &w);
    rec.rank = r;
    for (int st = 0; s == VQC_OK && st < S; st++)
      for (int t = 0; s == VQC_OK && t < T; t++) {
        rec.step = st;
        tensor_name(t, rec.tensor, sizeof rec.tensor);
        rec.digest = splitmix64((uint64_t)st * 1000003u + (uint64_t)t);
        if (r == odd_rank && st == odd_step && t == odd_tensor)
          rec.digest ^= 1; /* one bit: what a real divergence looks like */
        s = vqc_trace_write(w, &rec);
      }
    vqc_trace_writer_close(w);
    if (s != VQC_OK) {
      fprintf(stderr, BENCH ": cannot write %s: %s\n", path, vqc_last_error());
      exit(3);
    }
  }
}

/* One `vqcheck compare`: open, compare, close. */
static vqc_status trace_compare_once(const char *dir, vqc_findings *fs,
                                     vqc_trace_compare_result *res) {
  vqc_trace_set_options o = {.require_comparison = true};
  vqc_trace_set *set = NULL;
  memset(res, 0, sizeof *res);
  vqc_status s = vqc_trace_set_open(dir, &o, &set);
  if (s == VQC_OK) s = vqc_trace_set_compare(set, NULL, fs, res);
  vqc_trace_set_close(set);
  return s;
}

static bool trace_valid(int P, int T, int S, const vqc_findings *fs,
                        const vqc_trace_compare_result *res, vqc_status s) {
  int odd_rank, odd_step, odd_tensor;
  trace_odd(P, T, S, &odd_rank, &odd_step, &odd_tensor);
  char want[64];
  tensor_name(odd_tensor, want, sizeof want);
  if (s != VQC_OK) {
    fail("trace compare at %d ranks: %s: %s", P, vqc_status_name(s),
         vqc_last_error());
    return false;
  }
  bool ok = fs->count == 1 && fs->items[0].kind == VQC_FINDING_DIVERGENCE &&
            res->rank_failures == 0 &&
            res->digests_compared == (int64_t)T * S &&
            res->lines_read == (int64_t)P * T * S;
  if (ok) {
    const vqc_finding *x = &fs->items[0];
    ok = x->step == odd_step && strcmp(x->tensor, want) == 0 &&
         (P >= 3 ? x->nranks == 1 && x->ranks[0] == odd_rank
                 : x->nranks == 2);
  }
  if (!ok)
    fail("trace compare at %d ranks: rank %d's %s differs at step %d; got %d "
         "findings (%s), %" PRId64 " of %d (step, tensor) compared, %" PRId64
         " lines",
         P, odd_rank, want, odd_step, fs->count,
         fs->count ? fs->items[0].message : "none", res->digests_compared,
         T * S, res->lines_read);
  return ok;
}

typedef struct trace_ctx {
  const char *dir;
  int P, T, S;
} trace_ctx;

static bool trace_compare_run(void *arg) {
  const trace_ctx *x = arg;
  vqc_findings fs;
  vqc_trace_compare_result res;
  vqc_findings_init(&fs);
  vqc_status s = trace_compare_once(x->dir, &fs, &res);
  bool ok = s == VQC_OK && fs.count == 1;
  if (!ok) trace_valid(x->P, x->T, x->S, &fs, &res, s);
  vqc_trace_compare_result_free(&res);
  vqc_findings_free(&fs);
  return ok;
}

static bool trace_floor_run(void *arg) {
  const trace_ctx *x = arg;
  long lines = parse_floor(x->dir, x->P, trace_suffixes, 1);
  const long want = (long)x->P * x->T * x->S;
  if (lines != want)
    fail("parse floor at %d ranks: %ld trace lines parsed, %ld written",
         x->P, lines, want);
  return lines == want;
}

static void trace_measure(const char *dir, int P, int T, int S, int reps,
                          file_point *pt) {
  memset(pt, 0, sizeof *pt);
  pt->P = P;
  pt->T = T;
  pt->S = S;
  pt->units = (long long)P * T * S;
  make_dir(dir);
  gen_traces(dir, P, T, S);
  vqc_findings fs;
  vqc_trace_compare_result res;
  vqc_findings_init(&fs);
  vqc_status s = trace_compare_once(dir, &fs, &res);
  bool ok = trace_valid(P, T, S, &fs, &res, s);
  vqc_trace_compare_result_free(&res);
  vqc_findings_free(&fs);
  trace_ctx x = {dir, P, T, S};
  if (ok) time_file_point(trace_compare_run, trace_floor_run, &x, reps, pt);
  remove_dir(dir, P, trace_suffixes, 1);
}

static void file_header(const char *what, const char *units,
                        const char *per) {
  say("  %5s %9s  %-11s %-30s %-11s %-22s %s\n", "P", units, what,
      "CPU [min..max]", "floor CPU", "CPU ratio [min..max]", per);
}

static void file_print(const char *figure, const file_point *pt) {
  char a[24], b[64], c[24], d[24];
  if (!json_out) {
    say("  %5d %9lld  %-11s %-30s %-11s %5.2f [%.2f .. %.2f]  %s\n", pt->P,
        pt->units, fmt_time(pt->wall.median, a, sizeof a),
        fmt_summary(pt->cpu, b, sizeof b),
        fmt_time(pt->floor_cpu.median, c, sizeof c), pt->ratio_cpu.median,
        pt->ratio_cpu.min, pt->ratio_cpu.max,
        fmt_time(pt->cpu.median / (double)pt->units, d, sizeof d));
    return;
  }
  char shape[48], name[64];
  if (pt->T) snprintf(shape, sizeof shape, "T%dxS%d", pt->T, pt->S);
  else snprintf(shape, sizeof shape, "N%d", pt->N);
  /* Wall: no baseline ratio (load on a shared machine falls unevenly on
   * wall times); CPU: against the parse floor's CPU. */
  bench_figure f = {.bench = BENCH, .figure = figure, .shape = shape,
                    .ranks = pt->P, .unit = "s", .value = pt->wall};
  bench_print_figure(stdout, &f);
  snprintf(name, sizeof name, "%s_cpu", figure);
  f = (bench_figure){.bench = BENCH, .figure = name, .shape = shape,
                     .ranks = pt->P, .unit = "s", .value = pt->cpu,
                     .baseline_name = "jsonl_parse_floor_cpu",
                     .baseline = pt->floor_cpu, .ratio = pt->ratio_cpu};
  bench_print_figure(stdout, &f);
}

/* ---------------------------------------------------- part 4: model */

typedef struct model_in {
  /* part 1, T = t64 */
  const side_point *side;
  int nside;
  const side_point *big; /* part 1 at T = 1000 */
  int nbig;
  /* parts 2 and 3 */
  const file_point *ledger;
  int nledger;
  const file_point *trace;
  int ntrace;
  int T;             /* the side sweep's T */
  int ledger_N;      /* records per rank in the ledger sweep */
  int trace_T, trace_S;
  double alpha_s, beta_s_per_byte;
} model_in;

static void print_model_figure(const char *figure, const char *shape, int P,
                               double value, const char *unit) {
  bench_figure f = {.bench = BENCH, .figure = figure, .shape = shape,
                    .ranks = P, .unit = unit,
                    .value = {value, value, value, 0}};
  bench_print_figure(stdout, &f);
}

static void print_model(const model_in *m) {
  char a[32], b[32], c[32], d[32], e[32], g[32], h[32];
  double x[MAX_SWEEP + 2], y[MAX_SWEEP + 2];

  /* The last measured side point and the per-rank CPU cost of a check. */
  const side_point *last = NULL;
  for (int i = 0; i < m->nside; i++)
    if (m->side[i].ran) last = &m->side[i];
  if (!last) {
    say("\nno side-channel measurement ran: no model\n");
    return;
  }
  const double t_local = last->cpu.median;
  const double msg_bytes = last->bytes / 2.0; /* one all_reduce's payload */

  /* Threads fits (descriptive only: this machine's cores, not a network). */
  int n = 0;
  for (int i = 0; i < m->nside; i++)
    if (m->side[i].ran) {
      x[n] = m->side[i].P;
      y[n++] = m->side[i].wall[CASE_ALLREDUCE].median;
    }
  fit ar_p = fit_linear(x, y, n);
  for (int i = 0; i < n; i++) x[i] = log2(x[i]);
  fit ar_l = fit_linear(x, y, n);
  n = 0;
  for (int i = 0; i < m->nside; i++)
    if (m->side[i].ran) {
      x[n] = m->side[i].P;
      y[n++] = m->side[i].wall[CASE_CHECK].median;
    }
  fit ck_p = fit_linear(x, y, n);

  /* Offline analyses: time ~ c0 + c1 * units (records, lines). */
  n = 0;
  for (int i = 0; i < m->nledger; i++)
    if (m->ledger[i].ran) {
      x[n] = (double)m->ledger[i].units;
      y[n++] = m->ledger[i].cpu.median;
    }
  fit led = fit_linear(x, y, n);
  const int led_n = n;
  n = 0;
  for (int i = 0; i < m->ntrace; i++)
    if (m->trace[i].ran) {
      x[n] = (double)m->trace[i].units;
      y[n++] = m->trace[i].cpu.median;
    }
  fit trc = fit_linear(x, y, n);
  const int trc_n = n;

  say("\n== 4. model ==\n");
  say("fits (least squares on relative error; max |fit/measured - 1| over "
      "the points):\n");
  say("  threads bare all_reduce/call  = %s + %s * P        (max err %.0f%%)\n",
      fmt_time(ar_p.a, a, sizeof a), fmt_time(ar_p.b, b, sizeof b),
      100 * ar_p.max_rel);
  say("                             or = %s + %s * log2 P   (max err %.0f%%)"
      "  -> %s fits better\n",
      fmt_time(ar_l.a, a, sizeof a), fmt_time(ar_l.b, b, sizeof b),
      100 * ar_l.max_rel, ar_p.max_rel <= ar_l.max_rel ? "a + b P" : "log2 P");
  say("  threads check wall/call       = %s + %s * P        (max err %.0f%%)\n",
      fmt_time(ck_p.a, a, sizeof a), fmt_time(ck_p.b, b, sizeof b),
      100 * ck_p.max_rel);
  say("    (P rank threads share this machine's %ld cores: wall time grows "
      "with P because the ranks' work does, not because a network would)\n",
      sysconf(_SC_NPROCESSORS_ONLN));
  say("  check CPU per rank (T = %d)   = %s at P = %d (the rank's own work: "
      "digests + agreement; part 1 shows it per P)\n",
      m->T, fmt_time(t_local, a, sizeof a), last->P);
  if (led_n >= 2)
    say("  ledger analysis CPU           = %s + %s * records  (records = P * "
        "N; max err %.0f%%, %d points)\n",
        fmt_time(led.a, a, sizeof a), fmt_time(led.b, b, sizeof b),
        100 * led.max_rel, led_n);
  if (trc_n >= 2)
    say("  trace compare CPU             = %s + %s * lines    (lines = P * T "
        "* S; max err %.0f%%, %d points)\n",
        fmt_time(trc.a, a, sizeof a), fmt_time(trc.b, b, sizeof b),
        100 * trc.max_rel, trc_n);

  say("\nassumed network (not measured here): alpha = %s per message, beta = "
      "%.3f ns/B (%.1f GB/s)\n",
      fmt_time(m->alpha_s, a, sizeof a), m->beta_s_per_byte * 1e9,
      1e-9 / m->beta_s_per_byte);
  say("  new check on a cluster   = CPU/rank + ceil(log2 P) * (alpha + m * "
      "beta),  m = %.0f B (one all_reduce's payload, measured)\n",
      msg_bytes);
  say("  old check on a cluster   >= CPU/rank + ceil(log2 P) * alpha + (P - "
      "1) * 32 T * beta  (all_gather, recursive doubling; leaves out "
      "comparing P T digests)\n");
  say("  side bytes/rank/check    : new = measured (flat: validated up to P "
      "= %d, held constant beyond); old = 32 T (P + 1)\n",
      last->P);
  say("  ledger analysis (N = %d) : c0 + c1 * P * N, CPU time of one process "
      "reading every dump (a full ring is N = 65536 records per rank)\n",
      m->ledger_N);
  say("  trace compare (T = %d, S = %d): c0 + c1 * P * T * S, CPU time of one "
      "process with one open file per rank (at most %d ranks, "
      "trace_compare.h)\n",
      m->trace_T, m->trace_S, VQC_TRACE_COMPARE_MAX_RANKS);

  /* The same formulas at the far end, for the other T and for full
   * ledger rings. */
  const long long Pmax = 1LL << MODEL_MAX_LOG2;
  const int lgmax = ceil_log2(Pmax);
  for (int i = m->nbig - 1; i >= 0; i--) {
    const side_point *bp = &m->big[i];
    if (!bp->ran) continue;
    const double bm = bp->bytes / 2.0;
    say("  T = %d at P = %lld: side %s/rank/check (old %s); check on a "
        "cluster %s (old >= %s); CPU/rank %s measured at P = %d\n",
        bp->T, Pmax, fmt_bytes(bp->bytes, a, sizeof a),
        fmt_bytes(32.0 * bp->T * (double)(Pmax + 1), b, sizeof b),
        fmt_time(bp->cpu.median +
                     lgmax * (m->alpha_s + bm * m->beta_s_per_byte),
                 c, sizeof c),
        fmt_time(bp->cpu.median + lgmax * m->alpha_s +
                     (double)(Pmax - 1) * 32.0 * bp->T * m->beta_s_per_byte,
                 d, sizeof d),
        fmt_time(bp->cpu.median, e, sizeof e), bp->P);
    break;
  }
  if (led_n >= 2)
    say("  ledger analysis of full rings (N = 65536 records per rank): %s at "
        "P = 1024, %s at P = %lld\n",
        fmt_time(fit_at(led, 1024.0 * 65536.0), a, sizeof a),
        fmt_time(fit_at(led, (double)Pmax * 65536.0), b, sizeof b), Pmax);

  say("\nP from 2 to %d: m = measured in this run, ~ = modelled (formulas "
      "above), ! = beyond what vqcheck accepts today\n",
      1 << MODEL_MAX_LOG2);
  say("  %6s | %12s %14s | %13s | %13s %15s | %13s | %13s\n", "P",
      "side B/rk/ck", "old B/rk/ck", "check threads", "check cluster",
      "old ck cluster", "ledger anal.", "trace compare");
  say("  %6s | %12s %14s | %13s | %13s %15s | %13s | %13s\n", "", "(new, T)",
      "(32T(P+1))", "(wall, meas.)", "(model)", "(model, >=)",
      "(CPU, N/rank)", "(CPU, TxS/rk)");
  char shape_side[32], shape_led[32], shape_trc[32];
  snprintf(shape_side, sizeof shape_side, "T%d", m->T);
  snprintf(shape_led, sizeof shape_led, "N%d", m->ledger_N);
  snprintf(shape_trc, sizeof shape_trc, "T%dxS%d", m->trace_T, m->trace_S);
  for (int k = 1; k <= MODEL_MAX_LOG2; k++) {
    const long long P = 1LL << k;
    const side_point *sp = NULL;
    for (int i = 0; i < m->nside; i++)
      if (m->side[i].ran && m->side[i].P == P) sp = &m->side[i];
    const file_point *lp = NULL, *tp = NULL;
    for (int i = 0; i < m->nledger; i++)
      if (m->ledger[i].ran && m->ledger[i].P == P &&
          m->ledger[i].N == m->ledger_N)
        lp = &m->ledger[i];
    for (int i = 0; i < m->ntrace; i++)
      if (m->trace[i].ran && m->trace[i].P == P) tp = &m->trace[i];

    const double bytes = sp ? sp->bytes : last->bytes;
    const double old_model = 32.0 * m->T * (double)(P + 1);
    const double old = sp && isfinite(sp->old_bytes) ? sp->old_bytes : old_model;
    const int lg = ceil_log2(P);
    const double ck_cluster =
        t_local + lg * (m->alpha_s + msg_bytes * m->beta_s_per_byte);
    const double old_cluster = t_local + lg * m->alpha_s +
                               (double)(P - 1) * 32.0 * m->T *
                                   m->beta_s_per_byte;
    const double led_t = lp ? lp->cpu.median
                            : fit_at(led, (double)P * m->ledger_N);
    const double trc_t = tp ? tp->cpu.median
                            : fit_at(trc, (double)P * m->trace_T * m->trace_S);
    say("  %6lld | %10s %c %12s %c | %11s %c | %11s ~ %13s ~ | %11s %c | %11s "
        "%c\n",
        P, fmt_bytes(bytes, a, sizeof a), sp ? 'm' : '~',
        fmt_bytes(old, b, sizeof b), sp && isfinite(sp->old_bytes) ? 'm' : '~',
        sp ? fmt_time(sp->wall[CASE_CHECK].median, c, sizeof c) : "-",
        sp ? 'm' : ' ', fmt_time(ck_cluster, d, sizeof d),
        fmt_time(old_cluster, e, sizeof e),
        led_n >= 2 || lp ? fmt_time(led_t, g, sizeof g) : "-",
        lp ? 'm' : '~',
        trc_n >= 2 || tp ? fmt_time(trc_t, h, sizeof h) : "-",
        tp ? 'm' : P > VQC_TRACE_COMPARE_MAX_RANKS ? '!' : '~');
    if (json_out) {
      if (!sp) {
        print_model_figure("model_side_bytes_per_rank_step", shape_side,
                           (int)P, bytes, "bytes");
      }
      print_model_figure("model_old_side_bytes_per_rank_step", shape_side,
                         (int)P, old_model, "bytes");
      print_model_figure("model_check_time_cluster", shape_side, (int)P,
                         ck_cluster, "s");
      print_model_figure("model_old_check_time_cluster", shape_side, (int)P,
                         old_cluster, "s");
      if (!lp && led_n >= 2)
        print_model_figure("model_ledger_analysis_time", shape_led, (int)P,
                           led_t, "s");
      if (!tp && trc_n >= 2)
        print_model_figure("model_trace_compare_time", shape_trc, (int)P,
                           trc_t, "s");
    }
  }
  say("  (check threads: wall time on this %d-core machine, load %s: not a "
      "cluster figure. Ledger and trace: CPU time of one process on this "
      "machine, files in the page cache; wall time is in parts 2 and 3.)\n",
      (int)sysconf(_SC_NPROCESSORS_ONLN), bench_load_average());
}

/* --------------------------------------------------------------- main */

static int usage(FILE *f, int code) {
  fprintf(f,
          "usage: bench_scale [--quick] [--json] [--reps N] [--max-ranks P] "
          "[--max-files P]\n"
          "                   [--alpha-us A] [--beta-ns-per-byte B]\n"
          "  --quick             smaller sweep (threads to 64 ranks, files "
          "to 256)\n"
          "  --reps N            timed repetitions (>= %d; default %d)\n"
          "  --max-ranks P       largest thread world (default 1024)\n"
          "  --max-files P       largest ledger/trace set (default 2048; "
          "up to 4096)\n"
          "  --alpha-us A        model: network latency per message (default "
          "5)\n"
          "  --beta-ns-per-byte B  model: time per byte (default 0.1, "
          "10 GB/s)\n"
          "  --json              one JSON object per figure\n"
          "exit: 0 validated, 1 a validation failed, 2 usage, 3 "
          "environment\n",
          BENCH_MIN_REPS, BENCH_MIN_REPS);
  return code;
}

static bool parse_int(const char *s, int lo, int hi, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || end == s || v < lo || v > hi) return false;
  *out = (int)v;
  return true;
}

static bool parse_double(const char *s, double lo, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || *end || end == s || !(v >= lo) || !isfinite(v)) return false;
  *out = v;
  return true;
}

/* Each rank's trace stays open during a comparison (trace_compare.h). */
static int raise_file_limit(int want) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)want) {
    rlim_t hard = rl.rlim_max;
    rl.rlim_cur = hard == RLIM_INFINITY || hard > (rlim_t)want ? (rlim_t)want
                                                               : hard;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
  }
  return rl.rlim_cur == RLIM_INFINITY ? INT32_MAX : (int)rl.rlim_cur;
}

int main(int argc, char **argv) {
  json_out = bench_json_requested(&argc, argv);
  bool quick = false;
  int reps = BENCH_MIN_REPS, max_ranks = 1024, max_files = 2048;
  double alpha_us = 5.0, beta_ns = 0.1;
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--help")) return usage(stdout, 0);
    if (!strcmp(argv[i], "--quick")) {
      quick = true;
      continue;
    }
    bool ok = v != NULL;
    if (ok && !strcmp(argv[i], "--reps"))
      ok = parse_int(v, BENCH_MIN_REPS, 1001, &reps);
    else if (ok && !strcmp(argv[i], "--max-ranks"))
      ok = parse_int(v, 2, 1 << 20, &max_ranks);
    else if (ok && !strcmp(argv[i], "--max-files"))
      ok = parse_int(v, 2, VQC_TRACE_COMPARE_MAX_RANKS, &max_files);
    else if (ok && !strcmp(argv[i], "--alpha-us"))
      ok = parse_double(v, 0.0, &alpha_us);
    else if (ok && !strcmp(argv[i], "--beta-ns-per-byte"))
      ok = parse_double(v, 0.0, &beta_ns);
    else {
      fprintf(stderr, BENCH ": unknown or incomplete option '%s' (try "
              "--help)\n", argv[i]);
      return 2;
    }
    if (!ok) {
      fprintf(stderr, BENCH ": bad value '%s' for %s (try --help)\n", v,
              argv[i]);
      return 2;
    }
    i++;
  }
  if (quick) {
    if (max_ranks > 64) max_ranks = 64;
    if (max_files > 256) max_files = 256;
  }
  const int T = 64, numel = 256;            /* 64 tensors of 1 KiB */
  const int T_big = 1000, numel_big = 64;   /* 1000 tensors of 256 B */
  const int ledger_N = quick ? 32 : 64;
  const int trace_T = 16, trace_S = 4;

  const char *tmp = getenv("TMPDIR");
  snprintf(tmp_root, sizeof tmp_root, "%s/bench_scale.XXXXXX",
           tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(tmp_root)) {
    fprintf(stderr, BENCH ": cannot create a temporary directory %s: %s\n",
            tmp_root, strerror(errno));
    return 3;
  }
  const int files = raise_file_limit(max_files + 64);
  if (files < max_files + 32) {
    int p = 2;
    while (p * 2 + 32 <= files) p *= 2;
    say("note: the open-file limit is %d: the trace sweep stops at %d ranks\n",
        files, p);
    max_files = p;
  }

  say("bench_scale: what vqcheck's checks cost as the ranks grow (%s run, "
      "%d repetitions, medians [min .. max])\n",
      quick ? "quick" : "full", reps);
  say("machine: %ld cores online, load average %s; threads backend: every "
      "rank is a thread of this process\n",
      sysconf(_SC_NPROCESSORS_ONLN), bench_load_average());

  /* Part 1. */
  say("\n== 1. divergence check: side channel per rank per check (threads "
      "backend) ==\n");
  say("validated per P: a planted divergence on the last rank is found (one "
      "finding, right tensor/step/rank), the timed run has no finding, the "
      "baselines' results are exact\n");
  side_point side64[MAX_SWEEP], side_big[4];
  int nside64 = 0, nside_big = 0, largest_ok = 0;
  side_header();
  for (int P = 2; P <= max_ranks && nside64 < MAX_SWEEP; P *= 2) {
    if (side_measure(P, T, numel, reps, &side64[nside64]) != 0) break;
    side_print(&side64[nside64]);
    if (side64[nside64].ran) largest_ok = P;
    nside64++;
  }
  if (largest_ok == 0) {
    fprintf(stderr, BENCH ": no thread world ran; cannot go on\n");
    rmdir(tmp_root);
    return failed_validation ? 1 : 3;
  }
  if (largest_ok < max_ranks)
    say("  the sweep stopped at P = %d (asked for up to %d)\n", largest_ok,
        max_ranks);
  const int big_ps[3] = {2, quick ? 16 : 64, quick ? 0 : 1024};
  for (int i = 0; i < 3; i++) {
    int P = big_ps[i];
    if (P == 0 || P > largest_ok) continue;
    if (side_measure(P, T_big, numel_big, reps, &side_big[nside_big]) != 0)
      break;
    side_print(&side_big[nside_big]);
    nside_big++;
  }
  /* Flat in P: the largest P's bytes within 2x of P = 2's, per T. */
  const side_point *series[2] = {side64, side_big};
  const int nseries[2] = {nside64, nside_big};
  for (int k = 0; k < 2; k++) {
    const side_point *first = NULL, *lastp = NULL;
    for (int i = 0; i < nseries[k]; i++)
      if (series[k][i].ran) {
        if (!first) first = &series[k][i];
        lastp = &series[k][i];
      }
    if (!first || first == lastp) continue;
    say("  T = %d: %.0f B per rank per check at P = %d, %.0f B at P = %d "
        "(x%.2f; limit 2x): %.0f int64 words each way = 2T + %.0f\n",
        first->T, first->bytes, first->P, lastp->bytes, lastp->P,
        lastp->bytes / first->bytes, lastp->bytes / 16.0,
        lastp->bytes / 16.0 - 2.0 * first->T);
    if (lastp->bytes > 2.0 * first->bytes)
      fail("T = %d: side-channel bytes per rank per check grow with P: %.0f "
           "at P = %d, %.0f at P = %d (more than 2x)",
           first->T, first->bytes, first->P, lastp->bytes, lastp->P);
  }

  /* Part 2. */
  say("\n== 2. deadlock analysis (vqc_ledger_analyze) over P ledger dumps, "
      "N = %d records per rank ==\n",
      ledger_N);
  say("validated per P: one deadlock finding at seq N-1 naming exactly the "
      "missing ranks, P - missing entered\n");
  file_header("analysis", "records", "CPU/record");
  file_point ledger[MAX_SWEEP + 1];
  int nledger = 0;
  char dir[4200];
  for (int P = 2; P <= max_files && nledger < MAX_SWEEP; P *= 2) {
    snprintf(dir, sizeof dir, "%s/ledgers-%d", tmp_root, P);
    ledger_measure(dir, P, ledger_N, reps, &ledger[nledger]);
    if (ledger[nledger].ran) file_print("ledger_analysis_time", &ledger[nledger]);
    nledger++;
  }
  if (!quick) {
    /* Longer dumps at one P: is the cost per record the same? */
    const int P = 64, N = 1024;
    snprintf(dir, sizeof dir, "%s/ledgers-%d-long", tmp_root, P);
    ledger_measure(dir, P, N, reps, &ledger[nledger]);
    if (ledger[nledger].ran) {
      say("  (N = %d:)\n", N);
      file_print("ledger_analysis_time", &ledger[nledger]);
    }
    nledger++;
  }

  /* Part 3. */
  say("\n== 3. trace compare (vqcheck compare) over P traces, T = %d tensors "
      "x S = %d steps per rank ==\n",
      trace_T, trace_S);
  say("validated per P: one divergence finding naming the one odd rank, "
      "step and tensor; every (step, tensor) compared\n");
  file_header("compare", "lines", "CPU/line");
  file_point trace[MAX_SWEEP];
  int ntrace = 0;
  for (int P = 2; P <= max_files && ntrace < MAX_SWEEP; P *= 2) {
    snprintf(dir, sizeof dir, "%s/traces-%d", tmp_root, P);
    trace_measure(dir, P, trace_T, trace_S, reps, &trace[ntrace]);
    if (trace[ntrace].ran) file_print("trace_compare_time", &trace[ntrace]);
    ntrace++;
  }
  if (rmdir(tmp_root) != 0)
    fprintf(stderr, BENCH ": cannot remove %s: %s\n", tmp_root,
            strerror(errno));

  /* Part 4. */
  model_in m = {.side = side64, .nside = nside64, .big = side_big,
                .nbig = nside_big, .ledger = ledger,
                .nledger = nledger, .trace = trace, .ntrace = ntrace,
                .T = T, .ledger_N = ledger_N, .trace_T = trace_T,
                .trace_S = trace_S, .alpha_s = alpha_us * 1e-6,
                .beta_s_per_byte = beta_ns * 1e-9};
  print_model(&m);

  if (failed_validation) {
    fprintf(stderr, BENCH ": FAILED (see the validation messages above)\n");
    return 1;
  }
  say("\nall validations passed\n");
  return 0;
}
