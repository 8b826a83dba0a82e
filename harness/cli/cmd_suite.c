/* cmd_suite.c: `vqcheck suite [DIR]`.
 *
 * Runs every scenario of a directory, each as a child process
 * (`vqcheck run ... --out <out>/<name>`; with --backend mpi or nccl that
 * run launches the ranks through the MPI launcher and supervises them,
 * supervise.h, so a killed or stopped rank is a rank_failure), reads each child's run.json, checks it against
 * the scenario's expectation, prints a table and a last line
 * "N passed, M failed", and writes the suite's own junit.xml (one
 * testcase per scenario) and report.md into <out>. Exit 0 only when
 * every expectation holds on a run that trained every step (or stopped
 * for exactly the finding it expects: run_options.h "how training
 * ended"). A child that outlives its deadline (4 x timeout + 60 s) is
 * killed and fails: the suite never hangs on a scenario.
 *
 * <out> is a run directory of its own (rundir.h): refused unless new,
 * empty or made by vqcheck, and locked for the suite's whole life; each
 * <out>/<name> is prepared (cleared) by the suite, then locked by its
 * child `vqcheck run`. Two files naming one scenario never share it: the
 * second runs in <out>/<name>-2 (name_run_dirs).
 *
 * SIGINT and SIGTERM are not left to kill the suite alone: the running
 * child is in a process group of its own (so a terminal's Ctrl-C does not
 * reach it), and would run on. The handler only records the signal; the
 * loop forwards it to the child's group, gives it VQC_SUITE_GRACE_S, then
 * SIGKILLs the group, writes the suite report with the interrupted
 * scenario and the ones not run as not passed, and exits 128 + signal.
 *
 * Options are shared with `vqcheck run` (run_options.h). */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "run_options.h"
#include "report.h"
#include "run_models.h"
#include "runner.h"
#include "scenario.h"
#include "spawn.h"
#include "supervise.h"
#include "vqc/clock.h"
#include "vqc/vqc.h"


/* Seconds a child's process group has between the forwarded SIGINT or
 * SIGTERM and SIGKILL: enough to flush a trace, short enough for a CI
 * runner's own kill timeout (usually 10 s or more). */
#define VQC_SUITE_GRACE_S 5.0

static void suite_help(FILE *f) {
  fprintf(f,
          "usage: vqcheck suite [DIR] [--ranks N] [--steps N] [--seed S]\n"
          "                     [--backend threads|mpi|nccl] [--device "
          "cpu|cuda]\n                     [--timeout S] [--out OUT] "
          "[--launcher CMD] [--json]\n                     [--quiet] "
          "[--verbose]\n\n"
          "Runs every scenario in DIR (*.yaml, *.yml; default "
          "$VQC_SCENARIO_DIR, else an\ninstalled vqcheck's "
          "share/vqcheck/scenarios, else the source tree's; here:\n%s), "
          "each as its own `vqcheck run` in "
          "OUT/<name> (default OUT:\nvqcheck-runs/suite-<time>), and checks "
          "its findings against the scenario's\nexpectation. Prints a table "
          "and a last line 'N passed, M failed'.\n\n"
          "A scenario passes only when its run trained every step and its "
          "expectation\nholds; a run that stopped early (out of memory, a "
          "deadline) fails with the\nreason, unless the finding it expects "
          "is what stopped it (a deadlock).\n\n"
          "Writes OUT/junit.xml (one testcase per scenario) and OUT/report.md "
          "(the table,\nwith links); each OUT/<name> holds that scenario's "
          "run.json, report.html,\nreport.md, junit.xml and vqcheck.log "
          "(a second file naming the same scenario\nruns in OUT/<name>-2, "
          "and so on, said on stderr). OUT "
          "must be new, empty, or made by\nvqcheck (it holds .vqcheck-run); "
          "vqcheck removes only the files it writes\nthere. OUT is locked "
          "while the suite runs: a second suite on it exits 2.\n\n"
          "  --backend mpi  each run is `vqcheck run --ranks N --launcher "
          "LAUNCHER`,\n                 which starts LAUNCHER -n N and "
          "supervises the ranks (a\n                 killed or stopped rank "
          "is a rank_failure); LAUNCHER:\n                 --launcher, else "
          "$VQC_LAUNCHER, else 'mpiexec --oversubscribe'\n                 "
          "(+ --allow-run-as-root as root)\n"
          "  --backend nccl the same launch, NCCL for the data collectives "
          "(needs\n                 --device cuda)\n"
          "  --device D     cpu (default) or cuda, passed to every run; a "
          "scenario\n                 without a device path fails with the "
          "reason; no usable GPU\n                 is exit 3 before any "
          "scenario runs\n"
          "  --ranks, --steps, --seed, --timeout  override every scenario's\n"
          "  --json         print one JSON document (the cases, the counts, "
          "the report\n                 paths) instead of the table\n"
          "  --quiet        only failing scenarios and the last line\n"
          "  --verbose      full internal error text (also: VQC_DEBUG=1)\n\n"
          "A line per running scenario is shown when stdout is a terminal. "
          "SIGINT or\nSIGTERM stops the running scenario (its processes "
          "too), writes the report\nwith it and the ones not run as not "
          "passed, and exits 130 or 143.\n\n"
          "exit: 0 every scenario passed, 1 some did not, 2 bad usage, a "
          "scenario\n      that does not load, or OUT refused (not "
          "vqcheck's, or in use), 3\n      environment error (e.g. the "
          "suite report cannot be written),\n      130/143 interrupted by "
          "SIGINT/SIGTERM\n",
          vqc_cli_default_scenarios());
}

