/* test_gate_input.c: hostile but valid input must end quickly, in a clear
 * answer, with bounded memory ("never a false green", issue 9):
 *
 *   plots      traces whose steps are near INT64_MAX or 2^53 (where a double
 *              step no longer advances), a single such step, and findings
 *              whose magnitudes are subnormal, near DBL_MAX or equal and
 *              huge: report.html renders in well under a second with exact
 *              step labels (reports/svg.c);
 *   nesting    YAML lists nested 100k and 500k deep (flow) and 400k deep
 *              (block) are refused in milliseconds with file:line:column and
 *              the limit; 64 levels still parse (harness/scenario/scenario.c);
 *   memory     a scenario that cannot fit (64 ranks x 1048576 rows under a
 *              4 GiB address-space limit) is refused before any rank
 *              allocates, with exit 2, the estimate and the limit; the
 *              estimate stays within its stated factor of measured peaks;
 *              every shipped scenario fits a small budget; the per-process
 *              estimate of a launched backend counts one rank
 *              (harness/run/run_memory.c).
 *
 * Each test has a Criterion timeout: the code before these fixes looped
 * forever (plots) or took 23 s to minutes (nesting) on the same inputs. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <float.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "report.h"
#include "run_memory.h"
#include "runner.h"
#include "scenario.h"
#include "spawn_capture.h"
#include "test_paths.h"
#include "trace.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void write_file(const char *path, const char *text, size_t len) {
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f, "%s", path);
  cr_assert_eq(fwrite(text, 1, len, f), len);
  fclose(f);
}

/* ---- plots */

/* A valid run.json for a 2-rank run with findings at `fsteps` (nf), each
 * with max_abs_diff mags[i] (or none when mags is NULL). */
static void write_run_json(const char *dir, const int64_t *fsteps,
                           const double *mags, int nf) {
  json_t *findings = json_array();
  for (int i = 0; i < nf; i++) {
    json_t *detail = json_object();
    if (mags) json_object_set_new(detail, "max_abs_diff", json_real(mags[i]));
    json_array_append_new(
        findings, json_pack("{s:s, s:I, s:[i], s:s, s:s, s:o}", "kind",
                            "divergence", "step", (json_int_t)fsteps[i],
                            "ranks", 1, "tensor", "codebook.embed", "message",
                            "tensor differs", "detail", detail));
  }
  json_t *j = json_pack(
      "{s:i, s:{s:s, s:s, s:s, s:i, s:i, s:s, s:s}, s:{s:s, s:s, s:i, s:i},"
      " s:{s:s, s:s, s:b, s:b}, s:s, s:f,"
      " s:{s:s, s:i, s:s, s:i}, s:o, s:[], s:i}",
      "schema_version", 1,
      "scenario", "name", "huge", "model", "vq", "fault", "none", "ranks", 2,
      "steps", 6, "seed", "7", "expect", "clean",
      "environment", "hostname", "testhost", "backend", "threads", "ranks", 2,
      "pid", 42,
      "build", "version", "0.1.0", "build_type", "Debug", "mpi", 0, "cuda", 0,
      "finished", "2026-01-02T03:04:05Z", "duration_s", 1.0,
      "training", "status", "VQC_OK", "failed_rank", -1, "message", "",
      "steps_done", 6,
      "findings", findings, "steps", "exit_code", nf > 0 ? 1 : 0);
  cr_assert_not_null(j, "json_pack failed");
  char path[512];
  snprintf(path, sizeof path, "%s/run.json", dir);
  cr_assert_eq(json_dump_file(j, path, JSON_INDENT(2)), 0);
  json_decref(j);
}

/* Two ranks trace one tensor at every step in steps (n); rank 1 differs
 * at odd indices. */
