/* test_reports.c: the report writers (reports/report.h) and `vqcheck
 * report` (harness/cli/cmd_report.c) on run directories built by hand in a
 * temporary directory, so every expected value is exact:
 *
 *   run.json  3 ranks, 5 steps done; findings: divergence (step 2, rank 1,
 *             codebook.embed, reference rank 0, max abs diff 0.25),
 *             lost_inplace (step 2, a malicious tensor name, call site and
 *             message: markup, quotes, &, a control character), deadlock
 *             (step 5, rank 1 missing from collective #15);
 *   traces    rank-<r>.trace.jsonl by the real trace writer: 4 tensors x 5
 *             steps per rank; rank 1 differs from step 2 on, in s - 1
 *             tensors at step s (1, 2, 3); ranks 0 and 2 agree;
 *   ledgers   ranks 0 and 2: collectives #0..#15, #15 failed (timeout);
 *             rank 1: #0..#14, all done.
 *
 * Checked: junit.xml parsed by libxml2 (shape, counts, failure messages
 * equal to the findings' after XML unescaping); the JSON report parsed by
 * jansson equals run.json; report.md holds the findings; report.html holds
 * the three figures with the exact cells, escapes every malicious string
 * and fetches nothing; files are written atomically (no temporary left, a
 * bad input or a failed write leaves the previous report byte for byte);
 * bad run.json, trace and ledger lines are errors naming file and field;
 * a rank without a trace or a ledger dump shows as a gap, not an error;
 * the suite JUnit; the CLI's exit codes. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_paths.h"
#include "cli.h"
#include "report.h"
#include "trace.h"

#ifdef VQC_HAVE_LIBXML2
#include <libxml/parser.h>
#include <libxml/tree.h>
#endif

#define EVIL_TENSOR "<img src=x onerror=alert(1)>"
#define EVIL_SITE "lib/src/evil.c:7 \"quoted\" & <b>bold</b>"
/* \x01: not allowed in XML 1.0 at all; the writers show U+FFFD. */
#define EVIL_MESSAGE \
  "copy of '" EVIL_TENSOR "' lost </td></tr><script>alert(3)</script> \x01!"
#define EVIL_MESSAGE_AS_XML_TEXT \
  "copy of '" EVIL_TENSOR "' lost </td></tr><script>alert(3)</script> " \
  "\xef\xbf\xbd!"
#define DIVERGENCE_MESSAGE \
  "tensor 'codebook.embed' differs on rank 1 from rank 0 at step 2"
#define DEADLOCK_MESSAGE \
  "collective #15 all_reduce(float32, count 1552) was entered by ranks 0, 2 " \
  "but never by rank 1"

static const char *const TENSORS[4] = {"encoder.weight", "codebook.embed",
                                       "codebook.cluster_size",
                                       "decoder.weight"};

/* ---- files */


static void make_temp_dir(char *dir, size_t n) {
  snprintf(dir, n, "/tmp/vqc-reports-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
}

/* The whole file, NUL-terminated (caller frees); NULL when unreadable. */
static char *slurp(const char *dir, const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static void write_text(const char *dir, const char *name, const char *text,
                       const char *mode) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, mode);
  cr_assert_not_null(f, "%s", path);
  fputs(text, f);
  fclose(f);
}

