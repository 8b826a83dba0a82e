/* bench_digest.c: how fast the tensor digest runs compared with merely
 * reading the same memory, single-threaded and with 2 threads.
 *
 * The digest is meant to be cheap enough to run on every replicated tensor at
 * every step, so the yardstick is memory bandwidth: a digest that keeps up
 * with a plain read of its input costs nothing more than touching the data.
 *
 * What it does:
 *   1. allocates a 256 MiB buffer (argv[1] = size in MiB to change it) and
 *      fills it with fixed-seed random words;
 *   2. validates: vqc_digest_buffer == vqc_digest_buffer_parallel (2 and 3
 *      threads) == the streaming form in odd-sized pieces; exits 1 otherwise;
 *   3. times, best of REPS runs, each run cold:
 *        (a) read, 1 thread:     sum of the buffer as uint64 with AVX2 loads
 *        (a+) read+prefetch:     the same sum, with the software prefetch the
 *                                digest uses (4 KiB steps, lines 8 KiB ahead
 *                                into L2)
 *        (b) digest, 1 thread:   vqc_digest_buffer
 *        (c), (c+) the reads with 2 threads, one half each (threads created
 *                                inside the timed region, as the digest does)
 *        (d) digest, 2 threads:  vqc_digest_buffer_parallel(nthreads = 2)
 *      and prints GB/s (1e9 bytes/s) and ratio = digest GB/s / read GB/s.
 *      Targets: (b)/(a) >= 0.85 and (d)/(c) >= 0.85. The ratios against the
 *      prefetching reads, (b)/(a+) and (d)/(c+), are printed beside them.
 *
 * Cold runs: before every timed run the caches are flushed by reading a
 * separate 512 MiB buffer (twice the buffer and about twice the 260 MiB L3
 * these machines report), so each run streams the buffer from DRAM. The
 * buffer pages are touched while filling, so no run pays for page faults.
 *
 * Fairness of the baseline: the plain read (a) is the simplest fast way one
 * core can pull the bytes in (32-byte aligned loads, four independent
 * accumulators so the adds never limit it); the sum is stored to a volatile
 * so the compiler cannot drop the loop. The digest uses software prefetch
 * (see hash_full_chunk in lib/src/digest.c), which a plain loop does not, and
 * prefetch also speeds up the plain read; so (a+) gives the read the same
 * help, and the digest is shown against both rather than only against the
 * baseline it beats more easily. The runs are interleaved so that load from
 * other users of the machine falls on all of them alike; best-of-REPS then
 * discards the disturbed runs. */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xxhash.h> /* XXH_versionNumber, for the report line */

#include "vqc/digest.h"

#define REPS 7
#define EVICT_BYTES ((size_t)512 << 20)

static volatile uint64_t sink; /* keeps every read loop's result alive */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the read baseline */

/* Sum of n bytes (n a multiple of 128, p 32-byte aligned) as uint64 lanes. */
__attribute__((target("avx2"))) static uint64_t sum_avx2(const void *p,
                                                         size_t n) {
  const __m256i *v = p;
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < n / 32; i += 4) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(v + i));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(v + i + 1));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(v + i + 2));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(v + i + 3));
  }
  __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1),
                               _mm256_add_epi64(a2, a3));
  uint64_t lanes[4];
  _mm256_storeu_si256((__m256i *)lanes, s);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

/* The same with SSE2, for a CPU without AVX2 (the figures then say so). */
static uint64_t sum_sse2(const void *p, size_t n) {
  const __m128i *v = p;
  __m128i a0 = _mm_setzero_si128(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < n / 16; i += 4) {
    a0 = _mm_add_epi64(a0, _mm_load_si128(v + i));
    a1 = _mm_add_epi64(a1, _mm_load_si128(v + i + 1));
    a2 = _mm_add_epi64(a2, _mm_load_si128(v + i + 2));
    a3 = _mm_add_epi64(a3, _mm_load_si128(v + i + 3));
  }
  __m128i s = _mm_add_epi64(_mm_add_epi64(a0, a1), _mm_add_epi64(a2, a3));
  uint64_t lanes[2];
  _mm_storeu_si128((__m128i *)lanes, s);
  return lanes[0] + lanes[1];
}

static int have_avx2;

static uint64_t read_sum(const void *p, size_t n) {
  return have_avx2 ? sum_avx2(p, n) : sum_sse2(p, n);
}

