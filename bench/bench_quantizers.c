/* bench_quantizers.c: how fast the quantizers' hot loops run on one core,
 * each against a baseline measured in the same run.
 *
 * Figures (--json: one object per figure, bench_stats.h; names in quotes):
 *   "nearest"   nearest-code search (vqc_vq_nearest: distances + argmin,
 *               fused; the best kernel here) at M = 65536 rows, D = 64,
 *               C = 1024 codes, against OpenBLAS sgemm of the same shape
 *               (X (M, D) times E^T (D, C)), one thread each. GFLOP/s =
 *               2*M*C*D / seconds for both (the dot products' multiply-
 *               adds, whatever the kernel does to find the answer; norms,
 *               sqrt and argmin are not counted). ratio = nearest / sgemm;
 *               target >= 1.3. Also, where a faster kernel is the default,
 *               "nearest_avx512" and "nearest_avx2" (the exact kernels, every
 *               multiply-add done), and "fma_peak", the core's measured FMA
 *               peak, so the figures can be read as a fraction of it.
 *               Where the default is the bfloat16 screen (avx512bf16,
 *               vq_nearest_screen.c: a cheaper approximate distance with a
 *               proven error bound, then the exact chains for the codes it
 *               cannot rule out), its speed depends on the data, so
 *   "nearest_dense" times it on the data it does worst on: the same rows
 *               against 1024 codes within 1e-6 of one another (every code
 *               a candidate for every row: the screen gives up after its
 *               first 96 rows and the exact kernel answers the rest).
 *   "nearest_256", "nearest_256_avx512"
 *               the same at the VQ forwards' D = 256 (M = 16384 rows, as
 *               many multiply-adds), uniform data, against sgemm of that
 *               shape.
 *   "fsq"       FSQ quantize with indices (vqc_fsq_quantize: the best kernel
 *               here, fsq_internal.h) at PyTorch's shape (64, 1024, 4),
 *               levels 8,5,5,5, against PyTorch's FSQ forward on the same z
 *               in a python3 child process (below). elem/s = 262144 / s;
 *               ratio = ours / PyTorch's; target >= 2.0. "fsq_scalar": the
 *               scalar reference kernel, same baseline.
 *   "fsq_memcpy" FSQ on 32 MiB of z against memcpy of the same bytes: GB/s
 *               of z, ratio = fsq / memcpy.
 *   "tanh"      the correctly rounded tanh (tanh_exact.h, best kernel) on 8M
 *               floats against glibc's tanhf loop: elem/s and ratio.
 *   "ema"       the EMA update (vqc_vq_ema_update: per-code counts and sums
 *               of the rows given their indices, then the lerps and the
 *               renormalisation, which touch only C*D values) against a plain
 *               read of x, each starting with x in memory only (caches
 *               evicted first, untimed): GB/s of x and ratio.
 *   "vq_ema", "vq_kmeans", "vq_expiry", "rvq_4_dropout"
 *               training forwards (vqc_vq_forward, vqc_rvq_forward) on
 *               (B, N, D) = (8, 1024, 256) against C = 1024 codes, against
 *               vector-quantize-pytorch's own forwards in train mode on the
 *               same data and state (below): rows/s = 8192 / s (the RVQ: 4
 *               forwards per repetition, 32768 rows); ratio = ours /
 *               PyTorch's, as for "fsq". vq_ema: nearest code, quantized
 *               rows, commitment loss, EMA update; vq_kmeans: the same
 *               after k-means init (10 iterations) on the batch; vq_expiry:
 *               vq_ema then dead-code expiry (threshold 2: about 300 codes
 *               replaced); rvq_4_dropout: ResidualVQ of 4 such layers with
 *               quantize dropout.
 *
 * PyTorch baseline. The bench writes z to a temporary file, starts
 * `python3 -c SCRIPT` (VQC_BENCH_PYTHON, else /usr/bin/python3, else
 * python3 on PATH: the first that imports torch), which runs
 * vector_quantize_pytorch's FSQ(levels).eval() when that package imports,
 * else the same torch operations in the library's 1.31.0 order (bound:
 * tanh(z + shift) * half_l - offset, round_ste, / half_width; then
 * codes_to_indices: * half_width + half_width, * basis, sum, round, int32;
 * the rearranges are views), with torch.set_num_threads(1). It writes its
 * codes and indices once (validated against ours below), then on each
 * "t K" line times K forwards with its thread's CPU clock and answers. The
 * temporary files are removed as soon as the child has read and written
 * them, and on every exit path. Without a python3 that has torch the
 * "fsq" figure is printed without a baseline, and the bench says why.
 *
 * Validation comes first and exits 1 on any failure: the nearest search
 * equals the scalar reference bit for bit on slices of rows (indices and
 * distances), and where the default kernel is not the exact AVX-512 one,
 * its indices equal that kernel's on every row (on both data sets); sgemm agrees with double-precision dot products within
 * D * FLT_EPSILON * sum|x_d e_d| (twice the textbook bound for a float32
 * sum of D products, whatever order the BLAS uses); FSQ's best kernel
 * equals the scalar kernel bit for bit (codes and indices) and its indices
 * equal codes_to_indices of its codes; PyTorch's codes and indices equal
 * ours except where its tanh (not correctly rounded) moves a value across
 * a rounding boundary: such elements must be one level apart and fewer
 * than 1 in 10^4 (their count is printed); the tanh kernels equal the
 * scalar definition bit for bit; the EMA counts equal a bincount of the
 * indices and the sums equal row-order double sums rounded once (decay 0,
 * so both are copied exactly).
 *
 * VQ and RVQ. The library's side is bench/jobs/vqpt_train.py (its header
 * has the protocol), run as a child by the python of VQC_BENCH_PYTHON (else
 * /usr/bin/python3, else python3) with the pinned vector-quantize-pytorch
 * 1.32.0 of scripts/torch-env.sh (build-py/thirdparty/vector-quantize-
 * pytorch-1.32.0 of this source tree, or the folder VQC_BENCH_VQPT names)
 * first on its PYTHONPATH. The figures are meant for torch 2.x (the venv
 * build-py/venv-torch2: set VQC_BENCH_PYTHON); Debian's torch 1.13 runs the
 * library too, and the baseline's label names the torch it ran on. Without
 * a python with torch, or when the library does not import, the four
 * figures are printed without a baseline and the bench says why.
 * Modules: VectorQuantize(256, 1024, decay 0.8, eps 1e-5) (+ kmeans_init,
 * kmeans_iters 10; + threshold_ema_dead_code 2) and ResidualVQ(4 layers,
 * quantize_dropout), the library's defaults otherwise (euclidean, one head,
 * no projection), one torch thread, x not requiring grad (our forward
 * builds no graph: no straight-through or rotation-trick output on either
 * side). Both sides start from the same fresh state (cluster_size 1,
 * embed_avg = the codebook; a zero, uninitialised one for k-means) and
 * every timed forward starts from it again (restoring it is not timed), so
 * k-means init runs in each vq_kmeans forward and each vq_expiry forward
 * replaces the same codes. The data is clustered as a quantizer's input is
 * once training has found structure (vq_setup): rows are codes plus noise,
 * so every row's nearest code wins by a wide margin (printed: about 10 in
 * distance, where float32 rounding moves a distance by about 1e-5) and
 * the two sides' different float32 summation orders cannot flip an index.
 * Validation (exit 1 on any failure) replays the library's random choices
 * on our side through vqc_draws, as the conformance harness does with the
 * golden fixtures (tests/fixtures/vqpt): the child records the rows its
 * sample_vectors draws (k-means initial rows, dead-code replacement rows)
 * and our draws->rows returns them; quantize dropout takes the seed as
 * rand_quantize_dropout_fixed_seed there and from draws->dropout_seed here,
 * and both derive the cutoff with CPython's random.Random(seed).randrange.
 * One training forward of each VQ and two consecutive ones of the RVQ
 * (seeds whose cutoffs are 3, all layers, then 1, carrying the state) are
 * compared:
 *   - indices exactly (the RVQ's -1 columns of dropped layers included);
 *   - quantized exactly where it is rows of the starting codebook (vq_ema,
 *     vq_expiry, RVQ step 0; the output sum over layers is the same float32
 *     adds in the same order), else within the tolerance below;
 *   - cluster_size within one ulp: the counts are exact integers in both,
 *     but torch 2.x's CPU lerp rounds once (a fused multiply-add:
 *     lerp(1, 10, 0.2) = 2.79999995) where ours (vqc_lerp_f32) follows
 *     torch 1.13's, which the golden fixtures were made with and which
 *     rounds the product first (2.80000019). An expiry decision cannot
 *     flip on it here: from a fresh state a count n gives 1 + 0.2 (n - 1),
 *     exactly 2.0 at n = 6 both ways;
 *   - losses, codebooks and embed_avg (and quantized after an update)
 *     within |ours - lib| <= 1e-5 max(1, |lib|), the conformance contract's
 *     tolerance (tests/fixtures/vqpt/README.md), for the same reason: the
 *     library sums the EMA statistics as a float32 one-hot matmul (BLAS
 *     blocks), k-means means with scatter_add_ and the loss with
 *     mse_loss's reduction, we sum in double and round once; the largest
 *     deviation, as a fraction of the tolerance, is printed.
 * For timing, the draws are each side's own (torch's RNG; vqc_rng), except
 * the dropout seeds: the same four (cutoffs 0, 1, 2, 3) on both sides in
 * every repetition, so both run the same 10 layer forwards (a drawn seed
 * would give each side another number of layers; drawing one costs
 * microseconds). Each "t" round-trip to the child times K forwards with
 * its thread's CPU clock.
 *
 * Timing: every kind runs on the calling thread (OpenBLAS set to one
 * thread computes in the caller; PyTorch's child too), so each run is timed
 * with the thread's CPU clock (CLOCK_THREAD_CPUTIME_ID; the child uses
 * time.thread_time): on a machine shared with other jobs, the time the
 * core spends on them does not count. After one untimed warm-up round,
 * REPS (default 7, at least 7) repetitions, the kinds interleaved within
 * each; every figure is the
 * median with min and max over the repetitions, and every ratio the median
 * of the per-repetition ratios (bench_stats.h). The (64, 1024, 4) FSQ runs
 * 10 times per repetition on both sides (one run is about a millisecond).
 * Data is warm (each buffer was just written or used): these loops are
 * meant to run on data the training step has just produced.
 *
 * OpenBLAS: forced to one thread with openblas_set_num_threads(1) (with
 * more threads the caller's CPU clock would not see the helpers' work, and
 * sgemm would look faster than it is). Debian's DYNAMIC_ARCH build picks
 * its kernel set from the CPU model and falls back to an older core on CPUs
 * it does not know, such as some virtual machines' ones ("Prescott", SSE
 * only, or "Sandybridge", AVX without FMA: 27 and 55 GFLOP/s here against
 * 70 for "Haswell"). Measuring against those would flatter us, so when
 * OPENBLAS_CORETYPE is unset and OpenBLAS chose another core than SkylakeX
 * (on CPUs with AVX-512) or Haswell (with AVX2 and FMA), the bench
 * re-executes itself with that core set, and says so (on stderr with
 * --json). That includes OpenBLAS 0.3.21's "Zen" choice on AMD Zen: on the
 * Zen 3 this was measured on, its sgemm ran at 62-65 GFLOP/s and
 * "Haswell"'s at 69-73 (one thread, this shape, 7 runs each). To measure
 * against another core, set OPENBLAS_CORETYPE yourself. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef VQC_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include "bench_stats.h"
#include "quant/fsq_internal.h"
#include "quant/vq_nearest.h"
#include "vqc/fsq.h"
#include "vqc/rng.h"
#include "vqc/rvq.h"
#include "vqc/vq.h"
#include "vqc/clock.h"

enum { M_ROWS = 65536, DIM = 64, CODES = 1024 };
/* The nearest search's shapes: the one above, and the VQ forwards' D 256
 * with as many multiply-adds (16384 rows). */
