/* test_gpu_nearest.c: the device nearest-code search (kernels/vq_nearest.cu)
 * against its CPU twin vqc_vq_nearest, label gpu. Outputs are poisoned
 * before every run.
 *
 * Tolerance: none. The device computes the CPU's function operation by
 * operation (fmaf chains over d in the same order, then the same float
 * epilogue), so distances must be bit-identical and indices equal,
 * including every tie (lowest index). The shapes cover both load paths
 * (float4 when D % 4 == 0 and aligned, scalar otherwise), partial row and
 * code tiles, D not a multiple of the 8-wide k step (zero padding), and one
 * code. Ties are built on purpose: duplicated codes, rows equal to codes,
 * an all-zero codebook (every distance equal), and rows containing inf
 * (every distance inf: index 0, as on the CPU). Determinism: two runs give
 * the same bits. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test_util.h"
#include "vqc/vq.h"

/* x (M, D) and E (C, D) random normal; a tenth of E's rows duplicate an
 * earlier row and a tenth of x's rows copy a code, so exact ties occur. */
static void fill_inputs(float *x, int64_t M, float *E, int64_t C, int64_t D,
                        uint64_t seed) {
  for (int64_t i = 0; i < C * D; i++) E[i] = test_normal(&seed);
  for (int64_t c = 1; c < C; c++)
    if (test_splitmix(&seed) % 10 == 0) {
      int64_t src = (int64_t)(test_splitmix(&seed) % (uint64_t)c);
      memcpy(E + c * D, E + src * D, (size_t)D * 4);
    }
  for (int64_t i = 0; i < M * D; i++) x[i] = test_normal(&seed);
  for (int64_t m = 0; m < M; m++)
    if (test_splitmix(&seed) % 10 == 0) {
      int64_t src = (int64_t)(test_splitmix(&seed) % (uint64_t)C);
      memcpy(x + m * D, E + src * D, (size_t)D * 4);
    }
}

/* Runs both on (x, E) and compares indices, and distances when with_dist.
 * x_off / e_off shift the device copies by that many floats (odd offsets
 * force the scalar load path). */
static void compare(const float *x, int64_t M, const float *E, int64_t C,
                    int64_t D, bool with_dist, int x_off, int e_off) {
  int64_t *want_i = malloc((size_t)M * 8), *got_i = malloc((size_t)M * 8);
  float *want_d = NULL, *got_d = NULL;
  if (with_dist) {
    want_d = malloc((size_t)(M * C) * 4);
    got_d = malloc((size_t)(M * C) * 4);
    cr_assert(want_d && got_d);
  }
  cr_assert(want_i && got_i);
  cr_assert_eq(vqc_vq_nearest(x, M, E, C, D, want_i, want_d), VQC_OK, "%s",
               vqc_last_error());

  vqc_tensor dx = gpu_alloc((size_t)(M * D + x_off) * 4),
             dE = gpu_alloc((size_t)(C * D + e_off) * 4),
             di = gpu_alloc((size_t)M * 8),
             dd = gpu_alloc(with_dist ? (size_t)(M * C) * 4 : 4);
  float *px = (float *)gpu_ptr(&dx) + x_off;
  float *pE = (float *)gpu_ptr(&dE) + e_off;
  gpu_copy_in(px, x, (size_t)(M * D) * 4);
  gpu_copy_in(pE, E, (size_t)(C * D) * 4);
  for (int run = 0; run < 2; run++) { /* the second run checks determinism */
    gpu_poison(gpu_ptr(&di), (size_t)M * 2);
    if (with_dist) gpu_poison(gpu_ptr(&dd), (size_t)(M * C));
    cr_assert_eq(vqc_gpu_vq_nearest(px, M, pE, C, D, gpu_ptr(&di),
                                    with_dist ? gpu_ptr(&dd) : NULL),
                 VQC_OK, "%s", vqc_last_error());
    gpu_download(got_i, gpu_ptr(&di), (size_t)M * 8);
    for (int64_t m = 0; m < M; m++)
      cr_assert_eq(got_i[m], want_i[m],
                   "run %d, (M %lld, C %lld, D %lld) row %lld: device code "
                   "%lld, CPU %lld", run, (long long)M, (long long)C,
                   (long long)D, (long long)m, (long long)got_i[m],
                   (long long)want_i[m]);
    if (with_dist) {
      gpu_download(got_d, gpu_ptr(&dd), (size_t)(M * C) * 4);
      for (int64_t k = 0; k < M * C; k++)
        cr_assert_eq(test_bits(got_d[k]), test_bits(want_d[k]),
                     "run %d: -distance (%lld, %lld): device %a, CPU %a", run,
                     (long long)(k / C), (long long)(k % C),
                     (double)got_d[k], (double)want_d[k]);
    }
  }
  vqc_tensor_free(&dx);
  vqc_tensor_free(&dE);
  vqc_tensor_free(&di);
  vqc_tensor_free(&dd);
  free(want_i), free(got_i), free(want_d), free(got_d);
}

