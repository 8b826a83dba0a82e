/* run_options.c: the options `vqcheck run` and `vqcheck suite` share (see
 * run_options.h). */
#include "run_options.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "run_models.h"
#include "scenario.h"
#include "vqc/vqc.h"

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
