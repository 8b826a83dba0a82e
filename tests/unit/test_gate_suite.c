/* test_gate_suite.c: a run or suite whose training did not finish is never
 * a pass, and a suite that is told to stop stops everything it started
 * (issue 9, "never a false green"). Runs the built vqcheck (vqc_test_cli(),
 * or $VQC_TEST_CLI to try another build) as a child process, and calls the
 * rule both commands share (harness/cli/run_options.h) directly:
 *
 *   judge_*            vqc_run_judge_training: every step ran: COMPLETE;
 *                      out of memory at step 0 of a clean scenario, or a
 *                      timeout nothing explains: FAILED with "training
 *                      stopped at step S of N on rank R (...)"; a timeout
 *                      with the deadlock the scenario expects: EXPLAINED;
 *                      a stop explained only by a finding the scenario does
 *                      not expect, or an OK status short of the steps:
 *                      FAILED;
 *   suite_stop_*       `vqcheck suite` on unsynced_dropout_seed with only
 *                      its deadlock expected: training stops at step 2 on
 *                      the shape mismatch, which the expectation does not
 *                      name, so the case fails (it used to pass, exit 0)
 *                      with the reason in the table, --json and junit.xml;
 *   suite_exit_3_*     a child that trained every step but exited 3 (its
 *                      reports could not be written) is not a pass, though
 *                      its run.json is clean (it used to pass);
 *   run_stop_*         `vqcheck run` on the same scenario never says
 *                      "expectation ... met" and says why training stopped
 *                      on stderr, with --quiet and with --json too (it used
 *                      to print "met", and nothing at all with --quiet);
 *   suite_sigterm / suite_sigint
 *                      a suite of three long scenarios gets the signal
 *                      while the first runs: it exits 143 / 130, no process
 *                      of the child's group is left, and junit.xml lists the
 *                      interrupted scenario and the two not run as not
 *                      passed. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "findings.h"
#include "run_options.h"
#include "scenario.h"
#include "spawn_capture.h"
#include "test_paths.h"

/* ---- helpers */

static char tmpdir[256];

static void make_tmpdir(void) {
  cr_assert(vqc_test_temp_dir(tmpdir, sizeof tmpdir,
                              "/tmp/vqc-test-gate-suite-XXXXXX") != NULL,
            "mkdtemp: %s", strerror(errno));
}

static void remove_tmpdir(void) { vqc_test_remove_dir(tmpdir); }

TestSuite(gate_suite, .init = make_tmpdir, .fini = remove_tmpdir,
          .timeout = 120);

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

static const char *shipped(char *buf, size_t n, const char *name) {
  snprintf(buf, n, "%s/scenarios/%s.yaml", vqc_test_source_dir(), name);
  return buf;
}

/* Writes dir/file: the shipped scenario `name` with its lines from the one
 * starting with `from` (e.g. "steps:" or "expect:") to the end replaced by
 * `tail` and its name line by "name: <new_name>". */
static void write_variant(const char *dir, const char *file, const char *name,
                          const char *new_name, const char *from,
                          const char *tail) {
  char src[512];
  char *text = vqc_read_file(shipped(src, sizeof src, name));
  cr_assert_not_null(text, "cannot read %s", src);
  char key[64];
  snprintf(key, sizeof key, "\n%s", from);
  char *cut = strstr(text, key);
  cr_assert_not_null(cut, "%s has no %s line", src, from);
  cut[1] = '\0';
  char *body = strchr(text, '\n'); /* after "name: ..." */
  cr_assert_not_null(body);
  char path[600];
  FILE *f = fopen(path_in(path, sizeof path, dir, file), "w");
  cr_assert_not_null(f);
  fprintf(f, "name: %s%s%s", new_name, body, tail);
  cr_assert_eq(fclose(f), 0);
  free(text);
}

/* ---- the rule (run_options.h) */

static void load(const char *name, vqc_scenario *sc) {
  char path[512];
  cr_assert_eq(vqc_scenario_load(shipped(path, sizeof path, name), sc), VQC_OK,
               "%s", vqc_last_error());
}

static void add(vqc_findings *f, vqc_finding_kind kind, int64_t step) {
  vqc_finding x;
  vqc_finding_init(&x, kind, step, "a finding");
  cr_assert_eq(vqc_findings_add(f, &x), VQC_OK);
}

Test(gate_suite, judge_complete) {
  vqc_scenario sc;
  load("skip_weight_sync-clean", &sc);
  vqc_run_training t = {VQC_OK, -1, sc.steps, ""};
  char why[1024] = "x";
  cr_assert_eq(vqc_run_judge_training(&sc, &t, NULL, why, sizeof why),
               VQC_TRAINING_COMPLETE);
  cr_assert_str_eq(why, "");
}

