/* vq_screen.c: the parts of the screened nearest-code search that do not
 * depend on how the approximate distances are computed (vq_screen.h): the
 * bound's common part, each row's candidates, the exact step on them and
 * the loop over row blocks, with the rows the screen sets apart answered by
 * an exact kernel. */
#include <fenv.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "quant/vq_screen.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
/* Both screens run on CPUs with FMA: fmaf is one instruction there. */
#define SCREEN_FMA_TARGET __attribute__((target("avx2,fma")))
#else
#define SCREEN_FMA_TARGET
#endif

/* ---- the bound */

void screen_terms_start(screen_bound_terms *t, int64_t D, double g2,
                        double abs_dot) {
  const double u = 0x1p-24;
  t->D = D;
  t->gD = (double)D * u / (1.0 - (double)D * u);
  t->e_max = t->eh_max = t->r_max = 0.0;
  t->g2 = g2;
  t->abs_dot = abs_dot;
}

float screen_bound(const screen_bound_terms *t, double X, double Xh,
                   double rx) {
  const double u = 0x1p-24, gD = t->gD, D = (double)t->D;
  const double E = t->e_max, Eh = t->eh_max;
  /* |dot - dapprox| <= |dot - x.e| + |x.e - x^.e^| + |x^.e^ - dapprox| */
  /* The last line: values and results below 2^-126 flushed to zero, when
   * the thread runs with DAZ and FTZ (as torch.set_flush_denormal sets):
   * each input moves by less than 2^-126, each result too. */
  const double dots = gD * X * E + rx * E + Xh * t->r_max +
                      t->g2 * Xh * Eh + t->abs_dot +
                      0x1p-125 * sqrt(D) * (X + E + Xh + Eh) +
                      4.0 * D * 0x1p-126;
  /* u |s - 2 dot| + u |s - 2 dapprox|, with |s| <= (X^2 + E^2)(1 + 2 gD)
   * and |dot|, |dapprox| bounded by the products of norms and errors. */
  const double sums =
      u * (2.0 * (X * X + E * E) * (1.0 + 2.0 * gD) + 2.0 * X * E * (1.0 + gD) +
           2.0 * Xh * Eh * (1.0 + t->g2) + 2.0 * dots);
  const double G = 1.01 * (2.0 * dots + sums) + 0x1p-140;
  float g = (float)G;
  if ((double)g < G) g = nextafterf(g, INFINITY);
  return g;
}

/* ---- a row's candidates */

void screen_row_start(screen_row *row, float x2, float G, int ok) {
  row->x2 = x2;
  row->G = ok ? G : 0.0f;
  row->row_min = INFINITY;
  row->thr = ok ? INFINITY : -INFINITY;
  row->apart = !ok;
  row->ncand = 0;
}

void screen_prune(screen_row *row) {
  int n = 0;
  for (int k = 0; k < row->ncand; k++)
    if (row->cand_a[k] <= row->thr) {
      row->cand_c[n] = row->cand_c[k];
      row->cand_a[n] = row->cand_a[k];
      n++;
    }
  row->ncand = n;
}

/* ---- the exact step */

/* Answers the block's rows (n of them) that are not set apart from their
 * candidates: the reference's distance for each candidate with a <= the
 * row's final threshold, in increasing code order, strict < (the lowest
 * code keeps a tie). The (row, code) pairs of the whole block go through
 * the chains eight at a time, so that the core overlaps their latencies
 * (one chain is D dependent multiply-adds; a row has one or two
 * candidates). A row left with none (which the threshold rules out) is
 * set apart. */
SCREEN_FMA_TARGET static void answer_rows(const float *E, const float *e2,
                                          const float *xr, int64_t D,
                                          screen_row *row, int rows,
                                          int64_t *indices) {
  enum { LANES = 8, MAX_ROWS = 16 };
  int pr[MAX_ROWS * SCREEN_CAP];     /* the pairs' rows */
  int32_t pc[MAX_ROWS * SCREEN_CAP]; /* and codes, row by row */
  float best[MAX_ROWS];
  int n = 0;
  for (int r = 0; r < rows; r++) {
    best[r] = INFINITY;
    indices[r] = 0;
    if (row[r].apart) continue;
    const int n0 = n;
    for (int k = 0; k < row[r].ncand; k++)
      if (row[r].cand_a[k] <= row[r].thr) {
        pr[n] = r;
        pc[n++] = row[r].cand_c[k];
      }
    if (n == n0) row[r].apart = 1;
  }
  for (int k0 = 0; k0 < n; k0 += LANES) {
    const float *xp[LANES], *ep[LANES];
    for (int i = 0; i < LANES; i++) { /* past n: the last pair again */
      const int k = k0 + i < n ? k0 + i : n - 1;
      xp[i] = xr + pr[k] * D;
      ep[i] = E + (int64_t)pc[k] * D;
    }
    float dot[LANES] = {0};
    for (int64_t d = 0; d < D; d++)
#pragma GCC unroll 8
      for (int i = 0; i < LANES; i++) dot[i] = fmaf(xp[i][d], ep[i][d], dot[i]);
    for (int i = 0; i < LANES && k0 + i < n; i++) {
      const int r = pr[k0 + i];
      const int32_t c = pc[k0 + i];
      /* The reference's expression, operation for operation. */
      const float d2 = (row[r].x2 + e2[c]) + (-2.0f * dot[i]);
      const float dist = sqrtf(fmaxf(d2, VQC_VQ_DIST_CLAMP));
      if (dist < best[r]) {
        best[r] = dist;
        indices[r] = c;
      }
    }
  }
}

