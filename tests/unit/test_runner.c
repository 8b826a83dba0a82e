/* test_runner.c: the scenario runner (harness/run/runner.h, run_models.h).
 *
 * End to end on the threads backend, in this process: a fault scenario
 * from the shipped scenarios/ produces its findings and exit code 1, its
 * clean twin none and exit 0; run.json reads back with the same findings
 * and the run directory is cleaned of stale dumps. Pieces: the duplicate
 * merge of findings made once per rank, and the single-process reference
 * gradient, which on a one-rank world must equal the trained gradient
 * bit for bit (same rows, same order, DDP's average over one rank is a
 * division by 1). A small sweep checks that detection does not hang on the
 * seed or the rank count (the full sweep is the `suite.sweep` ctest). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_models.h"
#include "rundir.h"
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

/* A fresh directory under /tmp (the test's own; Criterion forks per test). */
static void temp_dir(char *buf, size_t n) {
  cr_assert_not_null(
      vqc_test_temp_dir(buf, n, "/tmp/vqc-test-runner-XXXXXX"));
}

static bool has_finding(vqc_findings *f, vqc_finding_kind kind, int64_t step,
                        const char *tensor, const char *site) {
  for (int i = 0; i < f->count; i++) {
    const vqc_finding *x = &f->items[i];
    if (x->kind != kind) continue;
    if (step >= 0 && x->step != step) continue;
    if (tensor && !strstr(x->tensor, tensor)) continue;
    if (site && !strstr(x->site, site)) continue;
    return true;
  }
  return false;
}

static bool file_exists(const char *dir, const char *name) {
  char path[8192];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return access(path, F_OK) == 0;
}

Test(runner, fault_scenario_reports_its_findings) {
  vqc_scenario sc;
  load("lost_inplace_contiguous", &sc);
  char dir[256];
  temp_dir(dir, sizeof dir);
  vqc_run_options o = {dir, NULL};
  vqc_run_result r;
  cr_assert_eq(vqc_run_threads(&sc, &o, &r), VQC_OK, "%s", vqc_last_error());
  cr_assert_eq(r.training, VQC_OK, "%s", r.message);
  cr_assert_eq(r.steps_done, sc.steps);
  cr_assert(has_finding(&r.findings, VQC_FINDING_LOST_INPLACE, -1, NULL,
                        "vq_ema.c"));
  cr_assert(has_finding(&r.findings, VQC_FINDING_DIVERGENCE, 0,
                        "codebook.embed", NULL));
  /* The cluster sizes are reduced correctly (bugs.md #1): never named. */
  cr_assert_not(has_finding(&r.findings, VQC_FINDING_DIVERGENCE, -1,
                            "cluster_size", NULL));
  cr_assert_eq(vqc_run_exit_code(&r), 1);
  char why[512];
  cr_assert(vqc_scenario_expectations_met(&sc, &r.findings, why, sizeof why),
            "%s", why);

  /* run.json holds the same findings and exit code. */
  char path[512];
  snprintf(path, sizeof path, "%s/run.json", dir);
  vqc_findings back;
  vqc_findings_init(&back);
  int code = -1;
  cr_assert_eq(vqc_run_read_json(path, &back, &code), VQC_OK, "%s",
               vqc_last_error());
  cr_assert_eq(back.count, r.findings.count);
  cr_assert_eq(code, 1);
  for (int i = 0; i < back.count; i++) {
    cr_assert_eq(back.items[i].kind, r.findings.items[i].kind);
    cr_assert_eq(back.items[i].step, r.findings.items[i].step);
    cr_assert_str_eq(back.items[i].site, r.findings.items[i].site);
  }
  vqc_findings_free(&back);
  cr_assert(file_exists(dir, "rank-0.trace.jsonl"));
  cr_assert(file_exists(dir, "rank-1.trace.jsonl"));
  vqc_run_result_free(&r);
  vqc_test_remove_dir(dir);
}

