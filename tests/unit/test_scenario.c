/* test_scenario.c: the scenario loader (harness/scenario/scenario.h), its
 * overrides, the expectation matcher and `vqcheck list`.
 *
 * The valid files live in tests/data/scenarios/ and are read back field by
 * field. Every error class gets its own small file, written to a fresh
 * temporary directory, and must give VQC_EPARSE with a message that carries
 * "path:line: field:" for the exact line and field that is wrong. Two sweeps
 * (every truncation, and hostile bytes at every position) check that no
 * input makes the loader crash or return anything but OK or EPARSE. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "scenario.h"
#include "test_paths.h"

/* ---- helpers: a temporary directory of scenario files */

static char tmp_dir[256];

static void make_tmp(void) {
  snprintf(tmp_dir, sizeof tmp_dir, "/tmp/vqc_test_scenario_XXXXXX");
  cr_assert_not_null(mkdtemp(tmp_dir));
}

static void remove_tmp(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
  cr_expect_eq(system(cmd), 0);
}

TestSuite(scenario, .init = make_tmp, .fini = remove_tmp);

static void tmp_path(const char *name, char *out, size_t n) {
  snprintf(out, n, "%s/%s", tmp_dir, name);
}

static void write_bytes(const char *name, const void *data, size_t len) {
  char path[512];
  tmp_path(name, path, sizeof path);
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f, "cannot write %s", path);
  if (len) cr_assert_eq(fwrite(data, 1, len, f), len);
  fclose(f);
}

static void data_path(const char *name, char *out, size_t n) {
  snprintf(out, n, "%s/tests/data/scenarios/%s", vqc_test_source_dir(), name);
}

/* A valid base for the error tests: one field per line, lines numbered
 * 1..8, so that each test can replace one line and know its number. */
#define BASE_NAME "name: base\n"            /* line 1 */
#define BASE_MODEL "model: vq\n"            /* line 2 */
#define BASE_RANKS "ranks: 2\n"             /* line 3 */
#define BASE_STEPS "steps: 5\n"             /* line 4 */
#define BASE_BATCH "batch: 8\n"             /* line 5 */
#define BASE_SEED "seed: 1\n"               /* line 6 */
#define BASE_EXPECT "expect: clean\n"       /* line 7 */
#define BASE BASE_NAME BASE_MODEL BASE_RANKS BASE_STEPS BASE_BATCH BASE_SEED \
             BASE_EXPECT

/* Loads text written as file "case.yaml". */
static vqc_status load_text(const char *text, vqc_scenario *s) {
  write_bytes("case.yaml", text, strlen(text));
  char path[512];
  tmp_path("case.yaml", path, sizeof path);
  return vqc_scenario_load(path, s);
}

/* The text must fail with EPARSE at `line`, naming `field`. */
static void expect_error(const char *text, int line, const char *field) {
  vqc_scenario *s = malloc(sizeof *s);
  cr_assert_not_null(s);
  vqc_clear_error();
  const vqc_status st = load_text(text, s);
  const char *msg = vqc_last_error();
  cr_assert_eq(st, VQC_EPARSE, "expected EPARSE, got %s (%s) for:\n%s",
               vqc_status_name(st), msg, text);
  char want[600];
  snprintf(want, sizeof want, "%s/case.yaml:%d: %s: ", tmp_dir, line, field);
  cr_assert(strstr(msg, want) != NULL, "message '%s' lacks '%s'", msg, want);
  cr_assert(strstr(msg, "(expected") != NULL,
            "message '%s' does not say what is expected", msg);
  free(s);
}

/* ---- valid files */