typedef struct near_dims {
  int64_t M, D, C;
} near_dims;
static const near_dims NEAR_64 = {M_ROWS, DIM, CODES};
static const near_dims NEAR_256 = {M_ROWS / 4, 4 * DIM, CODES};
#define FSQ_FLOATS ((int64_t)8 << 20) /* 32 MiB of z: fsq_memcpy and tanh */
enum { TB = 64, TN = 1024, TD = 4 };  /* PyTorch's shape (B, N, d) */
#define TORCH_ELEMS ((int64_t)TB * TN * TD)
#define FSQ_INNER 10 /* (64, 1024, 4) runs per repetition, both sides */
/* evict_caches: 128 MiB of the sgemm product (256 MiB), past any L3 here */
#define EVICT_BYTES ((size_t)128 << 20)
/* VQ and RVQ: (B, N, D) batches against C codes, Q RVQ layers */
enum { VB = 8, VN = 1024, VD = 256, VC = 1024, VQL = 4 };
#define V_ROWS ((int64_t)VB * VN)
#define VQ_TOL 1e-5  /* floats against the library: see "VQ and RVQ" */
#define RVQ_INNER 4  /* RVQ forwards per repetition: cutoffs 0, 1, 2, 3 */
enum { VK_EMA, VK_KMEANS, VK_EXPIRY, VK_RVQ, NVK }; /* the VQ/RVQ cases */
#define MAX_REPS 51 /* 50 repetitions and the warm-up's slot */
#define DEFAULT_REPS 7

static volatile uint64_t sink; /* keeps the read loops' results alive */
static int json;                /* --json: figures only on stdout */

/* ---- timings: CPU seconds of each kind in each repetition */

enum {
  T_SGEMM, T_NEAR, T_NEAR_AVX2, T_NEAR_AVX512, T_NEAR_DENSE, T_PEAK,
  T_SGEMM_256, T_NEAR_256, T_NEAR_256_AVX512, T_FSQ, T_FSQ_SCALAR, T_TORCH,
  T_FSQ_BIG, T_MEMCPY, T_TANH, T_TANHF, T_EMA, T_READ,
  T_VQ, T_VQ_LAST = T_VQ + NVK - 1,       /* ours, by case (VK_*) */
  T_VQPT, T_VQPT_LAST = T_VQPT + NVK - 1, /* the library's, by case */
  NT
};
static double t_cpu[NT][MAX_REPS];
static double peak_gflops[MAX_REPS];

/* Text-mode note (stderr with --json, so stdout stays JSON). */
static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfprintf(json ? stderr : stdout, fmt, ap);
  va_end(ap);
  fflush(json ? stderr : stdout);
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
  const double t0 = vqc_thread_cpu_s();
  for (long i = 0; i < iters; i++) {
    c0 = _mm512_fmadd_ps(c0, m, a); c1 = _mm512_fmadd_ps(c1, m, a);
    c2 = _mm512_fmadd_ps(c2, m, a); c3 = _mm512_fmadd_ps(c3, m, a);
    c4 = _mm512_fmadd_ps(c4, m, a); c5 = _mm512_fmadd_ps(c5, m, a);
    c6 = _mm512_fmadd_ps(c6, m, a); c7 = _mm512_fmadd_ps(c7, m, a);
    c8 = _mm512_fmadd_ps(c8, m, a); c9 = _mm512_fmadd_ps(c9, m, a);
    c10 = _mm512_fmadd_ps(c10, m, a); c11 = _mm512_fmadd_ps(c11, m, a);
  }
  const double t = vqc_thread_cpu_s() - t0;
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
  const double t0 = vqc_thread_cpu_s();
  for (long i = 0; i < iters; i++) {
    c0 = _mm256_fmadd_ps(c0, m, a); c1 = _mm256_fmadd_ps(c1, m, a);
    c2 = _mm256_fmadd_ps(c2, m, a); c3 = _mm256_fmadd_ps(c3, m, a);
    c4 = _mm256_fmadd_ps(c4, m, a); c5 = _mm256_fmadd_ps(c5, m, a);
    c6 = _mm256_fmadd_ps(c6, m, a); c7 = _mm256_fmadd_ps(c7, m, a);
    c8 = _mm256_fmadd_ps(c8, m, a); c9 = _mm256_fmadd_ps(c9, m, a);
    c10 = _mm256_fmadd_ps(c10, m, a); c11 = _mm256_fmadd_ps(c11, m, a);
  }
  const double t = vqc_thread_cpu_s() - t0;
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

/* Reads one word of every cache line of p[0, n), n past the last-level
 * cache, so that what was read before is out of every cache: the "ema"
 * figure and its "read" baseline each start so, with x in memory only.
 * (Timed one after the other without it, the read found part of x still in
 * L3 from the update just before, and the ratio favoured the read.) */
static void evict_caches(const void *p, size_t n) {
  const volatile uint64_t *w = p;
  uint64_t a = 0;
  for (size_t i = 0; i < n / 8; i += 8) a += w[i];
  sink = a;
}

/* ---- OpenBLAS */

#ifdef VQC_HAVE_OPENBLAS
/* See the header comment: re-executes with OPENBLAS_CORETYPE set when
 * OpenBLAS picked a core with narrower vectors than this CPU has. Returns
 * only when no re-execution is needed or exec failed. argv is the original
 * one (--json included). */
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
  /* Cores kept as they are: AVX-512 ones on AVX-512 CPUs, and on AVX2 CPUs
   * Haswell (not "zen": slower here, see the top) or an AVX-512 one. */
  static const char *const avx512_cores[] = {"skylakex", "cooperlake",
                                             "sapphirerapids", NULL};
  static const char *const avx2_cores[] = {"haswell", "skylakex",
                                           "cooperlake", "sapphirerapids",
                                           NULL};
  const char *const *ok = strcmp(want, "SkylakeX") == 0 ? avx512_cores
                                                          : avx2_cores;
  for (int i = 0; ok[i]; i++)
    if (strcasecmp(core, ok[i]) == 0) return;
  note("note: OpenBLAS chose its '%s' kernels for this CPU, which has %s; "
       "re-running with OPENBLAS_CORETYPE=%s so that the baseline is "
       "OpenBLAS's best sgemm here\n", core,
       strcmp(want, "SkylakeX") == 0 ? "AVX-512" : "AVX2 and FMA", want);
  setenv("OPENBLAS_CORETYPE", want, 1);
  execv("/proc/self/exe", argv);
  note("note: re-running failed; the baseline uses '%s'\n", core);
}
#endif

/* ---- (1) nearest code */

/* Compares the fast path with the scalar reference on rows [i0, i0 + n):
 * indices and distances bit for bit, and the full run's indices. Times the
 * reference as it goes (*ref_s). */
static int validate_nearest_on(near_dims sh, const float *x, const float *E,
                               int64_t i0, int64_t n, const int64_t *idx_full,
                               double *ref_s) {
  const int64_t D = sh.D, C = sh.C;
  int64_t *ia = malloc((size_t)n * sizeof(int64_t));
  int64_t *ib = malloc((size_t)n * sizeof(int64_t));
  float *da = malloc((size_t)(n * C) * sizeof(float));
  float *db = malloc((size_t)(n * C) * sizeof(float));
  int ok = ia && ib && da && db;
  if (ok) {
    const double t0 = vqc_thread_cpu_s();
    ok = vq_nearest_with(VQ_KERNEL_SCALAR, x + i0 * D, n, E, C, D, ia,
                         da) == VQC_OK;
    *ref_s += vqc_thread_cpu_s() - t0;
  }
  ok = ok && vqc_vq_nearest(x + i0 * D, n, E, C, D, ib, db) == VQC_OK;
  int64_t bad = 0;
  for (int64_t i = 0; ok && i < n; i++)
    bad += ia[i] != ib[i] || ia[i] != idx_full[i0 + i];
  for (int64_t j = 0; ok && j < n * C; j++)
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

/* The default kernel's indices idx (all M_ROWS rows) equal the exact
 * AVX-512 kernel's (which test_vq_nearest.c holds to the reference). */
static int same_as_exact(near_dims sh, const float *x, const float *E,
                         const int64_t *idx) {
  const int64_t M = sh.M, D = sh.D, C = sh.C;
  int64_t *want = malloc((size_t)M * sizeof(int64_t));
  if (!want || vq_nearest_with(VQ_KERNEL_AVX512, x, M, E, C, D,
                               want, NULL) != VQC_OK) {
    fprintf(stderr, "bench_quantizers: the avx512 kernel failed: %s\n",
            vqc_last_error());
    free(want);
    return 0;
  }
  int64_t bad = 0;
  for (int64_t i = 0; i < M; i++) bad += want[i] != idx[i];
  free(want);
  if (bad)
    fprintf(stderr, "bench_quantizers: %lld of %lld indices differ from the "
            "exact avx512 kernel's\n", (long long)bad, (long long)M);
  return bad == 0;
}

#ifdef VQC_HAVE_OPENBLAS
/* out (M, C) = x (M, D) E^T: the baseline's product. */
static void sgemm_xet(near_dims sh, const float *x, const float *E,
                      float *out) {
  const int64_t M = sh.M, D = sh.D, C = sh.C;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, C, D,
              1.0f, x, D, E, D, 0.0f, out, C);
}

static int validate_sgemm(near_dims sh, const float *x, const float *E,
                          const float *out) {
  const int64_t M = sh.M, D = sh.D, C = sh.C;
  vqc_rng r;
  vqc_rng_init(&r, 5, vqc_rng_stream_for(0, VQC_RNG_TEST, -1));
  for (int k = 0; k < 64; k++) {
    const int64_t i = vqc_rng_randint(&r, 0, M);
    const int64_t c = vqc_rng_randint(&r, 0, C);
    double dot = 0.0, mag = 0.0;
    for (int d = 0; d < D; d++) {
      dot += (double)x[i * D + d] * (double)E[c * D + d];
      mag += fabs((double)x[i * D + d] * (double)E[c * D + d]);
    }
    const double got = out[i * C + c];
    if (fabs(got - dot) > D * FLT_EPSILON * mag) {
      fprintf(stderr, "bench_quantizers: sgemm (%lld, %lld) = %.9g, double "
              "dot product %.9g\n", (long long)i, (long long)c, got, dot);
      return 0;
    }
  }
  return 1;
}
#endif

/* ---- (2) FSQ */

/* The best kernel's codes and indices equal the scalar kernel's bit for
 * bit, and its indices equal codes_to_indices of its codes. */
static int validate_fsq(const vqc_fsq *q, const float *z, int64_t rows,
                        const float *out, const int32_t *indices) {
  const int64_t n = rows < 8192 ? rows : 8192;
  const int w = vqc_fsq_width(q);
  float *ref = malloc((size_t)(n * w) * sizeof(float));
  int32_t *ref_idx = malloc((size_t)n * sizeof(int32_t));
  int32_t *again = malloc((size_t)n * sizeof(int32_t));
  int ok = ref && ref_idx && again &&
           fsq_quantize_with(FSQ_KERNEL_SCALAR, q, z, n, ref, ref_idx) ==
               VQC_OK &&
           vqc_fsq_codes_to_indices(q, out, n, again) == VQC_OK;
  if (!ok) {
    fprintf(stderr, "bench_quantizers: fsq validation failed: %s\n",
            vqc_last_error());
  } else {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++)
      bad += again[i] != indices[i] || ref_idx[i] != indices[i];
    bad += memcmp(ref, out, (size_t)(n * w) * sizeof(float)) != 0;
    if (bad) {
      fprintf(stderr, "bench_quantizers: fsq (%s): %lld indices or codes "
              "differ from the scalar kernel's\n",
              fsq_kernel_name(fsq_kernel_best()), (long long)bad);
      ok = 0;
    }
  }
  free(ref);
  free(ref_idx);
  free(again);
  return ok;
}

