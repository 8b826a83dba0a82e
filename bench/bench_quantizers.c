/* bench_quantizers.c: how fast the quantizers' hot loops run on one core,
 * each against a baseline measured in the same run.
 *
 *   (1) nearest-code search (vqc_vq_nearest: distances + argmin, fused) at
 *       M = 65536 rows, D = 64, C = 1024 codes, against OpenBLAS sgemm of
 *       the same shape (X (M, D) times E^T (D, C)), one thread each.
 *       GFLOP/s = 2*M*C*D / seconds for both (the dot products' multiply-
 *       adds; the norms, sqrt and argmin are not counted). Target: ratio =
 *       nearest / sgemm >= 1.0. The AVX2 kernel is shown too where the
 *       AVX-512 one is the default, and the core's FMA peak is measured so
 *       the figures can be read as a fraction of it.
 *   (2) FSQ quantize (levels 8,5,5,5, with indices) against memcpy of the
 *       same bytes: ratio of bytes/s (input bytes for FSQ).
 *   (3) the EMA update (vqc_vq_ema_update: per-code counts and sums of the
 *       rows given their indices, then the lerps and the renormalisation,
 *       which touch only C*D values) against a plain read of x: ratio of
 *       bytes/s of x.
 *
 * Validation comes first and exits 1 on any failure: the nearest search
 * equals the scalar reference bit for bit on slices of rows (indices and
 * distances); sgemm agrees with double-precision dot products within
 * D * FLT_EPSILON * sum|x_d e_d| (twice the textbook bound for a float32
 * sum of D products, whatever order the BLAS uses); FSQ's indices equal
 * codes_to_indices of its codes; the EMA counts equal a bincount of the
 * indices and the sums equal row-order double sums rounded once (decay 0,
 * so both are copied exactly).
 *
 * Timing: every kind runs on the calling thread (OpenBLAS set to one
 * thread computes in the caller), so each run is timed with the thread's
 * CPU clock (CLOCK_THREAD_CPUTIME_ID): on a machine shared with other jobs,
 * the time the core spends on them does not count. Best of REPS runs
 * (default 5, argv[1] to change), the kinds interleaved; the median and
 * the best wall-clock time are printed beside the best, and the ratios use
 * the best CPU times. Data is warm (each buffer was just written or used):
 * these loops are meant to run on data the training step has just
 * produced.
 *
 * OpenBLAS: forced to one thread with openblas_set_num_threads(1). Debian's
 * DYNAMIC_ARCH build picks its kernel set from the CPU model and falls back
 * to an old generic core ("Prescott", SSE only) on CPUs it does not know,
 * such as some virtual machines' ones. Measuring against that would flatter
 * us, so when OPENBLAS_CORETYPE is unset and OpenBLAS chose a core with
 * narrower vectors than this CPU has, the bench re-executes itself with
 * OPENBLAS_CORETYPE set to SkylakeX (AVX-512) or Haswell (AVX2), OpenBLAS's
 * best kernels for those features, and says so. To measure against another
 * core, set OPENBLAS_CORETYPE yourself. */
#define _GNU_SOURCE
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#ifdef VQC_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include "vq_nearest.h"
#include "vqc/fsq.h"
#include "vqc/rng.h"
#include "vqc/vq.h"

enum { M_ROWS = 65536, DIM = 64, CODES = 1024 };
#define FSQ_FLOATS ((int64_t)8 << 20) /* 32 MiB of z */
#define MAX_REPS 50

static volatile uint64_t sink; /* keeps the read loops' results alive */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU time of the calling thread: see "Timing" at the top. */
static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- timings: kinds x runs, CPU and wall clock */

enum { T_SGEMM, T_NEAR, T_NEAR_AVX2, T_FSQ, T_MEMCPY, T_EMA, T_READ, NT };
static double t_cpu[NT][MAX_REPS], t_wall[NT][MAX_REPS];
static int n_reps;

typedef struct {
  double wall, cpu;
} stamp;

