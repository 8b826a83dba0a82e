/* test_cli.c: the vqcheck command line as a user meets it. Runs the built
 * binary (VQC_CLI_PATH) as a child process with posix_spawn, stdout and
 * stderr captured separately, and checks the conventions every subcommand
 * follows (DESIGN.md, harness/cli/cli.h): --help on stdout with exit 0; misuse
 * on stderr with a hint and exit 2; --json as exactly one JSON document;
 * no progress when stdout is not a terminal (here it is a file); error
 * text without the library's source location unless VQC_DEBUG=1 or
 * --verbose. And the outputs: `run` writes run.json and the three reports
 * (and no temporary files); `suite` writes its own junit.xml with a
 * testcase per scenario.
 *
 * The scenarios are the shipped skip_weight_sync pair (2 ranks, 3 steps,
 * a fraction of a second each): the fault is caught at step 1 in
 * encoder.0.weight, the clean twin has no finding. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "spawn_capture.h"
#include "test_paths.h"
#include "vqc/vqc.h"

#ifdef VQC_HAVE_LIBXML2
#include <libxml/parser.h>
#include <libxml/tree.h>
#endif

#ifndef VQC_CLI_PATH
#error "VQC_CLI_PATH must name the built vqcheck (tests/CMakeLists.txt)"
#endif

static const char *const subcommands[] = {"list",  "run",         "suite",
                                          "report", "conformance", "smoke",
                                          "compare", "analyze"};
#define NSUBCOMMANDS (sizeof subcommands / sizeof subcommands[0])

/* ---- running the binary (tests/common/spawn_capture.h) */

typedef vqc_spawn_result cli_out;

/* Runs `vqcheck args...` (a NULL-terminated list) with `env_extra` (e.g.
 * "VQC_DEBUG=1", or NULL) added to the environment; VQC_DEBUG from the
 * calling environment is dropped so the default text is what is tested.
 * stdin is /dev/null; stdout and stderr are captured separately. */
static cli_out run_cli(const char *env_extra, ...) {
  cli_out r;
  va_list ap;
  va_start(ap, env_extra);
  const char *first = va_arg(ap, const char *);
  int rc = vqc_spawn_vcapture(&r, VQC_CLI_PATH, "VQC_DEBUG", env_extra, first,
                              ap);
  va_end(ap);
  cr_assert_eq(rc, 0, "cannot run %s: %s", VQC_CLI_PATH, strerror(rc));
  return r;
}

/* ---- files */

static void make_tmpdir(char *buf, size_t n) {
  snprintf(buf, n, "/tmp/vqc-cli-XXXXXX");
  cr_assert_not_null(mkdtemp(buf));
}

static void rm_rf(const char *dir) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

static bool exists(const char *dir, const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  struct stat st;
  return stat(path, &st) == 0 && st.st_size > 0;
}

/* The shipped scenario <name>.yaml. */
static void scenario_path(const char *name, char *buf, size_t n) {
  snprintf(buf, n, "%s/scenarios/%s.yaml", vqc_test_source_dir(), name);
}

/* Copies the shipped scenario <name>.yaml into dir; when `from` is not
 * NULL, everything from its first occurrence to the end is replaced by
 * `to`. */
static void copy_scenario(const char *name, const char *dir,
                          const char *from, const char *to) {
  char src[1024], dst[1024];
  scenario_path(name, src, sizeof src);
  snprintf(dst, sizeof dst, "%s/%s.yaml", dir, name);
  char *text = vqc_read_file(src);
  cr_assert_not_null(text, "cannot read %s", src);
  FILE *f = fopen(dst, "w");
  cr_assert_not_null(f);
  const char *at = from ? strstr(text, from) : NULL;
  if (from) cr_assert_not_null(at, "'%s' not in %s", from, src);
  if (at) {
    fwrite(text, 1, (size_t)(at - text), f);
    fputs(to, f);
  } else {
    fputs(text, f);
  }
  fclose(f);
  free(text);
}

/* The names in dir that look like a temporary file of an atomic write
 * ("<name>.tmp.<pid>"), as one string ("" when none). */
