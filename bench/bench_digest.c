/* bench_digest.c: how fast the tensor digest runs compared with merely
 * reading the same memory, with 1 and 2 threads, on a buffer in 4 KiB pages
 * and on one in transparent huge pages.
 *
 * The digest is meant to be cheap enough to run on every replicated tensor at
 * every step, so the yardstick is memory bandwidth: a digest that keeps up
 * with a plain read of its input costs nothing more than touching the data.
 *
 * What it does:
 *   1. maps two 256 MiB buffers (argv[1] = size in MiB to change it), 2 MiB
 *      aligned: one with madvise(MADV_NOHUGEPAGE) ("4k"), one with
 *      madvise(MADV_HUGEPAGE) ("huge"), fills both with the same fixed-seed
 *      random words, and reports how much of each the kernel really backs
 *      with huge pages (AnonHugePages of its mapping in /proc/self/smaps;
 *      the THP setting is in /sys/kernel/mm/transparent_hugepage/enabled,
 *      and "never" there means the "huge" figures are 4 KiB pages too);
 *   2. validates, on both buffers: vqc_digest_buffer ==
 *      vqc_digest_buffer_parallel (2 and 3 threads) == the streaming form in
 *      small odd pieces and in pieces of a third of the buffer (which take
 *      the grouped path of vqc_digest_update) == the digest rebuilt
 *      from leaves hashed here with plain XXH3_64bits (libxxhash's SSE2
 *      build, not the dispatcher digest.c uses); exits 1 otherwise;
 *   3. times, for each page kind, cold, in interleaved repetitions (argv[2],
 *      default 9, at least BENCH_MIN_REPS; each repetition runs all twelve
 *      cases, starting one case later than the repetition before):
 *        read_1t          sum of the buffer as uint64, AVX2 loads, in order
 *        read_streams_1t  the same sum taken over 4 neighbouring 64 KiB
 *                         chunks at once, 1 KiB of each in turn
 *        digest_1t        vqc_digest_buffer
 *        read_2t, read_streams_2t, digest_2t: the same with 2 threads (the
 *                         reads: one half each, threads created inside the
 *                         timed region as the digest's are;
 *                         vqc_digest_buffer_parallel(nthreads = 2))
 *      and prints GB/s = 1e9 bytes / s, median [min .. max] over the
 *      repetitions, and ratio = digest GB/s / read GB/s = t_read / t_digest,
 *      the median of the per-repetition ratios (bench_stats.h), against the
 *      faster read of the two (by median) and, beside it, against the other.
 *      Goals: >= 0.9 with 4 KiB pages, >= 0.8 with huge pages.
 *
 * Fairness of the baseline: the digest is compared with the fastest plain
 * read found, not only with the simplest. read_1t is the obvious loop
 * (32-byte aligned loads, four independent accumulators so the adds never
 * limit it; 8 accumulators were 0.9x of it). On one core of the machines
 * measured (AMD EPYC, Zen 3) the order of the loads matters more than the
 * loop: taking 4 streams 64 KiB apart, 1 KiB of each in turn, read 1.3-1.5x
 * faster with 4 KiB pages and 1.13-1.4x with huge pages (2 or 8 streams,
 * pieces of 512 B: about the same), while software prefetch made the
 * in-order read slower (0.73-0.89x at 512 B-4 KiB ahead).
 * digest.c hashes large buffers in a similar interleaved order
 * (hash_chunk_group), so read_streams is its fair baseline; read_1t is shown
 * so that figures stay comparable with older runs. Each sum is stored to a
 * volatile so the compiler cannot drop the loop.
 *
 * Cold runs: before every timed run the caches are flushed by reading a
 * separate 512 MiB buffer (twice the buffer, and 16x the 32 MiB L3 of the
 * machines measured), so each run streams the buffer from DRAM. The buffers'
 * pages are touched while filling, so no run pays for page faults.
 *
 * --json prints, instead of the text, one JSON object per figure
 * (bench_print_figure): shape "256MiB-4k" or "256MiB-huge"; the digest
 * figures carry their baseline and ratio; "anon_huge_pages" (unit MiB,
 * reps 1) is the huge-page backing read from smaps. */
