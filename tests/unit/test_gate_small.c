/* test_gate_small.c: five verdicts a hostile user broke (the gate's
 * promises: exit codes, "never a false green", "never lose a user's
 * file"). Runs the built vqcheck (vqc_test_cli()) as a child process on the
 * shipped skip_weight_sync-clean scenario (2 ranks, 3 steps, a fraction of
 * a second) and checks, each against the old behaviour it replaces:
 *
 *   stdout_full_is_exit_3      --json (and --version) with stdout on
 *                              /dev/full: exit 3 and "cannot write to
 *                              standard output" on stderr, for run, list,
 *                              suite, compare, analyze and report (it used
 *                              to be exit 0 with nothing written);
 *   one_rank_divergence_skipped `run --ranks 1`: divergence is <skipped
 *                              message="1 rank: nothing to compare"/> in
 *                              junit.xml (it used to pass), run.json's
 *                              checks_not_run says so, report.md and
 *                              report.html list it as not checked, and the
 *                              summary says so;
 *   suite_same_name_own_dirs   two scenario files naming one scenario run
 *                              in OUT/NAME and OUT/NAME-2: each keeps its
 *                              own run.json (the second used to clear the
 *                              first's), and stderr names both files;
 *   run_json_over_cap          a run.json over rundir.h's cap (a sparse
 *                              300 MiB file) is refused with exit 2 naming
 *                              the file, its size and the cap (it used to
 *                              be parsed); a run.json that is a symbolic
 *                              link is refused too (it used to be read);
 *   met_only_when_recorded     a run whose reports (or run.json) cannot be
 *                              written exits 3 and never prints
 *                              "expectation (clean): met" (it used to);
 *                              stdout and stderr say the run could not be
 *                              recorded.
 *
 * $VQC_TEST_CLI, when set, names the vqcheck to test instead of this
 * build's: pointed at a build from before these fixes, every case fails. */
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

/* ---- helpers */

static char tmpdir[256];

static void make_tmpdir(void) {
  cr_assert(vqc_test_temp_dir(tmpdir, sizeof tmpdir,
                              "/tmp/vqc-test-gate-small-XXXXXX") != NULL,
            "mkdtemp: %s", strerror(errno));
}

static void remove_tmpdir(void) { vqc_test_remove_dir(tmpdir); }

TestSuite(gate_small, .init = make_tmpdir, .fini = remove_tmpdir,
          .timeout = 120);

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