static void write_traces(const char *dir, const int64_t *steps, int n) {
  for (int r = 0; r < 2; r++) {
    char path[512];
    cr_assert_eq(vqc_trace_path(dir, r, path, sizeof path), VQC_OK);
    vqc_trace_writer *w = NULL;
    cr_assert_eq(vqc_trace_writer_open(path, &w), VQC_OK);
    for (int i = 0; i < n; i++) {
      vqc_trace_record rec = {.rank = r, .step = steps[i], .ndim = 1,
                              .shape = {16}};
      snprintf(rec.tensor, sizeof rec.tensor, "codebook.embed");
      snprintf(rec.dtype, sizeof rec.dtype, "float32");
      snprintf(rec.digest_algo, sizeof rec.digest_algo, VQC_TRACE_DIGEST_ALGO);
      rec.digest = 1000u + (unsigned)i + (r == 1 && i % 2 ? 0x100u : 0u);
      cr_assert_eq(vqc_trace_write(w, &rec), VQC_OK);
    }
    vqc_trace_writer_close(w);
  }
}

/* report.html's divergence plot (malloc'd), rendered within 2 s. */
static char *divergence_plot(const char *dir) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  const double t0 = now_s();
  const vqc_status s = vqc_report_render(dir, VQC_REPORT_HTML, f);
  const double dt = now_s() - t0;
  fclose(f);
  cr_assert_eq(s, VQC_OK, "%s", vqc_last_error());
  cr_expect_lt(dt, 2.0, "rendering took %.2f s", dt);
  cr_expect_lt(len, (size_t)1 << 20, "report.html is %zu bytes", len);
  const char *a = strstr(buf, "<svg id=\"divergence-plot\"");
  cr_assert_not_null(a, "no divergence plot");
  const char *b = strstr(a, "</svg>");
  cr_assert_not_null(b);
  char *plot = strndup(a, (size_t)(b - a) + 6);
  free(buf);
  /* Every coordinate is a number. */
  cr_expect_null(strstr(plot, "nan"), "NaN in the plot");
  cr_expect_null(strstr(plot, "inf\""), "inf in the plot");
  return plot;
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* The x axis's ticks (a short grey line each, beside its label). */
static int x_ticks(const char *plot) {
  const char *a = strstr(plot, "<g class=\"axis x\">");
  cr_assert_not_null(a);
  const char *b = strstr(a, "</g>");
  cr_assert_not_null(b);
  char *axis = strndup(a, (size_t)(b - a));
  const int n = count(axis, "stroke=\"#999\""); /* tick marks */
  free(axis);
  return n;
}

static void expect_label(const char *plot, int64_t v) {
  char want[64];
  snprintf(want, sizeof want, ">%" PRId64 "</text>", v);
  cr_expect_not_null(strstr(plot, want), "no tick label %" PRId64 " in %s", v,
                     plot);
}

static void make_dir(char *dir, size_t n) {
  cr_assert_not_null(vqc_test_temp_dir(dir, n, "/tmp/vqc-gate-XXXXXX"));
}

Test(gate_input, plot_steps_near_int64_max_finish_with_exact_labels,
     .timeout = 10) {
  char dir[64];
  make_dir(dir, sizeof dir);
  int64_t steps[6];
  for (int i = 0; i < 6; i++) steps[i] = INT64_MAX - 5 + i;
  write_run_json(dir, &steps[5], NULL, 1);
  write_traces(dir, steps, 6);
  char *plot = divergence_plot(dir);
  /* span 5: a tick per step, the last one INT64_MAX itself */
  for (int i = 0; i < 6; i++) expect_label(plot, steps[i]);
  cr_expect_leq(x_ticks(plot), 13);
  free(plot);
  vqc_test_remove_dir(dir);
}

Test(gate_input, plot_steps_past_2_pow_53_finish_with_exact_labels,
     .timeout = 10) {
  char dir[64];
  make_dir(dir, sizeof dir);
  const int64_t base = (int64_t)1 << 53;
  int64_t steps[4] = {base, base + 1, base + 2, base + 3};
  write_run_json(dir, &steps[1], NULL, 1);
  write_traces(dir, steps, 4);
  char *plot = divergence_plot(dir);
  /* 2^53 + 1 and + 3 are not doubles: only integer labels get them. */
  for (int i = 0; i < 4; i++) expect_label(plot, steps[i]);
  cr_expect_eq(x_ticks(plot), 4);
  free(plot);
  vqc_test_remove_dir(dir);
}