Test(gate_suite, judge_out_of_memory) {
  vqc_scenario sc;
  load("skip_weight_sync-clean", &sc);
  vqc_findings f;
  vqc_findings_init(&f);
  vqc_run_training t = {VQC_ENOMEM, 1, 0,
                        "rank 1: building the model: runner.c:12: "
                        "VQC_ENOMEM: no memory for (16384, 16384)"};
  char why[1024];
  cr_assert_eq(vqc_run_judge_training(&sc, &t, &f, why, sizeof why),
               VQC_TRAINING_FAILED);
  cr_assert_not_null(strstr(why, "training stopped at step 0 of 3 on rank 1 "
                                 "(out of memory): building the model"),
                     "%s", why);
  cr_assert_null(strstr(why, "runner.c"), "internal location kept: %s", why);
  vqc_findings_free(&f);
}

Test(gate_suite, judge_timeout) {
  vqc_scenario clean, dl;
  load("seed_sync_some_ranks-clean", &clean);
  load("seed_sync_some_ranks", &dl); /* expects a deadlock at step 1 */
  vqc_run_training t = {VQC_ETIMEOUT, 0, 1, "rank 0: timed out"};
  vqc_findings none, deadlock, divergence;
  vqc_findings_init(&none);
  vqc_findings_init(&deadlock);
  vqc_findings_init(&divergence);
  add(&deadlock, VQC_FINDING_DEADLOCK, 1);
  add(&divergence, VQC_FINDING_DIVERGENCE, 0);
  char why[1024];
  /* No finding: nothing explains it. */
  cr_assert_eq(vqc_run_judge_training(&clean, &t, &none, why, sizeof why),
               VQC_TRAINING_FAILED);
  cr_assert_not_null(strstr(why, "at step 1 of 3 on rank 0"), "%s", why);
  /* A deadlock, but the scenario expects none: it explains nothing the
   * scenario asked for. */
  cr_assert_eq(vqc_run_judge_training(&clean, &t, &deadlock, why, sizeof why),
               VQC_TRAINING_FAILED);
  /* The expected deadlock: the stop is the point of the scenario. */
  cr_assert_eq(vqc_run_judge_training(&dl, &t, &deadlock, why, sizeof why),
               VQC_TRAINING_EXPLAINED);
  cr_assert_not_null(strstr(why, "the expected deadlock explains it"), "%s",
                     why);
  /* A finding that cannot stop training does not explain a timeout. */
  cr_assert_eq(vqc_run_judge_training(&dl, &t, &divergence, why, sizeof why),
               VQC_TRAINING_FAILED);
  /* Out of memory is never explained, not even by the expected kind. */
  vqc_run_training oom = {VQC_ENOMEM, 0, 1, "rank 0: no memory"};
  cr_assert_eq(vqc_run_judge_training(&dl, &oom, &deadlock, why, sizeof why),
               VQC_TRAINING_FAILED);
  vqc_findings_free(&none);
  vqc_findings_free(&deadlock);
  vqc_findings_free(&divergence);
}

Test(gate_suite, judge_short_without_error) {
  vqc_scenario sc;
  load("skip_weight_sync-clean", &sc);
  vqc_run_training t = {VQC_OK, -1, 2, ""};
  char why[1024];
  cr_assert_eq(vqc_run_judge_training(&sc, &t, NULL, why, sizeof why),
               VQC_TRAINING_FAILED);
  cr_assert_not_null(strstr(why, "2 of 3 steps"), "%s", why);
}

/* ---- a stop the expectation does not explain, end to end */

/* unsynced_dropout_seed with only its deadlock expected: training stops at
 * step 2 of 8 on the shape mismatch (VQC_ESHAPE), which the expectation
 * does not name. The deadlock is found, so the expectation alone holds. */
static void write_unexplained(const char *dir) {
  write_variant(dir, "unexplained.yaml", "unsynced_dropout_seed",
                "unexplained", "expect:", "expect:\n  - {kind: deadlock}\n");
}