static void temp_files(const char *dir, char *buf, size_t n) {
  buf[0] = '\0';
  DIR *d = opendir(dir);
  cr_assert_not_null(d);
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (strstr(e->d_name, ".tmp")) {
      strncat(buf, e->d_name, n - strlen(buf) - 2);
      strncat(buf, " ", n - strlen(buf) - 1);
    }
  closedir(d);
}

/* ---- junit.xml */

typedef struct junit_counts {
  int testcases, failures, errors;
  char first_failure[1024]; /* the first <failure>'s message */
} junit_counts;

#ifdef VQC_HAVE_LIBXML2
static void count_nodes(xmlNode *node, junit_counts *c) {
  for (xmlNode *x = node; x; x = x->next) {
    if (x->type != XML_ELEMENT_NODE) continue;
    const char *name = (const char *)x->name;
    if (strcmp(name, "testcase") == 0) c->testcases++;
    if (strcmp(name, "error") == 0) c->errors++;
    if (strcmp(name, "failure") == 0 && c->failures++ == 0) {
      xmlChar *m = xmlGetProp(x, (const xmlChar *)"message");
      if (m) snprintf(c->first_failure, sizeof c->first_failure, "%s", m);
      xmlFree(m);
    }
    count_nodes(x->children, c);
  }
}
#endif

/* Parses dir/junit.xml (libxml2 where the build has it; else by counting
 * the elements' opening tags, which the writer puts one per line). */
static junit_counts read_junit(const char *dir) {
  char path[1024];
  snprintf(path, sizeof path, "%s/junit.xml", dir);
  junit_counts c = {0};
#ifdef VQC_HAVE_LIBXML2
  xmlDoc *doc = xmlReadFile(path, NULL, XML_PARSE_NONET | XML_PARSE_NOERROR);
  cr_assert_not_null(doc, "%s is not well-formed XML", path);
  count_nodes(xmlDocGetRootElement(doc), &c);
  xmlFreeDoc(doc);
#else
  char *text = vqc_read_file(path);
  cr_assert_not_null(text, "cannot read %s", path);
  for (const char *p = text; (p = strstr(p, "<testcase ")); p++) c.testcases++;
  for (const char *p = text; (p = strstr(p, "<error ")); p++) c.errors++;
  for (const char *p = text; (p = strstr(p, "<failure ")); p++)
    if (c.failures++ == 0) {
      const char *m = strstr(p, "message=\"");
      if (m) {
        m += 9;
        const char *end = strchr(m, '"');
        snprintf(c.first_failure, sizeof c.first_failure, "%.*s",
                 end ? (int)(end - m) : 0, m);
      }
    }
  free(text);
#endif
  return c;
}

/* ---- --help, misuse, --version */

Test(cli, every_subcommand_has_help_on_stdout) {
  for (size_t i = 0; i < NSUBCOMMANDS; i++) {
    cli_out c = run_cli(NULL, subcommands[i], "--help", NULL);
    char want[64];
    snprintf(want, sizeof want, "usage: vqcheck %s", subcommands[i]);
    cr_expect_eq(c.code, 0, "%s --help: exit %d", subcommands[i], c.code);
    cr_expect(strncmp(c.out, want, strlen(want)) == 0,
              "%s --help: stdout starts with '%.60s'", subcommands[i], c.out);
    cr_expect(strstr(c.out, "exit") != NULL,
              "%s --help does not document its exit codes", subcommands[i]);
    cr_expect_str_empty(c.err, "%s --help wrote to stderr: %s",
                        subcommands[i], c.err);
    vqc_spawn_result_free(&c);
  }
  /* The top level lists every subcommand. */
  cli_out c = run_cli(NULL, "--help", NULL);
  cr_expect_eq(c.code, 0);
  for (size_t i = 0; i < NSUBCOMMANDS; i++) {
    char want[64];
    snprintf(want, sizeof want, "  %s ", subcommands[i]);
    cr_expect(strstr(c.out, want) != NULL, "'vqcheck --help' lacks %s",
              subcommands[i]);
  }
  vqc_spawn_result_free(&c);
}

/* c is misuse of `cmd`: exit 2, nothing on stdout, the problem and a hint
 * on stderr. */
