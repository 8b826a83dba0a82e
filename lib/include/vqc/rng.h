/* rng.h: counter-based random numbers (Philox-4x32-10, Salmon et al. 2011,
 * the generator of Random123, cuRAND and PyTorch's CUDA RNG).
 *
 * A draw is a pure function of (seed, stream, position): there is no hidden
 * or global state. vqc_rng is a cursor you own and pass explicitly; copying
 * it forks an identical sequence, and vqc_rng_init with the same arguments
 * replays it from the start on any rank, thread or run.
 *
 * Layout: key = (seed low 32, seed high 32); counter = (block low 32,
 * block high 32, stream low 32, stream high 32). Each block gives four 32-bit
 * words, consumed in order; `position` counts words consumed. */
#ifndef VQC_RNG_H
#define VQC_RNG_H

#include <stdint.h>

#include "vqc/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The raw bijection: out = Philox4x32-10(ctr, key). */
void vqc_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2],
                       uint32_t out[4]);

typedef struct vqc_rng {
  uint64_t seed;
  uint64_t stream;
  uint64_t position; /* 32-bit words consumed so far */
} vqc_rng;

/* Purposes for vqc_rng_stream_for: who draws, so that two uses of the same
 * (seed, step, rank) never share numbers. Never renumber. */
typedef enum {
  VQC_RNG_DATA = 1,          /* synthetic data shards */
  VQC_RNG_INIT = 2,          /* parameter / codebook initialisation */
  VQC_RNG_KMEANS = 3,        /* k-means initial rows */
  VQC_RNG_DEAD_CODE = 4,     /* dead-code replacement rows */
  VQC_RNG_DEAD_CODE_SPLIT = 5, /* rank 0's binomial split of k draws */
  VQC_RNG_DROPOUT = 6,       /* quantize-dropout seed / cutoff */
  VQC_RNG_TEST = 7,          /* tests and benchmarks */
} vqc_rng_purpose;

void vqc_rng_init(vqc_rng *r, uint64_t seed, uint64_t stream);
/* A stream id that mixes (step, purpose, rank) so each triple gets its own
 * sequence; pass rank = -1 for draws that must be identical on every rank. */
uint64_t vqc_rng_stream_for(uint64_t step, vqc_rng_purpose purpose, int rank);
/* Moves the cursor to word `position` of the stream. */
void vqc_rng_seek(vqc_rng *r, uint64_t position);

uint32_t vqc_rng_u32(vqc_rng *r);
uint64_t vqc_rng_u64(vqc_rng *r); /* two words: low then high */

/* Uniform in [0, 1): float from 24 random bits, double from 53. */
float vqc_rng_uniform_f32(vqc_rng *r);
double vqc_rng_uniform_f64(vqc_rng *r);
/* Fills out[0..n) uniform in [lo, hi). */
void vqc_rng_uniform(vqc_rng *r, float *out, int64_t n, float lo, float hi);
/* Fills out[0..n) with normal(mean, std) (Box-Muller in double, rounded to
 * float; deterministic on every platform with IEEE doubles and glibc libm). */
void vqc_rng_normal(vqc_rng *r, float *out, int64_t n, float mean, float std);
/* Uniform integer in [lo, hi), unbiased (rejection). hi > lo required;
 * returns lo when hi <= lo. */
int64_t vqc_rng_randint(vqc_rng *r, int64_t lo, int64_t hi);
/* out[0..n) = a uniformly random permutation of 0..n-1 (Fisher-Yates). */
void vqc_rng_randperm(vqc_rng *r, int64_t n, int64_t *out);
/* Binomial(n, p) sample, exact distribution, for n >= 0 and 0 <= p <= 1;
 * VQC_EINVAL otherwise. */
vqc_status vqc_rng_binomial(vqc_rng *r, int64_t n, double p, int64_t *out);

#ifdef __cplusplus
}
#endif
#endif /* VQC_RNG_H */
