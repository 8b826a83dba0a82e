/* fsq_avx2.c: FSQ's hot loop with AVX2 + FMA, chosen at run time by fsq.c
 * (fsq_internal.h says what every kernel must compute: the scalar
 * reference's bits).
 *
 * tanh. tanh8 is vqc_tanh_exact (tanh_exact.h) on 8 floats: the checks of
 * steps 1-2 on the floats, then step 3 on two halves of 4 doubles with the
 * very operations of vqc_tanh_fast (same constants, same order, vector FMA
 * where the scalar code calls fma, plain multiply and add where it does
 * not), so each lane's double t and its "hard" flag are the scalar's; hard
 * lanes (about 1 in 4 million) are then done by vqc_tanh_exact_slow, the
 * scalar slow path itself. This file is compiled with -ffp-contract=off
 * (project-wide), so no multiply-add here is fused unless written as one.
 *
 * FSQ. z (M, C*d) is taken 8 groups (8*d floats, d vectors) at a time,
 * so the per-dimension constants of the j-th vector of a block are the
 * same in every block (lane l of vector j is dimension (8j + l) % d); they
 * are laid out once per call. A block is first checked for NaN (all its
 * loads before any store, so out may equal z); a block with a NaN is left
 * to the scalar loop, which reports it exactly as it always does. Codes
 * are then the scalar formulas lane by lane; rintf is vroundps to nearest
 * (ties to even), floorf is vroundps down, x / 2.0f is x * 0.5f (both the
 * exact x/2 rounded once). Each code's level times float(basis) goes to a
 * small buffer, and the 8 indices are sums over dimensions 0..d-1 in that
 * order, the i-th terms of the 8 groups gathered with stride d. */
#include "quant/fsq_internal.h"

#include <math.h>
#include <string.h>

#include "quant/tanh_exact.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma")))

/* Step 3 of tanh_exact.h on 4 doubles a (float values in (2^-12, 10]):
 * returns t, and the 4-bit mask of hard lanes in *hard. */
AVX2 static inline __m256d tanh4_fast(__m256d a, int *hard) {
  const __m256d magic = _mm256_set1_pd(VQC_TANH_MAGIC);
  const __m256d y = _mm256_mul_pd(_mm256_set1_pd(-2.0), a);
  const __m256d yk = _mm256_mul_pd(y, _mm256_set1_pd(VQC_TANH_INV_LN2));
  const __m256d s = _mm256_add_pd(yk, magic);
  const __m256d kd = _mm256_sub_pd(s, magic);
  const __m256d scale = _mm256_castsi256_pd(
      _mm256_add_epi64(_mm256_slli_epi64(_mm256_castpd_si256(s), 52),
                       _mm256_set1_epi64x((long long)(1023ull << 52))));
  __m256d r = _mm256_fmadd_pd(kd, _mm256_set1_pd(-VQC_TANH_LN2_HI), y);
  r = _mm256_fmadd_pd(kd, _mm256_set1_pd(-VQC_TANH_LN2_LO), r);
  const __m256d r2 = _mm256_mul_pd(r, r);
  __m256d q = _mm256_set1_pd(VQC_TANH_C13);
  q = _mm256_fmadd_pd(q, r, _mm256_set1_pd(VQC_TANH_C12));
  q = _mm256_fmadd_pd(q, r, _mm256_set1_pd(VQC_TANH_C11));
  q = _mm256_fmadd_pd(q, r, _mm256_set1_pd(VQC_TANH_C10));
  q = _mm256_fmadd_pd(q, r, _mm256_set1_pd(VQC_TANH_C9));
  q = _mm256_fmadd_pd(q, r, _mm256_set1_pd(VQC_TANH_C8));
  q = _mm256_fmadd_pd(q, r, _mm256_set1_pd(VQC_TANH_C7));
  q = _mm256_fmadd_pd(q, r, _mm256_set1_pd(VQC_TANH_C6));
  q = _mm256_fmadd_pd(q, r, _mm256_set1_pd(VQC_TANH_C5));
  q = _mm256_fmadd_pd(q, r, _mm256_set1_pd(VQC_TANH_C4));
  q = _mm256_fmadd_pd(q, r, _mm256_set1_pd(VQC_TANH_C3));
  q = _mm256_fmadd_pd(q, r, _mm256_set1_pd(VQC_TANH_C2));
  const __m256d p = _mm256_fmadd_pd(r2, q, r);
  const __m256d m =
      _mm256_fmadd_pd(scale, p, _mm256_sub_pd(scale, _mm256_set1_pd(1.0)));
  const __m256d t = _mm256_div_pd(_mm256_xor_pd(m, _mm256_set1_pd(-0.0)),
                                  _mm256_add_pd(_mm256_set1_pd(2.0), m));
  /* low 29 bits within BAND of MID: |low - MID| <= BAND */
  const __m256i low = _mm256_and_si256(
      _mm256_castpd_si256(t),
      _mm256_set1_epi64x((long long)VQC_TANH_LOW_MASK));
  const __m256i dev =
      _mm256_sub_epi64(low, _mm256_set1_epi64x((long long)VQC_TANH_MID));
  const __m256i in = _mm256_and_si256(
      _mm256_cmpgt_epi64(dev, _mm256_set1_epi64x(-(long long)VQC_TANH_BAND - 1)),
      _mm256_cmpgt_epi64(_mm256_set1_epi64x((long long)VQC_TANH_BAND + 1), dev));
  *hard = _mm256_movemask_pd(_mm256_castsi256_pd(in));
  return t;
}