static void expect_misuse(cli_out *c, const char *cmd, const char *mention) {
  char hint[64];
  snprintf(hint, sizeof hint, "hint: 'vqcheck %s --help'", cmd);
  cr_expect_eq(c->code, 2, "%s: exit %d, stderr: %s", cmd, c->code, c->err);
  cr_expect_str_empty(c->out, "%s: misuse wrote to stdout: %s", cmd, c->out);
  cr_expect(strstr(c->err, hint) != NULL, "%s: no hint in: %s", cmd, c->err);
  cr_expect(strstr(c->err, mention) != NULL, "%s: '%s' not in: %s", cmd,
            mention, c->err);
  vqc_spawn_result_free(c);
}

Test(cli, an_unknown_flag_exits_2_with_a_hint) {
  for (size_t i = 0; i < NSUBCOMMANDS; i++) {
    cli_out c = run_cli(NULL, subcommands[i], "--frobnicate", NULL);
    expect_misuse(&c, subcommands[i], "--frobnicate");
  }
  /* Last on the line, after a positional: still an unknown flag, not a
   * "missing value". */
  cli_out c = run_cli(NULL, "run", "x.yaml", "--frobnicate", NULL);
  expect_misuse(&c, "run", "unknown option '--frobnicate'");
  c = run_cli(NULL, "frobnicate", NULL);
  cr_expect_eq(c.code, 2);
  cr_expect(strstr(c.err, "hint: 'vqcheck --help'") != NULL, "%s", c.err);
  vqc_spawn_result_free(&c);
  c = run_cli(NULL, NULL);
  cr_expect_eq(c.code, 2);
  cr_expect(strstr(c.err, "usage: vqcheck") != NULL, "%s", c.err);
  cr_expect_str_empty(c.out);
  vqc_spawn_result_free(&c);
}

Test(cli, missing_bad_and_extra_values_exit_2_with_a_hint) {
  cli_out c = run_cli(NULL, "run", "x.yaml", "--ranks", NULL);
  expect_misuse(&c, "run", "--ranks needs a value");
  c = run_cli(NULL, "run", "x.yaml", "--ranks", "zero", NULL);
  expect_misuse(&c, "run", "bad value for --ranks: 'zero'");
  c = run_cli(NULL, "run", "x.yaml", "--backend", "nccl", NULL);
  expect_misuse(&c, "run", "--backend");
  c = run_cli(NULL, "run", "a.yaml", "b.yaml", NULL);
  expect_misuse(&c, "run", "b.yaml");
  c = run_cli(NULL, "run", NULL);
  expect_misuse(&c, "run", "no scenario given");
  c = run_cli(NULL, "suite", "--steps", "-3", NULL);
  expect_misuse(&c, "suite", "--steps");
  c = run_cli(NULL, "suite", "--launcher", "mpirun", NULL);
  expect_misuse(&c, "suite", "--launcher");
  c = run_cli(NULL, "list", "a", "b", NULL);
  expect_misuse(&c, "list", "'b'");
  c = run_cli(NULL, "report", NULL);
  expect_misuse(&c, "report", "no run directory");
  c = run_cli(NULL, "report", "/tmp", "--format", "pdf", NULL);
  expect_misuse(&c, "report", "pdf");
  c = run_cli(NULL, "conformance", NULL);
  expect_misuse(&c, "conformance", "DIR");
  c = run_cli(NULL, "conformance", "/tmp", "--kind", NULL);
  expect_misuse(&c, "conformance", "--kind");
  c = run_cli(NULL, "smoke", "--fault", "skip_everything", NULL);
  expect_misuse(&c, "smoke", "skip_everything");
  c = run_cli(NULL, "smoke", "extra", NULL);
  expect_misuse(&c, "smoke", "'extra'");
  c = run_cli(NULL, "smoke", "--seed", "-1", NULL);
  expect_misuse(&c, "smoke", "--seed");
}

Test(cli, version_names_the_build_configuration) {
  cli_out c = run_cli(NULL, "--version", NULL);
  cr_expect_eq(c.code, 0);
  cr_expect(strncmp(c.out, "vqcheck " VQC_VERSION_STRING, 8) == 0, "%s",
            c.out);
  /* Exactly what this build has, as the tests were compiled with it. */
  cr_expect(strstr(c.out, VQC_WITH_MPI ? "mpi on" : "mpi off") != NULL, "%s",
            c.out);
  cr_expect(strstr(c.out, VQC_WITH_CUDA ? "cuda: on" : "cuda: off") != NULL,
            "%s", c.out);
  cr_expect(strstr(c.out, VQC_WITH_NCCL ? "nccl on" : "nccl off") != NULL,
            "%s", c.out);
  cr_expect_str_empty(c.err);
  vqc_spawn_result_free(&c);
}

