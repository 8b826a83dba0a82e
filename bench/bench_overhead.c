/* bench_overhead.c: what vqcheck's checks cost a real training step.
 *
 * The step: a data-parallel MLP x (T, D) -> relu(x W1^T + b1) (T, H) ->
 * (T, H) W2^T + b2 (T, D), MSE loss, hand-written backward with sgemm
 * (OpenBLAS, one thread per rank), one all_reduce of the flat gradient,
 * Adam. Defaults: D = 2048, H = 4096, so 16.8M float32 parameters; T = 1024
 * tokens per rank per step. The replicated state registered for the checks
 * is the weights plus Adam's exp_avg and exp_avg_sq (3 x 64 MiB = 192 MiB
 * per rank) and Adam's step counter.
 *
 * Three copies of the model train side by side on every rank, each on its
 * own comm of the same backend (threads: --ranks rank threads of this
 * process, 2 by default; mpi: the processes mpiexec started):
 *   unchecked  no session: the comm's ledger only (always on, part of comm);
 *   checked    a vqc_instr session with every check that needs nothing from
 *              the program (divergence incl. digests of all registered state
 *              and the nonfinite scan, lost_inplace, collective non-strict,
 *              shape) at interval 1: vqc_instr_step_end after every step;
 *   overlapped the same session with opts.overlap: the step-end digest runs
 *              on a helper thread during the next step's forward and
 *              backward, and vqc_instr_state_will_change before Adam waits
 *              for it. It needs a core the training does not use: with
 *              2 rank threads on a 2-core machine there is none, so run it
 *              also with --ranks 1 to see what a spare core buys.
 * They see the same batches, so their states must stay bit-identical.
 *
 * What it does:
 *   1. validates: after a warm-up step of each, every registered tensor of
 *      the checked model has the same digest as the unchecked one's, on
 *      every rank (the checks do not perturb training); again at the end;
 *      and the checked session ends with 0 findings (a clean run is clean);
 *   2. times N steps of each, interleaved (unchecked then checked, then the
 *      other way round, so drift and other jobs' load fall on both alike),
 *      the ranks lined up by a side-channel barrier before each step; the
 *      figure is the median over steps of rank 0's step time, wall clock
 *      and the rank thread's CPU time (CLOCK_THREAD_CPUTIME_ID: on a
 *      machine shared with other jobs their time does not count; it leaves
 *      out time spent waiting for the other rank, which is idle time);
 *        overhead = median over steps of (checked step / unchecked step),
 *      with min and max (bench_stats.h), for checked and overlapped;
 *      target <= 1.02 (checked), <= 1.01 (overlapped, issue 12); and the
 *      median time of vqc_instr_step_end alone,
 *      the checks' direct cost, as a fraction of the unchecked step;
 *   3. strict mode's cost per collective: blocks of K all_reduce of 16
 *      float32 on a comm with a strict session (collective checker only)
 *      and on the plain comm, interleaved; per-call time = block time / K,
 *      median over blocks;
 *        strict cost = median(strict per call) - median(plain per call).
 *
 * Usage:
 *   bench_overhead [--steps N] [--tokens T] [--dim D] [--hidden H] [--out DIR]
 *                  [--ranks 1|2] [--json]
 *   mpiexec -n 2 bench_overhead --backend mpi [...]
 * Without OpenBLAS a plain C loop replaces sgemm: the step is then far
 * slower and the ratio looks better than it would be; the bench says so.
 *
 * OpenBLAS picks its kernels from the CPU model and may fall back to an old
 * SSE-only core on CPUs it does not know (virtual machines); a slow step
 * would flatter the ratio too, so when OPENBLAS_CORETYPE is unset and the
 * CPU has AVX-512 or AVX2 the bench re-executes itself with
 * OPENBLAS_CORETYPE=SkylakeX or Haswell (and says so). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <ftw.h>
#include <unistd.h>

#ifdef VQC_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include "bench_stats.h"
#include "vqc/instrument.h"
#include "vqc/digest.h"
#include "vqc/clock.h"

#define MAX_STEPS 1001
#define STRICT_COUNT 16   /* float32 per all_reduce in the strict loop */
#define STRICT_CALLS 500  /* calls per block */
#define STRICT_BLOCKS 21
#define NBATCH 2          /* distinct batches per rank, used in turn */

typedef struct config {
  int64_t D, H, T;
  int steps;
  int ranks;   /* threads backend */
  bool json;
  const char *out;
  vqc_backend backend;
} config;

/* Median of n values (bench_stats.h). */
static double median(const double *v, int n) {
  return bench_summarize(v, n).median;
}

/* 64-byte aligned floats, zeroed; NULL when out of memory. */
static float *falloc(int64_t n) {
  size_t bytes = ((size_t)n * sizeof(float) + 63) / 64 * 64;
  float *p = aligned_alloc(64, bytes);
  if (p) memset(p, 0, bytes);
  return p;
}