static stamp start(void) {
  stamp s = {now_s(), cpu_s()};
  return s;
}
static void stop(stamp s, int kind, int rep) {
  t_cpu[kind][rep] = cpu_s() - s.cpu;
  t_wall[kind][rep] = now_s() - s.wall;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Best and median of one kind's runs. */
typedef struct {
  double best, median, best_wall;
} summary;

static summary summarise(int kind) {
  double c[MAX_REPS], w[MAX_REPS];
  memcpy(c, t_cpu[kind], sizeof c);
  memcpy(w, t_wall[kind], sizeof w);
  qsort(c, (size_t)n_reps, sizeof c[0], cmp_double);
  qsort(w, (size_t)n_reps, sizeof w[0], cmp_double);
  const int n = n_reps;
  summary s = {c[0], n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]), w[0]};
  return s;
}

/* One line of the report: `work` units (flops, bytes) per best CPU time,
 * divided by `scale` (1e9 for G). Returns that rate. */
static double report(const char *label, int kind, double work, double scale,
                     const char *unit) {
  const summary s = summarise(kind);
  const double rate = work / s.best / scale;
  printf("    %-30s %8.2f ms (median %8.2f, wall %8.2f) %8.2f %s\n", label,
         1e3 * s.best, 1e3 * s.median, 1e3 * s.best_wall, rate, unit);
  return rate;
}

/* ---- the FMA peak of this core */

/* 12 independent chains: enough to cover the FMA latency (4 cycles) on two
 * FMA ports. Returns GFLOP/s (2 flops per lane per FMA). */
__attribute__((target("avx512f"))) static double peak_avx512(long iters) {
  const __m512 m = _mm512_set1_ps(0.999f), a = _mm512_set1_ps(1e-3f);
  __m512 c0 = _mm512_set1_ps(1), c1 = _mm512_set1_ps(2), c2 = _mm512_set1_ps(3),
         c3 = _mm512_set1_ps(4), c4 = _mm512_set1_ps(5), c5 = _mm512_set1_ps(6),
         c6 = _mm512_set1_ps(7), c7 = _mm512_set1_ps(8), c8 = _mm512_set1_ps(9),
         c9 = _mm512_set1_ps(10), c10 = _mm512_set1_ps(11),
         c11 = _mm512_set1_ps(12);
  const double t0 = cpu_s();
  for (long i = 0; i < iters; i++) {
    c0 = _mm512_fmadd_ps(c0, m, a); c1 = _mm512_fmadd_ps(c1, m, a);
    c2 = _mm512_fmadd_ps(c2, m, a); c3 = _mm512_fmadd_ps(c3, m, a);
    c4 = _mm512_fmadd_ps(c4, m, a); c5 = _mm512_fmadd_ps(c5, m, a);
    c6 = _mm512_fmadd_ps(c6, m, a); c7 = _mm512_fmadd_ps(c7, m, a);
    c8 = _mm512_fmadd_ps(c8, m, a); c9 = _mm512_fmadd_ps(c9, m, a);
    c10 = _mm512_fmadd_ps(c10, m, a); c11 = _mm512_fmadd_ps(c11, m, a);
  }
  const double t = cpu_s() - t0;
  const __m512 s = _mm512_add_ps(
      _mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
      _mm512_add_ps(
          _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7)),
          _mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11))));
  sink = (uint64_t)_mm512_reduce_add_ps(s);
  return 2.0 * 16 * 12 * (double)iters / t / 1e9;
}