/* read_sum in 4 KiB steps, asking before each step for the lines 8 KiB ahead
 * to come into L2: the prefetch digest.c does while hashing (n a multiple of
 * 4 KiB). */
static uint64_t read_sum_prefetch(const void *p, size_t n) {
  const uint8_t *b = p;
  uint64_t s = 0;
  for (size_t q = 0; q < n; q += 4096) {
    for (size_t k = q + 8192; k < q + 8192 + 4096 && k < n; k += 64)
      __builtin_prefetch(b + k, 0, 2);
    s += read_sum(b + q, 4096);
  }
  return s;
}

typedef struct {
  const uint8_t *p;
  size_t n;
  int prefetch;
  uint64_t sum;
} read_job;

static void *read_job_run(void *arg) {
  read_job *job = arg;
  job->sum = job->prefetch ? read_sum_prefetch(job->p, job->n)
                           : read_sum(job->p, job->n);
  return NULL;
}

/* Two threads, one half each (n a multiple of 8 KiB). */
static int read_two_threads(const uint8_t *p, size_t n, int prefetch) {
  read_job jobs[2] = {{p, n / 2, prefetch, 0}, {p + n / 2, n / 2, prefetch, 0}};
  pthread_t th;
  if (pthread_create(&th, NULL, read_job_run, &jobs[1]) != 0) return -1;
  read_job_run(&jobs[0]);
  pthread_join(th, NULL);
  sink = jobs[0].sum + jobs[1].sum;
  return 0;
}

/* ---- the timed runs */

static uint8_t *evict_buf;

static void evict_caches(void) { sink = read_sum(evict_buf, EVICT_BYTES); }

typedef enum {
  READ_1, READ_PF_1, DIGEST_1, READ_2, READ_PF_2, DIGEST_2, NKINDS
} kind;
static const char *kind_name[NKINDS] = {
    "(a)  read,          1 thread ", "(a+) read+prefetch, 1 thread ",
    "(b)  digest,        1 thread ", "(c)  read,          2 threads",
    "(c+) read+prefetch, 2 threads", "(d)  digest,        2 threads"};

/* One cold run of `k`; returns seconds, or a negative value on failure. */
static double timed_run(kind k, const uint8_t *buf, size_t n,
                        const int64_t *shape) {
  evict_caches();
  uint64_t d = 0;
  double t0 = now_s();
  int ok = 1;
  switch (k) {
    case READ_1: sink = read_sum(buf, n); break;
    case READ_PF_1: sink = read_sum_prefetch(buf, n); break;
    case DIGEST_1:
      ok = vqc_digest_buffer(buf, n, VQC_U8, 1, shape, &d) == VQC_OK;
      break;
    case READ_2: ok = read_two_threads(buf, n, 0) == 0; break;
    case READ_PF_2: ok = read_two_threads(buf, n, 1) == 0; break;
    case DIGEST_2:
      ok = vqc_digest_buffer_parallel(buf, n, VQC_U8, 1, shape, 2, &d) ==
           VQC_OK;
      break;
    default: ok = 0;
  }
  double t = now_s() - t0;
  sink = d;
  return ok ? t : -1.0;
}

/* ---- validation */

/* Streams buf in pieces of 1000, 70001, 1000, ... bytes (some inside a chunk,
 * some across several), so the streaming form is checked on the same data. */
static vqc_status streamed(const uint8_t *buf, size_t n, const int64_t *shape,
                           uint64_t *out) {
  vqc_digest_state *st = NULL;
  vqc_status s = vqc_digest_create(&st, VQC_U8, 1, shape);
  size_t pos = 0, k = 0;
  while (s == VQC_OK && pos < n) {
    size_t piece = (k++ % 2) ? 70001 : 1000;
    if (piece > n - pos) piece = n - pos;
    s = vqc_digest_update(st, buf + pos, piece);
    pos += piece;
  }
  if (s == VQC_OK) s = vqc_digest_final(st, out);
  vqc_digest_destroy(st);
  return s;
}

