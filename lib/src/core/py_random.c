/* py_random.c: CPython's Mersenne Twister with its integer seeding and
 * randrange (see py_random.h). The constants are MT19937's (Matsumoto and
 * Nishimura 1998); the seeding and bit handling follow CPython's
 * _randommodule.c and random.py, which define the values we must match. */
#include "vqc/py_random.h"

#define MT_M 397
#define MATRIX_A 0x9908b0dfu
#define UPPER_MASK 0x80000000u
#define LOWER_MASK 0x7fffffffu

static void init_genrand(vqc_py_random *r, uint32_t s) {
  r->mt[0] = s;
  for (int i = 1; i < VQC_PY_MT_N; i++)
    r->mt[i] = 1812433253u * (r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) + (uint32_t)i;
  r->index = VQC_PY_MT_N;
}

static void init_by_array(vqc_py_random *r, const uint32_t *key, int len) {
  init_genrand(r, 19650218u);
  int i = 1, j = 0;
  for (int k = VQC_PY_MT_N > len ? VQC_PY_MT_N : len; k > 0; k--) {
    r->mt[i] = (r->mt[i] ^ ((r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) * 1664525u)) +
               key[j] + (uint32_t)j; /* non-linear */
    i++;
    j++;
    if (i >= VQC_PY_MT_N) {
      r->mt[0] = r->mt[VQC_PY_MT_N - 1];
      i = 1;
    }
    if (j >= len) j = 0;
  }
  for (int k = VQC_PY_MT_N - 1; k > 0; k--) {
    r->mt[i] = (r->mt[i] ^ ((r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) * 1566083941u)) -
               (uint32_t)i; /* non-linear */
    i++;
    if (i >= VQC_PY_MT_N) {
      r->mt[0] = r->mt[VQC_PY_MT_N - 1];
      i = 1;
    }
  }
  r->mt[0] = 0x80000000u; /* MSB is 1, assuring a non-zero initial array */
  r->index = VQC_PY_MT_N;
}

void vqc_py_random_seed(vqc_py_random *r, int64_t seed) {
  /* CPython seeds with abs(seed) split into 32-bit words, least significant
   * first, using as many words as the value needs (at least one). */
  const uint64_t a = seed < 0 ? 0u - (uint64_t)seed : (uint64_t)seed;
  uint32_t key[2] = {(uint32_t)a, (uint32_t)(a >> 32)};
  init_by_array(r, key, key[1] != 0 ? 2 : 1);
}

static void generate(vqc_py_random *r) {
  static const uint32_t mag01[2] = {0u, MATRIX_A};
  int kk = 0;
  uint32_t y;
  for (; kk < VQC_PY_MT_N - MT_M; kk++) {
    y = (r->mt[kk] & UPPER_MASK) | (r->mt[kk + 1] & LOWER_MASK);
    r->mt[kk] = r->mt[kk + MT_M] ^ (y >> 1) ^ mag01[y & 1u];
  }
  for (; kk < VQC_PY_MT_N - 1; kk++) {
    y = (r->mt[kk] & UPPER_MASK) | (r->mt[kk + 1] & LOWER_MASK);
    r->mt[kk] = r->mt[kk + (MT_M - VQC_PY_MT_N)] ^ (y >> 1) ^ mag01[y & 1u];
  }
  y = (r->mt[VQC_PY_MT_N - 1] & UPPER_MASK) | (r->mt[0] & LOWER_MASK);
  r->mt[VQC_PY_MT_N - 1] = r->mt[MT_M - 1] ^ (y >> 1) ^ mag01[y & 1u];
  r->index = 0;
}

uint32_t vqc_py_random_u32(vqc_py_random *r) {
  if (r->index >= VQC_PY_MT_N) generate(r);
  uint32_t y = r->mt[r->index++];
  y ^= (y >> 11);
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= (y >> 18);
  return y;
}

uint64_t vqc_py_random_getrandbits(vqc_py_random *r, int k) {
  if (k <= 0) return 0;
  if (k > 64) k = 64;
  if (k <= 32) return vqc_py_random_u32(r) >> (32 - k);
  /* Several words, least significant first; the last word keeps only its
   * top (k - 32) bits, as CPython's random_getrandbits. */
  const uint64_t lo = vqc_py_random_u32(r);
  const uint64_t hi = vqc_py_random_u32(r) >> (64 - k);
  return lo | (hi << 32);
}

int64_t vqc_py_random_randrange(vqc_py_random *r, int64_t start, int64_t stop) {
  if (stop <= start) return start;
  const uint64_t n = (uint64_t)stop - (uint64_t)start;
  int k = 0; /* n.bit_length() */
  for (uint64_t v = n; v; v >>= 1) k++;
  uint64_t v = vqc_py_random_getrandbits(r, k);
  while (v >= n) v = vqc_py_random_getrandbits(r, k);
  return (int64_t)((uint64_t)start + v);
}

double vqc_py_random_random(vqc_py_random *r) {
  const uint32_t a = vqc_py_random_u32(r) >> 5, b = vqc_py_random_u32(r) >> 6;
  return ((double)a * 67108864.0 + (double)b) * (1.0 / 9007199254740992.0);
}