static void random_case(int64_t M, int64_t C, int64_t D, bool with_dist,
                        int x_off, int e_off, uint64_t seed) {
  float *x = malloc((size_t)(M * D) * 4), *E = malloc((size_t)(C * D) * 4);
  cr_assert(x && E);
  fill_inputs(x, M, E, C, D, seed);
  compare(x, M, E, C, D, with_dist, x_off, e_off);
  free(x), free(E);
}

Test(gpu_nearest, distances_and_indices_bit_identical) {
  gpu_require();
  random_case(1000, 512, 64, true, 0, 0, 201);  /* float4 path, whole tiles */
  random_case(777, 300, 13, true, 0, 0, 202);   /* D % 4 != 0: scalar path */
  random_case(130, 1000, 256, true, 0, 0, 203); /* partial row tile */
  random_case(5, 1, 3, true, 0, 0, 204);        /* one code */
  random_case(333, 129, 20, true, 0, 0, 205);   /* D not a multiple of 8 */
  random_case(200, 257, 32, true, 1, 3, 206);   /* unaligned: scalar path */
}

Test(gpu_nearest, indices_without_distances_larger) {
  gpu_require();
  random_case(20000, 1024, 64, false, 0, 0, 207);
  random_case(4097, 8192, 256, false, 0, 0, 208);
}

Test(gpu_nearest, ties_and_infinities_as_on_the_cpu) {
  gpu_require();
  const int64_t M = 300, C = 200, D = 12;
  float *x = malloc((size_t)(M * D) * 4), *E = calloc((size_t)(C * D), 4);
  cr_assert(x && E);
  uint64_t seed = 209;
  /* all-zero codebook: every distance of a row is equal: code 0 */
  for (int64_t i = 0; i < M * D; i++) x[i] = test_normal(&seed);
  compare(x, M, E, C, D, true, 0, 0);
  /* rows with an inf: every distance inf (or clamped NaN): as the CPU */
  for (int64_t i = 0; i < C * D; i++) E[i] = test_normal(&seed);
  for (int64_t m = 0; m < M; m += 7)
    x[m * D + (m % D)] = m % 2 ? INFINITY : -INFINITY;
  compare(x, M, E, C, D, true, 0, 0);
  free(x), free(E);
}

Test(gpu_nearest, squared_norms_are_the_fma_chain) {
  gpu_require();
  const int64_t n = 1000, D = 77;
  float *A = malloc((size_t)(n * D) * 4), *got = malloc((size_t)n * 4);
  cr_assert(A && got);
  uint64_t seed = 210;
  for (int64_t i = 0; i < n * D; i++) A[i] = test_normal(&seed);
  vqc_tensor dA = gpu_upload(A, (size_t)(n * D) * 4);
  vqc_tensor dout = gpu_alloc((size_t)n * 4);
  gpu_poison(gpu_ptr(&dout), (size_t)n);
  cr_assert_eq(vqc_gpu_vq_sqnorms(gpu_ptr(&dA), n, D, gpu_ptr(&dout)), VQC_OK,
               "%s", vqc_last_error());
  gpu_download(got, gpu_ptr(&dout), (size_t)n * 4);
  for (int64_t i = 0; i < n; i++) {
    float acc = 0.0f; /* the definition: fmaf chain from 0 over d */
    for (int64_t d = 0; d < D; d++) acc = fmaf(A[i * D + d], A[i * D + d], acc);
    cr_assert_eq(test_bits(got[i]), test_bits(acc), "row %lld", (long long)i);
  }
  vqc_tensor_free(&dA);
  vqc_tensor_free(&dout);
  free(A), free(got);
}

Test(gpu_nearest, bad_arguments_are_refused) {
  gpu_require();
  vqc_tensor d = gpu_alloc(4096);
  float *p = gpu_ptr(&d);
  cr_expect_eq(vqc_gpu_vq_nearest(p, 4, p, 0, 4, (int64_t *)p, NULL),
               VQC_EINVAL);
  cr_expect_eq(vqc_gpu_vq_nearest(p, 4, p, 4, 0, (int64_t *)p, NULL),
               VQC_EINVAL);
  cr_expect_eq(vqc_gpu_vq_nearest(p, 4, p, 4, 4, NULL, NULL), VQC_EINVAL);
  vqc_tensor_free(&d);
}
