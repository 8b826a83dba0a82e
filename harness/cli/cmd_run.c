/* cmd_run.c: `vqcheck run SCENARIO` (the suite is cmd_suite.c).
 *
 * Trains one scenario with every checker on (runner.h), writes its run
 * directory (run.json, then report.md, report.html and junit.xml made from
 * it by reports/report.h) and prints a summary, or with --json the run.json
 * document. Exit 0: no findings; 1: findings; 2: bad scenario or usage;
 * 3: environment, or training stopped with an error no checker explained.
 *
 * --device cuda runs the models' hot paths on the GPU
 * (run_models.h "Device"). A scenario without a device path is a usage
 * error (exit 2) and a machine without a usable device an environment one
 * (exit 3), both said before anything is trained or written. --backend
 * nccl (device buffers) needs --device cuda.
 *
 * Output conventions (cli.h): progress (a line per step, a line per
 * scenario) only when stdout is a terminal (a launched rank cannot tell:
 * see launched_progress); --quiet drops it and the
 * summary; --json puts one JSON document on stdout and nothing else there
 * (errors always go to stderr). A run whose training stopped without an
 * expected finding to explain it (run_options.h) is an error: said on
 * stderr in every mode, and the summary never calls its expectation met.
 *
 * The run directory is prepared (rundir.h: refused unless new, empty or
 * vqcheck's; locked) by the runner; the lock is held until the result is
 * freed, after the reports. */
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "ledger_analysis.h"
#include "run_options.h"
#include "report.h"
#include "run_models.h"
#include "runner.h"
#include "scenario.h"
#include "supervise.h"
#include "vqc/vqc.h"

#if VQC_WITH_MPI
#include <mpi.h>
#endif

/* The report files of a run directory, in the order they are listed. */
static const unsigned report_formats[3] = {VQC_REPORT_HTML, VQC_REPORT_MD,
                                           VQC_REPORT_JUNIT};

/* ---- vqcheck run */

static void run_help(FILE *f) {
  fprintf(f,
          "usage: vqcheck run SCENARIO [--ranks N] [--steps N] [--seed S]\n"
          "                   [--backend threads|mpi|nccl] [--device "
          "cpu|cuda]\n"
          "                   [--timeout S] [--out DIR] [--launcher CMD] "
          "[--json]\n                   [--quiet] [--verbose]\n\n"
          "Trains the scenario (a YAML file, see scenarios/README.md) on N "
          "ranks with\nevery checker on: divergence, lost in-place, "
          "collective (deadlock, rank\nfailure, strict-mode mismatch), shape "
          "and gradient equivalence, and writes\nthe run directory DIR "
          "(default: vqcheck-runs/<scenario>-<time>):\n"
          "  run.json      scenario, environment, build, findings, per-step "
          "summary\n"
          "  report.html   self-contained report with plots (open in any "
          "browser)\n"
          "  report.md     the same as Markdown\n"
          "  junit.xml     one testcase per check, for CI test reporters\n"
          "  rank-<r>.*    the checkers' per-rank traces and ledger dumps\n\n"
          "  --ranks N      ranks (default: the scenario's; with mpi the "
          "launcher's -n,\n                 which must match the scenario's "
          "unless --ranks says so)\n"
          "  --steps N      training steps      --seed S   data and init seed\n"
          "  --timeout S    collective deadline in seconds\n"
          "  --backend B    threads (one process) or mpi (under mpiexec/srun; "
          "the\n                 default when launched by one); nccl (under "
          "mpiexec, device\n                 buffers; needs --device cuda). "
          "mpi or nccl typed outside a\n                 launcher: vqcheck "
          "launches LAUNCHER -n N itself and watches\n                 the "
          "ranks, so a rank that dies or stops is reported\n"
          "                 (rank_failure) and no process is left behind; "
          "LAUNCHER:\n                 --launcher CMD, else $VQC_LAUNCHER, "
          "else 'mpiexec\n                 --oversubscribe' (+ "
          "--allow-run-as-root as root)\n"
          "  --launcher CMD the MPI launcher command for mpi/nccl outside one "
          "(e.g.\n                 \"srun\"; vqcheck adds -n N)\n"
          "  --device D     cpu (default) or cuda: the models' hot paths on "
          "the GPU\n                 (vq: codebook and batch on the device; "
          "fsq: its quantizer);\n                 other models are refused "
          "(exit 2), a missing GPU is exit 3\n"
          "  --out DIR      the run directory: new, empty, or one vqcheck "
          "made (it holds\n                 .vqcheck-run); vqcheck removes "
          "only the files it writes there\n                 and refuses "
          "(exit 2) any other directory, or one another\n                 "
          "vqcheck is writing (it is locked while a run writes it)\n"
          "  --json         print run.json on stdout, with \"run_dir\" and "
          "\"reports\"\n                 (file paths) added, instead of the "
          "summary\n"
          "  --quiet        no progress and no summary\n"
          "  --verbose      full internal error text (also: VQC_DEBUG=1)\n\n"
          "Progress (a line per step, findings as they appear) is shown when "
          "stdout is\na terminal (a rank started by a launcher cannot see "
          "whether it is: it\nshows progress only with VQC_PROGRESS=1, e.g. "
          "mpiexec -x VQC_PROGRESS=1). On a cluster: mpirun -np N vqcheck run "
          "SCENARIO --backend mpi,\nor srun -n N vqcheck run SCENARIO (rank 0 "
          "writes the run directory). Started\nthat way, a job in which one "
          "rank dies is torn down by mpirun at once\n(every rank killed, "
          "nothing reported): every rank appends its progress to\n"
          "DIR/rank-<r>.live.jsonl as it goes, so 'vqcheck analyze DIR' "
          "afterwards\nreports the run, with a rank_failure naming the rank "
          "that died.\n\n"
          "A run that did not train every step never meets its expectation, "
          "unless the\nfinding it expects is what stopped it (a deadlock); "
          "why it stopped is said\non stderr, with --quiet and --json too.\n\n"
          "exit: 0 no findings, 1 findings, 2 bad scenario or usage (or a "
          "refused --out),\n      3 environment error (or training stopped "
          "without a finding that\n      explains it)\n");
}

