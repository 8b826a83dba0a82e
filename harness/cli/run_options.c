/* run_options.c: the options `vqcheck run` and `vqcheck suite` share, and
 * their rule for a run whose training stopped (see run_options.h). */
#include "run_options.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "run_models.h"
#include "scenario.h"
#include "vqc/vqc.h"

#define VQC_STRINGIFY_(x) #x
#define VQC_STRINGIFY(x) VQC_STRINGIFY_(x)

/* The options that take a value; NULL when `a` is not one of them. The
 * text says what a good value looks like, for the usage error. */
static const char *value_option(const char *a) {
  if (strcmp(a, "--ranks") == 0)
    return "an integer from 1 to " VQC_STRINGIFY(VQC_SCENARIO_MAX_RANKS);
  if (strcmp(a, "--steps") == 0) return "an integer from 1 to 1000000";
  if (strcmp(a, "--seed") == 0) return "an integer >= 0";
  if (strcmp(a, "--timeout") == 0) return "seconds, > 0 and <= 86400";
  if (strcmp(a, "--backend") == 0)
    return "threads, mpi, or nccl with --device cuda";
  if (strcmp(a, "--device") == 0) return "cpu or cuda";
  if (strcmp(a, "--out") == 0) return "a directory";
  if (strcmp(a, "--launcher") == 0) return "a command line";
  return NULL;
}

/* Parses argv[1..]; returns -1 to go on, else the exit code (0 after
 * --help, 2 after misuse). */
int vqc_run_parse_opts(const char *cmd, int argc, char **argv, bool suite,
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
    const char *want = value_option(a);
    if (!want) return vqc_cli_usage_error(cmd, "unknown option '%s'", a);
    if (i + 1 >= argc)
      return vqc_cli_usage_error(cmd, "%s needs a value (%s)", a, want);
    const char *v = argv[++i];
    bool ok = true;
    long n;
    if (strcmp(a, "--ranks") == 0) {
      ok = vqc_cli_parse_long(v, 1, VQC_SCENARIO_MAX_RANKS, &n);
      o->ranks = (int)n;
    } else if (strcmp(a, "--steps") == 0) {
      ok = vqc_cli_parse_long(v, 1, 1000000, &n);
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
      if (vqc_cli_check_out(cmd, v) != 0) return 2;
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
bool vqc_run_launched_backend(vqc_backend b) {
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
int vqc_run_device_unusable(const char *cmd, vqc_device device) {
  if (device != VQC_DEVICE_CUDA || vqc_cuda_available()) return 0;
  (void)vqc_run_probe_device(); /* fails; its message says why */
  fprintf(stderr, "vqcheck %s: %s\n", cmd, vqc_cli_error_text());
  return 3;
}

/* ---- how training ended */

/* Whether a finding of kind k explains a stop with status s (the table in
 * run_options.h). */
static bool kind_explains(vqc_finding_kind k, vqc_status s) {
  switch (s) {
    case VQC_ETIMEOUT:
      return k == VQC_FINDING_DEADLOCK || k == VQC_FINDING_RANK_FAILURE;
    case VQC_EMISMATCH:
      return k == VQC_FINDING_COLLECTIVE_MISMATCH;
    case VQC_ESHAPE:
      return k == VQC_FINDING_SHAPE_MISMATCH;
    case VQC_EABORTED:
    case VQC_ECOMM:
      return k == VQC_FINDING_DEADLOCK || k == VQC_FINDING_RANK_FAILURE ||
             k == VQC_FINDING_COLLECTIVE_MISMATCH ||
             k == VQC_FINDING_SHAPE_MISMATCH;
    default:
      return false;
  }
}

/* The expected kind that explains the stop, or -1: in sc's expectation,
 * able to explain t->status, and found in f. */
static int explaining_kind(const vqc_scenario *sc, vqc_status status,
                           vqc_findings *f) {
  if (sc->expect_clean || sc->nexpect == 0 || !f) return -1;
  int kind = -1;
  pthread_mutex_lock(&f->lock);
  for (int i = 0; i < sc->nexpect && kind < 0; i++) {
    const vqc_finding_kind k = sc->expect[i].kind;
    if (!kind_explains(k, status)) continue;
    for (int j = 0; j < f->count && kind < 0; j++)
      if (f->items[j].kind == k) kind = (int)k;
  }
  pthread_mutex_unlock(&f->lock);
  return kind;
}

vqc_training_verdict vqc_run_judge_training(const vqc_scenario *sc,
                                            const vqc_run_training *t,
                                            vqc_findings *f, char *why,
                                            size_t n) {
  char scratch[8];
  if (!why || n == 0) {
    why = scratch;
    n = sizeof scratch;
  }
  why[0] = '\0';
  if (t->status == VQC_OK && t->steps_done >= sc->steps)
    return VQC_TRAINING_COMPLETE;
  if (t->status == VQC_OK) {
    snprintf(why, n, "training ended after %" PRId64 " of %d steps without "
             "an error", t->steps_done, sc->steps);
    return VQC_TRAINING_FAILED;
  }
  /* The message without the library's source locations and without the
   * "rank N: " the runner puts first (said here already). */
  char text[1024];
  const char *m = t->message ? t->message : "";
  if (vqc_cli_debug())
    snprintf(text, sizeof text, "%s", m);
  else
    vqc_cli_strip_internal(m, text, sizeof text);
  const char *body = text;
  char prefix[32];
  snprintf(prefix, sizeof prefix, "rank %d: ", t->failed_rank);
  if (t->failed_rank >= 0 && strncmp(body, prefix, strlen(prefix)) == 0)
    body += strlen(prefix);
  char where[64] = "";
  if (t->failed_rank >= 0)
    snprintf(where, sizeof where, " on rank %d", t->failed_rank);
  int used = snprintf(why, n, "training stopped at step %" PRId64 " of %d%s "
                      "(%s)%s%s", t->steps_done, sc->steps, where,
                      vqc_status_message(t->status), body[0] ? ": " : "",
                      body);
  const int kind = explaining_kind(sc, t->status, f);
  if (kind < 0) return VQC_TRAINING_FAILED;
  if (used >= 0 && (size_t)used < n)
    snprintf(why + used, n - (size_t)used, "; the expected %s explains it",
             vqc_finding_kind_name((vqc_finding_kind)kind));
  return VQC_TRAINING_EXPLAINED;
}

const char *vqc_run_training_hint(vqc_status s) {
  switch (s) {
    case VQC_ETIMEOUT:
      return "a collective passed its deadline: on a slow or busy machine "
             "raise --timeout; otherwise a rank is stuck (see the run's "
             "report)";
    case VQC_ENOMEM:
      return "free memory (or raise the memory limit, ulimit -v) or run "
             "with smaller sizes, batch or --ranks";
    case VQC_EABORTED:
    case VQC_ECOMM:
      return "a rank or the communication backend failed: see the "
             "launcher's output and the run's report";
    case VQC_EIO:
      return "check that the run directory is writable and has space";
    case VQC_ENODEVICE:
    case VQC_ECUDA:
      return "check the GPU (nvidia-smi) or run with --device cpu";
    default:
      return "see training.message in the run directory's run.json";
  }
}