Test(runner, clean_twin_is_clean_and_writes_its_steps) {
  vqc_scenario sc;
  load("skip_weight_sync-clean", &sc);
  char dir[256];
  temp_dir(dir, sizeof dir);
  /* Stale files of an earlier run (whose marker says vqcheck made the
   * directory) must not survive; others are left. */
  char stale[512], keep[512], marker[512];
  snprintf(stale, sizeof stale, "%s/rank-7.status.json", dir);
  snprintf(keep, sizeof keep, "%s/notes.txt", dir);
  snprintf(marker, sizeof marker, "%s/" VQC_RUN_DIR_MARKER, dir);
  FILE *f = fopen(marker, "w");
  fputs("vqcheck run\n", f);
  fclose(f);
  f = fopen(stale, "w");
  fputs("{}", f);
  fclose(f);
  f = fopen(keep, "w");
  fputs("mine", f);
  fclose(f);

  vqc_run_options o = {dir, NULL};
  vqc_run_result r;
  cr_assert_eq(vqc_run_threads(&sc, &o, &r), VQC_OK, "%s", vqc_last_error());
  cr_assert_eq(r.training, VQC_OK, "%s", r.message);
  cr_assert_eq(r.findings.count, 0, "first: %s",
               r.findings.count ? r.findings.items[0].message : "");
  cr_assert_eq(vqc_run_exit_code(&r), 0);
  cr_assert_eq(r.nsteps, sc.steps);
  for (int i = 0; i < r.nsteps; i++) {
    cr_assert_eq(r.steps[i].step, i);
    cr_assert(r.steps[i].loss > 0.0, "an autoencoder's loss is positive");
  }
  cr_assert_not(file_exists(dir, "rank-7.status.json"));
  cr_assert(file_exists(dir, "notes.txt"));

  /* run.json's envelope. */
  char path[512];
  snprintf(path, sizeof path, "%s/run.json", dir);
  json_error_t err;
  json_t *j = json_load_file(path, 0, &err);
  cr_assert_not_null(j, "%s", err.text);
  cr_assert_eq(json_integer_value(json_object_get(j, "schema_version")), 1);
  json_t *env = json_object_get(j, "environment");
  cr_assert_str_eq(json_string_value(json_object_get(env, "backend")),
                   "threads");
  cr_assert_eq(json_integer_value(json_object_get(env, "ranks")), sc.ranks);
  cr_assert_eq(json_array_size(json_object_get(j, "steps")), (size_t)sc.steps);
  cr_assert_str_eq(json_string_value(json_object_get(
                       json_object_get(j, "scenario"), "name")),
                   sc.name);
  json_decref(j);
  vqc_run_result_free(&r);
  vqc_test_remove_dir(dir);
}

Test(runner, deadlock_ends_within_the_timeout) {
  vqc_scenario sc;
  load("seed_sync_some_ranks", &sc);
  cr_assert_eq(vqc_scenario_override(&sc, 3, -1, -1, 1.0), VQC_OK);
  char dir[256];
  temp_dir(dir, sizeof dir);
  vqc_run_options o = {dir, NULL};
  vqc_run_result r;
  cr_assert_eq(vqc_run_threads(&sc, &o, &r), VQC_OK, "%s", vqc_last_error());
  cr_assert_neq(r.training, VQC_OK);
  cr_assert(has_finding(&r.findings, VQC_FINDING_DEADLOCK, 1, NULL, "rvq.c"));
  /* One timeout to notice, about two more at most to agree and analyse. */
  cr_assert_lt(r.seconds, 1.0 * 4 + 2.0, "took %.2f s", r.seconds);
  cr_assert_eq(vqc_run_exit_code(&r), 1);
  vqc_run_result_free(&r);
  vqc_test_remove_dir(dir);
}