/* How r's training ended, for vqc_run_judge_training. */
static vqc_run_training training_of(const vqc_run_result *r) {
  return (vqc_run_training){r->training, r->failed_rank, r->steps_done,
                            r->message};
}

/* The summary of a finished run. `code` is the run's final exit code:
 * the expectation is called met only when that is 0 or 1 (the verdict
 * stands); with 3 (run.json, a report or the JSON document could not be
 * written) the summary says the run was not recorded instead. */
static void print_summary(const vqc_scenario *sc, const vqc_run_result *r,
                          bool reports_written, int code) {
  printf("%s: %s model, %d rank%s (%s%s), %" PRId64 "/%d steps in %.2f s\n",
         sc->name, vqc_model_name(sc->model), r->ranks,
         r->ranks == 1 ? "" : "s",
         vqc_backend_name(r->backend),
         r->device == VQC_DEVICE_CUDA ? ", device cuda" : "", r->steps_done,
         sc->steps, r->seconds);
  vqc_findings *f = (vqc_findings *)&r->findings;
  printf("findings: %d\n", f->count);
  for (int i = 0; i < f->count; i++) {
    const vqc_finding *x = &f->items[i];
    printf("  %s", vqc_finding_kind_name(x->kind));
    if (x->step >= 0) printf(" at step %" PRId64, x->step); /* -1: none */
    if (x->tensor[0]) printf(" in %s", x->tensor);
    if (x->nranks > 0) {
      /* Folded ("ranks 0-1021, 1023"): at 1024 ranks a list is noise. */
      char ranks[256];
      vqc_rank_ranges_text(x->ranks, x->nranks, ranks, sizeof ranks);
      printf(" (rank%s %s)", x->nranks > 1 ? "s" : "", ranks);
    }
    if (x->site[0]) printf(" at %s", x->site);
    printf(":\n    %s\n", x->message);
  }
  /* Never "met" for a run that did not train every step, unless a finding
   * the scenario expects is what stopped it (run_options.h). */
  char stop[1400];
  const vqc_run_training t = training_of(r);
  const vqc_training_verdict v =
      vqc_run_judge_training(sc, &t, f, stop, sizeof stop);
  if (v != VQC_TRAINING_COMPLETE) printf("%s\n", stop);
  /* One rank holds the only copy of every replicated tensor: divergence
   * had nothing to compare (reports/run_data.c rep_check says the same). */
  if (r->ranks < 2)
    printf("not checked: divergence (1 rank: nothing to compare)\n");
  char why[512];
  const bool verdict_stands = code == 0 || code == 1;
  if (v == VQC_TRAINING_FAILED)
    printf("expectation: NOT met: training did not finish, so the findings "
           "are not a verdict\n");
  else if (vqc_scenario_expectations_met(sc, f, why, sizeof why))
    printf(verdict_stands ? "expectation (%s): met\n"
                          : "expectation (%s): the findings meet it, but the "
                            "run could not be recorded (see the error on "
                            "stderr): exit %d\n",
           sc->expect_clean ? "clean" : "findings", code);
  else
    printf("expectation: NOT met: %s\n", why);
  printf("run directory: %s\n", r->run_dir);
  if (reports_written)
    for (int i = 0; i < 3; i++)
      printf("  %-12s %s/%s\n", vqc_report_file_name(report_formats[i]),
             r->run_dir, vqc_report_file_name(report_formats[i]));
}

