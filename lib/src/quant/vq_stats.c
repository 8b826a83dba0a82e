/* vq_stats.c: a batch's per-code counts and sums (vqc_vq_batch_stats, vq.h
 * states the order they are summed in), the statistics the EMA update
 * (vq_ema.c) reduces across ranks and lerps toward.
 *
 * Code c's sum is a sequence of double additions fixed by vq.h: its rows in
 * increasing row order, in chunks of VQC_VQ_STATS_CHUNK rows, each chunk
 * summed from 0, the chunk sums added from 0 in chunk order, rounded once.
 * Only the order within a code is fixed (codes and columns are
 * independent), so two shapes of pass give the same bits:
 * - row order (plain C, AVX2): one pass over the rows; chunk (C, D)
 *   doubles holds each code's open chunk, total (C, D) its closed chunks'
 *   sum, and a row's columns are added to its code's chunk, 16 at a time
 *   with AVX2 (cvtps_pd widens exactly; add_pd is the same double addition
 *   as the scalar +=);
 * - blocks in code order (AVX-512, below): the rows STATS_BLOCK at a time,
 *   sorted by code, each code's rows in the block added in registers, so
 *   that its chunk is read and written once per block, not once per row.
 * Every kernel (vq_stats.h) gives the same bits.
 *
 * What limits the row-order pass (measured on the 2-core AMD EPYC of the
 * README, C = 1024, D = 64): the chunk buffer is 512 KiB, as big as the
 * core's L2, and each row reads and writes 512 bytes of it (with x already
 * in L1 the pass still takes 0.72 ms, more than reading x from memory).
 * Tried and dropped for it: two passes of 32 columns each (256 KiB of
 * chunk sums, which fit L2): 0.35x of a read against 0.47-0.56x. An
 * earlier counting sort of all rows by code lost to it (reading x in code
 * order from memory ran at half the speed of reading it in order); the
 * blocks below read each block in code order from cache instead. */
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
 * rows of x that are not needed yet). */
enum { STATS_PREFETCH = 8, STATS_PREFETCH_X = 32 };

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define STATS_X86 1
#include <immintrin.h>
#else
#define STATS_X86 0
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

/* A code's chunk is full: add it to the code's total and start a new one.
 * first: this is the code's first chunk, and its total not yet written
 * (chunk and total start unwritten, see vq_batch_stats_with): the total is
 * then 0.0 + chunk, the same addition as into a zeroed total (which turns a
 * -0.0 sum into +0.0, as the definition does). */
static inline void close_chunk(double *total, double *chunk, int64_t D,
                               int first) {
  for (int64_t d = 0; d < D; d++)
    total[d] = (first ? 0.0 : total[d]) + chunk[d], chunk[d] = 0.0;
}

/* What every kernel does before adding row i (of M): asks for the chunk
 * row i + STATS_PREFETCH will need and for row i + STATS_PREFETCH_X of x,
 * closes the row's code's chunk when it is
 * full and counts the row. Returns that chunk, or NULL when the row's index
 * is outside [0, C) (nothing done then). always_inline, as prefetch_row. */
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
  if (rows[c] == 0) /* the code's first row: its chunk starts here */
    for (int64_t d = 0; d < D; d++) k[d] = 0.0;
  else if (rows[c] % VQC_VQ_STATS_CHUNK == 0)
    close_chunk(total + c * D, k, D, rows[c] == VQC_VQ_STATS_CHUNK);
  rows[c]++;
  return k;
}

/* The pass over the rows (see above): chunk, total (C, D) and rows (C)
 * from zero. Returns M, or the first row whose index is outside [0, C)
 * (nothing after it is added). Plain C. */
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

#if STATS_X86
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

/* Rows per block, and how far ahead in code order rows are prefetched
 * (the blocks below). */
enum { STATS_BLOCK = 4096, STATS_AHEAD = 16 };

