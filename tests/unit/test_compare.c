/* test_compare.c: `vqcheck compare` and `vqcheck analyze` on traces written
 * by hand, and the trace comparison they share (checkers/trace_compare.h).
 *
 * Traces are written line by line with fprintf (not through trace.h's
 * writer), as another program would. The baseline: every rank writes the
 * same digest for (step, tensor); a "deviation" gives one rank its own digest
 * (or shape) for one tensor from some step on, so the expected findings are
 * exact: the first step, the tensor, the outlier ranks.
 *
 * The CLI cases run the built vqcheck (VQC_CLI_PATH) as a child process, so
 * exit codes, stderr messages and the registration in vqcheck.c are all
 * checked; the library cases look at findings and counts directly. The last
 * group runs real scenarios on the threads backend and checks that compare,
 * given the run's traces, reports exactly the run's divergence findings. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runner.h"
#include "scenario.h"
#include "spawn_capture.h"
#include "test_paths.h"
#include "trace_compare.h"

#ifndef VQC_CLI_PATH
#error "VQC_CLI_PATH must name the built vqcheck (tests/CMakeLists.txt)"
#endif

static const char *const tensors[] = {"w", "b", "c"};
#define NTENSORS 3

/* One rank's own state for one tensor from `from` on. */
typedef struct deviation {
  int rank;
  int64_t from;
  const char *tensor;
  int64_t cols; /* > 0: a different shape [4, cols] instead of a digest */
} deviation;

typedef struct trace_spec {
  int ranks;
  int steps;
  const deviation *dev;
  int ndev;
  int last_step[8]; /* >= 0: rank r stops after this step (0 = all steps) */
  const char *program; /* non-NULL: every line names it ("program") */
} trace_spec;

static uint64_t base_digest(int64_t step, int t) {
  return 0x1000u * (uint64_t)(step + 1) + (uint64_t)t;
}

static void make_tmpdir(char *buf, size_t n) {
  snprintf(buf, n, "/tmp/vqc-compare-XXXXXX");
  cr_assert_not_null(mkdtemp(buf));
}

static void path_in(char *buf, size_t n, const char *dir, const char *name) {
  snprintf(buf, n, "%s/%s", dir, name);
}

/* Writes rank-<r>.trace.jsonl for every rank of spec into dir. */
static void write_traces(const char *dir, const trace_spec *sp) {
  for (int r = 0; r < sp->ranks; r++) {
    char path[512];
    snprintf(path, sizeof path, "%s/rank-%d.trace.jsonl", dir, r);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    int64_t last = sp->last_step[r] > 0 ? sp->last_step[r] : sp->steps - 1;
    for (int64_t s = 0; s <= last; s++) {
      for (int t = 0; t < NTENSORS; t++) {
        uint64_t digest = base_digest(s, t);
        int64_t cols = 8;
        for (int k = 0; k < sp->ndev; k++) {
          const deviation *d = &sp->dev[k];
          if (d->rank != r || s < d->from || strcmp(d->tensor, tensors[t]))
            continue;
          if (d->cols > 0) cols = d->cols;
          else digest ^= 0xdead0000u + (uint64_t)r;
        }
        fprintf(f, "{\"schema\":\"vqcheck-trace/1\",\"rank\":%d,\"step\":%"
                PRId64 ",\"tensor\":\"%s\",\"dtype\":\"float32\",\"shape\":"
                "[4,%" PRId64 "],\"digest_algo\":\"vqc-xxh3-tree-1\","
                "\"digest\":\"%016" PRIx64 "\"", r, s, tensors[t], cols,
                digest);
        if (sp->program) fprintf(f, ",\"program\":\"%s\"", sp->program);
        fprintf(f, "}\n");
      }
    }
    fclose(f);
  }
}

/* Replaces line `lineno` (1-based) of dir/rank-<r>.trace.jsonl with text
 * (no newline added: text carries its own, or none for a cut-off end).
 * lineno past the end appends. */
static void set_line(const char *dir, int rank, int lineno, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/rank-%d.trace.jsonl", dir, rank);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f);
  char *lines[256];
  int n = 0;
  char buf[1024];
  while (n < 256 && fgets(buf, sizeof buf, f)) lines[n++] = strdup(buf);
  fclose(f);
  f = fopen(path, "w");
  cr_assert_not_null(f);
  for (int i = 0; i < n; i++) {
    fputs(i + 1 == lineno ? text : lines[i], f);
    free(lines[i]);
  }
  if (lineno > n) fputs(text, f);
  fclose(f);
}

/* ---- running the binary (tests/common/spawn_capture.h) */

typedef vqc_spawn_result cli_out;

/* Runs `vqcheck args...` (a NULL-terminated list) as a child process;
 * returns the exit code and the captured stdout and stderr (malloc'd,
 * NUL-terminated). */
static cli_out run_cli(const char *first, ...) {
  cli_out r;
  va_list ap;
  va_start(ap, first);
  int rc = vqc_spawn_vcapture(&r, VQC_CLI_PATH, NULL, NULL, first, ap);
  va_end(ap);
  cr_assert_eq(rc, 0, "cannot run %s: %s", VQC_CLI_PATH, strerror(rc));
  return r;
}

static bool exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static void rm_rf(const char *dir) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

/* Compares the traces of dir with the library; findings into *f. */
static vqc_status compare_lib(const char *dir, vqc_findings *f,
                              vqc_trace_compare_result *res) {
  /* `vqcheck compare`'s options. */
  vqc_trace_set_options o = {.allow_missing_ranks = false,
                             .expected_ranks = 0,
                             .allow_empty = false,
                             .require_comparison = true};
  vqc_trace_set *s = NULL;
  memset(res, 0, sizeof *res);
  vqc_status st = vqc_trace_set_open(dir, &o, &s);
  if (st == VQC_OK) st = vqc_trace_set_compare(s, NULL, f, res);
  vqc_trace_set_close(s);
  return st;
}

/* ---- the comparison itself */

Test(compare, clean_traces_have_no_findings) {
  char dir[64];
  make_tmpdir(dir, sizeof dir);
  trace_spec sp = {.ranks = 4, .steps = 5};
  write_traces(dir, &sp);
  vqc_findings f;
  vqc_findings_init(&f);
  vqc_trace_compare_result res;
  cr_assert_eq(compare_lib(dir, &f, &res), VQC_OK, "%s", vqc_last_error());
  cr_expect_eq(f.count, 0);
  cr_expect_eq(res.nsteps, 5);
  cr_expect_eq(res.digests_compared, 5 * NTENSORS);
  cr_expect_eq(res.lines_read, 4 * 5 * NTENSORS);
  cr_expect_eq(res.lines_not_compared, 0);
  cr_expect_eq(json_array_size(res.warnings), 0);
  vqc_trace_compare_result_free(&res);
  vqc_findings_free(&f);
  rm_rf(dir);
}

