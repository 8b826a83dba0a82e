/* tanh_exact.h: tanh for float, correctly rounded, as one definition that C
 * (lib/src/quant/fsq.c and its SIMD kernels) and CUDA (kernels/fsq_kernels.cuh)
 * compile from the same source, so that FSQ's codes are the same bits on
 * every CPU, every GPU and every libm.
 *
 * DEFINITION. vqc_tanh_exact(x) is the float nearest to the exact real
 * tanh(x) (round to nearest, ties to even; a tie cannot occur for x != 0,
 * tanh of a nonzero rational being irrational), in the default rounding
 * mode. Specials: tanh(+-0) = +-0, tanh(+-inf) = +-1, tanh(NaN) = that NaN
 * (returned unchanged). Why not libm's tanhf: glibc's is not correctly
 * rounded (e.g. x = 1.1355606 = 0x1.22b41ap+0: glibc 2.36 gives
 * 0x1.a0363cp-1, the exact value is 0x1.a0363d3c...p-1, which rounds to
 * 0x1.a0363ep-1 -- what PyTorch's CPU tanh gives), CUDA's tanhf is within 2
 * ulp, and neither equals the other; a correctly rounded result is the one
 * definition every implementation can meet.
 *
 * HOW (vqc_tanh_exact_counted). With a = |x|:
 *   1. a <= 2^-12 (and NaN): the result is x. tanh(a) lies in
 *      (a - a^3/3, a), and a^3/3 <= a * 2^-24 / 3 < a * 2^-25, which is at
 *      most half the gap from a to the float below it, so a is the nearest
 *      float (also for subnormals and zero).
 *   2. a is clamped to 10 (tanh(a) rounds to 1.0f for every a above
 *      0.5 * ln(2^26 - 1) = 9.0109..., so clamping changes no result; it
 *      keeps exp finite and makes inf an ordinary input).
 *   3. The fast path, in double: with y = -2a (exact),
 *        k  = nearest integer to y / ln2 (k in [-29, 0]),
 *        r  = (y - k*LN2_HI) - k*LN2_LO, |r| <= 0.3467 (two fmas),
 *        p  = r + r^2 * (1/2! + r/3! + ... + r^11/13!)   (Horner, fmas),
 *             i.e. expm1(r), Taylor to degree 13,
 *        m  = 2^k * p + (2^k - 1) = expm1(y)   (one fma; 2^k - 1 exact),
 *        t  = -m / (2 + m)  = (1 - e^-2a) / (1 + e^-2a) = tanh(a).
 *      Error bound, relative to tanh(a), eps = 2^-53:
 *        truncation of the series: |r|^13 / 14! * e^|r| / (1 - |r|/2)
 *          <= 2^-55.9 of p;
 *        p as evaluated (Horner rounding, r^2, the final fma, the error of
 *          r for k != 0 including ln2's representation): <= 1.7 eps of p;
 *        m: for k = 0, m = p exactly; for k < 0, |m| >= 0.29 (2^-1 e^r - 1
 *          with r <= 0.3467), so 2^k times p's absolute error (<= 1.2 eps)
 *          plus m's own rounding give <= 3.1 eps of m;
 *        t: an error of rel. e in m moves -m/(2+m) by 2e/(2+m) <= 2e
 *          relative (2 + m in [1, 2]), plus one rounding in 2 + m and one
 *          in the division: <= (2 * 3.1 + 2) eps = 8.2 eps < 2^-49.9.
 *      The fast result f = (float)t is therefore correctly rounded unless
 *      a float rounding midpoint lies within 2^-49.9 * t of t. The check
 *      uses 2^-47 * t (8x the bound): t is in (2^-13, 1) where floats are
 *      normal, so the bits of t's double mantissa below float precision
 *      (the low 29) say where t lies between two floats; midpoint is
 *      2^28 of them, and one unit is a double ulp <= 2^-52 t. A t whose
 *      low 29 bits are within 64 units (64 * 2^-53 t <= 2^-47 t, since
 *      t / ulp(t) < 2^53) of 2^28 is "hard" and goes to step 4. Random
 *      inputs are hard about 129 / 2^29 = 1 in 4.2 million times.
 *   4. The slow path (vqc_tanh_exact_slow): the same formula in double-
 *      double arithmetic (about 104 bits): r from a three-part ln2, expm1(r)
 *      by Taylor to degree 24 in Horner form dividing by n at each step
 *      (remainder < 2^-110 of p), m, 2 + m and the quotient, each step
 *      relative error about 2^-104, in all well under 2^-98 (test_tanh
 *      measures the largest error of vqc_tanh_slow_dd on a sample and the
 *      hard cases against MPFR: 2^-104.9). The double-double t_hi + t_lo is
 *      then rounded to float exactly (t_hi alone rounds correctly unless it
 *      IS a float midpoint, when the sign of t_lo decides). That is correct
 *      unless tanh(x) lies within 2^-98 relative of a midpoint, and no
 *      float's does: over all 2^32 inputs (tests/tanh_exhaustive.c, MPFR)
 *      the closest approach is 2^-50.28 relative (x = 0x1.86fbc4p-10), and
 *      only 64 inputs (32 magnitudes) take the slow path at all. The same
 *      run found every one of the 2^32 results, of the scalar code and of
 *      the AVX2 kernel, equal to MPFR's correctly rounded tanh.
 *   5. The sign is put back: the result is copysign(f, x) (rounding to
 *      nearest is symmetric, and tanh is odd).
 *
 * Portability of the bits. Only IEEE double +, -, *, / and fma (each
 * correctly rounded by IEEE 754 in C's fma(), x86 FMA3 and CUDA) and
 * conversions appear; fma is always called explicitly. A compiler that
 * contracted the one remaining a*b+c (y/ln2 + 1.5*2^52, the k estimate)
 * could pick the other k only where y/ln2 is within an ulp of a half-
 * integer, where either k leaves |r| <= 0.3467: intermediate values (and
 * whether step 4 runs) could change, the result could not. The project
 * builds with -ffp-contract=off anyway. Do not build this with fast-math
 * (-ffast-math, nvcc --use_fast_math): those may reassociate the double-
 * double steps and break the bound; the project's CMake files never add
 * them (see kernels/CMakeLists.txt and lib/CMakeLists.txt).
 *
 * The AVX2 kernel in fsq_avx2.c computes steps 1-3 and 5 with the same
 * operations in the same order, four lanes at a time, and calls
 * vqc_tanh_exact_slow for hard lanes: its results are the same bits
 * (tests/unit/test_tanh.c). */
