/* rng.c: the counter-based generator behind vqc/rng.h (Philox-4x32-10) and
 * the distributions built on it (uniform, normal, randint, randperm,
 * binomial).
 *
 * Everything here is a pure function of (seed, stream, position): the cursor
 * holds no cached block, so copying it, re-initialising it or seeking it
 * always reproduces the same words. Word n of a stream is lane n % 4 of the
 * Philox block with counter (n / 4 low 32, n / 4 high 32, stream low 32,
 * stream high 32) and key (seed low 32, seed high 32).
 *
 * How many words each draw consumes is part of the contract (it decides
 * where the next draw starts), so it is written beside every function. */
#include "vqc/rng.h"

#include <math.h>
#include <stddef.h>

/* ---- Philox-4x32-10 (Salmon, Moraes, Dror, Shaw, SC'11; Random123) ---- */

/* Round multipliers and Weyl key increments, as Random123 defines them
 * (PHILOX_M4x32_0/1, PHILOX_W32_0/1). */
#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u /* golden ratio */
#define PHILOX_W1 0xBB67AE85u /* sqrt(3) - 1 */

void vqc_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2],
                       uint32_t out[4]) {
  uint32_t x0 = ctr[0], x1 = ctr[1], x2 = ctr[2], x3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; round++) {
    /* The first round uses the key as given; each later one bumps it. */
    if (round > 0) {
      k0 += PHILOX_W0;
      k1 += PHILOX_W1;
    }
    uint64_t p0 = (uint64_t)PHILOX_M0 * x0;
    uint64_t p1 = (uint64_t)PHILOX_M1 * x2;
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    x0 = hi1 ^ x1 ^ k0;
    x1 = lo1;
    x2 = hi0 ^ x3 ^ k1;
    x3 = lo0;
  }
  out[0] = x0;
  out[1] = x1;
  out[2] = x2;
  out[3] = x3;
}

/* ---- cursor ---- */

void vqc_rng_init(vqc_rng *r, uint64_t seed, uint64_t stream) {
  r->seed = seed;
  r->stream = stream;
  r->position = 0;
}

void vqc_rng_seek(vqc_rng *r, uint64_t position) { r->position = position; }

/* The bijective 64-bit finaliser of SplitMix64 (Steele, Lea, Flood 2014,
 * constants of Stafford's "Mix13"): every input maps to a distinct output,
 * and nearby inputs map to unrelated-looking ones. */
static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* stream = mix64(mix64(step + 0x9E3779B97F4A7C15) ^ (purpose << 32 | (uint32)(rank + 1))).
 *
 * The inner term is the first SplitMix64 output for state `step`. The packed
 * word holds purpose and rank + 1 side by side (rank -1 -> 0), so it is
 * injective in (purpose, rank); both mixes are bijections. Hence two triples
 * that differ in only one argument ALWAYS get different streams; triples that
 * differ in step and in (purpose, rank) at once collide with probability
 * about 2^-64. Never change this formula: it defines every recorded run. */
uint64_t vqc_rng_stream_for(uint64_t step, vqc_rng_purpose purpose, int rank) {
  uint64_t packed = ((uint64_t)(uint32_t)purpose << 32) |
                    (uint64_t)((uint32_t)rank + 1u);
  return mix64(mix64(step + 0x9E3779B97F4A7C15ull) ^ packed);
}

/* Writes the next n words of the stream to out and advances the cursor by n.
 * Generates each Philox block once and takes the lanes it needs from it. */
static void next_words(vqc_rng *r, uint32_t *out, int64_t n) {
  const uint32_t key[2] = {(uint32_t)r->seed, (uint32_t)(r->seed >> 32)};
  int64_t done = 0;
  while (done < n) {
    uint64_t block = r->position >> 2;
    unsigned lane = (unsigned)(r->position & 3u);
    const uint32_t ctr[4] = {(uint32_t)block, (uint32_t)(block >> 32),
                             (uint32_t)r->stream,
                             (uint32_t)(r->stream >> 32)};
    uint32_t words[4];
    vqc_philox4x32_10(ctr, key, words);
    for (; lane < 4 && done < n; lane++) {
      out[done++] = words[lane];
      r->position++;
    }
  }
}