Test(compare, divergence_at_step_3_on_rank_2) {
  char dir[64];
  make_tmpdir(dir, sizeof dir);
  /* b and w start to differ on rank 2 at step 3 (b first in file order is
   * not what counts: w is listed first); c on rank 1 at step 4. */
  const deviation dev[] = {{2, 3, "w", 0}, {2, 3, "b", 0}, {1, 4, "c", 0}};
  trace_spec sp = {.ranks = 4, .steps = 6, .dev = dev, .ndev = 3};
  write_traces(dir, &sp);
  vqc_findings f;
  vqc_findings_init(&f);
  vqc_trace_compare_result res;
  cr_assert_eq(compare_lib(dir, &f, &res), VQC_OK, "%s", vqc_last_error());
  cr_assert_eq(f.count, 2, "w at step 3 and c at step 4, each once");
  const vqc_finding *x = &f.items[0];
  cr_expect_eq(x->kind, VQC_FINDING_DIVERGENCE);
  cr_expect_eq(x->step, 3);
  cr_expect_str_eq(x->tensor, "w");
  cr_expect_eq(x->nranks, 1);
  cr_expect_eq(x->ranks[0], 2);
  cr_expect(strstr(x->message, "no element-level detail") != NULL, "%s",
            x->message);
  cr_expect_eq(json_integer_value(json_object_get(x->detail,
                                                  "reference_rank")), 0);
  json_t *also = json_object_get(x->detail, "also_differing");
  cr_expect_eq(json_array_size(also), 1);
  cr_expect_str_eq(json_string_value(json_array_get(also, 0)), "b");
  json_t *groups = json_object_get(x->detail, "groups");
  cr_expect_eq(json_array_size(groups), 2);
  cr_expect_eq(json_array_size(json_object_get(json_array_get(groups, 0),
                                               "ranks")), 3);
  cr_expect_not_null(json_object_get(x->detail, "element_detail"));
  /* The outlier's line: rank 2, step 3, w is line 3 * 3 + 1 = 10. */
  json_t *lines = json_object_get(x->detail, "trace_lines");
  const char *at = json_string_value(
      json_object_get(json_array_get(lines, 1), "at"));
  cr_expect(at && strstr(at, "rank-2.trace.jsonl:10"), "%s", at);

  const vqc_finding *y = &f.items[1];
  cr_expect_eq(y->step, 4);
  cr_expect_str_eq(y->tensor, "c");
  cr_expect_eq(y->nranks, 1);
  cr_expect_eq(y->ranks[0], 1);
  /* Per step: 3 compared; differing counts w and b from step 3 on. */
  cr_expect_eq(res.nsteps, 6);
  cr_expect_eq(res.steps[2].differing, 0);
  cr_expect_eq(res.steps[3].differing, 2);
  cr_expect_eq(res.steps[4].differing, 3);
  cr_expect_eq(res.steps[5].findings, 2);
  vqc_trace_compare_result_free(&res);
  vqc_findings_free(&f);
  rm_rf(dir);
}

Test(compare, majority_decides_and_a_tie_blames_no_rank) {
  char dir[64];
  make_tmpdir(dir, sizeof dir);
  /* Ranks 0 and 1 drift together: 2 against 2, so there is no majority:
   * every rank is named, none is the reference. */
  const deviation dev[] = {{0, 1, "b", 0}, {1, 1, "b", 0}};
  trace_spec sp = {.ranks = 4, .steps = 3, .dev = dev, .ndev = 2};
  write_traces(dir, &sp);
  /* Rank 0 and 1's deviations differ from each other (xor with the rank):
   * make them equal so the split is 2-2, by rewriting rank 1's lines. */
  for (int64_t s = 1; s < 3; s++) {
    char line[512];
    snprintf(line, sizeof line,
             "{\"schema\":\"vqcheck-trace/1\",\"rank\":1,\"step\":%" PRId64
             ",\"tensor\":\"b\",\"dtype\":\"float32\",\"shape\":[4,8],"
             "\"digest_algo\":\"vqc-xxh3-tree-1\",\"digest\":\"%016" PRIx64
             "\"}\n", s, base_digest(s, 1) ^ 0xdead0000u);
    set_line(dir, 1, (int)(s * NTENSORS + 2), line);
  }
  vqc_findings f;
  vqc_findings_init(&f);
  vqc_trace_compare_result res;
  cr_assert_eq(compare_lib(dir, &f, &res), VQC_OK, "%s", vqc_last_error());
  cr_assert_eq(f.count, 1);
  cr_expect_eq(f.items[0].step, 1);
  cr_expect_str_eq(f.items[0].tensor, "b");
  cr_assert_eq(f.items[0].nranks, 4);
  for (int r = 0; r < 4; r++) cr_expect_eq(f.items[0].ranks[r], r);
  cr_expect(strstr(f.items[0].message, "no majority: ranks {0, 1} and "
                   "{2, 3} differ") != NULL, "%s", f.items[0].message);
  cr_expect(json_is_false(json_object_get(f.items[0].detail, "majority")));
  cr_expect_null(json_object_get(f.items[0].detail, "reference_rank"));
  cr_expect_eq(json_array_size(json_object_get(f.items[0].detail, "groups")),
               2);
  vqc_trace_compare_result_free(&res);
  vqc_findings_free(&f);

  /* 3 against 1: rank 0 alone is the outlier. */
  const deviation dev2[] = {{0, 2, "c", 0}};
  trace_spec sp2 = {.ranks = 4, .steps = 3, .dev = dev2, .ndev = 1};
  write_traces(dir, &sp2);
  vqc_findings_init(&f);
  cr_assert_eq(compare_lib(dir, &f, &res), VQC_OK, "%s", vqc_last_error());
  cr_assert_eq(f.count, 1);
  cr_expect_eq(f.items[0].nranks, 1);
  cr_expect_eq(f.items[0].ranks[0], 0);
  cr_expect_eq(json_integer_value(json_object_get(f.items[0].detail,
                                                  "reference_rank")), 1);
  cr_expect(json_is_true(json_object_get(f.items[0].detail, "majority")));
  vqc_trace_compare_result_free(&res);
  vqc_findings_free(&f);
  rm_rf(dir);
}

Test(compare, a_shape_difference_is_a_divergence_with_layouts) {
  char dir[64];
  make_tmpdir(dir, sizeof dir);
  const deviation dev[] = {{1, 0, "c", 9}};
  trace_spec sp = {.ranks = 3, .steps = 2, .dev = dev, .ndev = 1};
  write_traces(dir, &sp);
  vqc_findings f;
  vqc_findings_init(&f);
  vqc_trace_compare_result res;
  cr_assert_eq(compare_lib(dir, &f, &res), VQC_OK, "%s", vqc_last_error());
  cr_assert_eq(f.count, 1);
  cr_expect_eq(f.items[0].step, 0);
  cr_expect_eq(f.items[0].ranks[0], 1);
  cr_expect(strstr(f.items[0].message, "rank 1 has float32 [4, 9], rank 0 "
                   "has float32 [4, 8]") != NULL, "%s", f.items[0].message);
  cr_expect_eq(json_array_size(json_object_get(f.items[0].detail,
                                               "layouts")), 3);
  vqc_trace_compare_result_free(&res);
  vqc_findings_free(&f);
  rm_rf(dir);
}

Test(compare, a_killed_job_is_compared_up_to_where_every_rank_got) {
  char dir[64];
  make_tmpdir(dir, sizeof dir);
  /* Rank 2 stopped after step 2, the others wrote steps 0..4; rank 2's
   * deviation at step 3 is never written, rank 0's at step 4 is not
   * comparable. */
  const deviation dev[] = {{0, 4, "w", 0}};
  trace_spec sp = {.ranks = 3, .steps = 5, .dev = dev, .ndev = 1,
                   .last_step = {0, 0, 2}};
  write_traces(dir, &sp);
  /* ... and its last line was cut in the middle of step 3. */
  set_line(dir, 2, 10, "{\"schema\":\"vqcheck-trace/1\",\"rank\":2,\"st");
  vqc_findings f;
  vqc_findings_init(&f);
  vqc_trace_compare_result res;
  cr_assert_eq(compare_lib(dir, &f, &res), VQC_OK, "%s", vqc_last_error());
  /* Never a false green: rank 2's trace stopping early is a finding. */
  cr_assert_eq(f.count, 1);
  cr_expect_eq(f.items[0].kind, VQC_FINDING_RANK_FAILURE);
  cr_expect_eq(f.items[0].step, 3);
  cr_assert_eq(f.items[0].nranks, 1);
  cr_expect_eq(f.items[0].ranks[0], 2);
  cr_expect_eq(res.rank_failures, 1);
  cr_expect_eq(res.findings, 0);
  cr_expect_eq(res.digests_compared, 3 * NTENSORS);
  cr_expect_eq(res.lines_not_compared, 2 * 2 * NTENSORS);
  /* cut-off line, and one line per rank 0 and 1 */
  cr_expect_eq(json_array_size(res.warnings), 3);
  bool cut = false;
  for (size_t i = 0; i < json_array_size(res.warnings); i++) {
    const char *w = json_string_value(json_array_get(res.warnings, i));
    if (strstr(w, "rank-2.trace.jsonl:10: the last line is cut off")) cut = true;
  }
  cr_expect(cut, "a warning names the cut-off line");
  vqc_trace_compare_result_free(&res);
  vqc_findings_free(&f);
  rm_rf(dir);
}

