/* test_gpu_digest.c: the device tensor digest (kernels/digest.cu) against
 * its CPU twin (digest.c), label gpu.
 *
 * Tolerance: none. The digest is a hash; the device must give the CPU's
 * value bit for bit on every size, alignment and dtype.
 *
 * Two layers:
 *  1. without a GPU (CUDA builds): the kernel's lane-by-lane reorganisation
 *     of XXH3, run on the CPU by vqc_gpu_xxh3_64_emulated, equals libxxhash
 *     on every length 0..4200 (every path: 0, 1-3, 4-8, 9-16, 17-128,
 *     129-240, long with 0..15 tail stripes and any last-stripe overlap) and
 *     on random longer ones, at odd start offsets;
 *  2. with a GPU: leaves and digests of device buffers equal the CPU's on
 *     many sizes, including ragged last leaves of every path class and
 *     unaligned starts, with the leaf buffer poisoned by the wrapper; device
 *     tensors (contiguous and strided) through vqc_digest_tensor. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test_util.h"
#include "vqc/digest.h"
#if VQC_WITH_CUDA
#include <cuda_runtime_api.h> /* a non-blocking stream of the test's own */
#endif

#define CHUNK VQC_DIGEST_CHUNK

/* n fixed-seed random bytes (caller frees). */
static uint8_t *random_bytes(size_t n, uint64_t seed) {
  uint8_t *p = malloc(n > 0 ? n : 1);
  cr_assert_not_null(p);
  for (size_t i = 0; i < n; i++) {
    if (i % 8 == 0) seed = test_splitmix(&seed);
    p[i] = (uint8_t)(seed >> (8 * (i % 8)));
  }
  return p;
}

Test(gpu_digest, emulated_warp_xxh3_matches_libxxhash) {
  if (!vqc_gpu_built()) cr_skip_test("this build has no CUDA kernels");
  /* Runs without a device: the lane arithmetic on the CPU. */
  const size_t max = 4200 + 16;
  uint8_t *buf = random_bytes(max, 11);
  for (size_t off = 0; off < 16; off += 5) { /* 0, 5, 10, 15: odd starts */
    for (size_t n = 0; n <= 4200; n++) {
      uint64_t emu = 0;
      cr_assert_eq(vqc_gpu_xxh3_64_emulated(buf + off, n, &emu), VQC_OK, "%s",
                   vqc_last_error());
      cr_assert_eq(emu, vqc_xxh3_64(buf + off, n),
                   "length %zu at offset %zu: warp order %016llx, "
                   "libxxhash %016llx",
                   n, off, (unsigned long long)emu,
                   (unsigned long long)vqc_xxh3_64(buf + off, n));
    }
  }
  free(buf);
  /* Whole and ragged leaves, and lengths around every multiple of 1024. */
  uint64_t seed = 12;
  uint8_t *big = random_bytes(CHUNK + 64, 13);
  size_t lens[64];
  int k = 0;
  lens[k++] = CHUNK;
  lens[k++] = CHUNK - 1;
  lens[k++] = CHUNK - 63;
  lens[k++] = CHUNK - 64;
  lens[k++] = CHUNK - 65;
  while (k < 64) lens[k++] = 241 + test_splitmix(&seed) % (CHUNK - 241);
  for (int i = 0; i < k; i++) {
    uint64_t emu = 0;
    cr_assert_eq(vqc_gpu_xxh3_64_emulated(big + 3, lens[i], &emu), VQC_OK);
    cr_assert_eq(emu, vqc_xxh3_64(big + 3, lens[i]), "length %zu", lens[i]);
  }
  free(big);
}

/* The sizes of the device tests: every short-path class as a whole buffer
 * and as a ragged last leaf, long leaves with 0..15 tail stripes, whole
 * leaves, and a few large random sizes. */