/* Findings recorded once per rank (mpi) merge into one with every rank. */
Test(runner, merge_duplicates_unions_ranks) {
  vqc_findings f;
  vqc_findings_init(&f);
  vqc_finding a;
  for (int r = 0; r < 3; r++) {
    vqc_finding_init(&a, VQC_FINDING_LOST_INPLACE, 0, "rank %d saw it", r);
    snprintf(a.site, sizeof a.site, "lib/src/quant/vq_ema.c:47 reduce_sums");
    vqc_finding_add_rank(&a, r);
    cr_assert_eq(vqc_findings_add(&f, &a), VQC_OK);
  }
  vqc_finding_init(&a, VQC_FINDING_LOST_INPLACE, 1, "a later step");
  snprintf(a.site, sizeof a.site, "lib/src/quant/vq_ema.c:47 reduce_sums");
  vqc_finding_add_rank(&a, 2);
  cr_assert_eq(vqc_findings_add(&f, &a), VQC_OK);
  vqc_findings_merge_duplicates(&f);
  cr_assert_eq(f.count, 2);
  cr_assert_eq(f.items[0].nranks, 3);
  cr_assert_str_eq(f.items[0].message, "rank 0 saw it");
  cr_assert_eq(f.items[1].step, 1);
  cr_assert_eq(f.items[1].nranks, 1);
  vqc_findings_free(&f);
}

/* An MPI program's findings (no step) merge only when they tell one
 * story: the same message but for numbers. Two ranks' different mistakes
 * at one call site (a window over a returned frame on rank 0, over a NULL
 * pointer on rank 1) stay two findings; at a step, each rank's wording
 * never splits one. */
Test(runner, merge_keeps_different_stories_apart) {
  vqc_findings f;
  vqc_findings_init(&f);
  static const char *const said[] = {
      "rank 0's window world/win1 exposes memory on the stack of a.c:16",
      "rank 1's window world/win1 exposes memory on the stack of a.c:16",
      "rank 1's MPI_Win_create at a.c:16 exposes 64 bytes at NULL"};
  for (int i = 0; i < 3; i++) {
    vqc_finding a;
    vqc_finding_init(&a, VQC_FINDING_LOST_INPLACE, -1, "%s", said[i]);
    snprintf(a.site, sizeof a.site, "a.c:16 make_window");
    vqc_finding_add_rank(&a, i == 0 ? 0 : 1);
    cr_assert_eq(vqc_findings_add(&f, &a), VQC_OK);
  }
  vqc_findings_merge_duplicates(&f);
  cr_assert_eq(f.count, 2);
  cr_expect_eq(f.items[0].nranks, 2);
  cr_expect_eq(f.items[1].nranks, 1);
  cr_expect_not_null(strstr(f.items[1].message, "at NULL"));
  vqc_finding x, y;
  vqc_finding_init(&x, VQC_FINDING_NONFINITE, 3, "NaN in w");
  vqc_finding_init(&y, VQC_FINDING_NONFINITE, 3, "Inf in w");
  cr_expect(vqc_finding_same_story(&x, &y));
  json_decref(x.detail);
  json_decref(y.detail);
  vqc_findings_free(&f);
}

/* ---- the reference gradient */

typedef struct ref_case {
  const vqc_scenario *sc;
  int mismatches;   /* elements whose reference differs from the grad */
  int64_t checked;  /* elements compared */
  double worst_rel; /* max |ref - grad| / max |grad| over entries */
} ref_case;