/* One word. */
uint32_t vqc_rng_u32(vqc_rng *r) {
  uint32_t w;
  next_words(r, &w, 1);
  return w;
}

/* Two words: the first is the low half. */
uint64_t vqc_rng_u64(vqc_rng *r) {
  uint32_t w[2];
  next_words(r, w, 2);
  return (uint64_t)w[0] | ((uint64_t)w[1] << 32);
}

/* ---- uniform ---- */

/* One word: its top 24 bits times 2^-24, so every value is a multiple of
 * 2^-24 in [0, 1 - 2^-24] and exactly representable in a float. */
float vqc_rng_uniform_f32(vqc_rng *r) {
  return (float)(vqc_rng_u32(r) >> 8) * 0x1p-24f;
}

/* Two words: the top 53 bits of vqc_rng_u64 (all of the second word and the
 * top 21 bits of the first) times 2^-53, a multiple of 2^-53 in [0, 1). */
double vqc_rng_uniform_f64(vqc_rng *r) {
  return (double)(vqc_rng_u64(r) >> 11) * 0x1p-53;
}

/* One word per element: out[i] = lo + (hi - lo) * u_i, computed in double
 * and rounded once to float. Rounding can land on hi when u_i is close to 1;
 * such values become the largest float below hi, so the result stays in
 * [lo, hi) as documented. */
void vqc_rng_uniform(vqc_rng *r, float *out, int64_t n, float lo, float hi) {
  if (out == NULL || n <= 0) return;
  const double width = (double)hi - (double)lo;
  const float below_hi = nextafterf(hi, lo);
  uint32_t words[256]; /* a stack chunk: fewer Philox calls than per word */
  for (int64_t start = 0; start < n; start += 256) {
    int64_t len = n - start < 256 ? n - start : 256;
    next_words(r, words, len);
    for (int64_t i = 0; i < len; i++) {
      double u = (double)(words[i] >> 8) * 0x1p-24;
      float v = (float)((double)lo + width * u);
      out[start + i] = (v >= hi && hi > lo) ? below_hi : v;
    }
  }
}

/* ---- normal ---- */

/* 2 pi rounded to double (0x401921FB54442D18). */
static const double TWO_PI = 6.283185307179586476925286766559;

/* Box-Muller: each pair of outputs takes four words, u1 = uniform_f64 (words
 * 0-1) and u2 = uniform_f64 (words 2-3), and gives
 *   z0 = sqrt(-2 ln(1 - u1)) * cos(2 pi u2),  z1 = same radius * sin(2 pi u2),
 * written in that order. 1 - u1 lies in (0, 1], so the log is finite. An odd
 * n uses z0 of its last pair and drops z1 (still four words), so a fill of n
 * values consumes 4 * ceil(n / 2) words, and a fill of 2m values equals m
 * fills of 2. */
void vqc_rng_normal(vqc_rng *r, float *out, int64_t n, float mean, float std) {
  if (out == NULL || n <= 0) return;
  for (int64_t i = 0; i < n; i += 2) {
    double u1 = vqc_rng_uniform_f64(r);
    double u2 = vqc_rng_uniform_f64(r);
    double radius = sqrt(-2.0 * log(1.0 - u1));
    double theta = TWO_PI * u2;
    out[i] = (float)((double)mean + (double)std * (radius * cos(theta)));
    if (i + 1 < n)
      out[i + 1] = (float)((double)mean + (double)std * (radius * sin(theta)));
  }
}

/* ---- integers ---- */

/* lo + x without signed overflow, for x < 2^64 with lo + x known to fit in
 * int64 (x may exceed INT64_MAX only when lo is negative). */
static int64_t add_offset(int64_t lo, uint64_t x) {
  if (x <= (uint64_t)INT64_MAX) return lo + (int64_t)x;
  return (lo + INT64_MAX) + (int64_t)(x - (uint64_t)INT64_MAX);
}

/* Mask-and-reject: draw the bits of the smallest all-ones mask covering
 * hi - lo - 1 and retry while the value is >= hi - lo, which is exactly
 * uniform and needs under two attempts on average. Each attempt takes one
 * word when hi - lo <= 2^32 and two words (vqc_rng_u64) otherwise. */