/* ---- matrix products: C (M, N) = op(A) op(B), row-major */

#ifndef VQC_HAVE_OPENBLAS
/* A plain C stand-in for sgemm (slow; see the header comment). */
static void gemm_loops(bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                       const float *A, int64_t lda, const float *B,
                       int64_t ldb, float *C, int64_t ldc) {
  for (int64_t i = 0; i < M; i++) {
    float *c = C + i * ldc;
    for (int64_t j = 0; j < N; j++) c[j] = 0.0f;
    for (int64_t k = 0; k < K; k++) {
      const float a = ta ? A[k * lda + i] : A[i * lda + k];
      if (tb)
        for (int64_t j = 0; j < N; j++) c[j] += a * B[j * ldb + k];
      else
        for (int64_t j = 0; j < N; j++) c[j] += a * B[k * ldb + j];
    }
  }
}
#endif

static void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                 const float *A, int64_t lda, const float *B, int64_t ldb,
                 float *C, int64_t ldc) {
#ifdef VQC_HAVE_OPENBLAS
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, 1.0f, A,
              (int)lda, B, (int)ldb, 0.0f, C, (int)ldc);
#else
  gemm_loops(ta, tb, M, N, K, A, lda, B, ldb, C, ldc);
#endif
}

/* ---- the model */

/* Flat layout: W1 (H, D), b1 (H), W2 (D, H), b2 (D). */
typedef struct model {
  int64_t D, H, n;
  float *param, *grad, *exp_avg, *exp_avg_sq; /* (n) each */
  int64_t adam_step;
} model;

typedef struct scratch {
  float *h1;  /* (T, H) relu output */
  float *y;   /* (T, D) output, then dY */
  float *dh1; /* (T, H) */
} scratch;

static int64_t off_b1(const model *m) { return m->H * m->D; }
static int64_t off_w2(const model *m) { return off_b1(m) + m->H; }
static int64_t off_b2(const model *m) { return off_w2(m) + m->D * m->H; }

/* A uniform number in [-1, 1) from (seed, a, b): an integer mix, 24 bits. */
static float uniform(uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t z = seed + a * 0x9E3779B97F4A7C15u + b * 0xD1B54A32D192ED03u;
  z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9u;
  z = (z ^ (z >> 29)) * 0x94D049BB133111EBu;
  z ^= z >> 32;
  return (float)(z >> 40) / (float)(1u << 23) - 1.0f;
}

static bool model_init(model *m, int64_t D, int64_t H) {
  memset(m, 0, sizeof *m);
  m->D = D;
  m->H = H;
  m->n = 2 * D * H + H + D;
  m->param = falloc(m->n);
  m->grad = falloc(m->n);
  m->exp_avg = falloc(m->n);
  m->exp_avg_sq = falloc(m->n);
  if (!m->param || !m->grad || !m->exp_avg || !m->exp_avg_sq) return false;
  /* Like torch.nn.Linear: uniform in +-1/sqrt(fan_in); the same on every
   * rank (the seed does not depend on the rank). */
  const float s1 = 1.0f / sqrtf((float)D), s2 = 1.0f / sqrtf((float)H);
  for (int64_t i = 0; i < off_w2(m); i++)
    m->param[i] = s1 * uniform(1, 0, (uint64_t)i);
  for (int64_t i = off_w2(m); i < m->n; i++)
    m->param[i] = s2 * uniform(1, 0, (uint64_t)i);
  return true;
}

static void model_free(model *m) {
  free(m->param);
  free(m->grad);
  free(m->exp_avg);
  free(m->exp_avg_sq);
}

/* Registers weights (with gradients), then exp_avg, exp_avg_sq, step. */
static vqc_status model_register(vqc_instr *s, model *m) {
  const int64_t D = m->D, H = m->H;
  const struct {
    const char *name;
    int64_t off;
    int ndim;
    int64_t shape[2];
  } t[] = {{"fc1.weight", 0, 2, {H, D}},
           {"fc1.bias", off_b1(m), 1, {H, 0}},
           {"fc2.weight", off_w2(m), 2, {D, H}},
           {"fc2.bias", off_b2(m), 1, {D, 0}}};
  for (int i = 0; i < 4; i++)
    VQC_TRY(vqc_instr_register(s, t[i].name, VQC_F32, m->param + t[i].off,
                               m->grad + t[i].off, t[i].ndim, t[i].shape));
  for (int k = 0; k < 2; k++) {
    float *base = k == 0 ? m->exp_avg : m->exp_avg_sq;
    for (int i = 0; i < 4; i++) {
      char name[64];
      snprintf(name, sizeof name, "%s.%s", t[i].name,
               k == 0 ? "exp_avg" : "exp_avg_sq");
      VQC_TRY(vqc_instr_register(s, name, VQC_F32, base + t[i].off, NULL,
                                 t[i].ndim, t[i].shape));
    }
  }
  return vqc_instr_register(s, "adam.step", VQC_I64, &m->adam_step, NULL, 0,
                            NULL);
}