static int count_substr(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* Names in dir that contain ".tmp." (a temporary left behind). */
static int count_temporaries(const char *dir) {
  DIR *d = opendir(dir);
  cr_assert_not_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (strstr(e->d_name, ".tmp.")) n++;
  closedir(d);
  return n;
}

/* ---- the sample run directory */

static json_t *finding(const char *kind, int step, const char *tensor,
                       const char *site, const char *message, json_t *ranks,
                       json_t *detail) {
  json_t *f = json_pack("{s:s, s:i, s:o, s:s}", "kind", kind, "step", step,
                        "ranks", ranks, "message", message);
  if (tensor) json_object_set_new(f, "tensor", json_string(tensor));
  if (site) json_object_set_new(f, "site", json_string(site));
  json_object_set_new(f, "detail", detail ? detail : json_object());
  return f;
}

static json_t *sample_run_json(void) {
  json_t *findings = json_array();
  json_array_append_new(
      findings,
      finding("divergence", 2, "codebook.embed", NULL, DIVERGENCE_MESSAGE,
              json_pack("[i]", 1),
              json_pack("{s:i, s:f, s:f, s:i, s:i}", "reference_rank", 0,
                        "max_abs_diff", 0.25, "max_rel_diff", 0.5, "ulp",
                        8388608, "differing", 3)));
  json_array_append_new(
      findings,
      finding("lost_inplace", 2, EVIL_TENSOR, EVIL_SITE, EVIL_MESSAGE,
              json_pack("[i,i,i]", 0, 1, 2),
              json_pack("{s:s}", "reason", "</pre><script>alert(2)</script>")));
  json_array_append_new(
      findings,
      finding("deadlock", 5, NULL,
              "lib/src/train/ddp.c:88 vqc_ddp_allreduce_grads",
              DEADLOCK_MESSAGE, json_pack("[i]", 1),
              json_pack("{s:i, s:s}", "seq", 15, "op", "all_reduce")));
  json_t *steps = json_array();
  for (int s = 0; s < 5; s++)
    json_array_append_new(steps, json_pack("{s:i, s:f, s:f, s:i}", "step", s,
                                           "seconds", 0.01, "loss", 1.0 / (s + 1),
                                           "findings", s < 2 ? 0 : 2));
  return json_pack(
      "{s:i, s:{s:s, s:s, s:s, s:i, s:i, s:s, s:s}, s:{s:s, s:s, s:i, s:i},"
      " s:{s:s, s:s, s:b, s:b}, s:s, s:f,"
      " s:{s:s, s:i, s:s, s:i}, s:o, s:o, s:i}",
      "schema_version", 1,
      "scenario", "name", "sample", "model", "vq", "fault", "unsynced_dropout_seed",
      "ranks", 3, "steps", 6, "seed", "7", "expect", "clean",
      "environment", "hostname", "testhost", "backend", "threads", "ranks", 3,
      "pid", 42,
      "build", "version", "0.1.0", "build_type", "Debug", "mpi", 1, "cuda", 0,
      "finished", "2026-01-02T03:04:05Z", "duration_s", 30.5,
      "training", "status", "VQC_ETIMEOUT", "failed_rank", 0, "message",
      "rank 0: collective #15 timed out", "steps_done", 5,
      "findings", findings, "steps", steps, "exit_code", 1);
}

static void write_run_json(const char *dir, json_t *j) {
  char path[512];
  snprintf(path, sizeof path, "%s/run.json", dir);
  cr_assert_eq(json_dump_file(j, path, JSON_INDENT(2)), 0);
}

/* Rank 1 differs from step 2 on in tensors 1 .. step-1. */
static void write_traces(const char *dir) {
  for (int r = 0; r < 3; r++) {
    char path[512];
    cr_assert_eq(vqc_trace_path(dir, r, path, sizeof path), VQC_OK);
    vqc_trace_writer *w = NULL;
    cr_assert_eq(vqc_trace_writer_open(path, &w), VQC_OK);
    for (int s = 0; s < 5; s++)
      for (int t = 0; t < 4; t++) {
        vqc_trace_record rec = {.rank = r, .step = s, .ndim = 1,
                                .shape = {16}};
        snprintf(rec.tensor, sizeof rec.tensor, "%s", TENSORS[t]);
        snprintf(rec.dtype, sizeof rec.dtype, "float32");
        snprintf(rec.digest_algo, sizeof rec.digest_algo, VQC_TRACE_DIGEST_ALGO);
        rec.digest = 1000u * (unsigned)s + (unsigned)t;
        if (r == 1 && s >= 2 && t >= 1 && t <= s - 1) rec.digest += 0x100;
        cr_assert_eq(vqc_trace_write(w, &rec), VQC_OK);
      }
    vqc_trace_writer_close(w);
  }
}

/* vqc_ledger_write_jsonl's format; ranks 0, 2: #0..#15 (#15 failed);
 * rank 1: #0..#14. */
static void write_ledgers(const char *dir) {
  for (int r = 0; r < 3; r++) {
    char name[64];
    snprintf(name, sizeof name, "rank-%d.ledger.jsonl", r);
    write_text(dir, name, "", "w");
    const int last = r == 1 ? 14 : 15;
    for (int seq = 0; seq <= last; seq++) {
      char line[512];
      const bool stuck = seq == 15;
      snprintf(line, sizeof line,
               "{\"seq\":%d,\"rank\":%d,\"op\":\"all_reduce\",\"redop\":\"sum\","
               "\"dtype\":\"float32\",\"count\":1552,\"root\":-1,\"file\":"
               "\"/src/lib/src/train/ddp.c\",\"line\":88,\"func\":"
               "\"vqc_ddp_allreduce_grads\",\"t_enter_ns\":%d,\"t_exit_ns\":%d,"
               "\"state\":\"%s\",\"status\":\"%s\"}\n",
               seq, r, 100 * seq, 100 * seq + 50, stuck ? "failed" : "done",
               stuck ? "VQC_ETIMEOUT" : "VQC_OK");
      write_text(dir, name, line, "a");
    }
  }
}

static void make_sample(char *dir, size_t n) {
  make_temp_dir(dir, n);
  json_t *j = sample_run_json();
  cr_assert_not_null(j, "json_pack failed");
  write_run_json(dir, j);
  json_decref(j);
  write_traces(dir);
  write_ledgers(dir);
}

/* Renders one format to a string (caller frees). */
static char *render(const char *dir, unsigned format, vqc_status *status) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  *status = vqc_report_render(dir, format, f);
  fclose(f);
  return buf;
}

/* ---- writing */

Test(reports, writes_every_format_atomically) {
  char dir[64];
  make_sample(dir, sizeof dir);
  cr_assert_eq(vqc_reports_write(dir, VQC_REPORT_ALL), VQC_OK, "%s",
               vqc_last_error());
  const char *names[] = {"report.md", "report.html", "junit.xml"};
  for (int i = 0; i < 3; i++) {
    char *text = slurp(dir, names[i]);
    cr_assert_not_null(text, "%s missing", names[i]);
    cr_expect_gt(strlen(text), 200, "%s is nearly empty", names[i]);
    free(text);
  }
  cr_expect_eq(count_temporaries(dir), 0, "a temporary file was left");
  /* Writing again replaces them, still without leftovers. */
  cr_assert_eq(vqc_reports_write(dir, VQC_REPORT_HTML), VQC_OK);
  cr_expect_eq(count_temporaries(dir), 0);
  vqc_test_remove_dir(dir);
}

Test(reports, bad_input_leaves_previous_reports) {
  char dir[64];
  make_sample(dir, sizeof dir);
  cr_assert_eq(vqc_reports_write(dir, VQC_REPORT_ALL), VQC_OK);
  char *before[3];
  const char *names[] = {"report.md", "report.html", "junit.xml"};
  for (int i = 0; i < 3; i++) before[i] = slurp(dir, names[i]);
  /* run.json cut in the middle, as a crash of its writer would (were it not
   * written atomically itself). */
  char *json = slurp(dir, "run.json");
  json[strlen(json) / 2] = '\0';
  write_text(dir, "run.json", json, "w");
  free(json);
  cr_assert_eq(vqc_reports_write(dir, VQC_REPORT_ALL), VQC_EPARSE);
  cr_expect(strstr(vqc_last_error(), "run.json:") != NULL, "%s",
            vqc_last_error());
  for (int i = 0; i < 3; i++) {
    char *after = slurp(dir, names[i]);
    cr_expect_str_eq(after, before[i], "%s changed", names[i]);
    free(after);
    free(before[i]);
  }
  cr_expect_eq(count_temporaries(dir), 0);
  vqc_test_remove_dir(dir);
}

