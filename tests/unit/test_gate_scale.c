/* test_gate_scale.c: `vqcheck run` at scale, as a user meets it (issue 12,
 * "Ranks"): the built CLI as a child process (vqc_test_cli()).
 *
 *   a_1024_rank_vq_run_is_clean   tests/data/scale/vq_1024.yaml: 1024 rank
 *                                 threads on a small vq scenario train every
 *                                 step and report nothing; the heatmap folds
 *                                 the ranks into one row;
 *   a_1024_rank_deadlock_is_told_in_ranges
 *                                 seed_sync_some_ranks (bugs.md #3: the odd
 *                                 ranks skip the seed all_reduce) on 1024
 *                                 ranks: the deadlock's message, the summary,
 *                                 run.json ("rank_ranges") and the reports
 *                                 say "1-1023 (step 2)", never a 512-entry
 *                                 list, and `vqcheck report` and `vqcheck
 *                                 compare` still read the run;
 *   divergence_at_64_ranks_names_the_one_rank
 *                                 skip_weight_sync on 64 ranks: only rank 63
 *                                 steps on its local gradient;
 *   memory_refusal_*              a scenario 1024 ranks cannot hold is
 *                                 refused before anything runs, saying how
 *                                 many ranks would fit and why it grows as
 *                                 the square of the ranks;
 *   open_file_limit_*             1024 ranks under `ulimit -n 256` are
 *                                 refused up front, naming the limit.
 *
 * Each case is well under a minute on two busy cores (the deadlock waits
 * out its scenario's 4 s timeout once). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "spawn_capture.h"
#include "test_paths.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char dir[256];

static void setup(void) {
  cr_assert_not_null(vqc_test_temp_dir(dir, sizeof dir,
                                       "/tmp/vqc-gate-scale-XXXXXX"));
}

static void teardown(void) { vqc_test_remove_dir(dir); }

TestSuite(gate_scale, .init = setup, .fini = teardown, .timeout = 120);

/* `vqcheck ARGS...` (NULL-terminated), timed. */
static vqc_spawn_result cli(double *seconds, const char *first, ...) {
  vqc_spawn_result r;
  va_list ap;
  va_start(ap, first);
  const double t0 = now_s();
  int rc = vqc_spawn_vcapture(&r, vqc_test_cli(), "VQC_DEBUG", NULL, first,
                              ap);
  if (seconds) *seconds = now_s() - t0;
  va_end(ap);
  cr_assert_eq(rc, 0, "cannot run %s", vqc_test_cli());
  return r;
}

static json_t *load_run(const char *run_dir) {
  char path[512];
  snprintf(path, sizeof path, "%s/run.json", run_dir);
  json_error_t err;
  json_t *j = json_load_file(path, 0, &err);
  cr_assert_not_null(j, "%s: %s", path, err.text);
  return j;
}

static char *slurp(const char *run_dir, const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", run_dir, name);
  char *text = vqc_read_file(path);
  cr_assert_not_null(text, "cannot read %s", path);
  return text;
}

static const json_t *only_finding(const json_t *run, const char *kind) {
  const json_t *fs = json_object_get(run, "findings");
  const json_t *found = NULL;
  int n = 0;
  for (size_t i = 0; i < json_array_size(fs); i++) {
    const json_t *f = json_array_get(fs, i);
    if (strcmp(json_string_value(json_object_get(f, "kind")), kind) == 0) {
      found = f;
      n++;
    }
  }
  cr_assert_eq(n, 1, "expected one %s finding, got %d", kind, n);
  return found;
}

static void scenario_path(const char *rel, char *buf, size_t n) {
  snprintf(buf, n, "%s/%s", vqc_test_source_dir(), rel);
}