/* --json: run_dir/run.json on stdout with "run_dir" and "reports" (the
 * report files' paths, null when they could not be written) added.
 * Returns 0, or 3 when run.json cannot be read back. */
static int print_run_document(const char *run_dir, bool reports_written) {
  char path[4200];
  snprintf(path, sizeof path, "%s/run.json", run_dir);
  json_t *doc = NULL;
  if (vqc_run_json_load(path, &doc) != VQC_OK) { /* rundir.h */
    fprintf(stderr, "vqcheck run: cannot read back the run.json it wrote: "
            "%s\n", vqc_cli_error_text());
    return 3;
  }
  json_object_set_new(doc, "run_dir", json_string(run_dir));
  json_t *reports = json_null();
  if (reports_written) {
    reports = json_object();
    static const char *const keys[3] = {"html", "md", "junit"};
    for (int i = 0; i < 3; i++) {
      snprintf(path, sizeof path, "%s/%s", run_dir,
               vqc_report_file_name(report_formats[i]));
      json_object_set_new(reports, keys[i], json_string(path));
    }
  }
  json_object_set_new(doc, "reports", reports);
  json_dumpf(doc, stdout, JSON_INDENT(2));
  fputc('\n', stdout);
  fflush(stdout);
  json_decref(doc);
  return 0;
}

/* Writes the reports of a finished run (run.json is on disk). On failure
 * prints why and returns the status's exit code; 0 when written. */
static int write_run_reports(const char *run_dir) {
  vqc_status s = vqc_reports_write(run_dir, VQC_REPORT_ALL);
  if (s == VQC_OK) return 0;
  fprintf(stderr, "vqcheck run: the run finished but could not be recorded: "
          "cannot write the reports: %s\nhint: once the cause is fixed, "
          "'vqcheck report %s' makes them from its run.json\n",
          vqc_cli_error_text(), run_dir);
  return vqc_status_exit_code(s);
}

/* What rank 0 does once its run is over and run.json is written: the
 * reports, then the summary or the JSON document. Returns the exit code. */
static int finish_run(const run_opts *o, const vqc_scenario *sc,
                      const vqc_run_result *r) {
  int code = vqc_run_exit_code(r);
  /* A stop nothing expected explains is said on stderr whatever the
   * output mode (--quiet, --json): a CI log must show why the gate is
   * red. The exit code is already non-zero (3, or 1 with findings). */
  char stop[1400];
  const vqc_run_training t = training_of(r);
  if (vqc_run_judge_training(sc, &t, (vqc_findings *)&r->findings, stop,
                             sizeof stop) == VQC_TRAINING_FAILED) {
    fprintf(stderr, "vqcheck run: %s\nhint: %s (run directory: %s)\n", stop,
            vqc_run_training_hint(r->training), r->run_dir);
    if (code == 0) code = 3; /* a short run is never clean */
  }
  const int report_code = write_run_reports(r->run_dir);
  if (report_code != 0) code = report_code;
  if (o->json) {
    const int j = print_run_document(r->run_dir, report_code == 0);
    if (j != 0) code = j;
  } else if (!o->quiet) {
    print_summary(sc, r, report_code == 0, code);
  }
  fflush(stdout);
  return code;
}