static int validate(const uint8_t *buf, size_t n, const int64_t *shape) {
  uint64_t one = 0, two = 0, three = 0, str = 0;
  if (vqc_digest_buffer(buf, n, VQC_U8, 1, shape, &one) != VQC_OK ||
      vqc_digest_buffer_parallel(buf, n, VQC_U8, 1, shape, 2, &two) != VQC_OK ||
      vqc_digest_buffer_parallel(buf, n, VQC_U8, 1, shape, 3, &three) !=
          VQC_OK ||
      streamed(buf, n, shape, &str) != VQC_OK) {
    fprintf(stderr, "bench_digest: digest failed: %s\n", vqc_last_error());
    return 0;
  }
  printf("validate: one-shot %016llx, 2 threads %016llx, 3 threads %016llx, "
         "streamed %016llx: %s\n",
         (unsigned long long)one, (unsigned long long)two,
         (unsigned long long)three, (unsigned long long)str,
         one == two && one == three && one == str ? "equal" : "DIFFER");
  return one == two && one == three && one == str;
}

int main(int argc, char **argv) {
  if (argc > 1 &&
      (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    printf("usage: bench_digest [MiB]   (buffer size, default 256)\n");
    return 0;
  }
  size_t mib = 256;
  if (argc > 1) {
    char *end = NULL;
    unsigned long v = strtoul(argv[1], &end, 10);
    if (end == argv[1] || *end != '\0' || v == 0 || v > (1UL << 16)) {
      fprintf(stderr, "bench_digest: '%s' is not a size in MiB (try --help)\n",
              argv[1]);
      return 2;
    }
    mib = v;
  }
  size_t n = mib << 20;
  int64_t shape[1] = {(int64_t)n};

  __builtin_cpu_init();
  have_avx2 = __builtin_cpu_supports("avx2");
  printf("bench_digest: %zu MiB buffer, best of %d cold runs (caches flushed "
         "by reading %zu MiB before each)\n", mib, REPS, EVICT_BYTES >> 20);
  printf("cpu: avx2 %s, avx512f %s; read baseline uses %s loads; libxxhash "
         "%u dispatches XXH3 at run time\n",
         have_avx2 ? "yes" : "no",
         __builtin_cpu_supports("avx512f") ? "yes" : "no",
         have_avx2 ? "AVX2" : "SSE2", XXH_versionNumber());

  uint8_t *buf = aligned_alloc(64, n);
  evict_buf = aligned_alloc(64, EVICT_BYTES);
  if (buf == NULL || evict_buf == NULL) {
    fprintf(stderr, "bench_digest: cannot allocate %zu + %zu MiB\n", mib,
            EVICT_BYTES >> 20);
    return 3;
  }
  uint64_t seed = 42; /* splitmix64 words */
  for (size_t i = 0; i < n / 8; i++) {
    uint64_t z = (seed += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    ((uint64_t *)buf)[i] = z ^ (z >> 31);
  }
  memset(evict_buf, 1, EVICT_BYTES);

  if (!validate(buf, n, shape)) return 1;

  double best[NKINDS];
  for (int k = 0; k < NKINDS; k++) best[k] = 1e30;
  for (int r = 0; r < REPS; r++) {
    for (int k = 0; k < NKINDS; k++) {
      double t = timed_run((kind)k, buf, n, shape);
      if (t < 0) {
        fprintf(stderr, "bench_digest: run %s failed: %s\n", kind_name[k],
                vqc_last_error());
        return 3;
      }
      if (t < best[k]) best[k] = t;
    }
  }

  double gbs[NKINDS];
  for (int k = 0; k < NKINDS; k++) {
    gbs[k] = (double)n / best[k] / 1e9;
    printf("%s  %8.2f GB/s  (best %.2f ms)\n", kind_name[k], gbs[k],
           1e3 * best[k]);
  }
  double r1 = gbs[DIGEST_1] / gbs[READ_1], r2 = gbs[DIGEST_2] / gbs[READ_2];
  printf("ratio 1 thread  = digest GB/s / read GB/s = (b)/(a)  = %.3f  "
         "(target >= 0.85: %s)\n", r1, r1 >= 0.85 ? "met" : "NOT met");
  printf("ratio 2 threads = digest GB/s / read GB/s = (d)/(c)  = %.3f  "
         "(target >= 0.85: %s)\n", r2, r2 >= 0.85 ? "met" : "NOT met");
  printf("against the prefetching reads: (b)/(a+) = %.3f, (d)/(c+) = %.3f\n",
         gbs[DIGEST_1] / gbs[READ_PF_1], gbs[DIGEST_2] / gbs[READ_PF_2]);

  free(evict_buf);
  free(buf);
  return 0;
}