Test(gate_scale, a_1024_rank_vq_run_is_clean) {
  char path[512], out[512];
  scenario_path("tests/data/scale/vq_1024.yaml", path, sizeof path);
  snprintf(out, sizeof out, "%s/run", dir);
  double dt;
  vqc_spawn_result r = cli(&dt, "run", path, "--out", out, "--quiet", NULL);
  cr_log_info("1024-rank vq run: %.2f s", dt);
  cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
  cr_expect_lt(dt, 50.0, "took %.1f s", dt);
  json_t *run = load_run(out);
  cr_expect_eq(json_integer_value(json_object_get(
                   json_object_get(run, "environment"), "ranks")), 1024);
  const json_t *tr = json_object_get(run, "training");
  cr_expect_str_eq(json_string_value(json_object_get(tr, "status")), "VQC_OK");
  cr_expect_eq(json_integer_value(json_object_get(tr, "steps_done")), 3);
  cr_expect_eq(json_array_size(json_object_get(run, "findings")), 0);
  json_decref(run);
  /* Every rank agreed at every step: one folded heatmap row. */
  char *html = slurp(out, "report.html");
  cr_expect(strstr(html, "data-folded=") != NULL);
  cr_expect(strstr(html, ">ranks 0-1023 (ref)</text>") != NULL,
            "no folded row for every rank");
  cr_expect_null(strstr(html, ">rank 517<"), "a row per rank");
  free(html);
  vqc_spawn_result_free(&r);
}

Test(gate_scale, a_1024_rank_deadlock_is_told_in_ranges) {
  char path[512], out[512], cmp[512];
  scenario_path("scenarios/seed_sync_some_ranks.yaml", path, sizeof path);
  snprintf(out, sizeof out, "%s/run", dir);
  double dt;
  vqc_spawn_result r = cli(&dt, "run", path, "--ranks", "1024", "--out", out,
                           NULL);
  cr_log_info("1024-rank deadlock run: %.2f s", dt);
  cr_assert_eq(r.code, 1, "exit %d: %s", r.code, r.err);
  cr_expect_lt(dt, 60.0, "took %.1f s", dt);
  /* The summary: ranges, and no list of the 512 ranks. */
  cr_expect(strstr(r.out, "deadlock at step 1 (ranks 1-1023 (step 2))") !=
                NULL, "%s", r.out);
  cr_expect(strstr(r.out, "was entered by ranks 0-1022 (step 2) but never "
                          "by ranks 1-1023 (step 2)") != NULL,
            "%s", r.out);
  cr_expect_null(strstr(r.out, "1, 3, 5, 7"), "%s", r.out);
  cr_expect_lt(strlen(r.out), 3000, "%s", r.out);
  cr_expect(strstr(r.out, "expectation (findings): met") != NULL, "%s", r.out);

  json_t *run = load_run(out);
  const json_t *f = only_finding(run, "deadlock");
  cr_expect_eq(json_array_size(json_object_get(f, "ranks")), 512);
  cr_expect_str_eq(json_string_value(json_object_get(f, "rank_ranges")),
                   "1-1023 (step 2)");
  const json_t *det = json_object_get(f, "detail");
  cr_expect_str_eq(json_string_value(json_object_get(det, "entered_ranges")),
                   "0-1022 (step 2)");
  json_decref(run);

  /* The reports, and their readers. */
  char *md = slurp(out, "report.md");
  cr_expect(strstr(md, "| 1 | deadlock | 1 | 1-1023 (step 2) |") != NULL,
            "findings table");
  cr_expect(strstr(md, "| ranks 1-1023 (step 2) | **never reached**") != NULL,
            "stuck-collective table not folded");
  free(md);
  char *html = slurp(out, "report.html");
  cr_expect(strstr(html, "<svg id=\"collective-timeline\"") != NULL);
  cr_expect(strstr(html, "ranks 1-1023 (step 2), #") != NULL,
            "timeline not folded");
  free(html);
  vqc_spawn_result rep = cli(NULL, "report", out, "--format", "md", NULL);
  /* The run's own exit code once the report is made: 1, findings. */
  cr_expect_eq(rep.code, 1, "vqcheck report: exit %d: %s", rep.code, rep.err);
  cr_expect(strstr(rep.out, "1-1023 (step 2)") != NULL);
  vqc_spawn_result_free(&rep);
  snprintf(cmp, sizeof cmp, "%s/compare", dir);
  vqc_spawn_result c = cli(NULL, "compare", out, "--out", cmp, "--quiet", NULL);
  /* Every rank's trace stops after step 0 (the deadlock is in step 1):
   * they agree there. */
  cr_expect_eq(c.code, 0, "vqcheck compare: exit %d: %s", c.code, c.err);
  vqc_spawn_result_free(&c);
  vqc_spawn_result_free(&r);
}

