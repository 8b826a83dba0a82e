/* test_run_device.c: `--device` of `vqcheck run` and `vqcheck suite`, and
 * the runner's device checks (harness/models/run_models.h "Device"), without a
 * GPU. What a GPU run computes is tests/gpu/test_gpu_runner.c's business;
 * here:
 *   - which scenarios have a device path (vqc_run_check_device): vq and
 *     fsq do; rvq, clip and autoencoder are refused by name, and so are the
 *     EMA faults the device path does not run; nccl needs --device cuda,
 *     and a vq without host collectives;
 *   - the command line: --device bogus and --backend nccl without cuda are
 *     usage errors (exit 2, with a hint); a model without a device path is
 *     exit 2 even here (said before any device is looked for); --device cpu
 *     is the old behaviour and run.json records the device;
 *   - on a machine without a usable device (this one: the CUDA runtime says
 *     "driver version is insufficient"): `run --device cuda` and `suite
 *     --device cuda` exit 3 with "no usable CUDA device (...): run with
 *     --device cpu" and write nothing (the --out directory is not even
 *     created), and vqc_run_threads_device returns VQC_ENODEVICE the same way.
 *     Those cases skip where a device answers.
 * The CLI is the built binary (VQC_CLI_PATH), run as a child process. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_models.h"
#include "runner.h"
#include "scenario.h"
#include "spawn_capture.h"
#include "test_paths.h"
#include "vqc/vqc.h"

#ifndef VQC_CLI_PATH
#error "VQC_CLI_PATH must name the built vqcheck (tests/CMakeLists.txt)"
#endif

static void scenario_path(const char *name, char *buf, size_t n) {
  snprintf(buf, n, "%s/scenarios/%s.yaml", vqc_test_source_dir(), name);
}

static void load(const char *name, vqc_scenario *sc) {
  char path[4096];
  scenario_path(name, path, sizeof path);
  cr_assert_eq(vqc_scenario_load(path, sc), VQC_OK, "%s", vqc_last_error());
}

/* The cases that need "no device here" skip where one answers. */
static void require_no_device(void) {
  if (vqc_cuda_available())
    cr_skip_test("a CUDA device answers here; this case checks the refusal "
                 "on machines without one");
}

/* A path under a fresh temporary directory that does not exist yet. */
static void fresh_path(char *buf, size_t n, const char *leaf) {
  char dir[] = "/tmp/vqc-test-run-device-XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  snprintf(buf, n, "%s/%s", dir, leaf);
}

static bool exists(const char *path) { return access(path, F_OK) == 0; }

/* Removes a run directory (its files, then itself) and the temporary
 * directory fresh_path made around it. */
static void remove_run(char *path) {
  vqc_test_remove_dir(path);
  char *slash = strrchr(path, '/');
  if (slash) {
    *slash = '\0';
    rmdir(path);
  }
}

/* ---- running the binary (tests/common/spawn_capture.h) */

typedef vqc_spawn_result cli_out;

/* Runs `vqcheck args...` (NULL-terminated), stdin /dev/null, stdout and
 * stderr captured; VQC_DEBUG is dropped so the user's text is tested. */
static cli_out run_cli(const char *first, ...) {
  cli_out r;
  va_list ap;
  va_start(ap, first);
  int rc = vqc_spawn_vcapture(&r, VQC_CLI_PATH, "VQC_DEBUG", NULL, first, ap);
  va_end(ap);
  cr_assert_eq(rc, 0, "cannot run %s: %s", VQC_CLI_PATH, strerror(rc));
  return r;
}

/* ---- which scenarios have a device path */

Test(run_device, vq_and_fsq_have_a_device_path) {
  vqc_scenario sc;
  load("sampler_float_split", &sc); /* vq, dead codes, sampler fault */
  cr_assert_eq(vqc_run_check_device(&sc, VQC_DEVICE_CUDA, VQC_BACKEND_THREADS),
               VQC_OK, "%s", vqc_last_error());
  cr_assert_eq(vqc_run_check_device(&sc, VQC_DEVICE_CUDA, VQC_BACKEND_MPI),
               VQC_OK, "%s", vqc_last_error());
  load("discarded_out_of_place_result", &sc); /* fsq, DDP fault */
  cr_assert_eq(vqc_run_check_device(&sc, VQC_DEVICE_CUDA, VQC_BACKEND_THREADS),
               VQC_OK, "%s", vqc_last_error());
  /* The CPU runs everything but nccl. */
  load("unsynced_dropout_seed", &sc);
  cr_assert_eq(vqc_run_check_device(&sc, VQC_DEVICE_CPU, VQC_BACKEND_MPI),
               VQC_OK);
}

Test(run_device, other_models_are_refused_by_name) {
  static const char *const names[][2] = {
      {"unsynced_dropout_seed", "model rvq"},
      {"nograd_all_gather", "model clip"},
      {"skip_weight_sync", "model autoencoder"}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    vqc_scenario sc;
    load(names[i][0], &sc);
    cr_assert_eq(vqc_run_check_device(&sc, VQC_DEVICE_CUDA,
                                      VQC_BACKEND_THREADS),
                 VQC_EINVAL, "%s", names[i][0]);
    cr_assert(strstr(vqc_last_error(), names[i][1]) &&
                  strstr(vqc_last_error(), "has no --device cuda path yet"),
              "%s", vqc_last_error());
  }
}

