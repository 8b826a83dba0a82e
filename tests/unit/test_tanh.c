/* test_tanh.c: vqc_tanh_exact (lib/src/quant/tanh_exact.h), the correctly rounded
 * float tanh that FSQ uses on the CPU and the GPU, against an independent
 * reference, and every kernel of this CPU (fsq_tanh_with: scalar, AVX2)
 * against the scalar definition.
 *
 * The reference (ref_tanh): MPFR's tanh at 24 bits, round to nearest, which
 * is correctly rounded by MPFR's contract (Debian: libmpfr-dev). A build
 * without MPFR uses glibc's tanhl (x87 long double, 64-bit mantissa, error
 * a few units of 2^-64) rounded to float, and only where tanhl is farther
 * than 2^-50 relative from the float midpoint on its side, so that its
 * rounding is certain; the others are counted and skipped, and the tests
 * that need MPFR (the hard cases, the error bound) skip with a message.
 *
 * Tolerances: none. Every result must equal the reference bit for bit,
 * sign of zero included; every kernel must equal the scalar definition bit
 * for bit, and take the slow path on the same inputs. The one tolerance is
 * the fast path's error bound (tanh_exact.h, step 3: 8.2 * 2^-53 <
 * 2^-49.9 relative), which is checked as a bound, on a sample.
 *
 * The exhaustive run over all 2^32 inputs is tests/tanh_exhaustive.c (not a
 * default test). */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/fsq_internal.h"
#include "quant/tanh_exact.h"

#ifdef VQC_HAVE_MPFR
#include <mpfr.h>
#endif

static uint32_t bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
static float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* The correctly rounded tanh of x; *undecided set (and the return value
 * meaningless) when this build cannot decide it. */
static float ref_tanh(float x, int *undecided) {
  *undecided = 0;
  if (isnan(x)) return x;
#ifdef VQC_HAVE_MPFR
  /* MPFR at 24 bits rounds like float wherever the result is a normal
   * float; tanh(x) is subnormal only for subnormal x, where it rounds to x
   * (tanh_exact.h step 1) -- that is checked with tanhl below instead. */
  if (fabsf(x) >= 0x1p-100f) {
    mpfr_t m;
    mpfr_init2(m, 24);
    mpfr_set_flt(m, x, MPFR_RNDN);
    mpfr_tanh(m, m, MPFR_RNDN);
    const float r = mpfr_get_flt(m, MPFR_RNDN);
    mpfr_clear(m);
    return r;
  }
#endif
  const long double t = tanhl((long double)x);
  const float f = (float)t;
  if (t == (long double)f) return f; /* 0, +-1 */
  const float g = nextafterf(f, t > (long double)f ? INFINITY : -INFINITY);
  const long double mid = ((long double)f + (long double)g) / 2;
  if (!(fabsl(t - mid) > ldexpl(fabsl(t), -50))) *undecided = 1;
  return f;
}

static void expect_exact(float x) {
  int undecided;
  const float want = ref_tanh(x, &undecided);
  const float got = vqc_tanh_exact(x);
  if (undecided) return;
  cr_expect_eq(bits(got), bits(want), "tanh(%a = %.9g): got %a, want %a",
               (double)x, (double)x, (double)got, (double)want);
}

/* ---- specials */

Test(tanh_exact, zeros_infinities_nan) {
  cr_expect_eq(bits(vqc_tanh_exact(0.0f)), bits(0.0f));
  cr_expect_eq(bits(vqc_tanh_exact(-0.0f)), bits(-0.0f));
  cr_expect_eq(vqc_tanh_exact(INFINITY), 1.0f);
  cr_expect_eq(vqc_tanh_exact(-INFINITY), -1.0f);
  cr_expect_eq(vqc_tanh_exact(FLT_MAX), 1.0f);
  cr_expect_eq(vqc_tanh_exact(-FLT_MAX), -1.0f);
  /* NaN comes back as it went in, payload and sign included */
  const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7fc12345u, 0x7f800001u};
  for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++)
    cr_expect_eq(bits(vqc_tanh_exact(from_bits(nans[i]))), nans[i], "%08x",
                 nans[i]);
}

Test(tanh_exact, subnormals_and_tiny_inputs_round_to_themselves) {
  /* Step 1: for |x| <= 2^-12 the nearest float to tanh(x) is x. */
  const float xs[] = {0x1p-149f, -0x1p-149f, 0x1.fffffcp-127f, 0x1p-126f,
                      -0x1.000002p-126f, 0x1p-100f, 1e-10f, 0x1p-13f,
                      0x1.fffffep-13f, 0x1p-12f, -0x1p-12f};
  for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
    cr_expect_eq(bits(vqc_tanh_exact(xs[i])), bits(xs[i]), "x = %a",
                 (double)xs[i]);
    expect_exact(xs[i]);
  }
  /* Just above 2^-12 the computed path starts: still exact there. */
  float x = 0x1p-12f;
  for (int i = 0; i < 2000; i++) {
    x = nextafterf(x, 1.0f);
    expect_exact(x);
    expect_exact(-x);
  }
}

