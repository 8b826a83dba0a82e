/* vq_stats.c: a batch's per-code counts and sums (vqc_vq_batch_stats, vq.h
 * states the order they are summed in), the statistics the EMA update
 * (vq_ema.c) reduces across ranks and lerps toward.
 *
 * Code c's sum is a sequence of double additions fixed by vq.h: its rows in
 * increasing row order, in chunks of VQC_VQ_STATS_CHUNK rows, each chunk
 * summed from 0, the chunk sums added from 0 in chunk order, rounded once.
 * Only the order within a code is fixed (codes and columns are
 * independent), so one pass over the rows in row order does it: chunk
 * (C, D) doubles holds each code's open chunk, total (C, D) its closed
 * chunks' sum, and a row's columns are added to its code's chunk 16 at a
 * time with AVX2 where the CPU has it (cvtps_pd widens exactly; add_pd is
 * the same double addition as the scalar +=), the rest in plain C. Every
 * kernel (vq_stats.h) gives the same bits.
 *
 * What limits it (measured on the 2-core AMD EPYC of the README, C = 1024,
 * D = 64): the chunk buffer is 512 KiB, as big as the core's L2, so a
 * row's 512 bytes of chunk are mostly not in L1 or L2. Asking for them
 * STATS_PREFETCH rows ahead (the codes of later rows are known) hides most
 * of that wait. Tried and dropped: a counting sort of the rows by code,
 * then each code's rows summed in registers. It needs no chunk buffer, but
 * reading x in code order (random 256-byte rows) ran at about half the
 * speed of reading it in order, and the sort itself cost a third of a read
 * of x, so it was slower than this loop. So were two passes of 32 columns
 * each (256 KiB of chunk sums, which fit L2): 0.35x of a read against
 * 0.47-0.56x for this one pass, timed in the same process. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quant/vq_internal.h"
#include "quant/vq_stats.h"

/* How many rows ahead the chunk of a later row's code is prefetched (into
 * L1, for writing), and how many rows ahead x is (into L2 only): with some
 * 10-20 ns per row, 8 rows cover a miss to L3. Measured on the Zen 3 of the
 * README (ratio to a plain read of x, medians of 15 interleaved runs): no
 * prefetch 0.37-0.38x, the chunk alone 0.40-0.43x, the chunk and x (8 rows
 * ahead, into L1) 0.50-0.61x. x is read in order, but the hardware
 * prefetcher alone did not keep up with it while the chunk accesses jump
 * around. On the Zen 4 VM (1 MiB L2), x from memory, best of 15 calls:
 * x 8 rows ahead into L1 1.35-1.48 ms, 16-128 rows ahead into L1 no
 * better; 16-64 rows ahead into L2 only 1.10-1.28 ms (the chunk lines,
 * which the pass reads and writes back, are then not pushed out of L1 by
 * rows of x that are not needed yet); 128-512 rows ahead the same, every
 * other line of x only 1.35-1.5x the time, none 1.6x. With x in L3 the
 * pass takes 0.72 ms: the rest is x's misses to memory (README, "EMA
 * statistics"). */
enum { STATS_PREFETCH = 8, STATS_PREFETCH_X = 32 };

#if VQ_X86_KERNELS /* vq_nearest.h: x86 with GCC or Clang */
#include <immintrin.h>
#endif

/* Asks for row j's code's chunk (to be written), into L1. A bad index
 * there is reported when its row comes; until then it prefetches code 0's
 * chunk (a prefetch never faults, but the address must be formed from a
 * valid index). always_inline: GCC 12 finds that a function of prefetches
 * alone has no effect and drops its calls (seen in the object code: no
 * prefetch left, and the loop 40% slower). */
__attribute__((always_inline)) static inline void
prefetch_chunk(int64_t D, const int64_t *indices, int64_t C,
               const double *chunk, int64_t j) {
  const uint64_t c = (uint64_t)indices[j];
  const char *k = (const char *)(chunk + (c < (uint64_t)C ? c : 0) * D);
  for (int64_t b = 0; b < D * (int64_t)sizeof(double); b += 64)
    __builtin_prefetch(k + b, 1, 3);
}

/* Asks for row j of x, into L2 (locality 2: prefetcht1). always_inline, as
 * prefetch_chunk. */
__attribute__((always_inline)) static inline void
prefetch_x_row(const float *x, int64_t D, int64_t j) {
  const char *xr = (const char *)(x + j * D);
  for (int64_t b = 0; b < D * (int64_t)sizeof(float); b += 64)
    __builtin_prefetch(xr + b, 0, 2);
}

/* Whether a code with `rows` rows so far has a total: it has closed a
 * chunk (a chunk closes when the row after a full one comes). Until then
 * its total is not written (it is not zeroed: see vq_batch_stats_with). */
