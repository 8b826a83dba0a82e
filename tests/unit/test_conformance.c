/* test_conformance.c: the conformance framework (harness/conformance/conformance.h) and
 * the fsq handler.
 *
 * - the comparison helpers apply the contract's rule at its boundary
 *   (1e-5 * max(1, |want|)), exact comparisons, NaN, and report the worst
 *   element;
 * - the fsq handler passes the shared golden fsq cases, and FAILS copies of
 *   them with one element changed (and a valid digest), naming the output;
 * - it also runs cases of shapes and parameters the shared fixtures do not
 *   have (several codebooks, 2-D, and 4-D/5-D channel-first inputs), written
 *   here;
 * - unreadable cases fail, unknown kinds are skipped, and a handler that
 *   cannot run reports why. */
#include <blake2.h>
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "test_paths.h"
#include "vqc/fsq.h"

static char tmp_dir[256];

static void make_tmp(void) {
  snprintf(tmp_dir, sizeof tmp_dir, "/tmp/vqc_test_conformance_XXXXXX");
  cr_assert_not_null(mkdtemp(tmp_dir));
}

static void remove_tmp(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
  cr_expect_eq(system(cmd), 0);
}

TestSuite(conformance, .init = make_tmp, .fini = remove_tmp);

static vqc_conformance_result fresh(void) {
  vqc_conformance_result r;
  memset(&r, 0, sizeof r);
  return r;
}

/* ---- comparison helpers */

Test(conformance, tolerance_is_relative_above_one_absolute_below) {
  /* want 100: allowed 1e-3; want 0.5: allowed 1e-5. Offsets are chosen
   * well inside / outside (float32 spacing at 100 is 7.6e-6). */
  const float want[4] = {100.0f, 100.0f, 0.5f, 0.5f};
  const float got[4] = {100.0009f, 100.002f, 0.500009f, 0.50002f};
  for (int i = 0; i < 4; i++) {
    vqc_conformance_result r = fresh();
    vqc_conf_compare_f32(&r, "x", &got[i], &want[i], 1);
    const bool should_pass = i % 2 == 0;
    cr_expect_eq(r.outcome, should_pass ? VQC_CONF_PASS : VQC_CONF_FAIL,
                 "got %.9g want %.9g", got[i], want[i]);
    cr_expect_eq(r.compared, 1);
  }
}

Test(conformance, worst_difference_and_first_mismatch) {
  const float want[5] = {1, 2, 3, 4, 5};
  const float got[5] = {1, 2.5f, 3, 4.5f, 5};
  vqc_conformance_result r = fresh();
  vqc_conf_compare_f32(&r, "q", got, want, 5);
  cr_expect_eq(r.outcome, VQC_CONF_FAIL);
  cr_expect_str_eq(r.worst_array, "q");
  cr_expect_eq(r.worst_index, 1);        /* 0.5/2 beats 0.5/4 */
  cr_expect_eq(r.worst, 0.25);
  cr_expect_eq(r.narrays_failed, 1);
  cr_expect(strstr(r.message, "q: 2 of 5 elements differ") != NULL, "%s",
            r.message);
  cr_expect(strstr(r.message, "first at [1]: got 2.5, want 2") != NULL, "%s",
            r.message);
  /* A second failing array keeps the first message and adds a detail. */
  const int64_t wi[2] = {3, 4}, gi[2] = {3, 5};
  vqc_conf_compare_i64(&r, "idx", gi, wi, 2);
  cr_expect_eq(r.narrays_failed, 2);
  cr_expect(strncmp(r.message, "q:", 2) == 0);
  cr_expect(strstr(r.details, "idx: 1 of 2 elements differ") != NULL, "%s",
            r.details);
  cr_expect_str_eq(r.worst_array, "q"); /* idx ties at 1/4: first stays */
}

