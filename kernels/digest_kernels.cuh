/* digest_kernels.cuh: the device half of digest.cu (read that file's top
 * comment first): XXH3's helpers as host + device functions, the lane
 * arithmetic of the warp-parallel long path, and digest_leaves_kernel.
 * Kept apart from the host wrappers so that kernels/emu can compile this
 * very code for the CPU and run it lane by lane (tests without a GPU). */
#ifndef VQC_KERNELS_DIGEST_KERNELS_CUH
#define VQC_KERNELS_DIGEST_KERNELS_CUH

#include <stdint.h>

#include "vqc/digest.h"

#define HD __host__ __device__ __forceinline__

/* ---- XXH3 constants (the algorithm's published primes) */

#define P32_1 0x9E3779B1ULL
#define P32_2 0x85EBCA77ULL
#define P32_3 0xC2B2AE3DULL
#define P64_1 0x9E3779B185EBCA87ULL
#define P64_2 0xC2B2AE3D27D4EB4FULL
#define P64_3 0x165667B19E3779F9ULL
#define P64_4 0x85EBCA77C2B2AE63ULL
#define P64_5 0x27D4EB2F165667C5ULL
#define PMX_1 0x165667919E3779F9ULL
#define PMX_2 0x9FB21C651E98DF25ULL

#define SECRET_SIZE 192
#define STRIPE 64
#define BLOCK_BYTES 1024 /* 16 stripes: (SECRET_SIZE - STRIPE) / 8 of them */
#define SCRAMBLE_KEY 16  /* secret word of the scramble: byte 192 - 64 */
#define LAST_STRIPE_KEY (SECRET_SIZE - STRIPE - 7) /* byte 121 */
#define MERGE_KEY 11     /* byte offset of the merge keys */

/* The default secret as a kernel argument (passed by value, copied to
 * shared memory by each block). */
typedef struct xxh3_secret {
  uint64_t w[SECRET_SIZE / 8];
} xxh3_secret;

/* ---- scalar helpers (host and device) */

/* Little-endian reads from any address, byte by byte: used where alignment
 * is unknown (the short paths, unaligned secret offsets, the last stripe). */
HD uint64_t rd64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}
HD uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}
HD uint64_t rotl64(uint64_t v, int r) { return (v << r) | (v >> (64 - r)); }
HD uint64_t bswap64(uint64_t v) {
  uint64_t r = 0;
  for (int i = 0; i < 8; i++) r = (r << 8) | ((v >> (8 * i)) & 0xFF);
  return r;
}
/* The 128-bit product of a and b, folded: low half xor high half. */
HD uint64_t mul128_fold64(uint64_t a, uint64_t b) {
#ifdef __CUDA_ARCH__
  return (a * b) ^ __umul64hi(a, b);
#else
  unsigned __int128 p = (unsigned __int128)a * b;
  return (uint64_t)p ^ (uint64_t)(p >> 64);
#endif
}
HD uint64_t avalanche_xxh3(uint64_t h) {
  h ^= h >> 37;
  h *= PMX_1;
  return h ^ (h >> 32);
}
HD uint64_t avalanche_xxh64(uint64_t h) {
  h ^= h >> 33;
  h *= P64_2;
  h ^= h >> 29;
  h *= P64_3;
  return h ^ (h >> 32);
}
HD uint64_t rrmxmx(uint64_t h, uint64_t len) {
  h ^= rotl64(h, 49) ^ rotl64(h, 24);
  h *= PMX_2;
  h ^= (h >> 35) + len;
  h *= PMX_2;
  return h ^ (h >> 28);
}
HD uint64_t mix16(const uint8_t *in, const uint8_t *sec) {
  return mul128_fold64(rd64(in) ^ rd64(sec), rd64(in + 8) ^ rd64(sec + 8));
}

