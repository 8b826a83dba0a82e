/* digest.cu: the tensor digest on the device (vqc/digest.h's definition):
 * XXH3-64 of every 64 KiB leaf on the GPU, one warp per leaf, then the root
 * hash over header | leaves on the host through libxxhash (vqc_xxh3_64), as
 * digest.c does. Its CPU twin is vqc_digest_buffer; tests/gpu compare them.
 *
 * XXH3-64 (seed 0, the default 192-byte secret) written from the algorithm's
 * description. The secret is not restated here: the host asks libxxhash for
 * it (XXH3_generateSecret_fromSeed with seed 0 yields the default secret)
 * and checks it by hashing a probe buffer both ways before any launch.
 *
 *   len 0..16, 17..128, 129..240   the short paths (xxh3_short): at most
 *       one leaf per tensor (the last) is this short; lane 0 hashes it.
 *   len > 240   the long path: 8 64-bit accumulators; every 64-byte stripe s
 *       of a 1024-byte block adds, for each word i of the stripe (data dv,
 *       key k = secret word s + i, dk = dv ^ k):
 *           acc[i ^ 1] += dv;   acc[i] += lo32(dk) * hi32(dk)
 *       After each full block: acc[i] = (acc[i] ^ acc[i] >> 47 ^ secret word
 *       16 + i) * PRIME32_1. The bytes after the last full block: the whole
 *       stripes among them (keys as above), then the LAST 64 bytes of the
 *       input (keys from secret byte 121, unaligned). Merge: len * PRIME64_1
 *       + sum_j fold(acc[2j] ^ key(11 + 16j), acc[2j+1] ^ key(19 + 16j)),
 *       then the final avalanche.
 *
 * How a warp runs the long path. Inside a block the additions commute
 * (mod 2^64), so the 128 words of a block can be processed in any order and
 * summed. Lane t takes q = t % 4 and srow = t / 4 and reads 16 bytes at
 * 16t and 16 bytes at 512 + 16t: words 2q and 2q+1 of stripes srow and
 * 8 + srow. Those two words feed exactly acc[2q] and acc[2q+1] (acc[i^1]
 * pairs them), so each lane owns one accumulator pair; the 8 lanes with the
 * same q add their partial sums with three xor-shuffles (4, 8, 16) and every
 * one of them keeps the pair, identical, through the scramble. The keys a
 * lane needs are the same for every block: four registers. The tail (whole
 * stripes after the last full block, and the last stripe) is summed the
 * same way with lanes masked; the merge adds the four pairs' terms with two
 * more shuffles (1, 2). vqc_gpu_xxh3_64_emulated runs exactly this lane
 * arithmetic on the CPU so a machine without a GPU can check it against
 * libxxhash.
 *
 * Speed: a lane issues two 16-byte loads per 1024-byte block, and four
 * blocks' loads go out before the first is used (4 KiB in flight per warp);
 * loads are streaming (evict-first: the digest reads each byte once). */
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h> /* XXH3_generateSecret_fromSeed: the default secret */

#include "gpu_internal.h"
#include "vqc/digest.h"
#include "vqc/gpu.h"

/* The kernels themselves (device code only; kernels/emu runs the same
 * source on the CPU). */
#include "digest_kernels.cuh"

/* ---- host emulation of the warp (vqc_gpu_xxh3_64_emulated) */

/* The long path with 32 "lanes" run one after another; the shuffles become
 * sums over the lanes of one q. Same helpers as the kernel. */
static uint64_t xxh3_long_emulated(const uint8_t *p, uint64_t len,
                                   const uint8_t *sec) {
  uint64_t sec64[SECRET_SIZE / 8];
  for (int j = 0; j < SECRET_SIZE / 8; j++) sec64[j] = rd64(sec + 8 * j);
  long_shape sh = shape_of(len);
  uint64_t ae[4], ao[4]; /* pair q's accumulators (all its lanes agree) */
  for (int q = 0; q < 4; q++) {
    ae[q] = acc_init(2 * q);
    ao[q] = acc_init(2 * q + 1);
  }
  for (uint64_t b = 0; b < sh.full_blocks; b++) {
    const uint8_t *blk = p + b * BLOCK_BYTES;
    uint64_t se[4] = {0}, so[4] = {0};
    for (int t = 0; t < 32; t++) {
      lane_keys k = keys_for_lane(sec64, t);
      const uint8_t *w0 = blk + 16 * t, *w1 = blk + 512 + 16 * t;
      add_pair(rd64(w0), rd64(w0 + 8), k.e0, k.o0, &se[t & 3], &so[t & 3]);
      add_pair(rd64(w1), rd64(w1 + 8), k.e1, k.o1, &se[t & 3], &so[t & 3]);
    }
    for (int q = 0; q < 4; q++) {
      ae[q] = scramble(ae[q] + se[q], sec64[SCRAMBLE_KEY + 2 * q]);
      ao[q] = scramble(ao[q] + so[q], sec64[SCRAMBLE_KEY + 2 * q + 1]);
    }
  }
  uint64_t se[4] = {0}, so[4] = {0};
  for (int t = 0; t < 32; t++)
    tail_sums(p, len, sh, sec, keys_for_lane(sec64, t), t, &se[t & 3],
              &so[t & 3]);
  uint64_t h = len * P64_1;
  for (int q = 0; q < 4; q++)
    h += merge_term(ae[q] + se[q], ao[q] + so[q], sec, q);
  return avalanche_xxh3(h);
}

