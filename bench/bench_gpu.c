/* bench_gpu.c: the GPU kernels (vqc/gpu.h) against baselines measured in the
 * same run on the same device. Without a usable device it prints why and
 * exits 0 (built only with VQC_WITH_CUDA; bench/CMakeLists.txt).
 *
 * Each section validates first (the kernel's output against its CPU twin),
 * then times: every timed run is bracketed by CUDA events on the default
 * stream, after one warm-up; the best of REPS runs is kept (the others are
 * disturbed by clocks ramping or by other work).
 *
 *   digest   vqc_gpu_digest_leaves on a DIGEST_BYTES buffer (leaves only;
 *            the root hash over 8 bytes per 64 KiB is host work) against
 *            cudaMemcpyAsync device-to-device of the same bytes.
 *              digest GB/s = n / t_digest; copy GB/s = n / t_copy
 *              ratio = t_copy / t_digest                 target >= 0.75
 *            (the copy moves 2n bytes, the digest reads n; the ratio against
 *            the copy's traffic, 2n / t_copy, is printed too)
 *   nearest  vqc_gpu_vq_nearest (norms, distances and argmin, indices
 *            written) at M x D x C = 1M x 256 x 8192 against cublasSgemm of
 *            the same shape, x (M, D) times E^T into an (M, C) float matrix,
 *            FP32 math (no TF32: the kernel computes exact FP32 chains).
 *              rate = 2 M C D / t; ratio = t_sgemm / t_nearest  target >= 0.5
 *   fsq      vqc_gpu_fsq_quantize, levels (8, 5, 5, 5), codes and indices,
 *            against a device-to-device copy of z.
 *              bandwidth = bytes read + written per second:
 *              fsq: (4N + 4N + 4N/d) / t; copy: (4N + 4N) / t
 *              ratio = fsq bandwidth / copy bandwidth       target >= 0.7
 *   stats    vqc_gpu_vq_stats (per-code counts and sums in the fixed
 *            chunked order, vq.h) at M x D x C = 1M x 256 x 8192 on a
 *            collapsed codebook (99% of rows on one code, the usual VQ
 *            failure) against the same call on a uniform assignment.
 *              ratio = t_uniform / t_collapsed             target >= 0.5
 *            (the per-code sums were once a serial walk of each code's
 *            rows, so a collapsed codebook cost ~M row-steps on one SM)
 *
 * argv[1] = "small" runs every section at a sixteenth of the size (a quick
 * check of the program itself; the targets are for the full sizes). Exit
 * status: 0 when every validation passed (targets missed are reported, not
 * failures), 1 when a validation failed, 3 on a CUDA or cuBLAS error. */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vqc/digest.h"
#include "vqc/fsq.h"
#include "vqc/gpu.h"
#include "vqc/tensor.h"
#include "vqc/vq.h"

#define REPS 5

/* ---- error handling (main-level program: report and exit) */