Test(tanh_exact, saturation_region) {
  /* tanh rounds to 1 from 0.5 ln(2^26 - 1) = 9.01091... on; the clamp at 10
   * must not change anything. Walk across both. */
  const float starts[] = {9.0f, 9.9999f, 15.0f, 88.0f, 1e10f};
  for (size_t s = 0; s < sizeof starts / sizeof starts[0]; s++) {
    float x = starts[s];
    for (int i = 0; i < 20000; i++) {
      expect_exact(x);
      expect_exact(-x);
      x = nextafterf(x, INFINITY);
    }
  }
  cr_expect_lt(vqc_tanh_exact(9.0f), 1.0f);
  cr_expect_eq(vqc_tanh_exact(9.02f), 1.0f);
}

/* ---- the hard cases */

/* The 20 positive inputs whose exact tanh lies closest to a float midpoint
 * (so that a double result rounded once to float could go either way), with
 * that distance relative to tanh(x), as tests/tanh_exhaustive.c found them
 * among all 2^32 floats (only 32 magnitudes take the slow path at all);
 * plus x = 1.1355606, where glibc 2.36's tanhf is an ulp off (0x1.a0363cp-1;
 * the exact value rounds to 0x1.a0363ep-1, PyTorch's CPU tanh's answer). */
static const float hard_inputs[] = {
    0x1.22b41ap+0f, /* 1.1355606 */
    0x1.86fbc4p-10f, /* 0.00149148353: 2^-50.28 */
    0x1.dc0accp-2f, /* 0.464884937: 2^-49.60 */
    0x1.5969ap+2f, /* 5.39707184: 2^-49.21 */
    0x1.a83722p-6f, /* 0.0258920509: 2^-49.07 */
    0x1.8bd194p+2f, /* 6.18466663: 2^-48.81 */
    0x1.f860aap-5f, /* 0.0615695305: 2^-48.77 */
    0x1.4ddf04p+2f, /* 5.21673679: 2^-48.62 */
    0x1.f178fcp+0f, /* 1.94325233: 2^-48.32 */
    0x1.279b08p+1f, /* 2.30941868: 2^-48.24 */
    0x1.2d5c5cp-6f, /* 0.0183936022: 2^-48.02 */
    0x1.2ff78ep+0f, /* 1.18737113: 2^-47.93 */
    0x1.916c0ap-8f, /* 0.00612521404: 2^-47.90 */
    0x1.ed5fdcp-2f, /* 0.481810987: 2^-47.87 */
    0x1.b79208p-10f, /* 0.00167682813: 2^-47.81 */
    0x1.8f60bep+2f, /* 6.24027967: 2^-47.80 */
    0x1.416cfep-1f, /* 0.627784669: 2^-47.59 */
    0x1.713744p-12f, /* 0.000352111703: 2^-47.52 */
    0x1.713746p-12f, /* 0.000352111732: 2^-47.42 */
    0x1.dc9076p-4f, /* 0.116348706: 2^-47.20 */
    0x1.679054p+0f, /* 1.40454602: 2^-47.19 */
};

Test(tanh_exact, hard_cases) {
#ifndef VQC_HAVE_MPFR
  cr_skip_test("MPFR not found when configured (Debian: libmpfr-dev): the "
               "hard cases need it");
#else
  cr_expect_eq(bits(vqc_tanh_exact(1.1355606f)), bits(0x1.a0363ep-1f));
  unsigned slow = 0;
  for (size_t i = 0; i < sizeof hard_inputs / sizeof hard_inputs[0]; i++) {
    const float x = hard_inputs[i];
    expect_exact(x);
    expect_exact(-x);
    (void)vqc_tanh_exact_counted(x, &slow);
    /* and the slow path alone gets them right too */
    int undecided;
    cr_expect_eq(bits(vqc_tanh_exact_slow((double)fabsf(x))),
                 bits(ref_tanh(fabsf(x), &undecided)), "slow path, x = %a",
                 (double)x);
  }
  /* All but 1.1355606 are there because the fast path cannot decide them. */
  cr_expect_geq(slow, sizeof hard_inputs / sizeof hard_inputs[0] - 1,
                "only %u of the hard cases took the slow path", slow);
#endif
}

/* ---- dense sample over every exponent */