/* ---- error text */

Test(cli, errors_read_without_the_library_source_location) {
  cli_out c = run_cli(NULL, "run", "/nonexistent/vqc/missing.yaml", NULL);
  cr_expect_eq(c.code, 2);
  cr_expect(strstr(c.err, "vqcheck run: /nonexistent/vqc/missing.yaml: ") !=
                NULL, "%s", c.err);
  cr_expect(strstr(c.err, "VQC_E") == NULL, "%s", c.err);
  cr_expect(strstr(c.err, ".c:") == NULL, "%s", c.err);
  vqc_spawn_result_free(&c);
  /* The full text for a developer, by environment or flag. */
  c = run_cli("VQC_DEBUG=1", "run", "/nonexistent/vqc/missing.yaml", NULL);
  cr_expect_eq(c.code, 2);
  cr_expect(strstr(c.err, ".c:") != NULL && strstr(c.err, ": VQC_E") != NULL,
            "%s", c.err);
  vqc_spawn_result_free(&c);
  c = run_cli(NULL, "run", "/nonexistent/vqc/missing.yaml", "--verbose", NULL);
  cr_expect(strstr(c.err, ": VQC_E") != NULL, "%s", c.err);
  vqc_spawn_result_free(&c);
}

Test(cli, strip_internal_removes_every_source_location) {
  char out[256];
  vqc_cli_strip_internal("scenario.c:412: VQC_EPARSE: a.yaml:3: ranks: bad",
                         out, sizeof out);
  cr_expect_str_eq(out, "a.yaml:3: ranks: bad");
  /* Nested: a message that quotes another. */
  vqc_cli_strip_internal("no readable run.json (exit 3): runner.c:75: "
                         "VQC_EPARSE: run.json: findings: missing",
                         out, sizeof out);
  cr_expect_str_eq(out, "no readable run.json (exit 3): run.json: findings: "
                        "missing");
  vqc_cli_strip_internal("comm_threads.cu:9: VQC_ECUDA: kernel_2.h:1: "
                         "VQC_EINTERNAL: x",
                         out, sizeof out);
  cr_expect_str_eq(out, "x");
  /* Not a source location: the user's own files, paths, other words. */
  const char *keep[] = {"run.yaml:3: VQC_EPARSE: the user's file",
                        "src/runner.c:5: VQC_EIO: part of a path",
                        "runner.c:5: VQC_EIO:no space",
                        "runner.c:x: VQC_EIO: no line",
                        "runner.c:5: EIO: no prefix",
                        "xrunner.c:5:VQC_EIO: ",
                        ""};
  for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
    vqc_cli_strip_internal(keep[i], out, sizeof out);
    cr_expect_str_eq(out, keep[i]);
  }
  /* Always terminated within n. */
  char small[8];
  vqc_cli_strip_internal("a.c:1: VQC_EIO: 0123456789", small, sizeof small);
  cr_expect_str_eq(small, "0123456");
}

/* ---- run */