static void die_cuda(cudaError_t e, const char *call, const char *file,
                     int line) {
  fprintf(stderr, "bench_gpu: %s:%d: %s failed: %s (%s)\n", file, line, call,
          cudaGetErrorString(e), cudaGetErrorName(e));
  exit(3);
}
#define CUDA_OK(call)                                               \
  do {                                                              \
    cudaError_t e_ = (call);                                        \
    if (e_ != cudaSuccess) die_cuda(e_, #call, __FILE__, __LINE__); \
  } while (0)

#define CUBLAS_OK(call)                                                 \
  do {                                                                  \
    cublasStatus_t st_ = (call);                                        \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                 \
      fprintf(stderr, "bench_gpu: %s:%d: %s failed: %s\n", __FILE__,    \
              __LINE__, #call, cublasGetStatusString(st_));             \
      exit(3);                                                          \
    }                                                                   \
  } while (0)

#define VQC_OK_OR_DIE(call)                                                \
  do {                                                                     \
    vqc_status s_ = (call);                                                \
    if (s_ != VQC_OK) {                                                    \
      fprintf(stderr, "bench_gpu: %s:%d: %s: %s: %s\n", __FILE__, __LINE__, \
              #call, vqc_status_name(s_), vqc_last_error());               \
      exit(vqc_status_exit_code(s_) ? vqc_status_exit_code(s_) : 3);       \
    }                                                                      \
  } while (0)

static void *dev_alloc(size_t n) {
  void *p = NULL;
  CUDA_OK(cudaMalloc(&p, n));
  return p;
}

static void *host_alloc(size_t n) {
  void *p = malloc(n);
  if (!p) {
    fprintf(stderr, "bench_gpu: no host memory for %zu bytes\n", n);
    exit(3);
  }
  return p;
}

/* fixed-seed random words */
static uint64_t mix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
static float normal(uint64_t *s) {
  /* sum of 4 uniforms, centred: cheap and good enough for timing inputs */
  float a = 0;
  for (int k = 0; k < 4; k++) a += (float)(mix(s) >> 40) / 16777216.0f;
  return (a - 2.0f) * 1.7f;
}

/* ---- timing */

typedef enum {
  OP_DIGEST, OP_COPY, OP_NEAREST, OP_SGEMM, OP_FSQ, OP_STATS
} op_kind;

typedef struct {
  op_kind kind;
  /* operands: digest/copy: a (n bytes) -> b; nearest: a = x, b = E, c =
   * indices; sgemm: a = x, b = E, c = out; fsq: a = z, b = out, c = idx;
   * stats: a = x, b = indices, c = counts, d = sums */
  void *a, *b, *c, *d;
  size_t n;
  int64_t M, C, D;
  const vqc_fsq *fsq;
  uint64_t *leaves; /* host, digest */
  cublasHandle_t blas;
} op;

static void run_op(const op *o) {
  switch (o->kind) {
    case OP_DIGEST:
      VQC_OK_OR_DIE(vqc_gpu_digest_leaves(o->a, o->n, o->leaves));
      break;
    case OP_COPY:
      CUDA_OK(cudaMemcpyAsync(o->b, o->a, o->n, cudaMemcpyDeviceToDevice, 0));
      break;
    case OP_NEAREST:
      VQC_OK_OR_DIE(vqc_gpu_vq_nearest(o->a, o->M, o->b, o->C, o->D, o->c,
                                       NULL));
      break;
    case OP_SGEMM: {
      /* Row-major out (M, C) = x (M, D) E^T, as column-major
       * out^T (C, M) = E^T (C, D) x^T (D, M). */
      const float one = 1.0f, zero = 0.0f;
      CUBLAS_OK(cublasSgemm(o->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)o->C,
                            (int)o->M, (int)o->D, &one, o->b, (int)o->D, o->a,
                            (int)o->D, &zero, o->c, (int)o->C));
      break;
    }
    case OP_FSQ:
      VQC_OK_OR_DIE(vqc_gpu_fsq_quantize(o->fsq, o->a, o->M, o->b, o->c, NULL));
      break;
    case OP_STATS:
      VQC_OK_OR_DIE(vqc_gpu_vq_stats(o->a, o->M, o->D, o->b, o->C, o->c, o->d));
      break;
  }
}

/* Best of REPS event-timed runs after one warm-up, in seconds. */
static double time_op(const op *o) {
  cudaEvent_t t0, t1;
  CUDA_OK(cudaEventCreate(&t0));
  CUDA_OK(cudaEventCreate(&t1));
  run_op(o);
  CUDA_OK(cudaDeviceSynchronize());
  double best = 1e30;
  for (int r = 0; r < REPS; r++) {
    CUDA_OK(cudaEventRecord(t0, 0));
    run_op(o);
    CUDA_OK(cudaEventRecord(t1, 0));
    CUDA_OK(cudaEventSynchronize(t1));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, t0, t1));
    if (ms * 1e-3 < best) best = ms * 1e-3;
  }
  CUDA_OK(cudaEventDestroy(t0));
  CUDA_OK(cudaEventDestroy(t1));
  return best;
}

static int failures = 0;
static void verdict(const char *what, bool ok) {
  printf("  validate %-44s %s\n", what, ok ? "ok" : "FAILED");
  if (!ok) failures++;
}

/* ---- sections */