Test(gate_input, plot_single_huge_step_and_full_range_finish, .timeout = 10) {
  const int64_t cases[][2] = {{INT64_MAX, INT64_MAX},
                              {(int64_t)1 << 53, (int64_t)1 << 53},
                              {0, INT64_MAX}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    char dir[64];
    make_dir(dir, sizeof dir);
    const int n = cases[c][0] == cases[c][1] ? 1 : 2;
    write_run_json(dir, NULL, NULL, 0);
    write_traces(dir, cases[c], n);
    char *plot = divergence_plot(dir);
    const int t = x_ticks(plot);
    cr_expect(t >= 2 && t <= 13, "case %zu: %d x ticks", c, t);
    if (n == 1) expect_label(plot, cases[c][0]);
    free(plot);
    vqc_test_remove_dir(dir);
  }
}

/* Without traces the plot shows the findings' magnitudes: subnormal next to
 * DBL_MAX (log scale over every decade), and equal huge negative values
 * (linear, a span the doubles cannot resolve around them). */
Test(gate_input, plot_extreme_magnitudes_finish, .timeout = 10) {
  const double mags[][3] = {{5e-324, 1e-310, DBL_MAX},
                            {-1e20, -1e20, -1e20},
                            {-DBL_MAX, 0.0, DBL_MAX}};
  const int64_t fsteps[3] = {INT64_MAX - 2, INT64_MAX - 1, INT64_MAX};
  for (size_t c = 0; c < sizeof mags / sizeof mags[0]; c++) {
    char dir[64];
    make_dir(dir, sizeof dir);
    write_run_json(dir, fsteps, mags[c], 3);
    char *plot = divergence_plot(dir);
    const char *ay = strstr(plot, "<g class=\"axis y\">");
    cr_assert_not_null(ay);
    const int yt = count(ay, "stroke=\"#eee\"");
    cr_expect(yt >= 2 && yt <= 14, "case %zu: %d y ticks", c, yt);
    expect_label(plot, INT64_MAX);
    free(plot);
    vqc_test_remove_dir(dir);
  }
}

/* ---- nesting */

/* A scenario whose `sizes` is n levels of '[' (flow) or "- " (block). */
static char *nested(size_t n, bool block, size_t *len) {
  const char *head = block ? "name: x\nmodel: vq\nsizes:\n  " : "name: x\nmodel: vq\nsizes: ";
  const size_t h = strlen(head);
  char *t = malloc(h + 2 * n + 8);
  cr_assert_not_null(t);
  memcpy(t, head, h);
  size_t k = h;
  for (size_t i = 0; i < n; i++) {
    if (block) {
      t[k++] = '-';
      t[k++] = ' ';
    } else {
      t[k++] = '[';
    }
  }
  if (block) t[k++] = 'x';
  else
    for (size_t i = 0; i < n; i++) t[k++] = ']';
  t[k++] = '\n';
  t[k] = '\0';
  *len = k;
  return t;
}

static void expect_refused_fast(size_t depth, bool block) {
  char dir[64], path[128];
  make_dir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/deep.yaml", dir);
  size_t len;
  char *text = nested(depth, block, &len);
  cr_assert_leq(len, (size_t)1 << 20, "keep under the 1 MiB file limit");
  write_file(path, text, len);
  free(text);
  vqc_scenario *sc = malloc(sizeof *sc);
  const double t0 = now_s();
  const vqc_status s = vqc_scenario_load(path, sc);
  const double dt = now_s() - t0;
  cr_expect_eq(s, VQC_EPARSE, "depth %zu: %s", depth, vqc_last_error());
  cr_expect_lt(dt, 0.5, "depth %zu took %.2f s", depth, dt);
  /* file:line:column, and the limit */
  char where[160];
  snprintf(where, sizeof where, "%s:%d:", path, block ? 4 : 3);
  cr_expect_not_null(strstr(vqc_last_error(), where), "%s", vqc_last_error());
  cr_expect_not_null(strstr(vqc_last_error(), "more than 64 deep"), "%s",
                     vqc_last_error());
  free(sc);
  vqc_test_remove_dir(dir);
}

Test(gate_input, flow_nesting_100k_refused_fast, .timeout = 10) {
  expect_refused_fast(100000, false);
}

Test(gate_input, flow_nesting_500k_refused_fast, .timeout = 10) {
  expect_refused_fast(500000, false);
}