Test(scenario, round_trips_every_field) {
  char path[512];
  data_path("rvq_every_field.yaml", path, sizeof path);
  vqc_scenario s;
  const vqc_status st = vqc_scenario_load(path, &s);
  cr_assert_eq(st, VQC_OK, "%s", vqc_last_error());
  cr_expect_str_eq(s.path, path);
  cr_expect_str_eq(s.name, "rvq_every-field_2");
  cr_expect_str_eq(s.description,
                   "Residual VQ on three ranks with an uneven batch (rank 1 "
                   "gets no rows), quantize-dropout seeds left "
                   "unsynchronised.\n");
  cr_expect_eq(s.model, VQC_MODEL_RVQ);
  cr_expect_eq(s.dim, 24);
  cr_expect_eq(s.codebook_size, 48);
  cr_expect_eq(s.num_quantizers, 3);
  cr_expect_eq(s.threshold_dead_code, 0.5);
  cr_expect(s.kmeans_init);
  cr_expect_eq(s.ranks, 3);
  cr_expect_eq(s.steps, 7);
  cr_expect_eq(s.nbatch, 3);
  cr_expect_eq(vqc_scenario_batch(&s, 0), 5);
  cr_expect_eq(vqc_scenario_batch(&s, 1), 0);
  cr_expect_eq(vqc_scenario_batch(&s, 2), 9);
  cr_expect_eq(vqc_scenario_batch(&s, 3), 0, "no such rank: 0 rows");
  cr_expect_eq(s.seed, UINT64_MAX);
  cr_expect_eq(s.interval, 2);
  cr_expect_eq(s.timeout_s, 12.5);
  cr_expect_eq(s.tolerance, 2.5e-3);
  cr_expect(s.strict);
  cr_expect_eq(s.fault, VQC_FAULT_UNSYNCED_DROPOUT_SEED);
  cr_expect_not(s.expect_clean);
  cr_assert_eq(s.nexpect, 2);
  cr_expect_eq(s.expect[0].kind, VQC_FINDING_SHAPE_MISMATCH);
  cr_expect_eq(s.expect[0].step, 3);
  cr_expect_str_eq(s.expect[0].tensor, "layers.1.embed");
  cr_expect_str_eq(s.expect[0].site, "vq_ema.c");
  cr_expect_eq(s.expect[0].line, 27);
  cr_expect_eq(s.expect[1].kind, VQC_FINDING_DIVERGENCE);
  cr_expect_eq(s.expect[1].step, -1);
  cr_expect_str_eq(s.expect[1].tensor, "");
  cr_expect_str_eq(s.expect[1].site, "");
  cr_expect_eq(s.expect[1].line, 31);
  /* levels and hidden are not RVQ sizes: left at 0 */
  cr_expect_eq(s.nlevels, 0);
  cr_expect_eq(s.hidden, 0);

  char line[256];
  vqc_scenario_expect_string(&s, line, sizeof line);
  cr_expect_str_eq(line,
                   "shape_mismatch@3 tensor~layers.1.embed site~vq_ema.c, "
                   "divergence");
}

Test(scenario, fsq_sizes_and_a_clean_expectation) {
  char path[512];
  data_path("fsq_levels.yaml", path, sizeof path);
  vqc_scenario s;
  cr_assert_eq(vqc_scenario_load(path, &s), VQC_OK, "%s", vqc_last_error());
  cr_expect_eq(s.model, VQC_MODEL_FSQ);
  cr_expect_eq(s.dim, 12);
  cr_expect_eq(s.hidden, 40);
  cr_assert_eq(s.nlevels, 3);
  cr_expect_eq(s.levels[0], 7);
  cr_expect_eq(s.levels[1], 5);
  cr_expect_eq(s.levels[2], 3);
  cr_expect_eq(s.nbatch, 1);
  cr_expect_eq(vqc_scenario_batch(&s, 0), 16);
  cr_expect_eq(vqc_scenario_batch(&s, 1), 16);
  cr_expect_eq(vqc_scenario_batch(&s, 2), 0, "only 2 ranks");
  cr_expect_eq(s.seed, 42);
  cr_expect(s.expect_clean);
  cr_expect_eq(s.nexpect, 0);
  cr_expect_eq(s.fault, VQC_FAULT_NONE);
  char line[64];
  vqc_scenario_expect_string(&s, line, sizeof line);
  cr_expect_str_eq(line, "clean");
}