/* XXH3-64 of len <= 240 bytes at p (any alignment); sec: the secret bytes. */
HD uint64_t xxh3_short(const uint8_t *p, uint64_t len, const uint8_t *sec) {
  if (len <= 16) {
    if (len > 8) {
      uint64_t lo = rd64(p) ^ (rd64(sec + 24) ^ rd64(sec + 32));
      uint64_t hi = rd64(p + len - 8) ^ (rd64(sec + 40) ^ rd64(sec + 48));
      return avalanche_xxh3(len + bswap64(lo) + hi + mul128_fold64(lo, hi));
    }
    if (len >= 4) {
      uint64_t in64 = (uint64_t)rd32(p + len - 4) + ((uint64_t)rd32(p) << 32);
      return rrmxmx(in64 ^ (rd64(sec + 8) ^ rd64(sec + 16)), len);
    }
    if (len > 0) {
      uint32_t combined = (uint32_t)p[0] << 16 | (uint32_t)p[len >> 1] << 24 |
                          (uint32_t)p[len - 1] | (uint32_t)len << 8;
      return avalanche_xxh64((uint64_t)combined ^ (rd32(sec) ^ rd32(sec + 4)));
    }
    return avalanche_xxh64(rd64(sec + 56) ^ rd64(sec + 64));
  }
  uint64_t acc = len * P64_1;
  if (len <= 128) {
    /* Pairs of 16-byte pieces from both ends, more pairs for longer input. */
    if (len > 32) {
      if (len > 64) {
        if (len > 96) {
          acc += mix16(p + 48, sec + 96);
          acc += mix16(p + len - 64, sec + 112);
        }
        acc += mix16(p + 32, sec + 64);
        acc += mix16(p + len - 48, sec + 80);
      }
      acc += mix16(p + 16, sec + 32);
      acc += mix16(p + len - 32, sec + 48);
    }
    acc += mix16(p, sec);
    acc += mix16(p + len - 16, sec + 16);
    return avalanche_xxh3(acc);
  }
  /* 129..240: eight rounds, an avalanche, the remaining whole rounds with
   * the secret shifted by 3 bytes, then the last 16 bytes at secret byte
   * 136 - 17. */
  int rounds = (int)(len / 16);
  for (int i = 0; i < 8; i++) acc += mix16(p + 16 * i, sec + 16 * i);
  acc = avalanche_xxh3(acc);
  for (int i = 8; i < rounds; i++)
    acc += mix16(p + 16 * i, sec + 16 * (i - 8) + 3);
  acc += mix16(p + len - 16, sec + 136 - 17);
  return avalanche_xxh3(acc);
}

/* ---- the long path, as one lane of a warp runs it (host and device) */

/* Initial value of accumulator i. A switch, not a table: a lane's i is not
 * a compile-time constant, and a table indexed at run time would live in
 * local memory. */
HD uint64_t acc_init(int i) {
  switch (i) {
    case 0: return P32_3;
    case 1: return P64_1;
    case 2: return P64_2;
    case 3: return P64_3;
    case 4: return P64_4;
    case 5: return P32_2;
    case 6: return P64_5;
    default: return P32_1;
  }
}

/* The keys lane t uses for every block: words 2q and 2q+1 of stripes srow
 * and 8 + srow (key word = stripe + word). */
typedef struct lane_keys {
  uint64_t e0, o0, e1, o1;
} lane_keys;

HD lane_keys keys_for_lane(const uint64_t *sec64, int t) {
  int q = t & 3, srow = t >> 2;
  lane_keys k;
  k.e0 = sec64[srow + 2 * q];
  k.o0 = sec64[srow + 2 * q + 1];
  k.e1 = sec64[8 + srow + 2 * q];
  k.o1 = sec64[8 + srow + 2 * q + 1];
  return k;
}

/* Adds words 2q (de) and 2q+1 (do_) of one stripe, with their keys, to the
 * lane's sums for acc[2q] (*se) and acc[2q+1] (*so): acc[i] takes word i's
 * product and word i^1's data. */
HD void add_pair(uint64_t de, uint64_t do_, uint64_t ke, uint64_t ko,
                 uint64_t *se, uint64_t *so) {
  uint64_t dke = de ^ ke, dko = do_ ^ ko;
  *se += (dke & 0xFFFFFFFFULL) * (dke >> 32) + do_;
  *so += (dko & 0xFFFFFFFFULL) * (dko >> 32) + de;
}

HD uint64_t scramble(uint64_t acc, uint64_t key) {
  acc ^= acc >> 47;
  acc ^= key;
  return acc * P32_1;
}

/* Geometry of a long input (len > 240). */
typedef struct long_shape {
  uint64_t full_blocks;   /* blocks followed by a scramble */
  int tail_stripes;       /* whole stripes after them, 0..15 */
} long_shape;