#if STATS_X86
/* ---- AVX-512: blocks of rows, each summed in code order
 *
 * The row-order pass above reads and writes 2 * D doubles of chunk sums per
 * row: at D = 64 its stores alone cost more than reading x from memory.
 * Here the rows are taken STATS_BLOCK at a time (1 MiB of x at D = 64),
 * sorted by code (a counting sort, stable: each code's rows stay in row
 * order), and each code's rows in the block are added into eight zmm
 * accumulators (64 columns) loaded from its chunk sums once and stored
 * once. Within a code the additions are the same ones in the same order
 * (rows in increasing order, a chunk closed after every VQC_VQ_STATS_CHUNK
 * rows), so the bits are those of the row-order pass.
 *
 * Reading x in code order is random within the block, so the rows
 * STATS_AHEAD places ahead in that order are prefetched into L1, and the
 * next block is streamed in (into L2), one row per row added, meanwhile.
 * Measured on the Zen 4 VM of the README (vqc_vq_batch_stats, 65536 rows of
 * 64, C = 1024, the benchmark's codes, x from memory, medians of 15
 * interleaved calls): 1.31 ms against 1.46 for the row-order pass with x on
 * 4 KiB pages, 1.09 against 1.13 with x on 2 MiB pages (where a plain read
 * of x is twice as fast). Slower in a first sketch: blocks of 1024, 2048 or
 * 8192 rows; rows not prefetched in code order; the next block into L1 or
 * non-temporal; the sums in sixteen ymm registers (they spill), which is why
 * this is AVX-512 only; each block first copied in code order. */

/* Counting sort of the n rows of a block by code. After it, code c's rows
 * (offsets from the block's first row, increasing) are order[ends[c - 1]
 * .. ends[c]), with ends[-1] read as 0. ends: C + 1 entries. Returns n, or
 * the offset of the first row whose index is outside [0, C). */
static int64_t sort_block(const int64_t *indices, int64_t n, int64_t C,
                          int32_t *ends, int32_t *order) {
  memset(ends, 0, (size_t)(C + 1) * sizeof *ends);
  for (int64_t i = 0; i < n; i++) {
    const uint64_t c = (uint64_t)indices[i];
    if (c >= (uint64_t)C) return i;
    ends[c + 1]++;
  }
  for (int64_t c = 0; c < C; c++) ends[c + 1] += ends[c]; /* starts */
  for (int64_t i = 0; i < n; i++) order[ends[indices[i]]++] = (int32_t)i;
  return n; /* ends[c]: one past code c's last row */
}

/* Asks for bytes [0, n) of p, into L1 (hint T0) or L2 (T1). */
__attribute__((always_inline)) static inline void
prefetch_bytes(const void *p, int64_t n, int into_l1) {
  const char *b = p;
  for (int64_t o = 0; o < n; o += 64) {
    if (into_l1) __builtin_prefetch(b + o, 0, 3);
    else __builtin_prefetch(b + o, 0, 2);
  }
}

/* Adds code c's rows order[p, end) of the block at xb (row offsets from
 * xb) into its chunk sums k and total t (D doubles each), r0 rows of the
 * code seen before. Columns 64 at a time (masked past D), each in eight
 * accumulators. ahead_end: how many entries order has (for the prefetch
 * ahead); next, next_end: the next block's bytes still to be asked for
 * (advanced here). */