Test(scenario, defaults_fill_what_the_file_leaves_out) {
  char path[512];
  data_path("clip_minimal.yaml", path, sizeof path);
  vqc_scenario s;
  cr_assert_eq(vqc_scenario_load(path, &s), VQC_OK, "%s", vqc_last_error());
  cr_expect_str_eq(s.name, "clip-minimal");
  cr_expect_str_eq(s.description, "");
  cr_expect_eq(s.model, VQC_MODEL_CLIP);
  cr_expect_eq(s.dim, 16);
  cr_expect_eq(s.hidden, 32);
  cr_expect_eq(s.codebook_size, 0, "clip has no codebook");
  cr_expect_eq(s.seed, 0);
  cr_expect_eq(s.interval, 1);
  cr_expect_eq(s.timeout_s, 30.0);
  cr_expect_eq(s.tolerance, 1e-4);
  cr_expect_not(s.strict);
  cr_expect_eq(s.fault, VQC_FAULT_NONE);
  cr_assert_eq(s.nexpect, 1);
  cr_expect_eq(s.expect[0].kind, VQC_FINDING_GRADIENT_MISMATCH);

  /* The defaults of each model (scenarios/README.md). */
  cr_assert_eq(load_text(BASE, &s), VQC_OK, "%s", vqc_last_error());
  cr_expect_eq(s.dim, 16);
  cr_expect_eq(s.codebook_size, 32);
  cr_expect_eq(s.threshold_dead_code, 0.0);
  cr_expect_not(s.kmeans_init);
  cr_assert_eq(load_text("name: r\nmodel: rvq\nranks: 1\nsteps: 1\nbatch: 1\n"
                         "seed: 1\nexpect: clean\n", &s), VQC_OK);
  cr_expect_eq(s.num_quantizers, 4);
  cr_assert_eq(load_text("name: f\nmodel: fsq\nranks: 1\nsteps: 1\nbatch: 1\n"
                         "seed: 1\nexpect: clean\n", &s), VQC_OK);
  cr_assert_eq(s.nlevels, 4);
  cr_expect(s.levels[0] == 8 && s.levels[1] == 5 && s.levels[2] == 5 &&
            s.levels[3] == 5);
  cr_assert_eq(load_text("name: a\nmodel: autoencoder\nranks: 1\nsteps: 1\n"
                         "batch: 1\nseed: 1\nexpect: clean\n", &s), VQC_OK);
  cr_expect(s.dim == 16 && s.codebook_size == 32 && s.hidden == 32);
}

Test(scenario, accepts_flow_style_comments_and_any_field_order) {
  vqc_scenario s;
  const char *text =
      "# comment\n"
      "{expect: [{kind: deadlock, site: comm.c}], seed: 9, batch: [0, 3],\n"
      " steps: 2, ranks: 2, model: vq, name: flow, fault: seed_sync_some_ranks,\n"
      " check: {strict: false, timeout: 2}}\n";
  cr_assert_eq(load_text(text, &s), VQC_OK, "%s", vqc_last_error());
  cr_expect_eq(s.fault, VQC_FAULT_SEED_SYNC_SOME_RANKS);
  cr_expect_eq(s.timeout_s, 2.0);
  cr_expect_eq(vqc_scenario_batch(&s, 0), 0);
  cr_expect_eq(vqc_scenario_batch(&s, 1), 3);
  cr_expect_str_eq(s.expect[0].site, "comm.c");
  cr_expect_eq(s.expect[0].line, 2);
}

/* ---- one test per error class */

Test(scenario, yaml_syntax_error_gives_libyaml_problem_and_line) {
  expect_error(BASE_NAME BASE_MODEL "ranks: [2\n" BASE_STEPS, 4, "YAML");
  const char *msg = vqc_last_error();
  cr_expect(strstr(msg, "did not find expected") != NULL, "%s", msg);
  expect_error(BASE_NAME "model: vq\n  bad: indent\n", 3, "YAML");
  expect_error(BASE "\t- tab\n", 8, "YAML");
}

Test(scenario, unknown_field) {
  expect_error(BASE_NAME BASE_MODEL "colour: blue\n", 3, "colour");
  cr_expect(strstr(vqc_last_error(), "unknown field") != NULL);
  cr_expect(strstr(vqc_last_error(), "name, description, model") != NULL,
            "lists the known fields: %s", vqc_last_error());
  expect_error(BASE "check:\n  interval: 1\n  strictness: true\n", 10,
               "check.strictness");
  expect_error(BASE_NAME BASE_MODEL BASE_RANKS BASE_STEPS BASE_BATCH BASE_SEED
               "expect:\n  - kind: divergence\n    when: 3\n",
               9, "expect[0].when");
  expect_error(BASE "sizes: {depth: 3}\n", 8, "sizes.depth");
}

Test(scenario, duplicate_key) {
  expect_error(BASE "steps: 6\n", 8, "steps");
  cr_expect(strstr(vqc_last_error(), "first given at line 4") != NULL, "%s",
            vqc_last_error());
  expect_error(BASE "sizes:\n  dim: 4\n  dim: 8\n", 10, "sizes.dim");
}