/* One digest over every replicated buffer (for the validation). */
static uint64_t model_digest(const model *m) {
  uint64_t d[4] = {0, 0, 0, 0};
  const int64_t shape[1] = {m->n};
  const size_t bytes = (size_t)m->n * sizeof(float);
  vqc_digest_buffer(m->param, bytes, VQC_F32, 1, shape, &d[0]);
  vqc_digest_buffer(m->exp_avg, bytes, VQC_F32, 1, shape, &d[1]);
  vqc_digest_buffer(m->exp_avg_sq, bytes, VQC_F32, 1, shape, &d[2]);
  d[3] = (uint64_t)m->adam_step;
  return vqc_xxh3_64(d, sizeof d);
}

/* One training step: forward, loss, backward, gradient all_reduce, Adam. */
/* `settle`: a session with opts.overlap, told before Adam writes the state
 * (NULL: none). */
static vqc_status train_step(vqc_comm *c, model *m, scratch *sc,
                             const float *x, const float *target, int64_t T,
                             vqc_instr *settle) {
  const int64_t D = m->D, H = m->H;
  float *w1 = m->param, *b1 = m->param + off_b1(m);
  float *w2 = m->param + off_w2(m), *b2 = m->param + off_b2(m);
  float *dw1 = m->grad, *db1 = m->grad + off_b1(m);
  float *dw2 = m->grad + off_w2(m), *db2 = m->grad + off_b2(m);

  /* forward: h1 = relu(x W1^T + b1) (T, H); y = h1 W2^T + b2 (T, D) */
  gemm(false, true, T, H, D, x, D, w1, D, sc->h1, H);
  for (int64_t t = 0; t < T; t++) {
    float *h = sc->h1 + t * H;
    for (int64_t j = 0; j < H; j++) {
      float z = h[j] + b1[j];
      h[j] = z > 0.0f ? z : 0.0f;
    }
  }
  gemm(false, true, T, D, H, sc->h1, H, w2, H, sc->y, D);
  /* loss = mean((y - target)^2); dy = 2 (y - target) / (T D), in place */
  const float scale = 2.0f / (float)(T * D);
  for (int64_t t = 0; t < T; t++)
    for (int64_t j = 0; j < D; j++) {
      float *v = &sc->y[t * D + j];
      *v = scale * (*v + b2[j] - target[t * D + j]);
    }
  /* backward */
  gemm(true, false, D, H, T, sc->y, D, sc->h1, H, dw2, H); /* dy^T h1 */
  memset(db2, 0, (size_t)D * sizeof *db2);
  for (int64_t t = 0; t < T; t++)
    for (int64_t j = 0; j < D; j++) db2[j] += sc->y[t * D + j];
  gemm(false, false, T, H, D, sc->y, D, w2, H, sc->dh1, H); /* dy W2 */
  memset(db1, 0, (size_t)H * sizeof *db1);
  for (int64_t t = 0; t < T; t++) {
    float *g = sc->dh1 + t * H;
    const float *h = sc->h1 + t * H;
    for (int64_t j = 0; j < H; j++) {
      g[j] = h[j] > 0.0f ? g[j] : 0.0f;
      db1[j] += g[j];
    }
  }
  gemm(true, false, H, D, T, sc->dh1, H, x, D, dw1, D); /* dz1^T x */

  /* DDP: sum the gradients over the ranks (the mean is taken in Adam). */
  VQC_TRY(vqc_all_reduce(c, m->grad, m->grad, (size_t)m->n, VQC_F32, VQC_SUM));

  /* Adam, PyTorch's defaults but lr. The registered state changes now. */
  if (settle) VQC_TRY(vqc_instr_state_will_change(settle));
  const float lr = 1e-4f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  const float inv_world = 1.0f / (float)vqc_comm_size(c);
  m->adam_step++;
  const float bc1 = 1.0f - powf(beta1, (float)m->adam_step);
  const float bc2 = 1.0f - powf(beta2, (float)m->adam_step);
  for (int64_t i = 0; i < m->n; i++) {
    const float g = m->grad[i] * inv_world;
    const float a = beta1 * m->exp_avg[i] + (1.0f - beta1) * g;
    const float b = beta2 * m->exp_avg_sq[i] + (1.0f - beta2) * g * g;
    m->exp_avg[i] = a;
    m->exp_avg_sq[i] = b;
    m->param[i] -= lr * (a / bc1) / (sqrtf(b / bc2) + eps);
  }
  return VQC_OK;
}

/* ---- one rank */

