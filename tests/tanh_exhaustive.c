/* tanh_exhaustive.c: vqc_tanh_exact (lib/src/quant/tanh_exact.h) on all 2^32
 * float inputs, every kernel this CPU has (fsq_tanh_with: scalar, AVX2),
 * against an independent correctly rounded reference. Not a default test
 * (it takes tens of minutes on two cores): ctest runs it only in a build
 * configured with -DVQC_TANH_EXHAUSTIVE=ON (label slow); or run
 * build/tests/tanh_exhaustive [THREADS] directly.
 *
 * The reference:
 *   - 2^-12 < |x| < 9.02 (the range where the definition computes
 *     anything): MPFR's tanh at 24 bits, round to nearest -- correctly
 *     rounded by MPFR's contract;
 *   - elsewhere (|x| tiny: tanh(x) rounds to x; |x| large: to +-1): glibc's
 *     tanhl (x87 long double, 64-bit mantissa, a few units of 2^-64
 *     relative error) rounded to float, accepted only when tanhl lies
 *     farther than 2^-50 relative from the float midpoint on its side
 *     (else MPFR decides: counted and printed; for subnormal results, which
 *     MPFR at 24 bits would not round as floats do, such an input is
 *     reported as undecided and fails the run);
 *   - NaN: the result must be the input NaN, bit for bit.
 * Also measured, for every input whose fast path was "hard" (step 4 of
 * tanh_exact.h ran): how close the exact tanh lies to a float midpoint
 * (MPFR at 160 bits), relative; the closest ones are printed (they are the
 * hard cases test_tanh.c keeps as regression inputs) with the minimum,
 * which is the margin the slow path's ~2^-98 accuracy has to beat.
 *
 * Exit 0 iff every result of every kernel equals the reference and nothing
 * was undecided; prints "N passed, M failed" last. */
#include <math.h>
#include <mpfr.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "quant/fsq_internal.h"
#include "quant/tanh_exact.h"

#define CHUNK (1u << 16)
#define KEEP 24 /* closest cases kept per thread */

typedef struct hard_case {
  float x;
  double dist; /* |tanh(x) - midpoint| / tanh(x) */
} hard_case;

typedef struct worker {
  uint64_t begin, end; /* bit patterns [begin, end) */
  uint64_t wrong[FSQ_KERNEL_COUNT], undecided, via_mpfr, slow;
  float first_wrong_x[FSQ_KERNEL_COUNT];
  hard_case closest[KEEP];
  int n_closest;
} worker;

static float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static uint32_t to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* MPFR tanh rounded to a float (normal results only). */
static float mpfr_tanh_float(mpfr_t m, float x) {
  mpfr_set_flt(m, x, MPFR_RNDN); /* exact: m has 24 bits */
  mpfr_tanh(m, m, MPFR_RNDN);
  return mpfr_get_flt(m, MPFR_RNDN);
}

/* |tanh(x) - nearest float midpoint| / |tanh(x)|, at 160 bits. */
static double midpoint_distance(float x) {
  mpfr_t t, mid;
  mpfr_inits2(160, t, mid, (mpfr_ptr)0);
  mpfr_set_flt(t, x, MPFR_RNDN);
  mpfr_tanh(t, t, MPFR_RNDN);
  mpfr_abs(t, t, MPFR_RNDN);
  const float f = mpfr_get_flt(t, MPFR_RNDN);
  const float g = nextafterf(f, mpfr_cmp_d(t, (double)f) > 0 ? INFINITY : 0.0f);
  mpfr_set_d(mid, ((double)f + (double)g) / 2.0, MPFR_RNDN); /* exact */
  mpfr_sub(mid, t, mid, MPFR_RNDN);
  mpfr_div(mid, mid, t, MPFR_RNDN);
  const double d = fabs(mpfr_get_d(mid, MPFR_RNDN));
  mpfr_clears(t, mid, (mpfr_ptr)0);
  return d;
}

static void keep_closest(worker *w, float x, double dist) {
  if (w->n_closest < KEEP) {
    w->closest[w->n_closest].x = x;
    w->closest[w->n_closest++].dist = dist;
    return;
  }
  int worst = 0;
  for (int i = 1; i < KEEP; i++)
    if (w->closest[i].dist > w->closest[worst].dist) worst = i;
  if (dist < w->closest[worst].dist) {
    w->closest[worst].x = x;
    w->closest[worst].dist = dist;
  }
}

static void *run(void *arg) {
  worker *w = arg;
  mpfr_t m;
  mpfr_init2(m, 24);
  float *x = malloc(CHUNK * sizeof(float));
  float *want = malloc(CHUNK * sizeof(float));
  float *got = malloc(CHUNK * sizeof(float));
  if (!x || !want || !got) {
    fprintf(stderr, "tanh_exhaustive: out of memory\n");
    exit(3);
  }
  for (uint64_t c = w->begin; c < w->end; c += CHUNK) {
    const size_t n = (size_t)(w->end - c < CHUNK ? w->end - c : CHUNK);
    for (size_t i = 0; i < n; i++) {
      x[i] = from_bits((uint32_t)(c + i));
      const float a = fabsf(x[i]);
      if (a != a) {
        want[i] = x[i];
      } else if (a > 0x1p-12f && a < 9.02f) {
        want[i] = mpfr_tanh_float(m, x[i]);
      } else {
        const long double t = tanhl((long double)x[i]);
        const float f = (float)t;
        const float g = nextafterf(f, t > (long double)f ? INFINITY : -INFINITY);
        const long double mid = ((long double)f + (long double)g) / 2;
        if (fabsl(t - mid) > ldexpl(fabsl(t), -50)) {
          want[i] = f;
        } else if (fabsf(f) >= 0x1p-126f) {
          want[i] = mpfr_tanh_float(m, x[i]);
          w->via_mpfr++;
        } else {
          want[i] = f;
          w->undecided++;
          printf("undecided: x = %a (subnormal result)\n", (double)x[i]);
        }
      }
    }
    for (int k = 0; k < FSQ_KERNEL_COUNT; k++) {
      if (!fsq_kernel_available((fsq_kernel)k)) continue;
      const int64_t slow = fsq_tanh_with((fsq_kernel)k, x, got, n);
      if (k == FSQ_KERNEL_SCALAR) w->slow += (uint64_t)slow;
      for (size_t i = 0; i < n; i++)
        if (to_bits(got[i]) != to_bits(want[i])) {
          if (w->wrong[k]++ == 0) w->first_wrong_x[k] = x[i];
        }
    }
    /* The hard ones: how close the exact value is to a midpoint. */
    for (size_t i = 0; i < n; i++) {
      unsigned slow = 0;
      (void)vqc_tanh_exact_counted(x[i], &slow);
      if (slow) keep_closest(w, x[i], midpoint_distance(x[i]));
    }
  }
  free(x);
  free(want);
  free(got);
  mpfr_clear(m);
  mpfr_free_cache();
  return NULL;
}