Test(scenario, wrong_type) {
  expect_error(BASE_NAME BASE_MODEL "ranks: four\n", 3, "ranks");
  cr_expect(strstr(vqc_last_error(), "got 'four'") != NULL, "%s",
            vqc_last_error());
  expect_error(BASE_NAME BASE_MODEL "ranks: 2.5\n", 3, "ranks");
  expect_error(BASE_NAME BASE_MODEL "ranks: 0x10\n", 3, "ranks");
  expect_error(BASE_NAME BASE_MODEL "ranks:\n", 3, "ranks");
  /* A quoted number is a string in YAML. */
  expect_error(BASE_NAME BASE_MODEL "ranks: \"2\"\n", 3, "ranks");
  cr_expect(strstr(vqc_last_error(), "quoted string") != NULL, "%s",
            vqc_last_error());
  expect_error(BASE "sizes: {kmeans_init: yes}\n", 8, "sizes.kmeans_init");
  expect_error(BASE "sizes: [dim, 3]\n", 8, "sizes");
  expect_error(BASE "check: {timeout: .inf}\n", 8, "check.timeout");
  expect_error(BASE "check: {tolerance: nan}\n", 8, "check.tolerance");
  expect_error(BASE_NAME "model: [vq]\n", 2, "model");
  expect_error("name: {a: 1}\n" BASE_MODEL, 1, "name");
  expect_error(BASE_NAME BASE_MODEL BASE_RANKS BASE_STEPS "batch: {a: 1}\n", 5,
               "batch");
  expect_error(BASE_NAME BASE_MODEL BASE_RANKS BASE_STEPS "batch: [4, x]\n", 5,
               "batch[1]");
  expect_error("- name\n- model\n", 1, "scenario");
  expect_error(BASE "? [complex, key]\n: 1\n", 8, "(key)");
}

Test(scenario, out_of_range) {
  expect_error(BASE_NAME BASE_MODEL "ranks: 1025\n", 3, "ranks");
  cr_expect(strstr(vqc_last_error(), "1025 is out of range") != NULL, "%s",
            vqc_last_error());
  expect_error(BASE_NAME BASE_MODEL "ranks: 0\n", 3, "ranks");
  expect_error(BASE_NAME BASE_MODEL BASE_RANKS "steps: 0\n", 4, "steps");
  expect_error(BASE_NAME BASE_MODEL BASE_RANKS "steps: 99999999999999999999\n",
               4, "steps");
  expect_error(BASE_NAME BASE_MODEL BASE_RANKS BASE_STEPS BASE_BATCH
               "seed: -1\n", 6, "seed");
  expect_error(BASE_NAME BASE_MODEL BASE_RANKS BASE_STEPS BASE_BATCH
               "seed: 18446744073709551616\n", 6, "seed");
  expect_error(BASE "check: {interval: 0}\n", 8, "check.interval");
  expect_error(BASE "check: {timeout: 0}\n", 8, "check.timeout");
  expect_error(BASE "check: {tolerance: -1e-3}\n", 8, "check.tolerance");
  expect_error(BASE "sizes: {threshold_dead_code: -0.5}\n", 8,
               "sizes.threshold_dead_code");
  expect_error(BASE "sizes: {dim: 0}\n", 8, "sizes.dim");
  expect_error(BASE "sizes: {dim: 65536, codebook_size: 65536}\n", 8, "sizes");
  expect_error("name: f\nmodel: fsq\nsizes:\n  levels: [8, 2]\n", 4,
               "sizes.levels[1]");
  expect_error("name: f\nmodel: fsq\nsizes:\n  levels: [65536, 65536]\n", 4,
               "sizes.levels[1]");
  expect_error("name: f\nmodel: fsq\nsizes:\n  levels: [3,3,3,3,3,3,3,3,3]\n",
               4, "sizes.levels");
  expect_error("name: f\nmodel: fsq\nsizes:\n  levels: []\n", 4,
               "sizes.levels");
}

Test(scenario, size_not_meaningful_for_the_model) {
  expect_error(BASE "sizes:\n  dim: 8\n  levels: [8, 5]\n", 10, "sizes.levels");
  cr_expect(strstr(vqc_last_error(), "not used by model vq") != NULL, "%s",
            vqc_last_error());
  expect_error(BASE "sizes: {num_quantizers: 2}\n", 8, "sizes.num_quantizers");
  expect_error(BASE "sizes: {hidden: 2}\n", 8, "sizes.hidden");
  expect_error("name: c\nmodel: clip\nsizes:\n  codebook_size: 8\n", 4,
               "sizes.codebook_size");
  expect_error("name: c\nmodel: fsq\nsizes:\n  kmeans_init: true\n", 4,
               "sizes.kmeans_init");
}

Test(scenario, batch_list_must_match_ranks) {
  expect_error(BASE_NAME BASE_MODEL BASE_RANKS BASE_STEPS "batch: [1, 2, 3]\n",
               5, "batch");
  cr_expect(strstr(vqc_last_error(), "3 entries for 2 ranks") != NULL, "%s",
            vqc_last_error());
  expect_error(BASE_NAME BASE_MODEL BASE_RANKS BASE_STEPS "batch: [0, 0]\n", 5,
               "batch");
  expect_error(BASE_NAME BASE_MODEL BASE_RANKS BASE_STEPS "batch: 0\n", 5,
               "batch");
  expect_error(BASE_NAME BASE_MODEL BASE_RANKS BASE_STEPS "batch: [4, -1]\n", 5,
               "batch[1]");
}