#define _GNU_SOURCE
#include <immintrin.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <xxhash.h> /* plain XXH3_64bits: the validation's own leaves */

#include "bench_stats.h"
#include "vqc/digest.h"
#include "vqc/clock.h"

#define DEFAULT_REPS 9
#define EVICT_BYTES ((size_t)512 << 20)
#define HUGE_PAGE ((size_t)2 << 20)
/* read_streams: STREAMS chunks of STREAM_SPAN bytes, STREAM_PIECE of each
 * in turn (the order measured fastest, see the top). */
#define STREAMS 4
#define STREAM_SPAN ((size_t)65536)
#define STREAM_PIECE ((size_t)1024)

static volatile uint64_t sink; /* keeps every read loop's result alive */

/* ---- the read baselines */

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

/* read_sum of n bytes (a multiple of 128) taken over STREAMS chunks at a
 * time, STREAM_PIECE of each in turn; a tail shorter than STREAMS chunks is
 * read in order. */
static uint64_t read_sum_streams(const uint8_t *p, size_t n) {
  const size_t group = STREAMS * STREAM_SPAN;
  uint64_t s = 0;
  size_t off = 0;
  for (; off + group <= n; off += group)
    for (size_t q = 0; q < STREAM_SPAN; q += STREAM_PIECE)
      for (size_t k = 0; k < STREAMS; k++)
        s += read_sum(p + off + k * STREAM_SPAN + q, STREAM_PIECE);
  return s + read_sum(p + off, n - off);
}

typedef struct {
  const uint8_t *p;
  size_t n;
  int streams;
  uint64_t sum;
} read_job;

static void *read_job_run(void *arg) {
  read_job *job = arg;
  job->sum = job->streams ? read_sum_streams(job->p, job->n)
                          : read_sum(job->p, job->n);
  return NULL;
}

/* Two threads, one half each (n a multiple of 256 bytes). */
static int read_two_threads(const uint8_t *p, size_t n, int streams) {
  read_job jobs[2] = {{p, n / 2, streams, 0}, {p + n / 2, n / 2, streams, 0}};
  pthread_t th;
  if (pthread_create(&th, NULL, read_job_run, &jobs[1]) != 0) return -1;
  read_job_run(&jobs[0]);
  pthread_join(th, NULL);
  sink = jobs[0].sum + jobs[1].sum;
  return 0;
}

/* ---- buffers and their pages */

/* n bytes (a multiple of HUGE_PAGE) at a HUGE_PAGE-aligned address of their
 * own mapping, advised huge or not huge before any page is touched; NULL on
 * failure. Freed with unmap_aligned(p, n). The mapping is over-allocated by
 * one huge page and trimmed, so the buffer is exactly one mapping. */
