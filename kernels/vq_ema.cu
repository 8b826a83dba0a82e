/* vq_ema.cu: the codebook's EMA primitives on the device: batch statistics
 * (per-code counts and sums), the lerp toward them, the Laplace-smoothed
 * renormalisation, and the gather of quantized rows. CPU twins:
 * vqc_vq_batch_stats and vqc_vq_ema_update's steps (vq_ema.c),
 * vq_renormalize (vq_codebook.c). The device VQ step that strings them
 * together with the nearest-code search is lib/src/quant/vq_device.c
 * (vqc_vq_device_forward), beside its CPU twin.
 *
 * Statistics, deterministic and equal to the CPU's bits. The CPU
 * (vqc_vq_batch_stats, vq.h) defines one summation order: each code's rows
 * in row order, cut into chunks of VQC_VQ_STATS_CHUNK rows, each chunk
 * summed in double from 0, the chunk sums added in chunk order, rounded
 * once; counts are float += 1.0f (exact up to 2^24, then stuck at 2^24).
 * Float atomics would make the sums depend on thread timing, so instead:
 *   1. keys (M) uint32 = indices (checked against [0, C): the first bad row
 *      is found with an integer atomicMin, so the error names the CPU's row);
 *   2. a stable radix sort (CUB) of (key, row) pairs over the key's bits:
 *      rows come out grouped by code and, within a code, in increasing order;
 *   3. per-code counts by integer atomics (exact in any order), an exclusive
 *      scan gives each code's segment; per-code tile counts
 *      ceil(n_c / CHUNK) and their scans number the tiles (chunks);
 *   4. one block per tile sums its chunk in order, one thread per
 *      dimension; a code of one tile is finished there, the others' tile
 *      sums (double) go to scratch and one block per code adds them in tile
 *      order. So a collapsed codebook (one code holding most rows, the
 *      usual failure of a VQ codebook) is summed by M / CHUNK blocks at
 *      once, not by one thread per dimension walking all M rows.
 * Same input, same bits, on every run and every GPU.
 *
 * EMA and smoothing: elementwise float operations written with _rn
 * intrinsics in the CPU's order, bit-identical. The total
 * tot = sum(cluster_size) is the CPU's double sum in index order, done by
 * one thread (C dependent double adds: ~40 us at C = 8192), because any
 * parallel order would round differently. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "gpu_internal.h"
#include "vqc/gpu.h"
#include "vqc/vq.h"

/* The kernels themselves (device code only; kernels/emu runs the same
 * source on the CPU). */
#include "vq_ema_kernels.cuh"

/* ---- statistics */

/* Bits a key in [0, C) needs (at least 1 for CUB). */
static int key_bits(int64_t C) {
  int bits = 1;
  while (bits < 31 && ((int64_t)1 << bits) < C) bits++;
  return bits;
}