/* ---- host side */

static size_t leaf_count(size_t n) {
  return n == 0 ? 1 : (n - 1) / VQC_DIGEST_CHUNK + 1;
}

/* XXH3-64 of a host buffer by the reference order of the algorithm (one
 * accumulator pass per stripe, as the description above reads): used only
 * to check the secret and the emulation, never for results. */
static uint64_t xxh3_reference(const uint8_t *p, uint64_t len,
                               const uint8_t *sec) {
  if (len <= 240) return xxh3_short(p, len, sec);
  uint64_t acc[8];
  for (int i = 0; i < 8; i++) acc[i] = acc_init(i);
  long_shape sh = shape_of(len);
  /* stripe s at `in` with keys from secret byte `koff` */
  for (uint64_t b = 0; b <= sh.full_blocks; b++) {
    int nstripes = b < sh.full_blocks ? 16 : sh.tail_stripes;
    for (int s = 0; s < nstripes; s++) {
      const uint8_t *in = p + b * BLOCK_BYTES + STRIPE * s;
      for (int i = 0; i < 8; i++) {
        uint64_t dv = rd64(in + 8 * i), dk = dv ^ rd64(sec + 8 * s + 8 * i);
        acc[i ^ 1] += dv;
        acc[i] += (dk & 0xFFFFFFFFULL) * (dk >> 32);
      }
    }
    if (b < sh.full_blocks)
      for (int i = 0; i < 8; i++)
        acc[i] = scramble(acc[i], rd64(sec + 8 * (SCRAMBLE_KEY + i)));
  }
  for (int i = 0; i < 8; i++) {
    uint64_t dv = rd64(p + len - STRIPE + 8 * i);
    uint64_t dk = dv ^ rd64(sec + LAST_STRIPE_KEY + 8 * i);
    acc[i ^ 1] += dv;
    acc[i] += (dk & 0xFFFFFFFFULL) * (dk >> 32);
  }
  uint64_t h = len * P64_1;
  for (int q = 0; q < 4; q++)
    h += merge_term(acc[2 * q], acc[2 * q + 1], sec, q);
  return avalanche_xxh3(h);
}

/* The default secret from libxxhash, checked: a probe of every path length
 * class hashed here (reference order and lane emulation) must equal
 * libxxhash's XXH3_64bits (vqc_xxh3_64). A mismatch means this file's
 * reading of XXH3 and the installed library disagree: no digest from the
 * kernel could be trusted, so nothing runs. */
static vqc_status get_secret(xxh3_secret *s) {
  uint8_t bytes[SECRET_SIZE];
  XXH3_generateSecret_fromSeed(bytes, 0);
  memcpy(s->w, bytes, SECRET_SIZE);
  static const uint64_t probe_lens[] = {0, 3, 8, 16, 100, 200, 240, 241,
                                        1024, 1025, 2100};
  uint8_t probe[2100];
  for (size_t i = 0; i < sizeof probe; i++)
    probe[i] = (uint8_t)(i * 131u + (i >> 7) * 17u + 5u);
  for (size_t j = 0; j < sizeof probe_lens / sizeof probe_lens[0]; j++) {
    uint64_t len = probe_lens[j], want = vqc_xxh3_64(probe, len);
    uint64_t ref = xxh3_reference(probe, len, bytes);
    uint64_t emu = len <= 240 ? ref : xxh3_long_emulated(probe, len, bytes);
    if (ref != want || emu != want)
      return vqc_error(VQC_EINTERNAL,
                       "gpu digest: XXH3 of a %llu-byte probe is %016llx in "
                       "libxxhash but %016llx (reference order) / %016llx "
                       "(warp order) here; the kernel's XXH3 does not match "
                       "the installed library",
                       (unsigned long long)len, (unsigned long long)want,
                       (unsigned long long)ref, (unsigned long long)emu);
  }
  return VQC_OK;
}

vqc_status vqc_gpu_xxh3_64_emulated(const void *data, size_t n,
                                    uint64_t *out) {
  if (out == NULL || (data == NULL && n > 0))
    return vqc_error(VQC_EINVAL, "vqc_gpu_xxh3_64_emulated: NULL argument");
  uint8_t sec[SECRET_SIZE];
  XXH3_generateSecret_fromSeed(sec, 0);
  const uint8_t *p = (const uint8_t *)data;
  *out = n <= 240 ? xxh3_short(p, n, sec) : xxh3_long_emulated(p, n, sec);
  return VQC_OK;
}

