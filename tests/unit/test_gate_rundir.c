/* test_gate_rundir.c: `--out` as a user meets it (issue 9, "never a false
 * green", run-directory safety). Runs the built vqcheck (vqc_test_cli()) as
 * a child process on the shipped skip_weight_sync-clean scenario (2 ranks,
 * 3 steps, a fraction of a second) and checks, each against the old
 * behaviour it replaces:
 *
 *   run_keeps_foreign_files   `run --out DIR` on a directory of the user's
 *                             (a checkpoint rank-0.pt) is refused with exit
 *                             2 and a message naming the file; the file is
 *                             still there (it used to be deleted);
 *   suite_keeps_foreign_files the same for `suite --out DIR` (its junit.xml
 *                             used to be overwritten);
 *   out_empty                 `--out ""` is misuse (exit 2) for run and
 *                             suite, not the default directory;
 *   run_reuses_its_own_dir    a directory vqcheck made is used again: the
 *                             earlier run's files are replaced, a file the
 *                             user put there since is kept;
 *   run_in_use / suite_in_use a second run (suite) on the --out of one that
 *                             is still running exits 2 naming the holder's
 *                             pid, and the first one's files are intact.
 *
 * $VQC_TEST_CLI, when set, names the vqcheck to test instead of this
 * build's: VQC_TEST_CLI=build/harness/vqcheck (a build from before the
 * fix) makes every case fail. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "spawn_capture.h"
#include "test_paths.h"

/* ---- helpers */

static char tmpdir[256];

static void make_tmpdir(void) {
  cr_assert(vqc_test_temp_dir(tmpdir, sizeof tmpdir,
                              "/tmp/vqc-test-gate-rundir-XXXXXX") != NULL,
            "mkdtemp: %s", strerror(errno));
}

static void remove_tmpdir(void) { vqc_test_remove_dir(tmpdir); }

