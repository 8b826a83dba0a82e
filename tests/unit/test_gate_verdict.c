/* test_gate_verdict.c: the verdict survives its own files (issue 22):
 * `vqcheck analyze` on a run directory whose run.json was never written
 * rebuilds the run's own findings, and a directory that does not show a
 * whole, compared run is never exit 0. Runs the built vqcheck
 * (vqc_test_cli()) as a child process, each case against the old behaviour
 * it replaces:
 *
 *   lost_run_json_keeps_its_findings  the run cannot write run.json (exit
 *                      3); `analyze` then gave exit 0, "findings: 0", for a
 *                      run that had 4 gradient_mismatch findings (they
 *                      lived only in run.json). Now each finding is on its
 *                      rank's live record as it is made: exit 1 with the
 *                      same 4 findings, run.json's own words;
 *   same_findings_on_every_scenario   for every catalogue scenario with a
 *                      fault, the findings analyze rebuilds are exactly
 *                      the run's (kind, step, ranks, tensor, site, message);
 *   live_records_alone_are_not_green  only "finished" live records, no
 *                      trace: "0 traces, 0 digests compared" was exit 0;
 *   short_rank_is_not_green          rank 1 ended cleanly after 1 of 3
 *                      steps (its peer trained all 3), the traces agree on
 *                      the one step both checked: was exit 0;
 *   variable_gather_is_not_a_mismatch  analyze on a clean run whose ranks
 *                      all_gatherv different counts (by design) reported a
 *                      collective_mismatch: was exit 1;
 *   steps_done_covers_every_finding   at check interval 4, the rebuilt
 *                      run.json said steps_done 3 (the checked steps) with
 *                      a finding at step 4;
 *   refusal_leaves_no_lock            analyze refusing a directory of the
 *                      user's left its .vqcheck.lock there;
 *   oversized_run_json_is_refused     a 200 MB run.json was parsed (964 MB
 *                      of memory); it is refused by its size, exit 2.
 *
 * $VQC_TEST_CLI names another vqcheck to test: a build from before these
 * fixes fails every case. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spawn_capture.h"
#include "test_paths.h"

static char tmpdir[256];

static void make_tmpdir(void) {
  cr_assert(vqc_test_temp_dir(tmpdir, sizeof tmpdir,
                              "/tmp/vqc-test-gate-verdict-XXXXXX") != NULL,
            "mkdtemp: %s", strerror(errno));
}

static void remove_tmpdir(void) { vqc_test_remove_dir(tmpdir); }

TestSuite(gate_verdict, .init = make_tmpdir, .fini = remove_tmpdir,
          .timeout = 240);

/* ---- helpers */

/* `vqcheck args...` (NULL-terminated), VQC_DEBUG dropped. */
static vqc_spawn_result run_cli(const char *first, ...) {
  vqc_spawn_result r;
  va_list ap;
  va_start(ap, first);
  int rc = vqc_spawn_vcapture(&r, vqc_test_cli(), "VQC_DEBUG", NULL, first, ap);
  va_end(ap);
  cr_assert_eq(rc, 0, "cannot run %s: %s", vqc_test_cli(), strerror(rc));
  return r;
}

static char *path_in(char *buf, size_t n, const char *dir, const char *name) {
  snprintf(buf, n, "%s/%s", dir, name);
  return buf;
}

static void put_file(const char *dir, const char *name, const char *text) {
  char path[1024];
  FILE *f = fopen(path_in(path, sizeof path, dir, name), "w");
  cr_assert_not_null(f, "cannot create %s: %s", path, strerror(errno));
  fputs(text, f);
  cr_assert_eq(fclose(f), 0);
}

static bool exists(const char *dir, const char *name) {
  char path[1024];
  struct stat st;
  return lstat(path_in(path, sizeof path, dir, name), &st) == 0;
}

static const char *scenario(char *buf, size_t n, const char *name) {
  snprintf(buf, n, "%s/scenarios/%s.yaml", vqc_test_source_dir(), name);
  return buf;
}

static json_t *load_json(const char *dir, const char *name) {
  char path[1024];
  json_error_t err;
  json_t *j = json_load_file(path_in(path, sizeof path, dir, name), 0, &err);
  cr_assert_not_null(j, "%s: %s", path, err.text);
  return j;
}

/* A finding's identity as one line of text, its ranks sorted, for
 * comparing the run's list with the rebuilt one. */