/* What a rank measured (rank 0's is printed). */
typedef struct rank_out {
  vqc_status status;
  char error[512];
  bool valid_warm, valid_end; /* checked == unchecked digests */
  uint64_t digest_warm;
  int findings;               /* the checked session's */
  char run_dir[512];
  double wall_u[MAX_STEPS], wall_c[MAX_STEPS], wall_o[MAX_STEPS];
  double cpu_u[MAX_STEPS], cpu_c[MAX_STEPS], cpu_o[MAX_STEPS];
  double step_end[MAX_STEPS]; /* wall time of vqc_instr_step_end */
  double step_end_cpu[MAX_STEPS]; /* its thread CPU time */
  double plain_call[STRICT_BLOCKS], strict_call[STRICT_BLOCKS];
} rank_out;

/* The comms of one rank: checked (A), unchecked (B), strict (S),
 * overlapped (O). */
typedef struct rank_comms {
  vqc_comm *a, *b, *s, *o;
} rank_comms;

static vqc_status fail(rank_out *o, vqc_status s, const char *what) {
  if (o->status == VQC_OK) {
    o->status = s;
    snprintf(o->error, sizeof o->error, "%s: %s", what, vqc_last_error());
  }
  return s;
}

/* The three models take step `step`, in an order rotated by `first` (0, 1
 * or 2 goes first). Times go to slot k (k < 0: not recorded, the
 * warm-up). */
enum { UNCHECKED, CHECKED, OVERLAPPED, NVARIANTS };
static vqc_status step_all(const config *cfg, rank_comms *rc, model *m[],
                           vqc_instr *ses, vqc_instr *ses_o, scratch *sc,
                           const float *x, const float *target, int64_t step,
                           int first, int k, rank_out *o) {
  for (int pass = 0; pass < NVARIANTS; pass++) {
    const int v = (first + pass) % NVARIANTS;
    /* Line the ranks up (side channel: no ledger record, no checker). */
    VQC_TRY(vqc_barrier(vqc_comm_side(rc->b)));
    const double w0 = vqc_now_s(), c0 = vqc_thread_cpu_s();
    double se = 0.0, se_cpu = 0.0;
    if (v == UNCHECKED) {
      VQC_TRY(train_step(rc->b, m[v], sc, x, target, cfg->T, NULL));
    } else {
      vqc_instr *session = v == CHECKED ? ses : ses_o;
      VQC_TRY(train_step(v == CHECKED ? rc->a : rc->o, m[v], sc, x, target,
                         cfg->T, v == OVERLAPPED ? ses_o : NULL));
      const double s0 = vqc_now_s(), s0_cpu = vqc_thread_cpu_s();
      VQC_TRY(vqc_instr_step_end(session, step));
      se = vqc_now_s() - s0;
      se_cpu = vqc_thread_cpu_s() - s0_cpu;
    }
    const double w = vqc_now_s() - w0, c = vqc_thread_cpu_s() - c0;
    if (k < 0) continue;
    if (v == CHECKED) {
      o->wall_c[k] = w;
      o->cpu_c[k] = c;
      o->step_end[k] = se;
      o->step_end_cpu[k] = se_cpu;
    } else if (v == OVERLAPPED) {
      o->wall_o[k] = w;
      o->cpu_o[k] = c;
    } else {
      o->wall_u[k] = w;
      o->cpu_u[k] = c;
    }
  }
  return VQC_OK;
}

/* Whether the two models' states are identical on every rank (agreed over
 * the side channel of B). */
static vqc_status validate(rank_comms *rc, model *m[], bool *ok,
                           uint64_t *digest) {
  const uint64_t du = model_digest(m[UNCHECKED]);
  const uint64_t dc = model_digest(m[CHECKED]);
  const uint64_t dov = model_digest(m[OVERLAPPED]);
  int64_t mine = du == dc && du == dov, all = 0;
  VQC_TRY(vqc_all_reduce(vqc_comm_side(rc->b), &mine, &all, 1, VQC_I64,
                         VQC_MIN));
  *ok = all == 1;
  *digest = dc;
  return VQC_OK;
}

/* Strict mode's cost: blocks of small all_reduces on S (strict session)
 * and B (plain), interleaved. */
static vqc_status strict_blocks(rank_comms *rc, rank_out *o) {
  float buf[STRICT_COUNT];
  for (int b = 0; b < STRICT_BLOCKS; b++) {
    for (int pass = 0; pass < 2; pass++) {
      const bool strict = (pass == 0) == (b % 2 == 0);
      vqc_comm *c = strict ? rc->s : rc->b;
      VQC_TRY(vqc_barrier(vqc_comm_side(rc->b)));
      const double t0 = vqc_now_s();
      for (int i = 0; i < STRICT_CALLS; i++) {
        for (int j = 0; j < STRICT_COUNT; j++) buf[j] = 1.0f;
        VQC_TRY(vqc_all_reduce(c, buf, buf, STRICT_COUNT, VQC_F32, VQC_SUM));
      }
      const double per_call = (vqc_now_s() - t0) / STRICT_CALLS;
      if (strict) o->strict_call[b] = per_call;
      else o->plain_call[b] = per_call;
    }
  }
  return VQC_OK;
}

