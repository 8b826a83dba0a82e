/* test_gpu_fsq.c: FSQ quantize + indices on the device (kernels/fsq.cu)
 * against its CPU twins, label gpu. Outputs are poisoned before every run.
 *
 * Tolerances, and why (vqc/gpu.h, "FSQ and tanh"):
 *  - against the device's own definition written out here on the CPU
 *    (tanh correctly rounded: (float)tanh((double)x), then the CPU's float
 *    operations): codes and indices EQUAL, except at double-rounding hard
 *    cases (the double tanh within 2^-50 relative of a float midpoint, where
 *    glibc's and CUDA's double tanh may round to different floats); those
 *    are counted and must number 0 on these inputs;
 *  - against vqc_fsq_quantize (glibc's tanhf): a code may differ only where
 *    glibc's tanhf is not the correctly rounded value at that input AND the
 *    CPU's rounded value lies closer to its rounding boundary than that
 *    tanh difference (times the slope, plus 2 ulp) can move it -- i.e. a
 *    few ulp -- AND the device's code is the definition's. The same holds
 *    for the sign of a zero code (-0 against +0, same index), which is
 *    decided by the sign of a value near 0. Every difference is checked for
 *    all three and counted (the test prints the counts); on rows not built
 *    near boundaries, level differences must stay under 1e-4 of the
 *    elements (a CPU simulation of these inputs, with glibc 2.36, found 0;
 *    on rows built near boundaries they run at 1-2%; zero-sign differences
 *    are systematic for z = 0 at L = 6 and L = 16);
 *  - indices: always equal to the CPU's index of the device's own codes
 *    (vqc_fsq_codes_to_indices), and to the CPU's indices wherever a row's
 *    codes agree.
 * Inputs: normal * 3 (every level), values built to land within a few ulp
 * of a rounding boundary (they must take the double-precision path:
 * `refined` > 0), and specials (+-0, +-inf, +-100, subnormals). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test_util.h"
#include "vqc/fsq.h"

/* The device's definition on the CPU: correctly rounded tanh (via double),
 * then the CPU's float operations (this file is built with
 * -ffp-contract=off, so nothing is fused). *hard is set when the double
 * tanh is so close to a float midpoint that its rounding is not certain. */
static float tanh_cr(float x, int *hard) {
  double t = tanh((double)x);
  float f = (float)t;
  /* the midpoint between f and its neighbour on t's side */
  float g = nextafterf(f, t > (double)f ? INFINITY : -INFINITY);
  double mid = ((double)f + (double)g) / 2.0;
  if (t != 0.0 && fabs(t - mid) < ldexp(fabs(t), -50)) *hard = 1;
  return f;
}

static float code_def(const vqc_fsq *q, int i, float z, int *hard) {
  if (q->preserve_symmetry) {
    const float Lm1 = (float)(q->levels[i] - 1);
    const float t = tanh_cr(z, hard);
    return q->sym_scale[i] * floorf(Lm1 * (t + 1.0f) / 2.0f + 0.5f) - 1.0f;
  }
  const float b = tanh_cr(z + q->shift[i], hard) * q->half_l[i] - q->offset[i];
  return rintf(b) / q->half_width[i];
}

/* Why the CPU's (glibc's) code of element dim i, input z, may differ from
 * the definition's: *glibc_cr says whether glibc's tanhf is correctly
 * rounded at the tanh input (if it is, both compute the same floats and
 * cannot differ); *dist is the distance from the CPU's rounded value to its
 * rounding boundary (or to 0, for the sign of a zero code) and *allowed the
 * most a tanh difference of |tanhf - tanh_cr| can move that value (times
 * the slope, plus two ulp of rounding slack). */
