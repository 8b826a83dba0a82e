/* test_gpu_runner.c: scenarios with --device cuda (harness/models/run_models.h
 * "Device"), label gpu; skips without a device.
 *
 * Equal to the CPU run. On a threads world every rank builds the model
 * twice, on the CPU and on the device, and steps both on the same comm (the
 * same collectives in the same order on every rank, so they pair up); after
 * every step the two must agree:
 *   vq   indices exactly, and every state entry (embed, cluster_size,
 *        embed_avg) bit for bit. Tolerance zero, because each kernel the
 *        device path uses is bit-identical to its CPU twin (vqc/gpu.h:
 *        nearest code with the CPU's fma chains and lowest-index ties,
 *        statistics in the CPU's chunked order (vqc_vq_batch_stats),
 *        lerp and renormalize as the CPU rounds them), the host staging
 *        of the all_reduces reduces the same floats in the same rank
 *        order, and k-means init and dead-code expiry are the CPU
 *        functions themselves. Also: the
 *        digest of each device tensor (vqc_digest_tensor on the device)
 *        equals the digest of the host copy the checkers read.
 *   fsq  the loss and every weight, gradient and Adam moment bit for bit.
 *        FSQ's device tanh may differ from glibc's by an ulp where glibc is
 *        not correctly rounded (vqc/gpu.h "FSQ and tanh"), which can move a
 *        code only when the bounded value is within a few ulp of a rounding
 *        boundary: on these few hundred latent elements that is far rarer
 *        than one in a thousand runs, so the test asks for exact equality;
 *        a failure names the entry and element to check against that
 *        explanation.
 * Scenarios: the shipped vq scenarios with plain EMA and with dead-code
 * expiry, the latter also with k-means init switched on, and the shipped
 * fsq scenario.
 *
 * Faults are still caught on the device: full runs (vqc_run_threads_device, every
 * checker) of sampler_float_split (the sampler runs on the host inside the
 * device path's dead-code expiry) and discarded_out_of_place_result (DDP,
 * host) meet their expectations with exit code 1, and the clean twins have
 * no finding. run.json says device "cuda". */
#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_test_util.h"
#include "run_models.h"
#include "runner.h"
#include "scenario.h"
#include "test_paths.h"
#include "vqc/vqc.h"

static void load(const char *name, vqc_scenario *sc) {
  char path[4096];
  snprintf(path, sizeof path, "%s/scenarios/%s.yaml", vqc_test_source_dir(),
           name);
  cr_assert_eq(vqc_scenario_load(path, sc), VQC_OK, "%s", vqc_last_error());
}

/* ---- CPU and device models side by side */

typedef struct twin_case {
  const vqc_scenario *sc;
  int64_t compared; /* elements compared, all ranks (under lock) */
  pthread_mutex_t lock;
} twin_case;

/* VQC_OK when entry `name` holds the same bits in a and b; else an error
 * naming the first differing element. */
static vqc_status same_entry(const vqc_param *a, const vqc_param *b,
                             bool grads, int rank, int64_t step) {
  const void *x = grads ? (const void *)a->grad : a->data;
  const void *y = grads ? (const void *)b->grad : b->data;
  if (!x || !y) return VQC_OK;
  const size_t es = vqc_dtype_size(a->dtype);
  for (int64_t k = 0; k < a->numel; k++) {
    const char *p = (const char *)x + (size_t)k * es;
    const char *q = (const char *)y + (size_t)k * es;
    if (memcmp(p, q, es) == 0) continue;
    if (a->dtype == VQC_F32)
      return vqc_error(VQC_EINTERNAL, "rank %d step %lld: %s%s[%lld]: cpu "
                       "%.9g, cuda %.9g", rank, (long long)step, a->name,
                       grads ? ".grad" : "", (long long)k,
                       (double)*(const float *)p, (double)*(const float *)q);
    return vqc_error(VQC_EINTERNAL, "rank %d step %lld: %s[%lld] differs",
                     rank, (long long)step, a->name, (long long)k);
  }
  return VQC_OK;
}

static vqc_status twin_rank(vqc_comm *c, void *arg) {
  twin_case *tc = arg;
  const int rank = vqc_comm_rank(c);
  vqc_run_model *cpu = NULL, *gpu = NULL;
  vqc_status s = vqc_run_model_create_device(tc->sc, c, VQC_DEVICE_CPU, &cpu);
  if (s == VQC_OK)
    s = vqc_run_model_create_device(tc->sc, c, VQC_DEVICE_CUDA, &gpu);
  int64_t compared = 0;
  for (int64_t step = 0; s == VQC_OK && step < tc->sc->steps; step++) {
    double lc = 0, lg = 0;
    if ((s = vqc_run_model_step(cpu, step, &lc)) ||
        (s = vqc_run_model_step(gpu, step, &lg)))
      break;
    if (memcmp(&lc, &lg, sizeof lc) != 0) {
      s = vqc_error(VQC_EINTERNAL, "rank %d step %lld: loss cpu %.17g, cuda "
                    "%.17g", rank, (long long)step, lc, lg);
      break;
    }
    int64_t rc = 0, rg = 0;
    const int64_t *ic = vqc_run_model_indices(cpu, &rc);
    const int64_t *ig = vqc_run_model_indices(gpu, &rg);
    if ((ic == NULL) != (ig == NULL) || rc != rg) {
      s = vqc_error(VQC_EINTERNAL, "rank %d: the models' indices differ in "
                    "presence or rows", rank);
      break;
    }
    for (int64_t i = 0; ic && i < rc; i++, compared++)
      if (ic[i] != ig[i]) {
        s = vqc_error(VQC_EINTERNAL, "rank %d step %lld: row %lld: cpu code "
                      "%lld, cuda code %lld", rank, (long long)step,
                      (long long)i, (long long)ic[i], (long long)ig[i]);
        break;
      }
    const vqc_param_list *a = vqc_run_model_state(cpu);
    const vqc_param_list *b = vqc_run_model_state(gpu);
    if (s == VQC_OK && a->count != b->count)
      s = vqc_error(VQC_EINTERNAL, "state of %d vs %d entries", a->count,
                    b->count);
    for (int i = 0; s == VQC_OK && i < a->count; i++) {
      const vqc_param *p = &a->items[i], *q = &b->items[i];
      if (strcmp(p->name, q->name) != 0 || p->numel != q->numel ||
          p->dtype != q->dtype) {
        s = vqc_error(VQC_EINTERNAL, "entry %d: %s vs %s", i, p->name,
                      q->name);
        break;
      }
      if ((s = same_entry(p, q, false, rank, step)) ||
          (s = same_entry(p, q, true, rank, step)))
        break;
      compared += p->numel;
      /* The staged host copy is the device state: same digest. */
      uint64_t staged = 0, source = 0;
      if ((s = vqc_param_digest(q, &staged)) ||
          (s = vqc_run_model_source_digest(gpu, q->name, &source)))
        break;
      if (staged != source)
        s = vqc_error(VQC_EINTERNAL, "rank %d step %lld: %s: the host copy's "
                      "digest %016llx is not the device tensor's %016llx",
                      rank, (long long)step, q->name,
                      (unsigned long long)staged, (unsigned long long)source);
    }
  }
  vqc_run_model_destroy(cpu);
  vqc_run_model_destroy(gpu);
  pthread_mutex_lock(&tc->lock);
  tc->compared += compared;
  pthread_mutex_unlock(&tc->lock);
  return s;
}