HD long_shape shape_of(uint64_t len) {
  long_shape s;
  s.full_blocks = (len - 1) / BLOCK_BYTES;
  s.tail_stripes = (int)(((len - 1) - BLOCK_BYTES * s.full_blocks) / STRIPE);
  return s;
}

/* Lane t's share of the tail: stripes srow and 8 + srow of the tail (when
 * they exist) and, for lanes 0..3, words 2q, 2q+1 of the last stripe. p is
 * the input, sec the secret bytes. */
HD void tail_sums(const uint8_t *p, uint64_t len, long_shape sh,
                  const uint8_t *sec, lane_keys k, int t, uint64_t *se,
                  uint64_t *so) {
  int q = t & 3, srow = t >> 2;
  const uint8_t *tail = p + sh.full_blocks * BLOCK_BYTES;
  if (srow < sh.tail_stripes) {
    const uint8_t *w = tail + STRIPE * srow + 16 * q;
    add_pair(rd64(w), rd64(w + 8), k.e0, k.o0, se, so);
  }
  if (8 + srow < sh.tail_stripes) {
    const uint8_t *w = tail + STRIPE * (8 + srow) + 16 * q;
    add_pair(rd64(w), rd64(w + 8), k.e1, k.o1, se, so);
  }
  if (srow == 0) {
    const uint8_t *w = p + len - STRIPE + 16 * q;
    const uint8_t *kk = sec + LAST_STRIPE_KEY + 16 * q;
    add_pair(rd64(w), rd64(w + 8), rd64(kk), rd64(kk + 8), se, so);
  }
}

/* The merge term of pair q. */
HD uint64_t merge_term(uint64_t ae, uint64_t ao, const uint8_t *sec, int q) {
  return mul128_fold64(ae ^ rd64(sec + MERGE_KEY + 16 * q),
                       ao ^ rd64(sec + MERGE_KEY + 16 * q + 8));
}

/* ---- the kernel */

#define WARPS_PER_BLOCK 8
#define UNROLL_BLOCKS 4 /* 1024-byte blocks whose loads go out together */

/* Sum over the 8 lanes that share t % 4. */
__device__ __forceinline__ uint64_t sum_over_srow(uint64_t v) {
  v += __shfl_xor_sync(0xFFFFFFFFu, v, 4);
  v += __shfl_xor_sync(0xFFFFFFFFu, v, 8);
  v += __shfl_xor_sync(0xFFFFFFFFu, v, 16);
  return v;
}

/* Two 64-bit words at p (16-byte aligned), read once, evict-first. */
__device__ __forceinline__ void load_pair_aligned(const uint8_t *p,
                                                  uint64_t *lo, uint64_t *hi) {
  ulonglong2 v = __ldcs(reinterpret_cast<const ulonglong2 *>(p));
  *lo = v.x;
  *hi = v.y;
}

/* Same at any alignment. */
__device__ __forceinline__ void load_pair_any(const uint8_t *p, uint64_t *lo,
                                              uint64_t *hi) {
  if (((uintptr_t)p & 15) == 0) {
    load_pair_aligned(p, lo, hi);
  } else if (((uintptr_t)p & 7) == 0) {
    *lo = reinterpret_cast<const uint64_t *>(p)[0];
    *hi = reinterpret_cast<const uint64_t *>(p)[1];
  } else {
    *lo = rd64(p);
    *hi = rd64(p + 8);
  }
}

