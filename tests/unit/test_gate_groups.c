/* test_gate_groups.c: replica groups in traces (trace.h "group", "shard";
 * DESIGN.md "Replica groups"): `vqcheck compare` compares a tensor only
 * among the ranks that must hold equal bits of it. Runs the built vqcheck
 * (vqc_test_cli()) on traces written here as a tensor-parallel job writes
 * them: a mesh of dp x tp ranks, rank = dp_index * tp + tp_index, each
 * rank holding shard tp_index of a sharded weight (replicated across dp)
 * and a whole copy of a LayerNorm weight (replicated everywhere).
 *
 *   tp_shards_are_not_a_divergence   the shards differ across tp by design:
 *                      the old compare called that a divergence (exit 1);
 *   drift_inside_a_group_is_found    a shard drifts on one dp replica: the
 *                      finding names that rank, within its group, and
 *                      not the ranks holding the other shard;
 *   replicated_norm_drift_is_found   a TP copy of a norm weight drifts
 *                      (reported against Megatron-LM, which hashes only
 *                      dp replicas): found across the whole mesh;
 *   no_replica_is_not_comparable     a fully sharded tensor (a group of
 *                      one rank) is never a divergence, and a job with
 *                      nothing but such tensors compared nothing (exit 2);
 *   ranks_disagreeing_on_a_group     not compared, and a warning says so;
 *   bad_groups_are_refused           a group without the line's rank, a
 *                      repeated rank: exit 2 naming file:line;
 *   values_are_told    a line's optional "values" (a hyper-parameter's
 *                      elements) are told in the divergence's message and
 *                      detail, never compared; malformed ones are exit 2.
 *
 * $VQC_TEST_CLI names another vqcheck to test: a build from before groups
 * fails every case. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "spawn_capture.h"
#include "test_paths.h"

static char tmpdir[256];

static void make_tmpdir(void) {
  cr_assert(vqc_test_temp_dir(tmpdir, sizeof tmpdir,
                              "/tmp/vqc-test-gate-groups-XXXXXX") != NULL,
            "mkdtemp: %s", strerror(errno));
}

static void remove_tmpdir(void) { vqc_test_remove_dir(tmpdir); }

TestSuite(gate_groups, .init = make_tmpdir, .fini = remove_tmpdir,
          .timeout = 60);

static vqc_spawn_result run_cli(const char *first, ...) {
  vqc_spawn_result r;
  va_list ap;
  va_start(ap, first);
  int rc = vqc_spawn_vcapture(&r, vqc_test_cli(), "VQC_DEBUG", NULL, first, ap);
  va_end(ap);
  cr_assert_eq(rc, 0, "cannot run %s: %s", vqc_test_cli(), strerror(rc));
  return r;
}

/* Appends one trace line for rank r to DIR/rank-<r>.trace.jsonl. group:
 * a JSON array text or NULL (no group); shard: NULL for none. */
static void line(const char *dir, int r, int step, const char *tensor,
                 unsigned long long digest, const char *group,
                 const char *shard) {
  char path[512];
  snprintf(path, sizeof path, "%s/rank-%d.trace.jsonl", dir, r);
  FILE *f = fopen(path, "a");
  cr_assert_not_null(f, "%s: %s", path, strerror(errno));
  fprintf(f, "{\"schema\":\"vqcheck-trace/1\",\"rank\":%d,\"step\":%d,"
          "\"tensor\":\"%s\",\"dtype\":\"float32\",\"shape\":[4],"
          "\"digest_algo\":\"vqc-xxh3-tree-1\",\"digest\":\"%016llx\"",
          r, step, tensor, digest);
  if (group) fprintf(f, ",\"group\":%s", group);
  if (shard) fprintf(f, ",\"shard\":\"%s\"", shard);
  fputs("}\n", f);
  cr_assert_eq(fclose(f), 0);
}

/* The traces of a dp x tp mesh over `steps` steps: "mlp.weight" sharded on
 * tp (shard t has digest 0xa0 + t on its dp replicas), "ln.weight"
 * replicated on every rank (digest 0xc0). drift_rank >= 0 gets digest + 1
 * of `drift_tensor` from step drift_step on. */
