/* test_gate_mpi_deadline.c: a job started by a plain `mpiexec -n 3 vqcheck
 * run` (no vqcheck supervisor: each rank is vqcheck) keeps the gate's
 * deadlines by itself (DESIGN.md "Nothing hangs", "Never a false green";
 * harness/run/runner.c "Deadlines"). Runs the built vqcheck
 * (vqc_test_cli(): $VQC_TEST_CLI tries another build) under the mpiexec
 * CMake found, with the flags the mpi tests use:
 *
 *   stopped_rank_within_timeout_plus_5s
 *       rank 2 of a long run (--timeout 3) gets SIGSTOP mid-training: the
 *       job ends within T + 5 s of the stop (it took 3 T + 10 s and more:
 *       one side-channel deadline of 2 T + 10 s after the data collective's
 *       T, then T + 2 s waiting for rank 2's dump), exits 1, its run.json
 *       names rank 2 in a rank_failure (or deadlock) finding, and the
 *       stopped process is gone (a zombie at most);
 *   rank_that_cannot_start_tells_the_others
 *       rank 1 cannot create its live record (rank-1.live.jsonl is a
 *       directory, which works as root too): the others stop at once, the
 *       job ends in under T s (T = 5; it took 19-28 s: the others waited
 *       out side-channel deadlines in exchanges rank 1 never joined), exits
 *       non-zero, and run.json names rank 1 and says why (the failed rank
 *       and the file);
 *   launched_progress_only_when_asked
 *       with stdout a file, neither `mpiexec -n 3 vqcheck run` nor the
 *       supervised `vqcheck run --backend mpi` prints per-step progress
 *       (as the threads backend: per-step lines only to a terminal; OpenMPI
 *       gives every rank a pseudo-terminal, so the ranks used to print
 *       them); the summary is still there.
 *
 * Skipped (cr_skip_test) where CMake found no mpiexec or the build has no
 * MPI backend. Each case ends its job, with every process it started, even
 * when it fails. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "spawn_capture.h"
#include "test_paths.h"

#ifndef VQC_TEST_MPIEXEC
#define VQC_TEST_MPIEXEC ""
#endif
#ifndef VQC_TEST_MPIEXEC_FLAGS
#define VQC_TEST_MPIEXEC_FLAGS ""
#endif

/* The scenario every case runs (a small autoencoder: a step takes ms). */
#define SCENARIO "/scenarios/skip_weight_sync-clean.yaml"
/* The collective timeout of the stop case, small so the case stays short;
 * the bound asserted is T + 5 s. */
#define STOP_TIMEOUT_S 3
/* Hard limit on any job here: past it the job is killed and the case
 * fails (the old build needs 3 T + 10 s and more). */
#define JOB_LIMIT_S 45.0

static char tmpdir[256];

static void make_tmpdir(void) {
  cr_assert(vqc_test_temp_dir(tmpdir, sizeof tmpdir,
                              "/tmp/vqc-test-gate-mpi-XXXXXX") != NULL,
            "mkdtemp: %s", strerror(errno));
}

static void remove_tmpdir(void) { vqc_test_remove_dir(tmpdir); }

TestSuite(gate_mpi_deadline, .init = make_tmpdir, .fini = remove_tmpdir,
          .timeout = 150);

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void nap_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Skips the case without mpiexec or without the MPI backend. */
static void need_mpi(void) {
  if (VQC_TEST_MPIEXEC[0] == '\0' || access(VQC_TEST_MPIEXEC, X_OK) != 0)
    cr_skip_test("no mpiexec (run scripts/install-deps.sh)");
#if !VQC_TEST_HAVE_MPI
  cr_skip_test("this build has no MPI backend");
#endif
}

/* The scenario's path. */
static const char *scenario(void) {
  static char path[1024];
  snprintf(path, sizeof path, "%s" SCENARIO, vqc_test_source_dir());
  return path;
}

/* A job started in the background: its own process group, stdout and
 * stderr into files under tmpdir. */
typedef struct job {
  pid_t pid;
  char out[512], err[512];
} job;

/* Starts `mpiexec FLAGS -n 3 VQCHECK run SCENARIO ARGS...` (ARGS up to
 * NULL, at most 24), or `VQCHECK run SCENARIO ARGS...` with launcher false
 * (vqcheck supervises then). */