Test(cli, run_of_a_clean_scenario_writes_run_json_and_every_report) {
  char dir[64], out[128], sc[1024];
  make_tmpdir(dir, sizeof dir);
  snprintf(out, sizeof out, "%s/run", dir);
  scenario_path("skip_weight_sync-clean", sc, sizeof sc);
  cli_out c = run_cli(NULL, "run", sc, "--out", out, NULL);
  cr_expect_eq(c.code, 0, "stdout: %s\nstderr: %s", c.out, c.err);
  cr_expect_str_empty(c.err);
  const char *files[] = {"run.json", "report.md", "report.html", "junit.xml"};
  for (int i = 0; i < 4; i++)
    cr_expect(exists(out, files[i]), "%s/%s missing or empty", out,
              files[i]);
  char tmp[1024];
  temp_files(out, tmp, sizeof tmp);
  cr_expect_str_empty(tmp, "temporary files left in %s", out);
  /* stdout is a file: the summary and where things are, no progress. */
  cr_expect(strstr(c.out, "step ") == NULL, "progress off a terminal: %s",
            c.out);
  char want[256];
  snprintf(want, sizeof want, "run directory: %s\n", out);
  cr_expect(strstr(c.out, want) != NULL, "%s", c.out);
  snprintf(want, sizeof want, "%s/report.html\n", out);
  cr_expect(strstr(c.out, want) != NULL, "%s", c.out);
  cr_expect(strstr(c.out, "findings: 0\n") != NULL, "%s", c.out);
  junit_counts j = read_junit(out);
  cr_expect_gt(j.testcases, 1, "one testcase per check plus training");
  cr_expect_eq(j.failures + j.errors, 0);
  vqc_spawn_result_free(&c);

  /* --quiet: nothing on stdout, the same files. */
  rm_rf(out);
  c = run_cli(NULL, "run", sc, "--out", out, "--quiet", NULL);
  cr_expect_eq(c.code, 0);
  cr_expect_str_empty(c.out);
  cr_expect(exists(out, "report.html") && exists(out, "junit.xml"));
  vqc_spawn_result_free(&c);
  rm_rf(dir);
}

Test(cli, run_of_a_fault_scenario_exits_1_and_junit_carries_the_finding) {
  char dir[64], out[128], sc[1024];
  make_tmpdir(dir, sizeof dir);
  snprintf(out, sizeof out, "%s/run", dir);
  scenario_path("skip_weight_sync", sc, sizeof sc);
  cli_out c = run_cli(NULL, "run", sc, "--out", out, NULL);
  cr_expect_eq(c.code, 1, "stdout: %s\nstderr: %s", c.out, c.err);
  cr_expect(strstr(c.out, "divergence at step 1 in encoder.0.weight") != NULL,
            "%s", c.out);
  junit_counts j = read_junit(out);
  cr_expect_geq(j.failures, 1);
  cr_expect_eq(j.errors, 0);
  /* The checks run in order divergence first: its failure names the
   * tensor. */
  cr_expect(strstr(j.first_failure, "encoder.0.weight") != NULL, "%s",
            j.first_failure);
  char tmp[1024];
  temp_files(out, tmp, sizeof tmp);
  cr_expect_str_empty(tmp);
  vqc_spawn_result_free(&c);
  rm_rf(dir);
}

Test(cli, run_json_is_one_document_on_stdout) {
  char dir[64], out[128], sc[1024];
  make_tmpdir(dir, sizeof dir);
  snprintf(out, sizeof out, "%s/run", dir);
  scenario_path("skip_weight_sync", sc, sizeof sc);
  cli_out c = run_cli(NULL, "run", sc, "--out", out, "--json", NULL);
  cr_expect_eq(c.code, 1, "stderr: %s", c.err);
  cr_expect_str_empty(c.err);
  json_error_t e;
  json_t *doc = json_loads(c.out, 0, &e); /* rejects anything after it */
  cr_assert_not_null(doc, "not one JSON document (%s): %s", e.text, c.out);
  cr_expect_eq(json_integer_value(json_object_get(doc, "schema_version")), 1);
  cr_expect_eq(json_integer_value(json_object_get(doc, "exit_code")), 1);
  cr_expect_str_eq(json_string_value(json_object_get(doc, "run_dir")), out);
  const json_t *f0 = json_array_get(json_object_get(doc, "findings"), 0);
  cr_expect_str_eq(json_string_value(json_object_get(f0, "kind")),
                   "divergence");
  cr_expect_eq(json_integer_value(json_object_get(f0, "step")), 1);
  const json_t *reports = json_object_get(doc, "reports");
  char want[256];
  snprintf(want, sizeof want, "%s/report.html", out);
  cr_expect_str_eq(json_string_value(json_object_get(reports, "html")), want);
  snprintf(want, sizeof want, "%s/junit.xml", out);
  cr_expect_str_eq(json_string_value(json_object_get(reports, "junit")), want);
  json_decref(doc);
  vqc_spawn_result_free(&c);
  rm_rf(dir);
}