TestSuite(gate_rundir, .init = make_tmpdir, .fini = remove_tmpdir,
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

/* Asserts <dir>/<name> holds exactly text. */
static void assert_file_text(const char *dir, const char *name,
                             const char *text) {
  char path[1024];
  char *got = vqc_read_file(path_in(path, sizeof path, dir, name));
  cr_assert_not_null(got, "%s is gone", path);
  cr_assert_str_eq(got, text, "%s", path);
  free(got);
}

static bool exists(const char *dir, const char *name) {
  char path[1024];
  struct stat st;
  return stat(path_in(path, sizeof path, dir, name), &st) == 0;
}

static const char *scenario(char *buf, size_t n, const char *name) {
  snprintf(buf, n, "%s/scenarios/%s.yaml", vqc_test_source_dir(), name);
  return buf;
}

/* ---- a directory of the user's */

Test(gate_rundir, run_keeps_foreign_files) {
  char out[512], sc[512];
  path_in(out, sizeof out, tmpdir, "out");
  cr_assert_eq(mkdir(out, 0777), 0);
  put_file(out, "rank-0.pt", "a checkpoint");
  vqc_spawn_result r = run_cli("run", scenario(sc, sizeof sc,
                                               "skip_weight_sync-clean"),
                               "--out", out, "--quiet", NULL);
  cr_expect_eq(r.code, 2, "exit %d; stderr: %s", r.code, r.err);
  cr_expect_not_null(strstr(r.err, "refusing to use"), "stderr: %s", r.err);
  cr_expect_not_null(strstr(r.err, "rank-0.pt"), "stderr: %s", r.err);
  cr_expect_not_null(strstr(r.err, "pass a new or empty directory"),
                     "stderr: %s", r.err);
  vqc_spawn_result_free(&r);
  assert_file_text(out, "rank-0.pt", "a checkpoint");
  cr_expect(!exists(out, "run.json"), "a refused directory was written");
}

Test(gate_rundir, suite_keeps_foreign_files) {
  char out[512], scdir[512], sc[512];
  path_in(out, sizeof out, tmpdir, "out");
  path_in(scdir, sizeof scdir, tmpdir, "scenarios");
  cr_assert_eq(mkdir(out, 0777), 0);
  cr_assert_eq(mkdir(scdir, 0777), 0);
  char *text = vqc_read_file(scenario(sc, sizeof sc, "skip_weight_sync-clean"));
  cr_assert_not_null(text);
  put_file(scdir, "a.yaml", text);
  free(text);
  put_file(out, "junit.xml", "the user's own junit.xml");
  put_file(out, "rank-0.pt", "a checkpoint");
  vqc_spawn_result r = run_cli("suite", scdir, "--out", out, "--quiet", NULL);
  cr_expect_eq(r.code, 2, "exit %d; stderr: %s", r.code, r.err);
  cr_expect_not_null(strstr(r.err, "vqcheck suite: refusing to use"),
                     "stderr: %s", r.err);
  vqc_spawn_result_free(&r);
  assert_file_text(out, "junit.xml", "the user's own junit.xml");
  assert_file_text(out, "rank-0.pt", "a checkpoint");
}

Test(gate_rundir, out_empty) {
  char sc[512];
  scenario(sc, sizeof sc, "skip_weight_sync-clean");
  /* In the case's own directory: the old behaviour (the default
   * directory) would show as vqcheck-runs/ there. */
  cr_assert_eq(chdir(tmpdir), 0);
  vqc_spawn_result r = run_cli("run", sc, "--out", "", "--quiet", NULL);
  cr_expect_eq(r.code, 2, "exit %d; stderr: %s", r.code, r.err);
  cr_expect_not_null(strstr(r.err, "--out is empty"), "stderr: %s", r.err);
  vqc_spawn_result_free(&r);
  char scdir[512];
  snprintf(scdir, sizeof scdir, "%s/scenarios", vqc_test_source_dir());
  r = run_cli("suite", scdir, "--out", "", "--quiet", NULL);
  cr_expect_eq(r.code, 2, "exit %d; stderr: %s", r.code, r.err);
  cr_expect_not_null(strstr(r.err, "--out is empty"), "stderr: %s", r.err);
  vqc_spawn_result_free(&r);
  cr_expect(!exists(tmpdir, "vqcheck-runs"), "the default directory was used");
}

Test(gate_rundir, run_reuses_its_own_dir) {
  char out[512], sc[512];
  path_in(out, sizeof out, tmpdir, "out");
  scenario(sc, sizeof sc, "skip_weight_sync-clean");
  vqc_spawn_result r = run_cli("run", sc, "--out", out, "--quiet", NULL);
  cr_assert_eq(r.code, 0, "exit %d; stderr: %s", r.code, r.err);
  vqc_spawn_result_free(&r);
  cr_assert(exists(out, ".vqcheck-run"), "no marker");
  put_file(out, "notes.txt", "mine");
  put_file(out, "rank-9.status.json", "stale");
  put_file(out, "run.json", "stale");
  r = run_cli("run", sc, "--out", out, "--quiet", NULL);
  cr_assert_eq(r.code, 0, "exit %d; stderr: %s", r.code, r.err);
  vqc_spawn_result_free(&r);
  assert_file_text(out, "notes.txt", "mine");
  cr_expect(!exists(out, "rank-9.status.json"), "a stale dump was kept");
  char path[1024];
  char *verdict = vqc_read_file(path_in(path, sizeof path, out, "run.json"));
  cr_assert_not_null(verdict);
  cr_expect_not_null(strstr(verdict, "\"schema_version\""), "%s", verdict);
  free(verdict);
}

/* ---- two at once */

/* Starts `vqcheck args...` (NULL-terminated) in the background in a
 * process group of its own, output to /dev/null. Returns its pid. */
static pid_t start_cli(const char *first, ...) {
  const char *argv[16] = {vqc_test_cli(), first};
  int n = 2;
  va_list ap;
  va_start(ap, first);
  for (const char *a; n < 15 && (a = va_arg(ap, const char *)) != NULL;)
    argv[n++] = a;
  va_end(ap);
  argv[n] = NULL;
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    setpgid(0, 0);
    if (!freopen("/dev/null", "w", stdout) ||
        !freopen("/dev/null", "w", stderr))
      _exit(126);
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  setpgid(pid, pid);
  return pid;
}

/* Waits (up to 30 s) for <dir>/<name> to exist. */
static void wait_for_file(const char *dir, const char *name) {
  for (int i = 0; i < 3000 && !exists(dir, name); i++) {
    struct timespec nap = {0, 10 * 1000 * 1000};
    nanosleep(&nap, NULL);
  }
  cr_assert(exists(dir, name), "%s/%s never appeared", dir, name);
}

/* Ends the background command and what it started: the process groups of
 * its children (the suite puts each child in its own), then its own. */
static void stop_cli(pid_t pid) {
  pid_t kids[16];
  const int n = vqc_test_children(pid, kids, 16);
  for (int i = 0; i < n; i++) kill(-kids[i], SIGKILL);
  kill(-pid, SIGKILL);
  waitpid(pid, NULL, 0);
}

/* A copy of the clean twin that trains (nearly) forever, in dir. */
static void write_slow_scenario(const char *dir, const char *name) {
  char sc[512];
  char *text = vqc_read_file(scenario(sc, sizeof sc, "skip_weight_sync-clean"));
  cr_assert_not_null(text);
  char *steps = strstr(text, "\nsteps: 3\n");
  cr_assert_not_null(steps, "the scenario's steps line changed");
  char *body = strstr(text, "\ndescription:");
  cr_assert_not_null(body);
  char path[600];
  FILE *f = fopen(path_in(path, sizeof path, dir, name), "w");
  cr_assert_not_null(f);
  *steps = '\0';
  fprintf(f, "name: slow%s\nsteps: 1000000\n%s", body, steps + 10);
  cr_assert_eq(fclose(f), 0);
  free(text);
}

Test(gate_rundir, run_in_use) {
  char out[512], sc[512];
  path_in(out, sizeof out, tmpdir, "out");
  write_slow_scenario(tmpdir, "slow.yaml");
  char slow[600];
  path_in(slow, sizeof slow, tmpdir, "slow.yaml");
  pid_t first = start_cli("run", slow, "--out", out, "--quiet", NULL);
  /* Training has started once the traces are there. */
  wait_for_file(out, "rank-0.trace.jsonl");
  vqc_spawn_result r = run_cli("run", scenario(sc, sizeof sc,
                                               "skip_weight_sync-clean"),
                               "--out", out, "--quiet", NULL);
  const bool alive = kill(first, 0) == 0;
  const bool traces = exists(out, "rank-0.trace.jsonl") &&
                      exists(out, "rank-1.trace.jsonl");
  const bool verdict = exists(out, "run.json");
  stop_cli(first);
  char holder[64];
  snprintf(holder, sizeof holder, "in use by pid %d ", (int)first);
  cr_expect_eq(r.code, 2, "exit %d; stderr: %s", r.code, r.err);
  cr_expect_not_null(strstr(r.err, holder), "stderr: %s", r.err);
  cr_expect_not_null(strstr(r.err, "pass another --out"), "stderr: %s",
                     r.err);
  vqc_spawn_result_free(&r);
  cr_expect(alive, "the first run had ended: the test proves nothing");
  cr_expect(traces, "the first run's traces were removed");
  cr_expect(!verdict, "the second run wrote its verdict into the first's "
            "directory");
}

Test(gate_rundir, suite_in_use) {
  char out[512], scdir[512];
  path_in(out, sizeof out, tmpdir, "out");
  path_in(scdir, sizeof scdir, tmpdir, "scenarios");
  cr_assert_eq(mkdir(scdir, 0777), 0);
  write_slow_scenario(scdir, "slow.yaml");
  pid_t first = start_cli("suite", scdir, "--out", out, "--quiet", NULL);
  char sub[600];
  path_in(sub, sizeof sub, out, "slow");
  wait_for_file(sub, "rank-0.trace.jsonl");
  /* The second suite runs a quick scenario: were it let in, it would end
   * (and clear) rather than hang the test. */
  char quick[512], sc[512];
  path_in(quick, sizeof quick, tmpdir, "quick");
  cr_assert_eq(mkdir(quick, 0777), 0);
  char *text = vqc_read_file(scenario(sc, sizeof sc, "skip_weight_sync-clean"));
  cr_assert_not_null(text);
  put_file(quick, "a.yaml", text);
  free(text);
  vqc_spawn_result r = run_cli("suite", quick, "--out", out, "--quiet", NULL);
  const bool traces = exists(sub, "rank-0.trace.jsonl");
  stop_cli(first);
  char holder[64];
  snprintf(holder, sizeof holder, "in use by pid %d ", (int)first);
  cr_expect_eq(r.code, 2, "exit %d; stderr: %s", r.code, r.err);
  cr_expect_not_null(strstr(r.err, holder), "stderr: %s", r.err);
  vqc_spawn_result_free(&r);
  cr_expect(traces, "the first suite's run directory was cleared");
}