Test(scenario, missing_required_field) {
  const char *lines[] = {BASE_NAME, BASE_MODEL, BASE_RANKS, BASE_STEPS,
                         BASE_BATCH, BASE_SEED, BASE_EXPECT};
  const char *fields[] = {"name", "model", "ranks", "steps",
                          "batch", "seed", "expect"};
  for (int skip = 0; skip < 7; skip++) {
    char text[256] = "";
    for (int i = 0; i < 7; i++)
      if (i != skip) strcat(text, lines[i]);
    expect_error(text, 1, fields[skip]);
    cr_expect(strstr(vqc_last_error(), "missing") != NULL, "%s",
              vqc_last_error());
  }
  expect_error(BASE_NAME BASE_MODEL BASE_RANKS BASE_STEPS BASE_BATCH BASE_SEED
               "expect:\n  - step: 1\n", 8, "expect[0].kind");
}

Test(scenario, bad_names_faults_and_kinds) {
  expect_error("name: Base\n" BASE_MODEL, 1, "name");
  cr_expect(strstr(vqc_last_error(), "[a-z0-9_-]+") != NULL, "%s",
            vqc_last_error());
  expect_error("name: a b\n" BASE_MODEL, 1, "name");
  expect_error("name: ''\n" BASE_MODEL, 1, "name");
  expect_error(BASE_NAME "model: vqvae\n", 2, "model");
  expect_error(BASE "fault: lost_in_place\n", 8, "fault");
  cr_expect(strstr(vqc_last_error(), "lost_inplace_contiguous") != NULL,
            "lists the faults: %s", vqc_last_error());
  expect_error(BASE_NAME BASE_MODEL BASE_RANKS BASE_STEPS BASE_BATCH BASE_SEED
               "expect:\n  - kind: drift\n", 8, "expect[0].kind");
  expect_error(BASE "description: \"bell\\a\"\n", 8, "description");
}

Test(scenario, bad_expectations) {
  const char *head =
      BASE_NAME BASE_MODEL BASE_RANKS BASE_STEPS BASE_BATCH BASE_SEED;
  char text[512];
  snprintf(text, sizeof text, "%sexpect: dirty\n", head);
  expect_error(text, 7, "expect");
  snprintf(text, sizeof text, "%sexpect: []\n", head);
  expect_error(text, 7, "expect");
  /* steps: 5 runs steps 0..4 */
  snprintf(text, sizeof text,
           "%sexpect:\n  - kind: divergence\n  - kind: deadlock\n    step: 5\n",
           head);
  expect_error(text, 10, "expect[1].step");
  cr_expect(strstr(vqc_last_error(), "0..4") != NULL, "%s", vqc_last_error());
  snprintf(text, sizeof text, "%sexpect:\n  - kind: divergence\n    tensor: ''\n",
           head);
  expect_error(text, 9, "expect[0].tensor");
  snprintf(text, sizeof text, "%sexpect:\n  - divergence\n", head);
  expect_error(text, 8, "expect[0]");
}

Test(scenario, empty_other_documents_and_missing_files) {
  expect_error("", 1, "scenario");
  expect_error("# only a comment\n", 1, "scenario");
  expect_error("just text\n", 1, "scenario");
  expect_error(BASE "---\nname: second\n", 9, "scenario");
  expect_error(BASE "...\n--- [\n", 10, "YAML");

  vqc_scenario s;
  char path[512];
  tmp_path("absent.yaml", path, sizeof path);
  cr_expect_eq(vqc_scenario_load(path, &s), VQC_EINVAL);
  cr_expect(strstr(vqc_last_error(), "absent.yaml") != NULL);
  cr_expect_eq(vqc_scenario_load(tmp_dir, &s), VQC_EINVAL, "a directory");
  cr_expect_eq(vqc_scenario_load(NULL, &s), VQC_EINVAL);
}

Test(scenario, aliases_and_odd_bytes_never_crash) {
  vqc_scenario s;
  /* A cyclic alias: the walk follows the schema, so it meets a mapping where
   * a number belongs and stops. */
  expect_error(BASE "sizes: &a {dim: *a}\n", 8, "sizes.dim");
  /* A NUL inside a string. */
  expect_error(BASE "description: \"a\\0b\"\n", 8, "description");
  /* Aliases to a valid value are fine. */
  cr_expect_eq(load_text("name: &n x\nmodel: vq\nranks: &r 2\nsteps: *r\n"
                         "batch: *r\nseed: *r\nexpect: clean\n", &s),
               VQC_OK, "%s", vqc_last_error());
  cr_expect_eq(s.steps, 2);
  /* Invalid UTF-8 is libyaml's reader error. */
  expect_error(BASE "description: \xff\xfe\n", 8, "YAML");
}