static job start_job(const char *name, bool launcher, const char *first,
                     ...) {
  const char *argv[64];
  int n = 0;
  char flags[256];
  snprintf(flags, sizeof flags, "%s", VQC_TEST_MPIEXEC_FLAGS);
  if (launcher) {
    argv[n++] = VQC_TEST_MPIEXEC;
    for (char *save = NULL, *t = strtok_r(flags, " ", &save); t;
         t = strtok_r(NULL, " ", &save))
      argv[n++] = t;
    argv[n++] = "-n";
    argv[n++] = "3";
  }
  argv[n++] = vqc_test_cli();
  argv[n++] = "run";
  argv[n++] = scenario();
  va_list ap;
  va_start(ap, first);
  for (const char *a = first; a && n < 62; a = va_arg(ap, const char *))
    argv[n++] = a;
  va_end(ap);
  argv[n] = NULL;

  job j;
  snprintf(j.out, sizeof j.out, "%s/%s.out", tmpdir, name);
  snprintf(j.err, sizeof j.err, "%s/%s.err", tmpdir, name);
  fflush(NULL);
  j.pid = fork();
  cr_assert(j.pid >= 0, "fork: %s", strerror(errno));
  if (j.pid == 0) {
    setpgid(0, 0);
    int o = open(j.out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = open(j.err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int in = open("/dev/null", O_RDONLY);
    if (o < 0 || e < 0 || in < 0) _exit(126);
    dup2(in, 0);
    dup2(o, 1);
    dup2(e, 2);
    unsetenv("VQC_DEBUG");
    unsetenv("VQC_PROGRESS"); /* what the test checks is the default */
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  setpgid(j.pid, j.pid);
  return j;
}

/* Waits for the job up to limit_s; kills its group past that. Returns the
 * exit code (128 + signal when killed), -1 when it had to be killed. */
static int wait_job(job *j, double limit_s) {
  const double until = now_s() + limit_s;
  int st = 0;
  for (;;) {
    pid_t r = waitpid(j->pid, &st, WNOHANG);
    if (r == j->pid) break;
    if (now_s() > until) {
      kill(-j->pid, SIGKILL);
      waitpid(j->pid, &st, 0);
      return -1;
    }
    nap_ms(20);
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The pid in rank r's live record in dir once that rank has finished 3
 * steps (mid-training), waiting up to 30 s; 0 if it never does. */
static pid_t rank_pid(const char *dir, int r) {
  char path[600];
  snprintf(path, sizeof path, "%s/rank-%d.live.jsonl", dir, r);
  for (int i = 0; i < 300; i++) {
    char *text = vqc_read_file(path);
    if (text) {
      int steps = 0;
      for (const char *p = text; (p = strstr(p, "\"event\":\"step\"")); p++)
        steps++;
      const char *pid = strstr(text, "\"pid\":");
      long v = pid ? strtol(pid + 6, NULL, 10) : 0;
      free(text);
      if (steps >= 3 && v > 0) return (pid_t)v;
    }
    nap_ms(100);
  }
  return 0;
}

/* The file's text with blanks and newlines removed ("" when missing; the
 * caller frees). */
static char *compact(const char *path) {
  char *t = vqc_read_file(path);
  if (!t) return strdup("");
  char *w = t;
  for (const char *p = t; *p; p++)
    if (*p != ' ' && *p != '\n') *w++ = *p;
  *w = '\0';
  return t;
}

/* The findings of a compacted run.json (the whole text when it has none):
 * what a failed expectation shows, so a flake says what was found. */
static const char *findings_of(const char *run) {
  const char *f = strstr(run, "\"findings\":");
  return f ? f : run;
}

/* The process's state letter ('Z' a zombie), 0 when there is none. */
static char proc_state(pid_t pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');
  return p && p[1] == ' ' ? p[2] : '?';
}

Test(gate_mpi_deadline, stopped_rank_within_timeout_plus_5s) {
  need_mpi();
  char out[512], timeout[16];
  snprintf(out, sizeof out, "%s/stop", tmpdir);
  snprintf(timeout, sizeof timeout, "%d", STOP_TIMEOUT_S);
  job j = start_job("stop", true, "--backend", "mpi", "--ranks", "3",
                    "--steps", "100000", "--timeout", timeout, "--out", out,
                    "--quiet", NULL);
  pid_t victim = rank_pid(out, 2);
  if (victim == 0) {
    kill(-j.pid, SIGKILL);
    waitpid(j.pid, NULL, 0);
    cr_assert_fail("rank 2 never started training (see %s)", j.err);
  }
  kill(victim, SIGSTOP);
  const double t0 = now_s();
  const int code = wait_job(&j, JOB_LIMIT_S);
  const double took = now_s() - t0;
  /* A second's grace for the launcher's last kill to land (as
   * tests/chaos_ranks.sh gives). */
  char state = proc_state(victim);
  for (int i = 0; i < 20 && state != 0 && state != 'Z'; i++) {
    nap_ms(50);
    state = proc_state(victim);
  }
  kill(victim, SIGKILL); /* whatever the outcome: nothing left behind */
  char path[600];
  snprintf(path, sizeof path, "%s/run.json", out);
  char *run = compact(path);
  printf("stopped rank: the job ended %.2f s after SIGSTOP (timeout %d s, "
         "exit %d)\n", took, STOP_TIMEOUT_S, code);
  cr_expect_neq(code, -1, "the job was still running %.0f s after rank 2 "
                "was stopped (killed)", JOB_LIMIT_S);
  cr_expect(took <= STOP_TIMEOUT_S + 5.0, "the job ended %.2f s after rank "
            "2 was stopped, more than the timeout (%d s) + 5 s", took,
            STOP_TIMEOUT_S);
  cr_expect_eq(code, 1, "exit %d, expected 1 (a rank_failure; stderr in %s)",
               code, j.err);
  cr_expect(strstr(run, "\"kind\":\"rank_failure\"") ||
                strstr(run, "\"kind\":\"deadlock\""),
            "run.json has no rank_failure or deadlock finding: %.2000s",
            findings_of(run));
  cr_expect(strstr(run, "\"ranks\":[2]") != NULL,
            "run.json names rank 2 in no finding: %.2000s", findings_of(run));
  cr_expect(state == 0 || state == 'Z', "the stopped rank (pid %ld) is still "
            "there (state %c) after the job ended", (long)victim, state);
  free(run);
}

Test(gate_mpi_deadline, rank_that_cannot_start_tells_the_others) {
  need_mpi();
  char out[512];
  snprintf(out, sizeof out, "%s/nolive", tmpdir);
  /* A run directory vqcheck made (a one-step threads run), in which rank
   * 1's live record is a directory: vqcheck never removes one, and rank 1
   * cannot open it for writing, as root too. */
  job prep = start_job("prep", false, "--steps", "1", "--ranks", "3", "--out",
                       out, "--quiet", NULL);
  cr_assert_eq(wait_job(&prep, 60.0), 0, "the preparing run failed (see %s)",
               prep.err);
  char live[600];
  snprintf(live, sizeof live, "%s/rank-1.live.jsonl", out);
  cr_assert(unlink(live) == 0 && mkdir(live, 0755) == 0, "%s: %s", live,
            strerror(errno));

  const double t0 = now_s();
  job j = start_job("nolive", true, "--backend", "mpi", "--ranks", "3",
                    "--steps", "50", "--timeout", "5", "--out", out,
                    "--quiet", NULL);
  const int code = wait_job(&j, JOB_LIMIT_S);
  const double took = now_s() - t0;
  char path[600];
  snprintf(path, sizeof path, "%s/run.json", out);
  char *run = compact(path);
  char *err = vqc_read_file(j.err);
  printf("rank 1 without a live record: the job ended after %.2f s (timeout "
         "5 s, exit %d)\n", took, code);
  cr_expect_neq(code, -1, "the job was still running after %.0f s (killed)",
                JOB_LIMIT_S);
  cr_expect(took < 5.0, "the job took %.2f s to end: the others did not "
            "hear at once that rank 1 could not start (timeout 5 s)", took);
  cr_expect(code != 0, "exit 0 for a run that never started");
  cr_expect(strstr(run, "\"failed_rank\":1,") != NULL ||
                strstr(run, "\"kind\":\"rank_failure\",\"step\":-1,"
                            "\"ranks\":[1]") != NULL,
            "run.json does not name rank 1 as the rank that failed: %.600s",
            run);
  cr_expect(strstr(run, "rank-1.live.jsonl") != NULL,
            "run.json does not say which file rank 1 could not create: "
            "%.600s", run);
  cr_expect(err && strstr(err, "rank 1") != NULL,
            "stderr does not name rank 1: %.600s", err ? err : "");
  free(err);
  free(run);
}

/* Whether text holds a per-step progress line ("step    0/2  loss ..."):
 * a line that starts with "step " and holds " loss " before its end. */
static bool has_step_line(const char *text) {
  for (const char *line = text; line && *line;) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    if (strncmp(line, "step ", 5) == 0) {
      char buf[256];
      snprintf(buf, sizeof buf, "%.*s", (int)(len < 255 ? len : 255), line);
      if (strstr(buf, " loss ")) return true;
    }
    line = end ? end + 1 : NULL;
  }
  return false;
}

Test(gate_mpi_deadline, launched_progress_only_when_asked) {
  need_mpi();
  const struct { const char *name; bool launcher; } modes[2] = {
      {"mpiexec", true}, {"supervised", false}};
  for (int i = 0; i < 2; i++) {
    char out[512];
    snprintf(out, sizeof out, "%s/progress-%s", tmpdir, modes[i].name);
    job j = start_job(modes[i].name, modes[i].launcher, "--backend", "mpi",
                      "--ranks", "3", "--steps", "3", "--out", out, NULL);
    const int code = wait_job(&j, JOB_LIMIT_S);
    char *text = vqc_read_file(j.out);
    cr_assert(text != NULL, "%s: cannot read %s", modes[i].name, j.out);
    cr_expect_eq(code, 0, "%s: exit %d (stderr in %s)", modes[i].name, code,
                 j.err);
    cr_expect(strstr(text, "findings: 0") != NULL,
              "%s: no summary on stdout: %.400s", modes[i].name, text);
    cr_expect(!has_step_line(text), "%s: per-step progress printed to a "
              "file (stdout is not a terminal): %.400s", modes[i].name,
              text);
    free(text);
  }
}