/* The first SIGINT or SIGTERM the suite received; 0 for none. Set by the
 * handler, which does nothing else (async-signal-safe); the loops below
 * read it. */
static volatile sig_atomic_t suite_signal = 0;

static void on_suite_signal(int sig) {
  if (!suite_signal) suite_signal = sig;
}

/* Ends the child process group pgid (its leader `pid` not yet waited for)
 * after the suite got signal sig: forwards sig, waits up to
 * VQC_SUITE_GRACE_S for the leader and the rest of the group, then
 * SIGKILLs what is left. The leader is reaped. */
static void stop_child_group(pid_t pid, int sig) {
  kill(-pid, sig);
  const double deadline = vqc_now_s() + VQC_SUITE_GRACE_S;
  int status;
  bool reaped = false;
  for (;;) {
    if (!reaped) {
      pid_t w = waitpid(pid, &status, WNOHANG);
      reaped = w == pid || (w < 0 && errno == ECHILD);
    }
    /* The leader gone is not enough: anything else the child started in
     * its group may still run. (A supervising `vqcheck run` puts mpiexec,
     * and OpenMPI each rank, in groups of their own and ends them itself
     * on SIGTERM; should it be SIGKILLed, the launcher gets SIGTERM as its
     * parent dies: supervise.h.) */
    if (reaped && kill(-pid, 0) != 0) return;
    if (vqc_now_s() > deadline) break;
    struct timespec nap = {0, 20 * 1000 * 1000};
    nanosleep(&nap, NULL);
  }
  kill(-pid, SIGKILL);
  if (!reaped) waitpid(pid, &status, 0);
}

/* Runs args (NULL-terminated) as a child in its own process group with
 * stdout and stderr going to log; kills the group after limit_s. Returns
 * the exit code, 128 + signal when killed by one, -1 when it could not be
 * started, -2 when it ran past its deadline, -3 when the suite got SIGINT
 * or SIGTERM meanwhile (the group is then ended: stop_child_group). */