Test(gate_input, block_nesting_400k_refused_fast, .timeout = 10) {
  expect_refused_fast(400000, true);
}

/* The limit counts the top mapping: 63 lists inside it parse (and fail the
 * schema), 64 are refused at the 64th '[' ("sizes: " is 7 columns: 71). */
Test(gate_input, nesting_limit_is_exact, .timeout = 10) {
  char dir[64], path[128];
  make_dir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/edge.yaml", dir);
  vqc_scenario *sc = malloc(sizeof *sc);
  for (size_t depth = 63; depth <= 64; depth++) {
    size_t len;
    char *text = nested(depth, false, &len);
    write_file(path, text, len);
    free(text);
    cr_expect_eq(vqc_scenario_load(path, sc), VQC_EPARSE);
    const bool refused = strstr(vqc_last_error(), "more than 64 deep") != NULL;
    cr_expect_eq(refused, depth == 64, "depth %zu: %s", depth, vqc_last_error());
    if (refused) {
      char where[160];
      snprintf(where, sizeof where, "%s:3:71:", path);
      cr_expect_not_null(strstr(vqc_last_error(), where), "%s",
                         vqc_last_error());
    }
  }
  free(sc);
  vqc_test_remove_dir(dir);
}

Test(gate_input, cli_exits_2_on_deep_nesting, .timeout = 10) {
  char dir[64], path[128];
  make_dir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/deep.yaml", dir);
  size_t len;
  char *text = nested(100000, false, &len);
  write_file(path, text, len);
  free(text);
  const char *argv[] = {vqc_test_cli(), "run", path, "--out", dir, NULL};
  vqc_spawn_result r;
  cr_assert_eq(vqc_spawn_capture(&r, argv, "VQC_DEBUG", NULL), 0);
  cr_expect_eq(r.code, 2, "exit %d: %s", r.code, r.err);
  cr_expect_not_null(strstr(r.err, "nested more than 64 deep"), "%s", r.err);
  vqc_spawn_result_free(&r);
  vqc_test_remove_dir(dir);
}

/* ---- memory */

static void write_scenario(const char *path, const char *model,
                           const char *sizes, int ranks, long batch) {
  char text[512];
  const int n = snprintf(text, sizeof text,
                         "name: big\nmodel: %s\nsizes: {%s}\nranks: %d\n"
                         "steps: 2\nbatch: %ld\nseed: 1\nexpect: clean\n",
                         model, sizes, ranks, batch);
  write_file(path, text, (size_t)n);
}

static void load_made_up(const char *model, const char *sizes, int ranks,
                         long batch, vqc_scenario *sc) {
  char dir[64], path[128];
  make_dir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/s.yaml", dir);
  write_scenario(path, model, sizes, ranks, batch);
  cr_assert_eq(vqc_scenario_load(path, sc), VQC_OK, "%s", vqc_last_error());
  vqc_test_remove_dir(dir);
}

static const vqc_run_memory_limits NO_LIMITS = {
    VQC_MEMORY_UNLIMITED, VQC_MEMORY_UNLIMITED, VQC_MEMORY_UNLIMITED,
    VQC_MEMORY_UNLIMITED, VQC_MEMORY_UNLIMITED, 0, 0};

#define GIB ((uint64_t)1 << 30)
#define MIB ((uint64_t)1 << 20)

/* The brief's case: 64 ranks x 1048576 rows of dim 16 is ~9 GiB of
 * threads (x, quantized, indices: 136 bytes a row), refused in a process
 * limited to 4 GiB, before any rank allocates or anything is written. */