/* The tanh kernels equal the scalar definition on the timed input. */
static int validate_tanh(const float *x, size_t n, float *y) {
  const size_t m = n < (1u << 20) ? n : (1u << 20);
  float *ref = malloc(m * sizeof(float));
  if (!ref) return 0;
  fsq_tanh_with(FSQ_KERNEL_SCALAR, x, ref, m);
  fsq_tanh_with(fsq_kernel_best(), x, y, m);
  const int ok = memcmp(ref, y, m * sizeof(float)) == 0;
  if (!ok)
    fprintf(stderr, "bench_quantizers: tanh (%s) differs from the scalar "
            "definition\n", fsq_kernel_name(fsq_kernel_best()));
  free(ref);
  return ok;
}

/* ---- the PyTorch child (see "PyTorch baseline" at the top) */

static const char torch_script[] =
    "import sys, time\n"
    "try:\n"
    "    import torch\n"
    "except Exception as e:\n"
    "    print('notorch', repr(e).replace('\\n', ' '), flush=True)\n"
    "    sys.exit(0)\n"
    "torch.set_num_threads(1)\n"
    "zpath, outpath, idxpath = sys.argv[1:4]\n"
    "levels = [int(v) for v in sys.argv[4].split(',')]\n"
    "B, N = int(sys.argv[5]), int(sys.argv[6])\n"
    "d = len(levels)\n"
    "z = torch.from_file(zpath, shared=False, size=B * N * d,\n"
    "                    dtype=torch.float32).view(B, N, d)\n"
    "try:\n"
    "    from vector_quantize_pytorch import FSQ\n"
    "    fsq = FSQ(levels).eval()\n"
    "    impl = 'vector_quantize_pytorch'\n"
    "    def run():\n"
    "        return fsq(z)\n"
    "except Exception:\n"
    "    impl = 'torch_ops_of_vqpt_1.31.0'\n"
    "    L = torch.tensor(levels, dtype=torch.int32)\n"
    "    basis = torch.cumprod(torch.tensor([1] + levels[:-1]), dim=0,\n"
    "                          dtype=torch.int32)\n"
    "    def round_ste(x):\n"
    "        return x + (x.round() - x).detach()\n"
    "    def run():\n"
    "        zz = z.view(B, N, 1, d)\n"
    "        half_l = (L - 1) * (1 + 1e-3) / 2\n"
    "        offset = torch.where(L % 2 == 0, 0.5, 0.0)\n"
    "        shift = torch.atanh(offset / half_l)\n"
    "        bounded = torch.tanh(zz + shift) * half_l - offset\n"
    "        half_width = L // 2\n"
    "        codes = round_ste(bounded) / half_width\n"
    "        idx = ((codes * half_width + half_width) * basis).sum(dim=-1)\n"
    "        idx = idx.round().to(torch.int32)\n"
    "        return codes.view(B, N, d), idx.view(B, N)\n"
    "out, idx = run()\n"
    "out.contiguous().numpy().tofile(outpath)\n"
    "idx.contiguous().to(torch.int32).numpy().tofile(idxpath)\n"
    "for _ in range(3):\n"
    "    run()\n"
    "print('ready', impl, torch.__version__, flush=True)\n"
    "for line in sys.stdin:\n"
    "    w = line.split()\n"
    "    if not w or w[0] != 't':\n"
    "        break\n"
    "    c0 = time.thread_time()\n"
    "    for _ in range(int(w[1])):\n"
    "        run()\n"
    "    print(time.thread_time() - c0, flush=True)\n";

typedef struct torch_child {
  pid_t pid;
  FILE *to;   /* its stdin */
  int from;   /* its stdout */
  char impl[128], python[256];
} torch_child;

/* Temporary files of the child's exchange; removed by tmp_cleanup. */
static char tmp_path[3][64];

static void vq_tmp_cleanup(void);

static void tmp_cleanup(void) {
  vq_tmp_cleanup();
  for (int i = 0; i < 3; i++)
    if (tmp_path[i][0]) {
      unlink(tmp_path[i]);
      tmp_path[i][0] = '\0';
    }
}

static void on_signal(int sig) {
  tmp_cleanup();
  signal(sig, SIG_DFL);
  raise(sig);
}

static int make_tmp(int i) {
  const char *dir = getenv("TMPDIR");
  snprintf(tmp_path[i], sizeof tmp_path[i], "%s/vqc-bench-fsq-XXXXXX",
           dir && strlen(dir) < 32 ? dir : "/tmp");
  const int fd = mkstemp(tmp_path[i]);
  if (fd < 0) tmp_path[i][0] = '\0';
  return fd;
}

/* One line from fd into buf (without the newline), waiting until the
 * monotonic deadline. Returns 1, or 0 on EOF, error or time-out. */
static int read_line(int fd, char *buf, size_t size, double deadline) {
  size_t n = 0;
  while (n + 1 < size) {
    const double left = deadline - vqc_now_s();
    if (left <= 0) return 0;
    struct pollfd p = {fd, POLLIN, 0};
    const int r = poll(&p, 1, (int)(left * 1000) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return 0;
    char c;
    const ssize_t got = read(fd, &c, 1);
    if (got <= 0) return 0;
    if (c == '\n') break;
    buf[n++] = c;
  }
  buf[n] = '\0';
  return 1;
}

static void torch_stop(torch_child *c) {
  if (c->pid <= 0) return;
  if (c->to) {
    fputs("q\n", c->to);
    fclose(c->to);
    c->to = NULL;
  }
  if (c->from >= 0) close(c->from);
  c->from = -1;
  /* it leaves on "q" or EOF; give it 10 s, then end it */
  for (int i = 0; i < 1000; i++) {
    if (waitpid(c->pid, NULL, WNOHANG) == c->pid) {
      c->pid = 0;
      return;
    }
    usleep(10000);
  }
  kill(c->pid, SIGKILL);
  waitpid(c->pid, NULL, 0);
  c->pid = 0;
}

/* Starts args[0] (a python) with args as its argv, its stdin and stdout
 * piped to c, lib (when not "") in front of PYTHONPATH, and waits up to
 * answer_s seconds for its first line. 1 when that line is "ready IMPL"
 * (IMPL goes to c->impl); 0 with *why filled otherwise: no_answer when it
 * said nothing, else what it said ("noexec " and "novqpt " prefixes, the
 * protocol's refusals, left out). Shared by the FSQ and the VQ children. */
static int child_start(torch_child *c, char *const args[], const char *lib,
                       double answer_s, const char *no_answer, char *why,
                       size_t why_size) {
  int in[2], out[2];
  c->pid = 0;
  c->to = NULL;
  c->from = -1;
  if (pipe(in) != 0 || pipe(out) != 0) {
    snprintf(why, why_size, "pipe: %s", strerror(errno));
    return 0;
  }
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    snprintf(why, why_size, "fork: %s", strerror(errno));
    return 0;
  }
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[0]);
    close(in[1]);
    close(out[0]);
    close(out[1]);
    /* lib first on PYTHONPATH ("": none found, the python's own) */
    const char *old = getenv("PYTHONPATH");
    char *pp = malloc(strlen(lib) + (old ? strlen(old) : 0) + 2);
    if (pp && lib[0]) {
      const int more = old && *old;
      sprintf(pp, "%s%s%s", lib, more ? ":" : "", more ? old : "");
      setenv("PYTHONPATH", pp, 1);
    }
    execvp(args[0], args);
    dprintf(1, "noexec cannot run it: %s\n", strerror(errno));
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  c->pid = pid;
  c->to = fdopen(in[1], "w");
  c->from = out[0];
  snprintf(c->python, sizeof c->python, "%s", args[0]);
  char line[512];
  if (!c->to ||
      !read_line(c->from, line, sizeof line, vqc_now_s() + answer_s)) {
    snprintf(why, why_size, "%s", no_answer);
    torch_stop(c);
    return 0;
  }
  if (strncmp(line, "ready ", 6) != 0) {
    const char *said = line;
    if (strncmp(said, "noexec ", 7) == 0 || strncmp(said, "novqpt ", 7) == 0)
      said += 7;
    snprintf(why, why_size, "%.200s: %.300s", args[0], said);
    torch_stop(c);
    return 0;
  }
  snprintf(c->impl, sizeof c->impl, "%.120s", line + 6);
  return 1;
}

/* Starts the child with `python`; 1 when it answered "ready" (codes and
 * indices written to tmp_path[1], [2]), 0 with *why filled otherwise. */
static int torch_start(torch_child *c, const char *python, char *why,
                       size_t why_size) {
  char levels[] = "8,5,5,5", b[16], n[16], no_answer[600];
  snprintf(b, sizeof b, "%d", TB);
  snprintf(n, sizeof n, "%d", TN);
  snprintf(no_answer, sizeof no_answer, "%.500s: no answer (no python3 or "
           "it failed)", python);
  char *args[] = {(char *)python, "-c", (char *)torch_script, tmp_path[0],
                  tmp_path[1], tmp_path[2], levels, b, n, NULL};
  return child_start(c, args, "", 300.0, no_answer, why, why_size);
}

/* One timed batch of k forwards in the child: its CPU seconds, or -1. */
static double torch_time(torch_child *c, int k) {
  fprintf(c->to, "t %d\n", k);
  fflush(c->to);
  char line[128];
  if (!read_line(c->from, line, sizeof line, vqc_now_s() + 600.0)) return -1;
  char *end = NULL;
  const double s = strtod(line, &end);
  return end == line ? -1 : s;
}

/* PyTorch's codes and indices (in tmp_path[1], [2]) against ours: equal,
 * except elements one level apart (a tanh an ulp off at a boundary), fewer
 * than 1 in 10^4. */
static int validate_torch(const vqc_fsq *q, const float *codes,
                          const int32_t *indices, int64_t *n_diff) {
  const int64_t n = TORCH_ELEMS, groups = TORCH_ELEMS / TD;
  float *tc = malloc((size_t)n * sizeof(float));
  int32_t *ti = malloc((size_t)groups * sizeof(int32_t));
  FILE *fc = fopen(tmp_path[1], "rb"), *fi = fopen(tmp_path[2], "rb");
  int ok = tc && ti && fc && fi &&
           fread(tc, sizeof(float), (size_t)n, fc) == (size_t)n &&
           fread(ti, sizeof(int32_t), (size_t)groups, fi) == (size_t)groups;
  if (fc) fclose(fc);
  if (fi) fclose(fi);
  if (!ok) {
    fprintf(stderr, "bench_quantizers: cannot read PyTorch's codes and "
            "indices back\n");
  } else {
    int64_t diff = 0, far = 0;
    for (int64_t e = 0; e < n; e++) {
      if (tc[e] == codes[e]) continue; /* -0 == +0: same code */
      diff++;
      const float hw = q->half_width[e % TD];
      far += !(fabsf(tc[e] - codes[e]) * hw <= 1.0f + 1e-6f);
    }
    int64_t idiff = 0;
    for (int64_t g = 0; g < groups; g++) idiff += ti[g] != indices[g];
    *n_diff = diff;
    if (far || diff * 10000 > n || idiff > diff) {
      fprintf(stderr, "bench_quantizers: PyTorch's FSQ differs from ours: "
              "%lld codes (%lld more than one level apart), %lld indices\n",
              (long long)diff, (long long)far, (long long)idiff);
      ok = 0;
    }
  }
  free(tc);
  free(ti);
  return ok;
}

/* ---- (3) EMA */

/* With decay 0 the update copies this step's statistics: cluster_size must
 * be the bincount and embed_avg the sums in the order vq.h defines
 * (vqc_vq_batch_stats: each code's rows in row order, double sums over
 * chunks of VQC_VQ_STATS_CHUNK rows, the chunks added in order, rounded
 * once), written out again here. */
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
      double total = 0.0, chunk = 0.0;
      int64_t rows = 0;
      for (int64_t i = 0; i < M_ROWS; i++) {
        if (idx[i] != some[k]) continue;
        if (rows > 0 && rows % VQC_VQ_STATS_CHUNK == 0) {
          total += chunk;
          chunk = 0.0;
        }
        chunk += x[i * DIM + d];
        rows++;
      }
      bad += avg[some[k] * DIM + d] != (float)(total + chunk);
    }
  free(count);
  if (bad)
    fprintf(stderr, "bench_quantizers: ema: %lld counts or sums wrong\n",
            (long long)bad);
  return bad == 0;
}