Test(run_device, ema_faults_are_refused_on_the_device) {
  static const char *const names[] = {"lost_inplace_contiguous",
                                      "mismatched_collective"};
  for (size_t i = 0; i < 2; i++) {
    vqc_scenario sc;
    load(names[i], &sc);
    cr_assert_eq(vqc_run_check_device(&sc, VQC_DEVICE_CUDA,
                                      VQC_BACKEND_THREADS),
                 VQC_EINVAL);
    cr_assert(strstr(vqc_last_error(), names[i]) &&
                  strstr(vqc_last_error(), "vq_ema.c"),
              "%s", vqc_last_error());
    /* Their clean twins run the same model without the fault: fine. */
    char clean[128];
    snprintf(clean, sizeof clean, "%s-clean", names[i]);
    load(clean, &sc);
    cr_assert_eq(vqc_run_check_device(&sc, VQC_DEVICE_CUDA,
                                      VQC_BACKEND_THREADS),
                 VQC_OK, "%s", vqc_last_error());
  }
}

Test(run_device, nccl_needs_cuda_and_device_collectives) {
  vqc_scenario sc;
  load("lost_inplace_contiguous-clean", &sc); /* vq, EMA only */
  cr_assert_eq(vqc_run_check_device(&sc, VQC_DEVICE_CPU, VQC_BACKEND_NCCL),
               VQC_EINVAL);
  cr_assert(strstr(vqc_last_error(), "--backend nccl needs --device cuda"));
  cr_assert_eq(vqc_run_check_device(&sc, VQC_DEVICE_CUDA, VQC_BACKEND_NCCL),
               VQC_OK, "%s", vqc_last_error());
  load("sampler_float_split-clean", &sc); /* dead codes: host collectives */
  cr_assert_eq(vqc_run_check_device(&sc, VQC_DEVICE_CUDA, VQC_BACKEND_NCCL),
               VQC_EINVAL);
  cr_assert(strstr(vqc_last_error(), "dead-code expiry"));
  load("discarded_out_of_place_result-clean", &sc); /* fsq: host DDP */
  cr_assert_eq(vqc_run_check_device(&sc, VQC_DEVICE_CUDA, VQC_BACKEND_NCCL),
               VQC_EINVAL);
  cr_assert(strstr(vqc_last_error(), "model fsq"));
}

/* ---- the runner without a device */

Test(run_device, runner_refuses_before_writing) {
  require_no_device();
  vqc_scenario sc;
  load("sampler_float_split-clean", &sc);
  char out[512];
  fresh_path(out, sizeof out, "run");
  vqc_run_options o = {out, NULL};
  vqc_run_result r;
  cr_assert_eq(vqc_run_threads_device(&sc, &o, VQC_DEVICE_CUDA, &r),
               VQC_ENODEVICE);
  cr_assert(strstr(vqc_last_error(), "no usable CUDA device ("),
            "%s", vqc_last_error());
  cr_assert(strstr(vqc_last_error(), "): run with --device cpu"),
            "%s", vqc_last_error());
  cr_assert_not(exists(out), "%s was created", out);
  vqc_run_result_free(&r);
  /* A scenario without a device path is refused first, as invalid input. */
  load("nograd_all_gather", &sc);
  cr_assert_eq(vqc_run_threads_device(&sc, &o, VQC_DEVICE_CUDA, &r),
               VQC_EINVAL);
  cr_assert_not(exists(out));
  vqc_run_result_free(&r);
  remove_run(out);
}

Test(run_device, probe_names_the_reason) {
  require_no_device();
  cr_assert_eq(vqc_run_probe_device(), VQC_ENODEVICE);
  const char *e = vqc_last_error();
  const char *open = strstr(e, "no usable CUDA device (");
  cr_assert_not_null(open, "%s", e);
  /* Something between the parentheses: the runtime's reason, or that the
   * build has no kernels. */
  open += strlen("no usable CUDA device (");
  cr_assert(*open != ')' && *open != '\0', "%s", e);
  cr_assert(strstr(e, "): run with --device cpu"), "%s", e);
}

/* ---- the command line */

Test(run_device, run_cuda_without_a_device_exits_3_and_writes_nothing) {
  require_no_device();
  char scen[4096], out[512];
  scenario_path("sampler_float_split-clean", scen, sizeof scen);
  fresh_path(out, sizeof out, "run");
  cli_out r = run_cli("run", scen, "--device", "cuda", "--out", out, NULL);
  cr_assert_eq(r.code, 3, "stderr: %s", r.err);
  cr_assert(strstr(r.err, "vqcheck run: no usable CUDA device ("), "%s",
            r.err);
  cr_assert(strstr(r.err, "): run with --device cpu\n"), "%s", r.err);
  /* The library's source locations stay out of the user's text. */
  cr_assert_null(strstr(r.err, ".c:"), "%s", r.err);
  cr_assert_str_eq(r.out, "");
  cr_assert_not(exists(out), "%s was created", out);
  vqc_spawn_result_free(&r);
  remove_run(out);
}