/* Bit patterns 0, S, 2S, ... (S = 1021, odd and prime, so the low bits
 * vary too): 4.2 million inputs, both signs, every exponent, NaNs. */
#define DENSE_STRIDE 1021u

Test(tanh_exact, dense_sample_against_reference, .timeout = 280) {
  uint64_t n = 0, undecided_n = 0, wrong = 0, slow_total = 0;
  for (uint64_t u = 0; u < (1ull << 32); u += DENSE_STRIDE) {
    const float x = from_bits((uint32_t)u);
    int undecided;
    const float want = ref_tanh(x, &undecided);
    unsigned slow = 0;
    const float got = vqc_tanh_exact_counted(x, &slow);
    slow_total += slow;
    n++;
    if (undecided) {
      undecided_n++;
      continue;
    }
    const bool ok = isnan(x) ? bits(got) == bits(x) : bits(got) == bits(want);
    if (!ok && wrong++ < 10)
      cr_log_error("tanh(%a): got %a, want %a", (double)x, (double)got,
                   (double)want);
  }
  printf("tanh dense sample: %llu inputs, %llu wrong, %llu undecided by the "
         "reference, %llu took the slow path\n",
         (unsigned long long)n, (unsigned long long)wrong,
         (unsigned long long)undecided_n, (unsigned long long)slow_total);
  cr_expect_eq(wrong, 0);
  /* tanhl decides all but a handful; MPFR decides all */
  cr_expect_leq(undecided_n, n / 100000);
}

/* The slow path on its own (normally 1 in 4 million inputs) over the
 * computed range, so that its arithmetic is tested broadly, not only on
 * the few inputs that need it. */
Test(tanh_exact, slow_path_alone_is_correct) {
  uint64_t n = 0, wrong = 0;
  const uint32_t lo = bits(0x1.000002p-12f), hi = bits(10.0f);
  for (uint32_t u = lo; u <= hi; u += 4093u) {
    const float x = from_bits(u);
    int undecided;
    const float want = ref_tanh(x, &undecided);
    if (undecided) continue;
    const float got = vqc_tanh_exact_slow((double)x);
    n++;
    if (bits(got) != bits(want) && wrong++ < 10)
      cr_log_error("slow tanh(%a): got %a, want %a", (double)x, (double)got,
                   (double)want);
  }
  cr_expect_eq(wrong, 0, "%llu of %llu wrong", (unsigned long long)wrong,
               (unsigned long long)n);
  cr_expect_gt(n, 25000);
}

/* The fast path's error bound of tanh_exact.h (step 3), checked as a
 * bound: |t - tanh(a)| <= 2^-49.9 tanh(a) on a sample of the computed
 * range, with tanh(a) from MPFR at 120 bits. */
Test(tanh_exact, fast_path_error_bound) {
#ifndef VQC_HAVE_MPFR
  cr_skip_test("MPFR not found when configured (Debian: libmpfr-dev)");
#else
  mpfr_t T, d;
  mpfr_inits2(120, T, d, (mpfr_ptr)0);
  double worst = 0.0;
  float worst_x = 0.0f;
  const uint32_t lo = bits(0x1.000002p-12f), hi = bits(10.0f);
  for (uint32_t u = lo; u <= hi; u += 509u) {
    const float a = from_bits(u);
    int hard;
    const double t = vqc_tanh_fast((double)a, &hard);
    mpfr_set_flt(T, a, MPFR_RNDN);
    mpfr_tanh(T, T, MPFR_RNDN);
    mpfr_set_d(d, t, MPFR_RNDN);
    mpfr_sub(d, d, T, MPFR_RNDN);
    mpfr_div(d, d, T, MPFR_RNDN);
    const double rel = fabs(mpfr_get_d(d, MPFR_RNDN));
    if (rel > worst) {
      worst = rel;
      worst_x = a;
    }
  }
  mpfr_clears(T, d, (mpfr_ptr)0);
  mpfr_free_cache();
  printf("tanh fast path: largest relative error 2^%.2f (x = %a); bound "
         "2^-49.9, hard band 2^-47\n", log2(worst), (double)worst_x);
  cr_expect_leq(worst, ldexp(8.2, -53), "fast path error 2^%.2f at x = %a",
                log2(worst), (double)worst_x);
#endif
}

/* The slow path's value (double-double, before rounding) within 2^-98 of
 * tanh(a), the accuracy tanh_exact.h step 4 states, on a sample and on the
 * hard cases; tanh(a) from MPFR at 160 bits. */
