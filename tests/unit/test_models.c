/* test_models.c: the models' ops tables (harness/models/model.h) and what
 * the harness derives from them: every row of VQC_MODEL_LIST has a
 * complete table, the --device cuda refusal names the models that have a
 * path, and a model's memory estimate is its table's bytes plus the
 * per-rank base (run_memory.c). */
#include <criterion/criterion.h>
#include <string.h>

#include "model.h"
#include "run_memory.h"
#include "run_models.h"
#include "scenario.h"

Test(models, every_row_has_a_complete_table) {
  for (int k = 0; k < VQC_MODEL_COUNT; k++) {
    const vqc_model_ops *ops = vqc_model_ops_of((vqc_model_kind)k);
    cr_assert_not_null(ops, "model %d has no ops table", k);
    cr_expect_not_null(ops->has_fault, "%s", vqc_model_name(k));
    cr_expect_not_null(ops->rank_bytes, "%s", vqc_model_name(k));
    cr_expect_not_null(ops->create, "%s", vqc_model_name(k));
    cr_expect_not_null(ops->step, "%s", vqc_model_name(k));
    cr_expect_not_null(ops->destroy, "%s", vqc_model_name(k));
    cr_expect_str_neq(vqc_model_name(k), "?");
  }
  cr_expect_null(vqc_model_ops_of(VQC_MODEL_COUNT));
  cr_expect_str_eq(vqc_model_name(VQC_MODEL_COUNT), "?");
}

Test(models, cuda_refusal_names_the_models_with_a_device_path) {
  vqc_scenario sc;
  memset(&sc, 0, sizeof sc);
  snprintf(sc.path, sizeof sc.path, "x.yaml");
  sc.model = VQC_MODEL_CLIP;
  cr_assert_eq(vqc_run_check_device(&sc, VQC_DEVICE_CUDA, VQC_BACKEND_MPI),
               VQC_EINVAL);
  cr_expect(strstr(vqc_last_error(), "model clip has no --device cuda path "
                   "yet (vq and fsq have one)") != NULL, "%s",
            vqc_last_error());
  sc.model = VQC_MODEL_FSQ;
  cr_expect_eq(vqc_run_check_device(&sc, VQC_DEVICE_CUDA, VQC_BACKEND_MPI),
               VQC_OK);
  cr_expect_eq(vqc_run_check_device(&sc, VQC_DEVICE_CUDA, VQC_BACKEND_NCCL),
               VQC_EINVAL);
}

/* vq, D 16, C 32, 8 rows a rank, 2 ranks: B (8D + 8) + 24 C D + 4 C =
 * 1088 + 12288 + 128 = 13504 bytes of model, + 1 MiB + 64 x 2 ranks. */
Test(models, estimate_is_the_tables_bytes_plus_the_rank_base) {
  vqc_scenario sc;
  memset(&sc, 0, sizeof sc);
  sc.model = VQC_MODEL_VQ;
  sc.dim = 16;
  sc.codebook_size = 32;
  sc.ranks = 2;
  sc.steps = 1;
  sc.nbatch = 1;
  sc.batch[0] = 8;
  cr_assert_eq(vqc_model_vq.rank_bytes(&sc, 8, 16), 13504u);
  vqc_run_memory est;
  vqc_run_memory_estimate(&sc, 2, &est);
  cr_expect_eq(est.per_rank, 13504u + (1u << 20) + 64u * 2);
}

/* Which model carries which fault is its table's answer. */
Test(models, faults_follow_the_tables) {
  vqc_scenario sc;
  memset(&sc, 0, sizeof sc);
  sc.model = VQC_MODEL_RVQ;
  sc.num_quantizers = 1;
  sc.fault = VQC_FAULT_UNSYNCED_DROPOUT_SEED;
  cr_expect_eq(vqc_run_check_fault(&sc), VQC_EINVAL); /* needs Q >= 2 */
  sc.num_quantizers = 2;
  cr_expect_eq(vqc_run_check_fault(&sc), VQC_OK);
  sc.model = VQC_MODEL_CLIP;
  sc.fault = VQC_FAULT_NOGRAD_ALL_GATHER;
  cr_expect_eq(vqc_run_check_fault(&sc), VQC_OK);
  sc.model = VQC_MODEL_FSQ;
  cr_expect_eq(vqc_run_check_fault(&sc), VQC_EINVAL);
  sc.fault = VQC_FAULT_SKIP_WEIGHT_SYNC;
  cr_expect_eq(vqc_run_check_fault(&sc), VQC_OK);
}