/* vqc_tanh_exact on 8 floats; *slow counts the lanes that took step 4. */
AVX2 static inline __m256 tanh8(__m256 x, unsigned *slow) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 a = _mm256_andnot_ps(sign, x);
  /* min(NaN, 10) is 10: NaN lanes compute harmlessly and are replaced */
  const __m256 ac = _mm256_min_ps(a, _mm256_set1_ps(VQC_TANH_CLAMP));
  const __m256 keep =
      _mm256_cmp_ps(a, _mm256_set1_ps(VQC_TANH_TINY), _CMP_NGT_UQ);
  int hlo, hhi;
  const __m256d tlo = tanh4_fast(_mm256_cvtps_pd(_mm256_castps256_ps128(ac)),
                                 &hlo);
  const __m256d thi =
      tanh4_fast(_mm256_cvtps_pd(_mm256_extractf128_ps(ac, 1)), &hhi);
  __m256 t = _mm256_set_m128(_mm256_cvtpd_ps(thi), _mm256_cvtpd_ps(tlo));
  const int hard = (hlo | hhi << 4) & ~_mm256_movemask_ps(keep);
  if (__builtin_expect(hard != 0, 0)) {
    float tv[8], av[8];
    _mm256_storeu_ps(tv, t);
    _mm256_storeu_ps(av, ac);
    for (int l = 0; l < 8; l++)
      if (hard >> l & 1) {
        tv[l] = vqc_tanh_exact_slow((double)av[l]);
        (*slow)++;
      }
    t = _mm256_loadu_ps(tv);
  }
  t = _mm256_or_ps(t, _mm256_and_ps(x, sign)); /* copysign: t >= 0 here */
  return _mm256_blendv_ps(t, x, keep);
}

AVX2 int64_t fsq_avx2_tanh(const float *x, float *y, size_t n) {
  unsigned slow = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, tanh8(_mm256_loadu_ps(x + i), &slow));
  for (; i < n; i++) y[i] = vqc_tanh_exact_counted(x[i], &slow);
  return (int64_t)slow;
}

/* Per-vector constants of a block: lane l of vector j is dimension
 * (8j + l) % d. */
typedef struct block_consts {
  float shift[VQC_FSQ_MAX_DIMS][8];
  float half_l[VQC_FSQ_MAX_DIMS][8];
  float offset[VQC_FSQ_MAX_DIMS][8];
  float half_width[VQC_FSQ_MAX_DIMS][8];
  float lm1[VQC_FSQ_MAX_DIMS][8];
  float sym_scale[VQC_FSQ_MAX_DIMS][8];
  float basis[VQC_FSQ_MAX_DIMS][8];
} block_consts;

static void block_consts_of(const vqc_fsq *q, block_consts *k) {
  const int d = q->d;
  for (int j = 0; j < d; j++)
    for (int l = 0; l < 8; l++) {
      const int i = (8 * j + l) % d;
      k->shift[j][l] = q->shift[i];
      k->half_l[j][l] = q->half_l[i];
      k->offset[j][l] = q->offset[i];
      k->half_width[j][l] = q->half_width[i];
      k->lm1[j][l] = (float)(q->levels[i] - 1);
      k->sym_scale[j][l] = q->sym_scale[i];
      k->basis[j][l] = (float)q->basis[i];
    }
}