int64_t vqc_rng_randint(vqc_rng *r, int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  const uint64_t range = (uint64_t)hi - (uint64_t)lo; /* in [1, 2^64 - 1] */
  uint64_t mask = range - 1;
  mask |= mask >> 1;
  mask |= mask >> 2;
  mask |= mask >> 4;
  mask |= mask >> 8;
  mask |= mask >> 16;
  mask |= mask >> 32;
  uint64_t x;
  if (range <= (1ull << 32)) {
    do x = vqc_rng_u32(r) & mask; while (x >= range);
  } else {
    do x = vqc_rng_u64(r) & mask; while (x >= range);
  }
  return add_offset(lo, x);
}

/* Fisher-Yates from the back: for i = n-1 down to 1, swap out[i] with
 * out[randint(0, i + 1)]. Words consumed: those of the n - 1 randint calls. */
void vqc_rng_randperm(vqc_rng *r, int64_t n, int64_t *out) {
  if (out == NULL || n <= 0) return;
  for (int64_t i = 0; i < n; i++) out[i] = i;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = vqc_rng_randint(r, 0, i + 1);
    int64_t t = out[i];
    out[i] = out[j];
    out[j] = t;
  }
}

/* ---- binomial ---- */

/* Inversion (sequential search, Kachitvichyanukul & Schmeiser's BINV), for
 * p <= 0.5 and n p < 30. Walks the pmf from 0 using
 *   f(x) / f(x-1) = (n - x + 1) p / (x q) = a / x - s,  s = p/q, a = (n+1) s,
 * and returns the first x with u < F(x). Since n p < 30 and p <= 0.5,
 * f(0) = q^n >= e^-42, so the walk starts far from underflow; if rounding
 * leaves u above F(n), the draw is repeated with a fresh u. Two words per
 * attempt. */
static int64_t binomial_inversion(vqc_rng *r, int64_t n, double p) {
  const double q = 1.0 - p;
  const double s = p / q;
  const double a = ((double)n + 1.0) * s;
  const double f0 = pow(q, (double)n);
  for (;;) {
    double u = vqc_rng_uniform_f64(r);
    double f = f0;
    int64_t x = 0;
    while (u >= f && x <= n) {
      u -= f;
      x++;
      f *= a / (double)x - s;
    }
    if (x <= n) return x;
  }
}

/* fc(k) = ln k! - [(k + 1/2) ln(k + 1) - (k + 1) + ln(2 pi) / 2], the error
 * of Stirling's formula for ln k!. Exact values (computed with 40-digit
 * arithmetic) below 10; above, the series 1/12 - 1/(360 k'^2) + 1/(1260 k'^4)
 * over k' = k + 1, whose first omitted term 1/(1680 k'^7) is below 4e-11. */
static double stirling_tail(double k) {
  static const double exact[10] = {
      0.08106146679532726, 0.0413406959554093,   0.02767792568499834,
      0.020790672103765093, 0.016644691189821193, 0.013876128823070748,
      0.01189670994589177,  0.010411265261972096, 0.009255462182712733,
      0.00833056343336287};
  if (k < 10.0) return exact[(int)k];
  const double k1 = k + 1.0;
  const double r2 = 1.0 / (k1 * k1);
  return (1.0 / 12.0 - (1.0 / 360.0 - r2 / 1260.0) * r2) / k1;
}

/* BTRD: transformed rejection with decomposition, W. Hormann, "The
 * generation of binomial random variates", J. Statist. Comput. Simul. 46
 * (1993), for p <= 0.5 and n p >= 10 (we use it from n p >= 30). Steps are
 * numbered as in the paper. Exact: every accepted k has probability f(k).
 * Each attempt takes one uniform (two words), or two when step 1 does not
 * accept at once. Intermediate k stays a double until it is known to lie in
 * [0, n], so no out-of-range value is ever converted to int64. */