static vqc_status ref_rank(vqc_comm *c, void *arg) {
  ref_case *rc = arg;
  vqc_run_model *m = NULL;
  VQC_TRY(vqc_run_model_create(rc->sc, c, &m));
  const vqc_param_list *st = vqc_run_model_state(m);
  vqc_param_list grads;
  vqc_param_list_init(&grads);
  float *bufs[64] = {0};
  int n = 0;
  vqc_status s = VQC_OK;
  for (int i = 0; i < st->count && s == VQC_OK; i++) {
    if (!st->items[i].grad) continue;
    bufs[n] = calloc((size_t)st->items[i].numel, sizeof(float));
    s = vqc_param_list_add(&grads, st->items[i].name, VQC_F32, bufs[n], NULL,
                           st->items[i].ndim, st->items[i].shape);
    n++;
  }
  for (int64_t step = 0; step < 2 && s == VQC_OK; step++) {
    s = vqc_run_model_step(m, step, NULL);
    if (s == VQC_OK) s = vqc_run_model_reference_grads(m, step, &grads);
    for (int g = 0; g < grads.count && s == VQC_OK; g++) {
      const vqc_param *p = vqc_param_list_find(st, grads.items[g].name);
      const float *ref = grads.items[g].data;
      double scale = 0, worst = 0;
      for (int64_t k = 0; k < p->numel; k++) {
        rc->checked++;
        if (memcmp(&ref[k], &p->grad[k], sizeof(float)) != 0) rc->mismatches++;
        double d = (double)ref[k] - (double)p->grad[k];
        if (d < 0) d = -d;
        if (d > worst) worst = d;
        double a = p->grad[k] < 0 ? -(double)p->grad[k] : (double)p->grad[k];
        if (a > scale) scale = a;
      }
      if (scale > 0 && worst / scale > rc->worst_rel) rc->worst_rel = worst / scale;
    }
  }
  /* Asking for a step other than the last one trained is refused. */
  if (s == VQC_OK && vqc_run_model_reference_grads(m, 0, &grads) != VQC_EINVAL)
    s = vqc_error(VQC_EINTERNAL, "a stale reference step was accepted");
  for (int i = 0; i < n; i++) free(bufs[i]);
  vqc_param_list_free(&grads);
  vqc_run_model_destroy(m);
  return s;
}

/* One rank: the distributed step and the single-process twin see the same
 * rows in the same order, so their gradients are the same bits. */
Test(runner, reference_equals_one_rank_training_bitwise) {
  const char *names[] = {"skip_weight_sync-clean",
                         "discarded_out_of_place_result-clean"};
  for (int i = 0; i < 2; i++) {
    vqc_scenario sc;
    load(names[i], &sc);
    cr_assert_eq(vqc_scenario_override(&sc, 1, -1, -1, -1), VQC_OK, "%s",
                 vqc_last_error());
    ref_case rc = {.sc = &sc};
    cr_assert_eq(vqc_threads_run(1, 10.0, ref_rank, &rc, NULL), VQC_OK, "%s",
                 vqc_last_error());
    cr_assert_gt(rc.checked, 1000);
    cr_assert_eq(rc.mismatches, 0, "%s: %d of %lld elements differ", names[i],
                 rc.mismatches, (long long)rc.checked);
  }
}

/* Several ranks, uneven sizes allowed: the averaged gradient equals the
 * reference up to float32 summation order. The budget is the equivalence
 * checker's default tolerance (1e-4, see equivalence.c), measured here far
 * below it. */
Test(runner, reference_matches_averaged_gradient_on_three_ranks) {
  const char *names[] = {"skip_weight_sync-clean", "nograd_all_gather-clean"};
  for (int i = 0; i < 2; i++) {
    vqc_scenario sc;
    load(names[i], &sc);
    cr_assert_eq(vqc_scenario_override(&sc, 3, -1, -1, -1), VQC_OK);
    ref_case rc = {.sc = &sc};
    cr_assert_eq(vqc_threads_run(3, 10.0, ref_rank, &rc, NULL), VQC_OK, "%s",
                 vqc_last_error());
    cr_assert_lt(rc.worst_rel, 1e-5, "%s: relative error %g", names[i],
                 rc.worst_rel);
  }
}

/* The model refuses what it cannot train: an empty shard for the
 * autoencoder, whose bottleneck (and its collectives) is skipped on a rank
 * without rows. */