/* ---- (6) VQ and RVQ training forwards against vector-quantize-pytorch
 *
 * See "VQ and RVQ" at the top. Each case keeps its fresh state (the
 * snapshot taken after set-up) and every timed forward starts from it, on
 * both sides: k-means init then runs in every timed forward, and expiry
 * replaces the same number of codes every time. */

static const char *const vk_child[NVK] = {"vq_ema", "vq_kmeans", "vq_expiry",
                                          "rvq"};
static const char *const vk_figure[NVK] = {"vq_ema", "vq_kmeans", "vq_expiry",
                                           "rvq_4_dropout"};

typedef struct vq_bench {
  float *e0, *x, *xe, *er, *xr; /* inputs, as vqpt_train.py names them */
  vqc_vq vq[3];                 /* VK_EMA, VK_KMEANS, VK_EXPIRY */
  vqc_rvq rvq;
  float *fresh[3 + VQL][3];     /* embed, cluster_size, embed_avg each */
  int64_t *idx;                 /* (V_ROWS, VQL) */
  float *q;                     /* (V_ROWS, VD) */
  float losses[VQL];
  int64_t seeds_validate[2];    /* RVQ validation: cutoffs 3, then 1 */
  int64_t seeds_time[RVQ_INNER]; /* RVQ timing: cutoffs 0, 1, 2, 3 */
} vq_bench;

/* The state arrays of codebook i (0..2: vq[i], 3..: RVQ layer i - 3). */
static vqc_vq *vq_codebook(vq_bench *b, int i) {
  return i < 3 ? &b->vq[i] : &b->rvq.layers[i - 3];
}

static float *vq_state(vqc_vq *v, int which) {
  return which == 0 ? vqc_vq_embed(v)
                    : which == 1 ? vqc_vq_cluster_size(v) : vqc_vq_embed_avg(v);
}

static size_t vq_state_floats(int which) {
  return which == 1 ? (size_t)VC : (size_t)VC * VD;
}

/* Back to the fresh state of case k (not timed). */
static void vq_restore(vq_bench *b, int k) {
  const int lo = k == VK_RVQ ? 3 : k, hi = k == VK_RVQ ? 3 + VQL : k + 1;
  for (int i = lo; i < hi; i++) {
    vqc_vq *v = vq_codebook(b, i);
    for (int w = 0; w < 3; w++)
      memcpy(vq_state(v, w), b->fresh[i][w],
             vq_state_floats(w) * sizeof(float));
    v->initted = !v->p.kmeans_init;
  }
}

/* Rows near given codes: row i = codes[a_i] + noise * normal, a_i uniform
 * in [0, used). */
static void vq_clustered(vqc_rng *r, float *x, const float *codes, int used,
                         float noise) {
  vqc_rng_normal(r, x, V_ROWS * VD, 0.0f, noise);
  for (int64_t i = 0; i < V_ROWS; i++) {
    const int64_t a = vqc_rng_randint(r, 0, used);
    for (int d = 0; d < VD; d++) x[i * VD + d] += codes[a * VD + d];
  }
}

/* Inputs, codebooks and fresh states. Returns 0 on failure (message
 * printed). The data: e0 normal(0, 1); x (vq_ema, vq_kmeans) rows near
 * e0's codes, noise 0.5; xe (vq_expiry) the same near e0's first 3C/4
 * codes, so that the other C/4 (and the first ones that get fewer than 6
 * rows) expire; the RVQ's layer l codebook normal(0, 2^-l) and xr rows
 * sum_l er[l][a_il] + normal(0, 0.05): each layer has structure to find, as
 * a trained RVQ's residuals do. Every row's nearest code wins by far more
 * than float32 rounding moves a distance (see the validation note). */
static int vq_setup(vq_bench *b) {
  const size_t xb = (size_t)V_ROWS * VD * sizeof(float),
               eb = (size_t)VC * VD * sizeof(float);
  b->e0 = malloc(eb);
  b->er = malloc(VQL * eb);
  b->x = malloc(xb);
  b->xe = malloc(xb);
  b->xr = malloc(xb);
  b->idx = malloc((size_t)V_ROWS * VQL * sizeof(int64_t));
  b->q = malloc(xb);
  if (!b->e0 || !b->er || !b->x || !b->xe || !b->xr || !b->idx || !b->q) {
    fprintf(stderr, "bench_quantizers: out of memory\n");
    return 0;
  }
  vqc_rng r;
  vqc_rng_init(&r, 6, vqc_rng_stream_for(0, VQC_RNG_TEST, -1));
  vqc_rng_normal(&r, b->e0, VC * VD, 0.0f, 1.0f);
  vq_clustered(&r, b->x, b->e0, VC, 0.5f);
  vq_clustered(&r, b->xe, b->e0, 3 * VC / 4, 0.5f);
  vqc_rng_normal(&r, b->xr, V_ROWS * VD, 0.0f, 0.05f);
  for (int l = 0; l < VQL; l++) {
    float *E = b->er + (size_t)l * VC * VD;
    vqc_rng_normal(&r, E, VC * VD, 0.0f, ldexpf(1.0f, -l));
    for (int64_t i = 0; i < V_ROWS; i++) {
      const int64_t a = vqc_rng_randint(&r, 0, VC);
      for (int d = 0; d < VD; d++) b->xr[i * VD + d] += E[a * VD + d];
    }
  }

  vqc_vq_params p;
  vqc_vq_params_default(&p, VD, VC); /* decay 0.8, eps 1e-5, weight 1 */
  vqc_status s = vqc_vq_init(&b->vq[VK_EMA], &p, b->e0);
  vqc_vq_params pk = p;
  pk.kmeans_init = true;
  pk.kmeans_iters = 10;
  if (s == VQC_OK) s = vqc_vq_init(&b->vq[VK_KMEANS], &pk, NULL);
  vqc_vq_params pe = p;
  pe.threshold_ema_dead_code = 2.0; /* reset_cluster_size: the same */
  if (s == VQC_OK) s = vqc_vq_init(&b->vq[VK_EXPIRY], &pe, b->e0);
  vqc_rvq_params pr;
  vqc_rvq_params_default(&pr, VQL, VD, VC);
  pr.quantize_dropout = true;
  if (s == VQC_OK) s = vqc_rvq_init(&b->rvq, &pr, b->er);
  if (s != VQC_OK) {
    fprintf(stderr, "bench_quantizers: VQ set-up failed: %s\n",
            vqc_last_error());
    return 0;
  }
  for (int i = 0; i < 3 + VQL; i++)
    for (int w = 0; w < 3; w++) {
      const size_t n = vq_state_floats(w) * sizeof(float);
      if (!(b->fresh[i][w] = malloc(n))) {
        fprintf(stderr, "bench_quantizers: out of memory\n");
        return 0;
      }
      memcpy(b->fresh[i][w], vq_state(vq_codebook(b, i), w), n);
    }
  /* Dropout seeds whose cutoff (CPython's random.Random(seed).randrange(0,
   * Q), as both sides derive it) is 3 then 1 for the validation and 0..3
   * for the timed forwards. */
  int64_t by_cutoff[VQL] = {-1, -1, -1, -1};
  for (int64_t seed = 1000, left = VQL; left > 0; seed++) {
    const int c = vqc_dropout_cutoff_from_seed(seed, 0, VQL - 1);
    if (by_cutoff[c] < 0) {
      by_cutoff[c] = seed;
      left--;
    }
  }
  b->seeds_validate[0] = by_cutoff[VQL - 1];
  b->seeds_validate[1] = by_cutoff[1];
  for (int j = 0; j < RVQ_INNER; j++) b->seeds_time[j] = by_cutoff[j % VQL];
  return 1;
}

static void vq_free_bench(vq_bench *b) {
  for (int k = 0; k < 3; k++) vqc_vq_free(&b->vq[k]);
  for (int i = 0; i < 3 + VQL; i++)
    for (int w = 0; w < 3; w++) free(b->fresh[i][w]);
  vqc_rvq_free(&b->rvq);
  free(b->e0);
  free(b->er);
  free(b->x);
  free(b->xe);
  free(b->xr);
  free(b->idx);
  free(b->q);
}

/* The library's recorded draws (validation) or fixed dropout seeds
 * (timing), served through vqc_draws. */
typedef struct vq_replay {
  vqc_rng_purpose purpose; /* of the recorded rows */
  const int64_t *rows;
  int64_t nrows;
  const int64_t *seeds;    /* dropout seed by ctx step */
  int nseeds;
} vq_replay;

static vqc_status replay_rows(void *user, vqc_draw_at at, int64_t n, int64_t k,
                              int64_t *rows) {
  const vq_replay *rp = user;
  if (!rp->rows || at.purpose != rp->purpose || k != rp->nrows)
    return vqc_error(VQC_ESHAPE, "we draw %lld %s rows, the library drew "
                     "%lld", (long long)k,
                     at.purpose == VQC_RNG_KMEANS ? "k-means initial"
                                                  : "dead-code replacement",
                     rp->rows && at.purpose == rp->purpose
                         ? (long long)rp->nrows : 0LL);
  for (int64_t j = 0; j < k; j++) {
    if (rp->rows[j] < 0 || rp->rows[j] >= n)
      return vqc_error(VQC_ESHAPE, "the library's row %lld is not in a batch "
                       "of %lld", (long long)rp->rows[j], (long long)n);
    rows[j] = rp->rows[j];
  }
  return VQC_OK;
}

static vqc_status replay_seed(void *user, vqc_draw_at at, int64_t *seed) {
  const vq_replay *rp = user;
  if (at.step >= (uint64_t)rp->nseeds)
    return vqc_error(VQC_EINVAL, "no dropout seed for step %llu",
                     (unsigned long long)at.step);
  *seed = rp->seeds[at.step];
  return VQC_OK;
}

/* One C forward of case k on its batch (state as it is); RVQ with the
 * dropout seed seeds[step]. *cutoff: the RVQ's last layer that ran. */
static vqc_status vq_forward_case(vq_bench *b, int k, const vq_replay *rp,
                                  uint64_t step, int *cutoff) {
  const vqc_draws dr = {(void *)rp, replay_rows, NULL, replay_seed, NULL};
  const vqc_vq_ctx ctx = {NULL, step, &dr, 0};
  if (k == VK_RVQ)
    return vqc_rvq_forward(&b->rvq, &ctx, b->xr, V_ROWS, true, b->idx, b->q,
                           b->losses, cutoff);
  const float *x = k == VK_EXPIRY ? b->xe : b->x;
  /* Without recorded rows the default draws run (timing). */
  return vqc_vq_forward(&b->vq[k], rp && rp->rows ? &ctx : NULL, x, V_ROWS,
                        true, b->idx, b->q, &b->losses[0]);
}

/* CPU seconds of one repetition of case k: RVQ_INNER forwards for the RVQ
 * (cutoffs 0..3), one for a VQ, each from the fresh state; -1 on failure. */
static double vq_time_case(vq_bench *b, int k) {
  const int inner = k == VK_RVQ ? RVQ_INNER : 1;
  double total = 0.0;
  for (int j = 0; j < inner; j++) {
    vq_restore(b, k);
    const vq_replay rp = {.seeds = b->seeds_time + j, .nseeds = 1};
    int cutoff = -1;
    const double t = vqc_thread_cpu_s();
    const vqc_status s = vq_forward_case(b, k, k == VK_RVQ ? &rp : NULL, 0,
                                         &cutoff);
    total += vqc_thread_cpu_s() - t;
    if (s != VQC_OK || (k == VK_RVQ && cutoff != j % VQL)) {
      fprintf(stderr, "bench_quantizers: %s forward failed: %s\n",
              vk_figure[k], s ? vqc_last_error() : "unexpected cutoff");
      return -1;
    }
  }
  return total;
}

/* ---- the library's side: a child running bench/jobs/vqpt_train.py */

/* The inputs and outputs the child and the bench exchange (vqpt_train.py),
 * all in one temporary directory, removed by tmp_cleanup. */