static uint8_t *map_aligned(size_t n, int huge) {
  size_t len = n + HUGE_PAGE;
  uint8_t *raw = mmap(NULL, len, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return NULL;
  uintptr_t a = ((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
  uint8_t *p = (uint8_t *)a;
  size_t head = (size_t)(p - raw), tail = len - head - n;
  if (head) munmap(raw, head);
  if (tail) munmap(p + n, tail);
  /* NOHUGEPAGE as well, so the 4k buffer stays in 4 KiB pages even where
   * THP is "always". A refusal is not fatal: smaps tells what we got. */
  (void)madvise(p, n, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  return p;
}

static void unmap_aligned(uint8_t *p, size_t n) {
  if (p) munmap(p, n);
}

/* Bytes of AnonHugePages in the mappings of /proc/self/smaps that overlap
 * [p, p + n); -1 if smaps cannot be read. */
static long long anon_huge_bytes(const void *p, size_t n) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (f == NULL) return -1;
  uintptr_t lo = (uintptr_t)p, hi = lo + n;
  char line[512];
  int inside = 0;
  long long total = 0;
  while (fgets(line, sizeof line, f)) {
    uintptr_t a = 0, b = 0;
    unsigned long long kb = 0;
    /* a mapping's header line is "start-end perms ..."; the fields below it
     * are "Name:   value kB", which never parse as two hex numbers */
    if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " ", &a, &b) == 2) {
      inside = a < hi && lo < b;
    } else if (inside && sscanf(line, "AnonHugePages: %llu kB", &kb) == 1) {
      total += (long long)kb * 1024;
    }
  }
  fclose(f);
  return total;
}

/* The THP mode in force ("[madvise]" etc.), or "unknown". */
static const char *thp_mode(void) {
  static char buf[128] = "unknown";
  FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (f) {
    if (fgets(buf, sizeof buf, f) == NULL) snprintf(buf, sizeof buf, "unknown");
    buf[strcspn(buf, "\n")] = '\0';
    fclose(f);
  }
  return buf;
}

/* ---- validation */

/* Streams buf in pieces cycling through piece[0..npieces), so the streaming
 * form is checked on the same data. */
static vqc_status streamed(const uint8_t *buf, size_t n, const int64_t *shape,
                           const size_t *piece, int npieces, uint64_t *out) {
  vqc_digest_state *st = NULL;
  vqc_status s = vqc_digest_create(&st, VQC_U8, 1, shape);
  size_t pos = 0;
  for (int k = 0; s == VQC_OK && pos < n; k++) {
    size_t len = piece[k % npieces];
    if (len > n - pos) len = n - pos;
    s = vqc_digest_update(st, buf + pos, len);
    pos += len;
  }
  if (s == VQC_OK) s = vqc_digest_final(st, out);
  vqc_digest_destroy(st);
  return s;
}

/* The digest from leaves hashed here with plain XXH3_64bits (the definition
 * in digest.h); the root goes through vqc_digest_from_leaves. */
static vqc_status reference(const uint8_t *buf, size_t n, const int64_t *shape,
                            uint64_t *out) {
  size_t nleaves = n == 0 ? 1 : (n - 1) / VQC_DIGEST_CHUNK + 1;
  uint64_t *leaves = malloc(nleaves * sizeof *leaves);
  if (leaves == NULL)
    return vqc_error(VQC_ENOMEM, "no memory for %zu reference leaves", nleaves);
  for (size_t i = 0; i < nleaves; i++) {
    size_t begin = i * VQC_DIGEST_CHUNK;
    size_t len = n - begin < VQC_DIGEST_CHUNK ? n - begin : VQC_DIGEST_CHUNK;
    leaves[i] = XXH3_64bits(buf + begin, len);
  }
  vqc_status s = vqc_digest_from_leaves(5 /* uint8 */, 1, shape, leaves,
                                        nleaves, out);
  free(leaves);
  return s;
}

static int validate(const char *kind, const uint8_t *buf, size_t n,
                    const int64_t *shape, int quiet) {
  /* small pieces, some inside a chunk and some across several; then 1000
   * bytes and a third of the buffer in turn, which from 48 MiB up take the
   * grouped path of vqc_digest_update (pieces of 16 MiB and more) */
  const size_t small[2] = {1000, 70001};
  const size_t large[2] = {1000, n / 3 + 1};
  uint64_t ref = 0, one = 0, two = 0, three = 0, str = 0, big = 0;
  if (reference(buf, n, shape, &ref) != VQC_OK ||
      vqc_digest_buffer(buf, n, VQC_U8, 1, shape, &one) != VQC_OK ||
      vqc_digest_buffer_parallel(buf, n, VQC_U8, 1, shape, 2, &two) != VQC_OK ||
      vqc_digest_buffer_parallel(buf, n, VQC_U8, 1, shape, 3, &three) !=
          VQC_OK ||
      streamed(buf, n, shape, small, 2, &str) != VQC_OK ||
      streamed(buf, n, shape, large, 2, &big) != VQC_OK) {
    fprintf(stderr, "bench_digest: digest failed: %s\n", vqc_last_error());
    return 0;
  }
  int ok = one == ref && two == ref && three == ref && str == ref && big == ref;
  if (!quiet || !ok)
    fprintf(quiet ? stderr : stdout,
            "validate %-4s: reference %016llx, one-shot %016llx, 2 threads "
            "%016llx, 3 threads %016llx, streamed small %016llx, large "
            "%016llx: %s\n",
            kind, (unsigned long long)ref, (unsigned long long)one,
            (unsigned long long)two, (unsigned long long)three,
            (unsigned long long)str, (unsigned long long)big,
            ok ? "equal" : "DIFFER");
  return ok;
}

/* ---- the timed runs */

static uint8_t *evict_buf;

static void evict_caches(void) { sink = read_sum(evict_buf, EVICT_BYTES); }

enum { READ_1, STREAMS_1, DIGEST_1, READ_2, STREAMS_2, DIGEST_2, NCASES };
static const char *case_name[NCASES] = {
    "read_1t", "read_streams_1t", "digest_1t",
    "read_2t", "read_streams_2t", "digest_2t"};
static const char *case_label[NCASES] = {
    "read,            1 thread ", "read, 4 streams, 1 thread ",
    "digest,          1 thread ", "read,            2 threads",
    "read, 4 streams, 2 threads", "digest,          2 threads"};

/* One cold run of case k; returns seconds, or a negative value on failure. */
static double timed_run(int k, const uint8_t *buf, size_t n,
                        const int64_t *shape) {
  evict_caches();
  uint64_t d = 0;
  int ok = 1;
  double t0 = vqc_now_s();
  switch (k) {
    case READ_1: sink = read_sum(buf, n); break;
    case STREAMS_1: sink = read_sum_streams(buf, n); break;
    case DIGEST_1:
      ok = vqc_digest_buffer(buf, n, VQC_U8, 1, shape, &d) == VQC_OK;
      break;
    case READ_2: ok = read_two_threads(buf, n, 0) == 0; break;
    case STREAMS_2: ok = read_two_threads(buf, n, 1) == 0; break;
    case DIGEST_2:
      ok = vqc_digest_buffer_parallel(buf, n, VQC_U8, 1, shape, 2, &d) ==
           VQC_OK;
      break;
    default: ok = 0;
  }
  double t = vqc_now_s() - t0;
  sink = d;
  return ok ? t : -1.0;
}

/* ---- reporting */

typedef struct {
  const char *kind; /* "4k" or "huge" */
  uint8_t *buf;
  long long huge_bytes;
  double *t[NCASES]; /* seconds, [reps] each */
} page_kind;

static void report(const page_kind *pk, size_t n, size_t mib, int reps,
                   int json) {
  char shape[32];
  snprintf(shape, sizeof shape, "%zuMiB-%s", mib, pk->kind);
  double *gbs[NCASES];
  bench_summary sum[NCASES];
  for (int k = 0; k < NCASES; k++) {
    gbs[k] = malloc((size_t)reps * sizeof **gbs);
    if (gbs[k] == NULL) exit(3);
    for (int r = 0; r < reps; r++) gbs[k][r] = (double)n / pk->t[k][r] / 1e9;
    sum[k] = bench_summarize(gbs[k], reps);
  }
  if (json) {
    double mib_huge = (double)pk->huge_bytes / (1 << 20); /* exact in %g */
    bench_figure hp = {.bench = "bench_digest", .figure = "anon_huge_pages",
                       .shape = shape, .unit = "MiB",
                       .value = {mib_huge, mib_huge, mib_huge, 1}};
    bench_print_figure(stdout, &hp);
  } else {
    printf("\n%s pages: AnonHugePages %lld MiB of the %zu MiB buffer\n",
           pk->kind, pk->huge_bytes >> 20, mib);
    printf("  %-26s  %8s  %17s\n", "", "GB/s med", "[min .. max]");
  }
  for (int t = 0; t < 2; t++) { /* 1 thread, 2 threads */
    int rd = t ? READ_2 : READ_1, st = t ? STREAMS_2 : STREAMS_1;
    int dg = t ? DIGEST_2 : DIGEST_1;
    int base = sum[st].median >= sum[rd].median ? st : rd; /* the faster */
    int other = base == st ? rd : st;
    /* ratio = digest GB/s / read GB/s of the same repetition */
    bench_summary ratio = bench_ratios(gbs[dg], gbs[base], reps);
    bench_summary ratio_other = bench_ratios(gbs[dg], gbs[other], reps);
    if (json) {
      for (int k = rd; k <= st; k++) {
        bench_figure f = {.bench = "bench_digest", .figure = case_name[k],
                          .shape = shape, .unit = "GB/s", .value = sum[k]};
        bench_print_figure(stdout, &f);
      }
      bench_figure f = {.bench = "bench_digest", .figure = case_name[dg],
                        .shape = shape, .unit = "GB/s", .value = sum[dg],
                        .baseline_name = case_name[base],
                        .baseline = sum[base], .ratio = ratio};
      bench_print_figure(stdout, &f);
      continue;
    }
    for (int k = rd; k <= dg; k++)
      printf("  %s  %8.2f  [%6.2f .. %6.2f]\n", case_label[k], sum[k].median,
             sum[k].min, sum[k].max);
    double goal = strcmp(pk->kind, "huge") == 0 ? 0.8 : 0.9;
    printf("  ratio %d thread%s = digest GB/s / read GB/s, median of per-rep "
           "ratios: vs %s %.3f [%.3f .. %.3f] (goal >= %.1f: %s); vs %s "
           "%.3f\n",
           t + 1, t ? "s" : " ", case_name[base], ratio.median, ratio.min,
           ratio.max, goal, ratio.median >= goal ? "met" : "NOT met",
           case_name[other], ratio_other.median);
  }
  /* The 4k digest lines in the old form, for bench/bench_watch.py, which
   * parses "(b) digest, 1 thread  X GB/s" and "(d) ... 2 threads". */
  if (!json && strcmp(pk->kind, "4k") == 0)
    printf("(b)  digest,        1 thread   %8.2f GB/s (median)\n"
           "(d)  digest,        2 threads  %8.2f GB/s (median)\n",
           sum[DIGEST_1].median, sum[DIGEST_2].median);
  for (int k = 0; k < NCASES; k++) free(gbs[k]);
}

int main(int argc, char **argv) {
  int json = bench_json_requested(&argc, argv);
  if (argc > 1 &&
      (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    printf("usage: bench_digest [MiB [reps]] [--json]\n"
           "  MiB   buffer size, default 256 (rounded up to a multiple of 2)\n"
           "  reps  interleaved repetitions, default %d, at least %d\n"
           "  --json  one JSON object per figure instead of the text\n",
           DEFAULT_REPS, BENCH_MIN_REPS);
    return 0;
  }
  size_t mib = 256;
  int reps = DEFAULT_REPS;
  for (int a = 1; a < argc && a <= 2; a++) {
    char *end = NULL;
    unsigned long v = strtoul(argv[a], &end, 10);
    unsigned long lo = a == 1 ? 1 : BENCH_MIN_REPS, hi = a == 1 ? 65536 : 1000;
    if (end == argv[a] || *end != '\0' || v < lo || v > hi) {
      fprintf(stderr, "bench_digest: '%s' is not a %s in %lu..%lu (try "
              "--help)\n", argv[a], a == 1 ? "size in MiB" : "repetition "
              "count", lo, hi);
      return 2;
    }
    if (a == 1) mib = (v + 1) / 2 * 2;
    else reps = (int)v;
  }
  if (argc > 3) {
    fprintf(stderr, "bench_digest: too many arguments (try --help)\n");
    return 2;
  }
  size_t n = mib << 20;
  int64_t shape[1] = {(int64_t)n};

  __builtin_cpu_init();
  have_avx2 = __builtin_cpu_supports("avx2");
  if (!json) {
    printf("bench_digest: %zu MiB buffers, median [min .. max] of %d "
           "interleaved cold repetitions (caches flushed by reading %zu MiB "
           "before each run); GB/s = 1e9 B/s\n", mib, reps, EVICT_BYTES >> 20);
    printf("cpu: avx2 %s, avx512f %s; reads use %s loads; libxxhash %u "
           "dispatches XXH3 at run time; THP: %s\n",
           have_avx2 ? "yes" : "no",
           __builtin_cpu_supports("avx512f") ? "yes" : "no",
           have_avx2 ? "AVX2" : "SSE2", XXH_versionNumber(), thp_mode());
  }

  page_kind pk[2] = {{.kind = "4k"}, {.kind = "huge"}};
  pk[0].buf = map_aligned(n, 0);
  pk[1].buf = map_aligned(n, 1);
  evict_buf = map_aligned(EVICT_BYTES, 0);
  if (pk[0].buf == NULL || pk[1].buf == NULL || evict_buf == NULL) {
    fprintf(stderr, "bench_digest: cannot map 2 x %zu + %zu MiB\n", mib,
            EVICT_BYTES >> 20);
    return 3;
  }
  uint64_t seed = 42; /* splitmix64 words */
  for (size_t i = 0; i < n / 8; i++) {
    uint64_t z = (seed += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    ((uint64_t *)pk[0].buf)[i] = z ^ (z >> 31);
  }
  memcpy(pk[1].buf, pk[0].buf, n);
  memset(evict_buf, 1, EVICT_BYTES);
  for (int p = 0; p < 2; p++) {
    pk[p].huge_bytes = anon_huge_bytes(pk[p].buf, n);
    for (int k = 0; k < NCASES; k++) {
      pk[p].t[k] = calloc((size_t)reps, sizeof(double));
      if (pk[p].t[k] == NULL) return 3;
    }
  }
  if (pk[1].huge_bytes < (long long)n / 2)
    fprintf(stderr, "bench_digest: warning: only %lld of %zu MiB of the "
            "'huge' buffer are in huge pages (THP: %s); its figures are "
            "mostly 4 KiB pages\n", pk[1].huge_bytes >> 20, mib, thp_mode());

  for (int p = 0; p < 2; p++)
    if (!validate(pk[p].kind, pk[p].buf, n, shape, json)) return 1;

  /* Repetition r runs the 2 x NCASES cases in order starting at r, so each
   * case follows a different one in each repetition. */
  for (int r = 0; r < reps; r++) {
    for (int j = 0; j < 2 * NCASES; j++) {
      int c = (j + r) % (2 * NCASES), p = c / NCASES, k = c % NCASES;
      double t = timed_run(k, pk[p].buf, n, shape);
      if (t < 0) {
        fprintf(stderr, "bench_digest: run %s (%s) failed: %s\n",
                case_name[k], pk[p].kind, vqc_last_error());
        return 3;
      }
      pk[p].t[k][r] = t;
    }
  }

  for (int p = 0; p < 2; p++) report(&pk[p], n, mib, reps, json);

  for (int p = 0; p < 2; p++) {
    for (int k = 0; k < NCASES; k++) free(pk[p].t[k]);
    unmap_aligned(pk[p].buf, n);
  }
  unmap_aligned(evict_buf, EVICT_BYTES);
  return 0;
}