__attribute__((target("avx512f"), always_inline)) static inline void
add_code_rows(const float *xb, int64_t D, const int32_t *order, int64_t p,
              int64_t end, int64_t ahead_end, int64_t r0, double *k,
              double *t, const char **next, const char *next_end, int full) {
  const int64_t row_bytes = D * (int64_t)sizeof(float);
  for (int64_t d0 = 0; d0 < D; d0 += 64) {
    __mmask8 m[8];
    __m512d acc[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
      const int64_t lanes = D - d0 - 8 * j;
      m[j] = full || lanes >= 8 ? 0xff
                                : lanes <= 0 ? 0 : (__mmask8)((1u << lanes) - 1);
      /* a code's chunk is unwritten before its first row */
      acc[j] = r0 == 0 ? _mm512_setzero_pd()
               : full  ? _mm512_loadu_pd(k + d0 + 8 * j)
                       : _mm512_maskz_loadu_pd(m[j], k + d0 + 8 * j);
    }
    __mmask16 m16[4]; /* the same columns' floats, 16 per load */
    for (int h = 0; h < 4; h++)
      m16[h] = full ? 0xffff : (__mmask16)(m[2 * h] | (unsigned)m[2 * h + 1] << 8);
    int64_t r = r0;
    for (int64_t q = p; q < end; q++) {
      if (d0 == 0) {
        if (q + STATS_AHEAD < ahead_end)
          prefetch_bytes(xb + order[q + STATS_AHEAD] * D, row_bytes, 1);
        if (*next < next_end) {
          prefetch_bytes(*next, row_bytes, 0);
          *next += row_bytes;
        }
      }
      if (r > 0 && r % VQC_VQ_STATS_CHUNK == 0) { /* close the chunk */
        const int first = r == VQC_VQ_STATS_CHUNK; /* total unwritten */
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
          double *tj = t + d0 + 8 * j;
          const __m512d old = first  ? _mm512_setzero_pd()
                              : full ? _mm512_loadu_pd(tj)
                                     : _mm512_maskz_loadu_pd(m[j], tj);
          if (full)
            _mm512_storeu_pd(tj, _mm512_add_pd(old, acc[j]));
          else
            _mm512_mask_storeu_pd(tj, m[j], _mm512_add_pd(old, acc[j]));
          acc[j] = _mm512_setzero_pd();
        }
      }
      r++;
      const float *xi = xb + order[q] * D + d0;
#pragma GCC unroll 4
      for (int h = 0; h < 4; h++) { /* 16 floats, widened 8 at a time */
        const __m512 v = full ? _mm512_loadu_ps(xi + 16 * h)
                              : _mm512_maskz_loadu_ps(m16[h], xi + 16 * h);
        const __m256 hi = _mm256_castpd_ps(
            _mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
        acc[2 * h] = _mm512_add_pd(
            acc[2 * h], _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
        acc[2 * h + 1] = _mm512_add_pd(acc[2 * h + 1], _mm512_cvtps_pd(hi));
      }
    }
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
      if (full) _mm512_storeu_pd(k + d0 + 8 * j, acc[j]);
      else _mm512_mask_storeu_pd(k + d0 + 8 * j, m[j], acc[j]);
    }
  }
}

/* The pass in blocks (see above), same contract as stats_rows_plain:
 * chunk, total (C, D) and rows (C) from zero; ends (C + 1) and order
 * (STATS_BLOCK) scratch. Returns M, or the first row whose index is outside
 * [0, C) (the sums are then incomplete; the caller reports the row). */
__attribute__((target("avx512f"))) static int64_t
stats_blocks_avx512(const float *x, int64_t M, int64_t D,
                                   const int64_t *indices, int64_t C,
                                   double *chunk, double *total,
                                   int64_t *rows, int32_t *ends,
                                   int32_t *order) {
  const char *x_end = (const char *)(x + M * D);
  for (int64_t b0 = 0; b0 < M; b0 += STATS_BLOCK) {
    const int64_t n = M - b0 < STATS_BLOCK ? M - b0 : STATS_BLOCK;
    const int64_t sorted = sort_block(indices + b0, n, C, ends, order);
    if (sorted < n) return b0 + sorted;
    const float *xb = x + b0 * D;
    const char *next = (const char *)(xb + n * D);
    const char *next_end = next + STATS_BLOCK * D * (int64_t)sizeof(float);
    if (next_end > x_end) next_end = x_end;
    int64_t p = 0;
    for (int64_t c = 0; c < C; c++) {
      const int64_t end = ends[c];
      if (p == end) continue;
      if (D % 64 == 0) /* the same loop without masks */
        add_code_rows(xb, D, order, p, end, n, rows[c], chunk + c * D,
                      total + c * D, &next, next_end, 1);
      else
        add_code_rows(xb, D, order, p, end, n, rows[c], chunk + c * D,
                      total + c * D, &next, next_end, 0);
      rows[c] += end - p;
      p = end;
    }
  }
  return M;
}
#endif