static const char *const vq_files[] = {
    "e0", "x", "xe", "er", "xr",
    "out_vq_ema_indices", "out_vq_ema_quantized", "out_vq_ema_loss",
    "out_vq_ema_embed", "out_vq_ema_cluster_size", "out_vq_ema_embed_avg",
    "out_vq_kmeans_indices", "out_vq_kmeans_quantized", "out_vq_kmeans_loss",
    "out_vq_kmeans_embed", "out_vq_kmeans_cluster_size",
    "out_vq_kmeans_embed_avg", "out_vq_kmeans_rows",
    "out_vq_expiry_indices", "out_vq_expiry_quantized", "out_vq_expiry_loss",
    "out_vq_expiry_embed", "out_vq_expiry_cluster_size",
    "out_vq_expiry_embed_avg", "out_vq_expiry_rows",
    "out_rvq_indices_0", "out_rvq_quantized_0", "out_rvq_losses_0",
    "out_rvq_embed_0", "out_rvq_cluster_size_0", "out_rvq_embed_avg_0",
    "out_rvq_indices_1", "out_rvq_quantized_1", "out_rvq_losses_1",
    "out_rvq_embed_1", "out_rvq_cluster_size_1", "out_rvq_embed_avg_1"};
#define N_VQ_FILES (sizeof vq_files / sizeof vq_files[0])
static char vq_dir[64];
static char vq_paths[N_VQ_FILES][128]; /* filled when vq_dir is made */

static void vq_tmp_cleanup(void) {
  if (!vq_dir[0]) return;
  for (size_t i = 0; i < N_VQ_FILES; i++) unlink(vq_paths[i]);
  rmdir(vq_dir);
  vq_dir[0] = '\0';
}

static int vq_write(const char *name, const float *v, size_t n) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s.bin", vq_dir, name);
  FILE *f = fopen(path, "wb");
  const int ok = f && fwrite(v, sizeof(float), n, f) == n;
  return (f ? fclose(f) == 0 : 0) && ok;
}

/* Reads DIR/out_NAME.bin: exactly n elements of `size` bytes, or, n < 0,
 * any whole number of them (*got). NULL (and a message) otherwise. */
static void *vq_read(const char *name, int64_t n, size_t size, int64_t *got) {
  char path[128];
  snprintf(path, sizeof path, "%s/out_%s.bin", vq_dir, name);
  FILE *f = fopen(path, "rb");
  void *buf = NULL;
  long bytes = -1;
  if (f && fseek(f, 0, SEEK_END) == 0) bytes = ftell(f);
  const int whole = bytes >= 0 && bytes % (long)size == 0 &&
                    (n < 0 || bytes == n * (long)size);
  if (whole && f && fseek(f, 0, SEEK_SET) == 0) {
    buf = malloc(bytes > 0 ? (size_t)bytes : 1);
    if (buf && fread(buf, 1, (size_t)bytes, f) != (size_t)bytes) {
      free(buf);
      buf = NULL;
    }
  }
  if (f) fclose(f);
  if (!buf) {
    fprintf(stderr, "bench_quantizers: cannot read the library's %s (%ld "
            "bytes)\n", name, bytes);
    return NULL;
  }
  if (got) *got = bytes / (long)size;
  return buf;
}

/* Starts the child: `python` with the helper script and the library folder
 * in front of PYTHONPATH. 1 when it answered "ready" (its results are in
 * vq_dir), 0 with *why filled otherwise. */
static int vq_child_start(torch_child *c, const char *python,
                          const char *script, const char *lib,
                          const vq_bench *b, char *why, size_t why_size) {
  char dims[5][16], sv[48], st[24 * RVQ_INNER], no_answer[900];
  const long long dv[5] = {VB, VN, VD, VC, VQL};
  for (int i = 0; i < 5; i++) snprintf(dims[i], sizeof dims[i], "%lld", dv[i]);
  snprintf(sv, sizeof sv, "%lld,%lld", (long long)b->seeds_validate[0],
           (long long)b->seeds_validate[1]);
  size_t used = 0;
  for (int j = 0; j < RVQ_INNER; j++)
    used += (size_t)snprintf(st + used, sizeof st - used, "%s%lld",
                             j ? "," : "", (long long)b->seeds_time[j]);
  snprintf(no_answer, sizeof no_answer, "%.400s %.400s: no answer (it "
           "failed: see above)", python, script);
  char *args[] = {(char *)python, (char *)script, vq_dir, dims[0], dims[1],
                  dims[2], dims[3], dims[4], sv, st, NULL};
  /* the import and the validation forwards (k-means: 11 searches) */
  return child_start(c, args, lib, 900.0, no_answer, why, why_size);
}

/* One timed batch of case k in the child (as vq_time_case): seconds, or -1. */
static double vq_child_time(torch_child *c, int k) {
  fprintf(c->to, "t %s %d\n", vk_child[k], k == VK_RVQ ? RVQ_INNER : 1);
  fflush(c->to);
  char line[128];
  if (!read_line(c->from, line, sizeof line, vqc_now_s() + 600.0)) return -1;
  char *end = NULL;
  const double s = strtod(line, &end);
  return end == line ? -1 : s;
}

/* ---- validation against the library's outputs */

typedef struct vq_check {
  const char *what; /* "vq_ema", "rvq step 1" */
  int ok;
  double worst;     /* max |ours - lib| / (VQ_TOL max(1, |lib|)) */
  int64_t ulp_diff; /* cluster_size entries one ulp apart */
} vq_check;

static void check_i64(vq_check *k, const char *name, const int64_t *ours,
                      const int64_t *lib, int64_t n) {
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < n; i++)
    if (ours[i] != lib[i] && bad++ == 0) first = i;
  if (bad) {
    fprintf(stderr, "bench_quantizers: %s: %s: %lld of %lld differ from the "
            "library's (first [%lld]: ours %lld, library %lld)\n", k->what,
            name, (long long)bad, (long long)n, (long long)first,
            (long long)ours[first], (long long)lib[first]);
    k->ok = 0;
  }
}

/* How check_f32 compares: see "VQ and RVQ" at the top for why. */
enum { CMP_EXACT, CMP_ULP, CMP_TOL };

/* The float's position on the number line, in ulps (monotonic). */
static int64_t f32_ord(float f) {
  int32_t i;
  memcpy(&i, &f, sizeof i);
  return i < 0 ? -(int64_t)(i & 0x7fffffff) : (int64_t)i;
}

/* CMP_EXACT: equal as floats (+0 == -0); CMP_ULP: at most one ulp apart;
 * CMP_TOL: within VQ_TOL max(1, |lib|), the largest ratio kept in worst. */
static void check_f32(vq_check *k, const char *name, const float *ours,
                      const float *lib, int64_t n, int how) {
  int64_t bad = 0, first = -1, ulp = 0;
  for (int64_t i = 0; i < n; i++) {
    const double o = ours[i], l = lib[i];
    int fail;
    if (how == CMP_TOL) {
      const double r = fabs(o - l) / (VQ_TOL * fmax(1.0, fabs(l)));
      if (r > k->worst) k->worst = r;
      fail = !(r <= 1.0);
    } else if (how == CMP_ULP) {
      const int64_t d = f32_ord(ours[i]) - f32_ord(lib[i]);
      ulp += d != 0;
      fail = isnan(o) || isnan(l) || d > 1 || d < -1;
    } else {
      fail = !(o == l);
    }
    if (fail && bad++ == 0) first = i;
  }
  if (how == CMP_ULP && ulp > k->ulp_diff) k->ulp_diff = ulp;
  if (bad) {
    static const char *const how_name[] = {
        "(compared exactly)", "by more than one ulp",
        "by more than 1e-5 max(1, |v|)"};
    fprintf(stderr, "bench_quantizers: %s: %s: %lld of %lld differ from the "
            "library's %s (first [%lld]: ours %.9g, library %.9g)\n", k->what,
            name, (long long)bad, (long long)n, how_name[how],
            (long long)first, (double)ours[first], (double)lib[first]);
    k->ok = 0;
  }
}

/* Our state after the forward (codebooks lo..hi-1 stacked) against the
 * library's out_<prefix>{embed,cluster_size,embed_avg}<suffix>. */
static void check_state(vq_check *k, vq_bench *b, int lo, int hi,
                        const char *prefix, const char *suffix) {
  static const char *const names[3] = {"embed", "cluster_size", "embed_avg"};
  for (int w = 0; w < 3 && k->ok; w++) {
    char name[64];
    snprintf(name, sizeof name, "%s%s%s", prefix, names[w], suffix);
    const size_t per = vq_state_floats(w);
    const int64_t n = (int64_t)per * (hi - lo);
    float *lib = vq_read(name, n, sizeof(float), NULL);
    float *ours = malloc((size_t)n * sizeof(float));
    if (!lib || !ours) {
      k->ok = 0;
    } else {
      for (int i = lo; i < hi; i++)
        memcpy(ours + (size_t)(i - lo) * per, vq_state(vq_codebook(b, i), w),
               per * sizeof(float));
      /* cluster_size: counts (exact in both) lerped with the same weight,
       * but torch 2.x's lerp rounds once (see the top): one ulp; the others
       * hold float sums in another order: the tolerance. */
      check_f32(k, names[w], ours, lib, n, w == 1 ? CMP_ULP : CMP_TOL);
    }
    free(lib);
    free(ours);
  }
}

/* The forward's outputs against the library's out_<prefix>... files. */
static void check_outputs(vq_check *k, vq_bench *b, const char *prefix,
                          const char *suffix, int q, int exact_quantized) {
  char name[64];
  snprintf(name, sizeof name, "%sindices%s", prefix, suffix);
  int64_t *li = vq_read(name, V_ROWS * q, sizeof(int64_t), NULL);
  snprintf(name, sizeof name, "%squantized%s", prefix, suffix);
  float *lq = vq_read(name, V_ROWS * VD, sizeof(float), NULL);
  snprintf(name, sizeof name, "%s%s%s", prefix, q > 1 ? "losses" : "loss",
           suffix);
  float *ll = vq_read(name, q, sizeof(float), NULL);
  if (!li || !lq || !ll) {
    k->ok = 0;
  } else {
    check_i64(k, "indices", b->idx, li, V_ROWS * q);
    check_f32(k, "quantized", b->q, lq, V_ROWS * VD,
              exact_quantized ? CMP_EXACT : CMP_TOL);
    check_f32(k, q > 1 ? "losses" : "loss", b->losses, ll, q, CMP_TOL);
  }
  free(li);
  free(lq);
  free(ll);
}

/* Runs our side of the child's validation forwards and compares. Returns 1
 * when everything agrees; *worst receives the largest float deviation
 * relative to the tolerance, *ulps the cluster_size entries one ulp apart,
 * *expired the codes replaced in vq_expiry. */
static int vq_validate(vq_bench *b, double *worst, int64_t *ulps,
                       int64_t *expired) {
  *worst = 0.0;
  *ulps = 0;
  int ok = 1;
  for (int k = 0; k < 3 && ok; k++) {
    vq_check c = {vk_child[k], 1, 0.0, 0};
    vq_replay rp = {.purpose = k == VK_KMEANS ? VQC_RNG_KMEANS
                                              : VQC_RNG_DEAD_CODE};
    int64_t *rows = NULL;
    if (k != VK_EMA) {
      char name[64];
      snprintf(name, sizeof name, "%s_rows", vk_child[k]);
      rows = vq_read(name, -1, sizeof(int64_t), &rp.nrows);
      if (!rows) c.ok = 0;
      rp.rows = rows;
      if (k == VK_EXPIRY) *expired = rp.nrows;
    }
    vq_restore(b, k);
    if (c.ok && vq_forward_case(b, k, &rp, 0, NULL) != VQC_OK) {
      fprintf(stderr, "bench_quantizers: %s: our forward failed: %s\n",
              c.what, vqc_last_error());
      c.ok = 0;
    }
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%s_", vk_child[k]);
    /* quantized is E[indices] before the update: exact copies of the same
     * rows, except after k-means, whose means are float sums */
    if (c.ok) check_outputs(&c, b, prefix, "", 1, k != VK_KMEANS);
    if (c.ok) check_state(&c, b, k, k + 1, prefix, "");
    free(rows);
    vq_restore(b, k);
    ok = c.ok;
    if (c.worst > *worst) *worst = c.worst;
    *ulps += c.ulp_diff;
  }
  vq_restore(b, VK_RVQ);
  for (int s = 0; s < 2 && ok; s++) {
    char what[32], suffix[8];
    snprintf(what, sizeof what, "rvq step %d", s);
    snprintf(suffix, sizeof suffix, "_%d", s);
    vq_check c = {what, 1, 0.0, 0};
    const vq_replay rp = {.seeds = b->seeds_validate, .nseeds = 2};
    int cutoff = -1;
    if (vq_forward_case(b, VK_RVQ, &rp, (uint64_t)s, &cutoff) != VQC_OK) {
      fprintf(stderr, "bench_quantizers: %s: our forward failed: %s\n", what,
              vqc_last_error());
      c.ok = 0;
    }
    /* the -1 columns of the indices are the cutoff: compared with them;
     * step 1 quantizes with the codebooks step 0 updated (float sums) */
    if (c.ok) check_outputs(&c, b, "rvq_", suffix, VQL, s == 0);
    if (c.ok) check_state(&c, b, 3, 3 + VQL, "rvq_", suffix);
    ok = c.ok;
    if (c.worst > *worst) *worst = c.worst;
    *ulps += c.ulp_diff;
  }
  vq_restore(b, VK_RVQ);
  return ok;
}

