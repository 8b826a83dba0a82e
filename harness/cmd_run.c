/* cmd_run.c: `vqcheck run SCENARIO` and `vqcheck suite [DIR]`.
 *
 * run    trains one scenario with every checker on (runner.h), writes its
 *        run directory (run.json, then report.md, report.html and junit.xml
 *        made from it by reports/report.h) and prints a summary, or with
 *        --json the run.json document. Exit 0: no findings; 1: findings;
 *        2: bad scenario or usage; 3: environment, or training stopped with
 *        an error no checker explained.
 * suite  runs every scenario of a directory, each as a child process
 *        (`vqcheck run ... --out <out>/<name>`; with --backend mpi through
 *        the MPI launcher), reads each child's run.json, checks it against
 *        the scenario's expectation, prints a table and a last line
 *        "N passed, M failed", and writes the suite's own junit.xml (one
 *        testcase per scenario) and report.md into <out>. Exit 0 only when
 *        every expectation holds. A child that outlives its deadline
 *        (4 x timeout + 60 s) is killed and fails: the suite never hangs on
 *        a scenario.
 *
 * --device cuda (both commands) runs the models' hot paths on the GPU
 * (run_models.h "Device"). A scenario without a device path is a usage
 * error (exit 2) and a machine without a usable device an environment one
 * (exit 3), both said before anything is trained or written. --backend
 * nccl (device buffers) needs --device cuda.
 *
 * Output conventions (cli.h): progress (a line per step, a line per
 * scenario) only when stdout is a terminal; --quiet drops it and the
 * summary; --json puts one JSON document on stdout and nothing else there
 * (errors always go to stderr). */
#include <dirent.h>
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
#include "report.h"
#include "run_models.h"
#include "runner.h"
#include "scenario.h"
#include "vqc/vqc.h"

#if VQC_WITH_MPI
#include <mpi.h>
#endif

#ifndef VQC_SCENARIO_DIR
#define VQC_SCENARIO_DIR "scenarios"
#endif

/* The report files of a run directory, in the order they are listed. */
static const unsigned report_formats[3] = {VQC_REPORT_HTML, VQC_REPORT_MD,
                                           VQC_REPORT_JUNIT};

/* ---- options shared by run and suite */

typedef struct run_opts {
  const char *path;     /* run: the scenario file; suite: the directory */
  int ranks;            /* < 0: the scenario's */
  int steps;
  int64_t seed;
  double timeout;
  bool backend_set;
  vqc_backend backend;
  vqc_device device;    /* --device; VQC_DEVICE_CPU unless told */
  const char *out;
  const char *launcher; /* suite only */
  bool quiet;
  bool json;
} run_opts;

static bool parse_int(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || errno != 0 || v < lo || v > hi)
    return false;
  *out = v;
  return true;
}

#define VQC_STRINGIFY_(x) #x
#define VQC_STRINGIFY(x) VQC_STRINGIFY_(x)

/* The options that take a value; NULL when `a` is not one of them. The
 * text says what a good value looks like, for the usage error. */
static const char *value_option(const char *a, bool suite) {
  if (strcmp(a, "--ranks") == 0)
    return "an integer from 1 to " VQC_STRINGIFY(VQC_SCENARIO_MAX_RANKS);
  if (strcmp(a, "--steps") == 0) return "an integer from 1 to 1000000";
  if (strcmp(a, "--seed") == 0) return "an integer >= 0";
  if (strcmp(a, "--timeout") == 0) return "seconds, > 0 and <= 86400";
  if (strcmp(a, "--backend") == 0)
    return "threads, mpi, or nccl with --device cuda";
  if (strcmp(a, "--device") == 0) return "cpu or cuda";
  if (strcmp(a, "--out") == 0) return "a directory";
  if (suite && strcmp(a, "--launcher") == 0) return "a command line";
  return NULL;
}

/* Parses argv[1..]; returns -1 to go on, else the exit code (0 after
 * --help, 2 after misuse). */