vqc_status vqc_gpu_digest_leaves_on(const void *dev, size_t n,
                                    uint64_t *leaves, void *stream_handle) {
  VQC_TRY(vqc_gpu_require("gpu digest"));
  if (leaves == NULL)
    return vqc_error(VQC_EINVAL, "gpu digest: leaves is NULL");
  VQC_TRY(vqc_gpu_check_device_ptr("gpu digest", "dev", dev, n));
  cudaStream_t stream = (cudaStream_t)stream_handle;
  xxh3_secret secret;
  VQC_TRY(get_secret(&secret));
  size_t nleaves = leaf_count(n);
  if (n == 0) { /* one leaf, the hash of nothing; no device work */
    leaves[0] = xxh3_short(NULL, 0, (const uint8_t *)secret.w);
    return VQC_OK;
  }
  if (nleaves / WARPS_PER_BLOCK >= (size_t)2147483647)
    return vqc_error(VQC_EINVAL, "gpu digest: %zu leaves exceed one launch",
                     nleaves);
  /* Everything below is queued on `stream`, after the work the caller
   * queued there (the producer of the bytes), and waited for there only. */
  uint64_t *d_leaves = NULL; /* (nleaves) on the device, freed below */
  VQC_TRY(vqc_gpu_scratch_alloc_on((void **)&d_leaves,
                                   nleaves * sizeof(uint64_t), stream,
                                   __FILE__, __LINE__));
  /* Poisoned: a leaf no warp wrote reads back as this, not as an old value
   * that happens to be right. */
  vqc_status s = GPU_CHECK(
      cudaMemsetAsync(d_leaves, 0xA5, nleaves * sizeof(uint64_t), stream));
  if (s == VQC_OK) {
    digest_leaves_kernel<<<vqc_gpu_blocks((int64_t)nleaves, WARPS_PER_BLOCK),
                           WARPS_PER_BLOCK * 32, 0, stream>>>(
        (const uint8_t *)dev, n, nleaves, secret, d_leaves);
    s = GPU_LAUNCH_CHECK("digest_leaves_kernel");
  }
  if (s == VQC_OK)
    s = GPU_CHECK(cudaMemcpyAsync(leaves, d_leaves, nleaves * sizeof(uint64_t),
                                  cudaMemcpyDeviceToHost, stream));
  if (s == VQC_OK)
    s = vqc_cuda_check_at(cudaStreamSynchronize(stream),
                          "digest_leaves_kernel", __FILE__, __LINE__);
  vqc_gpu_scratch_free_on(d_leaves, stream);
  return s;
}

vqc_status vqc_gpu_digest_leaves(const void *dev, size_t n, uint64_t *leaves) {
  return vqc_gpu_digest_leaves_on(dev, n, leaves, NULL);
}

vqc_status vqc_gpu_digest_buffer(const void *dev, size_t n, vqc_dtype dt,
                                 int ndim, const int64_t *shape,
                                 uint64_t *out) {
  if (out == NULL) return vqc_error(VQC_EINVAL, "gpu digest: out is NULL");
  uint8_t header[8 + 8 * VQC_MAX_DIMS];
  size_t hlen = vqc_digest_header(dt, ndim, shape, header);
  if (hlen == 0)
    return vqc_error(VQC_EINVAL, "gpu digest: bad dtype %d or ndim %d",
                     (int)dt, ndim);
  size_t want = vqc_dtype_size(dt);
  for (int d = 0; d < ndim; d++) {
    if (shape[d] < 0)
      return vqc_error(VQC_EINVAL, "gpu digest: shape[%d] = %lld", d,
                       (long long)shape[d]);
    want *= (size_t)shape[d];
  }
  if (want != n)
    return vqc_error(VQC_EINVAL,
                     "gpu digest: %zu bytes given but dtype %s and shape need "
                     "%zu", n, vqc_dtype_name(dt), want);

  /* header | leaves as u64 little-endian, hashed once on the host. Both
   * buffers are owned here. */
  size_t nleaves = leaf_count(n);
  uint8_t *root = (uint8_t *)malloc(hlen + 8 * nleaves);
  if (root == NULL)
    return vqc_error(VQC_ENOMEM, "gpu digest: no memory for %zu leaves",
                     nleaves);
  memcpy(root, header, hlen);
  uint64_t *leaves = (uint64_t *)malloc(8 * nleaves);
  vqc_status s = leaves ? vqc_gpu_digest_leaves(dev, n, leaves)
                        : vqc_error(VQC_ENOMEM, "gpu digest: no memory");
  if (s == VQC_OK) {
    for (size_t i = 0; i < nleaves; i++)
      for (int b = 0; b < 8; b++)
        root[hlen + 8 * i + b] = (uint8_t)(leaves[i] >> (8 * b));
    *out = vqc_xxh3_64(root, hlen + 8 * nleaves);
  }
  free(leaves);
  free(root);
  return s;
}
