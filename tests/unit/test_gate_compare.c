/* test_gate_compare.c: "never a false green" for `vqcheck compare` and the
 * reports made from its run directory (issue 9), through the built CLI as a
 * CI job meets it:
 *
 *   traces that end at different steps, an empty trace, traces in which no
 *   rank reached a step: a rank_failure finding naming each rank and how far
 *   it got, exit 1, reports that never say CLEAN; traces sharing no (step,
 *   tensor) or a single rank's trace: exit 2 (nothing to compare);
 *   a split with no majority (3 ranks, 3 digests; 1-1; 2-2): "no majority",
 *   every rank named, no reference, and the heatmap paints no rank of those
 *   steps as agreeing;
 *   junit.xml lists the checks that did not run as <skipped/> with the
 *   reason, never as passed (compare's run.json says which ran; a run.json
 *   that does not say gets every check without a finding skipped; a
 *   vqcheck scenario run's still passes);
 *   a trace name with a rank too large is named as written;
 *   a 2 MiB trace line is exit 2 naming file:line and the 1 MiB cap, found
 *   after reading no more than the cap (vqc_trace_read_line);
 *   compare --out TRACE_DIR and analyze never overwrite a report file of
 *   the user's there, replace their own, never mark the directory, and
 *   analyze refuses a directory another process holds locked.
 *
 * Traces are written with fprintf, as another program would. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spawn_capture.h"
#include "test_paths.h"
#include "trace.h"

/* ---- writing traces */

static void line(FILE *f, int rank, int64_t step, const char *tensor,
                 uint64_t digest) {
  fprintf(f, "{\"schema\":\"vqcheck-trace/1\",\"rank\":%d,\"step\":%" PRId64
          ",\"tensor\":\"%s\",\"dtype\":\"float32\",\"shape\":[4,8],"
          "\"digest_algo\":\"vqc-xxh3-tree-1\",\"digest\":\"%016" PRIx64
          "\"}\n", rank, step, tensor, digest);
}

static FILE *open_trace(const char *dir, int rank) {
  char path[512];
  snprintf(path, sizeof path, "%s/rank-%d.trace.jsonl", dir, rank);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f, "%s", path);
  return f;
}

/* Rank r writes tensors w and b for steps 0..last[r] (last[r] < 0: an
 * empty file). digest_of(r, step, t) gives its digests. */
typedef uint64_t (*digest_fn)(int rank, int64_t step, int t);

static uint64_t same(int rank, int64_t step, int t) {
  (void)rank;
  return 0x1000u * (uint64_t)(step + 1) + (uint64_t)t;
}

static void write_traces(const char *dir, int ranks, const int *last,
                         digest_fn fn) {
  static const char *const names[] = {"w", "b"};
  for (int r = 0; r < ranks; r++) {
    FILE *f = open_trace(dir, r);
    for (int64_t s = 0; s <= last[r]; s++)
      for (int t = 0; t < 2; t++) line(f, r, s, names[t], fn(r, s, t));
    fclose(f);
  }
}

static void make_dir(char *buf, size_t n) {
  cr_assert_not_null(vqc_test_temp_dir(buf, n, "/tmp/vqc-gate-XXXXXX"));
}

/* ---- running vqcheck */

static vqc_spawn_result run_cli(const char *first, ...) {
  vqc_spawn_result r;
  va_list ap;
  va_start(ap, first);
  int rc = vqc_spawn_vcapture(&r, vqc_test_cli(), NULL, NULL, first, ap);
  va_end(ap);
  cr_assert_eq(rc, 0, "cannot run %s: %s", vqc_test_cli(), strerror(rc));
  return r;
}

static char *read_in(const char *dir, const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  char *text = vqc_read_file(path);
  cr_assert_not_null(text, "%s missing", path);
  return text;
}

static json_t *load_json(const char *dir, const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  json_error_t err;
  json_t *j = json_load_file(path, 0, &err);
  cr_assert_not_null(j, "%s: %s", path, err.text);
  return j;
}