static void mesh(const char *dir, int dp, int tp, int steps, int drift_rank,
                 const char *drift_tensor, int drift_step) {
  cr_assert_eq(mkdir(dir, 0777), 0);
  for (int step = 0; step < steps; step++)
    for (int d = 0; d < dp; d++)
      for (int t = 0; t < tp; t++) {
        const int r = d * tp + t;
        char group[256], shard[64];
        size_t k = (size_t)snprintf(group, sizeof group, "[");
        for (int q = 0; q < dp; q++) /* the dp replicas of shard t */
          k += (size_t)snprintf(group + k, sizeof group - k, "%s%d",
                                q ? "," : "", q * tp + t);
        snprintf(group + k, sizeof group - k, "]");
        snprintf(shard, sizeof shard, "Shard(0)@tp=%d", t);
        const bool drift = r == drift_rank && step >= drift_step;
        line(dir, r, step, "mlp.weight",
             0xa0 + (unsigned)t +
                 (drift && strcmp(drift_tensor, "mlp.weight") == 0),
             group, shard);
        line(dir, r, step, "ln.weight",
             0xc0 + (drift && strcmp(drift_tensor, "ln.weight") == 0), NULL,
             NULL);
      }
}

static json_t *compare(const char *traces, const char *out, int want_code) {
  vqc_spawn_result r = run_cli("compare", traces, "--out", out, "--quiet",
                               NULL);
  cr_expect_eq(r.code, want_code, "compare exit %d (wanted %d); stderr: %s",
               r.code, want_code, r.err);
  vqc_spawn_result_free(&r);
  char path[600];
  snprintf(path, sizeof path, "%s/run.json", out);
  json_error_t err;
  json_t *j = json_load_file(path, 0, &err);
  cr_assert_not_null(j, "%s: %s", path, err.text);
  return j;
}

static char *dir_in(char *buf, size_t n, const char *name) {
  snprintf(buf, n, "%s/%s", tmpdir, name);
  return buf;
}

Test(gate_groups, tp_shards_are_not_a_divergence) {
  char traces[512], out[512];
  mesh(dir_in(traces, sizeof traces, "t"), 2, 2, 3, -1, "", 0);
  json_t *j = compare(traces, dir_in(out, sizeof out, "out"), 0);
  cr_expect_eq(json_array_size(json_object_get(j, "findings")), 0);
  const json_t *c = json_object_get(j, "compare");
  /* Per step: mlp.weight in 2 groups + ln.weight once. */
  cr_expect_eq(json_integer_value(json_object_get(c, "digests_compared")), 9);
  cr_expect_eq(json_integer_value(json_object_get(c, "lines_not_compared")),
               0);
  json_decref(j);
}

Test(gate_groups, drift_inside_a_group_is_found) {
  char traces[512], out[512];
  /* dp 3 x tp 2: shard 1 lives on ranks 1, 3, 5; rank 5 drifts at step 2. */
  mesh(dir_in(traces, sizeof traces, "t"), 3, 2, 4, 5, "mlp.weight", 2);
  json_t *j = compare(traces, dir_in(out, sizeof out, "out"), 1);
  const json_t *fs = json_object_get(j, "findings");
  cr_assert_eq(json_array_size(fs), 1, "%zu findings", json_array_size(fs));
  const json_t *f = json_array_get(fs, 0);
  cr_expect_str_eq(json_string_value(json_object_get(f, "kind")),
                   "divergence");
  cr_expect_eq(json_integer_value(json_object_get(f, "step")), 2);
  const json_t *ranks = json_object_get(f, "ranks");
  cr_assert_eq(json_array_size(ranks), 1);
  cr_expect_eq(json_integer_value(json_array_get(ranks, 0)), 5);
  const json_t *det = json_object_get(f, "detail");
  const json_t *group = json_object_get(det, "group");
  cr_assert_eq(json_array_size(group), 3);
  cr_expect_eq(json_integer_value(json_array_get(group, 0)), 1);
  cr_expect_eq(json_integer_value(json_array_get(group, 2)), 5);
  cr_expect_str_eq(json_string_value(json_object_get(det, "shard")),
                   "Shard(0)@tp=1");
  const char *msg = json_string_value(json_object_get(f, "message"));
  cr_expect(msg && strstr(msg, "replica group {1, 3, 5}"), "message: %s",
            msg);
  json_decref(j);
  /* The report's digest table draws each rank against its own group:
   * the ranks holding shard 0 agree, and only rank 5 differs at step 2. */
  char path[600];
  snprintf(path, sizeof path, "%s/report.md", out);
  char *md = vqc_read_file(path);
  cr_assert_not_null(md);
  cr_expect_not_null(strstr(md, "| 1 | = | = | = | = | = | = |"),
                     "step 1 not all agreeing: %s", md);
  cr_expect_not_null(strstr(md, "| 2 | = | = | = | = | = | **1 differ** |"),
                     "step 2: %s", md);
  free(md);
}

