/* test_fixture.c: the golden-case reader (harness/conformance/fixture.h).
 *
 * Each test writes a small case directory under a fresh temporary directory:
 * one valid case, read back through every accessor, and broken variants
 * (missing file, wrong size, bad JSON, BLAKE2b mismatch, unknown dtype, bad
 * shapes, escaping file names, wrong types). Every broken case must give an
 * error status whose message names the file and the field, and never crash;
 * a truncation sweep over case.json checks the "never crash" part broadly. */
#include <blake2.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"

/* ---- helpers: a temporary case directory */

static char tmp_dir[256];

static void make_tmp(void) {
  snprintf(tmp_dir, sizeof tmp_dir, "/tmp/vqc_test_fixture_XXXXXX");
  cr_assert_not_null(mkdtemp(tmp_dir));
}

static void remove_tmp(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
  cr_expect_eq(system(cmd), 0);
}

TestSuite(fixture, .init = make_tmp, .fini = remove_tmp);

static void write_file(const char *name, const void *data, size_t n) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", tmp_dir, name);
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f, "cannot write %s", path);
  if (n) cr_assert_eq(fwrite(data, 1, n, f), n);
  fclose(f);
}

static void write_text(const char *name, const char *text) {
  write_file(name, text, strlen(text));
}

static void digest_hex(const void *data, size_t n, char hex[33]) {
  uint8_t d[16];
  cr_assert_eq(blake2b(d, data, NULL, 16, n, 0), 0);
  for (int i = 0; i < 16; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

/* Contents of the valid case: z (2,3) float32, idx (3,) int64, e (0,). */
static const float Z[6] = {0.5f, -1.25f, 3.0f, 0.0f, 1e-3f, -7.5f};
static const int64_t IDX[3] = {7, -1, 1LL << 40};

/* Writes the three .bin files and a case.json whose "z" header is z_spec
 * (a JSON object text; NULL: the correct one). */
static void write_case_with(const char *z_spec, const char *format) {
  write_file("z.bin", Z, sizeof Z);
  write_file("idx.bin", IDX, sizeof IDX);
  write_file("e.bin", "", 0);
  char hz[33], hi[33], he[33], zdefault[200], json[2048];
  digest_hex(Z, sizeof Z, hz);
  digest_hex(IDX, sizeof IDX, hi);
  digest_hex("", 0, he);
  snprintf(zdefault, sizeof zdefault,
           "{\"file\": \"z.bin\", \"dtype\": \"float32\", \"shape\": [2, 3],"
           " \"blake2b\": \"%s\"}",
           hz);
  snprintf(json, sizeof json,
           "{\"format\": \"%s\", \"case\": \"tiny\", \"kind\": \"fsq\",\n"
           " \"params\": {\"levels\": [8, 5], \"flag\": true, \"eps\": 0.001,"
           " \"n\": 3, \"two\": 2.0, \"half\": 2.5, \"nothing\": null,"
           " \"text\": \"x\"},\n"
           " \"scalars\": {\"loss\": 0.25, \"count\": 3.0, \"codes\": [1, 2],"
           " \"name\": \"s\"},\n"
           " \"arrays\": {\"z\": %s,\n"
           "  \"idx\": {\"file\": \"idx.bin\", \"dtype\": \"int64\","
           " \"shape\": [3], \"blake2b\": \"%s\"},\n"
           "  \"e\": {\"file\": \"e.bin\", \"dtype\": \"float32\","
           " \"shape\": [0], \"blake2b\": \"%s\"}}}\n",
           format ? format : "vq-oracle-fixture/1", z_spec ? z_spec : zdefault,
           hi, he);
  write_file("case.json", json, strlen(json));
}

static void write_valid_case(void) { write_case_with(NULL, NULL); }

/* Opens the temp case expecting failure `want`; returns the message. */
static const char *open_fails(vqc_status want) {
  vqc_fixture *fx = (vqc_fixture *)0x1; /* must be reset to NULL */
  vqc_status s = vqc_fixture_open(tmp_dir, &fx);
  cr_assert_eq(s, want, "status %s, want %s (%s)", vqc_status_name(s),
               vqc_status_name(want), vqc_last_error());
  cr_assert_null(fx);
  return vqc_last_error();
}

#define EXPECT_MSG(msg, part) \
  cr_expect(strstr((msg), (part)) != NULL, "message lacks '%s': %s", (part), (msg))

/* ---- BLAKE2b itself: Python's hashlib.blake2b(digest_size=16) */

Test(fixture, blake2b_128_known_answers) {
  char hex[33];
  digest_hex("abc", 3, hex);
  cr_expect_str_eq(hex, "cf4ab791c62b8d2b2109c90275287816");
  digest_hex("", 0, hex);
  cr_expect_str_eq(hex, "cae66941d9efbd404e4d88758ea67670");
}

/* ---- the valid case */

Test(fixture, reads_a_valid_case) {
  write_valid_case();
  vqc_fixture *fx = NULL;
  cr_assert_eq(vqc_fixture_open(tmp_dir, &fx), VQC_OK, "%s", vqc_last_error());
  cr_expect_str_eq(vqc_fixture_name(fx), "tiny");
  cr_expect_str_eq(vqc_fixture_kind(fx), "fsq");
  EXPECT_MSG(vqc_fixture_json_path(fx), "case.json");

  const vqc_fixture_array *z, *idx, *e;
  cr_assert_eq(vqc_fixture_f32(fx, "z", 2, (const int64_t[]){2, 3}, &z),
               VQC_OK);
  cr_expect_eq(z->numel, 6);
  cr_expect_eq(memcmp(z->data, Z, sizeof Z), 0);
  cr_assert_eq(vqc_fixture_i64(fx, "idx", 1, (const int64_t[]){-1}, &idx),
               VQC_OK);
  cr_expect_eq(memcmp(idx->data, IDX, sizeof IDX), 0);
  cr_assert_eq(vqc_fixture_f32(fx, "e", 0, NULL, &e), VQC_OK);
  cr_expect_eq(e->numel, 0);
  cr_expect_not_null(e->data);
  cr_expect_null(vqc_fixture_find(fx, "nope"));

  /* Shape and dtype mismatches name the field and both shapes. */
  cr_expect_eq(vqc_fixture_check_shape(fx, z, 2, (const int64_t[]){-1, 4}),
               VQC_ESHAPE);
  EXPECT_MSG(vqc_last_error(), "arrays.z.shape: [2,3], expected [*,4]");
  cr_expect_eq(vqc_fixture_i64(fx, "z", 0, NULL, &z), VQC_EPARSE);
  EXPECT_MSG(vqc_last_error(), "arrays.z.dtype: float32, expected int64");
  cr_expect_eq(vqc_fixture_f32(fx, "nope", 0, NULL, &z), VQC_EPARSE);
  EXPECT_MSG(vqc_last_error(), "arrays.nope: missing");

  /* Params. */
  int64_t *levels = NULL, n = 0, iv = 0;
  double dv = 0;
  bool bv = false;
  cr_assert_eq(vqc_fixture_param_int_list(fx, "levels", &levels, &n), VQC_OK);
  cr_expect_eq(n, 2);
  cr_expect(levels[0] == 8 && levels[1] == 5);
  free(levels);
  cr_expect_eq(vqc_fixture_param_bool(fx, "flag", &bv), VQC_OK);
  cr_expect(bv);
  cr_expect_eq(vqc_fixture_param_double(fx, "eps", &dv), VQC_OK);
  cr_expect_eq(dv, 0.001);
  cr_expect_eq(vqc_fixture_param_int(fx, "n", &iv), VQC_OK);
  cr_expect_eq(iv, 3);
  cr_expect_eq(vqc_fixture_param_int(fx, "two", &iv), VQC_OK); /* 2.0 */
  cr_expect_eq(iv, 2);
  cr_expect_eq(vqc_fixture_param_int(fx, "half", &iv), VQC_EPARSE); /* 2.5 */
  EXPECT_MSG(vqc_last_error(), "params.half: expected an integer");
  cr_expect_eq(vqc_fixture_param_bool(fx, "n", &bv), VQC_EPARSE);
  EXPECT_MSG(vqc_last_error(), "params.n: expected true or false");
  cr_expect_eq(vqc_fixture_param_double(fx, "text", &dv), VQC_EPARSE);
  cr_expect_eq(vqc_fixture_param_int(fx, "missing", &iv), VQC_EPARSE);
  EXPECT_MSG(vqc_last_error(), "params.missing: missing, expected an integer");
  cr_expect_eq(vqc_fixture_param_int_list(fx, "n", &levels, &n), VQC_EPARSE);
  cr_expect_null(levels);
  /* null counts as absent: the _or variants give the default. */
  cr_expect_not(vqc_fixture_has_param(fx, "nothing"));
  cr_expect(vqc_fixture_has_param(fx, "flag"));
  cr_expect_eq(vqc_fixture_param_int_or(fx, "nothing", 42, &iv), VQC_OK);
  cr_expect_eq(iv, 42);
  cr_expect_eq(vqc_fixture_param_int_or(fx, "n", 42, &iv), VQC_OK);
  cr_expect_eq(iv, 3);
  cr_expect_eq(vqc_fixture_param_double_or(fx, "absent", 1e-3, &dv), VQC_OK);
  cr_expect_eq(dv, 1e-3);
  cr_expect_eq(vqc_fixture_param_bool_or(fx, "absent", true, &bv), VQC_OK);
  cr_expect(bv);
  /* ... but a present value of the wrong type is still an error. */
  cr_expect_eq(vqc_fixture_param_bool_or(fx, "n", true, &bv), VQC_EPARSE);

  /* Scalars. */
  cr_expect(vqc_fixture_has_scalar(fx, "loss"));
  cr_expect_not(vqc_fixture_has_scalar(fx, "levels"));
  cr_expect_eq(vqc_fixture_scalar(fx, "loss", &dv), VQC_OK);
  cr_expect_eq(dv, 0.25);
  cr_expect_eq(vqc_fixture_scalar_int(fx, "count", &iv), VQC_OK);
  cr_expect_eq(iv, 3);
  int64_t *codes = NULL;
  cr_expect_eq(vqc_fixture_scalar_int_list(fx, "codes", &codes, &n), VQC_OK);
  cr_expect(n == 2 && codes[0] == 1 && codes[1] == 2);
  free(codes);
  cr_expect_eq(vqc_fixture_scalar(fx, "name", &dv), VQC_EPARSE);
  EXPECT_MSG(vqc_last_error(), "scalars.name: expected a number");

  char kind[8];
  cr_expect_eq(vqc_fixture_read_kind(tmp_dir, kind, sizeof kind), VQC_OK);
  cr_expect_str_eq(kind, "fsq");
  vqc_fixture_close(fx);
  vqc_fixture_close(NULL); /* accepted */
}

/* ---- broken cases */

Test(fixture, missing_case_json) {
  EXPECT_MSG(open_fails(VQC_EPARSE), "case.json: cannot read");
}

Test(fixture, missing_bin_file) {
  write_valid_case();
  char path[512];
  snprintf(path, sizeof path, "%s/idx.bin", tmp_dir);
  cr_assert_eq(unlink(path), 0);
  const char *msg = open_fails(VQC_EPARSE);
  EXPECT_MSG(msg, "arrays.idx");
  EXPECT_MSG(msg, "idx.bin");
  EXPECT_MSG(msg, "cannot open");
}

Test(fixture, wrong_file_size) {
  write_valid_case();
  write_file("z.bin", Z, sizeof Z - 4); /* one float short */
  const char *msg = open_fails(VQC_EPARSE);
  EXPECT_MSG(msg, "arrays.z");
  EXPECT_MSG(msg, "has 20 bytes, but shape [2,3] of float32 needs 24");
}

Test(fixture, header_shape_disagrees_with_file) {
  char spec[200], hz[33];
  digest_hex(Z, sizeof Z, hz);
  snprintf(spec, sizeof spec,
           "{\"file\": \"z.bin\", \"dtype\": \"int64\", \"shape\": [2, 3],"
           " \"blake2b\": \"%s\"}",
           hz);
  write_case_with(spec, NULL);
  EXPECT_MSG(open_fails(VQC_EPARSE), "needs 48");
}

Test(fixture, bad_json) {
  write_valid_case();
  write_text("case.json", "{\"kind\": \"fsq\",\n \"arrays\": {,}}");
  const char *msg = open_fails(VQC_EPARSE);
  EXPECT_MSG(msg, "case.json:2:");
  EXPECT_MSG(msg, "not valid JSON");
}

Test(fixture, blake2b_mismatch) {
  write_valid_case();
  float changed[6];
  memcpy(changed, Z, sizeof Z);
  changed[4] = nextafterf(changed[4], 1.0f); /* one ulp, same size */
  write_file("z.bin", changed, sizeof changed);
  const char *msg = open_fails(VQC_EPARSE);
  EXPECT_MSG(msg, "arrays.z.blake2b");
  EXPECT_MSG(msg, "z.bin");
}

Test(fixture, unknown_dtype) {
  write_case_with("{\"file\": \"z.bin\", \"dtype\": \"float16\", \"shape\": "
                  "[2, 3], \"blake2b\": \"00000000000000000000000000000000\"}",
                  NULL);
  const char *msg = open_fails(VQC_EPARSE);
  EXPECT_MSG(msg, "arrays.z.dtype: 'float16' is not supported");
  EXPECT_MSG(msg, "\"float32\" or \"int64\"");
}

Test(fixture, bad_headers) {
  static const struct {
    const char *spec, *part;
  } cases[] = {
      {"[1, 2]", "arrays.z: expected an object"},
      {"{\"dtype\": \"float32\", \"shape\": [6], \"blake2b\": \"00\"}",
       "arrays.z.file: missing"},
      {"{\"file\": \"z.bin\", \"dtype\": \"float32\", \"blake2b\": "
       "\"00000000000000000000000000000000\"}",
       "arrays.z.shape: missing"},
      {"{\"file\": \"z.bin\", \"dtype\": \"float32\", \"shape\": [2, -3], "
       "\"blake2b\": \"00000000000000000000000000000000\"}",
       "arrays.z.shape[1]: expected a non-negative integer"},
      {"{\"file\": \"z.bin\", \"dtype\": \"float32\", \"shape\": [2.5], "
       "\"blake2b\": \"00000000000000000000000000000000\"}",
       "arrays.z.shape[0]"},
      {"{\"file\": \"z.bin\", \"dtype\": \"float32\", \"shape\": [1,1,1,1,1,"
       "1,1,1,1], \"blake2b\": \"00000000000000000000000000000000\"}",
       "9 dimensions"},
      {"{\"file\": \"z.bin\", \"dtype\": \"float32\", \"shape\": "
       "[4294967296, 4294967296], \"blake2b\": "
       "\"00000000000000000000000000000000\"}",
       "more than 2^37 elements"},
      {"{\"file\": \"z.bin\", \"dtype\": \"float32\", \"shape\": [6], "
       "\"blake2b\": \"xyz\"}",
       "arrays.z.blake2b: 'xyz' is not 32 hex digits"},
      {"{\"file\": \"../z.bin\", \"dtype\": \"float32\", \"shape\": [6], "
       "\"blake2b\": \"00000000000000000000000000000000\"}",
       "not a file name inside the case directory"},
      {"{\"file\": \"/etc/passwd\", \"dtype\": \"float32\", \"shape\": [6], "
       "\"blake2b\": \"00000000000000000000000000000000\"}",
       "not a file name inside the case directory"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    write_case_with(cases[i].spec, NULL);
    EXPECT_MSG(open_fails(VQC_EPARSE), cases[i].part);
  }
}

Test(fixture, wrong_format_and_missing_kind) {
  write_case_with(NULL, "vq-oracle-fixture/2");
  EXPECT_MSG(open_fails(VQC_EPARSE),
             "format: 'vq-oracle-fixture/2', expected \"vq-oracle-fixture/1\"");
  write_text("case.json", "{\"format\": \"vq-oracle-fixture/1\"}");
  EXPECT_MSG(open_fails(VQC_EPARSE), "kind: missing, expected a string");
  write_text("case.json", "[1]");
  EXPECT_MSG(open_fails(VQC_EPARSE), "expected a JSON object at the top");
  char kind[16];
  cr_expect_eq(vqc_fixture_read_kind(tmp_dir, kind, sizeof kind), VQC_EPARSE);
}

/* Every prefix of a valid case.json is an error (never a crash or a
 * half-read fixture), and only the whole file opens. */
Test(fixture, truncated_case_json_never_crashes) {
  write_valid_case();
  char path[512];
  snprintf(path, sizeof path, "%s/case.json", tmp_dir);
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f);
  char full[2048];
  const size_t n = fread(full, 1, sizeof full, f);
  fclose(f);
  cr_assert(n > 100 && n < sizeof full);
  for (size_t cut = 0; cut < n - 1; cut++) { /* n-1: drop only the '\n' ok */
    write_file("case.json", full, cut);
    vqc_fixture *fx = NULL;
    cr_assert_neq(vqc_fixture_open(tmp_dir, &fx), VQC_OK, "prefix %zu opened",
                  cut);
    cr_assert_null(fx);
    cr_assert(strlen(vqc_last_error()) > 0);
  }
  write_file("case.json", full, n);
  vqc_fixture *fx = NULL;
  cr_expect_eq(vqc_fixture_open(tmp_dir, &fx), VQC_OK);
  vqc_fixture_close(fx);
}