vqc_status vqc_gpu_vq_stats(const float *x, int64_t M, int64_t D,
                            const int64_t *indices, int64_t C, float *counts,
                            float *sums) {
  const char *fn = "gpu vq stats";
  VQC_TRY(vqc_gpu_require(fn));
  if (M < 0 || D <= 0 || C <= 0 || C >= 2147483647 || M > 2147483647)
    return vqc_error(VQC_EINVAL, "%s: M %lld, D %lld, C %lld out of range", fn,
                     (long long)M, (long long)D, (long long)C);
  VQC_TRY(vqc_gpu_check_device_ptr(fn, "counts", counts, (size_t)C * 4));
  VQC_TRY(vqc_gpu_check_device_ptr(fn, "sums", sums, (size_t)(C * D) * 4));
  if (M > 0) {
    VQC_TRY(vqc_gpu_check_device_ptr(fn, "x", x, (size_t)(M * D) * 4));
    VQC_TRY(vqc_gpu_check_device_ptr(fn, "indices", indices, (size_t)M * 8));
  }

  /* Scratch, all freed at `done`: keys and rows before and after the sort,
   * the per-code counts and offsets, tiles and partial tiles per code and
   * their offsets (C + 1 entries: the last holds the total), the partial
   * tiles' double sums, CUB's temporary storage, the bad-row flag. At most
   * tiles_max tiles exist: a code holds ceil(n_c / CHUNK) <= n_c / CHUNK + 1
   * tiles and at most min(C, M) codes have rows; only codes of two tiles or
   * more keep partial sums, at most 2 M / CHUNK of them (each such code has
   * n_c > CHUNK, so its ceil(n_c / CHUNK) < 2 n_c / CHUNK). */
  uint32_t *keys = NULL, *skeys = NULL; /* unsigned: plain radix order */
  int32_t *rows = NULL, *srows = NULL;
  unsigned *ncount = NULL, *offsets = NULL, *ntiles = NULL, *nparts = NULL,
           *tile_off = NULL, *part_off = NULL;
  double *parts = NULL;
  unsigned long long *bad = NULL;
  void *tmp = NULL;
  size_t sort_bytes = 0, scan_bytes = 0, scan1_bytes = 0;
  const size_t m = (size_t)(M > 0 ? M : 1), c1 = (size_t)C + 1;
  const int64_t tiles_max =
      (M + STATS_CHUNK - 1) / STATS_CHUNK + (C < M ? C : M);
  const size_t parts_max = (size_t)(2 * M / STATS_CHUNK + 1) * (size_t)D;
  const unsigned long long none = ~0ULL;
  unsigned long long first_bad = none;
  vqc_status s;

  if (tiles_max > 2147483647)
    return vqc_error(VQC_EINVAL, "%s: M %lld rows over C %lld codes need "
                     "more tiles than one grid holds; split the batch", fn,
                     (long long)M, (long long)C);
  if ((s = GPU_SCRATCH(&keys, m * 4)) || (s = GPU_SCRATCH(&rows, m * 4)) ||
      (s = GPU_SCRATCH(&skeys, m * 4)) || (s = GPU_SCRATCH(&srows, m * 4)) ||
      (s = GPU_SCRATCH(&ncount, (size_t)C * 4)) ||
      (s = GPU_SCRATCH(&offsets, (size_t)C * 4)) ||
      (s = GPU_SCRATCH(&ntiles, c1 * 4)) ||
      (s = GPU_SCRATCH(&nparts, c1 * 4)) ||
      (s = GPU_SCRATCH(&tile_off, c1 * 4)) ||
      (s = GPU_SCRATCH(&part_off, c1 * 4)) ||
      (s = GPU_SCRATCH(&parts, parts_max * sizeof(double))) ||
      (s = GPU_SCRATCH(&bad, sizeof *bad)))
    goto done;
  if ((s = GPU_CHECK(cub::DeviceRadixSort::SortPairs(
           NULL, sort_bytes, keys, skeys, rows, srows, (int)m, 0,
           key_bits(C)))) ||
      (s = GPU_CHECK(cub::DeviceScan::ExclusiveSum(NULL, scan_bytes, ncount,
                                                   offsets, (int)C))) ||
      (s = GPU_CHECK(cub::DeviceScan::ExclusiveSum(NULL, scan1_bytes, ntiles,
                                                   tile_off, (int)c1))))
    goto done;
  if (scan1_bytes > scan_bytes) scan_bytes = scan1_bytes;
  if ((s = GPU_SCRATCH(&tmp, sort_bytes > scan_bytes ? sort_bytes
                                                     : scan_bytes)))
    goto done;

  if ((s = GPU_CHECK(cudaMemsetAsync(ncount, 0, (size_t)C * 4, 0))) ||
      (s = GPU_CHECK(cudaMemcpyAsync(bad, &none, sizeof none,
                                     cudaMemcpyHostToDevice, 0))))
    goto done;
  if (M > 0) {
    stats_keys_kernel<<<vqc_gpu_blocks(M < 65536 * 256 ? M : 65536 * 256,
                                       EW_THREADS),
                        EW_THREADS>>>(indices, M, C, keys, rows, ncount, bad);
    if ((s = GPU_LAUNCH_CHECK("stats_keys_kernel"))) goto done;
    if ((s = GPU_CHECK(cub::DeviceRadixSort::SortPairs(
             tmp, sort_bytes, keys, skeys, rows, srows, (int)M, 0,
             key_bits(C)))))
      goto done;
  }
  if ((s = GPU_CHECK(cub::DeviceScan::ExclusiveSum(tmp, scan_bytes, ncount,
                                                   offsets, (int)C))))
    goto done;
  stats_tiles_kernel<<<vqc_gpu_blocks((int64_t)c1, EW_THREADS), EW_THREADS>>>(
      ncount, C, ntiles, nparts);
  if ((s = GPU_LAUNCH_CHECK("stats_tiles_kernel")) ||
      (s = GPU_CHECK(cub::DeviceScan::ExclusiveSum(tmp, scan_bytes, ntiles,
                                                   tile_off, (int)c1))) ||
      (s = GPU_CHECK(cub::DeviceScan::ExclusiveSum(tmp, scan_bytes, nparts,
                                                   part_off, (int)c1))))
    goto done;
  {
    int threads = D < EW_THREADS ? (int)((D + 31) / 32 * 32) : EW_THREADS;
    if (tiles_max > 0) {
      stats_tile_sums_kernel<<<(unsigned)tiles_max, threads>>>(
          x, D, C, srows, offsets, ncount, tile_off, part_off, parts, counts,
          sums);
      if ((s = GPU_LAUNCH_CHECK("stats_tile_sums_kernel"))) goto done;
    }
    stats_combine_kernel<<<(unsigned)C, threads>>>(D, ncount, part_off, parts,
                                                   counts, sums);
    if ((s = GPU_LAUNCH_CHECK("stats_combine_kernel"))) goto done;
  }
  if ((s = GPU_CHECK(cudaMemcpyAsync(&first_bad, bad, sizeof first_bad,
                                     cudaMemcpyDeviceToHost, 0))))
    goto done;
  s = GPU_SYNC("stats_combine_kernel");
  if (s == VQC_OK && first_bad != none) {
    int64_t bad_index = 0;
    (void)GPU_CHECK(cudaMemcpy(&bad_index, indices + first_bad,
                               sizeof bad_index, cudaMemcpyDeviceToHost));
    s = vqc_error(VQC_EINVAL,
                  "vq_ema_update: index %lld of row %llu is outside [0, %lld)",
                  (long long)bad_index, first_bad, (long long)C);
  }
done:
  vqc_gpu_scratch_free(keys);
  vqc_gpu_scratch_free(rows);
  vqc_gpu_scratch_free(skeys);
  vqc_gpu_scratch_free(srows);
  vqc_gpu_scratch_free(ncount);
  vqc_gpu_scratch_free(offsets);
  vqc_gpu_scratch_free(ntiles);
  vqc_gpu_scratch_free(nparts);
  vqc_gpu_scratch_free(tile_off);
  vqc_gpu_scratch_free(part_off);
  vqc_gpu_scratch_free(parts);
  vqc_gpu_scratch_free(bad);
  vqc_gpu_scratch_free(tmp);
  return s;
}