static void bench_digest(size_t n) {
  printf("digest: %zu MiB\n", n >> 20);
  uint8_t *host = host_alloc(n);
  uint64_t s = 1;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t w = mix(&s);
    memcpy(host + i, &w, n - i < 8 ? n - i : 8);
  }
  void *a = dev_alloc(n), *b = dev_alloc(n);
  CUDA_OK(cudaMemcpy(a, host, n, cudaMemcpyHostToDevice));
  size_t nleaves = (n + VQC_DIGEST_CHUNK - 1) / VQC_DIGEST_CHUNK;
  uint64_t *leaves = host_alloc(nleaves * 8);

  /* validate: the whole digest, and every leaf, against the CPU */
  int64_t shape[1] = {(int64_t)n};
  uint64_t want = 0, got = 1;
  VQC_OK_OR_DIE(vqc_digest_buffer_parallel(host, n, VQC_U8, 1, shape, 8,
                                           &want));
  VQC_OK_OR_DIE(vqc_gpu_digest_buffer(a, n, VQC_U8, 1, shape, &got));
  verdict("digest == vqc_digest_buffer_parallel", got == want);
  VQC_OK_OR_DIE(vqc_gpu_digest_leaves(a, n, leaves));
  size_t bad = 0;
  for (size_t l = 0; l < nleaves; l += 97) /* a sample of the leaves */
    bad += leaves[l] != vqc_xxh3_64(host + l * VQC_DIGEST_CHUNK,
                                    n - l * VQC_DIGEST_CHUNK < VQC_DIGEST_CHUNK
                                        ? n - l * VQC_DIGEST_CHUNK
                                        : VQC_DIGEST_CHUNK);
  verdict("leaves (every 97th) == XXH3_64bits", bad == 0);

  op dg = {.kind = OP_DIGEST, .a = a, .n = n, .leaves = leaves};
  op cp = {.kind = OP_COPY, .a = a, .b = b, .n = n};
  double td = time_op(&dg), tc = time_op(&cp);
  printf("  digest  %8.3f ms  %7.1f GB/s   (n / t)\n", td * 1e3, n / td / 1e9);
  printf("  d2d copy %7.3f ms  %7.1f GB/s   (n / t; its traffic 2n / t = "
         "%.1f GB/s)\n", tc * 1e3, n / tc / 1e9, 2 * n / tc / 1e9);
  printf("  ratio digest/copy = t_copy / t_digest = %.3f   (target >= 0.75)\n",
         tc / td);
  printf("  ratio vs copy traffic = (n / t_digest) / (2n / t_copy) = %.3f\n",
         tc / (2 * td));
  CUDA_OK(cudaFree(a));
  CUDA_OK(cudaFree(b));
  free(host);
  free(leaves);
}

static void bench_nearest(int64_t M, int64_t D, int64_t C) {
  printf("nearest: M %lld x D %lld x C %lld\n", (long long)M, (long long)D,
         (long long)C);
  float *x = host_alloc((size_t)(M * D) * 4);
  float *E = host_alloc((size_t)(C * D) * 4);
  uint64_t s = 2;
  for (int64_t i = 0; i < M * D; i++) x[i] = normal(&s);
  for (int64_t i = 0; i < C * D; i++) E[i] = normal(&s);
  float *dx = dev_alloc((size_t)(M * D) * 4);
  float *dE = dev_alloc((size_t)(C * D) * 4);
  int64_t *di = dev_alloc((size_t)M * 8);
  CUDA_OK(cudaMemcpy(dx, x, (size_t)(M * D) * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dE, E, (size_t)(C * D) * 4, cudaMemcpyHostToDevice));

  /* validate: the first and last rows against vqc_vq_nearest on the CPU */
  const int64_t check = M < 2048 ? M : 2048;
  int64_t *want = host_alloc((size_t)check * 8);
  int64_t *got = host_alloc((size_t)M * 8);
  VQC_OK_OR_DIE(vqc_gpu_vq_nearest(dx, M, dE, C, D, di, NULL));
  CUDA_OK(cudaMemcpy(got, di, (size_t)M * 8, cudaMemcpyDeviceToHost));
  int64_t bad = 0;
  for (int part = 0; part < 2; part++) {
    int64_t first = part == 0 ? 0 : M - check;
    VQC_OK_OR_DIE(vqc_vq_nearest(x + first * D, check, E, C, D, want, NULL));
    for (int64_t i = 0; i < check; i++) bad += got[first + i] != want[i];
  }
  verdict("indices (first, last 2048 rows) == CPU", bad == 0);

  cublasHandle_t h;
  CUBLAS_OK(cublasCreate(&h));
  CUBLAS_OK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH)); /* FP32, no TF32 */
  float *dout = dev_alloc((size_t)M * (size_t)C * 4);
  op nn = {.kind = OP_NEAREST, .a = dx, .b = dE, .c = di,
           .M = M, .C = C, .D = D};
  op gm = {.kind = OP_SGEMM, .a = dx, .b = dE, .c = dout, .M = M, .C = C,
           .D = D, .blas = h};
  double tn = time_op(&nn), tg = time_op(&gm);
  double flop = 2.0 * (double)M * (double)C * (double)D;
  printf("  nearest %8.3f ms  %7.2f TFLOP/s  (2 M C D / t; norms, argmin, "
         "indices included)\n", tn * 1e3, flop / tn / 1e12);
  printf("  sgemm   %8.3f ms  %7.2f TFLOP/s  (cublasSgemm, FP32, out (M, C) "
         "written)\n", tg * 1e3, flop / tg / 1e12);
  printf("  ratio nearest/sgemm = t_sgemm / t_nearest = %.3f   (target >= "
         "0.5)\n", tg / tn);
  CUBLAS_OK(cublasDestroy(h));
  CUDA_OK(cudaFree(dout));
  CUDA_OK(cudaFree(dx));
  CUDA_OK(cudaFree(dE));
  CUDA_OK(cudaFree(di));
  free(x), free(E), free(want), free(got);
}