/* Every prefix of a valid file, and hostile bytes at every position: the
 * loader must answer OK or EPARSE, never crash or return anything else. */
Test(scenario, truncations_and_byte_changes_never_crash) {
  char path[512];
  data_path("rvq_every_field.yaml", path, sizeof path);
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f);
  char text[4096];
  const size_t len = fread(text, 1, sizeof text, f);
  fclose(f);
  cr_assert(len > 100 && len < sizeof text);
  vqc_scenario *s = malloc(sizeof *s);
  cr_assert_not_null(s);
  char out[512];
  tmp_path("case.yaml", out, sizeof out);
  int ok = 0, parse = 0;
  for (size_t n = 0; n <= len; n++) {
    write_bytes("case.yaml", text, n);
    const vqc_status st = vqc_scenario_load(out, s);
    cr_assert(st == VQC_OK || st == VQC_EPARSE, "prefix %zu: %s", n,
              vqc_status_name(st));
    if (st == VQC_OK) ok++; else parse++;
  }
  cr_expect(ok > 0 && parse > 0, "both outcomes seen (%d ok, %d errors)", ok,
            parse);
  /* NUL, structure, alias, line break, and a UTF-8 lead byte. */
  const char hostile[] = {'\0', ':', '[', '&', '*', '\n', (char)0xc3};
  char copy[4096];
  for (size_t i = 0; i < len; i++) {
    for (size_t h = 0; h < sizeof hostile; h++) {
      memcpy(copy, text, len);
      copy[i] = hostile[h];
      write_bytes("case.yaml", copy, len);
      const vqc_status st = vqc_scenario_load(out, s);
      cr_assert(st == VQC_OK || st == VQC_EPARSE, "byte %zu = 0x%02x: %s", i,
                (unsigned char)hostile[h], vqc_status_name(st));
    }
  }
  free(s);
}

/* ---- overrides */

Test(scenario, overrides_keep_apply_and_revalidate) {
  vqc_scenario s;
  cr_assert_eq(load_text(BASE, &s), VQC_OK, "%s", vqc_last_error());
  cr_expect_eq(vqc_scenario_override(&s, -1, -1, -1, -1), VQC_OK);
  cr_expect(s.ranks == 2 && s.steps == 5 && s.seed == 1 && s.timeout_s == 30.0);
  /* A single batch follows any rank count. */
  cr_assert_eq(vqc_scenario_override(&s, 5, 9, 77, 2.5), VQC_OK, "%s",
               vqc_last_error());
  cr_expect(s.ranks == 5 && s.steps == 9 && s.seed == 77 && s.timeout_s == 2.5);
  cr_expect_eq(vqc_scenario_batch(&s, 4), 8);
  cr_expect_eq(vqc_scenario_override(&s, 0, -1, -1, -1), VQC_EINVAL);
  cr_expect_eq(vqc_scenario_override(&s, 1025, -1, -1, -1), VQC_EINVAL);
  cr_expect_eq(vqc_scenario_override(&s, -1, 0, -1, -1), VQC_EINVAL);
  cr_expect_eq(vqc_scenario_override(&s, -1, -1, -1, 0.0), VQC_EINVAL);
  cr_expect(s.ranks == 5 && s.steps == 9, "a refused override changes nothing");

  /* A per-rank batch list only fits its own rank count; the message names
   * both numbers. */
  char path[512];
  data_path("rvq_every_field.yaml", path, sizeof path);
  cr_assert_eq(vqc_scenario_load(path, &s), VQC_OK);
  cr_expect_eq(vqc_scenario_override(&s, 3, -1, -1, -1), VQC_OK);
  cr_expect_eq(vqc_scenario_override(&s, 4, -1, -1, -1), VQC_EINVAL);
  cr_expect(strstr(vqc_last_error(), "list of 3") != NULL &&
                strstr(vqc_last_error(), "--ranks is 4") != NULL,
            "%s", vqc_last_error());
  cr_expect_eq(s.ranks, 3);
  /* expect[0] is at step 3: --steps 3 never reaches it, --steps 4 does. */
  cr_expect_eq(vqc_scenario_override(&s, -1, 3, -1, -1), VQC_EINVAL);
  cr_expect(strstr(vqc_last_error(), ":27: expect[0].step") != NULL, "%s",
            vqc_last_error());
  cr_expect_eq(vqc_scenario_override(&s, -1, 4, -1, -1), VQC_OK);
  cr_expect_eq(s.steps, 4);
}