/* ---- bad input through the library: the error names file:line */

static void expect_parse_error(const char *dir, vqc_status want,
                               const char *needle) {
  vqc_findings f;
  vqc_findings_init(&f);
  vqc_trace_compare_result res;
  vqc_status s = compare_lib(dir, &f, &res);
  cr_expect_eq(s, want, "status %s: %s", vqc_status_name(s), vqc_last_error());
  cr_expect(strstr(vqc_last_error(), needle) != NULL,
            "'%s' not in: %s", needle, vqc_last_error());
  vqc_trace_compare_result_free(&res);
  vqc_findings_free(&f);
}

Test(compare, bad_lines_are_errors_naming_file_and_line) {
  char dir[64];
  make_tmpdir(dir, sizeof dir);
  trace_spec sp = {.ranks = 2, .steps = 4};
  const char *ok =
      "{\"schema\":\"vqcheck-trace/1\",\"rank\":1,\"step\":1,\"tensor\":\"w\","
      "\"dtype\":\"float32\",\"shape\":[4,8],\"digest_algo\":\"x\","
      "\"digest\":\"0000000000002000\"}\n";

  write_traces(dir, &sp);
  set_line(dir, 1, 5, "garbage {\n");
  expect_parse_error(dir, VQC_EPARSE, "rank-1.trace.jsonl:5: not JSON");

  write_traces(dir, &sp);
  set_line(dir, 0, 2, "{\"schema\":\"vqcheck-trace/2\",\"rank\":0}\n");
  expect_parse_error(dir, VQC_EPARSE, "rank-0.trace.jsonl:2: field 'schema' "
                     "is 'vqcheck-trace/2'");

  /* Complete JSON at the end without a newline is not "cut off". */
  write_traces(dir, &sp);
  set_line(dir, 1, 13, "{\"schema\":\"vqcheck-trace/9\"}");
  expect_parse_error(dir, VQC_EPARSE, "rank-1.trace.jsonl:13: field 'schema'");

  /* A line in rank 1's file that says rank 0. */
  write_traces(dir, &sp);
  set_line(dir, 1, 3, "{\"schema\":\"vqcheck-trace/1\",\"rank\":0,\"step\":0,"
           "\"tensor\":\"c\",\"dtype\":\"float32\",\"shape\":[4,8],"
           "\"digest_algo\":\"vqc-xxh3-tree-1\",\"digest\":"
           "\"0000000000001002\"}\n");
  expect_parse_error(dir, VQC_EPARSE, "rank-1.trace.jsonl:3: field 'rank' is "
                     "0 in the trace of rank 1");

  /* Step 1's w again after step 3's lines: steps go backwards. */
  write_traces(dir, &sp);
  set_line(dir, 1, 13, ok);
  expect_parse_error(dir, VQC_EPARSE, "rank-1.trace.jsonl:13: step 1 after "
                     "step 3");

  /* The same tensor twice in step 1. */
  write_traces(dir, &sp);
  set_line(dir, 1, 5, ok);
  expect_parse_error(dir, VQC_EPARSE, "rank-1.trace.jsonl:5: tensor 'w' "
                     "appears twice in step 1 (first at line 4)");

  /* Another digest algorithm on one rank. */
  write_traces(dir, &sp);
  set_line(dir, 1, 4, ok);
  expect_parse_error(dir, VQC_EPARSE, "rank-1.trace.jsonl:4: tensor 'w' of "
                     "step 1 has digest_algo 'x'");

  /* A NUL byte inside the file (not at a cut-off end): it ends its line
   * (jsonl.h), and what follows it is no trace line: an error, never a
   * line skipped in silence. */
  write_traces(dir, &sp);
  char path[512];
  snprintf(path, sizeof path, "%s/rank-0.trace.jsonl", dir);
  FILE *fp = fopen(path, "r+");
  cr_assert_not_null(fp);
  fseek(fp, 5, SEEK_SET);
  fputc('\0', fp);
  fclose(fp);
  expect_parse_error(dir, VQC_EPARSE, "rank-0.trace.jsonl:2: not JSON");
  rm_rf(dir);
}

/* A not_digested line (trace.h) of tensor "q" at step `step` of `rank`,
 * with its "unchecked" member as given ("" leaves it out). */
static void not_digested_line(char *buf, size_t n, int rank, int step,
                              const char *unchecked) {
  snprintf(buf, n, "{\"schema\":\"vqcheck-trace/1\",\"rank\":%d,\"step\":%d,"
           "\"tensor\":\"q\",\"not_digested\":\"its element type "
           "torch.bits8 has no digest code\"%s%s}\n", rank, step,
           unchecked[0] ? ",\"unchecked\":" : "", unchecked);
}

/* A tensor the writer left out is named, never compared, and makes the
 * comparison no clean verdict when its contents went unchecked: it was
 * read past as a clean trace before (a tensor the writer could not digest
 * said so only on the job's stderr). */