Test(conformance, exact_comparisons) {
  const float want[3] = {0.0f, NAN, 1.0f};
  const float same[3] = {-0.0f, NAN, 1.0f}; /* -0 == 0 by value */
  vqc_conformance_result r = fresh();
  vqc_conf_compare_f32_exact(&r, "out", same, want, 3);
  cr_expect_eq(r.outcome, VQC_CONF_PASS);
  cr_expect_eq(r.worst, 0.0);
  /* One ulp is a failure for exact arrays, not for tolerance ones. */
  const float ulp[3] = {0.0f, NAN, nextafterf(1.0f, 2.0f)};
  r = fresh();
  vqc_conf_compare_f32(&r, "out", ulp, want, 3);
  cr_expect_eq(r.outcome, VQC_CONF_PASS);
  vqc_conf_compare_f32_exact(&r, "out", ulp, want, 3);
  cr_expect_eq(r.outcome, VQC_CONF_FAIL);
  /* NaN against a number fails both ways, with an infinite difference. */
  const float nan_got[3] = {NAN, NAN, 1.0f};
  r = fresh();
  vqc_conf_compare_f32(&r, "out", nan_got, want, 3);
  cr_expect_eq(r.outcome, VQC_CONF_FAIL);
  cr_expect(isinf(r.worst));
  cr_expect_eq(r.worst_index, 0);
}

/* ---- a tiny fixture writer (jansson + libb2), for cases made here */

typedef struct builder {
  char dir[512];
  json_t *root, *arrays, *params;
} builder;

static void b_init(builder *b, const char *name, const char *kind) {
  snprintf(b->dir, sizeof b->dir, "%s/%s", tmp_dir, name);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "mkdir -p '%s'", b->dir);
  cr_assert_eq(system(cmd), 0);
  b->root = json_object();
  b->arrays = json_object();
  b->params = json_object();
  json_object_set_new(b->root, "format", json_string("vq-oracle-fixture/1"));
  json_object_set_new(b->root, "case", json_string(name));
  json_object_set_new(b->root, "kind", json_string(kind));
  json_object_set(b->root, "params", b->params);
  json_object_set(b->root, "arrays", b->arrays);
}