static int by_dist(const void *a, const void *b) {
  const double x = ((const hard_case *)a)->dist, y = ((const hard_case *)b)->dist;
  return (x > y) - (x < y);
}

/* Slices s = first, first + step, ... of `all` (interleaved, so that every
 * thread gets a share of each range of values). */
typedef struct job {
  worker *all;
  uint64_t first, step, n;
} job;

static void *walk(void *arg) {
  const job *j = arg;
  for (uint64_t s = j->first; s < j->n; s += j->step) {
    run(&j->all[s]);
    if (j->first == 0 && (s / j->step) % 64 == 0) /* progress, thread 0 */
      fprintf(stderr, "tanh_exhaustive: %.0f%%\n", 100.0 * (double)s / (double)j->n);
  }
  return NULL;
}

int main(int argc, char **argv) {
  int threads = 2;
  if (argc > 1) {
    char *end = NULL;
    const long v = strtol(argv[1], &end, 10);
    if (end == argv[1] || *end || v < 1 || v > 256) {
      fprintf(stderr, "usage: tanh_exhaustive [THREADS]   (1..256, default "
              "2)\n");
      return 2;
    }
    threads = (int)v;
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  const uint64_t slice = (uint64_t)CHUNK * 64, slices = (1ull << 32) / slice;
  worker *w = calloc((size_t)slices, sizeof *w);
  pthread_t *tid = calloc((size_t)threads, sizeof *tid);
  job *jobs = calloc((size_t)threads, sizeof *jobs);
  if (!w || !tid || !jobs) return 3;
  for (uint64_t s = 0; s < slices; s++) {
    w[s].begin = s * slice;
    w[s].end = (s + 1) * slice;
  }
  for (int t = 0; t < threads; t++) {
    jobs[t] = (job){w, (uint64_t)t, (uint64_t)threads, slices};
    if (pthread_create(&tid[t], NULL, walk, &jobs[t]) != 0) return 3;
  }
  for (int t = 0; t < threads; t++) pthread_join(tid[t], NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);

  uint64_t wrong[FSQ_KERNEL_COUNT] = {0}, undecided = 0, via_mpfr = 0,
           slow = 0;
  float first_wrong[FSQ_KERNEL_COUNT] = {0};
  hard_case *hc = malloc((size_t)slices * KEEP * sizeof *hc);
  size_t nh = 0;
  if (!hc) return 3;
  for (uint64_t s = 0; s < slices; s++) {
    for (int k = 0; k < FSQ_KERNEL_COUNT; k++) {
      if (w[s].wrong[k] && !wrong[k]) first_wrong[k] = w[s].first_wrong_x[k];
      wrong[k] += w[s].wrong[k];
    }
    undecided += w[s].undecided;
    via_mpfr += w[s].via_mpfr;
    slow += w[s].slow;
    for (int i = 0; i < w[s].n_closest; i++) hc[nh++] = w[s].closest[i];
  }
  qsort(hc, nh, sizeof *hc, by_dist);
  printf("tanh_exhaustive: all 2^32 inputs, %d threads, %.0f s\n", threads,
         (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
  printf("reference: MPFR for 2^-12 < |x| < 9.02, tanhl elsewhere (%llu "
         "of those decided by MPFR, %llu undecided)\n",
         (unsigned long long)via_mpfr, (unsigned long long)undecided);
  printf("slow path (double-double) taken by %llu inputs\n",
         (unsigned long long)slow);
  printf("closest approaches of tanh(x) to a float midpoint (relative), "
         "among the slow-path inputs:\n");
  for (size_t i = 0; i < nh && i < 40; i++)
    printf("  x = %a (%.9g): 2^%.2f\n", (double)hc[i].x, (double)hc[i].x,
           log2(hc[i].dist));
  int passed = 0, failed = 0;
  for (int k = 0; k < FSQ_KERNEL_COUNT; k++) {
    if (!fsq_kernel_available((fsq_kernel)k)) {
      printf("kernel %s: not available on this CPU\n",
             fsq_kernel_name((fsq_kernel)k));
      continue;
    }
    printf("kernel %s: %llu of 2^32 results differ from the reference",
           fsq_kernel_name((fsq_kernel)k), (unsigned long long)wrong[k]);
    if (wrong[k]) printf(" (first x = %a)", (double)first_wrong[k]);
    printf("\n");
    if (wrong[k]) failed++;
    else passed++;
  }
  if (undecided) failed++;
  free(hc);
  free(w);
  free(tid);
  free(jobs);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