Test(tanh_exact, slow_path_error_bound) {
#ifndef VQC_HAVE_MPFR
  cr_skip_test("MPFR not found when configured (Debian: libmpfr-dev)");
#else
  mpfr_t T, d;
  mpfr_inits2(160, T, d, (mpfr_ptr)0);
  double worst = 0.0;
  float worst_x = 0.0f;
  const uint32_t lo = bits(0x1.000002p-12f), hi = bits(10.0f);
  const size_t nh = sizeof hard_inputs / sizeof hard_inputs[0];
  for (uint32_t u = lo, k = 0; u <= hi; u += 8191u, k++) {
    const float a = k < nh ? hard_inputs[k] : from_bits(u);
    const vqc_tanh_dd t = vqc_tanh_slow_dd((double)a);
    mpfr_set_flt(T, a, MPFR_RNDN);
    mpfr_tanh(T, T, MPFR_RNDN);
    mpfr_set_d(d, t.hi, MPFR_RNDN);
    mpfr_add_d(d, d, t.lo, MPFR_RNDN); /* exact at 160 bits */
    mpfr_sub(d, d, T, MPFR_RNDN);
    mpfr_div(d, d, T, MPFR_RNDN);
    const double rel = fabs(mpfr_get_d(d, MPFR_RNDN));
    if (rel > worst) {
      worst = rel;
      worst_x = a;
    }
  }
  mpfr_clears(T, d, (mpfr_ptr)0);
  mpfr_free_cache();
  printf("tanh slow path: largest relative error 2^%.2f (x = %a); bound "
         "2^-98\n", log2(worst), (double)worst_x);
  cr_expect_leq(worst, 0x1p-98, "slow path error 2^%.2f at x = %a",
                log2(worst), (double)worst_x);
#endif
}

/* ---- every kernel equals the scalar definition */

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

Test(tanh_exact, kernels_equal_the_scalar_definition) {
  /* random bit patterns, values in the computed range, the hard cases and
   * specials, at lengths that leave tails */
  enum { N = 1 << 21 };
  float *x = malloc(N * sizeof(float)), *want = malloc(N * sizeof(float)),
        *got = malloc(N * sizeof(float));
  cr_assert(x && want && got);
  uint64_t seed = 42;
  const size_t nh = sizeof hard_inputs / sizeof hard_inputs[0];
  for (size_t i = 0; i < N; i++) {
    const uint64_t r = splitmix(&seed);
    switch (r % 4) {
    case 0: x[i] = from_bits((uint32_t)(r >> 32)); break;
    case 1: x[i] = (float)((double)(r >> 11) * 0x1p-53 * 24.0 - 12.0); break;
    case 2: x[i] = hard_inputs[(r >> 8) % nh] * ((r >> 40) & 1 ? -1.0f : 1.0f);
            break;
    default: {
      const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 0x1p-149f,
                          0x1p-12f, 10.0f, 9.0109f, -1e-30f};
      x[i] = sp[(r >> 8) % 10];
    }
    }
  }
  unsigned slow_ref = 0;
  for (size_t i = 0; i < N; i++) want[i] = vqc_tanh_exact_counted(x[i], &slow_ref);
  cr_expect_gt(slow_ref, 0, "the hard cases take the slow path");
  int kernels = 0;
  for (int k = 0; k < FSQ_KERNEL_COUNT; k++) {
    if (!fsq_kernel_available((fsq_kernel)k)) continue;
    kernels++;
    const size_t lens[] = {N, N - 1, 13, 7, 1};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
      const size_t n = lens[li];
      memset(got, 0xA5, N * sizeof(float)); /* poison */
      const int64_t slow = fsq_tanh_with((fsq_kernel)k, x, got, n);
      size_t bad = 0, first = 0;
      for (size_t i = 0; i < n; i++)
        if (bits(got[i]) != bits(want[i]) && bad++ == 0) first = i;
      cr_expect_eq(bad, 0, "kernel %s, n %zu: %zu differ, first x = %a: %a "
                   "vs %a", fsq_kernel_name((fsq_kernel)k), n, bad,
                   (double)x[first], (double)got[first], (double)want[first]);
      if (n == N)
        cr_expect_eq(slow, (int64_t)slow_ref, "kernel %s: slow path count",
                     fsq_kernel_name((fsq_kernel)k));
    }
    /* in place */
    memcpy(got, x, N * sizeof(float));
    fsq_tanh_with((fsq_kernel)k, got, got, N);
    cr_expect_eq(memcmp(got, want, N * sizeof(float)), 0, "kernel %s in place",
                 fsq_kernel_name((fsq_kernel)k));
  }
  printf("tanh kernels checked against the scalar definition: %d (best: %s)\n",
         kernels, fsq_kernel_name(fsq_kernel_best()));
  cr_expect_eq(fsq_tanh_with(FSQ_KERNEL_COUNT, x, got, 1), -1);
  free(x);
  free(want);
  free(got);
}
