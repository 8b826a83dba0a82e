/* test_gate_owner.c: one ownership rule for every command that writes
 * into a directory (checkers/rundir.h "Links" and "Commands that write
 * into a directory"; vqc/fsutil.h "Links"), as a hostile user meets it.
 * Runs the built vqcheck (vqc_test_cli()) as a child process on the
 * shipped scenarios (2 ranks, 3 steps: a fraction of a second each) and
 * checks, each against the old behaviour it replaces:
 *
 *   compare_into_run_refused  `compare RUN --out RUN` on a run with
 *                             findings exits 2 saying why (another run's
 *                             verdict) and what to do (another --out); the
 *                             run's run.json is byte for byte the same and
 *                             `report RUN` still exits 1 (it used to be
 *                             replaced by the comparison: exit 0);
 *   link_<file>               in a run directory vqcheck made, a rank file
 *                             that is a symbolic link to a file outside
 *                             (trace, live record, ledger dump, status
 *                             dump, bridge findings) makes `run --out` exit
 *                             2 naming the link; the file it points to is
 *                             untouched and the link is still a link (the
 *                             trace and live record used to be truncated
 *                             and overwritten through it, the others
 *                             silently replaced);
 *   link_suite_log            the same for the vqcheck.log a suite writes
 *                             in each scenario's directory;
 *   report_refuses_foreign    `report DIR` in a directory vqcheck did not
 *                             make, holding a user's report.html, report.md
 *                             and junit.xml, exits 2 naming one, and keeps
 *                             all three (they used to be overwritten); the
 *                             same directory without them, and a run
 *                             directory of vqcheck's, still get reports;
 *   compare_race              100 times, three `compare TRACES --out NEW`
 *                             started at the same instant on a new NEW: one
 *                             or more succeed, the others are refused as
 *                             "in use", and NEW keeps vqcheck's marker and
 *                             lock file (a loser's cleanup used to delete
 *                             the winner's, in about 3 of 100 tries, and
 *                             NEW was then refused as not vqcheck's).
 *
 * $VQC_TEST_CLI, when set, names the vqcheck to test instead of this
 * build's: a build from before the fix fails every case. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spawn_capture.h"
#include "test_paths.h"

/* ---- helpers */

static char tmpdir[256];

static void make_tmpdir(void) {
  cr_assert(vqc_test_temp_dir(tmpdir, sizeof tmpdir,
                              "/tmp/vqc-test-gate-owner-XXXXXX") != NULL,
            "mkdtemp: %s", strerror(errno));
}

static void remove_tmpdir(void) { vqc_test_remove_dir(tmpdir); }

TestSuite(gate_owner, .init = make_tmpdir, .fini = remove_tmpdir,
          .timeout = 240);

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

/* <dir>/<name>'s text (malloc'd; the caller frees). */
static char *file_text(const char *dir, const char *name) {
  char path[1024];
  char *text = vqc_read_file(path_in(path, sizeof path, dir, name));
  cr_assert_not_null(text, "cannot read %s", path);
  return text;
}

/* Asserts <dir>/<name> holds exactly text. */
static void assert_file_text(const char *dir, const char *name,
                             const char *text) {
  char *got = file_text(dir, name);
  cr_expect_str_eq(got, text, "%s/%s", dir, name);
  free(got);
}

/* Whether <dir>/<name> exists as a regular file (not a link to one). */
static bool is_file(const char *dir, const char *name) {
  char path[1024];
  struct stat st;
  return lstat(path_in(path, sizeof path, dir, name), &st) == 0 &&
         S_ISREG(st.st_mode);
}

static const char *scenario(char *buf, size_t n, const char *name) {
  snprintf(buf, n, "%s/scenarios/%s.yaml", vqc_test_source_dir(), name);
  return buf;
}

/* `vqcheck run <scenario> --out <out> --quiet`, asserted to exit `code`. */
static void run_scenario(const char *name, const char *out, int code) {
  char sc[512];
  vqc_spawn_result r = run_cli("run", scenario(sc, sizeof sc, name), "--out",
                               out, "--quiet", NULL);
  cr_assert_eq(r.code, code, "run %s: exit %d; stderr: %s", name, r.code,
               r.err);
  vqc_spawn_result_free(&r);
}

/* ---- a red run is never turned green */

Test(gate_owner, compare_into_run_refused) {
  char run[512];
  path_in(run, sizeof run, tmpdir, "run");
  /* nograd_all_gather: gradient_mismatch findings, exit 1. */
  run_scenario("nograd_all_gather", run, 1);
  char *before = file_text(run, "run.json");
  cr_assert_not_null(strstr(before, "gradient_mismatch"), "%s", before);

  vqc_spawn_result r = run_cli("compare", run, "--out", run, "--quiet", NULL);
  cr_expect_eq(r.code, 2, "exit %d; stderr: %s", r.code, r.err);
  cr_expect_not_null(strstr(r.err, "verdict of another run"), "stderr: %s",
                     r.err);
  cr_expect_not_null(strstr(r.err, "pass another --out"), "stderr: %s",
                     r.err);
  vqc_spawn_result_free(&r);
  assert_file_text(run, "run.json", before);
  free(before);

  r = run_cli("report", run, "--quiet", NULL);
  cr_expect_eq(r.code, 1, "report after compare: exit %d (a red run turned "
               "green?); stderr: %s", r.code, r.err);
  vqc_spawn_result_free(&r);

  /* Another --out, as the message says, compares the same traces. */
  char other[600];
  snprintf(other, sizeof other, "%s-compare", run);
  r = run_cli("compare", run, "--out", other, "--quiet", NULL);
  cr_expect(r.code == 0 || r.code == 1, "compare --out %s: exit %d; %s",
            other, r.code, r.err);
  vqc_spawn_result_free(&r);
  cr_expect(is_file(other, "run.json"), "no comparison in %s", other);
}