static int count_substr(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* The <testcase name="kind" ...> element of junit text, up to its end
 * ("/>" or "</testcase>"), malloc'd. */
static char *testcase(const char *junit, const char *kind) {
  char open[128];
  snprintf(open, sizeof open, "<testcase name=\"%s\"", kind);
  const char *p = strstr(junit, open);
  cr_assert_not_null(p, "no testcase %s in:\n%s", kind, junit);
  const char *gt = strchr(p, '>');
  cr_assert_not_null(gt);
  const char *end = gt[-1] == '/' ? gt + 1 : strstr(p, "</testcase>");
  cr_assert_not_null(end);
  if (gt[-1] != '/') end += strlen("</testcase>");
  return strndup(p, (size_t)(end - p));
}

/* The only finding of a run.json, checked to be of `kind`. */
static const json_t *only_finding(const json_t *run, const char *kind) {
  const json_t *fs = json_object_get(run, "findings");
  cr_assert_eq(json_array_size(fs), 1, "findings: %s",
               json_dumps(fs, JSON_COMPACT));
  const json_t *x = json_array_get(fs, 0);
  cr_assert_str_eq(json_string_value(json_object_get(x, "kind")), kind);
  return x;
}

static void expect_ranks(const json_t *x, const int *want, size_t n) {
  const json_t *ranks = json_object_get(x, "ranks");
  cr_assert_eq(json_array_size(ranks), n, "ranks: %s",
               json_dumps(ranks, JSON_COMPACT));
  for (size_t i = 0; i < n; i++)
    cr_expect_eq(json_integer_value(json_array_get(ranks, i)), want[i]);
}

static const char *message(const json_t *x) {
  return json_string_value(json_object_get(x, "message"));
}

/* ---- traces that stop early */

Test(gate_compare, traces_ending_early_are_a_rank_failure_never_clean) {
  char dir[64], out[128];
  make_dir(dir, sizeof dir);
  /* Ranks 0, 1 reach step 9; rank 2 stops after step 4, rank 3 after 0. */
  const int last[] = {9, 9, 4, 0};
  write_traces(dir, 4, last, same);
  snprintf(out, sizeof out, "%s/out", dir);
  vqc_spawn_result c = run_cli("compare", dir, "--out", out, NULL);
  cr_expect_eq(c.code, 1, "exit %d, stderr: %s", c.code, c.err);

  json_t *run = load_json(out, "run.json");
  const json_t *x = only_finding(run, "rank_failure");
  const int want[] = {2, 3};
  expect_ranks(x, want, 2);
  cr_expect(strstr(message(x), "traces of ranks 2, 3 stop early: rank 2 at "
                   "step 4, rank 3 at step 0 (the other ranks reach step 9)")
                && strstr(message(x), "died, hung or were killed"),
            "%s", message(x));
  cr_expect_eq(json_integer_value(json_object_get(x, "step")), 1,
               "the first step a rank lacks");
  const json_t *det = json_object_get(x, "detail");
  json_t *want_last = json_pack("[i,i,i,i]", 9, 9, 4, 0);
  cr_expect(json_equal(json_object_get(det, "last_step"), want_last),
            "detail.last_step: %s",
            json_dumps(json_object_get(det, "last_step"), JSON_COMPACT));
  json_decref(want_last);
  cr_expect_eq(json_array_size(json_object_get(det, "stopped_early")), 2);
  cr_expect_eq(json_integer_value(json_object_get(run, "exit_code")), 1);
  json_decref(run);

  char *md = read_in(out, "report.md");
  cr_expect_null(strstr(md, "CLEAN"), "report.md says CLEAN:\n%s", md);
  char *html = read_in(out, "report.html");
  cr_expect_null(strstr(html, "CLEAN"), "report.html says CLEAN");
  char *junit = read_in(out, "junit.xml");
  char *tc = testcase(junit, "rank_failure");
  cr_expect(strstr(tc, "<failure") != NULL, "%s", tc);
  free(tc);
  free(md);
  free(html);
  free(junit);
  vqc_spawn_result_free(&c);
  vqc_test_remove_dir(dir);
}

Test(gate_compare, an_empty_trace_is_a_rank_that_reached_no_step) {
  char dir[64], out[128];
  make_dir(dir, sizeof dir);
  const int last[] = {3, -1, 3};
  write_traces(dir, 3, last, same);
  snprintf(out, sizeof out, "%s/out", dir);
  vqc_spawn_result c = run_cli("compare", dir, "--out", out, "--quiet", NULL);
  cr_expect_eq(c.code, 1, "exit %d, stderr: %s", c.code, c.err);
  json_t *run = load_json(out, "run.json");
  const json_t *x = only_finding(run, "rank_failure");
  const int want[] = {1};
  expect_ranks(x, want, 1);
  cr_expect(strstr(message(x), "the trace of rank 1 stops early: rank 1 "
                   "before its first step (empty trace)") != NULL,
            "%s", message(x));
  cr_expect(json_is_null(json_array_get(json_object_get(
                json_object_get(x, "detail"), "last_step"), 1)));
  json_decref(run);
  vqc_spawn_result_free(&c);
  vqc_test_remove_dir(dir);
}

Test(gate_compare, traces_without_a_step_compare_nothing_and_are_not_clean) {
  char dir[64], out[128];
  make_dir(dir, sizeof dir);
  const int last[] = {-1, -1, -1};
  write_traces(dir, 3, last, same);
  snprintf(out, sizeof out, "%s/out", dir);
  vqc_spawn_result c = run_cli("compare", dir, "--out", out, "--quiet", NULL);
  cr_expect_eq(c.code, 1, "exit %d, stderr: %s", c.code, c.err);
  json_t *run = load_json(out, "run.json");
  const json_t *x = only_finding(run, "rank_failure");
  const int want[] = {0, 1, 2};
  expect_ranks(x, want, 3);
  cr_expect(strstr(message(x), "no trace holds a step") &&
                strstr(message(x), "nothing was compared"),
            "%s", message(x));
  json_decref(run);
  char *md = read_in(out, "report.md");
  cr_expect_null(strstr(md, "CLEAN"), "%s", md);
  free(md);
  vqc_spawn_result_free(&c);
  vqc_test_remove_dir(dir);
}

Test(gate_compare, nothing_in_common_or_one_rank_is_not_a_comparison) {
  char dir[64], out[128];
  make_dir(dir, sizeof dir);
  snprintf(out, sizeof out, "%s/out", dir);
  /* Each rank names its tensor differently: no (step, tensor) is shared. */
  for (int r = 0; r < 2; r++) {
    FILE *f = open_trace(dir, r);
    for (int s = 0; s < 3; s++) line(f, r, s, r == 0 ? "w" : "w_renamed", 7);
    fclose(f);
  }
  vqc_spawn_result c = run_cli("compare", dir, "--out", out, NULL);
  cr_expect_eq(c.code, 2, "exit %d, stderr: %s", c.code, c.err);
  cr_expect(strstr(c.err, "nothing was compared") != NULL, "%s", c.err);
  struct stat st;
  cr_expect_neq(stat(out, &st), 0, "no run directory for nothing compared");
  vqc_spawn_result_free(&c);

  /* One rank's trace alone. */
  char path[512];
  snprintf(path, sizeof path, "%s/rank-1.trace.jsonl", dir);
  cr_assert_eq(unlink(path), 0);
  c = run_cli("compare", dir, "--out", out, NULL);
  cr_expect_eq(c.code, 2, "exit %d, stderr: %s", c.code, c.err);
  cr_expect(strstr(c.err, "rank 0 only") != NULL, "%s", c.err);
  cr_expect_neq(stat(out, &st), 0, "no run directory for one rank");
  vqc_spawn_result_free(&c);
  vqc_test_remove_dir(dir);
}

/* ---- no majority */

/* Tensor b differs from step 2 on: every rank its own digest. */
static uint64_t each_own(int rank, int64_t step, int t) {
  return same(rank, step, t) ^ (t == 1 && step >= 2 ? 0xbeef00u * (uint64_t)rank
                                                     : 0);
}

Test(gate_compare, three_ranks_three_digests_blame_no_rank) {
  char dir[64], out[128];
  make_dir(dir, sizeof dir);
  const int last[] = {3, 3, 3};
  write_traces(dir, 3, last, each_own);
  snprintf(out, sizeof out, "%s/out", dir);
  vqc_spawn_result c = run_cli("compare", dir, "--out", out, "--quiet", NULL);
  cr_expect_eq(c.code, 1, "exit %d, stderr: %s", c.code, c.err);
  json_t *run = load_json(out, "run.json");
  const json_t *x = only_finding(run, "divergence");
  const int want[] = {0, 1, 2};
  expect_ranks(x, want, 3);
  cr_expect(strstr(message(x), "no majority: ranks 0, 1, 2 all differ") !=
                NULL, "%s", message(x));
  cr_expect_null(strstr(message(x), "differs on rank"), "%s", message(x));
  const json_t *det = json_object_get(x, "detail");
  cr_expect(json_is_false(json_object_get(det, "majority")));
  cr_expect_null(json_object_get(det, "reference_rank"));
  cr_expect_null(json_object_get(det, "outliers"));
  cr_expect_eq(json_array_size(json_object_get(det, "groups")), 3);
  json_decref(run);
  vqc_spawn_result_free(&c);
  vqc_test_remove_dir(dir);
}

Test(gate_compare, two_ranks_split_and_the_heatmap_paints_no_rank_green) {
  char dir[64], out[128];
  make_dir(dir, sizeof dir);
  const int last[] = {3, 3};
  write_traces(dir, 2, last, each_own);
  snprintf(out, sizeof out, "%s/out", dir);
  vqc_spawn_result c = run_cli("compare", dir, "--out", out, "--quiet", NULL);
  cr_expect_eq(c.code, 1, "exit %d, stderr: %s", c.code, c.err);
  json_t *run = load_json(out, "run.json");
  const json_t *x = only_finding(run, "divergence");
  const int want[] = {0, 1};
  expect_ranks(x, want, 2);
  cr_expect(strstr(message(x), "no majority: ranks {0} and {1} differ") !=
                NULL, "%s", message(x));
  json_decref(run);
  /* Steps 0, 1 agree on both ranks (4 cells); at steps 2 and 3 neither
   * rank is right by count, rank 0 (the tie-break reference) included. */
  char *html = read_in(out, "report.html");
  cr_expect_eq(count_substr(html, "<rect class=\"cell agree\""), 4, "%s",
               strstr(html, "digest-heatmap"));
  cr_expect_eq(count_substr(html, "<rect class=\"cell nomajority\""), 4);
  cr_expect(strstr(html, "step 2, rank 0: no majority") != NULL);
  cr_expect(strstr(html, "no majority") != NULL, "the legend names it");
  char *md = read_in(out, "report.md");
  cr_expect(strstr(md, "| 2 | **no majority** | **no majority** |") != NULL,
            "%s", md);
  free(md);
  free(html);
  vqc_spawn_result_free(&c);
  vqc_test_remove_dir(dir);
}

/* ---- junit.xml: checks that did not run are skipped */

Test(gate_compare, junit_skips_what_compare_did_not_check) {
  char dir[64], out[128];
  make_dir(dir, sizeof dir);
  const int last[] = {2, 2, 2};
  write_traces(dir, 3, last, same);
  snprintf(out, sizeof out, "%s/out", dir);
  vqc_spawn_result c = run_cli("compare", dir, "--out", out, "--quiet", NULL);
  cr_expect_eq(c.code, 0, "exit %d, stderr: %s", c.code, c.err);
  char *junit = read_in(out, "junit.xml");
  cr_expect(strstr(junit, "skipped=\"7\"") != NULL, "%s", junit);
  char *tc = testcase(junit, "divergence");
  cr_expect(strstr(tc, "<skipped") == NULL && strstr(tc, "<failure") == NULL,
            "divergence ran and passed: %s", tc);
  free(tc);
  static const char *const not_run[] = {
      "lost_inplace",   "deadlock",          "collective_mismatch",
      "shape_mismatch", "gradient_mismatch", "rank_failure", "nonfinite"};
  for (int i = 0; i < 7; i++) {
    tc = testcase(junit, not_run[i]);
    cr_expect(strstr(tc, "<skipped message=\"") != NULL, "%s", tc);
    cr_expect(strstr(tc, "not checked by vqcheck compare") != NULL ||
                  strcmp(not_run[i], "rank_failure") == 0,
              "%s", tc);
    free(tc);
  }
  tc = testcase(junit, "lost_inplace");
  cr_expect(strstr(tc, "traces hold digests only: not checked by vqcheck "
                   "compare") != NULL, "%s", tc);
  free(tc);
  free(junit);
  vqc_spawn_result_free(&c);
  vqc_test_remove_dir(dir);
}

/* A run.json in the common schema, with `subject` as its writer's part. */
static void write_run_json(const char *dir, json_t *subject) {
  json_t *j = json_pack(
      "{s:i, s:{s:s, s:s, s:i, s:i}, s:{s:s}, s:f,"
      " s:{s:s, s:i, s:s, s:i}, s:[], s:[], s:i}",
      "schema_version", 1, "environment", "hostname", "h", "backend",
      "threads", "ranks", 2, "pid", 1, "build", "version", "0.1.0",
      "duration_s", 1.0, "training", "status", "VQC_OK", "failed_rank", -1,
      "message", "", "steps_done", 3, "findings", "steps", "exit_code", 0);
  cr_assert_not_null(j);
  json_object_update(j, subject);
  json_decref(subject);
  char path[512];
  snprintf(path, sizeof path, "%s/run.json", dir);
  cr_assert_eq(json_dump_file(j, path, JSON_INDENT(2)), 0);
  json_decref(j);
}

Test(gate_compare, junit_without_a_checks_list_never_passes_unknown_checks) {
  char dir[64];
  make_dir(dir, sizeof dir);
  /* A writer that does not say what it checked: nothing passes. */
  write_run_json(dir, json_pack("{s:{s:s, s:s}}", "scenario", "name",
                                "foreign", "model", "unknown"));
  vqc_spawn_result c = run_cli("report", dir, "--quiet", NULL);
  cr_expect_eq(c.code, 0, "exit %d, stderr: %s", c.code, c.err);
  char *junit = read_in(dir, "junit.xml");
  cr_expect(strstr(junit, "skipped=\"8\"") != NULL, "%s", junit);
  cr_expect_eq(count_substr(junit, "<skipped message=\""), 8, "%s", junit);
  free(junit);
  vqc_spawn_result_free(&c);

  /* A vqcheck scenario run (the runner attaches every checker): all ran. */
  write_run_json(dir, json_pack("{s:{s:s, s:s, s:s}}", "scenario", "name",
                                "skip_weight_sync-clean", "model", "mlp",
                                "fault", "none"));
  c = run_cli("report", dir, "--quiet", NULL);
  cr_expect_eq(c.code, 0, "exit %d, stderr: %s", c.code, c.err);
  junit = read_in(dir, "junit.xml");
  cr_expect(strstr(junit, "skipped=\"0\"") != NULL, "%s", junit);
  cr_expect_null(strstr(junit, "<skipped"), "%s", junit);
  free(junit);
  vqc_spawn_result_free(&c);

  /* An instrumented program with two checkers: their kinds ran. */
  write_run_json(dir, json_pack("{s:{s:s}, s:{s:s}, s:{s:s}}", "program",
                                "name", "train.py", "scenario", "name",
                                "train.py", "check", "checkers",
                                "divergence,lost_inplace"));
  c = run_cli("report", dir, "--quiet", NULL);
  cr_expect_eq(c.code, 0, "exit %d, stderr: %s", c.code, c.err);
  junit = read_in(dir, "junit.xml");
  cr_expect(strstr(junit, "skipped=\"5\"") != NULL, "%s", junit);
  char *tc = testcase(junit, "nonfinite");
  cr_expect_null(strstr(tc, "<skipped"), "%s", tc);
  free(tc);
  tc = testcase(junit, "deadlock");
  cr_expect(strstr(tc, "<skipped") != NULL, "%s", tc);
  free(tc);
  free(junit);
  vqc_spawn_result_free(&c);
  vqc_test_remove_dir(dir);
}

/* ---- bad names and lines */

Test(gate_compare, a_rank_too_large_is_named_as_written) {
  char dir[64];
  make_dir(dir, sizeof dir);
  const int last[] = {1};
  write_traces(dir, 1, last, same);
  char path[512];
  snprintf(path, sizeof path, "%s/rank-99999999999.trace.jsonl", dir);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fclose(f);
  vqc_spawn_result c = run_cli("compare", dir, NULL);
  cr_expect_eq(c.code, 2, "exit %d, stderr: %s", c.code, c.err);
  cr_expect(strstr(c.err, "rank-99999999999.trace.jsonl: rank 99999999999,")
                != NULL, "%s", c.err);
  cr_expect_null(strstr(c.err, "rank 9999,"), "%s", c.err);
  vqc_spawn_result_free(&c);
  vqc_test_remove_dir(dir);
}

#define TWO_MIB ((size_t)2 << 20)

/* rank-1's first line: a JSON string 2 MiB long, then a newline. */
static void write_long_line(const char *dir) {
  FILE *f = open_trace(dir, 1);
  fputs("{\"schema\":\"vqcheck-trace/1\",\"pad\":\"", f);
  for (size_t i = 0; i < TWO_MIB; i++) fputc('a', f);
  fputs("\"}\n", f);
  fclose(f);
}

Test(gate_compare, a_line_over_the_cap_is_exit_2_naming_file_line_and_cap) {
  char dir[64];
  make_dir(dir, sizeof dir);
  const int last[] = {1, 1};
  write_traces(dir, 2, last, same);
  write_long_line(dir);
  vqc_spawn_result c = run_cli("compare", dir, NULL);
  cr_expect_eq(c.code, 2, "exit %d, stderr: %s", c.code, c.err);
  cr_expect(strstr(c.err, "rank-1.trace.jsonl:1: the line is longer than "
                   "1048576 bytes") != NULL, "%s", c.err);
  vqc_spawn_result_free(&c);

  /* The reports read traces too: the same error. */
  char run_dir[128];
  snprintf(run_dir, sizeof run_dir, "%s/run", dir);
  cr_assert_eq(mkdir(run_dir, 0700), 0);
  write_run_json(run_dir, json_pack("{s:{s:s, s:s}, s:[s]}", "scenario",
                                    "name", "x", "model", "unknown", "checks",
                                    "divergence"));
  write_traces(run_dir, 2, last, same);
  write_long_line(run_dir);
  c = run_cli("report", run_dir, "--quiet", NULL);
  cr_expect_eq(c.code, 2, "exit %d, stderr: %s", c.code, c.err);
  cr_expect(strstr(c.err, "rank-1.trace.jsonl:1: the line is longer than "
                   "1048576 bytes") != NULL, "%s", c.err);
  vqc_spawn_result_free(&c);
  vqc_test_remove_dir(dir);
}

Test(gate_compare, the_line_reader_stops_at_the_cap) {
  char dir[64], path[512];
  make_dir(dir, sizeof dir);
  write_long_line(dir);
  snprintf(path, sizeof path, "%s/rank-1.trace.jsonl", dir);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f);
  char *buf = NULL;
  size_t cap = 0, len = 0;
  cr_expect_eq(vqc_trace_read_line(f, path, 1, &buf, &cap, &len),
               VQC_EPARSE);
  cr_expect(strstr(vqc_last_error(), ":1: the line is longer than 1048576 "
                   "bytes") != NULL, "%s", vqc_last_error());
  /* Bounded: the buffer never grew past the cap, and no more than the cap
   * (and the byte that crossed it) was taken from the file. */
  cr_expect_leq(cap, VQC_TRACE_LINE_MAX + 2);
  cr_expect_leq((size_t)ftell(f), VQC_TRACE_LINE_MAX + 1);
  fclose(f);

  /* Zeros end a line (a torn one, without its newline: jsonl.h); zeros
   * that last to the end of the file end the data. */
  f = tmpfile();
  cr_assert_not_null(f);
  fputs("ab", f);
  fputc('\0', f);
  fputs("c\nlast\n", f);
  for (int i = 0; i < 4096; i++) fputc('\0', f);
  rewind(f);
  cr_assert_eq(vqc_trace_read_line(f, "t", 1, &buf, &cap, &len), VQC_OK);
  cr_expect_eq(len, 2);
  cr_expect_str_eq(buf, "ab");
  cr_assert_eq(vqc_trace_read_line(f, "t", 2, &buf, &cap, &len), VQC_OK);
  cr_expect_eq(len, 2);
  cr_expect_str_eq(buf, "c\n");
  cr_assert_eq(vqc_trace_read_line(f, "t", 3, &buf, &cap, &len), VQC_OK);
  cr_expect_eq(len, 5);
  cr_expect_str_eq(buf, "last\n");
  cr_assert_eq(vqc_trace_read_line(f, "t", 4, &buf, &cap, &len), VQC_OK);
  cr_expect_eq(len, 0);
  fclose(f);
  free(buf);
  vqc_test_remove_dir(dir);
}