#ifndef VQC_TANH_EXACT_H
#define VQC_TANH_EXACT_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Fast math may reassociate the double-double steps and flush or
 * approximate what this file's error bound counts on. GCC and Clang say so
 * with __FAST_MATH__; nvcc (13) defines nothing for --use_fast_math, so
 * kernels/CMakeLists.txt refuses it and pins the flags instead. */
#if defined(__FAST_MATH__) || defined(__USE_FAST_MATH__)
#error "tanh_exact.h must not be compiled with -ffast-math / --use_fast_math"
#endif

#if defined(__CUDACC__)
#define VQC_TANH_HD __host__ __device__
#else
#define VQC_TANH_HD
#endif

/* Step 1 and 2 thresholds (floats). */
#define VQC_TANH_TINY 0x1p-12f
#define VQC_TANH_CLAMP 10.0f
/* Step 3: 1/ln2, the rounding constant 1.5 * 2^52, ln2 = HI + LO (+ LO2
 * for the slow path; the three are the leading doubles of ln2's binary
 * expansion). */
#define VQC_TANH_INV_LN2 0x1.71547652b82fep+0
#define VQC_TANH_MAGIC 0x1.8p52
#define VQC_TANH_LN2_HI 0x1.62e42fefa39efp-1
#define VQC_TANH_LN2_LO 0x1.abc9e3b39803fp-56
#define VQC_TANH_LN2_LO2 0x1.7b57a079a1934p-111
/* 1/n!, n = 2..13, each the nearest double. */
#define VQC_TANH_C2 0x1.0000000000000p-1
#define VQC_TANH_C3 0x1.5555555555555p-3
#define VQC_TANH_C4 0x1.5555555555555p-5
#define VQC_TANH_C5 0x1.1111111111111p-7
#define VQC_TANH_C6 0x1.6c16c16c16c17p-10
#define VQC_TANH_C7 0x1.a01a01a01a01ap-13
#define VQC_TANH_C8 0x1.a01a01a01a01ap-16
#define VQC_TANH_C9 0x1.71de3a556c734p-19
#define VQC_TANH_C10 0x1.27e4fb7789f5cp-22
#define VQC_TANH_C11 0x1.ae64567f544e4p-26
#define VQC_TANH_C12 0x1.1eed8eff8d898p-29
#define VQC_TANH_C13 0x1.6124613a86d09p-33
/* Step 3's check: the low 29 mantissa bits of t, and the half-width of the
 * hard band around the midpoint 2^28 in those units. */