__attribute__((target("avx2,fma"))) static double peak_avx2(long iters) {
  const __m256 m = _mm256_set1_ps(0.999f), a = _mm256_set1_ps(1e-3f);
  __m256 c0 = _mm256_set1_ps(1), c1 = _mm256_set1_ps(2), c2 = _mm256_set1_ps(3),
         c3 = _mm256_set1_ps(4), c4 = _mm256_set1_ps(5), c5 = _mm256_set1_ps(6),
         c6 = _mm256_set1_ps(7), c7 = _mm256_set1_ps(8), c8 = _mm256_set1_ps(9),
         c9 = _mm256_set1_ps(10), c10 = _mm256_set1_ps(11),
         c11 = _mm256_set1_ps(12);
  const double t0 = cpu_s();
  for (long i = 0; i < iters; i++) {
    c0 = _mm256_fmadd_ps(c0, m, a); c1 = _mm256_fmadd_ps(c1, m, a);
    c2 = _mm256_fmadd_ps(c2, m, a); c3 = _mm256_fmadd_ps(c3, m, a);
    c4 = _mm256_fmadd_ps(c4, m, a); c5 = _mm256_fmadd_ps(c5, m, a);
    c6 = _mm256_fmadd_ps(c6, m, a); c7 = _mm256_fmadd_ps(c7, m, a);
    c8 = _mm256_fmadd_ps(c8, m, a); c9 = _mm256_fmadd_ps(c9, m, a);
    c10 = _mm256_fmadd_ps(c10, m, a); c11 = _mm256_fmadd_ps(c11, m, a);
  }
  const double t = cpu_s() - t0;
  const __m256 s = _mm256_add_ps(
      _mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
      _mm256_add_ps(
          _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)),
          _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11))));
  float lanes[8];
  _mm256_storeu_ps(lanes, s);
  sink = (uint64_t)lanes[0];
  return 2.0 * 8 * 12 * (double)iters / t / 1e9;
}

/* ---- the plain-read baseline (as bench_digest.c) */

/* Sum of n bytes (a multiple of 128, p 32-byte aligned) as uint64 lanes,
 * four independent accumulators so the adds never limit it. */
__attribute__((target("avx2"))) static uint64_t sum_avx2(const void *p,
                                                         size_t n) {
  const __m256i *v = p;
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < n / 32; i += 4) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(v + i));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(v + i + 1));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(v + i + 2));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(v + i + 3));
  }
  __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1),
                               _mm256_add_epi64(a2, a3));
  uint64_t lanes[4];
  _mm256_storeu_si256((__m256i *)lanes, s);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

static uint64_t sum_plain(const void *p, size_t n) {
  const uint64_t *w = p;
  uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  for (size_t i = 0; i < n / 8; i += 4) {
    a0 += w[i];
    a1 += w[i + 1];
    a2 += w[i + 2];
    a3 += w[i + 3];
  }
  return a0 + a1 + a2 + a3;
}

static int have_avx2;

static uint64_t read_sum(const void *p, size_t n) {
  return have_avx2 ? sum_avx2(p, n) : sum_plain(p, n);
}

/* ---- OpenBLAS */

#ifdef VQC_HAVE_OPENBLAS
/* See the header comment: re-executes with OPENBLAS_CORETYPE set when
 * OpenBLAS picked a core with narrower vectors than this CPU has. Returns
 * only when no re-execution is needed or exec failed. */
static void use_openblas_best_core(char **argv) {
  if (getenv("OPENBLAS_CORETYPE")) return; /* the user chose */
  const char *want = NULL;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    want = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    want = "Haswell";
  if (!want) return;
  const char *core = openblas_get_corename();
  /* Cores whose sgemm uses AVX-512 / at least AVX2 (OpenBLAS's names). */
  static const char *const avx512_cores[] = {"skylakex", "cooperlake",
                                             "sapphirerapids", NULL};
  static const char *const avx2_cores[] = {"haswell", "zen", "skylakex",
                                           "cooperlake", "sapphirerapids",
                                           NULL};
  const char *const *ok = strcmp(want, "SkylakeX") == 0 ? avx512_cores
                                                          : avx2_cores;
  for (int i = 0; ok[i]; i++)
    if (strcasecmp(core, ok[i]) == 0) return;
  printf("note: OpenBLAS chose its '%s' kernels for this CPU, which has %s; "
         "re-running with OPENBLAS_CORETYPE=%s so that the baseline is "
         "OpenBLAS's best sgemm here\n", core,
         strcmp(want, "SkylakeX") == 0 ? "AVX-512" : "AVX2 and FMA", want);
  fflush(stdout);
  setenv("OPENBLAS_CORETYPE", want, 1);
  execv("/proc/self/exe", argv);
  printf("note: re-running failed; the baseline uses '%s'\n", core);
}
#endif