Test(gate_input, threads_run_refused_before_allocating, .timeout = 20) {
#if defined(__SANITIZE_ADDRESS__)
  cr_skip_test("AddressSanitizer reserves terabytes of shadow address space, "
               "which no address-space limit (ulimit -v) leaves room for; "
               "the plain build runs this");
#endif
  char dir[64], path[128], out[160];
  make_dir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/big.yaml", dir);
  snprintf(out, sizeof out, "%s/run", dir);
  write_scenario(path, "vq", "dim: 16, codebook_size: 32", 64, 1048576);
  vqc_scenario *sc = malloc(sizeof *sc);
  cr_assert_eq(vqc_scenario_load(path, sc), VQC_OK, "%s", vqc_last_error());
  /* Criterion runs each test in its own process: the limit stays here. */
  struct rlimit rl = {4 * GIB, 4 * GIB};
  cr_assert_eq(setrlimit(RLIMIT_AS, &rl), 0);
  vqc_run_options o = {out, NULL};
  vqc_run_result r;
  const double t0 = now_s();
  const vqc_status s = vqc_run_threads(sc, &o, &r);
  const double dt = now_s() - t0;
  cr_expect_eq(s, VQC_EINVAL, "%s", vqc_last_error());
  cr_expect_lt(dt, 0.5, "refusing took %.2f s", dt);
  const char *msg = vqc_last_error();
  /* the address-space figure: 8.6 GiB + 64 thread stacks and ledgers */
  cr_expect_not_null(strstr(msg, "needs about 9."), "%s", msg);
  cr_expect_not_null(strstr(msg, "64 ranks x"), "%s", msg);
  cr_expect_not_null(strstr(msg, "ulimit -v"), "%s", msg);
  cr_expect_not_null(strstr(msg, "lower ranks or batch"), "%s", msg);
  struct stat st;
  cr_expect_neq(stat(out, &st), 0, "the refused run made %s", out);
  vqc_run_result_free(&r);
  free(sc);
  vqc_test_remove_dir(dir);
}

Test(gate_input, cli_exits_2_when_the_scenario_cannot_fit, .timeout = 20) {
#if defined(__SANITIZE_ADDRESS__)
  cr_skip_test("AddressSanitizer reserves terabytes of shadow address space, "
               "which no address-space limit (ulimit -v) leaves room for; "
               "the plain build runs this");
#endif
  char dir[64], path[128], out[160], cmd[512];
  make_dir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/big.yaml", dir);
  snprintf(out, sizeof out, "%s/run", dir);
  write_scenario(path, "vq", "dim: 16, codebook_size: 32", 64, 1048576);
  /* ulimit -v is KiB: 4 GiB. */
  snprintf(cmd, sizeof cmd, "ulimit -v 4194304 && exec '%s' run '%s' --out '%s'",
           vqc_test_cli(), path, out);
  const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
  vqc_spawn_result r;
  const double t0 = now_s();
  cr_assert_eq(vqc_spawn_capture(&r, argv, "VQC_DEBUG", NULL), 0);
  const double dt = now_s() - t0;
  cr_expect_eq(r.code, 2, "exit %d: %s", r.code, r.err);
  cr_expect_lt(dt, 2.0, "took %.2f s", dt);
  cr_expect_not_null(strstr(r.err, "needs about"), "%s", r.err);
  cr_expect_not_null(strstr(r.err, "ulimit -v"), "%s", r.err);
  vqc_spawn_result_free(&r);
  vqc_test_remove_dir(dir);
}

/* The figures in the message, and each limit on its own. */
Test(gate_input, fits_names_the_limit_it_exceeds) {
  vqc_scenario *sc = malloc(sizeof *sc);
  load_made_up("vq", "dim: 16, codebook_size: 32", 64, 1048576, sc);
  vqc_run_memory est;
  vqc_run_memory_estimate(sc, sc->ranks, &est);
  /* 64 x (1 MiB + 1048576 x 136 B + small): 8.6 GiB */
  cr_expect(est.resident > 8 * GIB && est.resident < 9 * GIB, "%" PRIu64,
            est.resident);
  cr_expect(est.per_rank > 136 * MIB && est.per_rank < 140 * MIB, "%" PRIu64,
            est.per_rank);
  vqc_run_memory_limits lim = NO_LIMITS;
  cr_expect_eq(vqc_run_memory_fits(sc, &est, &lim), VQC_OK);
  lim.mem_total = (uint64_t)(23.4 * GIB);
  lim.mem_available = (uint64_t)(8.0 * GIB);
  cr_expect_eq(vqc_run_memory_fits(sc, &est, &lim), VQC_EINVAL);
  cr_expect_not_null(strstr(vqc_last_error(), "23.4 GiB total / 8.0 GiB "
                            "available"), "%s", vqc_last_error());
  lim = NO_LIMITS;
  lim.cgroup_left = 2 * GIB;
  cr_expect_eq(vqc_run_memory_fits(sc, &est, &lim), VQC_EINVAL);
  cr_expect_not_null(strstr(vqc_last_error(), "cgroup"), "%s", vqc_last_error());
  lim = NO_LIMITS;
  lim.rlimit_data = 2 * GIB;
  cr_expect_eq(vqc_run_memory_fits(sc, &est, &lim), VQC_EINVAL);
  cr_expect_not_null(strstr(vqc_last_error(), "ulimit -d"), "%s", vqc_last_error());
  /* One rank per process (mpi): ~137 MiB fits where 64 do not. */
  vqc_run_memory one;
  vqc_run_memory_estimate(sc, 1, &one);
  cr_expect(one.resident < 200 * MIB, "%" PRIu64, one.resident);
  lim = NO_LIMITS;
  lim.mem_available = 4 * GIB;
  cr_expect_eq(vqc_run_memory_fits(sc, &one, &lim), VQC_OK, "%s",
               vqc_last_error());
  free(sc);
}