static size_t device_sizes(size_t *out, uint64_t seed) {
  static const size_t fixed[] = {
      0,   1,   3,   4,   8,   9,    16,   17,   100,  128,   129,   200,
      240, 241, 255, 256, 1000, 1023, 1024, 1025, 2047, 2048, 4096 + 7,
      CHUNK - 1, CHUNK, CHUNK + 1, CHUNK + 3, CHUNK + 8, CHUNK + 16,
      CHUNK + 17, CHUNK + 128, CHUNK + 129, CHUNK + 240, CHUNK + 241,
      CHUNK + 1024, CHUNK + 1025, 2 * CHUNK, 3 * CHUNK + 777,
      17 * CHUNK + 65535, 64 * CHUNK};
  size_t n = 0;
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
    out[n++] = fixed[i];
  for (int i = 0; i < 12; i++) out[n++] = test_splitmix(&seed) % (9 * CHUNK);
  out[n++] = 40u * 1024 * 1024 + 12345; /* 40 MiB: many warps per SM */
  return n;
}

Test(gpu_digest, leaves_and_digest_equal_cpu_on_many_sizes) {
  gpu_require();
  size_t sizes[80];
  size_t nsizes = device_sizes(sizes, 21);
  size_t max = 0;
  for (size_t i = 0; i < nsizes; i++) max = sizes[i] > max ? sizes[i] : max;
  uint8_t *host = random_bytes(max + 32, 22);
  vqc_tensor dev = gpu_upload(host, max + 32);
  uint8_t *d = gpu_ptr(&dev);

  for (size_t i = 0; i < nsizes; i++) {
    for (size_t off = 0; off <= 9; off += 9) { /* aligned, then unaligned */
      size_t n = sizes[i];
      size_t nleaves = n == 0 ? 1 : (n + CHUNK - 1) / CHUNK;
      uint64_t *leaves = malloc(nleaves * 8);
      cr_assert_not_null(leaves);
      memset(leaves, 0x5A, nleaves * 8); /* host side poisoned too */
      cr_assert_eq(vqc_gpu_digest_leaves(d + off, n, leaves), VQC_OK, "%s",
                   vqc_last_error());
      for (size_t l = 0; l < nleaves; l++) {
        size_t begin = l * CHUNK, len = n - begin < CHUNK ? n - begin : CHUNK;
        if (n == 0) len = 0;
        cr_assert_eq(leaves[l], vqc_xxh3_64(host + off + begin, len),
                     "size %zu offset %zu: leaf %zu (%zu bytes) differs", n,
                     off, l, len);
      }
      free(leaves);

      int64_t shape[1] = {(int64_t)n};
      uint64_t want = 0, got = 1;
      cr_assert_eq(vqc_digest_buffer(host + off, n, VQC_U8, 1, shape, &want),
                   VQC_OK);
      cr_assert_eq(vqc_gpu_digest_buffer(d + off, n, VQC_U8, 1, shape, &got),
                   VQC_OK, "%s", vqc_last_error());
      cr_assert_eq(got, want, "size %zu offset %zu: digest differs", n, off);
    }
  }
  vqc_tensor_free(&dev);
  free(host);
}

/* vqc_gpu_digest_leaves_on orders the digest after the work queued on the
 * caller's stream: here a non-blocking stream (as PyTorch's side streams
 * are) fills the buffer with an async copy from pinned memory, and the
 * digest queued right after it, with no synchronisation in between, must
 * see the new bytes, not the poison written before. Only a device can show
 * this. */
Test(gpu_digest, leaves_on_a_callers_stream_follow_its_work) {
  gpu_require();
#if VQC_WITH_CUDA
  size_t n = 8 * CHUNK + 777, nleaves = (n + CHUNK - 1) / CHUNK;
  uint8_t *want = random_bytes(n, 31);
  void *pinned = NULL, *dev = NULL;
  cudaStream_t stream = NULL;
  cr_assert_eq(cudaMallocHost(&pinned, n), cudaSuccess);
  cr_assert_eq(cudaMalloc(&dev, n), cudaSuccess);
  cr_assert_eq(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
               cudaSuccess);
  memcpy(pinned, want, n);
  cr_assert_eq(cudaMemset(dev, 0xEE, n), cudaSuccess);
  cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
  cr_assert_eq(cudaMemcpyAsync(dev, pinned, n, cudaMemcpyHostToDevice, stream),
               cudaSuccess);
  uint64_t leaves[16];
  cr_assert_eq(vqc_gpu_digest_leaves_on(dev, n, leaves, stream), VQC_OK, "%s",
               vqc_last_error());
  for (size_t l = 0; l < nleaves; l++) {
    size_t len = n - l * CHUNK < CHUNK ? n - l * CHUNK : CHUNK;
    cr_assert_eq(leaves[l], vqc_xxh3_64(want + l * CHUNK, len),
                 "leaf %zu: the digest did not wait for the stream's copy", l);
  }
  cudaStreamDestroy(stream);
  cudaFree(dev);
  cudaFreeHost(pinned);
  free(want);
#endif
}