static void explain(const vqc_fsq *q, int i, float z, int *glibc_cr,
                    double *dist, double *allowed) {
  const float x = q->preserve_symmetry ? z : z + q->shift[i];
  int hard = 0;
  const float t = tanhf(x), t_cr = tanh_cr(x, &hard);
  *glibc_cr = t == t_cr;
  float v, boundary;
  double slope;
  if (q->preserve_symmetry) {
    const float Lm1 = (float)(q->levels[i] - 1);
    v = Lm1 * (t + 1.0f) / 2.0f + 0.5f;
    boundary = rintf(v); /* floorf's boundaries are the integers */
    slope = Lm1 / 2.0;
  } else {
    v = t * q->half_l[i] - q->offset[i];
    boundary = floorf(v) + 0.5f;
    /* A value that rounds to 0 has a second decision: its sign. */
    if (rintf(v) == 0.0f && fabsf(v) < fabsf(v - boundary)) boundary = 0.0f;
    slope = q->half_l[i];
  }
  /* Rounding slack: the intermediate products are as large as the slope
   * (t * half_l, (L-1) * (t + 1)) even where v itself is tiny, so two ulp of
   * the larger of the two. */
  const float big = fmaxf(fabsf(v), (float)slope);
  const double ulp = (double)(nextafterf(big, INFINITY) - big);
  *dist = fabs((double)v - (double)boundary);
  *allowed = fabs((double)t - (double)t_cr) * slope + 2.0 * ulp;
}

/* Inputs whose bounded value lies within a few ulp of a rounding boundary:
 * invert the bound for a target k + 0.5 (integer k in symmetric mode) and
 * step a few floats either way. */
static float near_boundary_input(const vqc_fsq *q, int i, uint64_t *seed) {
  int L = q->levels[i];
  double target, t;
  if (q->preserve_symmetry) {
    int k = 1 + (int)(test_splitmix(seed) % (uint64_t)(L - 1)); /* 1..L-1 */
    target = k; /* v = (L-1)(t+1)/2 + 0.5 = k */
    t = 2.0 * (target - 0.5) / (L - 1) - 1.0;
  } else {
    int k = -(L / 2) + (int)(test_splitmix(seed) % (uint64_t)(L - 1));
    target = k + 0.5;
    t = (target + q->offset[i]) / q->half_l[i];
  }
  if (t >= 1.0) t = nextafter(1.0, 0.0);
  if (t <= -1.0) t = nextafter(-1.0, 0.0);
  double x = atanh(t) - (q->preserve_symmetry ? 0.0 : q->shift[i]);
  float z = (float)x;
  int steps = (int)(test_splitmix(seed) % 9) - 4; /* -4 .. 4 floats */
  for (; steps > 0; steps--) z = nextafterf(z, INFINITY);
  for (; steps < 0; steps++) z = nextafterf(z, -INFINITY);
  return z;
}