/* One warp per leaf: leaves[i] = XXH3-64 of bytes [i*CHUNK, min(n, ...)). */
__global__ static void __launch_bounds__(WARPS_PER_BLOCK * 32)
    digest_leaves_kernel(const uint8_t *__restrict__ data, uint64_t n,
                         uint64_t nleaves, xxh3_secret secret,
                         uint64_t *__restrict__ leaves) {
  __shared__ uint64_t sec64[SECRET_SIZE / 8];
  if (threadIdx.x < SECRET_SIZE / 8) sec64[threadIdx.x] = secret.w[threadIdx.x];
  __syncthreads();
  const uint8_t *sec = reinterpret_cast<const uint8_t *>(sec64);

  const int t = threadIdx.x & 31;
  const uint64_t leaf =
      (uint64_t)blockIdx.x * WARPS_PER_BLOCK + (threadIdx.x >> 5);
  if (leaf >= nleaves) return; /* whole warps leave together */
  const uint8_t *p = data + leaf * VQC_DIGEST_CHUNK;
  const uint64_t rest = n - leaf * VQC_DIGEST_CHUNK;
  const uint64_t len = rest < VQC_DIGEST_CHUNK ? rest : VQC_DIGEST_CHUNK;

  if (len <= 240) {
    if (t == 0) leaves[leaf] = xxh3_short(p, len, sec);
    return;
  }

  const int q = t & 3;
  const lane_keys k = keys_for_lane(sec64, t);
  const long_shape sh = shape_of(len);
  uint64_t ae = acc_init(2 * q), ao = acc_init(2 * q + 1);

  if (((uintptr_t)p & 15) == 0) {
    /* Groups of UNROLL_BLOCKS blocks: all loads first, then the sums and
     * scrambles in block order. */
    uint64_t b = 0;
    for (; b + UNROLL_BLOCKS <= sh.full_blocks; b += UNROLL_BLOCKS) {
      uint64_t w[UNROLL_BLOCKS][4];
#pragma unroll
      for (int u = 0; u < UNROLL_BLOCKS; u++) {
        const uint8_t *blk = p + (b + u) * BLOCK_BYTES;
        load_pair_aligned(blk + 16 * t, &w[u][0], &w[u][1]);
        load_pair_aligned(blk + 512 + 16 * t, &w[u][2], &w[u][3]);
      }
#pragma unroll
      for (int u = 0; u < UNROLL_BLOCKS; u++) {
        uint64_t se = 0, so = 0;
        add_pair(w[u][0], w[u][1], k.e0, k.o0, &se, &so);
        add_pair(w[u][2], w[u][3], k.e1, k.o1, &se, &so);
        ae = scramble(ae + sum_over_srow(se), sec64[SCRAMBLE_KEY + 2 * q]);
        ao = scramble(ao + sum_over_srow(so), sec64[SCRAMBLE_KEY + 2 * q + 1]);
      }
    }
    for (; b < sh.full_blocks; b++) {
      const uint8_t *blk = p + b * BLOCK_BYTES;
      uint64_t w0, w1, w2, w3, se = 0, so = 0;
      load_pair_aligned(blk + 16 * t, &w0, &w1);
      load_pair_aligned(blk + 512 + 16 * t, &w2, &w3);
      add_pair(w0, w1, k.e0, k.o0, &se, &so);
      add_pair(w2, w3, k.e1, k.o1, &se, &so);
      ae = scramble(ae + sum_over_srow(se), sec64[SCRAMBLE_KEY + 2 * q]);
      ao = scramble(ao + sum_over_srow(so), sec64[SCRAMBLE_KEY + 2 * q + 1]);
    }
  } else {
    /* A view whose first byte is not 16-byte aligned: same arithmetic,
     * loads at whatever alignment the address has. */
    for (uint64_t b = 0; b < sh.full_blocks; b++) {
      const uint8_t *blk = p + b * BLOCK_BYTES;
      uint64_t w0, w1, w2, w3, se = 0, so = 0;
      load_pair_any(blk + 16 * t, &w0, &w1);
      load_pair_any(blk + 512 + 16 * t, &w2, &w3);
      add_pair(w0, w1, k.e0, k.o0, &se, &so);
      add_pair(w2, w3, k.e1, k.o1, &se, &so);
      ae = scramble(ae + sum_over_srow(se), sec64[SCRAMBLE_KEY + 2 * q]);
      ao = scramble(ao + sum_over_srow(so), sec64[SCRAMBLE_KEY + 2 * q + 1]);
    }
  }

  /* The tail (byte reads: at most 1 KiB per leaf, alignment unknown). */
  uint64_t se = 0, so = 0;
  tail_sums(p, len, sh, sec, k, t, &se, &so);
  ae += sum_over_srow(se);
  ao += sum_over_srow(so);

  /* Merge: lanes 0..3 hold pairs 0..3. */
  uint64_t h = merge_term(ae, ao, sec, q);
  h += __shfl_xor_sync(0xFFFFFFFFu, h, 1);
  h += __shfl_xor_sync(0xFFFFFFFFu, h, 2);
  if (t == 0) leaves[leaf] = avalanche_xxh3(len * P64_1 + h);
}

#endif /* VQC_KERNELS_DIGEST_KERNELS_CUH */