#define VQC_TANH_LOW_MASK 0x1FFFFFFFull
#define VQC_TANH_MID 0x10000000ull
#define VQC_TANH_BAND 64ull
/* Step 4: Taylor degree of the double-double expm1. */
#define VQC_TANH_DD_TERMS 24

VQC_TANH_HD static inline uint64_t vqc_tanh_bits(double v) {
  uint64_t b;
  memcpy(&b, &v, sizeof b);
  return b;
}
VQC_TANH_HD static inline double vqc_tanh_from_bits(uint64_t b) {
  double v;
  memcpy(&v, &b, sizeof v);
  return v;
}

/* 2^k from s = y/ln2 + 1.5*2^52 (whose low mantissa bits hold k), as the
 * AVX2 kernel builds it: (bits(s) << 52) + (1023 << 52), modulo 2^64. */
VQC_TANH_HD static inline double vqc_tanh_scale(double s) {
  return vqc_tanh_from_bits((vqc_tanh_bits(s) << 52) + (1023ull << 52));
}

/* Step 3 for 2^-12 < a <= 10 (a a float value): t ~ tanh(a), and *hard set
 * when t is within the band of a float midpoint. */
VQC_TANH_HD static inline double vqc_tanh_fast(double a, int *hard) {
  const double y = -2.0 * a;
  const double yk = y * VQC_TANH_INV_LN2;
  const double s = yk + VQC_TANH_MAGIC;
  const double kd = s - VQC_TANH_MAGIC;
  const double scale = vqc_tanh_scale(s);
  double r = fma(kd, -VQC_TANH_LN2_HI, y);
  r = fma(kd, -VQC_TANH_LN2_LO, r);
  const double r2 = r * r;
  double q = VQC_TANH_C13;
  q = fma(q, r, VQC_TANH_C12);
  q = fma(q, r, VQC_TANH_C11);
  q = fma(q, r, VQC_TANH_C10);
  q = fma(q, r, VQC_TANH_C9);
  q = fma(q, r, VQC_TANH_C8);
  q = fma(q, r, VQC_TANH_C7);
  q = fma(q, r, VQC_TANH_C6);
  q = fma(q, r, VQC_TANH_C5);
  q = fma(q, r, VQC_TANH_C4);
  q = fma(q, r, VQC_TANH_C3);
  q = fma(q, r, VQC_TANH_C2);
  const double p = fma(r2, q, r);
  const double m = fma(scale, p, scale - 1.0);
  const double t = -m / (2.0 + m);
  const uint64_t low = vqc_tanh_bits(t) & VQC_TANH_LOW_MASK;
  *hard = low >= VQC_TANH_MID - VQC_TANH_BAND &&
          low <= VQC_TANH_MID + VQC_TANH_BAND;
  return t;
}