static int run_child(char **args, const char *log, double limit_s) {
  /* The log as every file in a run directory: never through a link
   * (vqc/fsutil.h "Links"); refused, the case fails with the reason (as a
   * child that exited 2 would). */
  int fd = -1;
  if (vqc_open_write(log, true, false, &fd) != VQC_OK) {
    fprintf(stderr, "vqcheck suite: %s\n", vqc_cli_error_text());
    return 2;
  }
  const vqc_spawn_opts so = {.argv = args,
                             .stdout_fd = fd,
                             .stderr_fd = fd,
                             .who = "vqcheck suite"};
  pid_t pid;
  const int err = vqc_spawn(&so, &pid, NULL);
  close(fd);
  if (err != 0) return -1;
  const double deadline = vqc_now_s() + limit_s;
  int status = 0;
  for (;;) {
    if (suite_signal) {
      stop_child_group(pid, suite_signal);
      return -3;
    }
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) return -1;
    if (vqc_now_s() > deadline) {
      /* SIGTERM first: a supervising `vqcheck run` then still writes its
       * report of the ranks before it goes. */
      stop_child_group(pid, SIGTERM);
      return -2;
    }
    struct timespec nap = {0, 20 * 1000 * 1000};
    nanosleep(&nap, NULL);
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

/* Reads how training ended from the run.json at path into *t (its message
 * into msg, n bytes). VQC_EPARSE naming the field when it is missing: a
 * run.json without it says nothing about whether training finished, and
 * the suite does not guess. */
static vqc_status read_training(const char *path, vqc_run_training *t,
                                char *msg, size_t n) {
  json_t *j = NULL;
  VQC_TRY(vqc_run_json_load(path, &j)); /* bounded, checked (rundir.h) */
  const json_t *tr = json_object_get(j, "training");
  const json_t *st = json_object_get(tr, "status");
  const json_t *done = json_object_get(tr, "steps_done");
  const json_t *fr = json_object_get(tr, "failed_rank");
  const json_t *m = json_object_get(tr, "message");
  vqc_status s = VQC_OK;
  if (!json_is_string(st) || !json_is_integer(done))
    s = vqc_error(VQC_EPARSE, "%s: training.status and training.steps_done "
                  "are required", path);
  if (s == VQC_OK) {
    /* An unknown name is an error status: never taken for VQC_OK. */
    t->status = VQC_EINTERNAL;
    for (int k = 0; k < VQC_STATUS_COUNT; k++)
      if (strcmp(json_string_value(st), vqc_status_name((vqc_status)k)) == 0)
        t->status = (vqc_status)k;
    t->steps_done = json_integer_value(done);
    t->failed_rank = json_is_integer(fr) ? (int)json_integer_value(fr) : -1;
    snprintf(msg, n, "%s", json_is_string(m) ? json_string_value(m) : "");
    t->message = msg;
  }
  json_decref(j);
  return s;
}

/* "kind@step, ..." of the findings, each kind and step once. */
static void found_string(vqc_findings *f, char *buf, size_t n) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < f->count; i++) {
    char one[64];
    snprintf(one, sizeof one, "%s@%" PRId64,
             vqc_finding_kind_name(f->items[i].kind), f->items[i].step);
    if (strstr(buf, one)) continue;
    int w = snprintf(buf + used, n - used, "%s%s", used ? ", " : "", one);
    if (w < 0 || (size_t)w >= n - used) break;
    used += (size_t)w;
  }
  if (used == 0) snprintf(buf, n, "none");
}

/* Column widths of the suite table. */
typedef struct table_widths {
  int name, fault, expected, found;
} table_widths;

/* One table row for a case (and its reason when it did not pass). */
static void print_case_row(const table_widths *w, const vqc_suite_case *c) {
  printf("%-*s  %-*s  %-*s  %-*s  %-6s  %7.2f\n", w->name, c->name, w->fault,
         c->fault, w->expected, c->expected, w->found, c->found,
         c->passed ? "pass" : c->error ? "ERROR" : "FAIL", c->seconds);
  if (!c->passed) printf("  %s\n", c->message);
  fflush(stdout);
}

/* A case as a JSON object for --json. */
static json_t *case_to_json(const vqc_suite_case *c, const char *file,
                            int exit_code) {
  json_t *j = json_object();
  json_object_set_new(j, "name", json_string(c->name));
  json_object_set_new(j, "file", json_string(file));
  json_object_set_new(j, "fault", json_string(c->fault));
  json_object_set_new(j, "expected", json_string(c->expected));
  json_object_set_new(j, "found", json_string(c->found));
  json_object_set_new(j, "passed", json_boolean(c->passed));
  json_object_set_new(j, "error", json_boolean(c->error));
  json_object_set_new(j, "message", json_string(c->message));
  json_object_set_new(j, "seconds", json_real(c->seconds));
  json_object_set_new(j, "run_dir", c->run_dir[0] ? json_string(c->run_dir)
                                                  : json_null());
  /* The child's exit code; null when it never ran or did not exit. */
  json_object_set_new(j, "exit_code", exit_code >= 0 && exit_code < 128
                                          ? json_integer(exit_code)
                                          : json_null());
  return j;
}