/* One configuration: builds inputs, runs both, checks as the header says. */
static void check_config(const int32_t *levels, int d, int C, bool sym,
                         int64_t M, uint64_t seed) {
  vqc_fsq q;
  cr_assert_eq(vqc_fsq_init(&q, levels, d, C, sym, 1e-3), VQC_OK, "%s",
               vqc_last_error());
  const int width = vqc_fsq_width(&q);
  const size_t n = (size_t)M * (size_t)width, groups = (size_t)M * C;
  float *z = malloc(n * 4), *cpu = malloc(n * 4), *gpu = malloc(n * 4);
  int32_t *cpu_idx = malloc(groups * 4), *gpu_idx = malloc(groups * 4),
          *own_idx = malloc(groups * 4);
  cr_assert(z && cpu && gpu && cpu_idx && gpu_idx && own_idx);

  /* A third of the rows normal * 3, a third near boundaries, the rest
   * specials mixed with normals. */
  static const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, 100.0f,
                                   -100.0f, 1e-40f, -1e-40f, 9.0f, -9.0f};
  for (size_t e = 0; e < n; e++) {
    const int i = (int)(e % (size_t)d);
    const size_t row = e / (size_t)width;
    if (row % 3 == 0)
      z[e] = 3.0f * test_normal(&seed);
    else if (row % 3 == 1)
      z[e] = near_boundary_input(&q, i, &seed);
    else
      z[e] = test_splitmix(&seed) % 4 == 0
                 ? specials[test_splitmix(&seed) % 10]
                 : 3.0f * test_normal(&seed);
  }
  cr_assert_eq(vqc_fsq_quantize(&q, z, M, cpu, cpu_idx), VQC_OK, "%s",
               vqc_last_error());

  vqc_tensor dz = gpu_upload(z, n * 4), dout = gpu_alloc(n * 4),
             didx = gpu_alloc(groups * 4);
  gpu_poison(gpu_ptr(&dout), n);
  gpu_poison(gpu_ptr(&didx), groups);
  int64_t refined = -1;
  cr_assert_eq(vqc_gpu_fsq_quantize(&q, gpu_ptr(&dz), M, gpu_ptr(&dout),
                                    gpu_ptr(&didx), &refined),
               VQC_OK, "%s", vqc_last_error());
  gpu_download(gpu, gpu_ptr(&dout), n * 4);
  gpu_download(gpu_idx, gpu_ptr(&didx), groups * 4);
  cr_expect_gt(refined, 0, "the near-boundary rows must take the double "
               "path (refined = %lld)", (long long)refined);

  /* Codes: against the definition, then against glibc. */
  /* Differences from glibc's codes, all explained: a neighbouring level on
   * rows built near boundaries (expected often: that is what they are for),
   * a neighbouring level elsewhere (expected ~never: bounded), and the sign
   * of a zero code (systematic for z = 0 at some even L: counted). */
  size_t hard_cases = 0, level_near = 0, level_other = 0, zero_sign = 0;
  size_t other_elems = 0;
  for (size_t e = 0; e < n; e++) {
    const int i = (int)(e % (size_t)d);
    const bool built_near = (e / (size_t)width) % 3 == 1;
    other_elems += !built_near;
    int hard = 0;
    const float want = code_def(&q, i, z[e], &hard);
    if (test_bits(gpu[e]) != test_bits(want)) {
      cr_assert(hard, "element %zu (z = %a, dim %d): device code %a, "
                "definition %a", e, (double)z[e], i, (double)gpu[e],
                (double)want);
      hard_cases++;
      continue;
    }
    if (test_bits(gpu[e]) != test_bits(cpu[e])) {
      int glibc_cr = 1;
      double dist = 0, allowed = 0;
      explain(&q, i, z[e], &glibc_cr, &dist, &allowed);
      cr_assert(!glibc_cr && dist <= allowed,
                "element %zu (z = %a, dim %d): device %a, CPU %a; glibc "
                "tanhf correctly rounded there: %d; CPU value %g from its "
                "boundary, a tanh difference explains %g",
                e, (double)z[e], i, (double)gpu[e], (double)cpu[e], glibc_cr,
                dist, allowed);
      if (gpu[e] == 0.0f && cpu[e] == 0.0f)
        zero_sign++;
      else if (built_near)
        level_near++;
      else
        level_other++;
    }
  }
  cr_expect_eq(hard_cases, 0, "%zu double-rounding hard cases", hard_cases);
  cr_expect_leq(level_other, other_elems / 10000 + 1,
                "%zu of %zu codes on rows not built near boundaries differ "
                "from glibc's by a level (each explained)",
                level_other, other_elems);
  printf("fsq levels[0]=%d d=%d C=%d sym=%d: %zu elements, %lld refined; "
         "differences from glibc, each explained: %zu level (rows built near "
         "boundaries), %zu level (other rows), %zu sign of a zero code; %zu "
         "hard cases\n",
         (int)levels[0], d, C, (int)sym, n, (long long)refined, level_near,
         level_other, zero_sign, hard_cases);

  /* Indices: the CPU's index of the device's own codes, always. */
  cr_assert_eq(vqc_fsq_codes_to_indices(&q, gpu, M, own_idx), VQC_OK, "%s",
               vqc_last_error());
  for (size_t g = 0; g < groups; g++) {
    cr_assert_eq(gpu_idx[g], own_idx[g], "group %zu: device index %d, CPU "
                 "index of the device codes %d", g, (int)gpu_idx[g],
                 (int)own_idx[g]);
    if (memcmp(gpu + g * (size_t)d, cpu + g * (size_t)d, (size_t)d * 4) == 0)
      cr_assert_eq(gpu_idx[g], cpu_idx[g], "group %zu", g);
  }

  vqc_tensor_free(&dz);
  vqc_tensor_free(&dout);
  vqc_tensor_free(&didx);
  free(z), free(cpu), free(gpu), free(cpu_idx), free(gpu_idx), free(own_idx);
}

