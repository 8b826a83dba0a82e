/* vq_screen.h: the parts of a screened nearest-code search that do not
 * depend on how its cheap distances are computed, internal to the library.
 * A screen computes for every (row, code) an approximate squared distance
 * a with a proven bound G on its distance from the reference's q, keeps
 * the codes with a <= screen_threshold(min a), and answers from the
 * reference's own float32 chains for those codes only. vq_screen.c holds
 * the bound's common part, the candidates, the exact step and the loop
 * over row blocks with its fallbacks to an exact kernel; the bfloat16
 * screen (vq_nearest_screen.c, whose header derives the bound and the
 * threshold) the packing and the products. (A 16-bit integer screen for
 * AVX2, VPMADDWD, was built on this too and not kept: on the Zen 4 VM it
 * ran at 0.82x of the exact AVX2 kernel, VPMADDWD issuing one ymm per
 * cycle there, 16 products, as many as two ymm FMAs.) */
#ifndef VQC_VQ_SCREEN_H
#define VQC_VQ_SCREEN_H

#include <stdint.h>

#include "quant/vq_nearest.h"
#include "vqc/status.h"
#include "vqc/vq.h"

enum {
  SCREEN_CAP = 64,   /* candidates a row may hold before it is set apart */
  SCREEN_SLACK = 32, /* room past SCREEN_CAP for a vector's stores */
  SCREEN_TRIAL_ROWS = 96, /* rows screened before a call may give up */
};

/* Largest norm of a row or code that a screen takes: every quantity of
 * either side stays below (2e17)^2 = 4e34, far from float32's 3.4e38. */
#define SCREEN_NORM_MAX 1e17

/* The codebook's part of the bound, and the approximate dot product's
 * own error: |dapprox - x^.e^| <= g2 |x^| |e^| + abs_dot. */
typedef struct screen_bound_terms {
  int64_t D;
  double gD;      /* D u / (1 - D u): a chain of D fmaf */
  double e_max;   /* max over codes of |e| */
  double eh_max;  /* max over codes of |e^| (the rounded code) */
  double r_max;   /* max over codes of |e - e^| */
  double g2;      /* relative error of the approximate dot product */
  double abs_dot; /* its absolute error (flushed or underflowed terms) */
} screen_bound_terms;

/* Starts terms for vectors of D floats (the maxima at 0, to be raised as
 * the codes are packed). */
void screen_terms_start(screen_bound_terms *t, int64_t D, double g2,
                        double abs_dot);

/* G of a row with norms (upper bounds) X = |x|, Xh = |x^|, rx = |x - x^|,
 * rounded up to a float (vq_nearest_screen.c, "The bound"). */
float screen_bound(const screen_bound_terms *t, double X, double Xh,
                   double rx);

/* thr(m): codes with a <= thr(m) stay candidates ("The threshold"). */
static inline float screen_threshold(float m, float G) {
  const float low = m + G; /* NaN never: m and G are finite or m = +inf */
  return ((low > VQC_VQ_DIST_CLAMP ? low : VQC_VQ_DIST_CLAMP) + G) *
         (1.0f + 0x1p-18f);
}

/* One row of a block: its state during the screen and its candidates, in
 * increasing code order. */
typedef struct screen_row {
  float x2;      /* the reference's x2 chain */
  float G;       /* the row's bound */
  float row_min; /* smallest a admitted so far */
  float thr;     /* screen_threshold(row_min); -inf: the row takes nothing */
  int apart;     /* 1: answered by the exact kernel */
  int ncand;
  int32_t cand_c[SCREEN_CAP + SCREEN_SLACK];
  float cand_a[SCREEN_CAP + SCREEN_SLACK];
} screen_row;

/* A row ready for the screen (ok = 1), or set apart from the start. */
void screen_row_start(screen_row *row, float x2, float G, int ok);

/* Keeps the row's candidates with a <= its threshold. */
void screen_prune(screen_row *row);

/* A kernel, as the loop over blocks sees it. */
typedef struct screen_kernel {
  int block_rows;  /* rows per block (at most 16) */
  vq_kernel exact; /* the kernel that answers the rows set apart */
  const float *e2; /* (C): each code's e2 chain, as the reference's */
  /* Screens rows xr (rows, D), rows <= block_rows: fills row[0 ..
   * block_rows) (rows past `rows` set apart). */
  void (*screen_block)(void *self, const float *xr, int64_t rows,
                       screen_row *row);
  void *self;
} screen_kernel;

/* The search for x (M, D) against E (C, D) through kernel k: indices (M)
 * as vq_nearest_ref's; *n_apart the rows the exact kernel answered. */
vqc_status screen_run(const screen_kernel *k, const float *x, int64_t M,
                      const float *E, int64_t C, int64_t D, int64_t *indices,
                      int64_t *n_apart);

#endif /* VQC_VQ_SCREEN_H */