Test(gate_groups, replicated_norm_drift_is_found) {
  char traces[512], out[512];
  mesh(dir_in(traces, sizeof traces, "t"), 2, 2, 3, 1, "ln.weight", 1);
  json_t *j = compare(traces, dir_in(out, sizeof out, "out"), 1);
  const json_t *fs = json_object_get(j, "findings");
  cr_assert_eq(json_array_size(fs), 1);
  const json_t *f = json_array_get(fs, 0);
  cr_expect_str_eq(json_string_value(json_object_get(f, "tensor")),
                   "ln.weight");
  cr_expect_eq(json_integer_value(json_object_get(f, "step")), 1);
  const json_t *ranks = json_object_get(f, "ranks");
  cr_assert_eq(json_array_size(ranks), 1);
  cr_expect_eq(json_integer_value(json_array_get(ranks, 0)), 1);
  json_decref(j);
}

Test(gate_groups, no_replica_is_not_comparable) {
  char traces[512], out[512], traces2[512];
  dir_in(traces, sizeof traces, "t");
  dir_in(traces2, sizeof traces2, "t2");
  cr_assert_eq(mkdir(traces, 0777), 0);
  cr_assert_eq(mkdir(traces2, 0777), 0);
  /* FULL_SHARD over 2 ranks: each holds its own flat shard, no replica;
   * t2 also has a step count every rank shares. */
  for (int step = 0; step < 2; step++)
    for (int r = 0; r < 2; r++) {
      char group[16], shard[32];
      snprintf(group, sizeof group, "[%d]", r);
      snprintf(shard, sizeof shard, "flat:%d/2", r);
      line(traces, r, step, "_flat_param", 0x10 + (unsigned)r, group, shard);
      line(traces2, r, step, "_flat_param", 0x10 + (unsigned)r, group,
           shard);
      line(traces2, r, step, "step_count", 7, NULL, NULL);
    }
  vqc_spawn_result res = run_cli("compare", traces, "--out",
                                 dir_in(out, sizeof out, "out"), NULL);
  cr_expect_eq(res.code, 2, "exit %d; stderr: %s", res.code, res.err);
  cr_expect_not_null(strstr(res.err, "replica group"), "stderr: %s",
                     res.err);
  vqc_spawn_result_free(&res);
  /* With the replicated tensor beside it: clean, the shards counted apart. */
  char out2[512];
  json_t *j = compare(traces2, dir_in(out2, sizeof out2, "out2"), 0);
  const json_t *c = json_object_get(j, "compare");
  cr_expect_eq(json_integer_value(json_object_get(c, "no_replica")), 4);
  cr_expect_eq(json_integer_value(json_object_get(c, "digests_compared")), 2);
  cr_expect_eq(json_array_size(json_object_get(j, "findings")), 0);
  json_decref(j);
}

Test(gate_groups, ranks_disagreeing_on_a_group) {
  char traces[512], out[512];
  dir_in(traces, sizeof traces, "t");
  cr_assert_eq(mkdir(traces, 0777), 0);
  for (int r = 0; r < 3; r++) {
    line(traces, r, 0, "w", 0x1, r == 0 ? "[0,2]" : "[0,1,2]", NULL);
    line(traces, r, 0, "b", 0x2, NULL, NULL);
  }
  json_t *j = compare(traces, dir_in(out, sizeof out, "out"), 0);
  const json_t *c = json_object_get(j, "compare");
  cr_expect_eq(json_integer_value(json_object_get(c, "digests_compared")), 1);
  cr_expect_gt(json_integer_value(json_object_get(c, "lines_not_compared")),
               0);
  const char *w0 = json_string_value(
      json_array_get(json_object_get(c, "warnings"), 0));
  cr_expect(w0 && strstr(w0, "must write the same group"), "warning: %s", w0);
  json_decref(j);
}

