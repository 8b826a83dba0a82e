/* fsq.c: finite scalar quantization, the CPU reference (see vqc/fsq.h).
 *
 * Every float operation below is float32 and in the order the library
 * (vector-quantize-pytorch 1.31.0) performs it, because the golden cases
 * compare FSQ outputs exactly; fixtures/vqpt/README.md lists that order.
 *
 * tanh is vqc_tanh_exact (tanh_exact.h): correctly rounded, so the codes do
 * not depend on the libm (glibc's tanhf is off by an ulp at some inputs,
 * e.g. 1.1355606, where PyTorch's CPU tanh and this one agree) and equal
 * the CUDA kernel's (kernels/fsq_kernels.cuh) bit for bit.
 *
 * vqc_fsq_quantize runs the fastest kernel this CPU has (fsq_internal.h:
 * AVX2 in fsq_avx2.c, chosen at run time) on whole blocks of 8 groups and
 * this file's scalar loop on the rest; both compute the same bits. */
#include "vqc/fsq.h"

#include <math.h>
#include <stddef.h>

#include "quant/fsq_internal.h"
#include "quant/tanh_exact.h"

/* torch rounds each product to float32 before the following add; a fused
 * multiply-add would not, and in preserve_symmetry mode (2/7 * k - 1) that
 * changes the last bit of an output that is compared exactly. GNU C mode
 * allows contraction by default wherever the target has FMA, so turn it off
 * for this file. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

vqc_status vqc_fsq_init(vqc_fsq *q, const int32_t *levels, int d,
                        int num_codebooks, bool preserve_symmetry,
                        double bound_eps) {
  if (!q || !levels)
    return vqc_error(VQC_EINVAL, "fsq: q and levels must not be NULL");
  if (d < 1 || d > VQC_FSQ_MAX_DIMS)
    return vqc_error(VQC_EINVAL,
                     "fsq: %d levels given, expected 1..%d (each level >= 2 "
                     "and an int32 codebook size allow no more)",
                     d, VQC_FSQ_MAX_DIMS);
  if (num_codebooks < 1)
    return vqc_error(VQC_EINVAL, "fsq: num_codebooks is %d, expected >= 1",
                     num_codebooks);
  if (!isfinite(bound_eps) || bound_eps < 0)
    return vqc_error(VQC_EINVAL, "fsq: bound_eps is %g, expected finite >= 0",
                     bound_eps);
  if ((int64_t)num_codebooks * d > INT32_MAX)
    return vqc_error(VQC_EINVAL, "fsq: num_codebooks * d is too large");

  q->d = d;
  q->num_codebooks = num_codebooks;
  q->preserve_symmetry = preserve_symmetry;
  q->bound_eps = bound_eps;
  int64_t size = 1;
  /* The library computes (1 + eps) in Python (double) and multiplies it
   * into the float32 tensor, i.e. as float32(1 + eps). */
  const float one_plus_eps = (float)(1.0 + bound_eps);
  for (int i = 0; i < d; i++) {
    const int32_t L = levels[i];
    if (L < 2)
      return vqc_error(VQC_EINVAL, "fsq: level %d is %d, expected >= 2", i,
                       (int)L);
    if (L == 2 && !preserve_symmetry)
      return vqc_error(VQC_EINVAL,
                       "fsq: level %d is 2, which the library accepts only "
                       "with preserve_symmetry (the default mode's codes "
                       "would not be symmetric)",
                       i);
    q->levels[i] = L;
    q->basis[i] = (int32_t)size;
    size *= L;
    if (size > INT32_MAX)
      return vqc_error(VQC_EINVAL,
                       "fsq: codebook size prod(levels) exceeds the int32 "
                       "index range at level %d",
                       i);

    q->half_l[i] = (float)(L - 1) * one_plus_eps / 2.0f;
    q->offset[i] = (L % 2 == 0) ? 0.5f : 0.0f;
    q->shift[i] = atanhf(q->offset[i] / q->half_l[i]);
    q->half_width[i] = (float)(L / 2);
    q->sym_scale[i] = 2.0f / (float)(L - 1);

    if (!preserve_symmetry) {
      /* tanh lies in [-1, 1]: the extreme bounded values must round into the
       * L levels, or a large bound_eps would produce codes outside [-1, 1]
       * and indices outside the codebook. */
      const float hi = rintf(1.0f * q->half_l[i] - q->offset[i]);
      const float lo = rintf(-1.0f * q->half_l[i] - q->offset[i]);
      const float top = (float)((L - 1) / 2); /* (L-1)/2 for odd, L/2-1 even */
      if (!isfinite(q->shift[i]) || hi > top || lo < -q->half_width[i])
        return vqc_error(VQC_EINVAL,
                         "fsq: bound_eps %g is too large for level %d (L=%d): "
                         "codes would leave [-1, 1]",
                         bound_eps, i, (int)L);
    }
  }
  q->codebook_size = size;
  return VQC_OK;
}