static int64_t binomial_btrd(vqc_rng *r, int64_t n, double p) {
  /* Step 0: setup. */
  const double nd = (double)n;
  const double q = 1.0 - p;
  const double npq = nd * p * q;
  const double spq = sqrt(npq);
  const double b = 1.15 + 2.53 * spq;
  const double a = -0.0873 + 0.0248 * b + 0.01 * p;
  const double c = nd * p + 0.5;
  const double alpha = (2.83 + 5.1 / b) * spq;
  const double vr = 0.92 - 4.2 / b;
  const double urvr = 0.86 * vr;
  const double m = floor((nd + 1.0) * p); /* the mode */
  const double rr = p / q;
  const double nr = (nd + 1.0) * rr;
  for (;;) {
    /* Step 1: the central box, accepted without any further test. */
    double v = vqc_rng_uniform_f64(r);
    double u;
    if (v <= urvr) {
      u = v / vr - 0.43;
      double k = floor((2.0 * a / (0.5 - fabs(u)) + b) * u + c);
      if (k < 0.0 || k > nd) continue; /* cannot happen for n p >= 10 */
      return (int64_t)k;
    }
    /* Step 2: a point (u, v) under the hat outside the box. */
    if (v >= vr) {
      u = vqc_rng_uniform_f64(r) - 0.5;
    } else {
      u = v / vr - 0.93;
      u = (u >= 0.0 ? 0.5 : -0.5) - u;
      v = vqc_rng_uniform_f64(r) * vr;
    }
    /* Step 3.0: transform to k and scale v to the hat's height there. */
    const double us = 0.5 - fabs(u);
    if (us <= 0.0) continue; /* the hat's pole; probability zero */
    const double k = floor((2.0 * a / us + b) * u + c);
    if (k < 0.0 || k > nd) continue;
    v = v * alpha / (a / (us * us) + b);
    const double km = fabs(k - m);
    if (km <= 15.0) {
      /* Step 3.1: f(k) / f(m) by the recurrence, exact enough near m. */
      double f = 1.0;
      if (m < k) {
        for (double i = m + 1.0; i <= k; i += 1.0) f *= nr / i - rr;
      } else if (m > k) {
        for (double i = k + 1.0; i <= m; i += 1.0) v *= nr / i - rr;
      }
      if (v <= f) return (int64_t)k;
      continue;
    }
    /* Step 3.2: squeeze on ln v around the normal approximation. */
    v = log(v);
    const double rho =
        (km / npq) * (((km / 3.0 + 0.625) * km + 1.0 / 6.0) / npq + 0.5);
    const double t = -km * km / (2.0 * npq);
    if (v < t - rho) return (int64_t)k;
    if (v > t + rho) continue;
    /* Steps 3.3-3.4: the exact test, ln f(k) / f(m) through Stirling. */
    const double nm = nd - m + 1.0;
    const double h = (m + 0.5) * log((m + 1.0) / (rr * nm)) +
                     stirling_tail(m) + stirling_tail(nd - m);
    const double nk = nd - k + 1.0;
    if (v <= h + (nd + 1.0) * log(nm / nk) +
                 (k + 0.5) * log(nk * rr / (k + 1.0)) - stirling_tail(k) -
                 stirling_tail(nd - k))
      return (int64_t)k;
  }
}

/* p > 0.5 is drawn as n - Binomial(n, 1 - p), so both algorithms only see
 * p <= 0.5; inversion below n min(p, 1-p) = 30, BTRD from there. n = 0,
 * p = 0 and p = 1 consume no words. */
vqc_status vqc_rng_binomial(vqc_rng *r, int64_t n, double p, int64_t *out) {
  if (r == NULL || out == NULL)
    return vqc_error(VQC_EINVAL, "binomial: NULL %s", r == NULL ? "rng" : "out");
  if (n < 0)
    return vqc_error(VQC_EINVAL, "binomial: n = %lld must be >= 0",
                     (long long)n);
  if (!(p >= 0.0 && p <= 1.0)) /* also rejects NaN */
    return vqc_error(VQC_EINVAL, "binomial: p = %g must lie in [0, 1]", p);
  if (n == 0 || p == 0.0) {
    *out = 0;
    return VQC_OK;
  }
  if (p == 1.0) {
    *out = n;
    return VQC_OK;
  }
  const int flip = p > 0.5;
  const double ps = flip ? 1.0 - p : p; /* exact (Sterbenz) */
  int64_t k = (double)n * ps < 30.0 ? binomial_inversion(r, n, ps)
                                     : binomial_btrd(r, n, ps);
  *out = flip ? n - k : k;
  return VQC_OK;
}