static int parse_opts(const char *cmd, int argc, char **argv, bool suite,
                      void (*help)(FILE *), run_opts *o) {
  memset(o, 0, sizeof *o);
  o->ranks = o->steps = -1;
  o->seed = -1;
  o->timeout = -1.0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      help(stdout);
      return 0;
    } else if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
      o->quiet = true;
      continue;
    } else if (strcmp(a, "--json") == 0) {
      o->json = true;
      continue;
    } else if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0) {
      vqc_cli_set_verbose(true);
      continue;
    } else if (a[0] != '-') {
      if (o->path)
        return vqc_cli_usage_error(cmd, "more than one %s given ('%s', '%s')",
                                   suite ? "directory" : "scenario", o->path,
                                   a);
      o->path = a;
      continue;
    }
    const char *want = value_option(a, suite);
    if (!want) return vqc_cli_usage_error(cmd, "unknown option '%s'", a);
    if (i + 1 >= argc)
      return vqc_cli_usage_error(cmd, "%s needs a value (%s)", a, want);
    const char *v = argv[++i];
    bool ok = true;
    long n;
    if (strcmp(a, "--ranks") == 0) {
      ok = parse_int(v, 1, VQC_SCENARIO_MAX_RANKS, &n);
      o->ranks = (int)n;
    } else if (strcmp(a, "--steps") == 0) {
      ok = parse_int(v, 1, 1000000, &n);
      o->steps = (int)n;
    } else if (strcmp(a, "--seed") == 0) {
      char *end;
      errno = 0;
      long long s = strtoll(v, &end, 10);
      ok = *v && *end == '\0' && errno == 0 && s >= 0;
      o->seed = s;
    } else if (strcmp(a, "--timeout") == 0) {
      char *end;
      o->timeout = strtod(v, &end);
      ok = *v && *end == '\0' && o->timeout > 0 && o->timeout <= 86400;
    } else if (strcmp(a, "--backend") == 0) {
      ok = vqc_backend_from_name(v, &o->backend) == VQC_OK;
      o->backend_set = true;
    } else if (strcmp(a, "--device") == 0) {
      ok = strcmp(v, "cpu") == 0 || strcmp(v, "cuda") == 0;
      o->device = strcmp(v, "cuda") == 0 ? VQC_DEVICE_CUDA : VQC_DEVICE_CPU;
    } else if (strcmp(a, "--out") == 0) {
      o->out = v;
    } else { /* --launcher */
      ok = v[0] != '\0';
      o->launcher = v;
    }
    if (!ok)
      return vqc_cli_usage_error(cmd, "bad value for %s: '%s' (expected %s)",
                                 a, v, want);
  }
  if (o->backend == VQC_BACKEND_NCCL && o->device != VQC_DEVICE_CUDA)
    return vqc_cli_usage_error(cmd, "--backend nccl needs --device cuda "
                               "(NCCL moves device buffers only)");
  if (!o->backend_set)
    o->backend = vqc_mpi_launched() ? VQC_BACKEND_MPI : VQC_BACKEND_THREADS;
  return -1;
}

/* True for the backends whose ranks are processes started by a launcher. */
static bool launched_backend(vqc_backend b) {
  return b == VQC_BACKEND_MPI || b == VQC_BACKEND_NCCL;
}

/* --device cuda on a machine without a device: prints why ("no usable
 * CUDA device (...): run with --device cpu") and returns 3; 0 when a device
 * answers or none is asked for. Called before anything is trained or
 * written. Only asks whether a device answers, which makes no CUDA context:
 * the suite's parent would otherwise hold one on GPU 0 while its children
 * run, and an nccl rank would make one there before picking its own GPU.
 * The runner's full probe (an allocation and a launch) comes later, on the
 * rank's device. */
static int device_unusable(const char *cmd, vqc_device device) {
  if (device != VQC_DEVICE_CUDA || vqc_cuda_available()) return 0;
  (void)vqc_run_probe_device(); /* fails; its message says why */
  fprintf(stderr, "vqcheck %s: %s\n", cmd, vqc_cli_error_text());
  return 3;
}