int vqc_fsq_width(const vqc_fsq *q) { return q->num_codebooks * q->d; }

/* The code of one element of dimension i. */
static float quantize_one(const vqc_fsq *q, int i, float z) {
  if (q->preserve_symmetry) {
    const float Lm1 = (float)(q->levels[i] - 1);
    const float bracket =
        floorf(Lm1 * (vqc_tanh_exact(z) + 1.0f) / 2.0f + 0.5f);
    return q->sym_scale[i] * bracket - 1.0f;
  }
  const float bounded =
      vqc_tanh_exact(z + q->shift[i]) * q->half_l[i] - q->offset[i];
  /* rintf rounds half to even in the default rounding mode, like
   * torch.round; roundf would round halves away from zero. */
  return rintf(bounded) / q->half_width[i];
}

/* Level index of a code, as float32 (the library's _scale_and_shift). */
static float code_to_level(const vqc_fsq *q, int i, float code) {
  if (q->preserve_symmetry) return (code + 1.0f) / q->sym_scale[i];
  return code * q->half_width[i] + q->half_width[i];
}

/* One group's index from its d codes: float32 sum in dimension order, then
 * round half to even, as (zhat * basis).sum(-1).round() does. Codes that
 * are not FSQ codes (NaN, far outside [-1, 1]) would make the conversion to
 * int32 undefined: those are an error naming the group. */
static vqc_status group_index(const vqc_fsq *q, const float *codes,
                              int64_t group, int32_t *index) {
  float sum = 0.0f;
  for (int i = 0; i < q->d; i++)
    sum += code_to_level(q, i, codes[i]) * (float)q->basis[i];
  const float r = rintf(sum);
  /* 2^31 is exact in float32; r == r is false for NaN. */
  if (!(r == r && r >= 0.0f && r < 2147483648.0f))
    return vqc_error(VQC_EINVAL,
                     "fsq: the codes of group %lld (row %lld, codebook %d) "
                     "give index %g, not an int32 index; are they FSQ codes "
                     "(finite, in [-1, 1])?",
                     (long long)group, (long long)(group / q->num_codebooks),
                     (int)(group % q->num_codebooks), (double)sum);
  *index = (int32_t)r;
  return VQC_OK;
}

static vqc_status check_rows(const vqc_fsq *q, int64_t M, const void *a,
                             const void *b, const char *what) {
  if (!q) return vqc_error(VQC_EINVAL, "fsq %s: q is NULL", what);
  if (M < 0) return vqc_error(VQC_EINVAL, "fsq %s: M is %lld", what,
                              (long long)M);
  if (M > 0 && (!a || !b))
    return vqc_error(VQC_EINVAL, "fsq %s: NULL buffer", what);
  return VQC_OK;
}

/* The scalar loop over groups [g0, g1): the reference every kernel equals. */
static vqc_status quantize_groups(const vqc_fsq *q, const float *z, int64_t g0,
                                  int64_t g1, float *out, int32_t *indices) {
  const int d = q->d, C = q->num_codebooks;
  for (int64_t g = g0; g < g1; g++) {
    const size_t at = (size_t)g * (size_t)d;
    for (int i = 0; i < d; i++) {
      /* NaN has no code (and no index); +-inf saturate through tanh. */
      if (isnan(z[at + i]))
        return vqc_error(VQC_EINVAL, "fsq quantize: z[%lld][%d] is NaN",
                         (long long)(g / C), (int)(g % C) * d + i);
      out[at + i] = quantize_one(q, i, z[at + i]);
    }
    if (indices) VQC_TRY(group_index(q, out + at, g, &indices[g]));
  }
  return VQC_OK;
}