/* The columns of a case that say what it is (name, fault, expected): of
 * the scenario sc, or of the file name when it did not load (sc NULL). */
static void name_case(vqc_suite_case *c, const vqc_scenario *sc,
                      const char *file) {
  snprintf(c->name, sizeof c->name, "%s", sc ? sc->name : file);
  if (!sc) return;
  snprintf(c->fault, sizeof c->fault, "%s", vqc_fault_name(sc->fault));
  vqc_scenario_expect_string(sc, c->expected, sizeof c->expected);
}

/* Marks cases [from, n) as not passed after signal sig: `first` (the one
 * running, when it was) "interrupted by SIG...", the rest "not run".
 * Returns how many it marked. */
static int mark_unfinished(vqc_suite_case *cases, int from, int n, int sig,
                           bool first) {
  const char *name = sig == SIGINT ? "SIGINT" : "SIGTERM";
  for (int i = from; i < n; i++) {
    vqc_suite_case *c = &cases[i];
    c->passed = false;
    c->error = true;
    if (i == from && first)
      snprintf(c->message, sizeof c->message, "interrupted by %s (its "
               "processes were stopped; see %.900s/vqcheck.log)", name,
               c->run_dir);
    else
      snprintf(c->message, sizeof c->message, "not run: the suite was "
               "interrupted by %s", name);
    snprintf(c->found, sizeof c->found, "-");
  }
  return n - from;
}

/* A run directory's name under OUT: a scenario name (127 characters at
 * most) and "-<n>". */
#define SUITE_DIR_NAME 160

/* Whether `name` is dirs[m] for some m < n, or the name of a scenario that
 * loaded (its first file gets that directory). */
static bool dir_name_taken(const char *name, char (*dirs)[SUITE_DIR_NAME],
                           const vqc_scenario *scs, const bool *loaded,
                           int n) {
  for (int m = 0; m < n; m++)
    if (strcmp(dirs[m], name) == 0 ||
        (loaded[m] && strcmp(scs[m].name, name) == 0))
      return true;
  return false;
}

/* The run directory of each loaded scenario (dirs[i], under base): its
 * name, or for a file that names a scenario an earlier file names too,
 * NAME-2, NAME-3, ... (a name no other file or scenario takes), said on
 * stderr. Two files never share a directory: the second's run would clear
 * the first's evidence (DESIGN.md "never lose a user's file"). */
static void name_run_dirs(char **files, const vqc_scenario *scs,
                          const bool *loaded, int nfiles, const char *base,
                          char (*dirs)[SUITE_DIR_NAME]) {
  for (int i = 0; i < nfiles; i++) {
    if (!loaded[i]) continue;
    int first = -1;
    for (int j = 0; j < i && first < 0; j++)
      if (loaded[j] && strcmp(scs[j].name, scs[i].name) == 0) first = j;
    if (first < 0) snprintf(dirs[i], SUITE_DIR_NAME, "%s", scs[i].name);
  }
  for (int i = 0; i < nfiles; i++) {
    if (!loaded[i] || dirs[i][0]) continue;
    int first = 0;
    while (strcmp(scs[first].name, scs[i].name) != 0 || !loaded[first])
      first++;
    for (int k = 2;; k++) {
      char name[SUITE_DIR_NAME];
      snprintf(name, sizeof name, "%s-%d", scs[i].name, k);
      if (dir_name_taken(name, dirs, scs, loaded, nfiles)) continue;
      snprintf(dirs[i], SUITE_DIR_NAME, "%s", name);
      break;
    }
    fprintf(stderr, "vqcheck suite: %s and %s both name scenario '%s': "
            "%s runs in %s/%s, so neither run's files replace the other's\n"
            "hint: give each scenario file a name of its own\n", files[first],
            files[i], scs[i].name, files[i], base, dirs[i]);
  }
}