static void run_rank(const config *cfg, rank_comms *rc, rank_out *o) {
  const int rank = vqc_comm_rank(rc->a);
  const int64_t T = cfg->T, D = cfg->D, H = cfg->H;
  model mu, mc, mo;
  model *m[NVARIANTS] = {&mu, &mc, &mo};
  scratch sc = {falloc(T * H), falloc(T * D), falloc(T * H)};
  float *x[NBATCH], *target[NBATCH];
  bool ok = model_init(&mu, D, H) && model_init(&mc, D, H) &&
            model_init(&mo, D, H) && sc.h1 &&
            sc.y && sc.dh1;
  for (int b = 0; b < NBATCH; b++) {
    x[b] = falloc(T * D);
    target[b] = falloc(T * D);
    ok = ok && x[b] && target[b];
    for (int64_t i = 0; ok && i < T * D; i++) {
      x[b][i] = uniform(2, (uint64_t)(rank * NBATCH + b) + 1, (uint64_t)i);
      target[b][i] = 0.5f * uniform(3, (uint64_t)(rank * NBATCH + b) + 1,
                                    (uint64_t)i);
    }
  }
  vqc_instr *ses = NULL, *strict = NULL, *ses_o = NULL;
  vqc_status s = ok ? VQC_OK : vqc_error(VQC_ENOMEM, "no memory for the models");
  if (s != VQC_OK) fail(o, s, "setup");

  /* The checked session: every check that needs nothing from us. */
  char dir[512];
  vqc_instr_options opt = {0};
  opt.name = "bench_overhead";
  opt.interval = 1;
  opt.timeout_s = 120; /* a step takes seconds on two busy cores */
  snprintf(dir, sizeof dir, "%s/checked", cfg->out);
  opt.run_dir = dir;
  if (s == VQC_OK && (s = vqc_instr_create(rc->a, &opt, &ses)) != VQC_OK)
    fail(o, s, "session");
  if (s == VQC_OK && (s = model_register(ses, &mc)) != VQC_OK)
    fail(o, s, "register");
  if (s == VQC_OK && (s = vqc_instr_start(ses)) != VQC_OK) fail(o, s, "start");
  /* The overlapped session: the same checks, digest on a helper thread. */
  vqc_instr_options oopt = opt;
  char odir[512];
  snprintf(odir, sizeof odir, "%s/overlapped", cfg->out);
  oopt.run_dir = odir;
  oopt.overlap = true;
  if (s == VQC_OK && (s = vqc_instr_create(rc->o, &oopt, &ses_o)) != VQC_OK)
    fail(o, s, "overlapped session");
  if (s == VQC_OK && (s = model_register(ses_o, &mo)) != VQC_OK)
    fail(o, s, "register (overlapped)");
  if (s == VQC_OK && (s = vqc_instr_start(ses_o)) != VQC_OK)
    fail(o, s, "overlapped start");
  /* The strict session: the collective checker alone. */
  vqc_instr_options sopt = opt;
  char sdir[512];
  snprintf(sdir, sizeof sdir, "%s/strict", cfg->out);
  sopt.run_dir = sdir;
  sopt.checks = VQC_INSTR_COLLECTIVE;
  sopt.strict = true;
  if (s == VQC_OK && (s = vqc_instr_create(rc->s, &sopt, &strict)) != VQC_OK)
    fail(o, s, "strict session");
  if (s == VQC_OK && (s = vqc_instr_start(strict)) != VQC_OK)
    fail(o, s, "strict start");
  snprintf(o->run_dir, sizeof o->run_dir, "%s", dir);

  /* 1. validate: one warm-up step of each, states identical. */
  int64_t step = 0;
  if (s == VQC_OK &&
      (s = step_all(cfg, rc, m, ses, ses_o, &sc, x[0], target[0], step++, 0,
                    -1, o)) != VQC_OK)
    fail(o, s, "warm-up step");
  /* The overlapped digest of the warm-up step is settled here: validation
   * reads the state on the side channel. */
  if (s == VQC_OK && (s = vqc_instr_state_will_change(ses_o)) != VQC_OK)
    fail(o, s, "settle");
  if (s == VQC_OK &&
      (s = validate(rc, m, &o->valid_warm, &o->digest_warm)) != VQC_OK)
    fail(o, s, "validation");
  /* 2. timed steps, alternating which model goes first. */
  for (int k = 0; s == VQC_OK && o->valid_warm && k < cfg->steps; k++, step++) {
    const int b = (int)(step % NBATCH);
    s = step_all(cfg, rc, m, ses, ses_o, &sc, x[b], target[b], step,
                 k % NVARIANTS, k, o);
    if (s != VQC_OK) fail(o, s, "timed step");
  }
  uint64_t d_end = 0;
  if (s == VQC_OK && (s = vqc_instr_state_will_change(ses_o)) != VQC_OK)
    fail(o, s, "settle");
  if (s == VQC_OK && (s = validate(rc, m, &o->valid_end, &d_end)))
    fail(o, s, "validation at the end");
  /* 3. strict mode. */
  if (s == VQC_OK && (s = strict_blocks(rc, o)) != VQC_OK)
    fail(o, s, "strict loop");

  if (ses) {
    vqc_status f = vqc_instr_finish(ses, s, &o->findings);
    if (f != VQC_OK) fail(o, f, "finish");
    if (rank == 0) vqc_instr_print_findings(ses, stdout);
  }
  if (ses_o) {
    int n = 0;
    vqc_status f = vqc_instr_finish(ses_o, s, &n);
    if (f != VQC_OK) fail(o, f, "overlapped finish");
    if (rank == 0) vqc_instr_print_findings(ses_o, stdout);
    o->findings += n;
  }
  if (strict) {
    int n = 0;
    vqc_status f = vqc_instr_finish(strict, s, &n);
    if (f != VQC_OK) fail(o, f, "strict finish");
    o->findings += n;
  }
  vqc_instr_destroy(strict);
  vqc_instr_destroy(ses_o);
  vqc_instr_destroy(ses);
  for (int b = 0; b < NBATCH; b++) {
    free(x[b]);
    free(target[b]);
  }
  free(sc.h1);
  free(sc.y);
  free(sc.dh1);
  model_free(&mu);
  model_free(&mc);
  model_free(&mo);
}