/* The smallest gap, over the rows of x, between the distance to the
 * nearest code of E and to the second nearest (ours, float32). */
static double vq_margin(const float *x, const float *E, int64_t *idx,
                        float *negd) {
  double m = INFINITY;
  const int64_t step = 2048; /* rows per call: negd holds (step, VC) */
  for (int64_t i0 = 0; i0 < V_ROWS; i0 += step) {
    if (vqc_vq_nearest(x + i0 * VD, step, E, VC, VD, idx, negd) != VQC_OK)
      return NAN;
    for (int64_t i = 0; i < step; i++) {
      float b1 = -INFINITY, b2 = -INFINITY;
      for (int c = 0; c < VC; c++) {
        const float v = negd[i * VC + c];
        if (v > b1) {
          b2 = b1;
          b1 = v;
        } else if (v > b2) {
          b2 = v;
        }
      }
      if ((double)b1 - b2 < m) m = (double)b1 - b2;
    }
  }
  return m;
}

/* ---- report */

/* rate[rep] = work / t_cpu[kind][rep] / scale */
static bench_summary rates(int kind, double work, double scale, int reps,
                           double *rate) {
  for (int r = 0; r < reps; r++) rate[r] = work / t_cpu[kind][r] / scale;
  return bench_summarize(rate, reps);
}

/* One figure: text line (or JSON object), with its baseline and ratio when
 * base_kind >= 0. */
static void figure(const char *name, const char *label, const char *shape,
                   int kind, double work, double scale, const char *unit,
                   int base_kind, const char *base_name,
                   const char *base_label, int reps) {
  double v[MAX_REPS], b[MAX_REPS];
  bench_figure f = {.bench = "bench_quantizers", .figure = name,
                    .shape = shape, .unit = unit};
  f.value = rates(kind, work, scale, reps, v);
  if (base_kind >= 0) {
    f.baseline_name = base_name;
    f.baseline = rates(base_kind, work, scale, reps, b);
    f.ratio = bench_ratios(v, b, reps);
  }
  if (json) {
    bench_print_figure(stdout, &f);
    return;
  }
  printf("    %-34s %9.4g %s  [%.4g .. %.4g]\n", label, f.value.median, unit,
         f.value.min, f.value.max);
  if (base_kind >= 0) {
    printf("    %-34s %9.4g %s  [%.4g .. %.4g]\n", base_label,
           f.baseline.median, unit, f.baseline.min, f.baseline.max);
    printf("    ratio = %s / %s: %.3fx  [%.3f .. %.3f]\n", name, base_name,
           f.ratio.median, f.ratio.min, f.ratio.max);
  }
}