#if VQC_WITH_MPI
/* After a run that ended with an error some MPI requests stay pending
 * (a timed-out collective cannot be cancelled), and MPI_Finalize may wait
 * for them forever: end the job instead, with the run's exit code. Only
 * main-level code may do this (the library never exits). */
static void mpi_end_failed_job(int code) {
  fflush(stdout);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
}
#endif

/* The comm of a launched backend: mpi, or nccl (MPI under it). */
static vqc_status launched_comm_create(vqc_backend b, int *argc, char ***argv,
                                       vqc_comm **c) {
  if (b == VQC_BACKEND_NCCL) return vqc_nccl_comm_create(argc, argv, c);
  return vqc_mpi_comm_create(argc, argv, c);
}

static void launched_comm_destroy(vqc_backend b, vqc_comm *c) {
  if (b == VQC_BACKEND_NCCL) vqc_nccl_comm_destroy(c);
  else vqc_mpi_comm_destroy(c);
}

/* A rank terminated by a signal it can catch (SIGTERM, SIGINT, SIGHUP:
 * a launcher tearing the job down after another rank died, or a user)
 * says so in its live record (ledger_analysis.h), so the analysis can tell
 * it from the rank that died first, then dies of the signal as it would
 * have. */
static void on_rank_signal(int sig) {
  vqc_live_note_signal(sig);
  signal(sig, SIG_DFL);
  raise(sig);
}

/* Polls run_dir until rank 0's run.json and reports are all there, or
 * limit_s passes (rank 0 may be the rank that is gone). */
static void wait_for_rank0_reports(const char *run_dir, double limit_s) {
  static const char *const names[] = {"run.json", "report.html", "report.md",
                                      "junit.xml"};
  for (double waited = 0.0; waited < limit_s; waited += 0.02) {
    bool all = true;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && all; i++) {
      char path[4200];
      snprintf(path, sizeof path, "%s/%s", run_dir, names[i]);
      all = access(path, F_OK) == 0;
    }
    if (all) return;
    struct timespec nap = {0, 20 * 1000 * 1000};
    nanosleep(&nap, NULL);
  }
}

/* Whether rank 0 of a launched job prints per-step progress. The rule is
 * the threads backend's (per-step lines only to a terminal), but a rank
 * cannot apply it itself: OpenMPI's launcher hands every rank a
 * pseudo-terminal as stdout whatever its own stdout is (a file, a pipe, a
 * CI log), so isatty() says yes there. So a rank shows progress only when
 * told, VQC_PROGRESS=1: vqcheck's supervisor sets it (to 1 or 0) by its
 * own stdout (supervise.c); under a plain mpiexec a user at a terminal
 * exports it (mpiexec -x VQC_PROGRESS=1). --quiet and --json win. */
static bool launched_progress(bool quiet, bool json) {
  const char *v = getenv("VQC_PROGRESS");
  return !quiet && !json && v && strcmp(v, "1") == 0;
}

/* Typed outside a launcher, `vqcheck run --backend mpi` launches the job
 * itself and supervises it (supervise.h): a rank that dies or stops is
 * then reported. Under a launcher this process is one rank.
 *
 * A job started directly with `mpirun -np N vqcheck run ...` is not
 * supervised: when one rank dies, OpenMPI's mpirun terminates every other
 * rank at once, before any of them can write run.json or a report (exit
 * 137 or similar, nothing reported). The ranks' live records survive
 * that; `vqcheck analyze DIR` afterwards reports the run, with a
 * rank_failure naming the rank whose record stops first. */