/* ---- threads backend: one pthread per rank driving four worlds */

typedef struct thread_arg {
  const config *cfg;
  rank_comms rc;
  rank_out *out;
} thread_arg;

static void *thread_main(void *p) {
  thread_arg *a = p;
  run_rank(a->cfg, &a->rc, a->out);
  return NULL;
}

#define NWORLDS 4
#define MAX_THREAD_RANKS 2
static int run_threads(const config *cfg, int ranks, rank_out *outs) {
  vqc_threads_world *w[NWORLDS] = {NULL, NULL, NULL, NULL};
  for (int i = 0; i < NWORLDS; i++)
    if (vqc_threads_world_create(ranks, &w[i]) != VQC_OK) {
      fprintf(stderr, "bench_overhead: %s\n", vqc_last_error());
      for (int j = 0; j < i; j++) vqc_threads_world_destroy(w[j]);
      return 3;
    }
  pthread_t th[MAX_THREAD_RANKS];
  thread_arg args[MAX_THREAD_RANKS];
  for (int r = 0; r < ranks; r++) {
    args[r].cfg = cfg;
    args[r].rc.a = vqc_threads_world_comm(w[0], r);
    args[r].rc.b = vqc_threads_world_comm(w[1], r);
    args[r].rc.s = vqc_threads_world_comm(w[2], r);
    args[r].rc.o = vqc_threads_world_comm(w[3], r);
    args[r].out = &outs[r];
    pthread_create(&th[r], NULL, thread_main, &args[r]);
  }
  for (int r = 0; r < ranks; r++) pthread_join(th[r], NULL);
  for (int i = 0; i < NWORLDS; i++) vqc_threads_world_destroy(w[i]);
  return 0;
}

/* ---- OpenBLAS kernels (see the header comment) */

#ifdef VQC_HAVE_OPENBLAS
static void use_best_openblas_core(char **argv) {
  if (getenv("OPENBLAS_CORETYPE")) return; /* the user chose */
  const char *want = NULL;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    want = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    want = "Haswell";
  if (!want) return;
  const char *core = openblas_get_corename();
  /* OpenBLAS core names whose sgemm is at least as wide as `want`. */
  static const char *const wide[] = {"skylakex", "cooperlake",
                                     "sapphirerapids", "haswell", "zen"};
  const int nwide = strcmp(want, "SkylakeX") == 0 ? 3 : 5;
  for (int i = 0; i < nwide; i++)
    if (strcasecmp(core, wide[i]) == 0) return;
  printf("note: OpenBLAS chose its '%s' kernels; re-running with "
         "OPENBLAS_CORETYPE=%s, its best for this CPU\n", core, want);
  fflush(stdout);
  setenv("OPENBLAS_CORETYPE", want, 1);
  execv("/proc/self/exe", argv);
  printf("note: re-running failed; using '%s'\n", core);
}
#endif

/* ---- main */

static int remove_entry(const char *path, const struct stat *sb, int flag,
                        struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(path);
}