/* ---- (1) nearest code */

/* Compares the fast path with the scalar reference on rows [i0, i0 + n):
 * indices and distances bit for bit, and the full run's indices. Times the
 * reference as it goes (*ref_s). */
static int validate_nearest(const float *x, const float *E, int64_t i0,
                            int64_t n, const int64_t *idx_full,
                            double *ref_s) {
  int64_t *ia = malloc((size_t)n * sizeof(int64_t));
  int64_t *ib = malloc((size_t)n * sizeof(int64_t));
  float *da = malloc((size_t)(n * CODES) * sizeof(float));
  float *db = malloc((size_t)(n * CODES) * sizeof(float));
  int ok = ia && ib && da && db;
  if (ok) {
    const double t0 = cpu_s();
    ok = vq_nearest_with(VQ_KERNEL_SCALAR, x + i0 * DIM, n, E, CODES, DIM, ia,
                         da) == VQC_OK;
    *ref_s += cpu_s() - t0;
  }
  ok = ok && vqc_vq_nearest(x + i0 * DIM, n, E, CODES, DIM, ib, db) == VQC_OK;
  int64_t bad = 0;
  for (int64_t i = 0; ok && i < n; i++)
    bad += ia[i] != ib[i] || ia[i] != idx_full[i0 + i];
  for (int64_t j = 0; ok && j < n * CODES; j++)
    bad += memcmp(da + j, db + j, sizeof(float)) != 0;
  free(ia);
  free(ib);
  free(da);
  free(db);
  if (!ok) {
    fprintf(stderr, "bench_quantizers: nearest failed: %s\n", vqc_last_error());
    return 0;
  }
  if (bad) {
    fprintf(stderr, "bench_quantizers: rows %lld..%lld: %lld indices or "
            "distances differ from the scalar reference\n", (long long)i0,
            (long long)(i0 + n - 1), (long long)bad);
    return 0;
  }
  return 1;
}

#ifdef VQC_HAVE_OPENBLAS
/* out (M, C) = x (M, D) E^T: the baseline's product. */
static void sgemm_xet(const float *x, const float *E, float *out) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M_ROWS, CODES, DIM,
              1.0f, x, DIM, E, DIM, 0.0f, out, CODES);
}

static int validate_sgemm(const float *x, const float *E, const float *out) {
  vqc_rng r;
  vqc_rng_init(&r, 5, vqc_rng_stream_for(0, VQC_RNG_TEST, -1));
  for (int k = 0; k < 64; k++) {
    const int64_t i = vqc_rng_randint(&r, 0, M_ROWS);
    const int64_t c = vqc_rng_randint(&r, 0, CODES);
    double dot = 0.0, mag = 0.0;
    for (int d = 0; d < DIM; d++) {
      dot += (double)x[i * DIM + d] * (double)E[c * DIM + d];
      mag += fabs((double)x[i * DIM + d] * (double)E[c * DIM + d]);
    }
    const double got = out[i * CODES + c];
    if (fabs(got - dot) > DIM * FLT_EPSILON * mag) {
      fprintf(stderr, "bench_quantizers: sgemm (%lld, %lld) = %.9g, double "
              "dot product %.9g\n", (long long)i, (long long)c, got, dot);
      return 0;
    }
  }
  return 1;
}
#endif

/* ---- (2) FSQ */

static int validate_fsq(const vqc_fsq *q, const float *out,
                        const int32_t *indices, int64_t rows) {
  const int64_t n = rows < 4096 ? rows : 4096;
  int32_t *again = malloc((size_t)n * sizeof(int32_t));
  if (!again || vqc_fsq_codes_to_indices(q, out, n, again) != VQC_OK) {
    fprintf(stderr, "bench_quantizers: fsq codes_to_indices failed: %s\n",
            vqc_last_error());
    free(again);
    return 0;
  }
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) bad += again[i] != indices[i];
  for (int64_t j = 0; j < n * vqc_fsq_width(q); j++)
    bad += !(out[j] >= -1.0f && out[j] <= 1.0f);
  free(again);
  if (bad)
    fprintf(stderr, "bench_quantizers: fsq: %lld indices or codes wrong\n",
            (long long)bad);
  return bad == 0;
}