/* ---- vqcheck run */

static void run_help(FILE *f) {
  fprintf(f,
          "usage: vqcheck run SCENARIO [--ranks N] [--steps N] [--seed S]\n"
          "                   [--backend threads|mpi|nccl] [--device "
          "cpu|cuda]\n"
          "                   [--timeout S] [--out DIR] [--json] [--quiet] "
          "[--verbose]\n\n"
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
          "mpiexec, device\n                 buffers; needs --device cuda)\n"
          "  --device D     cpu (default) or cuda: the models' hot paths on "
          "the GPU\n                 (vq: codebook and batch on the device; "
          "fsq: its quantizer);\n                 other models are refused "
          "(exit 2), a missing GPU is exit 3\n"
          "  --out DIR      the run directory\n"
          "  --json         print run.json on stdout, with \"run_dir\" and "
          "\"reports\"\n                 (file paths) added, instead of the "
          "summary\n"
          "  --quiet        no progress and no summary\n"
          "  --verbose      full internal error text (also: VQC_DEBUG=1)\n\n"
          "Progress (a line per step, findings as they appear) is shown when "
          "stdout is\na terminal. On a cluster: mpirun -np N vqcheck run "
          "SCENARIO --backend mpi,\nor srun -n N vqcheck run SCENARIO (rank 0 "
          "writes the run directory).\n\n"
          "exit: 0 no findings, 1 findings, 2 bad scenario or usage, 3 "
          "environment\n      error (or training stopped without a "
          "finding that explains it)\n");
}