/* The pass with kernel k (available here, checked by the caller). The
 * AVX-512 choices (also the bfloat16 one, a nearest-code screen with
 * nothing to screen here) run the blocks; AVX2 the row-order loop, where
 * an AVX-512 row-order loop measured the same (the row-order pass waits on
 * memory, not on instructions). ends, order: scratch for the blocks. */
static int64_t stats_rows(vq_kernel k, const float *x, int64_t M, int64_t D,
                          const int64_t *indices, int64_t C, double *chunk,
                          double *total, int64_t *rows, int32_t *ends,
                          int32_t *order) {
#if STATS_X86
  if (k == VQ_KERNEL_AVX512 || k == VQ_KERNEL_AVX512_BF16)
    return stats_blocks_avx512(x, M, D, indices, C, chunk, total, rows, ends,
                               order);
  if (k == VQ_KERNEL_AVX2)
    return stats_rows_avx2(x, M, D, indices, C, chunk, total, rows);
#endif
  (void)k, (void)ends, (void)order;
  return stats_rows_plain(x, M, D, indices, C, chunk, total, rows);
}

/* Writes counts (C) and sums[c * stride_c + d * stride_d] = (float)(total +
 * chunk) for 16 codes at a time, through a (16, 64) tile: with the
 * transposed layout vq_ema_update uses (stride_c = 1), writing code by code
 * would put every float on another 4 KiB page. */
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
        /* what is unwritten reads as the 0.0 it would have been */
        const int64_t n = rows[c0 + c];
        const double *t = n > VQC_VQ_STATS_CHUNK ? total : NULL;
        const double *k = n > 0 ? chunk : NULL;
        for (int64_t d = 0; d < dn; d++) {
          const int64_t at = (c0 + c) * D + d0 + d;
          tile[c][d] = (float)((t ? t[at] : 0.0) + (k ? k[at] : 0.0));
        }
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
  /* chunk (C, D): the open chunk's double sum; total (C, D): the chunk
   * sums added so far; one block, freed below (one block of the same size
   * every call is also what lets malloc reuse it without fresh pages, whose
   * faults cost more than zeroing). Not zeroed: a code's chunk is written
   * from its first row on, its total from its first closed chunk on, and
   * write_sums reads neither before (zeroing the 1 MiB of the benchmark's
   * shape took a twentieth of the update). rows (C): rows of each code
   * seen, from zero. */
  double *chunk = malloc((size_t)(2 * C * D) * sizeof *chunk);
  double *total = chunk ? chunk + C * D : NULL;
  int64_t *rows = calloc((size_t)C, sizeof *rows);
  /* ends (C + 1), order (STATS_BLOCK): the blocks' counting sort */
  int32_t *ends = malloc((size_t)(C + 1 + STATS_BLOCK) * sizeof *ends);
  vqc_status s = VQC_OK;
  if (!chunk || !rows || !ends) {
    s = vqc_error(VQC_ENOMEM, "%s: sums for %lld codes", fn, (long long)C);
    goto done;
  }
  /* the pass's answer: M, or the first bad row */
  const int64_t bad = stats_rows(k, x, M, D, indices, C, chunk, total, rows,
                                 ends, ends + C + 1);
  if (bad < M) {
    s = vqc_error(VQC_EINVAL, "%s: index %lld of row %lld is outside [0, %lld)",
                  fn, (long long)indices[bad], (long long)bad, (long long)C);
    goto done;
  }
  write_sums(total, chunk, rows, C, D, counts, sums, stride_c, stride_d);
done:
  free(chunk);
  free(rows);
  free(ends);
  return s;
}

vqc_status vqc_vq_batch_stats(const float *x, int64_t M, int64_t D,
                              const int64_t *indices, int64_t C,
                              float *counts, float *sums, int64_t stride_c,
                              int64_t stride_d) {
  return vq_batch_stats_with(vq_kernel_best(), x, M, D, indices, C, counts,
                             sums, stride_c, stride_d);
}