Test(reports, failed_write_leaves_previous_report) {
  char dir[64];
  make_sample(dir, sizeof dir);
  cr_assert_eq(vqc_reports_write(dir, VQC_REPORT_HTML), VQC_OK);
  char *before = slurp(dir, "report.html");
  /* Change the run so a new report would differ, then make the temporary
   * name impossible to create (a directory sits there: even root cannot
   * open it for writing). */
  json_t *j = sample_run_json();
  json_object_set_new(j, "findings", json_array());
  json_object_set_new(j, "exit_code", json_integer(0));
  write_run_json(dir, j);
  json_decref(j);
  char blocker[256];
  snprintf(blocker, sizeof blocker, "%s/report.html.tmp.%ld", dir,
           (long)getpid());
  cr_assert_eq(mkdir(blocker, 0700), 0);
  cr_assert_eq(vqc_reports_write(dir, VQC_REPORT_HTML), VQC_EIO);
  cr_expect(strstr(vqc_last_error(), "report.html.tmp.") != NULL, "%s",
            vqc_last_error());
  char *after = slurp(dir, "report.html");
  cr_expect_str_eq(after, before, "report.html changed after a failed write");
  free(after);
  rmdir(blocker);
  /* Unblocked, the new report (clean now) replaces the old one. */
  cr_assert_eq(vqc_reports_write(dir, VQC_REPORT_HTML), VQC_OK);
  after = slurp(dir, "report.html");
  cr_expect(strstr(after, "CLEAN: no findings") != NULL);
  free(after);
  free(before);
  vqc_test_remove_dir(dir);
}

/* ---- junit.xml */

#ifdef VQC_HAVE_LIBXML2
static xmlNode *first_element(xmlNode *n) {
  for (; n; n = n->next)
    if (n->type == XML_ELEMENT_NODE) return n;
  return NULL;
}

static xmlNode *next_element(xmlNode *n) { return first_element(n->next); }

static long attr_long(xmlNode *n, const char *name) {
  xmlChar *v = xmlGetProp(n, BAD_CAST name);
  cr_assert_not_null(v, "<%s> has no %s", n->name, name);
  long x = strtol((const char *)v, NULL, 10);
  xmlFree(v);
  return x;
}

/* The attribute as a malloc'd string (entities decoded by the parser). */
static char *attr(xmlNode *n, const char *name) {
  xmlChar *v = xmlGetProp(n, BAD_CAST name);
  if (!v) return NULL;
  char *s = strdup((const char *)v);
  xmlFree(v);
  return s;
}

static xmlDoc *parse_xml(const char *dir, const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  xmlDoc *doc = xmlReadFile(path, NULL, XML_PARSE_NONET);
  cr_assert_not_null(doc, "%s is not well-formed XML", path);
  return doc;
}
#endif

Test(reports, junit_parses_with_one_testcase_per_check) {
#ifndef VQC_HAVE_LIBXML2
  cr_skip_test("libxml2 is missing (scripts/install-deps.sh installs it)");
#else
  char dir[64];
  make_sample(dir, sizeof dir);
  cr_assert_eq(vqc_reports_write(dir, VQC_REPORT_JUNIT), VQC_OK, "%s",
               vqc_last_error());
  xmlDoc *doc = parse_xml(dir, "junit.xml");
  xmlNode *root = xmlDocGetRootElement(doc);
  cr_assert_str_eq((const char *)root->name, "testsuites");
  xmlNode *suite = first_element(root->children);
  cr_assert_not_null(suite);
  cr_assert_str_eq((const char *)suite->name, "testsuite");
  cr_expect_null(next_element(suite), "more than one testsuite");
  char *suite_name = attr(suite, "name");
  cr_expect_str_eq(suite_name, "vqcheck.sample");
  free(suite_name);
  /* One testcase per finding kind (8) plus "training". */
  cr_expect_eq(attr_long(suite, "tests"), 9);
  cr_expect_eq(attr_long(suite, "failures"), 3);
  cr_expect_eq(attr_long(suite, "errors"), 0);
  cr_expect_eq(attr_long(root, "failures"), 3);

  int ncases = 0, nfailures = 0;
  for (xmlNode *tc = first_element(suite->children); tc; tc = next_element(tc)) {
    if (strcmp((const char *)tc->name, "properties") == 0) continue;
    cr_assert_str_eq((const char *)tc->name, "testcase");
    ncases++;
    char *name = attr(tc, "name"), *cls = attr(tc, "classname");
    cr_assert_not_null(name);
    cr_expect_str_eq(cls, "vqcheck.sample");
    xmlNode *failure = first_element(tc->children);
    const char *want = NULL;
    if (strcmp(name, "divergence") == 0) want = DIVERGENCE_MESSAGE;
    else if (strcmp(name, "lost_inplace") == 0) want = EVIL_MESSAGE_AS_XML_TEXT;
    else if (strcmp(name, "deadlock") == 0) want = DEADLOCK_MESSAGE;
    if (!want) {
      cr_expect_null(failure, "testcase %s should pass", name);
    } else {
      cr_assert_not_null(failure, "testcase %s has no failure", name);
      cr_expect_str_eq((const char *)failure->name, "failure");
      nfailures++;
      char *msg = attr(failure, "message"), *type = attr(failure, "type");
      cr_expect_str_eq(msg, want, "testcase %s", name);
      cr_expect_str_eq(type, name);
      /* The text names step, ranks, tensor and site too. */
      xmlChar *text = xmlNodeGetContent(failure);
      if (strcmp(name, "lost_inplace") == 0) {
        cr_expect(strstr((const char *)text, "tensor " EVIL_TENSOR) != NULL,
                  "%s", text);
        cr_expect(strstr((const char *)text, "at " EVIL_SITE) != NULL, "%s",
                  text);
        cr_expect(strstr((const char *)text, "step 2, ranks [0, 1, 2]") != NULL,
                  "%s", text);
      }
      xmlFree(text);
      free(msg);
      free(type);
    }
    free(name);
    free(cls);
  }
  cr_expect_eq(ncases, 9);
  cr_expect_eq(nfailures, 3);
  xmlFreeDoc(doc);
  vqc_test_remove_dir(dir);
#endif
}

