/* py_random.h: CPython's `random.Random` (MT19937) for integer seeds, just
 * enough to reproduce upstream's quantize-dropout cutoff
 * `random.Random(seed).randrange(lo, hi)` bit for bit.
 *
 * Used by the RVQ as the default map from the synced dropout seed to the
 * cutoff (so a seed recorded from a PyTorch run gives the same cutoff here),
 * and by the conformance harness. The generator state is a value you own;
 * there is no global state. Semantics follow CPython 3.x's _randommodule.c
 * (init_by_array of the seed's 32-bit words) and random.py (getrandbits,
 * _randbelow_with_getrandbits with rejection, randrange). */
#ifndef VQC_PY_RANDOM_H
#define VQC_PY_RANDOM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VQC_PY_MT_N 624

typedef struct vqc_py_random {
  uint32_t mt[VQC_PY_MT_N];
  int index; /* next word of mt to temper; VQC_PY_MT_N means "regenerate" */
} vqc_py_random;

/* random.Random(seed) for an int seed (the absolute value is used, as
 * CPython does). */
void vqc_py_random_seed(vqc_py_random *r, int64_t seed);
/* The next tempered 32-bit word (genrand_uint32). */
uint32_t vqc_py_random_u32(vqc_py_random *r);
/* getrandbits(k) for 0 <= k <= 64 (k = 0 gives 0 without drawing). */
uint64_t vqc_py_random_getrandbits(vqc_py_random *r, int k);
/* randrange(start, stop) for stop > start (returns start otherwise):
 * start + _randbelow(stop - start), with k = bit_length(n) bits per try. */
int64_t vqc_py_random_randrange(vqc_py_random *r, int64_t start, int64_t stop);
/* random(): a double in [0, 1) from 53 bits of two words. */
double vqc_py_random_random(vqc_py_random *r);

#ifdef __cplusplus
}
#endif
#endif /* VQC_PY_RANDOM_H */