/* ---- double-double arithmetic for the slow path (hi + lo, |lo| <= ulp(hi)/2) */

typedef struct vqc_tanh_dd {
  double hi, lo;
} vqc_tanh_dd;

VQC_TANH_HD static inline vqc_tanh_dd vqc_tanh_dd_make(double hi, double lo) {
  vqc_tanh_dd r;
  r.hi = hi;
  r.lo = lo;
  return r;
}
/* a + b exactly, assuming |a| >= |b| or a == 0. */
VQC_TANH_HD static inline vqc_tanh_dd vqc_tanh_fast_two_sum(double a,
                                                            double b) {
  const double s = a + b;
  return vqc_tanh_dd_make(s, b - (s - a));
}
/* a + b exactly. */
VQC_TANH_HD static inline vqc_tanh_dd vqc_tanh_two_sum(double a, double b) {
  const double s = a + b;
  const double bb = s - a;
  return vqc_tanh_dd_make(s, (a - (s - bb)) + (b - bb));
}
/* a * b exactly. */
VQC_TANH_HD static inline vqc_tanh_dd vqc_tanh_two_prod(double a, double b) {
  const double p = a * b;
  return vqc_tanh_dd_make(p, fma(a, b, -p));
}
VQC_TANH_HD static inline vqc_tanh_dd vqc_tanh_dd_add(vqc_tanh_dd x,
                                                      vqc_tanh_dd y) {
  vqc_tanh_dd s = vqc_tanh_two_sum(x.hi, y.hi);
  const vqc_tanh_dd t = vqc_tanh_two_sum(x.lo, y.lo);
  s = vqc_tanh_fast_two_sum(s.hi, s.lo + t.hi);
  return vqc_tanh_fast_two_sum(s.hi, s.lo + t.lo);
}
VQC_TANH_HD static inline vqc_tanh_dd vqc_tanh_dd_add_d(vqc_tanh_dd x,
                                                        double b) {
  const vqc_tanh_dd s = vqc_tanh_two_sum(x.hi, b);
  return vqc_tanh_fast_two_sum(s.hi, s.lo + x.lo);
}
VQC_TANH_HD static inline vqc_tanh_dd vqc_tanh_dd_neg(vqc_tanh_dd x) {
  return vqc_tanh_dd_make(-x.hi, -x.lo);
}
VQC_TANH_HD static inline vqc_tanh_dd vqc_tanh_dd_mul(vqc_tanh_dd x,
                                                      vqc_tanh_dd y) {
  vqc_tanh_dd p = vqc_tanh_two_prod(x.hi, y.hi);
  double lo = fma(x.hi, y.lo, p.lo);
  lo = fma(x.lo, y.hi, lo);
  return vqc_tanh_fast_two_sum(p.hi, lo);
}
VQC_TANH_HD static inline vqc_tanh_dd vqc_tanh_dd_mul_d(vqc_tanh_dd x,
                                                        double b) {
  const vqc_tanh_dd p = vqc_tanh_two_prod(x.hi, b);
  return vqc_tanh_fast_two_sum(p.hi, fma(x.lo, b, p.lo));
}
/* x / n for a small integer n (exact as a double). */
VQC_TANH_HD static inline vqc_tanh_dd vqc_tanh_dd_div_d(vqc_tanh_dd x,
                                                        double n) {
  const double q1 = x.hi / n;
  const double rem = fma(-q1, n, x.hi) + x.lo; /* fma: exact remainder */
  return vqc_tanh_fast_two_sum(q1, rem / n);
}
/* x / y: three quotient digits (the QD library's accurate division). */
VQC_TANH_HD static inline vqc_tanh_dd vqc_tanh_dd_div(vqc_tanh_dd x,
                                                      vqc_tanh_dd y) {
  const double q1 = x.hi / y.hi;
  vqc_tanh_dd r = vqc_tanh_dd_add(x, vqc_tanh_dd_neg(vqc_tanh_dd_mul_d(y, q1)));
  const double q2 = r.hi / y.hi;
  r = vqc_tanh_dd_add(r, vqc_tanh_dd_neg(vqc_tanh_dd_mul_d(y, q2)));
  const double q3 = r.hi / y.hi;
  return vqc_tanh_dd_add_d(vqc_tanh_fast_two_sum(q1, q2), q3);
}