static int run_mpi(run_opts *o, vqc_scenario *sc, int argc, char **argv) {
  if (!vqc_mpi_launched() || vqc_supervise_wanted())
    return vqc_supervise_run(o, sc, argc, argv);
  vqc_comm *c = NULL;
  vqc_status s = launched_comm_create(o->backend, &argc, &argv, &c);
  if (s != VQC_OK) {
    fprintf(stderr, "vqcheck run: %s\n", vqc_cli_error_text());
    return vqc_status_exit_code(s);
  }
  const int rank = vqc_comm_rank(c), size = vqc_comm_size(c);
  /* After MPI_Init, so these handlers are the ones in place. */
  vqc_live_signals();
  signal(SIGTERM, on_rank_signal);
  signal(SIGINT, on_rank_signal);
  signal(SIGHUP, on_rank_signal);
#if VQC_WITH_MPI
  /* Errors the MPI library reports on the world communicator (OpenMPI's
   * nonblocking engine does so for any communicator's request) come back
   * as codes, which the comm layer turns into VQC_ECOMM, instead of
   * killing the job before the run directory is written. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
#endif
  if (o->ranks > 0 && o->ranks != size) {
    if (rank == 0)
      fprintf(stderr, "vqcheck run: --ranks %d but the launcher started %d "
              "processes\nhint: mpiexec -n %d ...\n", o->ranks, size, o->ranks);
    launched_comm_destroy(o->backend, c);
    return 2;
  }
  if (o->ranks < 0 && sc->ranks != size) {
    if (rank == 0)
      fprintf(stderr, "vqcheck run: %s has %d ranks but the launcher started "
              "%d processes\nhint: mpiexec -n %d ..., or pass --ranks %d\n",
              sc->path, sc->ranks, size, sc->ranks, size);
    launched_comm_destroy(o->backend, c);
    return 2;
  }
  s = vqc_scenario_override(sc, size, o->steps, o->seed, o->timeout);
  if (s != VQC_OK) {
    if (rank == 0) fprintf(stderr, "vqcheck run: %s\n", vqc_cli_error_text());
    launched_comm_destroy(o->backend, c);
    return 2;
  }
  vqc_run_options ro = {o->out, NULL};
  if (rank == 0 && launched_progress(o->quiet, o->json)) ro.progress = stdout;
  vqc_run_result r;
  s = vqc_run_on_comm_device(sc, &ro, o->device, c, &r);
  int code;
  if (s != VQC_OK) {
    fprintf(stderr, "vqcheck run: rank %d: %s\n", rank, vqc_cli_error_text());
    code = vqc_status_exit_code(s);
  } else if (rank == 0) {
    /* Before any abort below: a run that failed or deadlocked is exactly
     * the one whose report matters. */
    code = finish_run(o, sc, &r);
  } else {
    code = vqc_run_exit_code(&r);
  }
  /* The others wait for rank 0's reports: a rank that aborts (or exits with
   * a non-zero code) first makes the launcher kill the job, rank 0 in the
   * middle of writing too. Over the side channel, which outlives a broken
   * data comm; bounded by its deadline, so a lost rank 0 cannot hang us.
   * A rank whose own run went well takes rank 0's code (the verdict of
   * run.json and the reports), so the job ends with one code. */
  vqc_comm *side = vqc_comm_side(c);
  /* Rank 0's reports take well under a second; a rank that is gone or
   * stopped must not hold the others longer than the timeout + 2 s. */
  vqc_comm_set_timeout(side, sc->timeout_s + 2.0);
  int64_t code0 = code;
  const bool side_ok = vqc_broadcast(side, &code0, 1, VQC_I64, 0) == VQC_OK;
  /* Whether rank 0's verdict reached this rank (rank 0 has its own). */
  bool heard = side_ok || rank == 0;
  if (side_ok) {
    if (rank != 0 && s == VQC_OK) code = (int)code0;
  } else if (rank != 0 && r.run_dir[0]) {
    /* No answer in time: rank 0 is slow with its reports, or the side
     * channel is broken (a rank gone or stopped; it then fails at once).
     * Wait for rank 0's files instead, still bounded, so that an abort
     * below does not kill rank 0 in mid-report, and take run.json's
     * verdict when it is there. */
    wait_for_rank0_reports(r.run_dir, 2.0 * sc->timeout_s + 10.0);
    char path[4200];
    snprintf(path, sizeof path, "%s/run.json", r.run_dir);
    vqc_findings f0;
    vqc_findings_init(&f0);
    int c0 = 0;
    heard = vqc_run_read_json(path, &f0, &c0) == VQC_OK;
    vqc_findings_free(&f0);
    if (heard && s == VQC_OK) code = c0;
  }
  /* Without rank 0's verdict a rank is gone: the job ends here too
   * (MPI_Finalize could wait for that rank), never with 0. */
  if (!heard && code == 0) code = 3;
  const bool failed = s != VQC_OK || r.training != VQC_OK || !heard;
  vqc_run_result_free(&r);