static inline bool has_total(int64_t rows) {
  return rows > VQC_VQ_STATS_CHUNK;
}

/* A code's chunk is full: add it to the code's total and start a new one.
 * first: it is the code's first chunk, and total holds garbage
 * (has_total); 0 + chunk is chunk itself, bit for bit, so it is copied. (A
 * sum started from +0.0 is never -0.0, the one double that 0 + v would
 * change.) */
static inline void close_chunk(double *total, double *chunk, int64_t D,
                               bool first) {
  if (first)
    for (int64_t d = 0; d < D; d++) total[d] = chunk[d], chunk[d] = 0.0;
  else
    for (int64_t d = 0; d < D; d++) total[d] += chunk[d], chunk[d] = 0.0;
}

/* What every kernel does before adding row i (of M): asks for the chunk
 * row i + STATS_PREFETCH will need and for row i + STATS_PREFETCH_X of x,
 * closes the row's code's chunk when it is full and counts the row.
 * Returns that chunk, or NULL when the row's index is outside [0, C)
 * (nothing done then). always_inline, as prefetch_chunk. */
__attribute__((always_inline)) static inline double *
chunk_of_row(const float *x, int64_t M, int64_t D, const int64_t *indices,
             int64_t C, double *chunk, double *total, int64_t *rows,
             int64_t i) {
  const int64_t c = indices[i];
  if (c < 0 || c >= C) return NULL;
  if (i + STATS_PREFETCH < M)
    prefetch_chunk(D, indices, C, chunk, i + STATS_PREFETCH);
  if (i + STATS_PREFETCH_X < M) prefetch_x_row(x, D, i + STATS_PREFETCH_X);
  double *k = chunk + c * D;
  if (rows[c] > 0 && rows[c] % VQC_VQ_STATS_CHUNK == 0)
    close_chunk(total + c * D, k, D, !has_total(rows[c]));
  rows[c]++;
  return k;
}

/* The pass over the rows (see above): chunk (C, D) and rows (C) from zero,
 * total (C, D) written before it is read (close_chunk). Returns M, or the
 * first row whose index is outside [0, C) (nothing after it is added).
 * Plain C. */
static int64_t stats_rows_plain(const float *x, int64_t M, int64_t D,
                                const int64_t *indices, int64_t C,
                                double *chunk, double *total, int64_t *rows) {
  for (int64_t i = 0; i < M; i++) {
    double *k = chunk_of_row(x, M, D, indices, C, chunk, total, rows, i);
    if (!k) return i;
    const float *xi = x + i * D;
    for (int64_t d = 0; d < D; d++) k[d] += xi[d];
  }
  return M;
}

#if VQ_X86_KERNELS
/* As stats_rows_plain, the columns [0, D/16*16) 16 at a time with AVX2
 * (cvtps_pd widens exactly; add_pd is the same double addition as +=). */
__attribute__((target("avx2"))) static int64_t
stats_rows_avx2(const float *x, int64_t M, int64_t D, const int64_t *indices,
                int64_t C, double *chunk, double *total, int64_t *rows) {
  const int64_t D16 = D / 16 * 16;
  for (int64_t i = 0; i < M; i++) {
    double *k = chunk_of_row(x, M, D, indices, C, chunk, total, rows, i);
    if (!k) return i;
    const float *xi = x + i * D;
    for (int64_t d = 0; d < D16; d += 16) {
#pragma GCC unroll 4
      for (int v = 0; v < 16; v += 4)
        _mm256_storeu_pd(k + d + v,
                         _mm256_add_pd(_mm256_loadu_pd(k + d + v),
                                       _mm256_cvtps_pd(_mm_loadu_ps(xi + d + v))));
    }
    for (int64_t d = D16; d < D; d++) k[d] += xi[d];
  }
  return M;
}
#endif

/* The pass with kernel k (available here, checked by the caller). The
 * AVX-512 kernel is the AVX2 loop: one with 8-double zmm additions measured
 * the same (1.52 ms per call on the Zen 4 of the README, against 1.52 for
 * AVX2 and 1.61 for plain C, medians of 21 interleaved calls with x in
 * memory only): the pass waits on memory (x, and the chunk lines of 1024
 * codes), not on instructions. The bfloat16 choice (a nearest-code
 * screen) has nothing to screen here and runs it too. */
static int64_t stats_rows(vq_kernel k, const float *x, int64_t M, int64_t D,
                          const int64_t *indices, int64_t C, double *chunk,
                          double *total, int64_t *rows) {
#if VQ_X86_KERNELS
  if (k == VQ_KERNEL_AVX2 || k == VQ_KERNEL_AVX512 ||
      k == VQ_KERNEL_AVX512_BF16)
    return stats_rows_avx2(x, M, D, indices, C, chunk, total, rows);
#endif
  (void)k;
  return stats_rows_plain(x, M, D, indices, C, chunk, total, rows);
}