/* ---- (3) EMA */

/* With decay 0 the update copies this step's statistics: cluster_size must
 * be the bincount and embed_avg the row-order double sums rounded once. */
static int validate_ema(vqc_vq *vq, const float *x, const int64_t *idx) {
  int64_t *count = calloc(CODES, sizeof(int64_t));
  if (!count) return 0;
  for (int64_t i = 0; i < M_ROWS; i++) count[idx[i]]++;
  int64_t bad = 0;
  const float *cs = vqc_vq_cluster_size(vq);
  for (int c = 0; c < CODES; c++) bad += cs[c] != (float)count[c];
  const float *avg = vqc_vq_embed_avg(vq);
  const int64_t some[] = {idx[0], idx[M_ROWS / 2], idx[M_ROWS - 1]};
  for (int k = 0; k < 3; k++)
    for (int d = 0; d < DIM; d++) {
      double s = 0.0;
      for (int64_t i = 0; i < M_ROWS; i++)
        if (idx[i] == some[k]) s += x[i * DIM + d];
      bad += avg[some[k] * DIM + d] != (float)s;
    }
  free(count);
  if (bad)
    fprintf(stderr, "bench_quantizers: ema: %lld counts or sums wrong\n",
            (long long)bad);
  return bad == 0;
}

int main(int argc, char **argv) {
  if (argc > 1 &&
      (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    printf("usage: bench_quantizers [REPS]   (timed runs per kind, default 5, "
           "best and median reported)\n");
    return 0;
  }
  int reps = 5;
  if (argc > 1) {
    char *end = NULL;
    const long v = strtol(argv[1], &end, 10);
    if (end == argv[1] || *end != '\0' || v < 1 || v > MAX_REPS) {
      fprintf(stderr, "bench_quantizers: '%s' is not a count in 1..%d (try "
              "--help)\n", argv[1], MAX_REPS);
      return 2;
    }
    reps = (int)v;
  }
  __builtin_cpu_init();
  have_avx2 = __builtin_cpu_supports("avx2");
#ifdef VQC_HAVE_OPENBLAS
  use_openblas_best_core(argv);
  openblas_set_num_threads(1);
#endif

  const vq_kernel kbest = vq_kernel_best();
  const int have512 = vq_kernel_available(VQ_KERNEL_AVX512);
  const int have256 = vq_kernel_available(VQ_KERNEL_AVX2);
  printf("bench_quantizers: one thread, best (and median) of %d runs, "
         "kinds interleaved\n", reps);
  printf("cpu: avx2+fma %s, avx512f %s; nearest kernel: %s\n",
         have256 ? "yes" : "no", have512 ? "yes" : "no",
         vq_kernel_name(kbest));
#ifdef VQC_HAVE_OPENBLAS
  printf("OpenBLAS: %s; core %s; 1 thread\n", openblas_get_config(),
         openblas_get_corename());
#else
  printf("OpenBLAS: not found when this was configured; no sgemm baseline\n");
#endif

  /* ---- data: x (M, D) and E (C, D) uniform in [-1, 1) */
  const int64_t M = M_ROWS, D = DIM, C = CODES;
  float *x = aligned_alloc(64, (size_t)(M * D) * sizeof(float));
  float *E = aligned_alloc(64, (size_t)(C * D) * sizeof(float));
  int64_t *idx = malloc((size_t)M * sizeof(int64_t));
  int64_t *idx2 = malloc((size_t)M * sizeof(int64_t));
  float *prod = aligned_alloc(64, (size_t)(M * C) * sizeof(float)); /* sgemm */
  float *z = aligned_alloc(64, (size_t)FSQ_FLOATS * sizeof(float));
  float *zq = aligned_alloc(64, (size_t)FSQ_FLOATS * sizeof(float));
  int32_t *zi = malloc((size_t)(FSQ_FLOATS / 4) * sizeof(int32_t));
  if (!x || !E || !idx || !idx2 || !prod || !z || !zq || !zi) {
    fprintf(stderr, "bench_quantizers: out of memory\n");
    return 3;
  }
  vqc_rng r;
  vqc_rng_init(&r, 1, vqc_rng_stream_for(0, VQC_RNG_TEST, -1));
  vqc_rng_uniform(&r, x, M * D, -1.0f, 1.0f);
  vqc_rng_uniform(&r, E, C * D, -1.0f, 1.0f);
  vqc_rng_normal(&r, z, FSQ_FLOATS, 0.0f, 2.0f);
  memset(prod, 0, (size_t)(M * C) * sizeof(float));
  memset(zq, 0, (size_t)FSQ_FLOATS * sizeof(float));

  const int32_t levels[] = {8, 5, 5, 5};
  vqc_fsq fsq;
  vqc_vq_params p;
  vqc_vq_params_default(&p, D, C);
  p.decay = 0.0; /* see validate_ema */
  vqc_vq vq = {0};
  if (vqc_fsq_init(&fsq, levels, 4, 1, false, 1e-3) != VQC_OK ||
      vqc_vq_init(&vq, &p, E) != VQC_OK) {
    fprintf(stderr, "bench_quantizers: set-up failed: %s\n", vqc_last_error());
    return 3;
  }
  const int64_t fsq_rows = FSQ_FLOATS / 4;

  /* ---- validate */
  double ref_s = 0.0;
  if (vqc_vq_nearest(x, M, E, C, D, idx, NULL) != VQC_OK ||
      !validate_nearest(x, E, 0, 200, idx, &ref_s) ||
      !validate_nearest(x, E, M - 56, 56, idx, &ref_s))
    return 1;
  printf("validate: nearest (%s) == scalar reference on 256 rows, indices "
         "and distances bit for bit: ok\n", vq_kernel_name(kbest));
#ifdef VQC_HAVE_OPENBLAS
  sgemm_xet(x, E, prod);
  if (!validate_sgemm(x, E, prod)) return 1;
  printf("validate: sgemm == double dot products within D*eps*sum|x*e| at "
         "64 entries: ok\n");
#endif
  if (vqc_fsq_quantize(&fsq, z, fsq_rows, zq, zi) != VQC_OK ||
      !validate_fsq(&fsq, zq, zi, fsq_rows))
    return 1;
  printf("validate: fsq indices == codes_to_indices(codes), codes in "
         "[-1, 1]: ok\n");
  if (vqc_vq_ema_update(&vq, NULL, x, M, idx) != VQC_OK ||
      !validate_ema(&vq, x, idx))
    return 1;
  printf("validate: ema counts == bincount, sums == double sums rounded "
         "once: ok\n");

  /* ---- time */
  const size_t x_bytes = (size_t)(M * D) * sizeof(float);
  const size_t z_bytes = (size_t)FSQ_FLOATS * sizeof(float);
  const int show_avx2 = kbest == VQ_KERNEL_AVX512 && have256;
  n_reps = reps;
  for (int rep = 0; rep < reps; rep++) {
    stamp t;
#ifdef VQC_HAVE_OPENBLAS
    t = start();
    sgemm_xet(x, E, prod);
    stop(t, T_SGEMM, rep);
#endif
    t = start();
    if (vqc_vq_nearest(x, M, E, C, D, idx2, NULL) != VQC_OK) return 3;
    stop(t, T_NEAR, rep);
    if (show_avx2) {
      t = start();
      if (vq_nearest_with(VQ_KERNEL_AVX2, x, M, E, C, D, idx2, NULL)) return 3;
      stop(t, T_NEAR_AVX2, rep);
    }
    t = start();
    if (vqc_fsq_quantize(&fsq, z, fsq_rows, zq, zi) != VQC_OK) return 3;
    stop(t, T_FSQ, rep);
    t = start();
    memcpy(zq, z, z_bytes);
    stop(t, T_MEMCPY, rep);
    sink = ((const uint64_t *)(const void *)zq)[rep];
    t = start();
    if (vqc_vq_ema_update(&vq, NULL, x, M, idx) != VQC_OK) return 3;
    stop(t, T_EMA, rep);
    t = start();
    sink = read_sum(x, x_bytes);
    stop(t, T_READ, rep);
  }
  if (memcmp(idx, idx2, (size_t)M * sizeof(int64_t)) != 0) {
    fprintf(stderr, "bench_quantizers: the timed runs' indices changed\n");
    return 1;
  }

  /* ---- report */
  const double flops = 2.0 * (double)M * (double)C * (double)D;
  printf("\n(1) nearest code, M %lld x D %lld against C %lld codes; "
         "GFLOP/s = 2*M*C*D / seconds\n", (long long)M, (long long)D,
         (long long)C);
#ifdef VQC_HAVE_OPENBLAS
  char label[64];
  snprintf(label, sizeof label, "sgemm, OpenBLAS %s", openblas_get_corename());
  const double g_sgemm = report(label, T_SGEMM, flops, 1e9, "GFLOP/s");
#endif
  char klabel[64];
  snprintf(klabel, sizeof klabel, "nearest, %s (fused argmin)",
           vq_kernel_name(kbest));
  const double g_near = report(klabel, T_NEAR, flops, 1e9, "GFLOP/s");
  if (show_avx2) report("nearest, avx2", T_NEAR_AVX2, flops, 1e9, "GFLOP/s");
  printf("    %-74s  %8.2f GFLOP/s\n",
         "nearest, scalar reference (256 rows, at validation)",
         2.0 * 256 * (double)C * (double)D / ref_s / 1e9);
  if (have512 || have256) {
    double pk = 0.0; /* best of 3 */
    for (int k = 0; k < 3; k++) {
      const double g = have512 ? peak_avx512(10000000L) : peak_avx2(10000000L);
      if (g > pk) pk = g;
    }
    printf("    %-74s  %8.2f GFLOP/s; nearest = %.0f%% of it\n",
           have512 ? "FMA peak of this core (zmm FMAs, measured, best of 3)"
                   : "FMA peak of this core (ymm FMAs, measured, best of 3)",
           pk, 100.0 * g_near / pk);
  }
#ifdef VQC_HAVE_OPENBLAS
  const double ratio = g_near / g_sgemm;
  printf("    ratio = nearest GFLOP/s / sgemm GFLOP/s = %.2fx  (target >= "
         "1.0x: %s)\n", ratio, ratio >= 1.0 ? "met" : "NOT met");
#endif

  printf("\n(2) FSQ quantize, levels 8,5,5,5, %lld rows of 4 (%zu MiB of z)\n",
         (long long)fsq_rows, z_bytes >> 20);
  const double fsq_gbs =
      report("fsq quantize (codes + indices)", T_FSQ, (double)z_bytes, 1e9,
             "GB/s");
  const double cpy_gbs =
      report("memcpy of the same bytes", T_MEMCPY, (double)z_bytes, 1e9,
             "GB/s");
  printf("    fsq: %.1f M elements/s\n",
         fsq_gbs * 1e9 / (double)sizeof(float) / 1e6);
  printf("    ratio = fsq bytes/s / memcpy bytes/s = %.3f\n",
         fsq_gbs / cpy_gbs);

  printf("\n(3) EMA update (counts + sums of %lld rows of %lld, then C*D "
         "lerps), %zu MiB of x\n", (long long)M, (long long)D, x_bytes >> 20);
  const double ema_gbs = report("vqc_vq_ema_update", T_EMA, (double)x_bytes,
                                1e9, "GB/s");
  const double read_gbs =
      report(have_avx2 ? "plain read of x (avx2)" : "plain read of x",
             T_READ, (double)x_bytes, 1e9, "GB/s");
  printf("    ratio = ema bytes/s / read bytes/s = %.3f\n", ema_gbs / read_gbs);

  vqc_vq_free(&vq);
  free(x);
  free(E);
  free(idx);
  free(idx2);
  free(prod);
  free(z);
  free(zq);
  free(zi);
  return 0;
}