/* Codes of one vector (8 elements) and their level * basis terms. */
AVX2 static inline __m256 code8(const block_consts *k, int j, bool sym,
                                __m256 z, __m256 *term, unsigned *slow) {
  if (sym) {
    /* sym_scale * floorf(Lm1 * (tanh(z) + 1) / 2 + 0.5) - 1 */
    const __m256 t = tanh8(z, slow);
    const __m256 lm1 = _mm256_loadu_ps(k->lm1[j]);
    const __m256 sc = _mm256_loadu_ps(k->sym_scale[j]);
    const __m256 v = _mm256_add_ps(
        _mm256_mul_ps(_mm256_mul_ps(lm1, _mm256_add_ps(t, _mm256_set1_ps(1.0f))),
                      _mm256_set1_ps(0.5f)),
        _mm256_set1_ps(0.5f));
    const __m256 br = _mm256_round_ps(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    const __m256 code = _mm256_sub_ps(_mm256_mul_ps(sc, br), _mm256_set1_ps(1.0f));
    /* level = (code + 1) / sym_scale */
    *term = _mm256_mul_ps(
        _mm256_div_ps(_mm256_add_ps(code, _mm256_set1_ps(1.0f)), sc),
        _mm256_loadu_ps(k->basis[j]));
    return code;
  }
  /* rintf(tanh(z + shift) * half_l - offset) / half_width */
  const __m256 hw = _mm256_loadu_ps(k->half_width[j]);
  const __m256 t =
      tanh8(_mm256_add_ps(z, _mm256_loadu_ps(k->shift[j])), slow);
  const __m256 b = _mm256_sub_ps(_mm256_mul_ps(t, _mm256_loadu_ps(k->half_l[j])),
                                 _mm256_loadu_ps(k->offset[j]));
  const __m256 code = _mm256_div_ps(
      _mm256_round_ps(b, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), hw);
  /* level = code * half_width + half_width */
  *term = _mm256_mul_ps(_mm256_add_ps(_mm256_mul_ps(code, hw), hw),
                        _mm256_loadu_ps(k->basis[j]));
  return code;
}

AVX2 fsq_avx2_stop fsq_avx2_quantize(const vqc_fsq *q, const float *z,
                                     int64_t groups, float *out,
                                     int32_t *indices, int64_t *done) {
  const int d = q->d;
  const bool sym = q->preserve_symmetry;
  block_consts k;
  block_consts_of(q, &k);
  const __m256i stride = _mm256_mullo_epi32(
      _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(d));
  float terms[8 * VQC_FSQ_MAX_DIMS];
  unsigned slow = 0; /* not reported: tanh8 wants somewhere to count */
  const int64_t blocks = groups / 8;
  for (int64_t b = 0; b < blocks; b++) {
    const size_t e0 = (size_t)b * 8 * (size_t)d;
    const float *zb = z + e0;
    /* NaN check of the whole block before anything is written */
    __m256 nan = _mm256_setzero_ps();
    for (int j = 0; j < d; j++) {
      const __m256 v = _mm256_loadu_ps(zb + 8 * j);
      nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    if (_mm256_movemask_ps(nan)) {
      *done = b * 8;
      return FSQ_AVX2_NAN;
    }
    for (int j = 0; j < d; j++) {
      __m256 term;
      const __m256 code =
          code8(&k, j, sym, _mm256_loadu_ps(zb + 8 * j), &term, &slow);
      _mm256_storeu_ps(out + e0 + 8 * j, code);
      _mm256_storeu_ps(terms + 8 * j, term);
    }
    if (indices) {
      /* sum = ((0 + t_0) + t_1) + ... + t_{d-1} for each of the 8 groups */
      __m256 sum = _mm256_setzero_ps();
      for (int i = 0; i < d; i++)
        sum = _mm256_add_ps(sum, _mm256_i32gather_ps(terms + i, stride, 4));
      const __m256 r =
          _mm256_round_ps(sum, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      /* the scalar check: r == r && r >= 0 && r < 2^31 */
      const __m256 ok = _mm256_and_ps(
          _mm256_cmp_ps(r, _mm256_setzero_ps(), _CMP_GE_OQ),
          _mm256_cmp_ps(r, _mm256_set1_ps(2147483648.0f), _CMP_LT_OQ));
      const int okm = _mm256_movemask_ps(ok);
      if (okm != 0xFF) {
        int32_t iv[8];
        _mm256_storeu_si256((__m256i *)(void *)iv, _mm256_cvttps_epi32(r));
        int g = 0;
        while (okm >> g & 1) {
          indices[b * 8 + g] = iv[g];
          g++;
        }
        *done = b * 8 + g;
        return FSQ_AVX2_BAD_INDEX;
      }
      _mm256_storeu_si256((__m256i *)(void *)(indices + b * 8),
                          _mm256_cvttps_epi32(r));
    }
  }
  *done = blocks * 8;
  return FSQ_AVX2_DONE;
}

#else /* no x86 kernels in this build: fsq_kernel_available says so */

int64_t fsq_avx2_tanh(const float *x, float *y, size_t n) {
  (void)x, (void)y, (void)n;
  return -1;
}

fsq_avx2_stop fsq_avx2_quantize(const vqc_fsq *q, const float *z,
                                int64_t groups, float *out, int32_t *indices,
                                int64_t *done) {
  (void)q, (void)z, (void)groups, (void)out, (void)indices;
  *done = 0;
  return FSQ_AVX2_DONE;
}

#endif