Test(reports, junit_training_error_without_findings) {
#ifndef VQC_HAVE_LIBXML2
  cr_skip_test("libxml2 is missing (scripts/install-deps.sh installs it)");
#else
  char dir[64];
  make_temp_dir(dir, sizeof dir);
  json_t *j = sample_run_json();
  json_object_set_new(j, "findings", json_array());
  json_object_set_new(j, "exit_code", json_integer(3));
  write_run_json(dir, j);
  json_decref(j);
  cr_assert_eq(vqc_reports_write(dir, VQC_REPORT_ALL), VQC_OK, "%s",
               vqc_last_error());
  xmlDoc *doc = parse_xml(dir, "junit.xml");
  xmlNode *suite = first_element(xmlDocGetRootElement(doc)->children);
  cr_expect_eq(attr_long(suite, "failures"), 0);
  cr_expect_eq(attr_long(suite, "errors"), 1);
  int errors = 0;
  for (xmlNode *tc = first_element(suite->children); tc; tc = next_element(tc)) {
    xmlNode *e = first_element(tc->children);
    if (!e || strcmp((const char *)e->name, "error") != 0) continue;
    errors++;
    char *name = attr(tc, "name"), *msg = attr(e, "message");
    cr_expect_str_eq(name, "training");
    cr_expect(strstr(msg, "rank 0: collective #15 timed out") != NULL, "%s", msg);
    free(name);
    free(msg);
  }
  cr_expect_eq(errors, 1);
  xmlFreeDoc(doc);
  /* No traces: the figures say so instead of drawing. */
  char *html = slurp(dir, "report.html");
  cr_expect(strstr(html, "ERROR: training stopped unexplained") != NULL);
  cr_expect(strstr(html, "No digest traces") != NULL);
  cr_expect(strstr(html, "No ledger dumps") != NULL);
  free(html);
  vqc_test_remove_dir(dir);
#endif
}

Test(reports, suite_junit_one_testcase_per_scenario) {
#ifndef VQC_HAVE_LIBXML2
  cr_skip_test("libxml2 is missing (scripts/install-deps.sh installs it)");
#else
  char dir[64];
  make_temp_dir(dir, sizeof dir);
  vqc_suite_case cases[3];
  memset(cases, 0, sizeof cases);
  snprintf(cases[0].name, sizeof cases[0].name, "skip_weight_sync");
  cases[0].passed = true;
  cases[0].seconds = 1.5;
  snprintf(cases[1].name, sizeof cases[1].name, "evil<&>");
  snprintf(cases[1].message, sizeof cases[1].message, "%s", EVIL_MESSAGE);
  snprintf(cases[1].expected, sizeof cases[1].expected, "divergence@1");
  snprintf(cases[1].found, sizeof cases[1].found, "none");
  snprintf(cases[2].name, sizeof cases[2].name, "crashed");
  cases[2].error = true;
  snprintf(cases[2].message, sizeof cases[2].message, "killed after 60 s");
  cr_assert_eq(vqc_reports_write_suite(dir, "suite", cases, 3), VQC_OK, "%s",
               vqc_last_error());
  cr_expect_eq(count_temporaries(dir), 0);
  xmlDoc *doc = parse_xml(dir, "junit.xml");
  xmlNode *suite = first_element(xmlDocGetRootElement(doc)->children);
  cr_expect_eq(attr_long(suite, "tests"), 3);
  cr_expect_eq(attr_long(suite, "failures"), 1);
  cr_expect_eq(attr_long(suite, "errors"), 1);
  const char *want_child[3] = {NULL, "failure", "error"};
  const char *want_msg[3] = {NULL, EVIL_MESSAGE_AS_XML_TEXT, "killed after 60 s"};
  int i = 0;
  for (xmlNode *tc = first_element(suite->children); tc; tc = next_element(tc)) {
    cr_assert_lt(i, 3);
    char *name = attr(tc, "name");
    cr_expect_str_eq(name, cases[i].name);
    xmlNode *child = first_element(tc->children);
    if (child && strcmp((const char *)child->name, "system-out") == 0)
      child = NULL;
    if (!want_child[i]) {
      cr_expect_null(child, "%s should pass", name);
    } else {
      cr_assert_not_null(child, "%s has no %s", name, want_child[i]);
      cr_expect_str_eq((const char *)child->name, want_child[i]);
      char *msg = attr(child, "message");
      cr_expect_str_eq(msg, want_msg[i]);
      free(msg);
    }
    free(name);
    i++;
  }
  cr_expect_eq(i, 3);
  xmlFreeDoc(doc);
  char *md = slurp(dir, "report.md");
  cr_expect(strstr(md, "1 passed, 2 failed") != NULL, "%s", md);
  free(md);
  vqc_test_remove_dir(dir);
#endif
}

/* ---- run.json and the JSON report */

Test(reports, json_report_equals_run_json) {
  char dir[64];
  make_sample(dir, sizeof dir);
  vqc_status s;
  char *text = render(dir, VQC_REPORT_JSON, &s);
  cr_assert_eq(s, VQC_OK, "%s", vqc_last_error());
  json_error_t err;
  json_t *got = json_loads(text, 0, &err);
  cr_assert_not_null(got, "not JSON: %s", err.text);
  json_t *want = sample_run_json();
  cr_expect(json_equal(got, want), "the JSON report differs from run.json");
  cr_expect_str_eq(json_string_value(json_object_get(
                       json_array_get(json_object_get(got, "findings"), 1),
                       "tensor")),
                   EVIL_TENSOR);
  json_decref(got);
  json_decref(want);
  free(text);
  int code = -1;
  cr_expect_eq(vqc_report_run_exit_code(dir, &code), VQC_OK);
  cr_expect_eq(code, 1);
  vqc_test_remove_dir(dir);
}

/* One mutation of the sample run.json and the field the error must name. */
typedef struct bad_case {
  const char *what;
  void (*mutate)(json_t *j);
  const char *field;
} bad_case;

static void m_schema(json_t *j) {
  json_object_set_new(j, "schema_version", json_integer(2));
}
static void m_no_findings(json_t *j) { json_object_del(j, "findings"); }
static void m_kind(json_t *j) {
  json_object_set_new(json_array_get(json_object_get(j, "findings"), 1), "kind",
                      json_string("bogus"));
}
static void m_rank(json_t *j) {
  json_array_set_new(json_object_get(json_array_get(json_object_get(j, "findings"),
                                                    0), "ranks"),
                     0, json_string("x"));
}
static void m_ranks(json_t *j) {
  json_object_set_new(json_object_get(j, "environment"), "ranks",
                      json_integer(0));
}
static void m_exit(json_t *j) {
  json_object_set_new(j, "exit_code", json_integer(7));
}
static void m_detail(json_t *j) {
  json_object_set_new(json_array_get(json_object_get(j, "findings"), 2),
                      "detail", json_string("x"));
}
static void m_step(json_t *j) {
  json_object_set_new(json_array_get(json_object_get(j, "steps"), 3), "step",
                      json_string("3"));
}