/* Removes the bench's own temporary run directories (not a --out DIR). */
static void remove_tree(const char *dir) {
  nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int usage(FILE *f, int code) {
  fprintf(f, "usage: bench_overhead [--steps N] [--tokens T] [--dim D] "
             "[--hidden H] [--out DIR] [--ranks 1|2] [--json]\n"
             "       mpiexec -n 2 bench_overhead --backend mpi [...]\n"
             "defaults: 9 timed steps of each kind, T=1024 tokens per rank, "
             "D=2048, H=4096\n");
  return code;
}

int main(int argc, char **argv) {
  config cfg = {.D = 2048, .H = 4096, .T = 1024, .steps = 9,
                .backend = VQC_BACKEND_THREADS};
  char out_default[256];
  snprintf(out_default, sizeof out_default, "/tmp/vqc-bench-overhead-%d",
           (int)getpid());
  cfg.out = out_default;
  cfg.ranks = 2;
  cfg.json = bench_json_requested(&argc, argv);
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--help")) return usage(stdout, 0);
    if (!v) return usage(stderr, 2);
    if (!strcmp(argv[i], "--steps")) cfg.steps = atoi(v);
    else if (!strcmp(argv[i], "--tokens")) cfg.T = atoll(v);
    else if (!strcmp(argv[i], "--dim")) cfg.D = atoll(v);
    else if (!strcmp(argv[i], "--hidden")) cfg.H = atoll(v);
    else if (!strcmp(argv[i], "--out")) cfg.out = v;
    else if (!strcmp(argv[i], "--ranks")) cfg.ranks = atoi(v);
    else if (!strcmp(argv[i], "--backend")) {
      if (vqc_backend_from_name(v, &cfg.backend) != VQC_OK ||
          cfg.backend == VQC_BACKEND_NCCL)
        return usage(stderr, 2);
    } else {
      return usage(stderr, 2);
    }
    i++;
  }
  if (cfg.steps < BENCH_MIN_REPS || cfg.steps >= MAX_STEPS || cfg.T < 1 ||
      cfg.D < 1 || cfg.H < 1 || cfg.ranks < 1 || cfg.ranks > MAX_THREAD_RANKS)
    return usage(stderr, 2);
#ifdef VQC_HAVE_OPENBLAS
  use_best_openblas_core(argv);
  openblas_set_num_threads(1); /* one core per rank */
#endif

  const int ranks_threads = cfg.ranks;
  rank_out *outs = calloc(2, sizeof *outs);
  if (!outs) return 3;
  int rank = 0, ranks = ranks_threads;
  vqc_comm *mc[NWORLDS] = {NULL, NULL, NULL, NULL};
  if (cfg.backend == VQC_BACKEND_MPI) {
    for (int i = 0; i < NWORLDS; i++)
      if (vqc_mpi_comm_create(&argc, &argv, &mc[i]) != VQC_OK) {
        fprintf(stderr, "bench_overhead: %s\n", vqc_last_error());
        return 3;
      }
    rank = vqc_comm_rank(mc[0]);
    ranks = vqc_comm_size(mc[0]);
  }
  const int64_t nparams = 2 * cfg.D * cfg.H + cfg.H + cfg.D;
  const double mib = (double)nparams * 4 / (1 << 20);
  if (rank == 0) {
    printf("bench_overhead: %d ranks (%s), MLP %" PRId64 "-%" PRId64 "-%" PRId64
           " (%.2fM float32 parameters), %" PRId64 " tokens per rank per step, "
           "Adam\n", ranks, vqc_backend_name(cfg.backend), cfg.D, cfg.H, cfg.D,
           (double)nparams / 1e6, cfg.T);
    printf("registered replicated state per rank: %.1f MiB (weights %.1f + "
           "exp_avg %.1f + exp_avg_sq %.1f) + adam.step, 13 tensors\n",
           3 * mib, mib, mib, mib);
#ifdef VQC_HAVE_OPENBLAS
    printf("sgemm: OpenBLAS %s, core %s, 1 thread per rank; %ld cores online\n",
           openblas_get_config(), openblas_get_corename(),
           sysconf(_SC_NPROCESSORS_ONLN));
#else
    printf("sgemm: plain C loops (no OpenBLAS): the step is far slower than a "
           "real one, so the ratio below understates the overhead\n");
#endif
    fflush(stdout);
  }

  int code = 0;
  rank_out *o = &outs[0];
  if (cfg.backend == VQC_BACKEND_MPI) {
    rank_comms rc = {mc[0], mc[1], mc[2], mc[3]};
    run_rank(&cfg, &rc, o);
    for (int i = NWORLDS - 1; i >= 0; i--) vqc_mpi_comm_destroy(mc[i]);
  } else {
    code = run_threads(&cfg, ranks_threads, outs);
    for (int r = 1; r < ranks_threads && outs[0].status == VQC_OK; r++)
      if (outs[r].status != VQC_OK) o = &outs[r];
  }
  if (code) return code;
  if (o->status != VQC_OK) {
    fprintf(stderr, "bench_overhead: rank %d: %s\n", rank, o->error);
    return 3;
  }
  if (rank != 0) {
    free(outs);
    return o->valid_warm && o->valid_end && o->findings == 0 ? 0 : 1;
  }
  printf("validate: checked and unchecked states after the warm-up step: %s "
         "(digest %016" PRIx64 "); after the timed steps: %s; findings of "
         "the checked sessions: %d\n",
         o->valid_warm ? "identical on every rank" : "DIFFERENT",
         o->digest_warm, o->valid_end ? "identical" : "DIFFERENT", o->findings);
  if (!o->valid_warm || !o->valid_end || o->findings != 0) {
    printf("FAIL: the checks changed training or reported a clean run\n");
    free(outs);
    return 1;
  }
  const int n = cfg.steps;
  const double wu = median(o->wall_u, n), wc = median(o->wall_c, n);
  const double wo = median(o->wall_o, n);
  const double cu = median(o->cpu_u, n), cc = median(o->cpu_c, n);
  const double co = median(o->cpu_o, n);
  const double se = median(o->step_end, n);
  const double se_cpu = median(o->step_end_cpu, n);
  const bench_summary r_c = bench_ratios(o->wall_c, o->wall_u, n);
  const bench_summary r_o = bench_ratios(o->wall_o, o->wall_u, n);
  if (cfg.json) {
    bench_figure f = {.bench = "bench_overhead", .ranks = ranks,
                      .tokens = cfg.T, .unit = "s",
                      .baseline_name = "unchecked_step",
                      .baseline = bench_summarize(o->wall_u, n)};
    f.figure = "checked_step";
    f.value = bench_summarize(o->wall_c, n);
    f.ratio = r_c;
    bench_print_figure(stdout, &f);
    f.figure = "overlapped_step";
    f.value = bench_summarize(o->wall_o, n);
    f.ratio = r_o;
    bench_print_figure(stdout, &f);
  }
  printf("step time, median of %d steps each, interleaved (rank 0):\n", n);
  printf("  no checks      wall %8.4f s   thread cpu %8.4f s\n", wu, cu);
  printf("  every check    wall %8.4f s   thread cpu %8.4f s\n", wc, cc);
  printf("  overlapped     wall %8.4f s   thread cpu %8.4f s\n", wo, co);
  printf("  overhead = median over steps of (checked / unchecked step) = "
         "%.4fx wall (min %.4f, max %.4f)   (target <= 1.02x)\n",
         r_c.median, r_c.min, r_c.max);
  printf("  overlapped digest: median of (overlapped / unchecked step) = "
         "%.4fx wall (min %.4f, max %.4f)   (target <= 1.01x; %d rank "
         "threads on %ld cores)\n", r_o.median, r_o.min, r_o.max, ranks,
         sysconf(_SC_NPROCESSORS_ONLN));
  printf("  vqc_instr_step_end alone: median wall %.4f s, thread cpu %.4f s = "
         "%.2f%% of the unchecked step's cpu (median(step_end cpu) / "
         "median(unchecked cpu))\n", se, se_cpu, 100.0 * se_cpu / cu);
  /* The checks cost a fixed time per registered byte, the step a time per
   * token: where they meet 2% at this machine's speed. */
  printf("  the checks read %.1f MiB per rank per step (%.2f GB/s of thread "
         "cpu); at this step speed they stay within 1.02x from about %.0f "
         "tokens per rank (T * (step_end cpu / unchecked cpu) / 0.02)\n",
         3 * mib, 3 * mib * 1048576.0 / se_cpu / 1e9,
         (double)cfg.T * (se_cpu / cu) / 0.02);
  const double pc = median(o->plain_call, STRICT_BLOCKS);
  const double sc = median(o->strict_call, STRICT_BLOCKS);
  printf("strict mode: all_reduce of %d float32, %d blocks of %d calls, "
         "interleaved:\n", STRICT_COUNT, STRICT_BLOCKS, STRICT_CALLS);
  printf("  plain %.2f us/call, strict %.2f us/call: strict cost = median(strict)"
         " - median(plain) = %.2f us per collective (%.2fx)\n", pc * 1e6,
         sc * 1e6, (sc - pc) * 1e6, sc / pc);
  if (cfg.out == out_default && cfg.backend == VQC_BACKEND_THREADS) {
    remove_tree(cfg.out);
    printf("run directories: removed (pass --out DIR to keep them)\n");
  } else {
    printf("run directories: %s/{checked,overlapped,strict}\n", cfg.out);
  }
  free(outs);
  return 0;
}