Test(compare, not_digested_lines_are_listed_never_compared) {
  char dir[64], line[512];
  make_tmpdir(dir, sizeof dir);
  trace_spec sp = {.ranks = 2, .steps = 3};
  for (int pass = 0; pass < 2; pass++) {
    write_traces(dir, &sp);
    /* after step 2's lines (the 9th is the last), then between step 0's
     * and step 1's: line 4, step 1's w, follows it */
    for (int r = 0; r < 2; r++) {
      not_digested_line(line, sizeof line, r, 2, pass ? "false" : "true");
      set_line(dir, r, 10, line);
      char two[1024];
      not_digested_line(line, sizeof line, r, 0, pass ? "false" : "");
      snprintf(two, sizeof two, "%s{\"schema\":\"vqcheck-trace/1\","
               "\"rank\":%d,\"step\":1,\"tensor\":\"w\",\"dtype\":"
               "\"float32\",\"shape\":[4,8],\"digest_algo\":"
               "\"vqc-xxh3-tree-1\",\"digest\":\"0000000000002000\"}\n",
               line, r);
      set_line(dir, r, 4, two);
    }
    vqc_findings f;
    vqc_findings_init(&f);
    vqc_trace_compare_result res;
    cr_assert_eq(compare_lib(dir, &f, &res), VQC_OK, "%s", vqc_last_error());
    cr_expect_eq(f.count, 0);
    cr_expect_eq(res.digests_compared, 9, "every digest line compared");
    cr_expect_eq(res.lines_read, 22); /* 9 + 2 per rank */
    /* one entry per rank and tensor, however many steps name it */
    cr_expect_eq(json_array_size(res.not_digested.list), 2);
    cr_expect_eq(res.not_digested.count, 2);
    cr_expect_eq(res.not_digested.unchecked, pass ? 0 : 2);
    const json_t *e = json_array_get(res.not_digested.list, 1);
    cr_expect_eq(json_integer_value(json_object_get(e, "rank")), 1);
    cr_expect_str_eq(json_string_value(json_object_get(e, "tensor")), "q");
    cr_expect_eq(json_integer_value(json_object_get(e, "step")), 0);
    char why[400];
    cr_expect_eq(vqc_not_digested_unchecked(&res.not_digested, why,
                                            sizeof why), pass ? 0 : 2);
    if (!pass)
      cr_expect_str_eq(why, "tensor 'q' was not digested on ranks 0, 1 (its "
                       "element type torch.bits8 has no digest code)");
    vqc_findings_free(&f);
    vqc_trace_compare_result_free(&res);
  }

  /* What such a line may not be. */
  write_traces(dir, &sp);
  set_line(dir, 1, 10, "{\"schema\":\"vqcheck-trace/1\",\"rank\":1,\"step\":2,"
           "\"tensor\":\"q\",\"not_digested\":\"x\",\"digest\":"
           "\"0000000000002000\"}\n");
  expect_parse_error(dir, VQC_EPARSE, "rank-1.trace.jsonl:10: field 'digest': "
                     "a not_digested line");
  write_traces(dir, &sp);
  set_line(dir, 1, 10, "{\"schema\":\"vqcheck-trace/1\",\"rank\":1,\"step\":2,"
           "\"tensor\":\"q\",\"not_digested\":\"x\",\"unchecked\":1}\n");
  expect_parse_error(dir, VQC_EPARSE, "rank-1.trace.jsonl:10: field "
                     "'unchecked' must be true or false");
  write_traces(dir, &sp);
  set_line(dir, 1, 10, "{\"schema\":\"vqcheck-trace/1\",\"rank\":1,\"step\":2,"
           "\"tensor\":\"q\",\"not_digested\":\"\"}\n");
  expect_parse_error(dir, VQC_EPARSE, "rank-1.trace.jsonl:10: field "
                     "'not_digested' must be a non-empty string");
  /* Its step keeps the order: step 2's, then step 0's w. */
  write_traces(dir, &sp);
  not_digested_line(line, sizeof line, 1, 2, "");
  set_line(dir, 1, 3, line);
  expect_parse_error(dir, VQC_EPARSE, "rank-1.trace.jsonl:4: step 1 after "
                     "step 2");
  rm_rf(dir);
}

Test(compare_cli, unchecked_contents_are_no_verdict_exit_3) {
  char dir[64], out[128], path[256], line[512];
  make_tmpdir(dir, sizeof dir);
  trace_spec sp = {.ranks = 2, .steps = 3};
  write_traces(dir, &sp);
  for (int r = 0; r < 2; r++) {
    not_digested_line(line, sizeof line, r, 2, "");
    set_line(dir, r, 10, line);
  }
  snprintf(out, sizeof out, "%s/out", dir);
  cli_out c = run_cli("compare", dir, "--out", out, NULL);
  cr_expect_eq(c.code, 3, "stdout: %s stderr: %s", c.out, c.err);
  cr_expect(strstr(c.out, "no verdict (exit 3): not everything was checked: "
                   "tensor 'q' was not digested on ranks 0, 1") != NULL,
            "%s", c.out);
  path_in(path, sizeof path, out, "run.json");
  json_error_t err;
  json_t *j = json_load_file(path, 0, &err);
  cr_assert_not_null(j, "%s", err.text);
  cr_expect_eq(json_integer_value(json_object_get(j, "exit_code")), 3);
  const json_t *cmp = json_object_get(j, "compare");
  cr_expect_eq(json_integer_value(json_object_get(cmp, "not_digested_count")),
               2);
  cr_expect_str_eq(json_string_value(json_object_get(
                       json_object_get(j, "training"), "status")),
                   "VQC_EUNSUPPORTED");
  json_decref(j);
  /* The reports say so, never "clean"; the copies keep the lines. */
  path_in(path, sizeof path, out, "report.md");
  FILE *fp = fopen(path, "r");
  cr_assert_not_null(fp);
  char md[65536];
  md[fread(md, 1, sizeof md - 1, fp)] = '\0';
  fclose(fp);
  cr_expect(strstr(md, "**Verdict: ERROR**: no verdict: not everything was "
                   "checked") != NULL, "%s", md);
  cr_expect(strstr(md, "not digested: q on ranks 0, 1") != NULL, "%s", md);
  vqc_spawn_result_free(&c);
  /* Its copied traces give the same verdict. */
  char again[160];
  snprintf(again, sizeof again, "%s/again", dir);
  c = run_cli("compare", out, "--out", again, NULL);
  cr_expect_eq(c.code, 3, "stdout: %s stderr: %s", c.out, c.err);
  vqc_spawn_result_free(&c);
  /* A finding still makes it exit 1. */
  const deviation dev[] = {{1, 1, "w", 0}};
  trace_spec bad = {.ranks = 2, .steps = 3, .dev = dev, .ndev = 1};
  write_traces(dir, &bad);
  not_digested_line(line, sizeof line, 0, 2, "");
  set_line(dir, 0, 10, line);
  rm_rf(out);
  c = run_cli("compare", dir, "--out", out, NULL);
  cr_expect_eq(c.code, 1, "stdout: %s stderr: %s", c.out, c.err);
  vqc_spawn_result_free(&c);
  rm_rf(dir);
}