Test(reports, invalid_run_json_names_the_field) {
  static const bad_case cases[] = {
      {"unknown schema", m_schema, "field 'schema_version': version 2 is not "
                                   "supported"},
      {"no findings", m_no_findings, "field 'findings': missing"},
      {"unknown kind", m_kind, "field 'findings[1].kind': unknown kind 'bogus'"},
      {"bad rank", m_rank, "field 'findings[0].ranks[0]'"},
      {"zero ranks", m_ranks, "field 'environment.ranks'"},
      {"bad exit code", m_exit, "field 'exit_code'"},
      {"detail not an object", m_detail, "field 'findings[2].detail'"},
      {"bad step", m_step, "field 'steps[3].step'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char dir[64];
    make_sample(dir, sizeof dir);
    cr_assert_eq(vqc_reports_write(dir, VQC_REPORT_ALL), VQC_OK);
    json_t *j = sample_run_json();
    cases[i].mutate(j);
    write_run_json(dir, j);
    json_decref(j);
    cr_expect_eq(vqc_reports_write(dir, VQC_REPORT_ALL), VQC_EPARSE, "%s",
                 cases[i].what);
    const char *msg = vqc_last_error();
    cr_expect(strstr(msg, cases[i].field) != NULL, "%s: %s", cases[i].what, msg);
    cr_expect(strstr(msg, "/run.json") != NULL, "%s: %s", cases[i].what, msg);
    vqc_test_remove_dir(dir);
  }
  /* No run.json: the user named the wrong directory. */
  char dir[64];
  make_temp_dir(dir, sizeof dir);
  cr_expect_eq(vqc_reports_write(dir, VQC_REPORT_ALL), VQC_EINVAL);
  cr_expect(strstr(vqc_last_error(), "no such file") != NULL);
  vqc_test_remove_dir(dir);
}

Test(reports, bad_trace_and_ledger_lines_name_file_and_line) {
  char dir[64];
  make_sample(dir, sizeof dir);
  /* A garbage line in the middle of rank 1's trace. */
  char *trace = slurp(dir, "rank-1.trace.jsonl");
  char *second = strchr(trace, '\n') + 1;
  char *third = strchr(second, '\n') + 1;
  char broken[8192];
  snprintf(broken, sizeof broken, "%.*sgarbage\n%s", (int)(second - trace),
           trace, third);
  write_text(dir, "rank-1.trace.jsonl", broken, "w");
  cr_expect_eq(vqc_reports_write(dir, VQC_REPORT_ALL), VQC_EPARSE);
  cr_expect(strstr(vqc_last_error(), "rank-1.trace.jsonl:2:") != NULL, "%s",
            vqc_last_error());
  /* junit.xml needs no trace: it is still written. */
  cr_expect_eq(vqc_reports_write(dir, VQC_REPORT_JUNIT), VQC_OK);

  /* A last line cut mid-way (the writer was killed) is ignored. */
  write_text(dir, "rank-1.trace.jsonl", trace, "w");
  write_text(dir, "rank-1.trace.jsonl", "{\"schema\":\"vqcheck-trace/1\",\"ra",
             "a");
  cr_expect_eq(vqc_reports_write(dir, VQC_REPORT_ALL), VQC_OK, "%s",
               vqc_last_error());
  free(trace);

  /* A ledger line with a bad state. */
  write_text(dir, "rank-2.ledger.jsonl",
             "{\"seq\":0,\"rank\":2,\"op\":\"all_reduce\",\"state\":\"done\"}\n"
             "{\"seq\":1,\"rank\":2,\"op\":\"all_reduce\",\"state\":\"lost\"}\n",
             "w");
  cr_expect_eq(vqc_reports_write(dir, VQC_REPORT_HTML), VQC_EPARSE);
  cr_expect(strstr(vqc_last_error(), "rank-2.ledger.jsonl:2: field 'state'") !=
                NULL, "%s", vqc_last_error());
  vqc_test_remove_dir(dir);
}

/* ---- report.md */

Test(reports, markdown_has_the_findings) {
  char dir[64];
  make_sample(dir, sizeof dir);
  cr_assert_eq(vqc_reports_write(dir, VQC_REPORT_MD), VQC_OK, "%s",
               vqc_last_error());
  char *md = slurp(dir, "report.md");
  cr_expect(strstr(md, "**Verdict: FINDINGS** (3)") != NULL);
  cr_expect(strstr(md, "| 1 | divergence | 2 | 1 | `codebook.embed` |  | "
                       DIVERGENCE_MESSAGE " |") != NULL, "%s", md);
  cr_expect(strstr(md, "| 3 | deadlock | 5 | 1 |  | "
                       "`lib/src/train/ddp.c:88 vqc_ddp_allreduce_grads` |") != NULL);
  cr_expect(strstr(md, "### 2. lost\\_inplace at step 2") == NULL &&
            strstr(md, "### 2. lost_inplace at step 2") != NULL);
  /* The malicious message is escaped outside code. */
  cr_expect(strstr(md, "\\<script\\>alert(3)\\</script\\>") != NULL, "%s", md);
  cr_expect(strstr(md, "First disagreement at step 2.") != NULL);
  cr_expect(strstr(md, "| 4 | = | **3 differ** | = |") != NULL, "%s", md);
  cr_expect(strstr(md, "Collective #15") != NULL);
  cr_expect(strstr(md, "| 1 | **never reached** (last: #14) |") != NULL);
  cr_expect(strstr(md, "## Environment") && strstr(md, "| hostname | testhost |"));
  cr_expect(strstr(md, "## Build") && strstr(md, "| version | 0.1.0 |"));
  free(md);
  vqc_test_remove_dir(dir);
}

/* ---- report.html */

Test(reports, html_figures_have_the_exact_cells) {
  char dir[64];
  make_sample(dir, sizeof dir);
  cr_assert_eq(vqc_reports_write(dir, VQC_REPORT_HTML), VQC_OK, "%s",
               vqc_last_error());
  char *html = slurp(dir, "report.html");
  cr_expect(strstr(html, "<header class=\"verdict verdict-findings\"") != NULL);
  cr_expect_eq(count_substr(html, "<tr class=\"finding-row\""), 3);
  cr_expect(strstr(html, "<code>lib/src/train/ddp.c:88 vqc_ddp_allreduce_grads"
                         "</code>") != NULL);
  /* Heatmap: 3 ranks x 5 steps, rank 1 red at steps 2, 3, 4. */
  cr_expect_eq(count_substr(html, "<svg id=\"digest-heatmap\""), 1);
  cr_expect_eq(count_substr(html, "<rect class=\"cell "), 15);
  cr_expect_eq(count_substr(html, "<rect class=\"cell differ\""), 3);
  cr_expect_eq(count_substr(html, "<rect class=\"cell agree\""), 12);
  cr_expect(strstr(html, "step 2, rank 1: 1 of 4 tensors differ from rank 0"));
  cr_expect(strstr(html, "step 3, rank 1: 2 of 4 tensors differ from rank 0"));
  cr_expect(strstr(html, "step 4, rank 1: 3 of 4 tensors differ from rank 0"));
  cr_expect(strstr(html, "rank 0 (ref)"));
  /* Divergence plot: 5 points 0 0 1 2 3, linear. */
  cr_expect_eq(count_substr(html, "<svg id=\"divergence-plot\""), 1);
  cr_expect(strstr(html, "data-scale=\"linear\""));
  cr_expect(strstr(html, "step 4: 3 tensors differ"));
  cr_expect(strstr(html, "step 1: 0 tensors differ"));
  /* Timeline: #15 outlined, failed on ranks 0 and 2, never reached on 1. */
  cr_expect_eq(count_substr(html, "<svg id=\"collective-timeline\""), 1);
  cr_expect(strstr(html, "stuck: #15"));
  cr_expect_eq(count_substr(html, "<rect class=\"coll failed\""), 2);
  cr_expect_eq(count_substr(html, "<rect class=\"coll absent\""), 1);
  cr_expect(strstr(html, "rank 1, #15: never reached (its dump ends at #14)"));
  /* Environment and build. */
  cr_expect(strstr(html, "<th>hostname</th><td>testhost</td>"));
  cr_expect(strstr(html, "<th>build_type</th><td>Debug</td>"));
  free(html);
  vqc_test_remove_dir(dir);
}

Test(reports, html_escapes_everything_and_fetches_nothing) {
  char dir[64];
  make_sample(dir, sizeof dir);
  cr_assert_eq(vqc_reports_write(dir, VQC_REPORT_HTML), VQC_OK);
  char *html = slurp(dir, "report.html");
  /* The markup in the tensor name, site, message and detail is text. */
  cr_expect_null(strstr(html, "<script"), "a <script> got through");
  cr_expect_null(strstr(html, "<img"), "an <img> got through");
  cr_expect_null(strstr(html, "<b>bold"), "a <b> got through");
  cr_expect_null(strstr(html, "</pre><"), "a </pre> got through");
  cr_expect(strstr(html, "&lt;img src=x onerror=alert(1)&gt;") != NULL);
  cr_expect(strstr(html, "&quot;quoted&quot; &amp; &lt;b&gt;bold&lt;/b&gt;"));
  cr_expect(strstr(html, "&lt;/td&gt;&lt;/tr&gt;&lt;script&gt;alert(3)"));
  cr_expect(strstr(html, "&lt;/pre&gt;&lt;script&gt;alert(2)"));
  cr_expect_null(strchr(html, '\x01'), "a control character got through");
  /* Self-contained: no external resource of any kind. */
  cr_expect_null(strstr(html, "src=\""));
  cr_expect_null(strstr(html, "<link"));
  cr_expect_null(strstr(html, "@import"));
  cr_expect_null(strstr(html, "url("));
  for (const char *p = strstr(html, "href=\""); p; p = strstr(p + 1, "href=\""))
    cr_expect_eq(p[6], '#', "a link leaves the page: %.40s", p);
  cr_expect(strstr(html, "Content-Security-Policy") != NULL);
  free(html);
  vqc_test_remove_dir(dir);
}

Test(reports, missing_rank_files_show_as_gaps) {
  char dir[64];
  make_sample(dir, sizeof dir);
  /* Rank 2 crashed before writing a trace; rank 1 left no ledger dump. */
  char path[128];
  snprintf(path, sizeof path, "%s/rank-2.trace.jsonl", dir);
  cr_assert_eq(unlink(path), 0);
  snprintf(path, sizeof path, "%s/rank-1.ledger.jsonl", dir);
  cr_assert_eq(unlink(path), 0);
  cr_assert_eq(vqc_reports_write(dir, VQC_REPORT_ALL), VQC_OK, "%s",
               vqc_last_error());
  char *html = slurp(dir, "report.html");
  cr_expect_eq(count_substr(html, "<rect class=\"cell missing\""), 5);
  /* Without rank 2, ranks 0 and 1 split 1-1 from step 2 on: no majority,
   * so neither is painted as agreeing (rank 0 is only the tie-break
   * reference). */
  cr_expect_eq(count_substr(html, "<rect class=\"cell differ\""), 0);
  cr_expect_eq(count_substr(html, "<rect class=\"cell nomajority\""), 6);
  cr_expect_eq(count_substr(html, "<rect class=\"cell agree\""), 4);
  cr_expect_eq(count_substr(html, "<rect class=\"nodump\""), 1);
  cr_expect(strstr(html, "rank 1 left no ledger dump") != NULL);
  cr_expect(strstr(html, "stuck: #15") != NULL);
  free(html);
  char *md = slurp(dir, "report.md");
  cr_expect(strstr(md, "- rank 2 left no trace") != NULL);
  cr_expect(strstr(md, "| 2 | **no majority** | **no majority** | - |") !=
                NULL, "%s", md);
  cr_expect(strstr(md, "| 1 | no ledger dump |") != NULL);
  free(md);
  vqc_test_remove_dir(dir);
}

/* ---- a comparison of traces (`vqcheck compare`) */

/* The sample turned into what `vqcheck compare` writes (harness/
 * cmd_compare.c): backend "traces", a scenario without fault, seed or
 * expectation, its divergence finding only, the checks it ran, and the
 * compare section; no ledger dumps. Rank 1's trace ends at step 3 in
 * `rank_last_step`. */
static json_t *compare_run_json(const char *program) {
  json_t *j = sample_run_json();
  json_object_set_new(j, "scenario",
                      json_pack("{s:s, s:s, s:s, s:s}", "name", "compare",
                                "path", "/data/traces", "description",
                                "per-rank digest traces", "model",
                                "unknown"));
  json_object_set_new(json_object_get(j, "environment"), "backend",
                      json_string("traces"));
  json_object_set_new(json_object_get(j, "training"), "status",
                      json_string("VQC_OK"));
  /* Compare finds divergence only: keep the sample's first finding. */
  json_t *fs = json_object_get(j, "findings");
  while (json_array_size(fs) > 1) json_array_remove(fs, 1);
  json_object_set_new(j, "checks", json_pack("[s]", "divergence"));
  json_object_set_new(
      j, "checks_not_run",
      json_pack("{s:s, s:s}", "deadlock", "no ledger here",
                "collective_mismatch", "no ledger here"));
  json_t *c = json_pack(
      "{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:[i,i,i], s:i}",
      "trace_dir", "/data/traces", "ranks", 3, "steps", 5, "steps_compared",
      4, "first_step", 0, "last_step", 3, "tensors_per_step", 4,
      "tensors_per_step_min", 4, "rank_last_step", 4, 3, 4,
      "digests_compared", 16);
  json_object_set_new(c, "program",
                      program ? json_string(program) : json_null());
  json_object_set_new(j, "compare", c);
  return j;
}

/* A compare run directory: run.json, the traces, no ledger dumps. */
static void make_compare_sample(char *dir, size_t n, const char *program) {
  make_temp_dir(dir, n);
  json_t *j = compare_run_json(program);
  write_run_json(dir, j);
  json_decref(j);
  write_traces(dir);
}

/* What a scenario's report says and a trace comparison's must not. */
static void expect_no_scenario_words(const char *text) {
  static const char *const words[] = {"fault injected", "seed",
                                      "steps done in", "training VQC_OK",
                                      "unknown model", "collective-timeline",
                                      "Collective timeline"};
  for (int i = 0; i < 7; i++)
    cr_expect_null(strstr(text, words[i]), "'%s' in:\n%s", words[i], text);
}

Test(reports, a_trace_comparison_says_what_was_compared) {
  char dir[64];
  make_compare_sample(dir, sizeof dir, "train.py");
  cr_assert_eq(vqc_reports_write(dir, VQC_REPORT_ALL), VQC_OK, "%s",
               vqc_last_error());
  char *md = slurp(dir, "report.md");
  cr_expect(strstr(md, "- program: `train.py` (traces in `/data/traces`)\n"
                   "- 3 ranks; steps compared: 0..3 (4 steps; the traces "
                   "hold 5); tensors per step: 4; digests compared: 16\n"
                   "- last step per rank: step 4: ranks 0, 2; step 3: rank "
                   "1\n") != NULL, "%s", md);
  cr_expect(strstr(md, "## Collectives\n\nCollective checks not run (so no "
                   "collective timeline): deadlock, collective_mismatch: "
                   "no ledger here.") != NULL, "%s", md);
  cr_expect_eq(count_substr(md, "no ledger here"), 1, "said once: %s", md);
  expect_no_scenario_words(md);

  char *html = slurp(dir, "report.html");
  cr_expect(strstr(html, "<p>traces of train.py in /data/traces, 3 ranks, "
                   "steps compared: 0..3 (4 steps; the traces hold 5), exit "
                   "code 1</p>") != NULL, "%s", html);
  cr_expect(strstr(html, "<tr><th>program</th><td><code>train.py</code>"
                   "</td></tr>\n<tr><th>trace directory</th><td><code>"
                   "/data/traces</code></td></tr>\n<tr><th>ranks</th><td>3"
                   "</td></tr>\n<tr><th>steps compared</th><td>0..3 (4 "
                   "steps; the traces hold 5)</td></tr>\n<tr><th>tensors "
                   "per step</th><td>4</td></tr>") != NULL, "%s", html);
  cr_expect(strstr(html, "<tr><th>last step per rank</th><td>step 4: ranks "
                   "0, 2; step 3: rank 1</td></tr>") != NULL, "%s", html);
  cr_expect_eq(count_substr(html, "no ledger here"), 1, "said once");
  cr_expect(strstr(html, "<th>tensors compared</th>") != NULL,
            "the per-step table shows what was compared");
  expect_no_scenario_words(html);

  char *junit = slurp(dir, "junit.xml");
  cr_expect(strstr(junit, "<property name=\"program\" value=\"train.py\"/>")
            != NULL, "%s", junit);
  cr_expect(strstr(junit, "<property name=\"trace_dir\" value=\"/data/"
                   "traces\"/>") != NULL, "%s", junit);
  cr_expect_null(strstr(junit, "name=\"fault\""), "%s", junit);
  cr_expect_null(strstr(junit, "name=\"steps_done\""), "%s", junit);
  free(junit);
  free(html);
  free(md);
  vqc_test_remove_dir(dir);
}

Test(reports, a_trace_comparison_without_a_program_names_the_directory) {
  char dir[64];
  make_compare_sample(dir, sizeof dir, NULL);
  cr_assert_eq(vqc_reports_write(dir, VQC_REPORT_ALL), VQC_OK, "%s",
               vqc_last_error());
  char *md = slurp(dir, "report.md");
  cr_expect(strstr(md, "- program: not named in the traces; traces in "
                   "`/data/traces`\n") != NULL, "%s", md);
  char *html = slurp(dir, "report.html");
  cr_expect(strstr(html, "<p>traces in /data/traces, 3 ranks") != NULL, "%s",
            html);
  cr_expect(strstr(html, "<tr><th>program</th><td>not named in the traces")
            != NULL, "%s", html);
  free(html);
  free(md);

  /* An older compare run.json, without the new members: what it has, and
   * no error. */
  json_t *j = compare_run_json(NULL);
  json_t *c = json_object_get(j, "compare");
  static const char *const newer[] = {"program", "steps_compared",
                                      "first_step", "last_step",
                                      "tensors_per_step",
                                      "tensors_per_step_min",
                                      "rank_last_step"};
  for (int i = 0; i < 7; i++) json_object_del(c, newer[i]);
  write_run_json(dir, j);
  json_decref(j);
  cr_assert_eq(vqc_reports_write(dir, VQC_REPORT_ALL), VQC_OK, "%s",
               vqc_last_error());
  md = slurp(dir, "report.md");
  cr_expect(strstr(md, "- 3 ranks; steps compared: (not recorded); tensors "
                   "per step: (not recorded); digests compared: 16\n\n") !=
                NULL, "%s", md);
  expect_no_scenario_words(md);
  free(md);

  /* A mistyped member is an error naming it. */
  j = compare_run_json(NULL);
  json_object_set_new(json_object_get(j, "compare"), "program",
                      json_integer(7));
  write_run_json(dir, j);
  json_decref(j);
  cr_expect_eq(vqc_reports_write(dir, VQC_REPORT_ALL), VQC_EPARSE);
  cr_expect(strstr(vqc_last_error(), "field 'compare.program'") != NULL, "%s",
            vqc_last_error());
  vqc_test_remove_dir(dir);
}

/* A scenario run's report keeps its scenario lines. */
Test(reports, a_scenario_run_keeps_fault_seed_and_timeline) {
  char dir[64];
  make_sample(dir, sizeof dir);
  cr_assert_eq(vqc_reports_write(dir, VQC_REPORT_ALL), VQC_OK, "%s",
               vqc_last_error());
  char *md = slurp(dir, "report.md");
  cr_expect(strstr(md, "(vq model), fault injected: ") != NULL, "%s", md);
  cr_expect(strstr(md, "- 3 ranks on the threads backend; 5 steps done in "
                   "30.50 s; training VQC_ETIMEOUT") != NULL, "%s", md);
  cr_expect_null(strstr(md, "steps compared"));
  char *html = slurp(dir, "report.html");
  cr_expect(strstr(html, "<tr><th>seed</th><td>7</td></tr>") != NULL);
  cr_expect(strstr(html, "<tr><th>fault injected</th>") != NULL);
  cr_expect(strstr(html, "5 steps done in 30.50 s") != NULL);
  cr_expect(strstr(html, "<h2>Collective timeline</h2>") != NULL);
  cr_expect_null(strstr(html, "trace directory"));
  char *junit = slurp(dir, "junit.xml");
  cr_expect(strstr(junit, "<property name=\"fault\"") != NULL);
  cr_expect(strstr(junit, "<property name=\"steps_done\" value=\"5\"/>") !=
            NULL);
  free(junit);
  free(html);
  free(md);
  vqc_test_remove_dir(dir);
}

Test(reports, magnitudes_plot_on_log_scale_without_traces) {
  char dir[64];
  make_temp_dir(dir, sizeof dir);
  json_t *j = sample_run_json();
  json_t *fs = json_array();
  json_array_append_new(fs, finding("divergence", 1, "w", NULL, "m1",
                                    json_pack("[i]", 1),
                                    json_pack("{s:f}", "max_abs_diff", 1e-6)));
  json_array_append_new(fs, finding("gradient_mismatch", 3, "w", NULL, "m2",
                                    json_pack("[i]", 1),
                                    json_pack("{s:f}", "max_abs_diff", 0.5)));
  json_object_set_new(j, "findings", fs);
  write_run_json(dir, j);
  json_decref(j);
  cr_assert_eq(vqc_reports_write(dir, VQC_REPORT_HTML), VQC_OK, "%s",
               vqc_last_error());
  char *html = slurp(dir, "report.html");
  cr_expect(strstr(html, "data-scale=\"log\"") != NULL);
  cr_expect(strstr(html, "step 1: 1e-06 max abs diff") != NULL);
  cr_expect(strstr(html, "step 3: 0.5 max abs diff") != NULL);
  cr_expect(strstr(html, "No digest traces") != NULL);
  free(html);
  vqc_test_remove_dir(dir);
}

/* ---- vqcheck report */

static int cli(int argc, const char *const *argv) {
  return vqc_cmd_report(argc, (char **)argv);
}

Test(reports, cli_writes_and_exits_with_the_runs_code) {
  char dir[64];
  make_sample(dir, sizeof dir);
  const char *a[] = {"report", dir, "--quiet"};
  cr_expect_eq(cli(3, a), 1, "a run with findings exits 1");
  char *html = slurp(dir, "report.html");
  cr_expect_not_null(html);
  free(html);
  /* A clean run exits 0. */
  json_t *j = sample_run_json();
  json_object_set_new(j, "findings", json_array());
  json_object_set_new(j, "exit_code", json_integer(0));
  write_run_json(dir, j);
  json_decref(j);
  cr_expect_eq(cli(3, a), 0);
  vqc_test_remove_dir(dir);
}

Test(reports, cli_format_prints_to_stdout, .init = cr_redirect_stdout) {
  char dir[64];
  make_sample(dir, sizeof dir);
  const char *a[] = {"report", dir, "--format", "junit"};
  cr_expect_eq(cli(4, a), 1);
  fflush(stdout);
  cr_expect_eq(access(dir, F_OK), 0);
  char path[128];
  snprintf(path, sizeof path, "%s/junit.xml", dir);
  cr_expect_neq(access(path, F_OK), 0, "--format must not write files");
  FILE *out = cr_get_redirected_stdout();
  char buf[256] = "";
  cr_assert_not_null(fgets(buf, sizeof buf, out));
  cr_expect_str_eq(buf, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  vqc_test_remove_dir(dir);
}

Test(reports, cli_misuse_exits_2, .init = cr_redirect_stderr) {
  char dir[64];
  make_sample(dir, sizeof dir);
  const char *none[] = {"report"};
  cr_expect_eq(cli(1, none), 2);
  const char *unknown[] = {"report", dir, "--bogus"};
  cr_expect_eq(cli(3, unknown), 2);
  const char *fmt[] = {"report", dir, "--format", "pdf"};
  cr_expect_eq(cli(4, fmt), 2);
  const char *nofmt[] = {"report", dir, "--format"};
  cr_expect_eq(cli(3, nofmt), 2);
  const char *two[] = {"report", dir, dir};
  cr_expect_eq(cli(3, two), 2);
  write_text(dir, "run.json", "{\"schema_version\": 1,", "w");
  const char *corrupt[] = {"report", dir};
  cr_expect_eq(cli(2, corrupt), 2, "a corrupt run.json is bad input");
  vqc_test_remove_dir(dir);
  const char *missing[] = {"report", "/nonexistent/vqc-run"};
  cr_expect_eq(cli(2, missing), 2);
}

Test(reports, cli_help_exits_0, .init = cr_redirect_stdout) {
  const char *a[] = {"report", "--help"};
  cr_expect_eq(cli(2, a), 0);
  fflush(stdout);
  FILE *out = cr_get_redirected_stdout();
  char buf[256] = "";
  cr_assert_not_null(fgets(buf, sizeof buf, out));
  cr_expect(strncmp(buf, "usage: vqcheck report RUN_DIR", 29) == 0, "%s", buf);
}