bool fsq_kernel_available(fsq_kernel k) {
  switch (k) {
  case FSQ_KERNEL_SCALAR:
    return true;
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
  case FSQ_KERNEL_AVX2:
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  default:
    return false;
  }
}

fsq_kernel fsq_kernel_best(void) {
  static int best = -1; /* the CPU does not change under a process */
  int b = __atomic_load_n(&best, __ATOMIC_RELAXED);
  if (b < 0) {
    b = fsq_kernel_available(FSQ_KERNEL_AVX2) ? FSQ_KERNEL_AVX2
                                              : FSQ_KERNEL_SCALAR;
    __atomic_store_n(&best, b, __ATOMIC_RELAXED);
  }
  return (fsq_kernel)b;
}

const char *fsq_kernel_name(fsq_kernel k) {
  switch (k) {
  case FSQ_KERNEL_SCALAR: return "scalar";
  case FSQ_KERNEL_AVX2: return "avx2";
  default: return "?";
  }
}

vqc_status fsq_quantize_with(fsq_kernel k, const vqc_fsq *q, const float *z,
                             int64_t M, float *out, int32_t *indices) {
  VQC_TRY(check_rows(q, M, z, out, "quantize"));
  if (!fsq_kernel_available(k))
    return vqc_error(VQC_EUNSUPPORTED, "fsq quantize: kernel %s is not "
                     "available on this CPU", fsq_kernel_name(k));
  const int64_t groups = M * q->num_codebooks;
  int64_t done = 0;
  if (k == FSQ_KERNEL_AVX2) {
    const fsq_avx2_stop stop =
        fsq_avx2_quantize(q, z, groups, out, indices, &done);
    /* The group after the done ones has codes but no int32 index: the
     * scalar check names it (its codes are in out; z may be overwritten). */
    if (stop == FSQ_AVX2_BAD_INDEX)
      return group_index(q, out + (size_t)done * (size_t)q->d, done,
                         &indices[done]);
    /* FSQ_AVX2_NAN: the scalar loop meets the NaN and reports it. */
  }
  return quantize_groups(q, z, done, groups, out, indices);
}

int64_t fsq_tanh_with(fsq_kernel k, const float *x, float *y, size_t n) {
  if (!fsq_kernel_available(k)) return -1;
  if (k == FSQ_KERNEL_AVX2) return fsq_avx2_tanh(x, y, n);
  unsigned slow = 0;
  for (size_t i = 0; i < n; i++) y[i] = vqc_tanh_exact_counted(x[i], &slow);
  return (int64_t)slow;
}

vqc_status vqc_fsq_quantize(const vqc_fsq *q, const float *z, int64_t M,
                            float *out, int32_t *indices) {
  return fsq_quantize_with(fsq_kernel_best(), q, z, M, out, indices);
}

vqc_status vqc_fsq_codes_to_indices(const vqc_fsq *q, const float *codes,
                                    int64_t M, int32_t *indices) {
  VQC_TRY(check_rows(q, M, codes, indices, "codes_to_indices"));
  const int64_t groups = M * q->num_codebooks;
  for (int64_t g = 0; g < groups; g++)
    VQC_TRY(group_index(q, codes + (size_t)g * (size_t)q->d, g, &indices[g]));
  return VQC_OK;
}

static vqc_status check_index(const vqc_fsq *q, int32_t index, int64_t at,
                              const char *what) {
  if (index < 0 || index >= q->codebook_size)
    return vqc_error(VQC_EINVAL,
                     "fsq %s: index %d at position %lld is outside "
                     "[0, %lld)",
                     what, (int)index, (long long)at,
                     (long long)q->codebook_size);
  return VQC_OK;
}

/* Code of level index k of dimension i (the library's
 * _scale_and_shift_inverse on integer level indices). */