static void print_summary(const vqc_scenario *sc, const vqc_run_result *r,
                          bool reports_written) {
  printf("%s: %s model, %d ranks (%s%s), %" PRId64 "/%d steps in %.2f s\n",
         sc->name, vqc_model_name(sc->model), r->ranks,
         vqc_backend_name(r->backend),
         r->device == VQC_DEVICE_CUDA ? ", device cuda" : "", r->steps_done,
         sc->steps, r->seconds);
  vqc_findings *f = (vqc_findings *)&r->findings;
  printf("findings: %d\n", f->count);
  for (int i = 0; i < f->count; i++) {
    const vqc_finding *x = &f->items[i];
    printf("  %s at step %" PRId64, vqc_finding_kind_name(x->kind), x->step);
    if (x->tensor[0]) printf(" in %s", x->tensor);
    if (x->nranks > 0) {
      printf(" (rank%s", x->nranks > 1 ? "s" : "");
      for (int k = 0; k < x->nranks; k++) printf("%s%d", k ? ", " : " ", x->ranks[k]);
      printf(")");
    }
    if (x->site[0]) printf(" at %s", x->site);
    printf(":\n    %s\n", x->message);
  }
  if (r->training != VQC_OK) {
    char why[sizeof r->message];
    vqc_cli_strip_internal(r->message, why, sizeof why);
    printf("training stopped: %s\n", vqc_cli_debug() ? r->message : why);
  }
  char why[512];
  if (vqc_scenario_expectations_met(sc, f, why, sizeof why))
    printf("expectation (%s): met\n", sc->expect_clean ? "clean" : "findings");
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
  json_error_t err;
  json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
  if (!json_is_object(doc)) {
    fprintf(stderr, "vqcheck run: cannot read back %s: %s\n", path,
            doc ? "not an object" : err.text);
    json_decref(doc);
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
  fprintf(stderr, "vqcheck run: cannot write the reports: %s\n",
          vqc_cli_error_text());
  return vqc_status_exit_code(s);
}

/* What rank 0 does once its run is over and run.json is written: the
 * reports, then the summary or the JSON document. Returns the exit code. */
static int finish_run(const run_opts *o, const vqc_scenario *sc,
                      const vqc_run_result *r) {
  int code = vqc_run_exit_code(r);
  const int report_code = write_run_reports(r->run_dir);
  if (report_code != 0) code = report_code;
  if (o->json) {
    const int j = print_run_document(r->run_dir, report_code == 0);
    if (j != 0) code = j;
  } else if (!o->quiet) {
    print_summary(sc, r, report_code == 0);
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

static int run_mpi(run_opts *o, vqc_scenario *sc, int argc, char **argv) {
  vqc_comm *c = NULL;
  vqc_status s = launched_comm_create(o->backend, &argc, &argv, &c);
  if (s != VQC_OK) {
    fprintf(stderr, "vqcheck run: %s\n", vqc_cli_error_text());
    return vqc_status_exit_code(s);
  }
  const int rank = vqc_comm_rank(c), size = vqc_comm_size(c);
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
  if (rank == 0 && vqc_cli_show_progress(o->quiet, o->json))
    ro.progress = stdout;
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
  vqc_comm_set_timeout(side, sc->timeout_s + 60.0);
  int64_t code0 = code;
  if (vqc_broadcast(side, &code0, 1, VQC_I64, 0) == VQC_OK && rank != 0 &&
      s == VQC_OK)
    code = (int)code0;
  const bool failed = s != VQC_OK || r.training != VQC_OK;
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
  int rc = parse_opts("run", argc, argv, false, run_help, &o);
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
  if ((rc = device_unusable("run", o.device)) != 0) return rc;
  if (launched_backend(o.backend)) {
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
    fprintf(stderr, "vqcheck run: %s\n", vqc_cli_error_text());
    vqc_run_result_free(&r);
    return vqc_status_exit_code(s);
  }
  const int code = finish_run(&o, &sc, &r);
  vqc_run_result_free(&r);
  return code;
}

/* ---- vqcheck suite */

static void suite_help(FILE *f) {
  fprintf(f,
          "usage: vqcheck suite [DIR] [--ranks N] [--steps N] [--seed S]\n"
          "                     [--backend threads|mpi|nccl] [--device "
          "cpu|cuda]\n                     [--timeout S] [--out OUT] "
          "[--launcher CMD] [--json]\n                     [--quiet] "
          "[--verbose]\n\n"
          "Runs every scenario in DIR (*.yaml, *.yml; default "
          "$VQC_SCENARIO_DIR, else\n%s), each as its own `vqcheck run` in "
          "OUT/<name> (default OUT:\nvqcheck-runs/suite-<time>), and checks "
          "its findings against the scenario's\nexpectation. Prints a table "
          "and a last line 'N passed, M failed'.\n\n"
          "Writes OUT/junit.xml (one testcase per scenario) and OUT/report.md "
          "(the table,\nwith links); each OUT/<name> holds that scenario's "
          "run.json, report.html,\nreport.md, junit.xml and vqcheck.log.\n\n"
          "  --backend mpi  launch each run as LAUNCHER -n <ranks> vqcheck "
          "run ...;\n                 LAUNCHER: --launcher, else "
          "$VQC_LAUNCHER, else\n                 'mpiexec --oversubscribe' "
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
          "A line per running scenario is shown when stdout is a terminal.\n\n"
          "exit: 0 every expectation holds, 1 some did not, 2 bad usage or a "
          "scenario\n      that does not load, 3 environment error (e.g. "
          "the suite report cannot\n      be written)\n",
          VQC_SCENARIO_DIR);
}

static bool has_suffix(const char *s, const char *suffix) {
  const size_t ls = strlen(s), lx = strlen(suffix);
  return ls > lx && strcmp(s + ls - lx, suffix) == 0;
}

static int compare_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The scenario files of dir, sorted; NULL (errno set) when unreadable. */
static char **list_scenarios(const char *dir, int *count) {
  *count = 0;
  DIR *d = opendir(dir);
  if (!d) return NULL;
  char **names = NULL;
  int cap = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    if (!has_suffix(e->d_name, ".yaml") && !has_suffix(e->d_name, ".yml"))
      continue;
    if (*count == cap) {
      cap = cap ? 2 * cap : 16;
      char **g = realloc(names, (size_t)cap * sizeof *g);
      if (!g) break;
      names = g;
    }
    names[(*count)++] = strdup(e->d_name);
  }
  closedir(d);
  if (!names) names = calloc(1, sizeof *names);
  if (*count > 1) qsort(names, (size_t)*count, sizeof *names, compare_names);
  return names;
}

/* Splits a launcher command line on spaces into argv (appended to args). */
static int split_words(char *line, char **args, int max) {
  int n = 0;
  for (char *tok = strtok(line, " \t"); tok && n < max; tok = strtok(NULL, " \t"))
    args[n++] = tok;
  return n;
}

/* True when `prog` is an executable on $PATH (or a path that is one). */
static bool on_path(const char *prog) {
  if (strchr(prog, '/')) return access(prog, X_OK) == 0;
  const char *path = getenv("PATH");
  if (!path) return false;
  char *copy = strdup(path);
  bool found = false;
  for (char *dir = strtok(copy, ":"); dir && !found; dir = strtok(NULL, ":")) {
    char full[4096];
    snprintf(full, sizeof full, "%s/%s", dir, prog);
    found = access(full, X_OK) == 0;
  }
  free(copy);
  return found;
}

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs args (NULL-terminated) as a child in its own process group with
 * stdout and stderr going to log; kills the group after limit_s. Returns
 * the exit code, 128 + signal when killed by one, -1 when it could not be
 * started, -2 when it ran past its deadline. */
static int run_child(char **args, const char *log, double limit_s) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    setpgid(0, 0);
    FILE *f = freopen(log, "w", stdout);
    if (f) dup2(fileno(stdout), STDERR_FILENO);
    execvp(args[0], args);
    fprintf(stderr, "vqcheck suite: cannot run %s: %s\n", args[0],
            strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid);
  const double deadline = mono_s() + limit_s;
  int status = 0;
  for (;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) return -1;
    if (mono_s() > deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -2;
    }
    struct timespec nap = {0, 20 * 1000 * 1000};
    nanosleep(&nap, NULL);
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
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

int vqc_cmd_suite(int argc, char **argv) {
  run_opts o;
  int rc = parse_opts("suite", argc, argv, true, suite_help, &o);
  if (rc >= 0) return rc;
  if (o.launcher && !launched_backend(o.backend))
    return vqc_cli_usage_error("suite", "--launcher is for --backend mpi or "
                               "nccl");
  if ((rc = device_unusable("suite", o.device)) != 0) return rc;
  const char *dir = o.path ? o.path : getenv("VQC_SCENARIO_DIR");
  if (!dir || !dir[0]) dir = VQC_SCENARIO_DIR;
  int nfiles = 0;
  char **files = list_scenarios(dir, &nfiles);
  if (!files) {
    fprintf(stderr, "vqcheck suite: cannot read %s: %s\n", dir,
            strerror(errno));
    fprintf(stderr, "hint: 'vqcheck suite --help'\n");
    return 2;
  }
  if (nfiles == 0) {
    fprintf(stderr, "vqcheck suite: no scenario files (*.yaml) in %s\n", dir);
    free(files);
    return 2;
  }

  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    fprintf(stderr, "vqcheck suite: cannot find this program's path\n");
    return 3;
  }
  self[n] = '\0';

  char launcher[1024] = "";
  if (launched_backend(o.backend)) {
    const char *l = o.launcher ? o.launcher : getenv("VQC_LAUNCHER");
    if (l && l[0])
      snprintf(launcher, sizeof launcher, "%s", l);
    else
      snprintf(launcher, sizeof launcher, "mpiexec --oversubscribe%s",
               geteuid() == 0 ? " --allow-run-as-root" : "");
    char first[1024];
    snprintf(first, sizeof first, "%s", launcher);
    char *word = strtok(first, " \t");
    if (!word || !on_path(word)) {
      fprintf(stderr, "vqcheck suite: the MPI launcher '%s' is not "
              "available\nhint: install OpenMPI (scripts/install-deps.sh) or "
              "pass --launcher\n", word ? word : launcher);
      return 3;
    }
  }

  char base[4096];
  if (o.out && o.out[0]) {
    snprintf(base, sizeof base, "%s", o.out);
  } else {
    vqc_run_default_dir("suite", base, sizeof base);
  }
  /* Up front: the suite report goes here even when nothing runs. */
  if (vqc_mkdir_p(base) != VQC_OK) {
    fprintf(stderr, "vqcheck suite: %s\n", vqc_cli_error_text());
    return 3;
  }

  /* Load everything first: a file that does not load is reported up
   * front, and the table's columns fit the names. */
  vqc_scenario *scs = calloc((size_t)nfiles, sizeof *scs);
  bool *loaded = calloc((size_t)nfiles, sizeof *loaded);
  char (*load_err)[1024] = calloc((size_t)nfiles, sizeof *load_err);
  vqc_suite_case *cases = calloc((size_t)nfiles, sizeof *cases);
  int *exit_codes = calloc((size_t)nfiles, sizeof *exit_codes);
  if (!scs || !loaded || !load_err || !cases || !exit_codes) {
    fprintf(stderr, "vqcheck suite: no memory for %d scenarios\n", nfiles);
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
  const bool table = !o.json && !o.quiet;
  const bool progress = vqc_cli_show_progress(o.quiet, o.json);
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
    snprintf(rundir, sizeof rundir, "%s/%s", base, sc.name);
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
     * read as this run's. */
    if (vqc_run_dir_prepare(rundir) != VQC_OK) {
      snprintf(c->message, sizeof c->message, "%.1000s", vqc_cli_error_text());
      c->error = true;
      failed++;
      if (!o.json) print_case_row(&w, c);
      continue;
    }
    char json[4400];
    snprintf(json, sizeof json, "%s/run.json", rundir);

    /* The child's command line. */
    char *args[96];
    int k = 0;
    char lcopy[1024], nranks[16], steps[16], seed[32], timeout[32];
    if (launched_backend(o.backend)) {
      snprintf(lcopy, sizeof lcopy, "%s", launcher);
      k = split_words(lcopy, args, 64);
      snprintf(nranks, sizeof nranks, "%d", sc.ranks);
      args[k++] = "-n";
      args[k++] = nranks;
    }
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
    if (o.ranks > 0) {
      snprintf(nranks, sizeof nranks, "%d", sc.ranks);
      args[k++] = "--ranks";
      args[k++] = nranks;
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
    const double t0 = mono_s();
    const int code = run_child(args, log, 4.0 * sc.timeout_s + 60.0);
    c->seconds = mono_s() - t0;
    exit_codes[i] = code;
    if (progress) printf("\r\033[K");

    vqc_findings f;
    vqc_findings_init(&f);
    char why[5000] = "";
    bool ok = false;
    if (code == -2) {
      snprintf(why, sizeof why, "killed after %.0f s (see %s)", c->seconds,
               log);
      c->error = true;
    } else if (code < 0 || code == 2 || code >= 126) {
      snprintf(why, sizeof why, "the run failed to start or crashed (exit "
               "%d; see %s)", code, log);
      c->error = true;
    } else if (vqc_run_read_json(json, &f, NULL) != VQC_OK) {
      snprintf(why, sizeof why, "no readable run.json (exit %d): %s", code,
               vqc_cli_error_text());
      c->error = true;
    } else {
      found_string(&f, c->found, sizeof c->found);
      ok = vqc_scenario_expectations_met(&sc, &f, why, sizeof why);
    }
    vqc_findings_free(&f);
    c->passed = ok;
    if (!ok) vqc_cli_strip_internal(why, c->message, sizeof c->message);
    if (table || (!o.json && !ok)) print_case_row(&w, c);
    if (ok) passed++;
    else failed++;
  }

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
    json_object_set_new(doc, "ok", json_boolean(code == 0));
    json_object_set_new(doc, "exit_code", json_integer(code));
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
  for (int i = 0; i < nfiles; i++) free(files[i]);
  free(files);
  free(scs);
  free(loaded);
  free(load_err);
  free(cases);
  free(exit_codes);
  return code;
}