Test(gate_groups, bad_groups_are_refused) {
  static const char *const bad[] = {"[1]", "[0,0]", "[]", "[-1,0]",
                                    "\"0,1\""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char traces[512], out[512], name[32];
    snprintf(name, sizeof name, "t%zu", i);
    dir_in(traces, sizeof traces, name);
    cr_assert_eq(mkdir(traces, 0777), 0);
    line(traces, 0, 0, "w", 0x1, bad[i], NULL);
    line(traces, 1, 0, "w", 0x1, NULL, NULL);
    snprintf(name, sizeof name, "o%zu", i);
    vqc_spawn_result r = run_cli("compare", traces, "--out",
                                 dir_in(out, sizeof out, name), NULL);
    cr_expect_eq(r.code, 2, "group %s: exit %d; stderr: %s", bad[i], r.code,
                 r.err);
    cr_expect_not_null(strstr(r.err, "rank-0.trace.jsonl:1: field 'group'"),
                       "group %s: stderr: %s", bad[i], r.err);
    vqc_spawn_result_free(&r);
  }
}

/* One line of tensor "optimizer.lr" (float64 [1]) with its "values" text
 * (a JSON value, or NULL for none). */
static void value_line(const char *dir, int r, int step,
                       unsigned long long digest, const char *values) {
  char path[512];
  snprintf(path, sizeof path, "%s/rank-%d.trace.jsonl", dir, r);
  FILE *f = fopen(path, "a");
  cr_assert_not_null(f, "%s: %s", path, strerror(errno));
  fprintf(f, "{\"schema\":\"vqcheck-trace/1\",\"rank\":%d,\"step\":%d,"
          "\"tensor\":\"optimizer.lr\",\"dtype\":\"float64\","
          "\"shape\":[1],\"digest_algo\":\"vqc-xxh3-tree-1\","
          "\"digest\":\"%016llx\"", r, step, digest);
  if (values) fprintf(f, ",\"values\":%s", values);
  fputs("}\n", f);
  cr_assert_eq(fclose(f), 0);
}

Test(gate_groups, values_are_told) {
  char traces[512], out[512];
  /* 3 ranks; rank 2 takes lr 0.02 at step 1. The values differ from step 0
   * on rank 1 but its digest does not: values are told, never compared. */
  cr_assert_eq(mkdir(dir_in(traces, sizeof traces, "v"), 0777), 0);
  for (int step = 0; step < 3; step++)
    for (int r = 0; r < 3; r++) {
      const bool drift = r == 2 && step >= 1;
      value_line(traces, r, step, drift ? 0xb2 : 0xb1,
                 drift ? "[0.02]" : r == 1 ? "[0.5]" : "[0.01]");
    }
  json_t *j = compare(traces, dir_in(out, sizeof out, "vo"), 1);
  const json_t *fs = json_object_get(j, "findings");
  cr_assert_eq(json_array_size(fs), 1, "%zu findings", json_array_size(fs));
  const json_t *f = json_array_get(fs, 0);
  cr_expect_eq(json_integer_value(json_object_get(f, "step")), 1);
  const char *msg = json_string_value(json_object_get(f, "message"));
  cr_expect(msg && strstr(msg, "(value 0.02 on rank 2 vs 0.01 on rank 0;"),
            "message: %s", msg);
  const json_t *vals = json_object_get(json_object_get(f, "detail"),
                                       "values");
  cr_expect_eq(json_real_value(json_array_get(json_object_get(vals, "2"), 0)),
               0.02);
  cr_expect_eq(json_real_value(json_array_get(json_object_get(vals, "0"), 0)),
               0.01);
  json_decref(j);

  static const char *const bad[] = {"[]", "\"0.1\"", "[\"a\"]",
                                    "[1,2,3,4,5,6,7,8,9]", "{}"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char name[32];
    snprintf(name, sizeof name, "bv%zu", i);
    dir_in(traces, sizeof traces, name);
    cr_assert_eq(mkdir(traces, 0777), 0);
    value_line(traces, 0, 0, 0x1, bad[i]);
    value_line(traces, 1, 0, 0x1, NULL);
    snprintf(name, sizeof name, "bo%zu", i);
    vqc_spawn_result r = run_cli("compare", traces, "--out",
                                 dir_in(out, sizeof out, name), NULL);
    cr_expect_eq(r.code, 2, "values %s: exit %d; stderr: %s", bad[i], r.code,
                 r.err);
    cr_expect_not_null(strstr(r.err, "rank-0.trace.jsonl:1: field 'values'"),
                       "values %s: stderr: %s", bad[i], r.err);
    vqc_spawn_result_free(&r);
  }
}