Test(gate_suite, suite_stop_not_explained) {
  char scdir[512], out[512];
  path_in(scdir, sizeof scdir, tmpdir, "scenarios");
  path_in(out, sizeof out, tmpdir, "out");
  cr_assert_eq(mkdir(scdir, 0777), 0);
  write_unexplained(scdir);
  vqc_spawn_result r = run_cli("suite", scdir, "--out", out, NULL);
  cr_expect_eq(r.code, 1, "exit %d\nstdout: %s\nstderr: %s", r.code, r.out,
               r.err);
  cr_expect_not_null(strstr(r.out, "0 passed, 1 failed"), "stdout: %s", r.out);
  cr_expect_not_null(strstr(r.out, "training stopped at step 2 of 8"),
                     "stdout: %s", r.out);
  vqc_spawn_result_free(&r);
  char path[600];
  char *junit = vqc_read_file(path_in(path, sizeof path, out, "junit.xml"));
  cr_assert_not_null(junit);
  cr_expect_not_null(strstr(junit, "training stopped at step 2 of 8"), "%s",
                     junit);
  free(junit);
  char *md = vqc_read_file(path_in(path, sizeof path, out, "report.md"));
  cr_assert_not_null(md);
  cr_expect_not_null(strstr(md, "training stopped at step 2 of 8"), "%s", md);
  free(md);

  /* --json: the case, not passed, with the reason. */
  r = run_cli("suite", scdir, "--out", out, "--json", NULL);
  cr_expect_eq(r.code, 1, "exit %d; stderr: %s", r.code, r.err);
  json_error_t err;
  json_t *doc = json_loads(r.out, 0, &err);
  cr_assert_not_null(doc, "not JSON (%s): %s", err.text, r.out);
  json_t *c0 = json_array_get(json_object_get(doc, "cases"), 0);
  cr_expect(json_is_false(json_object_get(c0, "passed")), "%s", r.out);
  const char *msg = json_string_value(json_object_get(c0, "message"));
  cr_expect(msg && strstr(msg, "training stopped at step 2 of 8"), "%s",
            r.out);
  json_decref(doc);
  vqc_spawn_result_free(&r);
}

/* A child that trained every step but then could not write its reports
 * (a directory named report.html in its run directory makes the atomic
 * rename fail, as a full disk would) exits 3 with a clean run.json: it
 * used to pass on run.json alone. */