static void finding_key(const json_t *f, char *buf, size_t n) {
  int ranks[64], nr = 0;
  const json_t *rs = json_object_get(f, "ranks");
  for (size_t i = 0; i < json_array_size(rs) && nr < 64; i++)
    ranks[nr++] = (int)json_integer_value(json_array_get(rs, i));
  for (int i = 1; i < nr; i++) /* insertion sort: a few ranks */
    for (int k = i; k > 0 && ranks[k - 1] > ranks[k]; k--) {
      int t = ranks[k];
      ranks[k] = ranks[k - 1];
      ranks[k - 1] = t;
    }
  const char *tensor = json_string_value(json_object_get(f, "tensor"));
  const char *site = json_string_value(json_object_get(f, "site"));
  size_t k = (size_t)snprintf(
      buf, n, "%s|%lld|%s|%s|%s|",
      json_string_value(json_object_get(f, "kind")),
      (long long)json_integer_value(json_object_get(f, "step")),
      tensor ? tensor : "", site ? site : "",
      json_string_value(json_object_get(f, "message")));
  for (int i = 0; i < nr && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%d,", ranks[i]);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Asserts the findings arrays of two run.json documents name the same
 * findings (in any order). */
static void expect_same_findings(const json_t *run, const json_t *rebuilt,
                                 const char *what) {
  const json_t *a = json_object_get(run, "findings");
  const json_t *b = json_object_get(rebuilt, "findings");
  cr_assert_eq(json_array_size(b), json_array_size(a),
               "%s: %zu findings rebuilt, the run had %zu", what,
               json_array_size(b), json_array_size(a));
  const size_t n = json_array_size(a);
  char **ka = calloc(n + 1, sizeof *ka), **kb = calloc(n + 1, sizeof *kb);
  cr_assert(ka && kb);
  for (size_t i = 0; i < n; i++) {
    ka[i] = malloc(2048);
    kb[i] = malloc(2048);
    finding_key(json_array_get(a, i), ka[i], 2048);
    finding_key(json_array_get(b, i), kb[i], 2048);
  }
  qsort(ka, n, sizeof *ka, cmp_str);
  qsort(kb, n, sizeof *kb, cmp_str);
  for (size_t i = 0; i < n; i++) {
    cr_expect_str_eq(kb[i], ka[i], "%s: rebuilt finding differs", what);
    free(ka[i]);
    free(kb[i]);
  }
  free(ka);
  free(kb);
}

/* Removes run.json and the reports from dir (what a lost run.json leaves). */
static void drop_verdict(const char *dir) {
  static const char *const names[] = {"run.json", "report.md", "report.html",
                                      "junit.xml"};
  char path[1024];
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    unlink(path_in(path, sizeof path, dir, names[i]));
}

/* ---- a run whose run.json was never written */

Test(gate_verdict, lost_run_json_keeps_its_findings) {
  char out[512], sc[512], path[1024];
  path_in(out, sizeof out, tmpdir, "run");
  scenario(sc, sizeof sc, "nograd_all_gather");
  /* The run as it should be: 4 gradient_mismatch findings. */
  vqc_spawn_result r = run_cli("run", sc, "--out", out, "--quiet", NULL);
  cr_assert_eq(r.code, 1, "exit %d; stderr: %s", r.code, r.err);
  vqc_spawn_result_free(&r);
  json_t *first = load_json(out, "run.json");
  cr_assert_eq(json_array_size(json_object_get(first, "findings")), 4);

  /* Again, where run.json cannot be written (a directory of that name
   * stands in for a full disk: the rename fails). */
  cr_assert_eq(unlink(path_in(path, sizeof path, out, "run.json")), 0);
  cr_assert_eq(mkdir(path, 0777), 0);
  r = run_cli("run", sc, "--out", out, "--quiet", NULL);
  cr_expect_eq(r.code, 3, "exit %d; stderr: %s", r.code, r.err);
  vqc_spawn_result_free(&r);
  cr_assert_eq(rmdir(path), 0); /* the disk has room again */
  drop_verdict(out);

  r = run_cli("analyze", out, NULL);
  cr_expect_eq(r.code, 1, "analyze: exit %d (a false green when 0); "
               "stdout: %s stderr: %s", r.code, r.out, r.err);
  cr_expect_not_null(strstr(r.out, "findings: 4"), "stdout: %s", r.out);
  vqc_spawn_result_free(&r);
  json_t *rebuilt = load_json(out, "run.json");
  cr_expect_eq(json_integer_value(json_object_get(rebuilt, "exit_code")), 1);
  expect_same_findings(first, rebuilt, "nograd_all_gather");
  json_decref(first);
  json_decref(rebuilt);
}

Test(gate_verdict, same_findings_on_every_scenario) {
  static const char *const faults[] = {
      "discarded_out_of_place_result", "lost_inplace_contiguous",
      "mismatched_collective", "sampler_float_split",
      "seed_sync_some_ranks", "skip_weight_sync", "unsynced_dropout_seed"};
  for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
    char out[512], sc[512];
    path_in(out, sizeof out, tmpdir, faults[i]);
    vqc_spawn_result r = run_cli("run", scenario(sc, sizeof sc, faults[i]),
                                 "--out", out, "--quiet", NULL);
    cr_assert_eq(r.code, 1, "%s: exit %d; stderr: %s", faults[i], r.code,
                 r.err);
    vqc_spawn_result_free(&r);
    json_t *run = load_json(out, "run.json");
    drop_verdict(out);
    r = run_cli("analyze", out, "--quiet", NULL);
    cr_expect_eq(r.code, 1, "%s: analyze exit %d; stderr: %s", faults[i],
                 r.code, r.err);
    vqc_spawn_result_free(&r);
    json_t *rebuilt = load_json(out, "run.json");
    expect_same_findings(run, rebuilt, faults[i]);
    json_decref(run);
    json_decref(rebuilt);
  }
}

/* ---- directories that do not show a whole, compared run */

static const char live_start[] =
    "{\"event\":\"start\",\"rank\":%d,\"size\":2,\"pid\":1,\"host\":\"h\"}\n";

/* rank-<r>.live.jsonl: a start line, `steps` step lines and a clean end. */
static void put_live(const char *dir, int rank, int steps) {
  char name[64], text[4096];
  size_t k = (size_t)snprintf(text, sizeof text, live_start, rank);
  for (int s = 0; s < steps; s++)
    k += (size_t)snprintf(text + k, sizeof text - k,
                          "{\"event\":\"step\",\"step\":%d}\n", s);
  snprintf(text + k, sizeof text - k,
           "{\"event\":\"finished\",\"status\":\"VQC_OK\",\"step\":%d}\n",
           steps);
  snprintf(name, sizeof name, "rank-%d.live.jsonl", rank);
  put_file(dir, name, text);
}

Test(gate_verdict, live_records_alone_are_not_green) {
  char out[512];
  path_in(out, sizeof out, tmpdir, "job");
  cr_assert_eq(mkdir(out, 0777), 0);
  put_live(out, 0, 3);
  put_live(out, 1, 3);
  vqc_spawn_result r = run_cli("analyze", out, NULL);
  cr_expect_neq(r.code, 0, "nothing was compared, yet exit 0; stdout: %s",
                r.out);
  cr_expect_eq(r.code, 3, "exit %d; stdout: %s stderr: %s", r.code, r.out,
               r.err);
  vqc_spawn_result_free(&r);
  json_t *j = load_json(out, "run.json");
  const char *msg = json_string_value(
      json_object_get(json_object_get(j, "training"), "message"));
  cr_expect(msg && strstr(msg, "nothing was compared"), "message: %s", msg);
  json_decref(j);
}

Test(gate_verdict, short_rank_is_not_green) {
  char out[512];
  path_in(out, sizeof out, tmpdir, "job");
  cr_assert_eq(mkdir(out, 0777), 0);
  put_live(out, 0, 3);
  put_live(out, 1, 1); /* left its loop after step 0 and exited 0 */
  /* Both ranks checked step 0 and agree on it. */
  static const char line[] =
      "{\"schema\":\"vqcheck-trace/1\",\"rank\":%d,\"step\":0,\"tensor\":"
      "\"w\",\"dtype\":\"float32\",\"shape\":[2],\"digest_algo\":"
      "\"vqc-xxh3-tree-1\",\"digest\":\"6c2fb54e585a5451\"}\n";
  for (int rank = 0; rank < 2; rank++) {
    char name[64], text[512];
    snprintf(name, sizeof name, "rank-%d.trace.jsonl", rank);
    snprintf(text, sizeof text, line, rank);
    put_file(out, name, text);
  }
  vqc_spawn_result r = run_cli("analyze", out, NULL);
  cr_expect_neq(r.code, 0, "rank 1 trained 1 of 3 steps, yet exit 0; "
                "stdout: %s", r.out);
  vqc_spawn_result_free(&r);
  json_t *j = load_json(out, "run.json");
  const char *msg = json_string_value(
      json_object_get(json_object_get(j, "training"), "message"));
  cr_expect(msg && strstr(msg, "1 (1 of 3 steps)"), "message: %s", msg);
  json_decref(j);
}

/* ---- what a clean run's records show is not a finding */

Test(gate_verdict, variable_gather_is_not_a_mismatch) {
  char out[512], sc[512];
  path_in(out, sizeof out, tmpdir, "run");
  vqc_spawn_result r = run_cli(
      "run", scenario(sc, sizeof sc, "sampler_float_split-clean"), "--out",
      out, "--quiet", NULL);
  cr_assert_eq(r.code, 0, "exit %d; stderr: %s", r.code, r.err);
  vqc_spawn_result_free(&r);
  r = run_cli("analyze", out, NULL);
  cr_expect_eq(r.code, 0, "analyze of a clean run: exit %d; stdout: %s",
               r.code, r.out);
  vqc_spawn_result_free(&r);
  drop_verdict(out);
  r = run_cli("analyze", out, NULL);
  cr_expect_eq(r.code, 0, "analyze without run.json: exit %d; stdout: %s",
               r.code, r.out);
  vqc_spawn_result_free(&r);
}

Test(gate_verdict, steps_done_covers_every_finding) {
  char out[512], sc[512], mine[512];
  path_in(out, sizeof out, tmpdir, "run");
  /* skip_weight_sync over 6 steps, checked every 4th: a divergence at
   * step 4, traces for steps 0, 4 and 5 only. */
  char *text = vqc_read_file(scenario(sc, sizeof sc, "skip_weight_sync"));
  cr_assert_not_null(text);
  char *steps = strstr(text, "\nsteps: 3\n");
  cr_assert_not_null(steps, "the scenario changed: %s", text);
  char *expect = strstr(text, "\nexpect:");
  cr_assert_not_null(expect);
  *steps = '\0';
  *expect = '\0';
  char body[4096];
  snprintf(body, sizeof body, "%s\nsteps: 6\ncheck: {interval: 4}%s\n"
           "expect:\n  - {kind: divergence, step: 4}\n",
           text, steps + strlen("\nsteps: 3"));
  free(text);
  put_file(tmpdir, "interval4.yaml", body);
  path_in(mine, sizeof mine, tmpdir, "interval4.yaml");
  vqc_spawn_result r = run_cli("run", mine, "--out", out, "--quiet", NULL);
  cr_assert_eq(r.code, 1, "exit %d; stderr: %s", r.code, r.err);
  vqc_spawn_result_free(&r);
  drop_verdict(out);
  r = run_cli("analyze", out, "--quiet", NULL);
  cr_expect_eq(r.code, 1, "exit %d; stderr: %s", r.code, r.err);
  vqc_spawn_result_free(&r);
  json_t *j = load_json(out, "run.json");
  const json_int_t done = json_integer_value(
      json_object_get(json_object_get(j, "training"), "steps_done"));
  cr_expect_eq(done, 6, "steps_done %lld (the run trained 6 steps)",
               (long long)done);
  const json_t *fs = json_object_get(j, "findings");
  cr_assert_gt(json_array_size(fs), 0);
  for (size_t i = 0; i < json_array_size(fs); i++) {
    json_int_t step =
        json_integer_value(json_object_get(json_array_get(fs, i), "step"));
    cr_expect_lt(step, done, "a finding at step %lld, steps_done %lld",
                 (long long)step, (long long)done);
  }
  json_decref(j);
}

/* ---- a directory analyze refuses gets nothing written */

Test(gate_verdict, refusal_leaves_no_lock) {
  char out[512];
  path_in(out, sizeof out, tmpdir, "mine");
  cr_assert_eq(mkdir(out, 0777), 0);
  put_file(out, "report.html", "the user's own report");
  put_live(out, 0, 1);
  vqc_spawn_result r = run_cli("analyze", out, NULL);
  cr_expect_eq(r.code, 2, "exit %d; stderr: %s", r.code, r.err);
  cr_expect_not_null(strstr(r.err, "report.html"), "stderr: %s", r.err);
  vqc_spawn_result_free(&r);
  cr_expect(!exists(out, ".vqcheck.lock"),
            "the refused directory got a .vqcheck.lock");
  char path[1024];
  char *kept = vqc_read_file(path_in(path, sizeof path, out, "report.html"));
  cr_assert_not_null(kept);
  cr_expect_str_eq(kept, "the user's own report");
  free(kept);
}

/* ---- a run.json no run writes */

Test(gate_verdict, oversized_run_json_is_refused) {
  char out[512], sc[512], path[1024];
  path_in(out, sizeof out, tmpdir, "run");
  vqc_spawn_result r = run_cli(
      "run", scenario(sc, sizeof sc, "skip_weight_sync-clean"), "--out", out,
      "--quiet", NULL);
  cr_assert_eq(r.code, 0, "exit %d; stderr: %s", r.code, r.err);
  vqc_spawn_result_free(&r);
  /* 200 MB, sparse (no disk used): "{" and spaces as far as jansson reads. */
  FILE *f = fopen(path_in(path, sizeof path, out, "run.json"), "w");
  cr_assert_not_null(f);
  fputs("{\"schema_version\": 1, \"findings\": [], \"pad\": \"", f);
  cr_assert_eq(fseek(f, 200L * 1000 * 1000, SEEK_SET), 0);
  fputs("\"}\n", f);
  cr_assert_eq(fclose(f), 0);
  r = run_cli("analyze", out, NULL);
  cr_expect_eq(r.code, 2, "exit %d; stderr: %s", r.code, r.err);
  cr_expect_not_null(strstr(r.err, "run.json"), "stderr: %s", r.err);
  cr_expect_not_null(strstr(r.err, "MiB"), "stderr: %s", r.err);
  vqc_spawn_result_free(&r);
}