/* ---- expectations */

static void add_finding(vqc_findings *f, vqc_finding_kind kind, int64_t step,
                        const char *tensor, const char *site) {
  vqc_finding x;
  vqc_finding_init(&x, kind, step, "test finding");
  snprintf(x.tensor, sizeof x.tensor, "%s", tensor);
  snprintf(x.site, sizeof x.site, "%s", site);
  cr_assert_eq(vqc_findings_add(f, &x), VQC_OK);
}

Test(scenario, clean_means_no_findings_at_all) {
  vqc_scenario s;
  cr_assert_eq(load_text(BASE, &s), VQC_OK);
  vqc_findings f;
  vqc_findings_init(&f);
  char why[512] = "untouched";
  cr_expect(vqc_scenario_expectations_met(&s, &f, why, sizeof why));
  cr_expect_str_eq(why, "");
  cr_expect(vqc_scenario_expectations_met(&s, NULL, NULL, 0));
  add_finding(&f, VQC_FINDING_NONFINITE, 2, "codebook", "");
  cr_expect_not(vqc_scenario_expectations_met(&s, &f, why, sizeof why));
  cr_expect(strstr(why, "expected clean") != NULL &&
                strstr(why, "nonfinite at step 2") != NULL,
            "%s", why);
  vqc_findings_free(&f);
}

Test(scenario, expectations_match_kind_step_tensor_and_site) {
  char path[512];
  data_path("rvq_every_field.yaml", path, sizeof path);
  vqc_scenario s;
  cr_assert_eq(vqc_scenario_load(path, &s), VQC_OK);
  /* expect[0]: shape_mismatch @3 tensor~layers.1.embed site~vq_ema.c;
   * expect[1]: divergence, anywhere. */
  const char *site = "lib/src/quant/vq_ema.c:57 vqc_vq_ema_update";
  struct {
    vqc_finding_kind kind;
    int64_t step;
    const char *tensor, *site;
    bool met;
  } cases[] = {
      {VQC_FINDING_SHAPE_MISMATCH, 3, "rvq.layers.1.embed", site, true},
      {VQC_FINDING_SHAPE_MISMATCH, 4, "rvq.layers.1.embed", site, false},
      {VQC_FINDING_SHAPE_MISMATCH, 3, "rvq.layers.2.embed", site, false},
      {VQC_FINDING_SHAPE_MISMATCH, 3, "rvq.layers.1.embed",
       "lib/src/quant/rvq.c:80 f", false},
      {VQC_FINDING_DIVERGENCE, 3, "rvq.layers.1.embed", site, false},
      {VQC_FINDING_SHAPE_MISMATCH, 3, "", site, false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    vqc_findings f;
    vqc_findings_init(&f);
    add_finding(&f, cases[i].kind, cases[i].step, cases[i].tensor,
                cases[i].site);
    add_finding(&f, VQC_FINDING_DIVERGENCE, 6, "anything", "");
    char why[512];
    const bool met = vqc_scenario_expectations_met(&s, &f, why, sizeof why);
    cr_expect_eq(met, cases[i].met, "case %zu: %s", i, why);
    if (!met)
      cr_expect(strstr(why, "shape_mismatch@3") != NULL &&
                    strstr(why, "line 27") != NULL,
                "case %zu names the unmet expectation: %s", i, why);
    vqc_findings_free(&f);
  }
  /* The matching shape_mismatch alone leaves expect[1] unmet. */
  vqc_findings f;
  vqc_findings_init(&f);
  add_finding(&f, VQC_FINDING_SHAPE_MISMATCH, 3, "layers.1.embed", site);
  char why[512];
  cr_expect_not(vqc_scenario_expectations_met(&s, &f, why, sizeof why));
  cr_expect(strstr(why, "expected divergence (line 31)") != NULL, "%s", why);
  vqc_findings_free(&f);
  /* No findings: unmet. */
  vqc_findings_init(&f);
  cr_expect_not(vqc_scenario_expectations_met(&s, &f, why, sizeof why));
  vqc_findings_free(&f);
}

/* ---- vqcheck list */

/* Runs vqc_cmd_list with stdout sent to a file; returns the exit code and
 * the output (malloc'd) in *out. */
static int run_list(int argc, char **argv, char **out) {
  char path[512];
  tmp_path("stdout.txt", path, sizeof path);
  fflush(stdout);
  const int saved = dup(fileno(stdout));
  cr_assert(saved >= 0);
  cr_assert_not_null(freopen(path, "w", stdout));
  const int code = vqc_cmd_list(argc, argv);
  fflush(stdout);
  cr_assert(dup2(saved, fileno(stdout)) >= 0);
  close(saved);
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f);
  *out = calloc(1, 1 << 16);
  cr_assert_not_null(*out);
  const size_t got = fread(*out, 1, (1 << 16) - 1, f);
  (*out)[got] = '\0';
  fclose(f);
  return code;
}