#if VQC_WITH_MPI
  if (failed) mpi_end_failed_job(code);
#else
  (void)failed;
#endif
  launched_comm_destroy(o->backend, c);
  return code;
}

int vqc_cmd_run(int argc, char **argv) {
  run_opts o;
  int rc = vqc_run_parse_opts("run", argc, argv, false, run_help, &o);
  if (rc >= 0) return rc;
  if (!o.path)
    return vqc_cli_usage_error("run", "no scenario given (e.g. vqcheck run "
                               "scenarios/<name>.yaml; 'vqcheck list' shows "
                               "them)");
  vqc_scenario sc;
  if (vqc_scenario_load(o.path, &sc) != VQC_OK) {
    fprintf(stderr, "vqcheck run: %s\n", vqc_cli_error_text());
    return 2;
  }
  /* Before any comm is made or anything written: a scenario without a
   * device path is refused (2), then a machine without a device (3). */
  if (vqc_run_check_device(&sc, o.device, o.backend) != VQC_OK) {
    fprintf(stderr, "vqcheck run: %s\n", vqc_cli_error_text());
    return 2;
  }
  if ((rc = vqc_run_device_unusable("run", o.device)) != 0) return rc;
  if (vqc_run_launched_backend(o.backend)) {
    if (!vqc_backend_built(o.backend)) {
      fprintf(stderr, "vqcheck run: this build has no %s backend\n",
              o.backend == VQC_BACKEND_NCCL ? "NCCL" : "MPI");
      return 3;
    }
    return run_mpi(&o, &sc, argc, argv);
  }
  if (vqc_scenario_override(&sc, o.ranks, o.steps, o.seed, o.timeout) !=
      VQC_OK) {
    fprintf(stderr, "vqcheck run: %s\n", vqc_cli_error_text());
    return 2;
  }
  vqc_run_options ro = {o.out, NULL};
  if (vqc_cli_show_progress(o.quiet, o.json)) ro.progress = stdout;
  vqc_run_result r;
  vqc_status s = vqc_run_threads_device(&sc, &ro, o.device, &r);
  if (s != VQC_OK) {
    /* A refused run directory (not vqcheck's, or in use) is VQC_EINVAL:
     * exit 2, with the message saying what to pass instead. Steps done
     * (the runner sets them only once training is over): it trained, and
     * what failed is writing run.json, so no verdict was recorded. */
    if (r.steps_done > 0)
      fprintf(stderr, "vqcheck run: the run ended after %" PRId64 " of %d "
              "step%s but could not be recorded, so it has no verdict: %s\n"
              "hint: once the cause is fixed, 'vqcheck analyze %s' rebuilds "
              "its verdict from the files the ranks wrote\n",
              r.steps_done, sc.steps, sc.steps == 1 ? "" : "s",
              vqc_cli_error_text(), r.run_dir);
    else
      fprintf(stderr, "vqcheck run: %s\n", vqc_cli_error_text());
    vqc_run_result_free(&r);
    return vqc_status_exit_code(s);
  }
  const int code = finish_run(&o, &sc, &r);
  vqc_run_result_free(&r); /* and with it the run directory's lock */
  return code;
}