Test(gate_scale, divergence_at_64_ranks_names_the_one_rank) {
  char path[512], out[512];
  scenario_path("scenarios/skip_weight_sync.yaml", path, sizeof path);
  snprintf(out, sizeof out, "%s/run", dir);
  double dt;
  vqc_spawn_result r = cli(&dt, "run", path, "--ranks", "64", "--out", out,
                           "--quiet", NULL);
  cr_log_info("64-rank divergence run: %.2f s", dt);
  cr_assert_eq(r.code, 1, "exit %d: %s", r.code, r.err);
  json_t *run = load_run(out);
  const json_t *f = only_finding(run, "divergence");
  cr_expect_eq(json_integer_value(json_object_get(f, "step")), 1);
  cr_expect_str_eq(json_string_value(json_object_get(f, "tensor")),
                   "encoder.0.weight");
  const json_t *ranks = json_object_get(f, "ranks");
  cr_assert_eq(json_array_size(ranks), 1, "%s",
               json_string_value(json_object_get(f, "message")));
  cr_expect_eq(json_integer_value(json_array_get(ranks, 0)), 63);
  cr_expect(strstr(json_string_value(json_object_get(f, "message")),
                   "rank 63") != NULL);
  json_decref(run);
  vqc_spawn_result_free(&r);
}

/* A scenario file in the test's directory. */
static void write_scenario(const char *path, const char *model,
                           const char *sizes, int ranks, long batch) {
  FILE *fp = fopen(path, "w");
  cr_assert_not_null(fp);
  fprintf(fp, "name: big\nmodel: %s\nsizes: {%s}\nranks: %d\nsteps: 2\n"
          "batch: %ld\nseed: 1\nexpect: clean\n", model, sizes, ranks, batch);
  fclose(fp);
}

Test(gate_scale, memory_refusal_says_what_fits_before_anything_runs) {
  char path[512], out[512];
  snprintf(path, sizeof path, "%s/big.yaml", dir);
  snprintf(out, sizeof out, "%s/run", dir);
  /* fsq holds the global batch (1024 x 65536 rows) on every rank: about
   * 3 TiB in all, refused on any machine this test runs on. */
  write_scenario(path, "fsq", "dim: 16, hidden: 32", 1024, 65536);
  double dt;
  vqc_spawn_result r = cli(&dt, "run", path, "--out", out, NULL);
  cr_expect_eq(r.code, 2, "exit %d: %s", r.code, r.err);
  cr_expect_lt(dt, 10.0, "refusing took %.1f s", dt);
  cr_expect(strstr(r.err, "the scenario needs about") != NULL, "%s", r.err);
  cr_expect(strstr(r.err, "(1024 ranks x") != NULL, "%s", r.err);
  cr_expect(strstr(r.err, "lower ranks or batch") != NULL, "%s", r.err);
  cr_expect(strstr(r.err, "square of the rank count") != NULL, "%s", r.err);
  struct stat st;
  cr_expect_neq(stat(out, &st), 0, "the refused run made %s", out);
  vqc_spawn_result_free(&r);
}

Test(gate_scale, open_file_limit_is_checked_before_the_ranks_start) {
  char path[512], out[512], cmd[1600];
  scenario_path("tests/data/scale/vq_1024.yaml", path, sizeof path);
  snprintf(out, sizeof out, "%s/run", dir);
  /* Soft and hard: nothing vqcheck may raise. */
  snprintf(cmd, sizeof cmd, "ulimit -n 256 && exec '%s' run '%s' --out '%s'",
           vqc_test_cli(), path, out);
  const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
  vqc_spawn_result r;
  cr_assert_eq(vqc_spawn_capture(&r, argv, "VQC_DEBUG", NULL), 0);
  cr_expect_eq(r.code, 2, "exit %d: %s", r.code, r.err);
  cr_expect(strstr(r.err, "1024 ranks need about 3136 open files") != NULL,
            "%s", r.err);
  cr_expect(strstr(r.err, "(ulimit -n) is 256") != NULL, "%s", r.err);
  struct stat st;
  cr_expect_neq(stat(out, &st), 0, "the refused run made %s", out);
  vqc_spawn_result_free(&r);
}