/* ---- no write through a link */

/* A run directory vqcheck made (a clean run), then `link` in it made a
 * symbolic link to a file of the user's outside it; the next `run --out`
 * must exit 2 naming the link and leave the user's file and the link. */
static void refuses_link(const char *link) {
  char run[512], target[512], linkpath[1024];
  path_in(run, sizeof run, tmpdir, "run");
  path_in(target, sizeof target, tmpdir, "precious.txt");
  run_scenario("skip_weight_sync-clean", run, 0);
  put_file(tmpdir, "precious.txt", "the user's file\n");
  path_in(linkpath, sizeof linkpath, run, link);
  unlink(linkpath); /* the run's own file of that name, if any */
  cr_assert_eq(symlink(target, linkpath), 0, "symlink: %s", strerror(errno));

  char sc[512];
  vqc_spawn_result r = run_cli("run", scenario(sc, sizeof sc,
                                               "skip_weight_sync-clean"),
                               "--out", run, "--quiet", NULL);
  cr_expect_eq(r.code, 2, "exit %d; stderr: %s", r.code, r.err);
  cr_expect_not_null(strstr(r.err, "refusing to write through the link"),
                     "stderr: %s", r.err);
  cr_expect_not_null(strstr(r.err, link), "stderr: %s", r.err);
  cr_expect_not_null(strstr(r.err, "remove it"), "stderr: %s", r.err);
  vqc_spawn_result_free(&r);
  assert_file_text(tmpdir, "precious.txt", "the user's file\n");
  struct stat st;
  cr_expect(lstat(linkpath, &st) == 0 && S_ISLNK(st.st_mode),
            "%s is no longer the link", linkpath);
}

Test(gate_owner, link_trace) { refuses_link("rank-0.trace.jsonl"); }
Test(gate_owner, link_live) { refuses_link("rank-1.live.jsonl"); }
Test(gate_owner, link_ledger_dump) { refuses_link("rank-0.ledger.jsonl"); }
Test(gate_owner, link_status_dump) { refuses_link("rank-1.status.json"); }
Test(gate_owner, link_findings) { refuses_link("rank-0.findings.jsonl"); }

Test(gate_owner, link_suite_log) {
  char scdir[512], out[512], sc[512], target[512];
  path_in(scdir, sizeof scdir, tmpdir, "scenarios");
  path_in(out, sizeof out, tmpdir, "suite");
  path_in(target, sizeof target, tmpdir, "precious.txt");
  cr_assert_eq(mkdir(scdir, 0777), 0);
  char *text = vqc_read_file(scenario(sc, sizeof sc, "skip_weight_sync-clean"));
  cr_assert_not_null(text);
  put_file(scdir, "a.yaml", text);
  free(text);
  vqc_spawn_result r = run_cli("suite", scdir, "--out", out, "--quiet", NULL);
  cr_assert_eq(r.code, 0, "first suite: exit %d; stderr: %s", r.code, r.err);
  vqc_spawn_result_free(&r);
  char log[1024];
  path_in(log, sizeof log, out, "skip_weight_sync-clean/vqcheck.log");
  cr_assert(is_file(out, "skip_weight_sync-clean/vqcheck.log"), "no %s", log);
  put_file(tmpdir, "precious.txt", "the user's file\n");
  cr_assert_eq(unlink(log), 0);
  cr_assert_eq(symlink(target, log), 0, "symlink: %s", strerror(errno));

  r = run_cli("suite", scdir, "--out", out, "--quiet", NULL);
  cr_expect_neq(r.code, 0, "a suite whose case could not run passed; "
                "stderr: %s", r.err);
  cr_expect_not_null(strstr(r.err, "refusing to write through the link"),
                     "stderr: %s", r.err);
  vqc_spawn_result_free(&r);
  assert_file_text(tmpdir, "precious.txt", "the user's file\n");
}

/* ---- report writes only where vqcheck may */