Test(scenario, list_prints_one_line_per_scenario) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s/tests/data/scenarios", vqc_test_source_dir());
  char *argv[] = {"list", dir, NULL};
  char *out;
  cr_assert_eq(run_list(2, argv, &out), 0, "%s", out);
  /* Sorted by file name: clip_minimal, fsq_levels, rvq_every_field. */
  const char *clip = strstr(out, "clip-minimal");
  const char *fsq = strstr(out, "fsq_levels");
  const char *rvq = strstr(out, "rvq_every-field_2");
  cr_assert(clip && fsq && rvq && clip < fsq && fsq < rvq, "%s", out);
  cr_expect(strstr(out, "unsynced_dropout_seed") != NULL, "%s", out);
  cr_expect(strstr(out, "shape_mismatch@3") != NULL, "%s", out);
  int lines = 0;
  for (const char *p = out; *p; p++) lines += *p == '\n';
  cr_expect_eq(lines, 4, "a header and three scenarios:\n%s", out);
  free(out);
}

Test(scenario, list_reports_a_broken_file_and_exits_2) {
  write_bytes("a_good.yaml", BASE, strlen(BASE));
  const char *bad = BASE_NAME BASE_MODEL "ranks: 1099\n";
  write_bytes("b_bad.yml", bad, strlen(bad));
  write_bytes("notes.txt", "not a scenario", 14); /* ignored */
  char *argv[] = {"list", tmp_dir, NULL};
  char *out;
  cr_assert_eq(run_list(2, argv, &out), 2, "%s", out);
  cr_expect(strstr(out, "base ") != NULL, "%s", out);
  char want[512];
  snprintf(want, sizeof want, "error: %s/b_bad.yml:3: ranks: 1099 is out of range",
           tmp_dir);
  cr_expect(strstr(out, want) != NULL, "'%s' lacks '%s'", out, want);
  cr_expect(strstr(out, "notes.txt") == NULL, "%s", out);
  free(out);

  char *jargv[] = {"list", "--json", tmp_dir, NULL};
  cr_assert_eq(run_list(3, jargv, &out), 2);
  json_error_t err;
  json_t *j = json_loads(out, 0, &err);
  cr_assert_not_null(j, "not JSON (%s): %s", err.text, out);
  cr_assert_eq(json_array_size(j), 2);
  json_t *good = json_array_get(j, 0), *broken = json_array_get(j, 1);
  cr_expect_str_eq(json_string_value(json_object_get(good, "name")), "base");
  cr_expect_str_eq(json_string_value(json_object_get(good, "seed")), "1");
  cr_expect_eq(json_array_size(json_object_get(good, "batch")), 2);
  cr_expect_eq(json_integer_value(
                   json_object_get(json_object_get(good, "sizes"), "dim")),
               16);
  cr_expect(strstr(json_string_value(json_object_get(broken, "error")),
                   "b_bad.yml:3: ranks:") != NULL);
  json_decref(j);
  free(out);
}

Test(scenario, list_usage_errors) {
  char *out;
  char *help[] = {"list", "--help", NULL};
  cr_expect_eq(run_list(2, help, &out), 0);
  cr_expect(strstr(out, "usage: vqcheck list") != NULL, "%s", out);
  free(out);
  char *bad_opt[] = {"list", "--yaml", NULL};
  cr_expect_eq(run_list(2, bad_opt, &out), 2);
  free(out);
  char *two[] = {"list", "a", "b", NULL};
  cr_expect_eq(run_list(3, two, &out), 2);
  free(out);
  char missing[512];
  tmp_path("no_such_dir", missing, sizeof missing);
  char *absent[] = {"list", missing, NULL};
  cr_expect_eq(run_list(2, absent, &out), 2);
  free(out);
  /* $VQC_SCENARIO_DIR is the default directory. */
  write_bytes("only.yaml", BASE, strlen(BASE));
  setenv("VQC_SCENARIO_DIR", tmp_dir, 1);
  char *dflt[] = {"list", NULL};
  cr_expect_eq(run_list(1, dflt, &out), 0);
  cr_expect(strstr(out, "base ") != NULL, "%s", out);
  free(out);
}
