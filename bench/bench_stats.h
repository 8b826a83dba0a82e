/* bench_stats.h: how every C benchmark summarises and reports a figure.
 *
 * Every bench times its cases in interleaved repetitions (case A, case B,
 * baseline, A, B, baseline, ...; at least BENCH_MIN_REPS of them), validates
 * its results before timing, and reports each figure as the median of the
 * repetitions with their min and max. A ratio against a baseline is the
 * median of the per-repetition ratios (each repetition's case divided by the
 * baseline timed beside it), so load that falls on one repetition falls on
 * both sides of its ratio.
 *
 * Text goes to stdout for people. With --json (bench_json_requested) a bench
 * prints instead one JSON object per line per figure (bench_print_figure):
 *   {"bench": "bench_digest", "figure": "digest_1t", "shape": "256MiB",
 *    "ranks": 2, "tokens": 1024, "value": 14.1, "min": 13.9, "max": 14.3,
 *    "unit": "GB/s", "reps": 7, "baseline": 15.2, "baseline_name": "read_1t",
 *    "ratio": 0.93, "ratio_min": 0.91, "ratio_max": 0.95}
 * where shape, ranks, tokens, baseline* and ratio* appear only when they
 * apply. Header-only: each bench is one translation unit. */
#ifndef VQC_BENCH_STATS_H
#define VQC_BENCH_STATS_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_MIN_REPS 7

typedef struct bench_summary {
  double median, min, max;
  int n; /* values summarised; 0 = no figure (median etc. are NaN) */
} bench_summary;

static int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median, min and max of v[0..n) (v is left as it was). */
static inline bench_summary bench_summarize(const double *v, int n) {
  bench_summary s = {NAN, NAN, NAN, 0};
  if (n <= 0) return s;
  double *c = malloc((size_t)n * sizeof *c);
  if (c == NULL) return s;
  memcpy(c, v, (size_t)n * sizeof *c);
  qsort(c, (size_t)n, sizeof *c, bench_cmp_double);
  s.median = n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
  s.min = c[0];
  s.max = c[n - 1];
  s.n = n;
  free(c);
  return s;
}

/* The 1-minute load average, so a reader can tell a figure taken on a busy
 * machine ("?" where /proc is absent). */
static inline const char *bench_load_average(void) {
  static char buf[32] = "?";
  FILE *f = fopen("/proc/loadavg", "r");
  if (f) {
    if (fscanf(f, "%31s", buf) != 1) snprintf(buf, sizeof buf, "?");
    fclose(f);
  }
  return buf;
}

/* Summary of the per-repetition ratios num[i] / den[i]. */
static inline bench_summary bench_ratios(const double *num, const double *den,
                                         int n) {
  bench_summary s = {NAN, NAN, NAN, 0};
  double *r = malloc((size_t)(n > 0 ? n : 1) * sizeof *r);
  if (r == NULL) return s;
  for (int i = 0; i < n; i++) r[i] = num[i] / den[i];
  s = bench_summarize(r, n);
  free(r);
  return s;
}

/* True when argv holds --json; removes it from argv so the bench's own
 * argument parsing never sees it. */
static inline bool bench_json_requested(int *argc, char **argv) {
  bool found = false;
  int out = 1;
  for (int i = 1; i < *argc; i++) {
    if (strcmp(argv[i], "--json") == 0) found = true;
    else argv[out++] = argv[i];
  }
  *argc = out;
  argv[out] = NULL;
  return found;
}

/* One reported figure. Leave a field zero (NULL, 0, n = 0) when it does not
 * apply; it is then left out of the JSON object. */
typedef struct bench_figure {
  const char *bench;         /* "bench_digest" */
  const char *figure;        /* "digest_1t" */
  const char *shape;         /* "64x1024x4", "256MiB"; NULL: none */
  int ranks;                 /* 0: none */
  long long tokens;          /* 0: none */
  const char *unit;          /* "GB/s", "elem/s", "s", "bytes", "x" */
  bench_summary value;       /* the figure over the repetitions */
  const char *baseline_name; /* what the ratio is against; NULL: no ratio */
  bench_summary baseline;    /* the baseline's own figure, same unit */
  bench_summary ratio;       /* per-repetition value / baseline */
} bench_figure;

static void bench_json_number(FILE *f, const char *key, double v) {
  if (isfinite(v)) fprintf(f, ", \"%s\": %.6g", key, v);
  else fprintf(f, ", \"%s\": null", key);
}

/* Prints f as one JSON object on one line (names are the bench's own
 * identifiers: no character in them needs escaping). */
static inline void bench_print_figure(FILE *out, const bench_figure *f) {
  fprintf(out, "{\"bench\": \"%s\", \"figure\": \"%s\"", f->bench, f->figure);
  if (f->shape) fprintf(out, ", \"shape\": \"%s\"", f->shape);
  if (f->ranks > 0) fprintf(out, ", \"ranks\": %d", f->ranks);
  if (f->tokens > 0) fprintf(out, ", \"tokens\": %lld", f->tokens);
  bench_json_number(out, "value", f->value.median);
  bench_json_number(out, "min", f->value.min);
  bench_json_number(out, "max", f->value.max);
  fprintf(out, ", \"unit\": \"%s\", \"reps\": %d", f->unit ? f->unit : "",
          f->value.n);
  if (f->baseline_name) {
    bench_json_number(out, "baseline", f->baseline.median);
    fprintf(out, ", \"baseline_name\": \"%s\"", f->baseline_name);
    bench_json_number(out, "ratio", f->ratio.median);
    bench_json_number(out, "ratio_min", f->ratio.min);
    bench_json_number(out, "ratio_max", f->ratio.max);
  }
  fputs("}\n", out);
  fflush(out);
}

#endif /* VQC_BENCH_STATS_H */