/* ---- suite */

/* A scenario directory with the skip_weight_sync pair. */
static void make_pair(const char *dir) {
  copy_scenario("skip_weight_sync", dir, NULL, NULL);
  copy_scenario("skip_weight_sync-clean", dir, NULL, NULL);
}

Test(cli, suite_writes_a_junit_testcase_per_scenario) {
  char dir[64], sc[128], base[128];
  make_tmpdir(dir, sizeof dir);
  snprintf(sc, sizeof sc, "%s/scenarios", dir);
  snprintf(base, sizeof base, "%s/out/suite", dir); /* parents made too */
  cr_assert_eq(mkdir(sc, 0777), 0);
  make_pair(sc);
  cli_out c = run_cli(NULL, "suite", sc, "--out", base, NULL);
  cr_expect_eq(c.code, 0, "stdout: %s\nstderr: %s", c.out, c.err);
  cr_expect(strstr(c.out, "running") == NULL, "progress off a terminal: %s",
            c.out);
  const size_t len = strlen(c.out);
  const char *last = "2 passed, 0 failed\n";
  cr_expect(len >= strlen(last) &&
                strcmp(c.out + len - strlen(last), last) == 0,
            "last line: %s", c.out);
  junit_counts j = read_junit(base);
  cr_expect_eq(j.testcases, 2);
  cr_expect_eq(j.failures + j.errors, 0);
  cr_expect(exists(base, "report.md"));
  cr_expect(exists(base, "skip_weight_sync/report.html"));
  cr_expect(exists(base, "skip_weight_sync-clean/report.html"));
  cr_expect(exists(base, "skip_weight_sync/junit.xml"));
  char tmp[1024];
  temp_files(base, tmp, sizeof tmp);
  cr_expect_str_empty(tmp);
  vqc_spawn_result_free(&c);

  /* --json: one document with both cases. */
  c = run_cli(NULL, "suite", sc, "--out", base, "--json", NULL);
  cr_expect_eq(c.code, 0, "stderr: %s", c.err);
  json_error_t e;
  json_t *doc = json_loads(c.out, 0, &e);
  cr_assert_not_null(doc, "not one JSON document (%s): %s", e.text, c.out);
  cr_expect(json_is_true(json_object_get(doc, "ok")));
  cr_expect_eq(json_integer_value(json_object_get(doc, "passed")), 2);
  const json_t *cases = json_object_get(doc, "cases");
  cr_assert_eq(json_array_size(cases), 2);
  /* Sorted by file name ('-' sorts before '.'): the clean twin first. */
  const json_t *fault = json_array_get(cases, 1);
  cr_expect_str_eq(json_string_value(json_object_get(fault, "name")),
                   "skip_weight_sync");
  cr_expect_eq(json_integer_value(json_object_get(fault, "exit_code")), 1);
  cr_expect(strstr(json_string_value(json_object_get(fault, "found")),
                   "divergence@1") != NULL);
  char want[256];
  snprintf(want, sizeof want, "%s/junit.xml", base);
  cr_expect_str_eq(json_string_value(json_object_get(doc, "junit")), want);
  json_decref(doc);
  vqc_spawn_result_free(&c);
  rm_rf(dir);
}

Test(cli, suite_fails_an_expectation_that_does_not_hold) {
  char dir[64], base[128];
  make_tmpdir(dir, sizeof dir);
  snprintf(base, sizeof base, "%s/out", dir);
  /* The fault, but claimed clean (expect: is the file's last field): the
   * divergence makes it fail. */
  copy_scenario("skip_weight_sync", dir, "\nexpect:", "\nexpect: clean\n");
  cli_out c = run_cli(NULL, "suite", dir, "--out", base, "--quiet", NULL);
  cr_expect_eq(c.code, 1, "stdout: %s\nstderr: %s", c.out, c.err);
  cr_expect(strstr(c.out, "0 passed, 1 failed\n") != NULL, "%s", c.out);
  junit_counts j = read_junit(base);
  cr_expect_eq(j.testcases, 1);
  cr_expect_eq(j.failures, 1);
  cr_expect_eq(j.errors, 0);
  cr_expect(strstr(j.first_failure, "divergence") != NULL, "%s",
            j.first_failure);
  vqc_spawn_result_free(&c);
  rm_rf(dir);
}