int main(int argc, char **argv) {
  for (int a = 1; a < argc; a++) json |= strcmp(argv[a], "--json") == 0;
  __builtin_cpu_init();
  have_avx2 = __builtin_cpu_supports("avx2");
#ifdef VQC_HAVE_OPENBLAS
  use_openblas_best_core(argv); /* before argv loses --json */
  openblas_set_num_threads(1);
#endif
  bench_json_requested(&argc, argv);
  if (argc > 1 &&
      (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    printf("usage: bench_quantizers [REPS] [--json]\n"
           "  REPS    interleaved repetitions, default %d, %d..%d; figures "
           "are medians [min .. max]\n"
           "  --json  one JSON object per figure instead of the text\n"
           "  VQC_BENCH_PYTHON  python3 with torch for the FSQ baseline "
           "and with torch 2.x for the VQ/RVQ one (default /usr/bin/python3, "
           "then python3)\n"
           "  VQC_BENCH_VQPT    folder put first on the VQ/RVQ child's "
           "PYTHONPATH (default build-py/thirdparty/"
           "vector-quantize-pytorch-1.32.0 of the source tree)\n",
           DEFAULT_REPS, BENCH_MIN_REPS, MAX_REPS - 1);
    return 0;
  }
  int reps = DEFAULT_REPS;
  if (argc > 1) {
    char *end = NULL;
    const long v = strtol(argv[1], &end, 10);
    if (end == argv[1] || *end != '\0' || v < BENCH_MIN_REPS || v > MAX_REPS - 1) {
      fprintf(stderr, "bench_quantizers: '%s' is not a repetition count in "
              "%d..%d (try --help)\n", argv[1], BENCH_MIN_REPS, MAX_REPS - 1);
      return 2;
    }
    reps = (int)v;
  }
  if (argc > 2) {
    fprintf(stderr, "bench_quantizers: too many arguments (try --help)\n");
    return 2;
  }
  atexit(tmp_cleanup);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  signal(SIGPIPE, SIG_IGN); /* a child that died answers EOF instead */

  const vq_kernel kbest = vq_kernel_best();
  const int have512 = vq_kernel_available(VQ_KERNEL_AVX512);
  const int have256 = vq_kernel_available(VQ_KERNEL_AVX2);
  const fsq_kernel fbest = fsq_kernel_best();
  note("bench_quantizers: one thread, median [min .. max] of %d interleaved "
       "repetitions (CPU time of the thread)\n", reps);
  note("cpu: avx2+fma %s, avx512f %s; nearest and EMA statistics kernel: %s; "
       "fsq kernel: %s\n",
       have256 ? "yes" : "no", have512 ? "yes" : "no", vq_kernel_name(kbest),
       fsq_kernel_name(fbest));
#ifdef VQC_HAVE_OPENBLAS
  note("OpenBLAS: %s; core %s; 1 thread\n", openblas_get_config(),
       openblas_get_corename());
#else
  note("OpenBLAS: not found when this was configured; no sgemm baseline\n");
#endif

  /* ---- data: x (M, D) and E (C, D) uniform in [-1, 1); z normal(0, 2) */
  const int64_t M = M_ROWS, D = DIM, C = CODES;
  float *x = aligned_alloc(64, (size_t)(M * D) * sizeof(float));
  float *E = aligned_alloc(64, (size_t)(C * D) * sizeof(float));
  int64_t *idx = malloc((size_t)M * sizeof(int64_t));
  int64_t *idx2 = malloc((size_t)M * sizeof(int64_t));
  float *prod = aligned_alloc(64, (size_t)(M * C) * sizeof(float)); /* sgemm */
  float *z = aligned_alloc(64, (size_t)FSQ_FLOATS * sizeof(float));
  float *zq = aligned_alloc(64, (size_t)FSQ_FLOATS * sizeof(float));
  int32_t *zi = malloc((size_t)(FSQ_FLOATS / 4) * sizeof(int32_t));
  float *tz = aligned_alloc(64, (size_t)TORCH_ELEMS * sizeof(float));
  float *tq = aligned_alloc(64, (size_t)TORCH_ELEMS * sizeof(float));
  int32_t *ti = malloc((size_t)(TORCH_ELEMS / TD) * sizeof(int32_t));
  if (!x || !E || !idx || !idx2 || !prod || !z || !zq || !zi || !tz || !tq ||
      !ti) {
    fprintf(stderr, "bench_quantizers: out of memory\n");
    return 3;
  }
  vqc_rng r;
  vqc_rng_init(&r, 1, vqc_rng_stream_for(0, VQC_RNG_TEST, -1));
  vqc_rng_uniform(&r, x, M * D, -1.0f, 1.0f);
  vqc_rng_uniform(&r, E, C * D, -1.0f, 1.0f);
  vqc_rng_normal(&r, z, FSQ_FLOATS, 0.0f, 2.0f);
  vqc_rng_normal(&r, tz, TORCH_ELEMS, 0.0f, 2.0f);
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
  const int64_t fsq_rows = FSQ_FLOATS / 4, t_rows = TORCH_ELEMS / TD;

  /* ---- validate */
  double ref_s = 0.0;
  if (vqc_vq_nearest(x, M, E, C, D, idx, NULL) != VQC_OK ||
      !validate_nearest_on(NEAR_64, x, E, 0, 200, idx, &ref_s) ||
      !validate_nearest_on(NEAR_64, x, E, M - 56, 56, idx, &ref_s))
    return 1;
  note("validate: nearest (%s) == scalar reference on 256 rows, indices "
       "and distances bit for bit: ok\n", vq_kernel_name(kbest));
  /* The codebook the screen does worst on: E's first code plus 1e-6 noise,
   * and rows next to it (x's first row plus the same noise). */
  float *E_dense = aligned_alloc(64, (size_t)(C * D) * sizeof(float));
  float *x_dense = aligned_alloc(64, (size_t)(M * D) * sizeof(float));
  int64_t *idx_dense = malloc((size_t)M * sizeof(int64_t));
  int64_t *idx_alt = malloc((size_t)M * sizeof(int64_t)); /* other kernels */
  if (!E_dense || !x_dense || !idx_dense || !idx_alt) {
    fprintf(stderr, "bench_quantizers: out of memory\n");
    return 3;
  }
  vqc_rng_normal(&r, E_dense, C * D, 0.0f, 1e-6f);
  vqc_rng_normal(&r, x_dense, M * D, 0.0f, 1e-6f);
  for (int64_t j = 0; j < C * D; j++) E_dense[j] += E[j % D];
  for (int64_t j = 0; j < M * D; j++) x_dense[j] += x[j % D];
  const int show_exact = kbest != VQ_KERNEL_AVX512 && have512;
  double other_ref_s = 0.0; /* the reference's time on other data: unused */
  if (vqc_vq_nearest(x_dense, M, E_dense, C, D, idx_dense, NULL) != VQC_OK ||
      !validate_nearest_on(NEAR_64, x_dense, E_dense, 0, 100, idx_dense,
                           &other_ref_s))
    return 1;
  if (show_exact) {
    if (!same_as_exact(NEAR_64, x, E, idx) || !same_as_exact(NEAR_64, x_dense, E_dense,
                                                     idx_dense))
      return 1;
    note("validate: nearest (%s) == the exact avx512 kernel on all %lld "
         "rows, random and dense codebooks: ok\n", vq_kernel_name(kbest),
         (long long)M);
  }
  /* The second shape: D 256, uniform in [-1, 1) too. */
  const near_dims n256 = NEAR_256;
  float *x256 = aligned_alloc(64, (size_t)(n256.M * n256.D) * sizeof(float));
  float *E256 = aligned_alloc(64, (size_t)(n256.C * n256.D) * sizeof(float));
  int64_t *idx256 = malloc((size_t)n256.M * sizeof(int64_t));
  int64_t *idx256_t = malloc((size_t)n256.M * sizeof(int64_t)); /* timed */
  if (!x256 || !E256 || !idx256 || !idx256_t) {
    fprintf(stderr, "bench_quantizers: out of memory\n");
    return 3;
  }
  vqc_rng_uniform(&r, x256, n256.M * n256.D, -1.0f, 1.0f);
  vqc_rng_uniform(&r, E256, n256.C * n256.D, -1.0f, 1.0f);
  if (vqc_vq_nearest(x256, n256.M, E256, n256.C, n256.D, idx256, NULL) !=
          VQC_OK ||
      !validate_nearest_on(n256, x256, E256, 0, 100, idx256, &other_ref_s) ||
      (show_exact && !same_as_exact(n256, x256, E256, idx256)))
    return 1;
  note("validate: nearest at D %lld (%lld rows, %lld codes) == scalar "
       "reference on 100 rows%s: ok\n", (long long)n256.D, (long long)n256.M,
       (long long)n256.C, show_exact ? ", == the exact avx512 kernel on all"
                                     : "");
#ifdef VQC_HAVE_OPENBLAS
  sgemm_xet(NEAR_64, x, E, prod);
  if (!validate_sgemm(NEAR_64, x, E, prod)) return 1;
  sgemm_xet(n256, x256, E256, prod);
  if (!validate_sgemm(n256, x256, E256, prod)) return 1;
  note("validate: sgemm == double dot products within D*eps*sum|x*e| at "
       "64 entries: ok\n");
#endif
  if (vqc_fsq_quantize(&fsq, z, fsq_rows, zq, zi) != VQC_OK ||
      !validate_fsq(&fsq, z, fsq_rows, zq, zi) ||
      vqc_fsq_quantize(&fsq, tz, t_rows, tq, ti) != VQC_OK ||
      !validate_fsq(&fsq, tz, t_rows, tq, ti))
    return 1;
  note("validate: fsq (%s) == scalar kernel, codes and indices bit for bit; "
       "indices == codes_to_indices(codes): ok\n", fsq_kernel_name(fbest));
  if (!validate_tanh(z, (size_t)FSQ_FLOATS, zq)) return 1;
  note("validate: tanh (%s) == scalar definition on 1M inputs: ok\n",
       fsq_kernel_name(fbest));
  if (vqc_vq_ema_update(&vq, NULL, x, M, idx) != VQC_OK ||
      !validate_ema(&vq, x, idx))
    return 1;
  note("validate: ema counts == bincount, sums == chunked double sums rounded "
       "once: ok\n");

  /* the PyTorch child: z to a file, its codes and indices back */
  torch_child tc = {0};
  int have_torch = 0;
  char why[3][512] = {"", "", ""};
  {
    int fds[3];
    for (int i = 0; i < 3; i++) fds[i] = make_tmp(i);
    const size_t tz_bytes = (size_t)TORCH_ELEMS * sizeof(float);
    if (fds[0] < 0 || fds[1] < 0 || fds[2] < 0 ||
        write(fds[0], tz, tz_bytes) != (ssize_t)tz_bytes) {
      snprintf(why[0], sizeof why[0], "cannot write temporary files: %s",
               strerror(errno));
    } else {
      const char *env = getenv("VQC_BENCH_PYTHON");
      const char *cands[3] = {env && *env ? env : "/usr/bin/python3",
                              env && *env ? NULL : "python3", NULL};
      for (int i = 0; i < 2 && cands[i] && !have_torch; i++)
        have_torch = torch_start(&tc, cands[i], why[i], sizeof why[i]);
    }
    for (int i = 0; i < 3; i++)
      if (fds[i] >= 0) close(fds[i]);
  }
  int64_t torch_diff = 0;
  if (have_torch && !validate_torch(&fsq, tq, ti, &torch_diff)) {
    torch_stop(&tc);
    return 1;
  }
  tmp_cleanup(); /* the child has read z and written its results */
  if (have_torch)
    note("validate: PyTorch FSQ (%s via %s) == ours: codes and indices "
         "equal, %lld elements a level apart (tanh not correctly rounded "
         "there): ok\n", tc.impl, tc.python, (long long)torch_diff);
  else
    note("note: no PyTorch baseline: %s%s%s\n", why[0], why[1][0] ? "; " : "",
         why[1]);

  /* ---- VQ and RVQ: data, the library's child, validation */
  vq_bench vb = {0};
  if (!vq_setup(&vb)) return 3;
  torch_child vc = {0};
  int have_vqpt = 0;
  char vwhy[2][640] = {"", ""};
  {
#ifdef VQC_BENCH_SOURCE_DIR
    const char *src = VQC_BENCH_SOURCE_DIR;
#else
    const char *src = NULL;
#endif
    char script[512] = "", lib[512] = "";
    const char *lenv = getenv("VQC_BENCH_VQPT");
    if (src)
      snprintf(script, sizeof script, "%s/bench/jobs/vqpt_train.py", src);
    if (lenv && *lenv)
      snprintf(lib, sizeof lib, "%s", lenv);
    else if (src)
      snprintf(lib, sizeof lib, "%s/build-py/thirdparty/"
               "vector-quantize-pytorch-1.32.0", src);
    if (lib[0] && access(lib, R_OK | X_OK) != 0) {
      if (lenv && *lenv) {
        fprintf(stderr, "bench_quantizers: VQC_BENCH_VQPT=%s: %s\n", lib,
                strerror(errno));
        return 2;
      }
      lib[0] = '\0'; /* not installed: the python may have it itself */
    }
    const char *dir = getenv("TMPDIR");
    snprintf(vq_dir, sizeof vq_dir, "%s/vqc-bench-vq-XXXXXX",
             dir && strlen(dir) < 32 ? dir : "/tmp");
    if (!script[0] || access(script, R_OK) != 0) {
      snprintf(vwhy[0], sizeof vwhy[0], "no %s (built from another source "
               "tree?)", script[0] ? script : "bench/jobs/vqpt_train.py");
      vq_dir[0] = '\0';
    } else if (!mkdtemp(vq_dir)) {
      snprintf(vwhy[0], sizeof vwhy[0], "cannot make a temporary directory: "
               "%s", strerror(errno));
      vq_dir[0] = '\0';
    } else {
      for (size_t i = 0; i < N_VQ_FILES; i++)
        snprintf(vq_paths[i], sizeof vq_paths[i], "%s/%s.bin", vq_dir,
                 vq_files[i]);
      const size_t xn = (size_t)V_ROWS * VD, en = (size_t)VC * VD;
      if (!vq_write("e0", vb.e0, en) || !vq_write("x", vb.x, xn) ||
          !vq_write("xe", vb.xe, xn) || !vq_write("er", vb.er, VQL * en) ||
          !vq_write("xr", vb.xr, xn)) {
        snprintf(vwhy[0], sizeof vwhy[0], "cannot write temporary files: %s",
                 strerror(errno));
      } else {
        const char *env = getenv("VQC_BENCH_PYTHON");
        const char *cands[3] = {env && *env ? env : "/usr/bin/python3",
                                env && *env ? NULL : "python3", NULL};
        for (int i = 0; i < 2 && cands[i] && !have_vqpt; i++)
          have_vqpt = vq_child_start(&vc, cands[i], script, lib, &vb, vwhy[i],
                                     sizeof vwhy[i]);
      }
    }
  }
  double vq_worst = 0.0;
  int64_t vq_expired = 0, vq_ulps = 0;
  if (have_vqpt && !vq_validate(&vb, &vq_worst, &vq_ulps, &vq_expired)) {
    torch_stop(&vc);
    torch_stop(&tc);
    return 1;
  }
  vq_tmp_cleanup(); /* the child has read the inputs and written its outputs */
  if (have_vqpt) {
    float *negd = malloc((size_t)2048 * VC * sizeof(float));
    const double m0 = negd ? vq_margin(vb.x, vb.e0, vb.idx, negd) : NAN,
                 m1 = negd ? vq_margin(vb.xe, vb.e0, vb.idx, negd) : NAN;
    free(negd);
    note("validate: %s via %s against ours, one training forward of vq_ema, "
         "vq_kmeans (its %d initial rows replayed) and vq_expiry (its %lld "
         "replacement rows replayed), two of the RVQ (dropout seeds %lld, "
         "%lld: cutoffs 3, 1): indices equal; quantized equal bit for bit "
         "(after an update, k-means or RVQ step 0's EMA, within the "
         "tolerance); cluster_size equal or one "
         "ulp apart (%lld entries: torch 2.x's lerp rounds once); losses, "
         "codebooks and embed_avg within 1e-5 max(1, |v|), largest "
         "deviation %.3g of that; nearest codes win by at least %.3g (vq_ema) "
         "and %.3g (vq_expiry) in distance: ok\n", vc.impl, vc.python, VC,
         (long long)vq_expired, (long long)vb.seeds_validate[0],
         (long long)vb.seeds_validate[1], (long long)vq_ulps, vq_worst, m0,
         m1);
  } else {
    note("note: no vector-quantize-pytorch baseline for vq_*/rvq: %s%s%s\n",
         vwhy[0], vwhy[1][0] ? "; " : "", vwhy[1]);
  }

  /* ---- time */
  const size_t x_bytes = (size_t)(M * D) * sizeof(float);
  const size_t z_bytes = (size_t)FSQ_FLOATS * sizeof(float);
  const int show_avx2 = kbest != VQ_KERNEL_AVX2 && have256;
  /* rep -1 is an untimed warm-up round: the first sgemm and the first
   * child batch pay one-off costs (buffers, page faults, caches). */
  for (int rep = -1; rep < reps; rep++) {
    double t;
    const int ri = rep < 0 ? MAX_REPS - 1 : rep; /* warm-up: a spare slot */
#ifdef VQC_HAVE_OPENBLAS
    t = vqc_thread_cpu_s();
    sgemm_xet(NEAR_64, x, E, prod);
    t_cpu[T_SGEMM][ri] = vqc_thread_cpu_s() - t;
#endif
    t = vqc_thread_cpu_s();
    if (vqc_vq_nearest(x, M, E, C, D, idx2, NULL) != VQC_OK) return 3;
    t_cpu[T_NEAR][ri] = vqc_thread_cpu_s() - t;
    if (show_avx2) {
      t = vqc_thread_cpu_s();
      if (vq_nearest_with(VQ_KERNEL_AVX2, x, M, E, C, D, idx_alt, NULL))
        return 3;
      t_cpu[T_NEAR_AVX2][ri] = vqc_thread_cpu_s() - t;
    }
    if (show_exact) {
      t = vqc_thread_cpu_s();
      if (vq_nearest_with(VQ_KERNEL_AVX512, x, M, E, C, D, idx_alt, NULL))
        return 3;
      t_cpu[T_NEAR_AVX512][ri] = vqc_thread_cpu_s() - t;
      t = vqc_thread_cpu_s();
      if (vqc_vq_nearest(x_dense, M, E_dense, C, D, idx_dense, NULL))
        return 3;
      t_cpu[T_NEAR_DENSE][ri] = vqc_thread_cpu_s() - t;
    }
#ifdef VQC_HAVE_OPENBLAS
    t = vqc_thread_cpu_s();
    sgemm_xet(n256, x256, E256, prod);
    t_cpu[T_SGEMM_256][ri] = vqc_thread_cpu_s() - t;
#endif
    t = vqc_thread_cpu_s();
    if (vqc_vq_nearest(x256, n256.M, E256, n256.C, n256.D, idx256_t, NULL))
      return 3;
    t_cpu[T_NEAR_256][ri] = vqc_thread_cpu_s() - t;
    if (show_exact) {
      t = vqc_thread_cpu_s();
      if (vq_nearest_with(VQ_KERNEL_AVX512, x256, n256.M, E256, n256.C, n256.D,
                          idx256_t, NULL))
        return 3;
      t_cpu[T_NEAR_256_AVX512][ri] = vqc_thread_cpu_s() - t;
    }
    if (have512 || have256)
      peak_gflops[ri] = have512 ? peak_avx512(4000000L) : peak_avx2(4000000L);
    t = vqc_thread_cpu_s();
    for (int k = 0; k < FSQ_INNER; k++)
      if (vqc_fsq_quantize(&fsq, tz, t_rows, tq, ti) != VQC_OK) return 3;
    t_cpu[T_FSQ][ri] = vqc_thread_cpu_s() - t;
    if (have_torch) {
      t_cpu[T_TORCH][ri] = torch_time(&tc, FSQ_INNER);
      if (t_cpu[T_TORCH][ri] <= 0) {
        fprintf(stderr, "bench_quantizers: the PyTorch child stopped "
                "answering\n");
        torch_stop(&tc);
        return 3;
      }
    }
    t = vqc_thread_cpu_s();
    for (int k = 0; k < FSQ_INNER; k++)
      if (fsq_quantize_with(FSQ_KERNEL_SCALAR, &fsq, tz, t_rows, tq, ti))
        return 3;
    t_cpu[T_FSQ_SCALAR][ri] = vqc_thread_cpu_s() - t;
    t = vqc_thread_cpu_s();
    if (vqc_fsq_quantize(&fsq, z, fsq_rows, zq, zi) != VQC_OK) return 3;
    t_cpu[T_FSQ_BIG][ri] = vqc_thread_cpu_s() - t;
    t = vqc_thread_cpu_s();
    memcpy(zq, z, z_bytes);
    t_cpu[T_MEMCPY][ri] = vqc_thread_cpu_s() - t;
    sink = ((const uint64_t *)(const void *)zq)[ri];
    t = vqc_thread_cpu_s();
    fsq_tanh_with(fbest, z, zq, (size_t)FSQ_FLOATS);
    t_cpu[T_TANH][ri] = vqc_thread_cpu_s() - t;
    t = vqc_thread_cpu_s();
    for (int64_t i = 0; i < FSQ_FLOATS; i++) zq[i] = tanhf(z[i]);
    t_cpu[T_TANHF][ri] = vqc_thread_cpu_s() - t;
    evict_caches(prod, EVICT_BYTES);
    t = vqc_thread_cpu_s();
    if (vqc_vq_ema_update(&vq, NULL, x, M, idx) != VQC_OK) return 3;
    t_cpu[T_EMA][ri] = vqc_thread_cpu_s() - t;
    evict_caches(prod, EVICT_BYTES);
    t = vqc_thread_cpu_s();
    sink = read_sum(x, x_bytes);
    t_cpu[T_READ][ri] = vqc_thread_cpu_s() - t;
    for (int k = 0; k < NVK; k++) {
      if ((t_cpu[T_VQ + k][ri] = vq_time_case(&vb, k)) < 0) return 3;
      if (have_vqpt && (t_cpu[T_VQPT + k][ri] = vq_child_time(&vc, k)) <= 0) {
        fprintf(stderr, "bench_quantizers: the vector-quantize-pytorch child "
                "stopped answering\n");
        torch_stop(&vc);
        torch_stop(&tc);
        return 3;
      }
    }
  }
  torch_stop(&tc);
  torch_stop(&vc);
  if (memcmp(idx, idx2, (size_t)M * sizeof(int64_t)) != 0 ||
      memcmp(idx256, idx256_t, (size_t)n256.M * sizeof(int64_t)) != 0 ||
      ((show_avx2 || show_exact) &&
       memcmp(idx, idx_alt, (size_t)M * sizeof(int64_t)) != 0)) {
    fprintf(stderr, "bench_quantizers: the timed runs' indices changed\n");
    return 1;
  }

  /* ---- report */
  const double flops = 2.0 * (double)M * (double)C * (double)D;
  char near_shape[64], label[96], base_name[64];
  snprintf(near_shape, sizeof near_shape, "%lldx%lldx%lld", (long long)M,
           (long long)D, (long long)C);
  if (!json)
    printf("\n(1) nearest code, M %lld x D %lld against C %lld codes; "
           "GFLOP/s = 2*M*C*D / seconds\n", (long long)M, (long long)D,
           (long long)C);
  snprintf(label, sizeof label, "nearest, %s (fused argmin)",
           vq_kernel_name(kbest));
#ifdef VQC_HAVE_OPENBLAS
  snprintf(base_name, sizeof base_name, "sgemm_openblas_%s",
           openblas_get_corename());
  char base_label[96];
  snprintf(base_label, sizeof base_label, "sgemm, OpenBLAS %s",
           openblas_get_corename());
  figure("nearest", label, near_shape, T_NEAR, flops, 1e9, "GFLOP/s",
         T_SGEMM, base_name, base_label, reps);
  if (show_exact) {
    figure("nearest_avx512", "nearest, avx512 (exact)", near_shape,
           T_NEAR_AVX512, flops, 1e9, "GFLOP/s", T_SGEMM, base_name,
           base_label, reps);
    figure("nearest_dense", "nearest, dense codebook", near_shape,
           T_NEAR_DENSE, flops, 1e9, "GFLOP/s", T_SGEMM, base_name,
           base_label, reps);
  }
  if (show_avx2)
    figure("nearest_avx2", "nearest, avx2", near_shape, T_NEAR_AVX2, flops,
           1e9, "GFLOP/s", T_SGEMM, base_name, base_label, reps);
  snprintf(near_shape, sizeof near_shape, "%lldx%lldx%lld", (long long)n256.M,
           (long long)n256.D, (long long)n256.C);
  snprintf(label, sizeof label, "nearest, %s, D %lld", vq_kernel_name(kbest),
           (long long)n256.D);
  figure("nearest_256", label, near_shape, T_NEAR_256, flops, 1e9, "GFLOP/s",
         T_SGEMM_256, base_name, base_label, reps);
  if (show_exact)
    figure("nearest_256_avx512", "nearest, avx512 (exact), D 256", near_shape,
           T_NEAR_256_AVX512, flops, 1e9, "GFLOP/s", T_SGEMM_256, base_name,
           base_label, reps);
#else
  figure("nearest", label, near_shape, T_NEAR, flops, 1e9, "GFLOP/s", -1,
         NULL, NULL, reps);
  snprintf(near_shape, sizeof near_shape, "%lldx%lldx%lld", (long long)n256.M,
           (long long)n256.D, (long long)n256.C);
  figure("nearest_256", "nearest, D 256", near_shape, T_NEAR_256, flops, 1e9,
         "GFLOP/s", -1, NULL, NULL, reps);
#endif
  if (have512 || have256) {
    bench_figure f = {.bench = "bench_quantizers", .figure = "fma_peak",
                      .unit = "GFLOP/s",
                      .value = bench_summarize(peak_gflops, reps)};
    if (json) {
      bench_print_figure(stdout, &f);
    } else {
      double v[MAX_REPS];
      const bench_summary near = rates(T_NEAR, flops, 1e9, reps, v);
      printf("    %-34s %9.4g GFLOP/s  [%.4g .. %.4g]; nearest = %.0f%% of "
             "it (2*M*C*D / t, whatever multiply-adds it skipped)\n", have512 ? "FMA peak (zmm FMAs, measured)"
                             : "FMA peak (ymm FMAs, measured)",
             f.value.median, f.value.min, f.value.max,
             100.0 * near.median / f.value.median);
      printf("    %-34s %9.4g GFLOP/s  (256 rows, at validation)\n",
             "nearest, scalar reference", 2.0 * 256 * (double)C *
             (double)D / ref_s / 1e9);
    }
  }

  char tshape[32];
  snprintf(tshape, sizeof tshape, "%dx%dx%d", TB, TN, TD);
  const double telems = (double)TORCH_ELEMS * FSQ_INNER;
  if (!json)
    printf("\n(2) FSQ quantize + indices, levels 8,5,5,5, shape (%d, %d, %d) "
           "(%d runs per repetition); elem/s = elements / seconds\n", TB, TN,
           TD, FSQ_INNER);
  snprintf(label, sizeof label, "fsq, %s", fsq_kernel_name(fbest));
  char tlabel[160];
  snprintf(tlabel, sizeof tlabel, "PyTorch FSQ (%s)", have_torch ? tc.impl : "");
  figure("fsq", label, tshape, T_FSQ, telems, 1.0, "elem/s",
         have_torch ? T_TORCH : -1, "pytorch_fsq", tlabel, reps);
  figure("fsq_scalar", "fsq, scalar kernel", tshape, T_FSQ_SCALAR, telems,
         1.0, "elem/s", have_torch ? T_TORCH : -1, "pytorch_fsq", tlabel,
         reps);
  if (!json && !have_torch)
    printf("    (no PyTorch baseline: see the note above)\n");

  char bshape[32];
  snprintf(bshape, sizeof bshape, "%lldx4", (long long)fsq_rows);
  if (!json)
    printf("\n(3) FSQ on %zu MiB of z (%lld rows of 4) against memcpy of the "
           "same bytes; GB/s of z\n", z_bytes >> 20, (long long)fsq_rows);
  figure("fsq_memcpy", label, bshape, T_FSQ_BIG, (double)z_bytes, 1e9, "GB/s",
         T_MEMCPY, "memcpy", "memcpy of the same bytes", reps);

  char nshape[32];
  snprintf(nshape, sizeof nshape, "%lld", (long long)FSQ_FLOATS);
  if (!json)
    printf("\n(4) tanh of %lld floats, normal(0, 2): the correctly rounded "
           "one against glibc's tanhf; elem/s\n", (long long)FSQ_FLOATS);
  snprintf(label, sizeof label, "tanh_exact, %s", fsq_kernel_name(fbest));
  figure("tanh", label, nshape, T_TANH, (double)FSQ_FLOATS, 1.0, "elem/s",
         T_TANHF, "glibc_tanhf", "glibc tanhf (scalar loop)", reps);

  char eshape[48];
  snprintf(eshape, sizeof eshape, "%lldx%lld,C=%lld", (long long)M,
           (long long)D, (long long)C);
  if (!json)
    printf("\n(5) EMA update (counts + sums of %lld rows of %lld, then C*D "
           "lerps), %zu MiB of x; GB/s of x\n", (long long)M, (long long)D,
           x_bytes >> 20);
  figure("ema", "vqc_vq_ema_update", eshape, T_EMA, (double)x_bytes, 1e9,
         "GB/s", T_READ, "read",
         have_avx2 ? "plain read of x (avx2)" : "plain read of x", reps);

  char vshape[48], rshape[48], vlabel[160], vbase[48];
  snprintf(vshape, sizeof vshape, "%dx%dx%d,C=%d", VB, VN, VD, VC);
  snprintf(rshape, sizeof rshape, "%dx%dx%d,C=%d,Q=%d", VB, VN, VD, VC, VQL);
  if (!json)
    printf("\n(6) VQ training forwards (nearest code + EMA update; + k-means "
           "init, 10 iterations; + dead-code expiry) and a %d-layer RVQ with "
           "quantize dropout (%d forwards per repetition, cutoffs 0..3), "
           "(%d, %d, %d) against %d codes, each from a fresh state; "
           "rows/s = rows / seconds\n", VQL, RVQ_INNER, VB, VN, VD, VC);
  static const char *const vk_label[NVK] = {
      "vq_ema (nearest, EMA)", "vq_kmeans (+ k-means init)",
      "vq_expiry (+ dead-code expiry)", "rvq, 4 layers, quantize dropout"};
  snprintf(vlabel, sizeof vlabel, "%s", have_vqpt ? vc.impl : "");
  for (int k = 0; k < NVK; k++) {
    snprintf(vbase, sizeof vbase, "pytorch_%s", vk_figure[k]);
    const double work = (double)V_ROWS * (k == VK_RVQ ? RVQ_INNER : 1);
    figure(vk_figure[k], vk_label[k], k == VK_RVQ ? rshape : vshape, T_VQ + k,
           work, 1.0, "rows/s", have_vqpt ? T_VQPT + k : -1, vbase, vlabel,
           reps);
  }
  if (!json && !have_vqpt)
    printf("    (no vector-quantize-pytorch baseline: see the note above)\n");

  vq_free_bench(&vb);
  vqc_vq_free(&vq);
  free(x);
  free(E);
  free(x_dense);
  free(E_dense);
  free(idx_dense);
  free(idx_alt);
  free(x256);
  free(E256);
  free(idx256);
  free(idx256_t);
  free(idx);
  free(idx2);
  free(prod);
  free(z);
  free(zq);
  free(zi);
  free(tz);
  free(tq);
  free(ti);
  return 0;
}