/* ---- the loop over blocks */

vqc_status screen_run(const screen_kernel *k, const float *x, int64_t M,
                      const float *E, int64_t C, int64_t D, int64_t *indices,
                      int64_t *n_apart) {
  screen_row *row = malloc((size_t)k->block_rows * sizeof *row);
  int64_t *apart = NULL; /* the rows set apart, in order (cap_apart) */
  int64_t cap_apart = 0, n = 0;
  float *xa = NULL;   /* (n, D): those rows, for the exact kernel */
  int64_t *ia = NULL; /* (n): their answers */
  vqc_status s = VQC_OK;
  *n_apart = 0;
  if (!row) {
    s = vqc_error(VQC_ENOMEM, "vq_nearest: screening %lld rows",
                  (long long)M);
    goto done;
  }
  const int64_t B = k->block_rows;
  int64_t i0 = 0;
  for (; i0 < M; i0 += B) {
    /* Data the screen cannot decide (most rows set apart after the first
     * SCREEN_TRIAL_ROWS, e.g. a codebook of near-copies): the rest goes
     * straight to the exact kernel, so that such a call costs little more
     * than the exact kernel alone. */
    if (i0 >= SCREEN_TRIAL_ROWS && i0 < SCREEN_TRIAL_ROWS + B && 2 * n > i0)
      break;
    const int64_t rows = M - i0 < B ? M - i0 : B;
    k->screen_block(k->self, x + i0 * D, rows, row);
    /* The next block's rows, on their way from memory while this one is
     * answered and screened. */
    const int64_t next = M - (i0 + B) < B ? M - (i0 + B) : B;
    for (int64_t o = 0; o < next * D; o += 64 / (int64_t)sizeof(float))
      __builtin_prefetch(x + (i0 + B) * D + o);
    answer_rows(E, k->e2, x + i0 * D, D, row, (int)rows, indices + i0);
    for (int r = 0; r < rows; r++) {
      if (!row[r].apart) continue;
      if (n == cap_apart) { /* grows as rows are set apart: usually never */
        const int64_t cap = cap_apart ? 2 * cap_apart : 256;
        int64_t *more = realloc(apart, (size_t)cap * sizeof *apart);
        if (!more) {
          s = vqc_error(VQC_ENOMEM, "vq_nearest: %lld rows set apart",
                        (long long)cap);
          goto done;
        }
        apart = more;
        cap_apart = cap;
      }
      apart[n++] = i0 + r;
    }
  }
  if (i0 < M) {
    s = vq_nearest_with(k->exact, x + i0 * D, M - i0, E, C, D, indices + i0,
                        NULL);
    if (s != VQC_OK) goto done;
    *n_apart = M - i0;
  }
  if (n > 0) { /* the rows set apart, through the exact kernel */
    xa = malloc((size_t)(n * D) * sizeof *xa);
    ia = malloc((size_t)n * sizeof *ia);
    if (!xa || !ia) {
      s = vqc_error(VQC_ENOMEM, "vq_nearest: %lld rows of %lld floats",
                    (long long)n, (long long)D);
      goto done;
    }
    for (int64_t j = 0; j < n; j++)
      memcpy(xa + j * D, x + apart[j] * D, (size_t)D * sizeof *xa);
    s = vq_nearest_with(k->exact, xa, n, E, C, D, ia, NULL);
    if (s == VQC_OK)
      for (int64_t j = 0; j < n; j++) indices[apart[j]] = ia[j];
  }
  *n_apart += n;
done:
  free(row);
  free(apart);
  free(xa);
  free(ia);
  return s;
}