/* ---- EMA and smoothing */

/* The codebook state (cluster_size (C), embed_avg (C, D), embed (C, D)) is
 * device memory. */
static vqc_status check_codebook_state(const char *fn,
                                       const float *cluster_size,
                                       const float *embed_avg,
                                       const float *embed, int64_t C,
                                       int64_t D) {
  VQC_TRY(vqc_gpu_check_device_ptr(fn, "cluster_size", cluster_size,
                                   (size_t)C * 4));
  VQC_TRY(vqc_gpu_check_device_ptr(fn, "embed_avg", embed_avg,
                                   (size_t)(C * D) * 4));
  return vqc_gpu_check_device_ptr(fn, "embed", embed, (size_t)(C * D) * 4);
}

static vqc_status launch_lerp(float *a, const float *b, size_t n, float w) {
  if (n == 0) return VQC_OK;
  int64_t work = n < (size_t)65536 * EW_THREADS ? (int64_t)n
                                                : (int64_t)65536 * EW_THREADS;
  lerp_kernel<<<vqc_gpu_blocks(work, EW_THREADS), EW_THREADS>>>(a, b, n, w);
  return GPU_LAUNCH_CHECK("lerp_kernel");
}

static vqc_status launch_renormalize(const float *cs, const float *avg,
                                     int64_t C, int64_t D, double eps_d,
                                     float *tot_scratch, float *embed) {
  /* As vq_renormalize: eps to float; C * eps formed in double first. */
  const float eps = (float)eps_d, c_eps = (float)((double)C * eps_d);
  total_kernel<<<1, TOT_STAGE>>>(cs, C, tot_scratch);
  VQC_TRY(GPU_LAUNCH_CHECK("total_kernel"));
  int64_t n = C * D, work = n < (int64_t)65536 * EW_THREADS
                                ? n
                                : (int64_t)65536 * EW_THREADS;
  renorm_kernel<<<vqc_gpu_blocks(work, EW_THREADS), EW_THREADS>>>(
      cs, avg, C, D, eps, c_eps, tot_scratch, embed);
  return GPU_LAUNCH_CHECK("renorm_kernel");
}