static void bench_fsq(int64_t N) {
  const int32_t levels[] = {8, 5, 5, 5};
  vqc_fsq q;
  VQC_OK_OR_DIE(vqc_fsq_init(&q, levels, 4, 1, false, 1e-3));
  const int64_t M = N / 4;
  printf("fsq: levels (8, 5, 5, 5), %lld elements\n", (long long)N);
  float *z = host_alloc((size_t)N * 4);
  uint64_t s = 3;
  for (int64_t i = 0; i < N; i++) z[i] = normal(&s);
  float *dz = dev_alloc((size_t)N * 4), *dout = dev_alloc((size_t)N * 4);
  int32_t *didx = dev_alloc((size_t)M * 4);
  CUDA_OK(cudaMemcpy(dz, z, (size_t)N * 4, cudaMemcpyHostToDevice));

  /* validate: the first million elements against vqc_fsq_quantize; codes
   * may differ only at glibc's tanhf rounding (vqc/gpu.h): count them */
  const int64_t vm = M < 262144 ? M : 262144;
  float *want = host_alloc((size_t)vm * 16), *got = host_alloc((size_t)vm * 16);
  int32_t *wi = host_alloc((size_t)vm * 4), *gi = host_alloc((size_t)vm * 4);
  int64_t refined = 0;
  VQC_OK_OR_DIE(vqc_fsq_quantize(&q, z, vm, want, wi));
  VQC_OK_OR_DIE(vqc_gpu_fsq_quantize(&q, dz, M, dout, didx, &refined));
  CUDA_OK(cudaMemcpy(got, dout, (size_t)vm * 16, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(gi, didx, (size_t)vm * 4, cudaMemcpyDeviceToHost));
  int64_t diff = 0, idx_bad = 0;
  for (int64_t g = 0; g < vm; g++) {
    bool same = memcmp(want + 4 * g, got + 4 * g, 16) == 0;
    diff += !same;
    idx_bad += same && wi[g] != gi[g];
  }
  printf("  %lld of %lld groups differ from glibc's codes (tanhf rounding), "
         "%lld elements refined in double\n", (long long)diff, (long long)vm,
         (long long)refined);
  verdict("fsq codes == CPU (but for <= 1e-4 of groups)", diff <= vm / 10000);
  verdict("fsq indices == CPU where codes agree", idx_bad == 0);

  op fq = {.kind = OP_FSQ, .a = dz, .b = dout, .c = didx, .M = M, .fsq = &q};
  op cp = {.kind = OP_COPY, .a = dz, .b = dout, .n = (size_t)N * 4};
  double tf = time_op(&fq), tc = time_op(&cp);
  double bytes_f = 8.0 * (double)N + 4.0 * (double)M, bytes_c = 8.0 * (double)N;
  printf("  fsq     %8.3f ms  %7.1f GB/s   ((4N + 4N + 4N/d) / t)\n", tf * 1e3,
         bytes_f / tf / 1e9);
  printf("  d2d copy %7.3f ms  %7.1f GB/s   ((4N + 4N) / t)\n", tc * 1e3,
         bytes_c / tc / 1e9);
  printf("  ratio fsq/copy bandwidth = %.3f   (target >= 0.7)\n",
         (bytes_f / tf) / (bytes_c / tc));
  CUDA_OK(cudaFree(dz));
  CUDA_OK(cudaFree(dout));
  CUDA_OK(cudaFree(didx));
  free(z), free(want), free(got), free(wi), free(gi);
}

static void bench_stats(int64_t M, int64_t D, int64_t C) {
  printf("stats: M %lld, D %lld, C %lld; collapsed (99%% on code 7) vs "
         "uniform codes\n", (long long)M, (long long)D, (long long)C);
  float *x = host_alloc((size_t)(M * D) * 4);
  int64_t *collapsed = host_alloc((size_t)M * 8), *uniform = host_alloc((size_t)M * 8);
  uint64_t s = 4;
  for (int64_t i = 0; i < M * D; i++) x[i] = normal(&s);
  for (int64_t i = 0; i < M; i++) {
    uniform[i] = (int64_t)(mix(&s) % (uint64_t)C);
    collapsed[i] = mix(&s) % 100 ? 7 : uniform[i];
  }
  float *dx = dev_alloc((size_t)(M * D) * 4);
  int64_t *dcol = dev_alloc((size_t)M * 8), *duni = dev_alloc((size_t)M * 8);
  float *dc = dev_alloc((size_t)C * 4), *ds = dev_alloc((size_t)(C * D) * 4);
  CUDA_OK(cudaMemcpy(dx, x, (size_t)(M * D) * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dcol, collapsed, (size_t)M * 8, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(duni, uniform, (size_t)M * 8, cudaMemcpyHostToDevice));

  /* validate both assignments against the CPU definition, bit for bit */
  float *wc = host_alloc((size_t)C * 4), *ws = host_alloc((size_t)(C * D) * 4);
  float *gc = host_alloc((size_t)C * 4), *gs = host_alloc((size_t)(C * D) * 4);
  const int64_t *assign[2] = {collapsed, uniform};
  int64_t *dassign[2] = {dcol, duni};
  for (int k = 0; k < 2; k++) {
    VQC_OK_OR_DIE(vqc_vq_batch_stats(x, M, D, assign[k], C, wc, ws, D, 1));
    VQC_OK_OR_DIE(vqc_gpu_vq_stats(dx, M, D, dassign[k], C, dc, ds));
    CUDA_OK(cudaMemcpy(gc, dc, (size_t)C * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(gs, ds, (size_t)(C * D) * 4, cudaMemcpyDeviceToHost));
    verdict(k ? "stats (uniform) == CPU bit for bit"
              : "stats (collapsed) == CPU bit for bit",
            memcmp(gc, wc, (size_t)C * 4) == 0 &&
                memcmp(gs, ws, (size_t)(C * D) * 4) == 0);
  }
  op col = {.kind = OP_STATS, .a = dx, .b = dcol, .c = dc, .d = ds, .M = M,
            .C = C, .D = D};
  op uni = col;
  uni.b = duni;
  double tcol = time_op(&col), tuni = time_op(&uni);
  printf("  collapsed %8.3f ms   uniform %8.3f ms\n", tcol * 1e3, tuni * 1e3);
  printf("  ratio uniform/collapsed = %.3f   (target >= 0.5)\n", tuni / tcol);
  CUDA_OK(cudaFree(dx));
  CUDA_OK(cudaFree(dcol));
  CUDA_OK(cudaFree(duni));
  CUDA_OK(cudaFree(dc));
  CUDA_OK(cudaFree(ds));
  free(x), free(collapsed), free(uniform), free(wc), free(ws), free(gc),
      free(gs);
}

int main(int argc, char **argv) {
  if (!vqc_cuda_available()) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    printf("bench_gpu: SKIP: no usable CUDA device (%s)\n",
           e == cudaSuccess ? "no device" : cudaGetErrorString(e));
    return 0;
  }
  bool small = argc > 1 && strcmp(argv[1], "small") == 0;
  int div = small ? 16 : 1;
  struct cudaDeviceProp prop;
  int dev = 0;
  CUDA_OK(cudaGetDevice(&dev));
  CUDA_OK(cudaGetDeviceProperties(&prop, dev));
  printf("bench_gpu on %s (sm_%d%d, %d SMs, %.0f GiB)%s\n", prop.name,
         prop.major, prop.minor, prop.multiProcessorCount,
         (double)prop.totalGlobalMem / (1 << 30), small ? ", small sizes" : "");

  bench_digest(((size_t)4 << 30) / (size_t)div);
  bench_nearest(((int64_t)1 << 20) / div, 256, 8192);
  bench_fsq(((int64_t)1 << 28) / div);
  bench_stats(((int64_t)1 << 20) / div, 256, 8192);
  if (failures) {
    printf("bench_gpu: %d validation(s) FAILED: timings above are not "
           "meaningful\n", failures);
    return 1;
  }
  return 0;
}