Test(compare, missing_and_extra_ranks) {
  char dir[64], path[512];
  make_tmpdir(dir, sizeof dir);
  trace_spec sp = {.ranks = 5, .steps = 2};
  write_traces(dir, &sp);
  snprintf(path, sizeof path, "%s/rank-1.trace.jsonl", dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/rank-3.trace.jsonl", dir);
  unlink(path);
  expect_parse_error(dir, VQC_EINVAL, "no trace for ranks 1, 3: ranks 0..4");

  /* analyze's options: compared without them, and named in a rank_failure
   * finding (not just a warning). */
  vqc_trace_set_options o = {.allow_missing_ranks = true};
  vqc_trace_set *s = NULL;
  cr_assert_eq(vqc_trace_set_open(dir, &o, &s), VQC_OK, "%s",
               vqc_last_error());
  cr_expect_eq(vqc_trace_set_ranks(s), 5);
  cr_expect_eq(vqc_trace_set_files(s), 3);
  vqc_findings f;
  vqc_findings_init(&f);
  vqc_trace_compare_result res;
  cr_assert_eq(vqc_trace_set_compare(s, NULL, &f, &res), VQC_OK);
  cr_expect_eq(res.digests_compared, 2 * NTENSORS);
  cr_expect_eq(json_array_size(res.warnings), 0);
  cr_assert_eq(f.count, 1);
  cr_expect_eq(f.items[0].kind, VQC_FINDING_RANK_FAILURE);
  cr_assert_eq(f.items[0].nranks, 2);
  cr_expect_eq(f.items[0].ranks[0], 1);
  cr_expect_eq(f.items[0].ranks[1], 3);
  cr_expect(strstr(f.items[0].message, "rank 1 with no trace file, rank 3 "
                   "with no trace file (the other ranks reach step 1)"),
            "%s", f.items[0].message);
  vqc_trace_compare_result_free(&res);
  vqc_findings_free(&f);
  vqc_trace_set_close(s);

  /* A rank beyond what the run had. */
  vqc_trace_set_options o3 = {.allow_missing_ranks = true,
                              .expected_ranks = 3};
  cr_expect_eq(vqc_trace_set_open(dir, &o3, &s), VQC_EINVAL);
  cr_expect(strstr(vqc_last_error(), "rank-4.trace.jsonl: rank 4, but the "
                   "run had 3 ranks") != NULL, "%s", vqc_last_error());

  /* An empty directory. */
  rm_rf(dir);
  make_tmpdir(dir, sizeof dir);
  expect_parse_error(dir, VQC_EINVAL, "no trace files in");
  rm_rf(dir);
}

/* ---- the CLI */

Test(compare_cli, clean_run_directory_and_exit_0) {
  char dir[64], out[128], path[256];
  make_tmpdir(dir, sizeof dir);
  trace_spec sp = {.ranks = 3, .steps = 4};
  write_traces(dir, &sp);
  snprintf(out, sizeof out, "%s/out", dir);
  cli_out c = run_cli("compare", dir, "--out", out, NULL);
  cr_expect_eq(c.code, 0, "stderr: %s", c.err);
  cr_expect(strstr(c.out, "findings: 0") != NULL, "%s", c.out);
  /* run.json in the runner's schema, read back by the runner's reader. */
  vqc_findings f;
  vqc_findings_init(&f);
  int code = -1;
  path_in(path, sizeof path, out, "run.json");
  cr_expect_eq(vqc_run_read_json(path, &f, &code), VQC_OK, "%s",
               vqc_last_error());
  cr_expect_eq(f.count, 0);
  cr_expect_eq(code, 0);
  vqc_findings_free(&f);
  for (int r = 0; r < 3; r++) {
    snprintf(path, sizeof path, "%s/rank-%d.trace.jsonl", out, r);
    cr_expect(exists(path), "%s copied", path);
  }
  vqc_spawn_result_free(&c);
  rm_rf(dir);
}

Test(compare_cli, findings_exit_1_and_json_output) {
  char dir[64], out[128], path[256];
  make_tmpdir(dir, sizeof dir);
  const deviation dev[] = {{2, 3, "w", 0}};
  trace_spec sp = {.ranks = 4, .steps = 5, .dev = dev, .ndev = 1};
  write_traces(dir, &sp);
  snprintf(out, sizeof out, "%s/out", dir);
  cli_out c = run_cli("compare", dir, "--out", out, "--json", NULL);
  cr_expect_eq(c.code, 1, "stderr: %s", c.err);
  json_error_t err;
  json_t *j = json_loads(c.out, 0, &err);
  cr_assert_not_null(j, "--json output is JSON: %s", err.text);
  json_t *fs = json_object_get(j, "findings");
  cr_assert_eq(json_array_size(fs), 1);
  json_t *x = json_array_get(fs, 0);
  cr_expect_str_eq(json_string_value(json_object_get(x, "kind")),
                   "divergence");
  cr_expect_eq(json_integer_value(json_object_get(x, "step")), 3);
  cr_expect_str_eq(json_string_value(json_object_get(x, "tensor")), "w");
  cr_expect_eq(json_integer_value(json_array_get(json_object_get(x, "ranks"),
                                                 0)), 2);
  cr_expect_eq(json_integer_value(json_object_get(j, "exit_code")), 1);
  cr_expect_str_eq(json_string_value(json_object_get(
                       json_object_get(j, "environment"), "backend")),
                   "traces");
  json_decref(j);
  /* The file on disk says the same. */
  vqc_findings f;
  vqc_findings_init(&f);
  int code = -1;
  path_in(path, sizeof path, out, "run.json");
  cr_expect_eq(vqc_run_read_json(path, &f, &code), VQC_OK);
  cr_expect_eq(f.count, 1);
  cr_expect_eq(code, 1);
  vqc_findings_free(&f);
  vqc_spawn_result_free(&c);
  rm_rf(dir);
}

Test(compare_cli, bad_input_exits_2_and_creates_nothing) {
  char dir[64], out[128], path[256];
  make_tmpdir(dir, sizeof dir);
  trace_spec sp = {.ranks = 3, .steps = 3};
  snprintf(out, sizeof out, "%s/out", dir);

  write_traces(dir, &sp);
  path_in(path, sizeof path, dir, "rank-1.trace.jsonl");
  unlink(path);
  cli_out c = run_cli("compare", dir, "--out", out, NULL);
  cr_expect_eq(c.code, 2);
  cr_expect(strstr(c.err, "no trace for rank 1") != NULL, "%s", c.err);
  cr_expect(!exists(out), "no run directory for bad input");
  vqc_spawn_result_free(&c);

  write_traces(dir, &sp);
  set_line(dir, 2, 4, "{\"schema\": \n");
  c = run_cli("compare", dir, "--out", out, NULL);
  cr_expect_eq(c.code, 2);
  cr_expect(strstr(c.err, "rank-2.trace.jsonl:4:") != NULL, "%s", c.err);
  cr_expect(!exists(out), "an error half-way leaves no run directory");
  vqc_spawn_result_free(&c);

  write_traces(dir, &sp);
  set_line(dir, 0, 1, "{\"schema\":\"vqcheck-trace/2\",\"rank\":0,\"step\":0,"
           "\"tensor\":\"w\",\"dtype\":\"float32\",\"shape\":[4,8],"
           "\"digest_algo\":\"vqc-xxh3-tree-1\",\"digest\":"
           "\"0000000000001000\"}\n");
  c = run_cli("compare", dir, "--out", out, NULL);
  cr_expect_eq(c.code, 2);
  cr_expect(strstr(c.err, "rank-0.trace.jsonl:1: field 'schema' is "
                   "'vqcheck-trace/2'") != NULL, "%s", c.err);
  vqc_spawn_result_free(&c);

  c = run_cli("compare", dir, "--frobnicate", NULL);
  cr_expect_eq(c.code, 2);
  cr_expect(strstr(c.err, "unknown option '--frobnicate'") != NULL, "%s",
            c.err);
  vqc_spawn_result_free(&c);
  c = run_cli("compare", NULL);
  cr_expect_eq(c.code, 2);
  cr_expect(strstr(c.err, "no trace directory given") != NULL, "%s", c.err);
  vqc_spawn_result_free(&c);
  snprintf(path, sizeof path, "%s/nowhere", dir);
  c = run_cli("compare", path, NULL);
  cr_expect_eq(c.code, 2);
  vqc_spawn_result_free(&c);
  c = run_cli("compare", "--help", NULL);
  cr_expect_eq(c.code, 0);
  cr_expect(strstr(c.out, "usage: vqcheck compare TRACE_DIR") != NULL);
  cr_expect_str_eq(c.err, "");
  vqc_spawn_result_free(&c);
  rm_rf(dir);
}

Test(compare_cli, truncated_last_line_warns_and_compares_the_rest) {
  char dir[64], out[128];
  make_tmpdir(dir, sizeof dir);
  const deviation dev[] = {{1, 2, "b", 0}};
  trace_spec sp = {.ranks = 2, .steps = 4, .dev = dev, .ndev = 1};
  write_traces(dir, &sp);
  set_line(dir, 0, 13, "{\"schema\":\"vqcheck-trace/1\",\"rank\":0,\"step\":4,"
           "\"tens");
  snprintf(out, sizeof out, "%s/out", dir);
  cli_out c = run_cli("compare", dir, "--out", out, "--quiet", NULL);
  cr_expect_eq(c.code, 1, "stderr: %s", c.err);
  cr_expect(strstr(c.err, "warning: ") && strstr(c.err, "rank-0.trace.jsonl:13"
                   ": the last line is cut off"), "%s", c.err);
  cr_expect_str_eq(c.out, "", "--quiet prints no summary");
  vqc_spawn_result_free(&c);
  rm_rf(dir);
}

/* ---- what the reports say about the traces */

/* dir/name read whole (malloc'd, NUL-terminated). */
static char *slurp(const char *dir, const char *name) {
  char path[512];
  path_in(path, sizeof path, dir, name);
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc((size_t)n + 1);
  cr_assert_not_null(text);
  cr_assert_eq(fread(text, 1, (size_t)n, f), (size_t)n);
  text[n] = '\0';
  fclose(f);
  return text;
}

static int count_in(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* What a scenario run's report says and a trace comparison's must not. */
static void expect_no_scenario_words(const char *text, const char *name) {
  static const char *const words[] = {"fault injected", "seed",
                                      "steps done in", "training VQC_OK",
                                      "unknown model", "collective-timeline"};
  for (int i = 0; i < 6; i++)
    cr_expect_null(strstr(text, words[i]), "%s says '%s':\n%s", name,
                   words[i], text);
}

/* 4 ranks of program "train.py", 5 steps of 3 tensors; rank 2's trace ends
 * at step 2. Every report, the summary and run.json's compare section say
 * so, and `vqcheck report` re-renders the same reports. */
Test(compare_cli, reports_name_the_program_ranks_and_steps) {
  char dir[64], out[128];
  make_tmpdir(dir, sizeof dir);
  trace_spec sp = {.ranks = 4, .steps = 5, .last_step = {0, 0, 2, 0},
                   .program = "train.py"};
  write_traces(dir, &sp);
  snprintf(out, sizeof out, "%s/out", dir);
  cli_out c = run_cli("compare", dir, "--out", out, NULL);
  cr_expect_eq(c.code, 1, "rank 2 stops early: %s", c.err);
  char want[512];
  snprintf(want, sizeof want, "compare train.py (traces in %s): 4 ranks, "
           "steps 0..2 compared (3 steps), 3 tensors per step, 9 digests "
           "compared", dir);
  cr_expect(strstr(c.out, want) != NULL, "'%s' not in:\n%s", want, c.out);
  cr_expect(strstr(c.out, "last step per rank: step 4: ranks 0, 1, 3; "
                   "step 2: rank 2\n") != NULL, "%s", c.out);
  vqc_spawn_result_free(&c);

  /* run.json: the facts, in one place. */
  char path[256];
  path_in(path, sizeof path, out, "run.json");
  json_t *j = json_load_file(path, 0, NULL);
  cr_assert_not_null(j);
  json_t *cmp = json_object_get(j, "compare");
  cr_expect_str_eq(json_string_value(json_object_get(cmp, "program")),
                   "train.py");
  cr_expect_str_eq(json_string_value(json_object_get(cmp, "trace_dir")), dir);
  cr_expect_eq(json_integer_value(json_object_get(cmp, "ranks")), 4);
  cr_expect_eq(json_integer_value(json_object_get(cmp, "steps")), 5);
  cr_expect_eq(json_integer_value(json_object_get(cmp, "steps_compared")), 3);
  cr_expect_eq(json_integer_value(json_object_get(cmp, "first_step")), 0);
  cr_expect_eq(json_integer_value(json_object_get(cmp, "last_step")), 2);
  cr_expect_eq(json_integer_value(json_object_get(cmp, "tensors_per_step")),
               3);
  json_t *last = json_pack("[i,i,i,i]", 4, 4, 2, 4);
  cr_expect(json_equal(json_object_get(cmp, "rank_last_step"), last));
  json_decref(last);
  json_decref(j);

  char *md = slurp(out, "report.md");
  snprintf(want, sizeof want, "- program: `train.py` (traces in `%s`)\n"
           "- 4 ranks; steps compared: 0..2 (3 steps; the traces hold 5); "
           "tensors per step: 3; digests compared: 9\n- last step per rank: "
           "step 4: ranks 0, 1, 3; step 2: rank 2\n", dir);
  cr_expect(strstr(md, want) != NULL, "'%s' not in:\n%s", want, md);
  expect_no_scenario_words(md, "report.md");
  /* The collective checks did not run: said once, with run.json's
   * reason. */
  cr_expect_eq(count_in(md, "traces hold no collective ledger"), 1, "%s", md);
  cr_expect(strstr(md, "deadlock, collective_mismatch: traces hold no "
                   "collective ledger: not checked by vqcheck compare") !=
                NULL, "%s", md);

  char *html = slurp(out, "report.html");
  cr_expect(strstr(html, "<tr><th>program</th><td><code>train.py</code>"
                   "</td></tr>") != NULL, "%s", html);
  snprintf(want, sizeof want, "<tr><th>trace directory</th><td><code>%s"
           "</code></td></tr>", dir);
  cr_expect(strstr(html, want) != NULL, "%s", html);
  cr_expect(strstr(html, "<tr><th>ranks</th><td>4</td></tr>") != NULL);
  cr_expect(strstr(html, "<tr><th>steps compared</th><td>0..2 (3 steps; "
                   "the traces hold 5)</td></tr>") != NULL, "%s", html);
  cr_expect(strstr(html, "<tr><th>tensors per step</th><td>3</td></tr>") !=
            NULL);
  cr_expect(strstr(html, "<tr><th>last step per rank</th><td>step 4: ranks "
                   "0, 1, 3; step 2: rank 2</td></tr>") != NULL, "%s", html);
  expect_no_scenario_words(html, "report.html");
  cr_expect_eq(count_in(html, "traces hold no collective ledger"), 1, "%s",
               html);

  char *junit = slurp(out, "junit.xml");
  cr_expect(strstr(junit, "<property name=\"program\" value=\"train.py\"/>")
            != NULL, "%s", junit);
  cr_expect_null(strstr(junit, "name=\"fault\""), "%s", junit);

  /* `vqcheck report` on the run directory renders the same. */
  c = run_cli("report", out, "--quiet", NULL);
  cr_expect_eq(c.code, 1, "%s", c.err);
  vqc_spawn_result_free(&c);
  char *md2 = slurp(out, "report.md"), *html2 = slurp(out, "report.html");
  cr_expect_str_eq(md2, md);
  cr_expect_str_eq(html2, html);
  free(md2);
  free(html2);
  free(junit);
  free(html);
  free(md);
  rm_rf(dir);
}

/* Traces that name no program: the reports name their directory. */
Test(compare_cli, traces_without_a_program_are_named_by_their_directory) {
  char dir[64], out[128], want[512];
  make_tmpdir(dir, sizeof dir);
  trace_spec sp = {.ranks = 2, .steps = 3};
  write_traces(dir, &sp);
  snprintf(out, sizeof out, "%s/out", dir);
  cli_out c = run_cli("compare", dir, "--out", out, NULL);
  cr_expect_eq(c.code, 0, "%s", c.err);
  snprintf(want, sizeof want, "compare the traces in %s: 2 ranks, steps "
           "0..2 compared (3 steps)", dir);
  cr_expect(strstr(c.out, want) != NULL, "'%s' not in:\n%s", want, c.out);
  cr_expect_null(strstr(c.out, "last step per rank"), "%s", c.out);
  vqc_spawn_result_free(&c);

  char path[256];
  path_in(path, sizeof path, out, "run.json");
  json_t *j = json_load_file(path, 0, NULL);
  cr_assert_not_null(j);
  cr_expect(json_is_null(json_object_get(json_object_get(j, "compare"),
                                         "program")));
  json_decref(j);

  char *md = slurp(out, "report.md");
  snprintf(want, sizeof want, "- program: not named in the traces; traces "
           "in `%s`\n- 2 ranks; steps compared: 0..2 (3 steps); tensors per "
           "step: 3; digests compared: 9\n\n", dir);
  cr_expect(strstr(md, want) != NULL, "'%s' not in:\n%s", want, md);
  expect_no_scenario_words(md, "report.md");
  char *html = slurp(out, "report.html");
  snprintf(want, sizeof want, "<tr><th>trace directory</th><td><code>%s"
           "</code></td></tr>", dir);
  cr_expect(strstr(html, want) != NULL, "%s", html);
  cr_expect(strstr(html, "<tr><th>program</th><td>not named in the traces")
            != NULL, "%s", html);
  cr_expect_null(strstr(html, "last step per rank"));
  expect_no_scenario_words(html, "report.html");
  free(html);
  free(md);
  rm_rf(dir);
}

/* "program" is optional, but when present a string < 256 bytes; ranks that
 * name different programs: rank 0's is kept, with a warning. */
Test(compare_cli, program_must_be_a_string_and_rank_0s_is_kept) {
  char dir[64], out[128];
  make_tmpdir(dir, sizeof dir);
  trace_spec sp = {.ranks = 2, .steps = 2, .program = "train.py"};
  snprintf(out, sizeof out, "%s/out", dir);

  write_traces(dir, &sp);
  set_line(dir, 1, 4, "{\"schema\":\"vqcheck-trace/1\",\"rank\":1,\"step\":1,"
           "\"tensor\":\"w\",\"dtype\":\"float32\",\"shape\":[4,8],"
           "\"digest_algo\":\"vqc-xxh3-tree-1\",\"digest\":"
           "\"0000000000002000\",\"program\":7}\n");
  cli_out c = run_cli("compare", dir, "--out", out, NULL);
  cr_expect_eq(c.code, 2, "%s", c.err);
  cr_expect(strstr(c.err, "rank-1.trace.jsonl:4: field 'program' must be a "
                   "string") != NULL, "%s", c.err);
  cr_expect(!exists(out), "no run directory for bad input");
  vqc_spawn_result_free(&c);

  char line[1024], name[300];
  memset(name, 'p', 256);
  name[256] = '\0';
  snprintf(line, sizeof line, "{\"schema\":\"vqcheck-trace/1\",\"rank\":0,"
           "\"step\":0,\"tensor\":\"b\",\"dtype\":\"float32\",\"shape\":"
           "[4,8],\"digest_algo\":\"vqc-xxh3-tree-1\",\"digest\":"
           "\"0000000000001001\",\"program\":\"%s\"}\n", name);
  write_traces(dir, &sp);
  set_line(dir, 0, 2, line);
  c = run_cli("compare", dir, "--out", out, NULL);
  cr_expect_eq(c.code, 2, "%s", c.err);
  cr_expect(strstr(c.err, "rank-0.trace.jsonl:2: field 'program' must be a "
                   "string of less than 256 bytes") != NULL, "%s", c.err);
  vqc_spawn_result_free(&c);

  /* Rank 1 says eval.py from its first line on: rank 0's train.py stays. */
  sp.program = "eval.py";
  write_traces(dir, &sp);
  trace_spec sp0 = {.ranks = 1, .steps = 2, .program = "train.py"};
  write_traces(dir, &sp0);
  c = run_cli("compare", dir, "--out", out, NULL);
  cr_expect_eq(c.code, 0, "%s", c.err);
  cr_expect(strstr(c.err, "rank-1.trace.jsonl:1: field 'program' is "
                   "'eval.py' but ") && strstr(c.err, "rank-0.trace.jsonl:1 "
                   "names 'train.py'"), "%s", c.err);
  cr_expect(strstr(c.out, "compare train.py (traces in ") != NULL, "%s",
            c.out);
  vqc_spawn_result_free(&c);
  /* The copies in the run directory keep the key. */
  char *copy = slurp(out, "rank-1.trace.jsonl");
  cr_expect(strstr(copy, "\"program\":\"eval.py\"}\n") != NULL, "%s", copy);
  free(copy);
  rm_rf(dir);
}

/* ---- analyze */

Test(analyze_cli, merges_without_duplicates_and_is_idempotent) {
  char dir[64], out[128], path[256];
  make_tmpdir(dir, sizeof dir);
  const deviation dev[] = {{1, 1, "c", 0}};
  trace_spec sp = {.ranks = 3, .steps = 3, .dev = dev, .ndev = 1};
  write_traces(dir, &sp);

  /* Traces only (the job died before run.json): analyze writes one. */
  cli_out c = run_cli("analyze", dir, NULL);
  cr_expect_eq(c.code, 1, "stderr: %s", c.err);
  vqc_spawn_result_free(&c);
  vqc_findings f;
  vqc_findings_init(&f);
  int code = -1;
  path_in(path, sizeof path, dir, "run.json");
  cr_assert_eq(vqc_run_read_json(path, &f, &code), VQC_OK, "%s",
               vqc_last_error());
  cr_expect_eq(f.count, 1);
  cr_expect_eq(code, 1);
  cr_expect_eq(f.items[0].step, 1);
  cr_expect_str_eq(f.items[0].tensor, "c");
  vqc_findings_free(&f);

  /* Again: nothing new. */
  c = run_cli("analyze", dir, "--json", NULL);
  cr_expect_eq(c.code, 1);
  json_t *j = json_loads(c.out, 0, NULL);
  cr_assert_not_null(j);
  cr_expect_eq(json_array_size(json_object_get(j, "findings")), 1);
  json_t *an = json_object_get(j, "analysis");
  cr_expect_eq(json_integer_value(json_object_get(an, "added")), 0);
  cr_expect_eq(json_integer_value(json_object_get(an, "already_known")), 1);
  json_decref(j);
  vqc_spawn_result_free(&c);

  /* On compare's run directory: the same finding, kept once. */
  snprintf(out, sizeof out, "%s/out", dir);
  c = run_cli("compare", dir, "--out", out, "--quiet", NULL);
  cr_expect_eq(c.code, 1);
  vqc_spawn_result_free(&c);
  c = run_cli("analyze", out, "--quiet", NULL);
  cr_expect_eq(c.code, 1, "%s", c.err);
  vqc_spawn_result_free(&c);
  vqc_findings_init(&f);
  path_in(path, sizeof path, out, "run.json");
  cr_assert_eq(vqc_run_read_json(path, &f, &code), VQC_OK);
  cr_expect_eq(f.count, 1);
  vqc_findings_free(&f);
  rm_rf(dir);
}

Test(analyze_cli, corrupt_run_json_exits_2_naming_the_line) {
  char dir[64], path[256];
  make_tmpdir(dir, sizeof dir);
  path_in(path, sizeof path, dir, "run.json");
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs("{\n  \"schema_version\": 1,\n  \"findings\": [\n    {\"kind\": \n", f);
  fclose(f);
  cli_out c = run_cli("analyze", dir, NULL);
  cr_expect_eq(c.code, 2);
  cr_expect(strstr(c.err, "run.json:5:") != NULL, "%s", c.err);
  vqc_spawn_result_free(&c);

  f = fopen(path, "w");
  fputs("{\"schema_version\": 7, \"findings\": []}\n", f);
  fclose(f);
  c = run_cli("analyze", dir, NULL);
  cr_expect_eq(c.code, 2);
  cr_expect(strstr(c.err, "field 'schema_version': version 7") != NULL, "%s",
            c.err);
  vqc_spawn_result_free(&c);

  f = fopen(path, "w");
  fputs("{\"schema_version\": 1, \"findings\": [{\"kind\": \"hang\", "
        "\"step\": 1, \"ranks\": []}]}\n", f);
  fclose(f);
  c = run_cli("analyze", dir, NULL);
  cr_expect_eq(c.code, 2);
  cr_expect(strstr(c.err, "field 'findings[0]'") != NULL, "%s", c.err);
  vqc_spawn_result_free(&c);

  c = run_cli("analyze", dir, "--bogus", NULL);
  cr_expect_eq(c.code, 2);
  cr_expect(strstr(c.err, "unknown option '--bogus'") != NULL, "%s", c.err);
  vqc_spawn_result_free(&c);
  snprintf(path, sizeof path, "%s/missing", dir);
  c = run_cli("analyze", path, NULL);
  cr_expect_eq(c.code, 2);
  vqc_spawn_result_free(&c);
  rm_rf(dir);
}

/* ---- compare reports what a run reports */

/* Runs the scenario on `ranks` threads into dir/run, then compares its
 * traces: the divergence findings must agree in step, tensor, ranks, the
 * groups, the reference rank and also_differing. */
static void same_as_run(const char *scenario, int ranks, int min_findings) {
  char dir[64], run_dir[128], src[512];
  make_tmpdir(dir, sizeof dir);
  snprintf(run_dir, sizeof run_dir, "%s/run", dir);
  snprintf(src, sizeof src, "%s/scenarios/%s.yaml", vqc_test_source_dir(),
           scenario);
  vqc_scenario sc;
  cr_assert_eq(vqc_scenario_load(src, &sc), VQC_OK, "%s", vqc_last_error());
  cr_assert_eq(vqc_scenario_override(&sc, ranks, -1, -1, -1.0), VQC_OK);
  vqc_run_options ro = {run_dir, NULL};
  vqc_run_result rr;
  cr_assert_eq(vqc_run_threads(&sc, &ro, &rr), VQC_OK, "%s", vqc_last_error());

  vqc_findings f;
  vqc_findings_init(&f);
  vqc_trace_compare_result res;
  cr_assert_eq(compare_lib(run_dir, &f, &res), VQC_OK, "%s", vqc_last_error());
  int nrun = 0;
  for (int i = 0; i < rr.findings.count; i++) {
    const vqc_finding *a = &rr.findings.items[i];
    if (a->kind != VQC_FINDING_DIVERGENCE) continue;
    cr_assert_lt(nrun, f.count, "%s: compare has fewer findings", scenario);
    const vqc_finding *b = &f.items[nrun++];
    cr_expect_eq(a->step, b->step);
    cr_expect_str_eq(a->tensor, b->tensor);
    cr_expect_eq(a->nranks, b->nranks);
    for (int k = 0; k < a->nranks && k < b->nranks; k++)
      cr_expect_eq(a->ranks[k], b->ranks[k]);
    static const char *const keys[] = {"groups", "reference_rank",
                                       "also_differing", "dtype", "numel",
                                       "majority"};
    for (int k = 0; k < 6; k++) {
      const json_t *x = json_object_get(a->detail, keys[k]);
      const json_t *y = json_object_get(b->detail, keys[k]);
      /* Both absent (no reference_rank without a majority) is agreement. */
      cr_expect((!x && !y) || json_equal(x, y), "%s: detail.%s differs",
                scenario, keys[k]);
    }
  }
  cr_expect_eq(nrun, f.count, "%s: compare has more findings", scenario);
  cr_expect_geq(nrun, min_findings, "%s: the run found divergence",
                scenario);
  vqc_trace_compare_result_free(&res);
  vqc_findings_free(&f);
  vqc_run_result_free(&rr);
  rm_rf(dir);
}

Test(compare_vs_run, skip_weight_sync_on_4_ranks) {
  same_as_run("skip_weight_sync", 4, 1);
}
Test(compare_vs_run, lost_inplace_contiguous_on_3_ranks) {
  same_as_run("lost_inplace_contiguous", 3, 1);
}
Test(compare_vs_run, clean_twin_on_4_ranks) {
  same_as_run("skip_weight_sync-clean", 4, 0);
}

/* A run that stopped in a mismatched collective: with its run.json, analyze
 * adds nothing (the strict-mode mismatch already explains the end); without
 * it (the job "killed" before rank 0 wrote it), the run's own finding comes
 * back from the live records (findings_record.h), and the deadlock the
 * ledger dumps show on the same call site repeats it. */
Test(analyze_cli, ledger_dumps_of_a_stuck_run) {
  char dir[64], run_dir[128], src[512], path[256];
  make_tmpdir(dir, sizeof dir);
  snprintf(run_dir, sizeof run_dir, "%s/run", dir);
  snprintf(src, sizeof src, "%s/scenarios/mismatched_collective.yaml",
           vqc_test_source_dir());
  vqc_scenario sc;
  cr_assert_eq(vqc_scenario_load(src, &sc), VQC_OK, "%s", vqc_last_error());
  vqc_run_options ro = {run_dir, NULL};
  vqc_run_result rr;
  cr_assert_eq(vqc_run_threads(&sc, &ro, &rr), VQC_OK, "%s", vqc_last_error());
  cr_assert(vqc_findings_has(&rr.findings, VQC_FINDING_COLLECTIVE_MISMATCH));
  const int before = rr.findings.count;
  vqc_run_result_free(&rr);

  cli_out c = run_cli("analyze", run_dir, NULL);
  cr_expect_eq(c.code, 1, "%s", c.err);
  vqc_spawn_result_free(&c);
  vqc_findings f;
  vqc_findings_init(&f);
  path_in(path, sizeof path, run_dir, "run.json");
  cr_assert_eq(vqc_run_read_json(path, &f, NULL), VQC_OK, "%s",
               vqc_last_error());
  cr_expect_eq(f.count, before, "no finding added to a finished run");
  vqc_findings_free(&f);

  cr_assert_eq(unlink(path), 0);
  c = run_cli("analyze", run_dir, NULL);
  cr_expect_eq(c.code, 1, "%s", c.err);
  vqc_spawn_result_free(&c);
  vqc_findings_init(&f);
  cr_assert_eq(vqc_run_read_json(path, &f, NULL), VQC_OK, "%s",
               vqc_last_error());
  cr_assert_eq(f.count, 1);
  cr_expect_eq(f.items[0].kind, VQC_FINDING_COLLECTIVE_MISMATCH);
  cr_expect(strstr(f.items[0].site, "vq_ema.c") != NULL, "%s",
            f.items[0].site);
  vqc_findings_free(&f);
  rm_rf(dir);
}

/* Every digest type name fits a trace line's dtype (the longest,
 * float4_e2m1fn_x2, has 16 bytes); 32 bytes or more do not. */
Test(compare, trace_dtype_holds_every_digest_type_name) {
  static const char *names[] = {"bool", "bfloat16", "float8_e4m3fnuz",
                                "float4_e2m1fn_x2", "complex128"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char line[512];
    snprintf(line, sizeof line,
             "{\"schema\":\"vqcheck-trace/1\",\"rank\":0,\"step\":0,"
             "\"tensor\":\"t\",\"dtype\":\"%s\",\"shape\":[2],"
             "\"digest_algo\":\"vqc-xxh3-tree-1\","
             "\"digest\":\"0123456789abcdef\"}", names[i]);
    vqc_trace_record r;
    cr_assert_eq(vqc_trace_parse_line(line, "t.jsonl", 1, &r), VQC_OK,
                 "%s: %s", names[i], vqc_last_error());
    cr_assert_str_eq(r.dtype, names[i]);
  }
  const char *too_long =
      "{\"schema\":\"vqcheck-trace/1\",\"rank\":0,\"step\":0,\"tensor\":\"t\","
      "\"dtype\":\"a_dtype_name_of_thirty_two_bytes\",\"shape\":[2],"
      "\"digest_algo\":\"vqc-xxh3-tree-1\",\"digest\":\"0123456789abcdef\"}";
  vqc_trace_record r;
  cr_assert_eq(vqc_trace_parse_line(too_long, "t.jsonl", 1, &r), VQC_EPARSE);
  cr_assert(strstr(vqc_last_error(), "dtype") != NULL, "%s", vqc_last_error());
}