Test(runner, empty_shard_is_refused_for_the_autoencoder) {
  vqc_scenario sc;
  load("skip_weight_sync-clean", &sc);
  sc.nbatch = 2;
  sc.batch[0] = 4;
  sc.batch[1] = 0;
  char dir[256];
  temp_dir(dir, sizeof dir);
  vqc_run_options o = {dir, NULL};
  vqc_run_result r;
  cr_assert_eq(vqc_run_threads(&sc, &o, &r), VQC_OK);
  cr_assert_eq(r.training, VQC_EINVAL);
  cr_assert_eq(r.steps_done, 0);
  cr_assert(strstr(r.message, "at least one row") != NULL, "%s", r.message);
  cr_assert_eq(vqc_run_exit_code(&r), 3);
  vqc_run_result_free(&r);
  vqc_test_remove_dir(dir);
}

/* A VQ codebook trains on uneven shards, an empty one included: its
 * collectives run whatever the row count, and dead codes are sampled from
 * the ranks that have rows. */
Test(runner, uneven_shards_with_an_empty_rank_stay_clean) {
  vqc_scenario sc;
  load("sampler_float_split-clean", &sc);
  sc.ranks = 3;
  sc.nbatch = 3;
  sc.batch[0] = 9;
  sc.batch[1] = 0;
  sc.batch[2] = 23;
  char dir[256];
  temp_dir(dir, sizeof dir);
  vqc_run_options o = {dir, NULL};
  vqc_run_result r;
  cr_assert_eq(vqc_run_threads(&sc, &o, &r), VQC_OK, "%s", vqc_last_error());
  cr_assert_eq(r.training, VQC_OK, "%s", r.message);
  cr_assert_eq(r.findings.count, 0, "first: %s",
               r.findings.count ? r.findings.items[0].message : "");
  vqc_run_result_free(&r);
  vqc_test_remove_dir(dir);
}

/* A fault the model has no code path for is refused before anything runs. */
Test(runner, fault_without_a_code_path_is_refused) {
  vqc_scenario sc;
  load("nograd_all_gather", &sc);
  sc.model = VQC_MODEL_FSQ; /* the gather lives in the CLIP loss only */
  vqc_run_options o = {"/tmp/vqc-test-runner-never-created", NULL};
  vqc_run_result r;
  cr_assert_eq(vqc_run_threads(&sc, &o, &r), VQC_EINVAL);
  cr_assert(strstr(vqc_last_error(), "no code path") != NULL, "%s",
            vqc_last_error());
  cr_assert_neq(access(o.out_dir, F_OK), 0, "nothing was written");
  vqc_run_result_free(&r);
  load("sampler_float_split", &sc);
  sc.threshold_dead_code = 0.0; /* nothing expires: no rows are sampled */
  cr_assert_eq(vqc_run_check_fault(&sc), VQC_EINVAL);
  load("unsynced_dropout_seed", &sc);
  cr_assert_eq(vqc_run_check_fault(&sc), VQC_OK);
}

/* A small seeds x ranks sweep of the faults whose detection involves
 * randomness or the rank count (the deadlock is covered above). */
Test(runner, detection_holds_across_seeds_and_ranks, .timeout = 240) {
  const char *names[] = {"sampler_float_split", "unsynced_dropout_seed",
                         "lost_inplace_contiguous", "skip_weight_sync",
                         "nograd_all_gather", "mismatched_collective",
                         "discarded_out_of_place_result"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    for (int ranks = 2; ranks <= 5; ranks++) {
      for (int64_t seed = 11; seed <= 13; seed++) {
        vqc_scenario sc;
        load(names[i], &sc);
        cr_assert_eq(vqc_scenario_override(&sc, ranks, -1, seed, -1), VQC_OK);
        char dir[256];
        temp_dir(dir, sizeof dir);
        vqc_run_options o = {dir, NULL};
        vqc_run_result r;
        cr_assert_eq(vqc_run_threads(&sc, &o, &r), VQC_OK, "%s",
                     vqc_last_error());
        char why[512];
        cr_assert(vqc_scenario_expectations_met(&sc, &r.findings, why,
                                                sizeof why),
                  "%s, %d ranks, seed %lld: %s", names[i], ranks,
                  (long long)seed, why);
        vqc_run_result_free(&r);
        vqc_test_remove_dir(dir);
      }
    }
  }
}