static void digest_hex(const void *data, size_t n, char hex[33]) {
  uint8_t d[16];
  cr_assert_eq(blake2b(d, data, NULL, 16, n, 0), 0);
  for (int i = 0; i < 16; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

static void b_array(builder *b, const char *name, const char *dtype,
                    int ndim, const int64_t *shape, const void *data) {
  int64_t numel = 1;
  json_t *js = json_array();
  for (int i = 0; i < ndim; i++) {
    numel *= shape[i];
    json_array_append_new(js, json_integer(shape[i]));
  }
  const size_t nbytes = (size_t)numel * 4 * (strcmp(dtype, "int64") ? 1 : 2);
  char file[128], path[700], hex[33];
  snprintf(file, sizeof file, "%s.bin", name);
  snprintf(path, sizeof path, "%s/%s", b->dir, file);
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  if (nbytes) cr_assert_eq(fwrite(data, 1, nbytes, f), nbytes);
  fclose(f);
  digest_hex(data, nbytes, hex);
  json_t *a = json_object();
  json_object_set_new(a, "file", json_string(file));
  json_object_set_new(a, "dtype", json_string(dtype));
  json_object_set_new(a, "shape", js);
  json_object_set_new(a, "blake2b", json_string(hex));
  json_object_set_new(b->arrays, name, a);
}

static void b_save(builder *b) {
  char path[700];
  snprintf(path, sizeof path, "%s/case.json", b->dir);
  cr_assert_eq(json_dump_file(b->root, path, JSON_INDENT(1)), 0);
  json_decref(b->arrays);
  json_decref(b->params);
  json_decref(b->root);
}

/* (B, W, S) <-> (B, S, W), written out independently of the handler's. */
static void transpose_bws(const float *src, float *dst, int64_t B, int64_t W,
                          int64_t S, bool to_last) {
  for (int64_t b = 0; b < B; b++)
    for (int64_t w = 0; w < W; w++)
      for (int64_t t = 0; t < S; t++) {
        if (to_last)
          dst[(b * S + t) * W + w] = src[(b * W + w) * S + t];
        else
          dst[(b * W + w) * S + t] = src[(b * S + t) * W + w];
      }
}

/* Writes an fsq case computed with our FSQ: the handler must accept the
 * shapes and parameters (outputs are ours, so this checks the plumbing for
 * unseen shapes; the golden cases check the values). lead = (B, S...), the
 * input's dims without the C*d features, which come last, or second when
 * lead_ndim >= 3 (4-D and larger inputs are channel first upstream). */
static void write_fsq_case(const char *name, const int32_t *levels, int d,
                           int C, bool symmetric, int lead_ndim,
                           const int64_t *lead) {
  const bool channel_first = lead_ndim >= 3;
  vqc_fsq q;
  cr_assert_eq(vqc_fsq_init(&q, levels, d, C, symmetric, 1e-3), VQC_OK);
  int64_t M = 1;
  for (int i = 0; i < lead_ndim; i++) M *= lead[i];
  const int W = C * d;
  const int64_t K = q.codebook_size;
  float *z = malloc(sizeof(float) * (size_t)(M * W));
  float *out = malloc(sizeof(float) * (size_t)(M * W));
  int32_t *idx = malloc(sizeof(int32_t) * (size_t)(M * C));
  int32_t *lvl = malloc(sizeof(int32_t) * (size_t)(M * W));
  float *cb = malloc(sizeof(float) * (size_t)(K * d));
  int64_t *wide = malloc(sizeof(int64_t) * (size_t)(M * W + K * d + d));
  for (int64_t e = 0; e < M * W; e++)
    z[e] = 3.0f * sinf(0.37f * (float)e + 0.1f);
  cr_assert_eq(vqc_fsq_quantize(&q, z, M, out, idx), VQC_OK);
  if (channel_first) {
    /* z and out as the library lays them out: (B, W, S...). */
    float *t = malloc(sizeof(float) * (size_t)(M * W));
    transpose_bws(z, t, lead[0], W, M / lead[0], false);
    memcpy(z, t, sizeof(float) * (size_t)(M * W));
    transpose_bws(out, t, lead[0], W, M / lead[0], false);
    memcpy(out, t, sizeof(float) * (size_t)(M * W));
    free(t);
  }
  cr_assert_eq(vqc_fsq_level_indices(&q, idx, M * C, lvl), VQC_OK);
  cr_assert_eq(vqc_fsq_implicit_codebook(&q, cb), VQC_OK);

  builder b;
  b_init(&b, name, "fsq");
  json_t *jl = json_array();
  for (int i = 0; i < d; i++) json_array_append_new(jl, json_integer(levels[i]));
  json_object_set_new(b.params, "levels", jl);
  json_object_set_new(b.params, "preserve_symmetry", json_boolean(symmetric));
  json_object_set_new(b.params, "bound_eps", json_real(1e-3));
  json_object_set_new(b.params, "num_codebooks", json_integer(C));
  json_object_set_new(b.params, "codebook_size", json_integer(K));

  int64_t shape[9], zshape[9];
  for (int i = 0, j = 0; i <= lead_ndim; i++)
    zshape[i] = (i == (channel_first ? 1 : lead_ndim)) ? W : lead[j++];
  b_array(&b, "z", "float32", lead_ndim + 1, zshape, z);
  b_array(&b, "out", "float32", lead_ndim + 1, zshape, out);
  b_array(&b, "codes_from_indices", "float32", lead_ndim + 1, zshape, out);
  for (int i = 0; i < lead_ndim; i++) shape[i] = lead[i];
  /* indices: (lead...) for one codebook, (lead..., C) for several. */
  const int idx_ndim = C == 1 ? lead_ndim : lead_ndim + 1;
  shape[lead_ndim] = C;
  for (int64_t g = 0; g < M * C; g++) wide[g] = idx[g];
  b_array(&b, "indices", "int64", idx_ndim, shape, wide);
  shape[idx_ndim] = d;
  for (int64_t e = 0; e < M * W; e++) wide[e] = lvl[e];
  b_array(&b, "level_indices", "int64", idx_ndim + 1, shape, wide);
  b_array(&b, "implicit_codebook", "float32", 2, (const int64_t[]){K, d}, cb);
  for (int i = 0; i < d; i++) wide[i] = q.basis[i];
  b_array(&b, "basis", "int64", 1, (const int64_t[]){d}, wide);
  b_save(&b);
  free(z);
  free(out);
  free(idx);
  free(lvl);
  free(cb);
  free(wide);
}

static void expect_pass(const char *dir) {
  vqc_conformance_result r;
  char kind[32];
  vqc_conformance_run_case(dir, &r, kind, sizeof kind);
  cr_expect_eq(r.outcome, VQC_CONF_PASS, "%s: %s", dir, r.message);
  cr_expect_str_eq(kind, "fsq");
  cr_expect(r.compared > 0);
}

Test(conformance, fsq_handler_takes_shapes_from_the_case) {
  char dir[700];
  write_fsq_case("two_d", (const int32_t[]){4, 3}, 2, 1, false, 1,
                 (const int64_t[]){7});
  snprintf(dir, sizeof dir, "%s/two_d", tmp_dir);
  expect_pass(dir);
  write_fsq_case("four_d_sym", (const int32_t[]){8, 5, 2}, 3, 1, true, 3,
                 (const int64_t[]){2, 3, 4});
  snprintf(dir, sizeof dir, "%s/four_d_sym", tmp_dir);
  expect_pass(dir);
  write_fsq_case("groups", (const int32_t[]){6, 5}, 2, 3, false, 2,
                 (const int64_t[]){2, 5});
  snprintf(dir, sizeof dir, "%s/groups", tmp_dir);
  expect_pass(dir);
  write_fsq_case("video_groups", (const int32_t[]){7, 4}, 2, 2, false, 4,
                 (const int64_t[]){2, 3, 2, 2});
  snprintf(dir, sizeof dir, "%s/video_groups", tmp_dir);
  expect_pass(dir);
}

/* ---- the shared golden fsq cases */

static const char *const FSQ_CASES[] = {"fsq_8_5_5_5", "fsq_8_6_5",
                                        "fsq_7_5_5_5_5", "fsq_8_8_8",
                                        "fsq_5_5_5", "fsq_8_5_5_5_sym"};

static void golden_dir(const char *name, char *out, size_t cap) {
  snprintf(out, cap, "%s/vqpt/%s", vqc_test_fixtures_dir(), name);
  char probe[800];
  snprintf(probe, sizeof probe, "%s/case.json", out);
  FILE *f = fopen(probe, "r");
  if (!f) cr_skip_test("golden fixtures not found at %s", out);
  fclose(f);
}

Test(conformance, golden_fsq_cases_pass) {
  for (size_t i = 0; i < sizeof FSQ_CASES / sizeof FSQ_CASES[0]; i++) {
    char dir[700];
    golden_dir(FSQ_CASES[i], dir, sizeof dir);
    vqc_conformance_result r;
    char kind[32];
    vqc_conformance_run_case(dir, &r, kind, sizeof kind);
    cr_expect_eq(r.outcome, VQC_CONF_PASS, "%s: %s", FSQ_CASES[i], r.message);
    /* Exact outputs: not even one ulp anywhere. */
    cr_expect_eq(r.worst, 0.0, "%s: worst %g in %s", FSQ_CASES[i], r.worst,
                 r.worst_array);
  }
}

/* Copies golden case `name` into tmp and changes element `at` of array
 * `array` (int64 +1, or float32 one ulp up), updating its digest so that
 * the reader accepts it and only the handler can notice. */
static void tamper(const char *name, const char *array, int64_t at,
                   char *dir, size_t cap) {
  char src[700], cmd[1600];
  golden_dir(name, src, sizeof src);
  snprintf(dir, cap, "%s/%s", tmp_dir, name);
  snprintf(cmd, sizeof cmd, "cp -r '%s' '%s'", src, dir);
  cr_assert_eq(system(cmd), 0);

  char json_path[800], bin[800];
  snprintf(json_path, sizeof json_path, "%s/case.json", dir);
  json_t *root = json_load_file(json_path, 0, NULL);
  cr_assert_not_null(root);
  json_t *spec = json_object_get(json_object_get(root, "arrays"), array);
  cr_assert_not_null(spec);
  const bool is_int = strcmp(json_string_value(json_object_get(spec, "dtype")),
                             "int64") == 0;
  snprintf(bin, sizeof bin, "%s/%s", dir,
           json_string_value(json_object_get(spec, "file")));
  FILE *f = fopen(bin, "r+b");
  cr_assert_not_null(f);
  unsigned char buf[1 << 16];
  const size_t n = fread(buf, 1, sizeof buf, f);
  cr_assert(n < sizeof buf && (size_t)(at + 1) * (is_int ? 8 : 4) <= n);
  if (is_int) {
    int64_t v;
    memcpy(&v, buf + at * 8, 8);
    v += 1;
    memcpy(buf + at * 8, &v, 8);
  } else {
    float v;
    memcpy(&v, buf + at * 4, 4);
    v = nextafterf(v, INFINITY);
    memcpy(buf + at * 4, &v, 4);
  }
  rewind(f);
  cr_assert_eq(fwrite(buf, 1, n, f), n);
  fclose(f);
  char hex[33];
  digest_hex(buf, n, hex);
  json_object_set_new(spec, "blake2b", json_string(hex));
  cr_assert_eq(json_dump_file(root, json_path, JSON_INDENT(1)), 0);
  json_decref(root);
}

static void expect_caught(const char *name, const char *array, int64_t at) {
  char dir[700];
  tamper(name, array, at, dir, sizeof dir);
  vqc_conformance_result r;
  char kind[32];
  vqc_conformance_run_case(dir, &r, kind, sizeof kind);
  cr_expect_eq(r.outcome, VQC_CONF_FAIL, "%s/%s[%lld] changed but passed",
               name, array, (long long)at);
  char want[160];
  snprintf(want, sizeof want, "%s: 1 of ", array);
  cr_expect(strstr(r.message, want) != NULL, "%s", r.message);
  snprintf(want, sizeof want, "first at [%lld]", (long long)at);
  cr_expect(strstr(r.message, want) != NULL, "%s", r.message);
}

Test(conformance, fsq_handler_catches_one_changed_element) {
  expect_caught("fsq_8_5_5_5", "indices", 17);
  expect_caught("fsq_8_6_5", "out", 5);             /* one ulp */
  expect_caught("fsq_8_5_5_5_sym", "implicit_codebook", 999 * 4 + 3);
  expect_caught("fsq_5_5_5", "level_indices", 0);
  expect_caught("fsq_8_8_8", "basis", 2);
  expect_caught("fsq_7_5_5_5_5", "codes_from_indices", 100);
}

/* ---- cases that cannot be run */

Test(conformance, unreadable_missing_and_unknown_cases) {
  vqc_conformance_result r;
  char kind[32];
  char dir[700];
  /* No such directory. */
  snprintf(dir, sizeof dir, "%s/absent", tmp_dir);
  vqc_conformance_run_case(dir, &r, kind, sizeof kind);
  cr_expect_eq(r.outcome, VQC_CONF_FAIL);
  cr_expect_str_eq(kind, "?");
  cr_expect(strstr(r.message, "cannot read the case") != NULL, "%s", r.message);

  /* A kind nobody handles: skipped, never passed. */
  builder b;
  b_init(&b, "future", "vq_something_new");
  b_save(&b);
  snprintf(dir, sizeof dir, "%s/future", tmp_dir);
  vqc_conformance_run_case(dir, &r, kind, sizeof kind);
  cr_expect_eq(r.outcome, VQC_CONF_SKIPPED);
  cr_expect_str_eq(kind, "vq_something_new");

  /* An fsq case without z: the handler stops and says why. */
  b_init(&b, "no_z", "fsq");
  json_t *jl = json_array();
  json_array_append_new(jl, json_integer(5));
  json_object_set_new(b.params, "levels", jl);
  b_save(&b);
  snprintf(dir, sizeof dir, "%s/no_z", tmp_dir);
  vqc_conformance_run_case(dir, &r, kind, sizeof kind);
  cr_expect_eq(r.outcome, VQC_CONF_FAIL);
  cr_expect(strstr(r.message, "the replay stopped") != NULL, "%s", r.message);
  cr_expect(strstr(r.message, "arrays.z: missing") != NULL, "%s", r.message);

  /* Bad levels are reported against params. */
  b_init(&b, "bad_levels", "fsq");
  jl = json_array();
  json_array_append_new(jl, json_integer(1));
  json_object_set_new(b.params, "levels", jl);
  b_save(&b);
  snprintf(dir, sizeof dir, "%s/bad_levels", tmp_dir);
  vqc_conformance_run_case(dir, &r, kind, sizeof kind);
  cr_expect_eq(r.outcome, VQC_CONF_FAIL);
  cr_expect(strstr(r.message, "params.levels[0]") != NULL, "%s", r.message);
}