Test(cli, suite_reports_a_file_that_does_not_load_as_an_error) {
  char dir[64], base[128], bad[128];
  make_tmpdir(dir, sizeof dir);
  snprintf(base, sizeof base, "%s/out", dir);
  make_pair(dir);
  snprintf(bad, sizeof bad, "%s/zz_broken.yaml", dir);
  FILE *f = fopen(bad, "w");
  cr_assert_not_null(f);
  fputs("name: [\n", f);
  fclose(f);
  cli_out c = run_cli(NULL, "suite", dir, "--out", base, NULL);
  cr_expect_eq(c.code, 2, "stdout: %s\nstderr: %s", c.out, c.err);
  cr_expect(strstr(c.out, "zz_broken.yaml:") != NULL, "%s", c.out);
  cr_expect(strstr(c.out, "VQC_E") == NULL, "%s", c.out);
  junit_counts j = read_junit(base);
  cr_expect_eq(j.testcases, 3);
  cr_expect_eq(j.errors, 1);
  cr_expect_eq(j.failures, 0);
  vqc_spawn_result_free(&c);
  rm_rf(dir);
}

/* ---- --json of list and conformance; smoke off a terminal */

Test(cli, list_json_is_one_document) {
  char dir[64];
  make_tmpdir(dir, sizeof dir);
  make_pair(dir);
  cli_out c = run_cli(NULL, "list", dir, "--json", NULL);
  cr_expect_eq(c.code, 0, "stderr: %s", c.err);
  json_error_t e;
  json_t *doc = json_loads(c.out, 0, &e);
  cr_assert_not_null(doc, "not one JSON document (%s): %s", e.text, c.out);
  cr_assert_eq(json_array_size(doc), 2);
  /* Sorted by file name ('-' sorts before '.'). */
  cr_expect_str_eq(json_string_value(json_object_get(json_array_get(doc, 0),
                                                     "name")),
                   "skip_weight_sync-clean");
  cr_expect_str_eq(json_string_value(json_object_get(json_array_get(doc, 1),
                                                     "name")),
                   "skip_weight_sync");
  json_decref(doc);
  vqc_spawn_result_free(&c);
  rm_rf(dir);
}

Test(cli, conformance_json_is_one_document) {
  char fixtures[1024];
  snprintf(fixtures, sizeof fixtures, "%s/vqpt", vqc_test_fixtures_dir());
  struct stat st;
  if (stat(fixtures, &st) != 0)
    cr_skip_test("no fixtures at %s (set VQC_FIXTURES_DIR)", fixtures);
  cli_out c = run_cli(NULL, "conformance", fixtures, "--kind", "fsq", "--json",
                      NULL);
  cr_expect_eq(c.code, 0, "stderr: %s", c.err);
  json_error_t e;
  json_t *doc = json_loads(c.out, 0, &e);
  cr_assert_not_null(doc, "not one JSON document (%s): %s", e.text, c.out);
  cr_expect(json_is_true(json_object_get(doc, "ok")));
  const size_t n = json_array_size(json_object_get(doc, "cases"));
  cr_expect_gt(n, 0);
  cr_expect_eq(json_integer_value(json_object_get(doc, "passed")), (int)n);
  json_decref(doc);
  vqc_spawn_result_free(&c);
}

Test(cli, smoke_off_a_terminal_prints_only_its_verdict) {
  cli_out c = run_cli(NULL, "smoke", "--ranks", "2", "--steps", "3", NULL);
  cr_expect_eq(c.code, 0, "stderr: %s", c.err);
  cr_expect_str_eq(c.out, "2 ranks agree on the weights after 3 steps "
                          "(threads backend)\n");
  vqc_spawn_result_free(&c);
  c = run_cli(NULL, "smoke", "--ranks", "3", "--steps", "4", "--fault",
              "skip_weight_sync", NULL);
  cr_expect_eq(c.code, 1);
  const char *want = "divergence: replicated weights 'w' differ at step 1: "
                     "rank 2 disagrees with rank 0";
  cr_expect(strncmp(c.out, want, strlen(want)) == 0, "%s", c.out);
  vqc_spawn_result_free(&c);
}