Test(gate_suite, suite_exit_3_after_training_is_not_a_pass) {
  char scdir[512], out[512], sub[600], path[700], sc[512];
  path_in(scdir, sizeof scdir, tmpdir, "scenarios");
  path_in(out, sizeof out, tmpdir, "out");
  path_in(sub, sizeof sub, out, "skip_weight_sync-clean");
  cr_assert_eq(mkdir(scdir, 0777), 0);
  char *text = vqc_read_file(shipped(sc, sizeof sc, "skip_weight_sync-clean"));
  cr_assert_not_null(text);
  FILE *f = fopen(path_in(path, sizeof path, scdir, "a.yaml"), "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
  free(text);
  /* OUT and OUT/<scenario> as an earlier suite left them (marked). */
  cr_assert_eq(mkdir(out, 0777), 0);
  cr_assert_eq(mkdir(sub, 0777), 0);
  const char *marked[2] = {out, sub};
  for (int i = 0; i < 2; i++) {
    f = fopen(path_in(path, sizeof path, marked[i], ".vqcheck-run"), "w");
    cr_assert_not_null(f);
    fputs("vqcheck run directory\n", f);
    fclose(f);
  }
  cr_assert_eq(mkdir(path_in(path, sizeof path, sub, "report.html"), 0777), 0);
  vqc_spawn_result r = run_cli("suite", scdir, "--out", out, NULL);
  cr_expect_eq(r.code, 1, "exit %d\nstdout: %s\nstderr: %s", r.code, r.out,
               r.err);
  cr_expect_not_null(strstr(r.out, "0 passed, 1 failed"), "stdout: %s", r.out);
  cr_expect_not_null(strstr(r.out, "the run ended with exit 3 after training"),
                     "stdout: %s", r.out);
  vqc_spawn_result_free(&r);
}

Test(gate_suite, run_stop_not_explained) {
  write_unexplained(tmpdir);
  char sc[600], out[512];
  path_in(sc, sizeof sc, tmpdir, "unexplained.yaml");
  path_in(out, sizeof out, tmpdir, "out");
  vqc_spawn_result r = run_cli("run", sc, "--out", out, NULL);
  cr_expect_neq(r.code, 0, "a run that stopped exited 0");
  cr_expect_null(strstr(r.out, ": met"), "stdout: %s", r.out);
  cr_expect_not_null(strstr(r.out, "expectation: NOT met"), "stdout: %s",
                     r.out);
  cr_expect_not_null(strstr(r.err, "vqcheck run: training stopped at step 2 "
                                   "of 8"),
                     "stderr: %s", r.err);
  vqc_spawn_result_free(&r);

  /* --quiet: nothing on stdout, but the reason on stderr. */
  r = run_cli("run", sc, "--out", out, "--quiet", NULL);
  cr_expect_neq(r.code, 0);
  cr_expect_str_eq(r.out, "");
  cr_expect_not_null(strstr(r.err, "training stopped at step 2 of 8"),
                     "stderr: %s", r.err);
  vqc_spawn_result_free(&r);

  /* --json: the document alone on stdout, the reason on stderr. */
  r = run_cli("run", sc, "--out", out, "--json", NULL);
  cr_expect_neq(r.code, 0);
  json_error_t err;
  json_t *doc = json_loads(r.out, 0, &err);
  cr_expect_not_null(doc, "not JSON (%s): %s", err.text, r.out);
  json_decref(doc);
  cr_expect_not_null(strstr(r.err, "training stopped at step 2 of 8"),
                     "stderr: %s", r.err);
  vqc_spawn_result_free(&r);
}

/* ---- signals */

static bool exists(const char *dir, const char *name) {
  char path[1024];
  struct stat st;
  return stat(path_in(path, sizeof path, dir, name), &st) == 0;
}

/* Three scenarios of a million steps each; starts a suite on them in the
 * background, waits until the first one trains, sends sig, and checks what
 * the brief promises. */
static void interrupt_suite(int sig, int want_code, const char *sig_name) {
  char scdir[512], out[512];
  path_in(scdir, sizeof scdir, tmpdir, "scenarios");
  path_in(out, sizeof out, tmpdir, "out");
  cr_assert_eq(mkdir(scdir, 0777), 0);
  const char *names[3] = {"long-a", "long-b", "long-c"};
  for (int i = 0; i < 3; i++) {
    char file[64];
    snprintf(file, sizeof file, "%s.yaml", names[i]);
    write_variant(scdir, file, "skip_weight_sync-clean", names[i], "steps:",
                  "steps: 1000000\nbatch: 16\nseed: 1\nfault: none\n"
                  "expect: clean\n");
  }
  char log[600];
  path_in(log, sizeof log, tmpdir, "suite.out");
  pid_t suite = fork();
  cr_assert_geq(suite, 0);
  if (suite == 0) {
    setpgid(0, 0);
    if (!freopen(log, "w", stdout) || dup2(fileno(stdout), 2) < 0) _exit(126);
    execl(vqc_test_cli(), vqc_test_cli(), "suite", scdir, "--out", out,
          (char *)NULL);
    _exit(127);
  }
  setpgid(suite, suite);
  /* The first scenario trains once its traces appear. */
  char sub[600];
  path_in(sub, sizeof sub, out, "long-a");
  for (int i = 0; i < 3000 && !exists(sub, "rank-0.trace.jsonl"); i++) {
    struct timespec nap = {0, 10 * 1000 * 1000};
    nanosleep(&nap, NULL);
  }
  pid_t kids[8];
  const int nkids = vqc_test_children(suite, kids, 8);
  cr_assert_eq(nkids, 1, "the suite has %d children", nkids);
  const pid_t child = kids[0]; /* its process group's id too */
  cr_assert_eq(kill(suite, sig), 0);
  int st = 0;
  pid_t w;
  for (int i = 0; i < 3000; i++) { /* 30 s: more than the 5 s grace */
    w = waitpid(suite, &st, WNOHANG);
    if (w == suite) break;
    struct timespec nap = {0, 10 * 1000 * 1000};
    nanosleep(&nap, NULL);
  }
  if (w != suite) {
    kill(-suite, SIGKILL);
    waitpid(suite, &st, 0);
  }
  /* Whatever the suite did, nothing of the child may run on after the
   * test; but first, note whether it did. */
  const bool group_gone = kill(-child, 0) != 0 && errno == ESRCH;
  if (!group_gone) kill(-child, SIGKILL);
  char *text = vqc_read_file(log);
  cr_expect(w == suite, "the suite did not end within 30 s");
  cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == want_code,
            "the suite ended with status %#x (want exit %d); output:\n%s", st,
            want_code, text ? text : "");
  cr_expect(group_gone, "the child's process group %d outlived the suite",
            (int)child);
  cr_expect(text && strstr(text, "0 passed, 3 failed"), "output:\n%s",
            text ? text : "");
  free(text);
  char path[600];
  char *junit = vqc_read_file(path_in(path, sizeof path, out, "junit.xml"));
  cr_assert_not_null(junit, "no junit.xml after the %s", sig_name);
  char interrupted[64];
  snprintf(interrupted, sizeof interrupted, "interrupted by %s", sig_name);
  cr_expect_not_null(strstr(junit, interrupted), "%s", junit);
  cr_expect_not_null(strstr(junit, "not run"), "%s", junit);
  cr_expect_not_null(strstr(junit, "tests=\"3\" failures=\"0\" errors=\"3\""),
                     "%s", junit);
  free(junit);
}

Test(gate_suite, suite_sigterm) { interrupt_suite(SIGTERM, 143, "SIGTERM"); }

Test(gate_suite, suite_sigint) { interrupt_suite(SIGINT, 130, "SIGINT"); }