/* ---- writing into a directory another program made
 *
 * compare --out TRACE_DIR and analyze write their reports into a directory
 * that holds a foreign job's traces. A report file of that name vqcheck did
 * not write is refused (exit 2, the file untouched); the ones vqcheck
 * wrote there (listed in .vqcheck-written) are replaced by the next run;
 * the directory is never marked as vqcheck's (`vqcheck run --out` would
 * then clear the job's traces). Before the fix both overwrote the user's
 * file and exited 0. */

static void put_in(const char *dir, const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f, "%s", path);
  fputs(text, f);
  fclose(f);
}

static bool has(const char *dir, const char *name) {
  char path[512];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return stat(path, &st) == 0;
}

Test(gate_compare, compare_into_the_trace_dir_keeps_a_users_report) {
  char dir[64];
  make_dir(dir, sizeof dir);
  const int last[2] = {2, 2};
  write_traces(dir, 2, last, same);
  put_in(dir, "report.html", "the user's report");
  vqc_spawn_result r = run_cli("compare", dir, "--out", dir, "--quiet", NULL);
  cr_expect_eq(r.code, 2, "exit %d; stderr: %s", r.code, r.err);
  cr_expect_not_null(strstr(r.err, "refusing to write into"), "%s", r.err);
  cr_expect_not_null(strstr(r.err, "report.html"), "%s", r.err);
  vqc_spawn_result_free(&r);
  char *kept = read_in(dir, "report.html");
  cr_expect_str_eq(kept, "the user's report");
  free(kept);
  cr_expect(!has(dir, "run.json"), "a refused directory was written");

  /* Without the user's file: written, and written again the next time
   * (vqcheck's own reports are replaced), never marked. */
  char path[512];
  snprintf(path, sizeof path, "%s/report.html", dir);
  cr_assert_eq(unlink(path), 0);
  for (int round = 0; round < 2; round++) {
    r = run_cli("compare", dir, "--out", dir, "--quiet", NULL);
    cr_expect_eq(r.code, 0, "round %d: exit %d; stderr: %s", round, r.code,
                 r.err);
    vqc_spawn_result_free(&r);
  }
  cr_expect(has(dir, "report.html") && has(dir, "run.json"));
  cr_expect(!has(dir, ".vqcheck-run"), "a foreign directory was marked");
  cr_expect(has(dir, "rank-0.trace.jsonl") && has(dir, "rank-1.trace.jsonl"),
            "the job's traces are gone");
  vqc_test_remove_dir(dir);
}