/* `vqcheck args...` with stdout on /dev/full (stderr captured). */
static vqc_spawn_result run_cli_full(const char *first, ...) {
  const char *argv[VQC_SPAWN_MAX_ARGS + 1];
  int n = 0;
  argv[n++] = vqc_test_cli();
  va_list ap;
  va_start(ap, first);
  for (const char *a = first; a != NULL && n < VQC_SPAWN_MAX_ARGS;
       a = va_arg(ap, const char *))
    argv[n++] = a;
  va_end(ap);
  argv[n] = NULL;
  vqc_spawn_result r;
  int rc = vqc_spawn_capture_stdout(&r, argv, "VQC_DEBUG", NULL, "/dev/full");
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

static const char *scenario(char *buf, size_t n) {
  snprintf(buf, n, "%s/scenarios/skip_weight_sync-clean.yaml",
           vqc_test_source_dir());
  return buf;
}

/* A clean 2-rank run into <tmpdir>/<name>; its path into out. */
static void clean_run(const char *name, char *out, size_t n) {
  char sc[512];
  path_in(out, n, tmpdir, name);
  vqc_spawn_result r =
      run_cli("run", scenario(sc, sizeof sc), "--out", out, "--quiet", NULL);
  cr_assert_eq(r.code, 0, "setup run: exit %d; stderr: %s", r.code, r.err);
  vqc_spawn_result_free(&r);
}

static json_t *load_json(const char *dir, const char *name) {
  char path[1024];
  json_error_t err;
  json_t *j = json_load_file(path_in(path, sizeof path, dir, name), 0, &err);
  cr_assert_not_null(j, "%s: %s", path, err.text);
  return j;
}

/* The text of <dir>/<name> (malloc'd). */
static char *file_text(const char *dir, const char *name) {
  char path[1024];
  char *t = vqc_read_file(path_in(path, sizeof path, dir, name));
  cr_assert_not_null(t, "cannot read %s", path);
  return t;
}

/* ---- (a) a full stdout */

/* Asserts r is the refusal of a command whose stdout was /dev/full. */
static void expect_stdout_error(vqc_spawn_result *r, const char *what) {
  cr_expect_eq(r->code, 3, "%s: exit %d with stdout on /dev/full; stderr: %s",
               what, r->code, r->err);
  cr_expect_not_null(strstr(r->err, "cannot write to standard output"),
                     "%s: stderr: %s", what, r->err);
  vqc_spawn_result_free(r);
}

Test(gate_small, stdout_full_is_exit_3) {
  char sc[512], run_dir[512], suite_sc[512], suite_out[512], cmp_out[512];
  clean_run("run", run_dir, sizeof run_dir);

  vqc_spawn_result r = run_cli_full("--version", NULL);
  expect_stdout_error(&r, "--version");

  char scdir[512];
  snprintf(scdir, sizeof scdir, "%s/scenarios", vqc_test_source_dir());
  r = run_cli_full("list", scdir, "--json", NULL);
  expect_stdout_error(&r, "list --json");

  char out[512];
  path_in(out, sizeof out, tmpdir, "run-full");
  r = run_cli_full("run", scenario(sc, sizeof sc), "--out", out, "--json",
                   NULL);
  expect_stdout_error(&r, "run --json");

  path_in(suite_sc, sizeof suite_sc, tmpdir, "suite-scenarios");
  cr_assert_eq(mkdir(suite_sc, 0777), 0);
  char *text = vqc_read_file(scenario(sc, sizeof sc));
  cr_assert_not_null(text);
  put_file(suite_sc, "a.yaml", text);
  free(text);
  path_in(suite_out, sizeof suite_out, tmpdir, "suite-full");
  r = run_cli_full("suite", suite_sc, "--out", suite_out, "--json", NULL);
  expect_stdout_error(&r, "suite --json");

  path_in(cmp_out, sizeof cmp_out, tmpdir, "compare-full");
  r = run_cli_full("compare", run_dir, "--out", cmp_out, "--json", NULL);
  expect_stdout_error(&r, "compare --json");

  r = run_cli_full("analyze", run_dir, "--json", NULL);
  expect_stdout_error(&r, "analyze --json");

  r = run_cli_full("report", run_dir, "--format", "json", NULL);
  expect_stdout_error(&r, "report --format json");
}

/* ---- (b) one rank: nothing to compare */

Test(gate_small, one_rank_divergence_skipped) {
  char sc[512], out[512];
  path_in(out, sizeof out, tmpdir, "one-rank");
  vqc_spawn_result r = run_cli("run", scenario(sc, sizeof sc), "--ranks", "1",
                               "--out", out, NULL);
  cr_expect_eq(r.code, 0, "exit %d; stderr: %s", r.code, r.err);
  cr_expect_not_null(strstr(r.out, "not checked: divergence (1 rank: "
                                   "nothing to compare)"),
                     "stdout: %s", r.out);
  vqc_spawn_result_free(&r);

  char *junit = file_text(out, "junit.xml");
  const char *tc = strstr(junit, "<testcase name=\"divergence\"");
  cr_assert_not_null(tc, "junit.xml: %s", junit);
  const char *end = strstr(tc, "</testcase>");
  const char *next = strstr(tc + 1, "<testcase");
  /* The divergence testcase must hold the skip (a "<testcase .../>" that
   * closes itself is a pass). */
  cr_expect(end != NULL && (next == NULL || end < next),
            "divergence passed in junit.xml: %.300s", tc);
  cr_expect_not_null(strstr(tc, "<skipped message=\"1 rank: nothing to "
                                "compare\"/>"),
                     "junit.xml: %.300s", tc);
  cr_expect_not_null(strstr(junit, "skipped=\"1\""), "junit.xml: %s", junit);
  free(junit);

  json_t *run = load_json(out, "run.json");
  const json_t *why = json_object_get(json_object_get(run, "checks_not_run"),
                                      "divergence");
  cr_expect(json_is_string(why) &&
                strcmp(json_string_value(why), "1 rank: nothing to compare") ==
                    0,
            "run.json checks_not_run.divergence");
  json_decref(run);

  char *md = file_text(out, "report.md");
  cr_expect_not_null(strstr(md, "Not checked (did not run): divergence"),
                     "report.md: %.600s", md);
  free(md);
  char *html = file_text(out, "report.html");
  cr_expect_not_null(strstr(html, "not checked: divergence"),
                     "report.html does not list divergence as not checked");
  free(html);
}

/* ---- (c) two scenario files, one name */

Test(gate_small, suite_same_name_own_dirs) {
  char sc[512], scdir[512], out[512], dir[1024];
  path_in(scdir, sizeof scdir, tmpdir, "scenarios");
  path_in(out, sizeof out, tmpdir, "suite");
  cr_assert_eq(mkdir(scdir, 0777), 0);
  char *text = vqc_read_file(scenario(sc, sizeof sc));
  cr_assert_not_null(text);
  put_file(scdir, "a.yaml", text);
  /* The same scenario name, 2 steps instead of 3: each run.json shows
   * whose it is. */
  char *steps = strstr(text, "\nsteps: 3\n");
  cr_assert_not_null(steps);
  steps[8] = '2';
  put_file(scdir, "b.yaml", text);
  free(text);

  vqc_spawn_result r = run_cli("suite", scdir, "--out", out, "--json", NULL);
  cr_expect_eq(r.code, 0, "exit %d; stderr: %s", r.code, r.err);
  cr_expect_not_null(strstr(r.err, "a.yaml"), "stderr: %s", r.err);
  cr_expect_not_null(strstr(r.err, "b.yaml"), "stderr: %s", r.err);
  json_error_t err;
  json_t *doc = json_loads(r.out, 0, &err);
  cr_assert_not_null(doc, "stdout is not JSON (%s): %s", err.text, r.out);
  const json_t *cases = json_object_get(doc, "cases");
  cr_assert_eq(json_array_size(cases), 2);
  const char *d0 =
      json_string_value(json_object_get(json_array_get(cases, 0), "run_dir"));
  const char *d1 =
      json_string_value(json_object_get(json_array_get(cases, 1), "run_dir"));
  cr_assert(d0 && d1, "run_dir missing: %s", r.out);
  cr_expect_str_neq(d0, d1, "both files ran in %s", d0);
  json_decref(doc);
  vqc_spawn_result_free(&r);

  /* Each run's evidence is its own: a.yaml's 3 steps, b.yaml's 2. */
  path_in(dir, sizeof dir, out, "skip_weight_sync-clean");
  json_t *a = load_json(dir, "run.json");
  cr_expect_eq(json_integer_value(json_object_get(
                   json_object_get(a, "training"), "steps_done")),
               3, "a.yaml's run.json was replaced");
  json_decref(a);
  path_in(dir, sizeof dir, out, "skip_weight_sync-clean-2");
  struct stat st;
  cr_assert_eq(stat(dir, &st), 0, "%s: %s", dir, strerror(errno));
  json_t *b = load_json(dir, "run.json");
  cr_expect_eq(json_integer_value(json_object_get(
                   json_object_get(b, "training"), "steps_done")),
               2);
  json_decref(b);
}

/* ---- (d) run.json: a size cap, no links */

Test(gate_small, run_json_over_cap) {
  char dir[512], path[1024];
  clean_run("big", dir, sizeof dir);
  /* 300 MiB, sparse (no disk used): over the 64 MiB cap. */
  const long long size = 300LL * 1024 * 1024;
  cr_assert_eq(truncate(path_in(path, sizeof path, dir, "run.json"), size), 0,
               "truncate: %s", strerror(errno));
  vqc_spawn_result r = run_cli("report", dir, "--quiet", NULL);
  cr_expect_eq(r.code, 2, "exit %d; stderr: %s", r.code, r.err);
  cr_expect_not_null(strstr(r.err, path), "stderr: %s", r.err);
  cr_expect_not_null(strstr(r.err, "314572800 bytes"), "stderr: %s", r.err);
  cr_expect_not_null(strstr(r.err, "64 MiB"), "stderr: %s", r.err);
  vqc_spawn_result_free(&r);

  /* A link to a valid run.json: vqcheck reads only the file it wrote. */
  char link_dir[512], real[1024];
  clean_run("link", link_dir, sizeof link_dir);
  path_in(path, sizeof path, link_dir, "run.json");
  path_in(real, sizeof real, link_dir, "real.json");
  cr_assert_eq(rename(path, real), 0);
  cr_assert_eq(symlink("real.json", path), 0);
  r = run_cli("report", link_dir, "--quiet", NULL);
  cr_expect_eq(r.code, 2, "exit %d; stderr: %s", r.code, r.err);
  cr_expect_not_null(strstr(r.err, "symbolic link"), "stderr: %s", r.err);
  vqc_spawn_result_free(&r);
}

/* ---- (e) "met" only for a verdict that was recorded */

/* Runs the clean scenario into dir once (so vqcheck owns it), puts a
 * directory where `name` goes, and runs it again: that write fails. */
static vqc_spawn_result run_with_blocked(const char *dir, const char *name) {
  char sc[512], path[1024];
  vqc_spawn_result r =
      run_cli("run", scenario(sc, sizeof sc), "--out", dir, "--quiet", NULL);
  cr_assert_eq(r.code, 0, "setup run: exit %d; stderr: %s", r.code, r.err);
  vqc_spawn_result_free(&r);
  path_in(path, sizeof path, dir, name);
  cr_assert_eq(unlink(path), 0, "unlink %s: %s", path, strerror(errno));
  cr_assert_eq(mkdir(path, 0777), 0);
  return run_cli("run", scenario(sc, sizeof sc), "--out", dir, NULL);
}

Test(gate_small, met_only_when_recorded) {
  char dir[512];
  path_in(dir, sizeof dir, tmpdir, "reports-blocked");
  vqc_spawn_result r = run_with_blocked(dir, "report.md");
  cr_expect_eq(r.code, 3, "exit %d; stderr: %s", r.code, r.err);
  cr_expect_null(strstr(r.out, "): met"), "stdout says met: %s", r.out);
  cr_expect_not_null(strstr(r.out, "could not be recorded"), "stdout: %s",
                     r.out);
  cr_expect_not_null(strstr(r.err, "could not be recorded"), "stderr: %s",
                     r.err);
  vqc_spawn_result_free(&r);

  path_in(dir, sizeof dir, tmpdir, "run-json-blocked");
  r = run_with_blocked(dir, "run.json");
  cr_expect_eq(r.code, 3, "exit %d; stderr: %s", r.code, r.err);
  cr_expect_null(strstr(r.out, "met"), "stdout says met: %s", r.out);
  cr_expect_not_null(strstr(r.err, "could not be recorded"), "stderr: %s",
                     r.err);
  vqc_spawn_result_free(&r);
}