Test(gpu_fsq, default_mode_matches_cpu) {
  gpu_require();
  const int32_t levels[] = {8, 5, 5, 5};
  check_config(levels, 4, 1, false, 300000, 101);
}

Test(gpu_fsq, preserve_symmetry_matches_cpu) {
  gpu_require();
  const int32_t levels[] = {7, 5, 3, 2};
  check_config(levels, 4, 1, true, 300000, 102);
}

Test(gpu_fsq, several_codebooks_and_odd_widths) {
  gpu_require();
  const int32_t levels3[] = {8, 6, 5};
  check_config(levels3, 3, 2, false, 100003, 103);
  const int32_t levels1[] = {16};
  check_config(levels1, 1, 3, false, 50001, 104);
  const int32_t levels7[] = {3, 3, 3, 3, 3, 3, 4};
  check_config(levels7, 7, 1, true, 70001, 105);
}

Test(gpu_fsq, in_place_and_two_runs_give_the_same_bits) {
  gpu_require();
  const int32_t levels[] = {8, 5, 5, 5};
  vqc_fsq q;
  cr_assert_eq(vqc_fsq_init(&q, levels, 4, 1, false, 1e-3), VQC_OK);
  const int64_t M = 65537;
  const size_t n = (size_t)M * 4;
  float *z = malloc(n * 4), *a = malloc(n * 4), *b = malloc(n * 4);
  cr_assert(z && a && b);
  uint64_t seed = 106;
  for (size_t e = 0; e < n; e++) z[e] = 2.0f * test_normal(&seed);
  vqc_tensor dz = gpu_upload(z, n * 4), dout = gpu_alloc(n * 4);
  gpu_poison(gpu_ptr(&dout), n);
  cr_assert_eq(vqc_gpu_fsq_quantize(&q, gpu_ptr(&dz), M, gpu_ptr(&dout), NULL,
                                    NULL),
               VQC_OK, "%s", vqc_last_error());
  gpu_download(a, gpu_ptr(&dout), n * 4);
  /* in place: out == z */
  cr_assert_eq(vqc_gpu_fsq_quantize(&q, gpu_ptr(&dz), M, gpu_ptr(&dz), NULL,
                                    NULL),
               VQC_OK, "%s", vqc_last_error());
  gpu_download(b, gpu_ptr(&dz), n * 4);
  cr_expect_eq(memcmp(a, b, n * 4), 0, "in-place run differs");
  vqc_tensor_free(&dz);
  vqc_tensor_free(&dout);
  free(z), free(a), free(b);
}

Test(gpu_fsq, nan_is_reported_like_the_cpu) {
  gpu_require();
  const int32_t levels[] = {8, 5, 5};
  vqc_fsq q;
  cr_assert_eq(vqc_fsq_init(&q, levels, 3, 2, false, 1e-3), VQC_OK);
  const int64_t M = 1000;
  const size_t n = (size_t)M * 6;
  float *z = calloc(n, 4), *out = malloc(n * 4);
  cr_assert(z && out);
  z[3 * 6 + 4] = NAN; /* row 3, column 4 */
  z[700 * 6 + 1] = NAN;
  cr_assert_eq(vqc_fsq_quantize(&q, z, M, out, NULL), VQC_EINVAL);
  cr_assert_not_null(strstr(vqc_last_error(), "z[3][4] is NaN"));
  vqc_tensor dz = gpu_upload(z, n * 4), dout = gpu_alloc(n * 4);
  cr_expect_eq(vqc_gpu_fsq_quantize(&q, gpu_ptr(&dz), M, gpu_ptr(&dout), NULL,
                                    NULL),
               VQC_EINVAL);
  cr_expect_not_null(strstr(vqc_last_error(), "z[3][4] is NaN"), "%s",
                     vqc_last_error());
  vqc_tensor_free(&dz);
  vqc_tensor_free(&dout);
  free(z), free(out);
}