static float level_to_code(const vqc_fsq *q, int i, int32_t k) {
  if (q->preserve_symmetry) return (float)k * q->sym_scale[i] - 1.0f;
  const int32_t hw = q->levels[i] / 2;
  return (float)(k - hw) / (float)hw;
}

/* Writes the d codes of one index. */
static void index_to_codes(const vqc_fsq *q, int32_t index, float *codes) {
  for (int i = 0; i < q->d; i++)
    codes[i] = level_to_code(q, i, (index / q->basis[i]) % q->levels[i]);
}

vqc_status vqc_fsq_indices_to_codes(const vqc_fsq *q, const int32_t *indices,
                                    int64_t M, float *codes) {
  VQC_TRY(check_rows(q, M, indices, codes, "indices_to_codes"));
  const int64_t groups = M * q->num_codebooks;
  for (int64_t g = 0; g < groups; g++) {
    VQC_TRY(check_index(q, indices[g], g, "indices_to_codes"));
    index_to_codes(q, indices[g], codes + (size_t)g * (size_t)q->d);
  }
  return VQC_OK;
}

vqc_status vqc_fsq_level_indices(const vqc_fsq *q, const int32_t *indices,
                                 int64_t n, int32_t *level_indices) {
  VQC_TRY(check_rows(q, n, indices, level_indices, "level_indices"));
  for (int64_t g = 0; g < n; g++) {
    VQC_TRY(check_index(q, indices[g], g, "level_indices"));
    for (int i = 0; i < q->d; i++)
      level_indices[(size_t)g * (size_t)q->d + i] =
          (indices[g] / q->basis[i]) % q->levels[i];
  }
  return VQC_OK;
}

vqc_status vqc_fsq_implicit_codebook(const vqc_fsq *q, float *codebook) {
  if (!q || !codebook)
    return vqc_error(VQC_EINVAL, "fsq implicit_codebook: NULL argument");
  for (int64_t k = 0; k < q->codebook_size; k++)
    index_to_codes(q, (int32_t)k, codebook + (size_t)k * (size_t)q->d);
  return VQC_OK;
}

vqc_status vqc_fsq_backward(const vqc_fsq *q, const float *z,
                            const float *grad_out, int64_t M, float *grad_z) {
  VQC_TRY(check_rows(q, M, z, grad_out, "backward"));
  if (M > 0 && !grad_z)
    return vqc_error(VQC_EINVAL, "fsq backward: grad_z is NULL");
  const int d = q->d;
  const size_t n = (size_t)M * (size_t)vqc_fsq_width(q);
  const fsq_kernel k = fsq_kernel_best();
  /* tanh of a chunk at a time with the fastest kernel (the same bits as
   * vqc_tanh_exact), then the chain rule element by element. */
  enum { CHUNK = 1024 };
  float t[CHUNK];
  for (size_t e0 = 0; e0 < n; e0 += CHUNK) {
    const size_t len = n - e0 < CHUNK ? n - e0 : CHUNK;
    for (size_t j = 0; j < len; j++) {
      const size_t e = e0 + j;
      t[j] = q->preserve_symmetry ? z[e] : z[e] + q->shift[e % (size_t)d];
    }
    fsq_tanh_with(k, t, t, len);
    for (size_t j = 0; j < len; j++) {
      const size_t e = e0 + j;
      const int i = (int)(e % (size_t)d);
      const float g = grad_out[e];
      /* Autograd's chain, link by link; the rounding (round_ste /
       * floor_ste) passes the gradient through unchanged. */
      float grad_tanh;
      if (q->preserve_symmetry) {
        /* out = scale * bracket - 1; bracket ~ (L-1) * (tanh(z) + 1) / 2 */
        grad_tanh = g * q->sym_scale[i] * (float)(q->levels[i] - 1) / 2.0f;
      } else {
        /* out = round(bounded) / hw; bounded = tanh(z + shift) * half_l -
         * off */
        grad_tanh = g / q->half_width[i] * q->half_l[i];
      }
      grad_z[e] = grad_tanh * (1.0f - t[j] * t[j]);
    }
  }
  return VQC_OK;
}