/* Writes counts (C) and sums[c * stride_c + d * stride_d] = (float)(total +
 * chunk) for 16 codes at a time, through a (16, 64) tile: with the
 * transposed layout vq_ema_update uses (stride_c = 1), writing code by code
 * would put every float on another 4 KiB page. A code without a total
 * (has_total) sums to 0 + chunk, which is chunk (close_chunk says why),
 * and its total is not read. */
static void write_sums(const double *total, const double *chunk,
                       const int64_t *rows, int64_t C, int64_t D,
                       float *counts, float *sums, int64_t stride_c,
                       int64_t stride_d) {
  float tile[16][64];
  for (int64_t c = 0; c < C; c++)
    counts[c] = rows[c] <= (1 << 24) ? (float)rows[c] : 16777216.0f;
  for (int64_t c0 = 0; c0 < C; c0 += 16) {
    const int64_t cn = C - c0 < 16 ? C - c0 : 16;
    for (int64_t d0 = 0; d0 < D; d0 += 64) {
      const int64_t dn = D - d0 < 64 ? D - d0 : 64;
      for (int64_t c = 0; c < cn; c++) {
        const int64_t at = (c0 + c) * D + d0;
        if (has_total(rows[c0 + c]))
          for (int64_t d = 0; d < dn; d++)
            tile[c][d] = (float)(total[at + d] + chunk[at + d]);
        else
          for (int64_t d = 0; d < dn; d++) tile[c][d] = (float)chunk[at + d];
      }
      for (int64_t d = 0; d < dn; d++)
        for (int64_t c = 0; c < cn; c++)
          sums[(c0 + c) * stride_c + (d0 + d) * stride_d] = tile[c][d];
    }
  }
}

vqc_status vq_batch_stats_with(vq_kernel k, const float *x, int64_t M,
                               int64_t D, const int64_t *indices, int64_t C,
                               float *counts, float *sums, int64_t stride_c,
                               int64_t stride_d) {
  const char *fn = "vq_ema_update";
  if (!vq_kernel_available(k))
    return vqc_error(VQC_EUNSUPPORTED, "%s: kernel %s is not available here",
                     fn, vq_kernel_name(k));
  VQC_TRY(vq_check_rows(fn, x, M));
  if (C <= 0 || D <= 0 || !counts || !sums || (M > 0 && !indices))
    return vqc_error(VQC_EINVAL, "%s: C %lld, D %lld or a NULL buffer", fn,
                     (long long)C, (long long)D);
  /* chunk (C, D): the open chunk's double sum, from zero; total (C, D):
   * the chunk sums added so far, not zeroed (a code's total is written at
   * its first close_chunk and read only after that: with fewer than
   * VQC_VQ_STATS_CHUNK rows per code, most codes never touch it; not
   * zeroing it, nor reading it back in write_sums, took 2-4% off the call
   * at C 1024, D 64 and 12-14% at C 3000-4096, paired interleaved calls
   * with x from memory). One block, freed below (one block of the same
   * size every call is also what lets malloc reuse it without fresh pages,
   * whose faults cost more than zeroing). rows (C): rows of each code
   * seen. */
  double *chunk = (uint64_t)C <= SIZE_MAX / 2 / sizeof *chunk / (uint64_t)D
                      ? malloc((size_t)(2 * C * D) * sizeof *chunk)
                      : NULL;
  double *total = chunk ? chunk + C * D : NULL;
  if (chunk) memset(chunk, 0, (size_t)(C * D) * sizeof *chunk);
  int64_t *rows = calloc((size_t)C, sizeof *rows);
  vqc_status s = VQC_OK;
  if (!chunk || !rows) {
    s = vqc_error(VQC_ENOMEM, "%s: sums for %lld codes", fn, (long long)C);
    goto done;
  }
  /* the pass's answer: M, or the first bad row */
  const int64_t bad = stats_rows(k, x, M, D, indices, C, chunk, total, rows);
  if (bad < M) {
    s = vqc_error(VQC_EINVAL, "%s: index %lld of row %lld is outside [0, %lld)",
                  fn, (long long)indices[bad], (long long)bad, (long long)C);
    goto done;
  }
  write_sums(total, chunk, rows, C, D, counts, sums, stride_c, stride_d);
done:
  free(chunk);
  free(rows);
  return s;
}

vqc_status vqc_vq_batch_stats(const float *x, int64_t M, int64_t D,
                              const int64_t *indices, int64_t C,
                              float *counts, float *sums, int64_t stride_c,
                              int64_t stride_d) {
  return vq_batch_stats_with(vq_kernel_best(), x, M, D, indices, C, counts,
                             sums, stride_c, stride_d);
}