/* Steps sc on the CPU and on the device side by side; returns how many
 * elements were compared (all equal, or the test fails). */
static int64_t run_twins(const vqc_scenario *sc) {
  twin_case tc = {sc, 0, PTHREAD_MUTEX_INITIALIZER};
  vqc_status s = vqc_threads_run(sc->ranks, sc->timeout_s, twin_rank, &tc,
                                 NULL);
  cr_assert_eq(s, VQC_OK, "%s: %s", sc->name, vqc_last_error());
  return tc.compared;
}

Test(gpu_runner, vq_plain_ema_equals_cpu) {
  gpu_require();
  vqc_scenario sc;
  load("lost_inplace_contiguous-clean", &sc); /* vq, no dead codes */
  cr_assert_eq(sc.model, VQC_MODEL_VQ);
  cr_assert_gt(run_twins(&sc), 0);
}

Test(gpu_runner, vq_dead_code_expiry_equals_cpu) {
  gpu_require();
  vqc_scenario sc;
  load("sampler_float_split-clean", &sc);
  cr_assert_gt(sc.threshold_dead_code, 0.0, "the scenario must expire codes");
  cr_assert_gt(run_twins(&sc), 0);
}

Test(gpu_runner, vq_kmeans_init_equals_cpu) {
  gpu_require();
  vqc_scenario sc;
  load("sampler_float_split-clean", &sc);
  sc.kmeans_init = true; /* host k-means, then the upload, then kernels */
  cr_assert_gt(run_twins(&sc), 0);
}

Test(gpu_runner, fsq_equals_cpu) {
  gpu_require();
  vqc_scenario sc;
  load("discarded_out_of_place_result-clean", &sc);
  cr_assert_eq(sc.model, VQC_MODEL_FSQ);
  cr_assert_gt(run_twins(&sc), 0);
}

/* ---- full runs: faults still caught */

static void temp_dir(char *buf, size_t n) {
  cr_assert_not_null(
      vqc_test_temp_dir(buf, n, "/tmp/vqc-test-gpu-runner-XXXXXX"));
}

/* Runs scenario `name` on the device with every checker; checks its
 * expectation, the exit code and run.json's device. */
static void full_run(const char *name, int want_code) {
  vqc_scenario sc;
  load(name, &sc);
  char dir[256];
  temp_dir(dir, sizeof dir);
  vqc_run_options o = {dir, NULL};
  vqc_run_result r;
  cr_assert_eq(vqc_run_threads_device(&sc, &o, VQC_DEVICE_CUDA, &r), VQC_OK, "%s: %s", name,
               vqc_last_error());
  /* A clean run trains to the end; a fault may stop training (the sampler
   * fault does, at its shape check), and then a finding must explain it. */
  if (want_code == 0)
    cr_assert_eq(r.training, VQC_OK, "%s: %s", name, r.message);
  cr_assert_eq(r.device, VQC_DEVICE_CUDA);
  char why[512];
  cr_assert(vqc_scenario_expectations_met(&sc, &r.findings, why, sizeof why),
            "%s: %s", name, why);
  cr_assert_eq(vqc_run_exit_code(&r), want_code, "%s", name);

  char path[512];
  snprintf(path, sizeof path, "%s/run.json", dir);
  json_error_t err;
  json_t *j = json_load_file(path, 0, &err);
  cr_assert_not_null(j, "%s", err.text);
  const char *dev = json_string_value(
      json_object_get(json_object_get(j, "environment"), "device"));
  cr_assert(dev && strcmp(dev, "cuda") == 0);
  json_decref(j);
  vqc_run_result_free(&r);
  vqc_test_remove_dir(dir);
}

Test(gpu_runner, vq_sampler_fault_caught_on_device) {
  gpu_require();
  full_run("sampler_float_split", 1);
  full_run("sampler_float_split-clean", 0);
}

Test(gpu_runner, fsq_ddp_fault_caught_on_device) {
  gpu_require();
  full_run("discarded_out_of_place_result", 1);
  full_run("discarded_out_of_place_result-clean", 0);
}