Test(gate_owner, report_refuses_foreign) {
  char run[512], mine[512];
  path_in(run, sizeof run, tmpdir, "run");
  path_in(mine, sizeof mine, tmpdir, "mine");
  run_scenario("skip_weight_sync-clean", run, 0);
  /* A directory of the user's (no marker) with a copy of the run.json and
   * reports of the user's own. */
  cr_assert_eq(mkdir(mine, 0777), 0);
  char *verdict = file_text(run, "run.json");
  put_file(mine, "run.json", verdict);
  free(verdict);
  put_file(mine, "report.html", "<p>my report</p>\n");
  put_file(mine, "report.md", "# my notes\n");
  put_file(mine, "junit.xml", "<testsuites/>\n");

  vqc_spawn_result r = run_cli("report", mine, "--quiet", NULL);
  cr_expect_eq(r.code, 2, "exit %d; stderr: %s", r.code, r.err);
  cr_expect_not_null(strstr(r.err, "vqcheck did not write it"), "stderr: %s",
                     r.err);
  cr_expect(strstr(r.err, "report.md") || strstr(r.err, "report.html") ||
                strstr(r.err, "junit.xml"),
            "the message names no file: %s", r.err);
  vqc_spawn_result_free(&r);
  assert_file_text(mine, "report.html", "<p>my report</p>\n");
  assert_file_text(mine, "report.md", "# my notes\n");
  assert_file_text(mine, "junit.xml", "<testsuites/>\n");

  /* Without the user's reports, that directory gets vqcheck's; so does
   * vqcheck's own run directory, again and again. */
  char path[1024];
  unlink(path_in(path, sizeof path, mine, "report.html"));
  unlink(path_in(path, sizeof path, mine, "report.md"));
  unlink(path_in(path, sizeof path, mine, "junit.xml"));
  for (int i = 0; i < 2; i++) {
    r = run_cli("report", mine, "--quiet", NULL);
    cr_expect_eq(r.code, 0, "report %d in %s: exit %d; stderr: %s", i, mine,
                 r.code, r.err);
    vqc_spawn_result_free(&r);
    r = run_cli("report", run, "--quiet", NULL);
    cr_expect_eq(r.code, 0, "report %d in %s: exit %d; stderr: %s", i, run,
                 r.code, r.err);
    vqc_spawn_result_free(&r);
  }
  cr_expect(is_file(mine, "report.html"), "no report written in %s", mine);
}

/* ---- concurrent writers */

enum { RACE_TRIES = 100, RACE_WRITERS = 3 };

Test(gate_owner, compare_race, .timeout = 280) {
  char run[512], traces[512];
  path_in(run, sizeof run, tmpdir, "run");
  path_in(traces, sizeof traces, tmpdir, "traces");
  run_scenario("skip_weight_sync-clean", run, 0);
  /* The traces alone, as another program would leave them. */
  cr_assert_eq(mkdir(traces, 0777), 0);
  for (int r = 0; r < 2; r++) {
    char name[64];
    snprintf(name, sizeof name, "rank-%d.trace.jsonl", r);
    char *t = file_text(run, name);
    put_file(traces, name, t);
    free(t);
  }

  int lost_marker = 0, lost_lock = 0, no_winner = 0, odd_exit = 0;
  char odd[512] = "";
  for (int t = 0; t < RACE_TRIES; t++) {
    char out[600];
    snprintf(out, sizeof out, "%s/new-%d", tmpdir, t);
    /* All writers start at once: each child waits on the pipe, and the
     * parent closes it when every one is forked. */
    int go[2];
    cr_assert_eq(pipe(go), 0);
    pid_t pids[RACE_WRITERS];
    for (int w = 0; w < RACE_WRITERS; w++) {
      pids[w] = fork();
      cr_assert_geq(pids[w], 0, "fork: %s", strerror(errno));
      if (pids[w] == 0) {
        close(go[1]);
        char c;
        while (read(go[0], &c, 1) < 0 && errno == EINTR) {
        }
        if (!freopen("/dev/null", "w", stdout) ||
            !freopen("/dev/null", "w", stderr))
          _exit(126);
        const char *argv[] = {vqc_test_cli(), "compare", traces, "--out",
                              out, "--quiet", NULL};
        execv(argv[0], (char *const *)argv);
        _exit(127);
      }
    }
    close(go[0]);
    close(go[1]);
    int ok = 0;
    for (int w = 0; w < RACE_WRITERS; w++) {
      int status = 0;
      cr_assert_eq(waitpid(pids[w], &status, 0), pids[w]);
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
      if (code == 0) ok++;
      else if (code != 2 && !odd[0])
        snprintf(odd, sizeof odd, "try %d: a writer exited %d", t, code);
      odd_exit += code != 0 && code != 2;
    }
    no_winner += ok == 0;
    lost_marker += !is_file(out, ".vqcheck-run");
    lost_lock += !is_file(out, ".vqcheck.lock");
  }
  cr_expect_eq(lost_marker, 0, "%d of %d tries left NEW without vqcheck's "
               "marker (a loser removed the winner's)", lost_marker,
               RACE_TRIES);
  cr_expect_eq(lost_lock, 0, "%d of %d tries left NEW without its lock "
               "file (a loser removed the winner's)", lost_lock, RACE_TRIES);
  cr_expect_eq(no_winner, 0, "%d of %d tries: no writer succeeded",
               no_winner, RACE_TRIES);
  cr_expect_eq(odd_exit, 0, "%s", odd);
}