vqc_status vqc_gpu_lerp(float *a, const float *b, size_t n, float w) {
  VQC_TRY(vqc_gpu_require("gpu lerp"));
  VQC_TRY(vqc_gpu_check_device_ptr("gpu lerp", "a", a, n * 4));
  VQC_TRY(vqc_gpu_check_device_ptr("gpu lerp", "b", b, n * 4));
  VQC_TRY(launch_lerp(a, b, n, w));
  return GPU_SYNC("lerp_kernel");
}

vqc_status vqc_gpu_vq_renormalize(const float *cluster_size,
                                  const float *embed_avg, int64_t C,
                                  int64_t D, double eps, float *embed) {
  VQC_TRY(vqc_gpu_require("gpu vq renormalize"));
  const char *fn = "gpu vq renormalize";
  if (C <= 0 || D <= 0)
    return vqc_error(VQC_EINVAL, "%s: C %lld, D %lld", fn, (long long)C,
                     (long long)D);
  VQC_TRY(check_codebook_state(fn, cluster_size, embed_avg, embed, C, D));
  float *tot = NULL; /* one float of scratch, freed below */
  VQC_TRY(GPU_SCRATCH(&tot, sizeof *tot));
  vqc_status s =
      launch_renormalize(cluster_size, embed_avg, C, D, eps, tot, embed);
  if (s == VQC_OK) s = GPU_SYNC("renorm_kernel");
  vqc_gpu_scratch_free(tot);
  return s;
}

/* ---- the gather */

vqc_status vqc_gpu_vq_gather(const float *E, int64_t C, int64_t D,
                             const int64_t *indices, int64_t M,
                             float *quantized) {
  const char *fn = "gpu vq gather";
  VQC_TRY(vqc_gpu_require(fn));
  if (C <= 0 || D <= 0 || M < 0)
    return vqc_error(VQC_EINVAL, "%s: C %lld, D %lld, M %lld", fn,
                     (long long)C, (long long)D, (long long)M);
  if (M == 0) return VQC_OK;
  VQC_TRY(vqc_gpu_check_device_ptr(fn, "E", E, (size_t)(C * D) * 4));
  VQC_TRY(vqc_gpu_check_device_ptr(fn, "indices", indices, (size_t)M * 8));
  VQC_TRY(vqc_gpu_check_device_ptr(fn, "quantized", quantized,
                                   (size_t)(M * D) * 4));
  unsigned long long *bad = NULL, first_bad = ~0ULL;
  const unsigned long long none = ~0ULL;
  VQC_TRY(GPU_SCRATCH(&bad, sizeof *bad));
  vqc_status s = GPU_CHECK(
      cudaMemcpyAsync(bad, &none, sizeof none, cudaMemcpyHostToDevice, 0));
  if (s == VQC_OK) {
    int64_t n = M * D, work = n < (int64_t)65536 * EW_THREADS
                                  ? n
                                  : (int64_t)65536 * EW_THREADS;
    gather_kernel<<<vqc_gpu_blocks(work, EW_THREADS), EW_THREADS>>>(
        E, C, D, indices, M, quantized, bad);
    s = GPU_LAUNCH_CHECK("gather_kernel");
  }
  if (s == VQC_OK)
    s = GPU_CHECK(cudaMemcpyAsync(&first_bad, bad, sizeof first_bad,
                                  cudaMemcpyDeviceToHost, 0));
  if (s == VQC_OK) s = GPU_SYNC("gather_kernel");
  vqc_gpu_scratch_free(bad);
  if (s == VQC_OK && first_bad != none)
    s = vqc_error(VQC_EINVAL, "%s: the index of row %llu is outside [0, %lld)",
                  fn, first_bad, (long long)C);
  return s;
}