/* Measured peak RSS (/usr/bin/time, threads, 2 steps; run_memory.c's
 * table): the estimate stays between 0.9x and 2x of each. A change to
 * the models' buffers that breaks this needs a new measurement and a new
 * formula. */
Test(gate_input, estimate_within_its_factor_of_measured_peaks) {
  static const struct {
    const char *model, *sizes;
    int ranks;
    long batch;
    double measured_mib;
  } cases[] = {
      {"vq", "dim: 16, codebook_size: 32", 8, 131072, 144.1},
      {"vq", "dim: 16, codebook_size: 32", 16, 1048576, 2185.0},
      {"vq", "dim: 256, codebook_size: 65536", 2, 1024, 653.8},
      {"rvq", "dim: 16, codebook_size: 32, num_quantizers: 4", 4, 65536, 82.0},
      {"fsq", "dim: 16, hidden: 32", 4, 65536, 1057.9},
      {"autoencoder", "dim: 16, hidden: 32, codebook_size: 32", 4, 65536,
       1143.2},
      {"clip", "dim: 16, hidden: 32", 2, 2048, 282.2},
  };
  vqc_scenario *sc = malloc(sizeof *sc);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    load_made_up(cases[i].model, cases[i].sizes, cases[i].ranks,
                 cases[i].batch, sc);
    vqc_run_memory est;
    vqc_run_memory_estimate(sc, sc->ranks, &est);
    const double ratio = (double)est.resident / (double)MIB / cases[i].measured_mib;
    cr_log_info("%s ranks %d batch %ld: estimate %.1f MiB, measured %.1f MiB, "
                "ratio %.2f", cases[i].model, cases[i].ranks, cases[i].batch,
                (double)est.resident / (double)MIB, cases[i].measured_mib,
                ratio);
    cr_expect(ratio >= 0.9 && ratio <= 2.0, "%s: ratio %.2f", cases[i].model,
              ratio);
  }
  free(sc);
}

/* The shipped scenarios are small: each fits in 64 MiB, so the check never
 * refuses them on a CI machine. */
Test(gate_input, shipped_scenarios_fit_a_small_budget) {
  char dirpath[1024];
  snprintf(dirpath, sizeof dirpath, "%s/scenarios", vqc_test_source_dir());
  DIR *d = opendir(dirpath);
  cr_assert_not_null(d, "%s", dirpath);
  vqc_scenario *sc = malloc(sizeof *sc);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    const size_t len = strlen(e->d_name);
    if (len < 6 || strcmp(e->d_name + len - 5, ".yaml") != 0) continue;
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dirpath, e->d_name);
    cr_assert_eq(vqc_scenario_load(path, sc), VQC_OK, "%s", vqc_last_error());
    vqc_run_memory est;
    vqc_run_memory_estimate(sc, sc->ranks, &est);
    cr_expect_lt(est.resident, 64 * MIB, "%s: %" PRIu64, e->d_name,
                 est.resident);
    n++;
  }
  closedir(d);
  cr_expect_gt(n, 0);
  free(sc);
}