Test(run_device, suite_cuda_without_a_device_exits_3_and_writes_nothing) {
  require_no_device();
  char dir[4096], out[512];
  snprintf(dir, sizeof dir, "%s/scenarios", vqc_test_source_dir());
  fresh_path(out, sizeof out, "suite");
  cli_out r = run_cli("suite", dir, "--device", "cuda", "--out", out, NULL);
  cr_assert_eq(r.code, 3, "stderr: %s", r.err);
  cr_assert(strstr(r.err, "vqcheck suite: no usable CUDA device ("), "%s",
            r.err);
  cr_assert(strstr(r.err, "): run with --device cpu"), "%s", r.err);
  cr_assert_not(exists(out), "%s was created", out);
  vqc_spawn_result_free(&r);
  remove_run(out);
}

Test(run_device, bad_device_is_a_usage_error) {
  char scen[4096];
  scenario_path("sampler_float_split-clean", scen, sizeof scen);
  static const char *const cmds[] = {"run", "suite"};
  for (int i = 0; i < 2; i++) {
    cli_out r = i == 0 ? run_cli("run", scen, "--device", "bogus", NULL)
                       : run_cli("suite", "--device", "bogus", NULL);
    cr_assert_eq(r.code, 2, "%s: %s", cmds[i], r.err);
    cr_assert(strstr(r.err, "bad value for --device: 'bogus' (expected cpu "
                            "or cuda)"),
              "%s", r.err);
    cr_assert(strstr(r.err, "hint: 'vqcheck "), "%s", r.err);
    vqc_spawn_result_free(&r);
  }
  cli_out r = run_cli("run", scen, "--device", NULL);
  cr_assert_eq(r.code, 2, "%s", r.err);
  cr_assert(strstr(r.err, "--device needs a value"), "%s", r.err);
  vqc_spawn_result_free(&r);
}

Test(run_device, nccl_without_cuda_is_a_usage_error) {
  char scen[4096];
  scenario_path("lost_inplace_contiguous-clean", scen, sizeof scen);
  cli_out r = run_cli("run", scen, "--backend", "nccl", NULL);
  cr_assert_eq(r.code, 2, "%s", r.err);
  cr_assert(strstr(r.err, "--backend nccl needs --device cuda"), "%s", r.err);
  vqc_spawn_result_free(&r);
  r = run_cli("run", scen, "--backend", "nccl", "--device", "cpu", NULL);
  cr_assert_eq(r.code, 2, "%s", r.err);
  vqc_spawn_result_free(&r);
  r = run_cli("suite", "--backend", "nccl", NULL);
  cr_assert_eq(r.code, 2, "%s", r.err);
  cr_assert(strstr(r.err, "--backend nccl needs --device cuda"), "%s", r.err);
  vqc_spawn_result_free(&r);
}

Test(run_device, model_without_a_device_path_exits_2_before_any_probe) {
  char scen[4096], out[512];
  scenario_path("nograd_all_gather", scen, sizeof scen);
  fresh_path(out, sizeof out, "run");
  cli_out r = run_cli("run", scen, "--device", "cuda", "--out", out, NULL);
  cr_assert_eq(r.code, 2, "%s", r.err);
  cr_assert(strstr(r.err, "model clip has no --device cuda path yet"), "%s",
            r.err);
  cr_assert(strstr(r.err, "run it with --device cpu"), "%s", r.err);
  cr_assert_not(exists(out));
  vqc_spawn_result_free(&r);
  remove_run(out);
}

Test(run_device, device_cpu_runs_and_is_recorded) {
  char scen[4096], out[512];
  scenario_path("lost_inplace_contiguous-clean", scen, sizeof scen);
  fresh_path(out, sizeof out, "run");
  cli_out r = run_cli("run", scen, "--device", "cpu", "--out", out, "--json",
                      NULL);
  cr_assert_eq(r.code, 0, "%s", r.err);
  json_error_t err;
  json_t *j = json_loads(r.out, 0, &err);
  cr_assert_not_null(j, "%s", err.text);
  json_t *env = json_object_get(j, "environment");
  cr_assert_str_eq(json_string_value(json_object_get(env, "device")), "cpu");
  cr_assert_str_eq(json_string_value(json_object_get(env, "backend")),
                   "threads");
  json_decref(j);
  vqc_spawn_result_free(&r);
  remove_run(out);
}

Test(run_device, help_mentions_device) {
  static const char *const cmds[] = {"run", "suite"};
  for (int i = 0; i < 2; i++) {
    cli_out r = run_cli(cmds[i], "--help", NULL);
    cr_assert_eq(r.code, 0);
    cr_assert(strstr(r.out, "--device cpu|cuda"), "%s", r.out);
    cr_assert(strstr(r.out, "nccl"), "%s", r.out);
    vqc_spawn_result_free(&r);
  }
}