Test(gpu_digest, device_tensors_through_vqc_digest_tensor) {
  gpu_require();
  /* float32 (3, 20001): not a whole number of leaves; then its transpose
   * (strided, made contiguous on the device by vqc_digest_tensor). */
  int64_t shape[2] = {3, 20001};
  vqc_tensor host, dev, hview, dview;
  cr_assert_eq(vqc_tensor_empty(&host, VQC_F32, 2, shape, VQC_DEVICE_CPU),
               VQC_OK);
  float *h = vqc_tensor_data(&host);
  uint64_t seed = 31;
  for (int64_t i = 0; i < 3 * 20001; i++) h[i] = test_normal(&seed);
  cr_assert_eq(vqc_tensor_to(&host, VQC_DEVICE_CUDA, &dev), VQC_OK, "%s",
               vqc_last_error());
  uint64_t want = 0, got = 1;
  cr_assert_eq(vqc_digest_tensor(&host, &want), VQC_OK);
  cr_assert_eq(vqc_digest_tensor(&dev, &got), VQC_OK, "%s", vqc_last_error());
  cr_expect_eq(got, want, "contiguous device tensor");

  cr_assert_eq(vqc_tensor_transpose(&host, 0, 1, &hview), VQC_OK);
  cr_assert_eq(vqc_tensor_transpose(&dev, 0, 1, &dview), VQC_OK);
  want = 0;
  got = 1;
  cr_assert_eq(vqc_digest_tensor(&hview, &want), VQC_OK);
  cr_assert_eq(vqc_digest_tensor(&dview, &got), VQC_OK, "%s",
               vqc_last_error());
  cr_expect_eq(got, want, "strided device tensor");
  /* The digest counts as a read of the tensor (lost-in-place checker). */
  uint64_t before = vqc_tensor_access_count(&dev);
  cr_assert_eq(vqc_digest_tensor(&dev, &got), VQC_OK);
  cr_expect_gt(vqc_tensor_access_count(&dev), before);

  vqc_tensor_free(&dview);
  vqc_tensor_free(&hview);
  vqc_tensor_free(&dev);
  vqc_tensor_free(&host);
}

Test(gpu_digest, rejects_bad_arguments_before_any_work) {
  gpu_require();
  int64_t shape[1] = {10};
  uint64_t out = 0;
  vqc_tensor dev = gpu_alloc(64);
  /* 10 float32 need 40 bytes, not 64 */
  cr_expect_eq(vqc_gpu_digest_buffer(gpu_ptr(&dev), 64, VQC_F32, 1, shape,
                                     &out),
               VQC_EINVAL);
  cr_expect_eq(vqc_gpu_digest_buffer(NULL, 40, VQC_F32, 1, shape, &out),
               VQC_EINVAL);
  vqc_tensor_free(&dev);
}

Test(gpu_digest, absent_device_is_reported_not_crashed) {
  /* Runs everywhere: without a device the wrapper says so. */
  uint64_t leaves[1];
  vqc_status s = vqc_gpu_digest_leaves((void *)8, 16, leaves);
  if (!vqc_gpu_built())
    cr_expect_eq(s, VQC_EUNSUPPORTED);
  else if (!vqc_cuda_available())
    cr_expect_eq(s, VQC_ENODEVICE, "%s", vqc_last_error());
  else
    cr_skip_test("a device is present: covered by the other tests");
}