/* Step 4's value: tanh(a) in double-double, for a float value
 * 2^-12 < a <= 10 (see the top of the file). */
VQC_TANH_HD static inline vqc_tanh_dd vqc_tanh_slow_dd(double a) {
  const double y = -2.0 * a;
  const double yk = y * VQC_TANH_INV_LN2;
  const double s = yk + VQC_TANH_MAGIC;
  const double kd = s - VQC_TANH_MAGIC;
  const double scale = vqc_tanh_scale(s);
  /* r = y - k * ln2, ln2 in three parts */
  vqc_tanh_dd r = vqc_tanh_dd_add(
      vqc_tanh_dd_make(y, 0.0),
      vqc_tanh_dd_neg(vqc_tanh_two_prod(kd, VQC_TANH_LN2_HI)));
  r = vqc_tanh_dd_add(r, vqc_tanh_dd_neg(vqc_tanh_two_prod(kd, VQC_TANH_LN2_LO)));
  r = vqc_tanh_dd_add_d(r, -kd * VQC_TANH_LN2_LO2);
  /* expm1(r) = r (1 + r/2 (1 + r/3 (1 + ... (1 + r/N)))) */
  vqc_tanh_dd e = vqc_tanh_dd_make(1.0, 0.0);
  for (int n = VQC_TANH_DD_TERMS; n >= 2; n--)
    e = vqc_tanh_dd_add_d(vqc_tanh_dd_div_d(vqc_tanh_dd_mul(e, r), (double)n),
                          1.0);
  const vqc_tanh_dd p = vqc_tanh_dd_mul(e, r);
  /* m = 2^k p + (2^k - 1); t = -m / (2 + m) */
  const vqc_tanh_dd m = vqc_tanh_dd_add_d(
      vqc_tanh_dd_make(p.hi * scale, p.lo * scale), scale - 1.0);
  return vqc_tanh_dd_div(vqc_tanh_dd_neg(m), vqc_tanh_dd_add_d(m, 2.0));
}

/* Step 4: tanh(a) rounded to float (positive), for 2^-12 < a <= 10. */
VQC_TANH_HD static inline float vqc_tanh_exact_slow(double a) {
  const vqc_tanh_dd t = vqc_tanh_slow_dd(a);
  /* Round t.hi + t.lo to float: t.hi's rounding is right unless t.hi is
   * itself a midpoint (t is in (2^-13, 1): floats are normal there). */
  uint64_t hb = vqc_tanh_bits(t.hi);
  if ((hb & VQC_TANH_LOW_MASK) == VQC_TANH_MID && t.lo != 0.0)
    hb = t.lo > 0.0 ? hb + 1 : hb - 1;
  return (float)vqc_tanh_from_bits(hb);
}

/* The definition; *slow (may be NULL) is incremented when step 4 ran. */
VQC_TANH_HD static inline float vqc_tanh_exact_counted(float x,
                                                       unsigned *slow) {
  const float a = fabsf(x);
  if (!(a > VQC_TANH_TINY)) return x; /* step 1, and NaN */
  const float ac = a < VQC_TANH_CLAMP ? a : VQC_TANH_CLAMP;
  int hard = 0;
  const double t = vqc_tanh_fast((double)ac, &hard);
  float f;
  if (hard) {
    f = vqc_tanh_exact_slow((double)ac);
    if (slow) (*slow)++;
  } else {
    f = (float)t;
  }
  return copysignf(f, x);
}

VQC_TANH_HD static inline float vqc_tanh_exact(float x) {
  return vqc_tanh_exact_counted(x, (unsigned *)0);
}

#endif /* VQC_TANH_EXACT_H */