Test(gate_compare, analyze_keeps_a_users_report_and_rereads_its_own) {
  char dir[64];
  make_dir(dir, sizeof dir);
  const int last[2] = {2, 2};
  write_traces(dir, 2, last, same);
  put_in(dir, "report.md", "the user's notes");
  vqc_spawn_result r = run_cli("analyze", dir, "--quiet", NULL);
  cr_expect_eq(r.code, 2, "exit %d; stderr: %s", r.code, r.err);
  cr_expect_not_null(strstr(r.err, "report.md"), "%s", r.err);
  vqc_spawn_result_free(&r);
  char *kept = read_in(dir, "report.md");
  cr_expect_str_eq(kept, "the user's notes");
  free(kept);

  char path[512];
  snprintf(path, sizeof path, "%s/report.md", dir);
  cr_assert_eq(unlink(path), 0);
  for (int round = 0; round < 2; round++) {
    r = run_cli("analyze", dir, "--quiet", NULL);
    cr_expect_eq(r.code, 0, "round %d: exit %d; stderr: %s", round, r.code,
                 r.err);
    vqc_spawn_result_free(&r);
  }
  cr_expect(!has(dir, ".vqcheck-run"), "a foreign directory was marked");
  vqc_test_remove_dir(dir);
}

/* analyze rewrites run.json and the reports: not while another process
 * holds the directory's lock (a run still writing it). The lock is taken
 * here as any holder takes it: flock on .vqcheck.lock, holder line inside. */
Test(gate_compare, analyze_refuses_a_directory_in_use) {
  char dir[64], path[512];
  make_dir(dir, sizeof dir);
  const int last[2] = {1, 1};
  write_traces(dir, 2, last, same);
  snprintf(path, sizeof path, "%s/.vqcheck.lock", dir);
  const int fd = open(path, O_RDWR | O_CREAT, 0644);
  cr_assert_geq(fd, 0);
  cr_assert_eq(flock(fd, LOCK_EX | LOCK_NB), 0);
  const char holder[] = "pid 4242 (vqcheck run, started now, host here)\n";
  cr_assert_eq(write(fd, holder, sizeof holder - 1),
               (ssize_t)(sizeof holder - 1));
  vqc_spawn_result r = run_cli("analyze", dir, "--quiet", NULL);
  cr_expect_eq(r.code, 2, "exit %d; stderr: %s", r.code, r.err);
  cr_expect_not_null(strstr(r.err, "in use by pid 4242"), "%s", r.err);
  vqc_spawn_result_free(&r);
  cr_expect(!has(dir, "run.json"), "written while another held the lock");
  close(fd);
  vqc_test_remove_dir(dir);
}
