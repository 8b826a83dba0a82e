/* gpu_test_util.h: helpers shared by the tests/gpu Criterion tests (header
 * only: each test file is its own executable).
 *
 * - gpu_require(): cr_skip_test with the reason when no device answers, so a
 *   machine without a GPU skips instead of passing silently;
 * - device buffers as vqc_tensors (freed by the caller with vqc_tensor_free),
 *   filled from host arrays or poisoned;
 * - a fixed-seed source of random floats (splitmix64), so a failure
 *   reproduces, with a fresh seed per test. */
#ifndef VQC_GPU_TEST_UTIL_H
#define VQC_GPU_TEST_UTIL_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.h" /* lib/src: vqc_device_memcpy_* */
#include "vqc/gpu.h"
#include "vqc/tensor.h"
#include "vqc/version.h"

static inline void gpu_require(void) {
  if (!vqc_cuda_available())
    cr_skip_test("no usable CUDA device (build has CUDA: %s); this test "
                 "needs a GPU",
                 VQC_WITH_CUDA ? "yes" : "no");
}

/* A fresh device buffer of nbytes (as a 1-d uint8 tensor). */
static inline vqc_tensor gpu_alloc(size_t nbytes) {
  vqc_tensor t;
  int64_t shape[1] = {(int64_t)(nbytes > 0 ? nbytes : 1)};
  cr_assert_eq(vqc_tensor_empty(&t, VQC_U8, 1, shape, VQC_DEVICE_CUDA),
               VQC_OK, "%s", vqc_last_error());
  return t;
}

/* A device buffer holding a copy of nbytes of host memory. */
static inline vqc_tensor gpu_upload(const void *host, size_t nbytes) {
  vqc_tensor host_t, dev;
  int64_t shape[1] = {(int64_t)(nbytes > 0 ? nbytes : 1)};
  static const uint8_t one = 0;
  cr_assert_eq(vqc_tensor_wrap(&host_t, nbytes ? (void *)host : (void *)&one,
                               VQC_U8, 1, shape),
               VQC_OK);
  cr_assert_eq(vqc_tensor_to(&host_t, VQC_DEVICE_CUDA, &dev), VQC_OK, "%s",
               vqc_last_error());
  vqc_tensor_free(&host_t);
  return dev;
}

/* Copies nbytes from device address dev to host memory (device.h). */
static inline void gpu_download(void *host, const void *dev, size_t nbytes) {
  cr_assert_eq(vqc_device_memcpy_d2h(host, dev, nbytes), VQC_OK, "%s",
               vqc_last_error());
}

/* Copies nbytes of host memory to device address dev (device.h). */
static inline void gpu_copy_in(void *dev, const void *host, size_t nbytes) {
  cr_assert_eq(vqc_device_memcpy_h2d(dev, host, nbytes), VQC_OK, "%s",
               vqc_last_error());
}

/* The device address of t's first byte. */
static inline void *gpu_ptr(const vqc_tensor *t) {
  return vqc_tensor_data_untracked(t);
}

/* Poisons nwords 32-bit words at dev (0x7FC00001: a quiet NaN as float, a
 * negative nonsense value as int32). */
static inline void gpu_poison(void *dev, size_t nwords) {
  cr_assert_eq(vqc_gpu_fill_u32(dev, nwords, 0x7FC00001u), VQC_OK, "%s",
               vqc_last_error());
}

static inline uint64_t test_splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/* Uniform in [lo, hi). */
static inline float test_uniform(uint64_t *s, float lo, float hi) {
  double u = (double)(test_splitmix(s) >> 11) * (1.0 / 9007199254740992.0);
  return (float)(lo + (hi - lo) * u);
}

/* Standard normal (Box-Muller). */
static inline float test_normal(uint64_t *s) {
  double u1 = ((double)(test_splitmix(s) >> 11) + 1.0) / 9007199254740993.0;
  double u2 = (double)(test_splitmix(s) >> 11) / 9007199254740992.0;
  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* The bits of a float (for exact comparisons that see -0 and NaN payloads). */
static inline uint32_t test_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

#endif /* VQC_GPU_TEST_UTIL_H */