int vqc_cmd_suite(int argc, char **argv) {
  run_opts o;
  int rc = vqc_run_parse_opts("suite", argc, argv, true, suite_help, &o);
  if (rc >= 0) return rc;
  if (o.launcher && !vqc_run_launched_backend(o.backend))
    return vqc_cli_usage_error("suite", "--launcher is for --backend mpi or "
                               "nccl");
  if ((rc = vqc_run_device_unusable("suite", o.device)) != 0) return rc;
  const char *dir = o.path ? o.path : vqc_cli_default_scenarios();
  int nfiles = 0;
  char **files = NULL;
  if (!vqc_scenario_files(dir, &files, &nfiles)) {
    fprintf(stderr, "vqcheck suite: cannot read %s: %s\n", dir,
            strerror(errno));
    fprintf(stderr, "hint: 'vqcheck suite --help'\n");
    return 2;
  }
  if (nfiles == 0) {
    fprintf(stderr, "vqcheck suite: no scenario files (*.yaml) in %s\n", dir);
    vqc_scenario_files_free(files, nfiles);
    return 2;
  }

  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    fprintf(stderr, "vqcheck suite: cannot find this program's path\n");
    vqc_scenario_files_free(files, nfiles);
    return 3;
  }
  self[n] = '\0';

  char launcher[1024] = "";
  if (vqc_run_launched_backend(o.backend)) {
    vqc_launcher_resolve(o.launcher, launcher, sizeof launcher);
    if (!vqc_launcher_available("suite", launcher)) {
      vqc_scenario_files_free(files, nfiles);
      return 3;
    }
    /* Each child `vqcheck run` launches and supervises its ranks, even
     * where the environment looks launched (a Slurm batch script sets
     * SLURM_PROCID). */
    setenv("VQC_SUPERVISE", "1", 1);
  }

  char base[4096];
  /* (--out "" was refused by the option parser.) The default gets -2, -3
   * when a suite of the same second has it. */
  vqc_run_dir_choose(o.out, "suite", base, sizeof base);
  /* Up front: the suite report goes here even when nothing runs. Locked
   * for the suite's life (the end of the process gives it back): a second
   * suite on OUT would clear this one's scenarios. A directory that is not
   * vqcheck's, or in use, is exit 2 with the reason. */
  vqc_status ps = vqc_run_dir_prepare(base);
  if (ps != VQC_OK) {
    fprintf(stderr, "vqcheck suite: %s\n", vqc_cli_error_text());
    vqc_scenario_files_free(files, nfiles);
    return vqc_status_exit_code(ps);
  }

  /* Load everything first: a file that does not load is reported up
   * front, and the table's columns fit the names. */
  vqc_scenario *scs = calloc((size_t)nfiles, sizeof *scs);
  bool *loaded = calloc((size_t)nfiles, sizeof *loaded);
  char (*load_err)[1024] = calloc((size_t)nfiles, sizeof *load_err);
  vqc_suite_case *cases = calloc((size_t)nfiles, sizeof *cases);
  int *exit_codes = calloc((size_t)nfiles, sizeof *exit_codes);
  char (*dirs)[SUITE_DIR_NAME] = calloc((size_t)nfiles, sizeof *dirs);
  if (!scs || !loaded || !load_err || !cases || !exit_codes || !dirs) {
    fprintf(stderr, "vqcheck suite: no memory for %d scenarios\n", nfiles);
    vqc_scenario_files_free(files, nfiles);
    free(scs);
    free(loaded);
    free(load_err);
    free(cases);
    free(exit_codes);
    free(dirs);
    return 3;
  }
  table_widths w = {8, 5, 8, 30};
  for (int i = 0; i < nfiles; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    loaded[i] = vqc_scenario_load(path, &scs[i]) == VQC_OK &&
                vqc_scenario_override(&scs[i], o.ranks, o.steps, o.seed,
                                      o.timeout) == VQC_OK;
    int l = (int)strlen(loaded[i] ? scs[i].name : files[i]);
    if (l > w.name) w.name = l;
    if (!loaded[i]) {
      snprintf(load_err[i], sizeof load_err[i], "%s", vqc_cli_error_text());
      continue;
    }
    char e[256];
    vqc_scenario_expect_string(&scs[i], e, sizeof e);
    l = (int)strlen(vqc_fault_name(scs[i].fault));
    if (l > w.fault) w.fault = l;
    l = (int)strlen(e);
    if (l > w.expected) w.expected = l;
  }
  name_run_dirs(files, scs, loaded, nfiles, base, dirs);
  const bool table = !o.json && !o.quiet;
  const bool progress = vqc_cli_show_progress(o.quiet, o.json);
  /* From here on a SIGINT or SIGTERM ends the running scenario and is
   * reported (see the file comment); the previous handlers come back at
   * the end. */
  struct sigaction sa, old_int, old_term;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_suite_signal;
  sigemptyset(&sa.sa_mask);
  suite_signal = 0;
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  int interrupted = 0; /* the signal that stopped the suite; 0 for none */
  int unfinished = 0;  /* scenarios it left interrupted or not run */
  if (table)
    printf("%-*s  %-*s  %-*s  %-*s  %-6s  %7s\n", w.name, "scenario", w.fault,
           "fault", w.expected, "expected", w.found, "found", "result",
           "seconds");
  int passed = 0, failed = 0, bad_files = 0;
  for (int i = 0; i < nfiles; i++) {
    vqc_suite_case *c = &cases[i];
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    exit_codes[i] = -1;
    if (suite_signal) {
      /* Between scenarios: this one and the rest are not run. */
      interrupted = suite_signal;
      for (int m = i; m < nfiles; m++)
        name_case(&cases[m], loaded[m] ? &scs[m] : NULL, files[m]);
      unfinished = mark_unfinished(cases, i, nfiles, interrupted, false);
      failed += unfinished;
      if (!o.json)
        for (int m = i; m < nfiles; m++) print_case_row(&w, &cases[m]);
      break;
    }
    if (!loaded[i]) {
      snprintf(c->name, sizeof c->name, "%s", files[i]);
      snprintf(c->found, sizeof c->found, "-");
      snprintf(c->message, sizeof c->message, "does not load: %s",
               load_err[i]);
      c->error = true;
      failed++;
      bad_files++;
      if (!o.json) print_case_row(&w, c);
      continue;
    }
    vqc_scenario sc = scs[i];
    snprintf(c->name, sizeof c->name, "%s", sc.name);
    snprintf(c->fault, sizeof c->fault, "%s", vqc_fault_name(sc.fault));
    vqc_scenario_expect_string(&sc, c->expected, sizeof c->expected);
    snprintf(c->found, sizeof c->found, "none");
    /* No device path (or not on this backend): said here, with the reason,
     * rather than as a child's failed start. */
    if (vqc_run_check_device(&sc, o.device, o.backend) != VQC_OK) {
      snprintf(c->message, sizeof c->message, "%s", vqc_cli_error_text());
      c->error = true;
      failed++;
      if (!o.json) print_case_row(&w, c);
      continue;
    }
    char rundir[4300], log[4400];
    snprintf(rundir, sizeof rundir, "%s/%s", base, dirs[i]);
    /* The report keeps 1023 characters of it: a longer path would link
     * somewhere else. */
    if (snprintf(c->run_dir, sizeof c->run_dir, "%s", rundir) >=
        (int)sizeof c->run_dir) {
      snprintf(c->message, sizeof c->message, "run directory path longer "
               "than %zu characters", sizeof c->run_dir - 1);
      c->run_dir[0] = '\0';
      c->error = true;
      failed++;
      if (!o.json) print_case_row(&w, c);
      continue;
    }
    snprintf(log, sizeof log, "%s/vqcheck.log", rundir);
    /* What an earlier suite left there goes first, so a child that dies
     * early cannot leave last time's verdict or reports in place to be
     * read as this run's. The suite's own directory (marked, so the child
     * accepts it); its lock goes to the child, which takes it itself. */
    if (vqc_run_dir_prepare(rundir) != VQC_OK) {
      snprintf(c->message, sizeof c->message, "%.1000s", vqc_cli_error_text());
      c->error = true;
      failed++;
      if (!o.json) print_case_row(&w, c);
      continue;
    }
    vqc_run_dir_unlock(rundir);
    char json[4400];
    snprintf(json, sizeof json, "%s/run.json", rundir);

    /* The child's command line. With mpi or nccl the child is `vqcheck
     * run --ranks N` outside any launcher, which launches the ranks itself
     * and supervises them (supervise.h): a rank that dies or stops is then
     * a rank_failure in run.json rather than an exit 137. */
    char *args[96];
    int k = 0;
    char nranks[16], steps[16], seed[32], timeout[32];
    const bool supervised = vqc_run_launched_backend(o.backend);
    args[k++] = self;
    args[k++] = "run";
    args[k++] = path;
    args[k++] = "--backend";
    args[k++] = (char *)vqc_backend_name(o.backend);
    args[k++] = "--device";
    args[k++] = o.device == VQC_DEVICE_CUDA ? "cuda" : "cpu";
    args[k++] = "--out";
    args[k++] = rundir;
    args[k++] = "--quiet";
    if (vqc_cli_debug()) args[k++] = "--verbose";
    if (o.ranks > 0 || supervised) {
      snprintf(nranks, sizeof nranks, "%d", sc.ranks);
      args[k++] = "--ranks";
      args[k++] = nranks;
    }
    if (supervised) {
      args[k++] = "--launcher";
      args[k++] = launcher;
    }
    if (o.steps > 0) {
      snprintf(steps, sizeof steps, "%d", o.steps);
      args[k++] = "--steps";
      args[k++] = steps;
    }
    if (o.seed >= 0) {
      snprintf(seed, sizeof seed, "%" PRId64, o.seed);
      args[k++] = "--seed";
      args[k++] = seed;
    }
    if (o.timeout > 0) {
      snprintf(timeout, sizeof timeout, "%g", o.timeout);
      args[k++] = "--timeout";
      args[k++] = timeout;
    }
    args[k] = NULL;

    if (progress) {
      /* Overwritten by the row when the scenario is done. */
      printf("[%d/%d] %s: running on %d ranks (%s%s)...", i + 1, nfiles,
             sc.name, sc.ranks, vqc_backend_name(o.backend),
             o.device == VQC_DEVICE_CUDA ? ", device cuda" : "");
      fflush(stdout);
    }
    const double t0 = vqc_now_s();
    const int code = run_child(args, log, 4.0 * sc.timeout_s + 60.0);
    c->seconds = vqc_now_s() - t0;
    exit_codes[i] = code;
    if (progress) printf("\r\033[K");
    if (code == -3) {
      /* Stopped by a signal to the suite: this one is interrupted, the
       * rest are not run. */
      interrupted = suite_signal;
      for (int m = i + 1; m < nfiles; m++)
        name_case(&cases[m], loaded[m] ? &scs[m] : NULL, files[m]);
      unfinished = mark_unfinished(cases, i, nfiles, interrupted, true);
      failed += unfinished;
      if (!o.json)
        for (int m = i; m < nfiles; m++) print_case_row(&w, &cases[m]);
      break;
    }

    vqc_findings f;
    vqc_findings_init(&f);
    char why[5000] = "";
    bool ok = false;
    vqc_run_training t;
    char tmsg[1024];
    if (code == -2) {
      snprintf(why, sizeof why, "killed after %.0f s (see %s)", c->seconds,
               log);
      c->error = true;
    } else if (code < 0 || code == 2 || code >= 126) {
      snprintf(why, sizeof why, "the run failed to start or crashed (exit "
               "%d; see %s)", code, log);
      c->error = true;
    } else if (vqc_run_read_json(json, &f, NULL) != VQC_OK ||
               read_training(json, &t, tmsg, sizeof tmsg) != VQC_OK) {
      snprintf(why, sizeof why, "no readable run.json (exit %d): %s", code,
               vqc_cli_error_text());
      c->error = true;
    } else {
      found_string(&f, c->found, sizeof c->found);
      /* First whether it trained: findings of a run that stopped at step
       * 0 are no verdict (an empty list would meet `clean`). */
      char stop[1400];
      const vqc_training_verdict v =
          vqc_run_judge_training(&sc, &t, &f, stop, sizeof stop);
      ok = vqc_scenario_expectations_met(&sc, &f, why, sizeof why);
      if (v == VQC_TRAINING_FAILED) {
        char exp[5000];
        snprintf(exp, sizeof exp, "%s", why);
        snprintf(why, sizeof why, "%.1400s (exit %d; see %.1000s)%s%.1000s",
                 stop, code, log, ok ? "" : "; and ", ok ? "" : exp);
        ok = false;
        c->error = true;
      }
      /* The verdict explains exit 0 (clean) and 1 (findings); any other
       * code is an error after training (e.g. its reports could not be
       * written), which run.json, written before, does not show. */
      if (ok && code != 0 && code != 1) {
        snprintf(why, sizeof why, "the run ended with exit %d after "
                 "training (an environment error, e.g. its reports could "
                 "not be written; see %.1000s)", code, log);
        ok = false;
        c->error = true;
      }
    }
    vqc_findings_free(&f);
    c->passed = ok;
    if (!ok) vqc_cli_strip_internal(why, c->message, sizeof c->message);
    if (table || (!o.json && !ok)) print_case_row(&w, c);
    if (ok) passed++;
    else failed++;
  }

  /* A signal after the last scenario ended: every result stands, but the
   * suite still says it was stopped (the caller asked it to). */
  if (!interrupted && suite_signal) interrupted = suite_signal;

  /* The suite's own reports, next to the scenarios' run directories. */
  int code = bad_files > 0 ? 2 : failed > 0 ? 1 : 0;
  char junit[4200], md[4200];
  snprintf(junit, sizeof junit, "%s/junit.xml", base);
  snprintf(md, sizeof md, "%s/report.md", base);
  vqc_status s = vqc_reports_write_suite(base, "suite", cases, nfiles);
  if (s != VQC_OK) {
    fprintf(stderr, "vqcheck suite: cannot write the suite report: %s\n",
            vqc_cli_error_text());
    const int report_code = vqc_status_exit_code(s);
    if (report_code > code) code = report_code;
  }

  if (o.json) {
    json_t *doc = json_object();
    json_t *list = json_array();
    for (int i = 0; i < nfiles; i++) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", dir, files[i]);
      json_array_append_new(list, case_to_json(&cases[i], path,
                                               exit_codes[i]));
    }
    json_object_set_new(doc, "dir", json_string(dir));
    json_object_set_new(doc, "out", json_string(base));
    json_object_set_new(doc, "backend",
                        json_string(vqc_backend_name(o.backend)));
    json_object_set_new(doc, "device", json_string(o.device == VQC_DEVICE_CUDA
                                                       ? "cuda"
                                                       : "cpu"));
    json_object_set_new(doc, "cases", list);
    json_object_set_new(doc, "passed", json_integer(passed));
    json_object_set_new(doc, "failed", json_integer(failed));
    json_object_set_new(doc, "interrupted",
                        interrupted ? json_string(interrupted == SIGINT
                                                      ? "SIGINT"
                                                      : "SIGTERM")
                                    : json_null());
    json_object_set_new(doc, "ok", json_boolean(code == 0 && !interrupted));
    json_object_set_new(doc, "exit_code",
                        json_integer(interrupted ? 128 + interrupted : code));
    json_object_set_new(doc, "junit", s == VQC_OK ? json_string(junit)
                                                  : json_null());
    json_object_set_new(doc, "report", s == VQC_OK ? json_string(md)
                                                   : json_null());
    json_dumpf(doc, stdout, JSON_INDENT(2));
    fputc('\n', stdout);
    json_decref(doc);
  } else {
    if (!o.quiet) {
      if (s == VQC_OK) printf("suite report: %s, %s\n", junit, md);
      printf("run directories: %s/<scenario>/ (report.html, report.md, "
             "junit.xml, run.json, vqcheck.log)\n", base);
    }
    printf("%d passed, %d failed\n", passed, failed);
  }
  fflush(stdout);
  if (interrupted) {
    fprintf(stderr, "vqcheck suite: interrupted by %s: %d scenario%s did "
            "not finish (the report lists them)\n",
            interrupted == SIGINT ? "SIGINT" : "SIGTERM",
            unfinished, unfinished == 1 ? "" : "s");
    code = 128 + interrupted;
  }
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  vqc_scenario_files_free(files, nfiles);
  free(scs);
  free(loaded);
  free(load_err);
  free(cases);
  free(exit_codes);
  free(dirs);
  return code;
}

