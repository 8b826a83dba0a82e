/* test_not_compared.c: what has no replica, or could not be digested, is
 * said, not hidden (issue 24). Runs the built vqcheck (vqc_test_cli()) on
 * run directories written here as `vqcheck watch` leaves them: per-rank
 * traces (trace.h) whose fully sharded pieces name a group of one rank,
 * and live records (ledger_analysis.h) holding the Python bridge's
 * {"event":"not_digested","tensor","why","step"} lines.
 *
 *   analyze_names_what_was_not_compared  run.json's analysis lists the
 *                      pieces without a replica ({"tensor","shard"}, with
 *                      the count of lines and of pieces) and the tensors
 *                      not digested ({"rank","tensor","why","step"}), and
 *                      report.md, report.html and junit.xml name them;
 *                      never a finding, exit 0;
 *   unchecked_contents_are_no_verdict  tensors whose contents went
 *                      unchecked ("unchecked" anything but false) make the
 *                      verdict "not everything was checked" (exit 3),
 *                      naming 3 and counting the rest; tensors with
 *                      nothing to compare (a meta one) never do;
 *   garbage_not_digested_lines_break_nothing  a line without a tensor
 *                      name is skipped and named in a warning; a mistyped
 *                      why or step is said as such; an over-long name is
 *                      cut at a character's end; a cut last line is
 *                      ignored; the output stays valid UTF-8; lines
 *                      without "unchecked" (an older bridge's) went
 *                      unchecked, exit 3;
 *   the_lists_are_bounded  140 pieces without a replica: run.json lists
 *                      the first 100 and counts 140; report.md names 20
 *                      and says how many more;
 *   compare_names_pieces_without_a_replica  `vqcheck compare`: the same
 *                      facts in run.json's compare section and report.md;
 *   one_rank_is_not_no_replica  a one-rank job's tensors (no group) are
 *                      not listed as having no replica (that is a job with
 *                      nothing to compare, said elsewhere).
 *
 * $VQC_TEST_CLI names another vqcheck to test: a build from before these
 * lists fails every case but the last. */
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
#include "utf8.h"

static char tmpdir[256];

static void make_tmpdir(void) {
  cr_assert(vqc_test_temp_dir(tmpdir, sizeof tmpdir,
                              "/tmp/vqc-test-not-compared-XXXXXX") != NULL,
            "mkdtemp: %s", strerror(errno));
}

static void remove_tmpdir(void) { vqc_test_remove_dir(tmpdir); }

TestSuite(not_compared, .init = make_tmpdir, .fini = remove_tmpdir,
          .timeout = 120);

/* ---- helpers */

static vqc_spawn_result run_cli(const char *first, ...) {
  vqc_spawn_result r;
  va_list ap;
  va_start(ap, first);
  int rc = vqc_spawn_vcapture(&r, vqc_test_cli(), "VQC_DEBUG", NULL, first, ap);
  va_end(ap);
  cr_assert_eq(rc, 0, "cannot run %s: %s", vqc_test_cli(), strerror(rc));
  return r;
}

static char *dir_in(char *buf, size_t n, const char *name) {
  snprintf(buf, n, "%s/%s", tmpdir, name);
  return buf;
}

/* Appends text to dir/name. */
static void append(const char *dir, const char *name, const char *text) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "a");
  cr_assert_not_null(f, "%s: %s", path, strerror(errno));
  fputs(text, f);
  cr_assert_eq(fclose(f), 0);
}

/* One trace line of rank r. group: JSON array text or NULL; shard: NULL
 * for none. */
static void trace_line(const char *dir, int r, int step, const char *tensor,
                       unsigned long long digest, const char *group,
                       const char *shard) {
  char text[1024], name[64];
  int k = snprintf(text, sizeof text,
                   "{\"schema\":\"vqcheck-trace/1\",\"rank\":%d,\"step\":%d,"
                   "\"tensor\":\"%s\",\"dtype\":\"float32\",\"shape\":[4],"
                   "\"digest_algo\":\"vqc-xxh3-tree-1\",\"digest\":"
                   "\"%016llx\"", r, step, tensor, digest);
  if (group) k += snprintf(text + k, sizeof text - (size_t)k, ",\"group\":%s",
                           group);
  if (shard) k += snprintf(text + k, sizeof text - (size_t)k,
                           ",\"shard\":\"%s\"", shard);
  snprintf(text + k, sizeof text - (size_t)k, "}\n");
  snprintf(name, sizeof name, "rank-%d.trace.jsonl", r);
  append(dir, name, text);
}

/* A FULL_SHARD-like job of `ranks` ranks over `steps` steps: `pieces`
 * flat parameters per rank, each its own rank's alone (group [r], shard
 * "flat:r/ranks"), and "ln.weight" replicated everywhere (compared). */
static void sharded_traces(const char *dir, int ranks, int steps,
                           int pieces) {
  for (int r = 0; r < ranks; r++)
    for (int step = 0; step < steps; step++) {
      for (int p = 0; p < pieces; p++) {
        char tensor[64], group[32], shard[32];
        snprintf(tensor, sizeof tensor, "flat%d", p);
        snprintf(group, sizeof group, "[%d]", r);
        snprintf(shard, sizeof shard, "flat:%d/%d", r, ranks);
        trace_line(dir, r, step, tensor, 0x100u + (unsigned)(r * 64 + p),
                   group, shard);
      }
      trace_line(dir, r, step, "ln.weight", 0xc0, NULL, NULL);
    }
}

/* Rank r's live record: a start line, `middle` (lines, may be ""), a step
 * line per step, a clean end, then `tail` (may be "", e.g. a cut line). */
static void live_record(const char *dir, int r, int ranks, int steps,
                        const char *middle, const char *tail) {
  char name[64], text[256];
  snprintf(name, sizeof name, "rank-%d.live.jsonl", r);
  snprintf(text, sizeof text, "{\"event\":\"start\",\"rank\":%d,\"size\":%d,"
           "\"pid\":%d,\"host\":\"node0\"}\n", r, ranks, 1000 + r);
  append(dir, name, text);
  append(dir, name, middle);
  for (int s = 0; s < steps; s++) {
    snprintf(text, sizeof text, "{\"event\":\"step\",\"step\":%d}\n", s);
    append(dir, name, text);
  }
  snprintf(text, sizeof text, "{\"event\":\"finished\",\"status\":\"VQC_OK\","
           "\"step\":%d}\n", steps - 1);
  append(dir, name, text);
  append(dir, name, tail);
}

static json_t *load_json(const char *dir, const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  json_error_t err;
  json_t *j = json_load_file(path, 0, &err);
  cr_assert_not_null(j, "%s: %s", path, err.text);
  return j;
}

static char *read_in(const char *dir, const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  char *text = vqc_read_file(path);
  cr_assert_not_null(text, "%s was not written", path);
  cr_expect(vqc_utf8_valid(text, strlen(text)), "%s is not valid UTF-8",
            path);
  return text;
}

static long long int_at(const json_t *o, const char *key) {
  const json_t *v = json_object_get(o, key);
  cr_assert(json_is_integer(v), "'%s' is not an integer", key);
  return (long long)json_integer_value(v);
}

static const char *str_at(const json_t *o, const char *key) {
  const json_t *v = json_object_get(o, key);
  cr_assert(json_is_string(v), "'%s' is not a string", key);
  return json_string_value(v);
}

/* `vqcheck analyze dir --quiet`: its exit code is want; run.json back. */
static json_t *analyze(const char *dir, int want, char **err) {
  vqc_spawn_result r = run_cli("analyze", dir, "--quiet", NULL);
  cr_expect_eq(r.code, want, "analyze exit %d (wanted %d); stderr: %s",
               r.code, want, r.err);
  if (err) *err = strdup(r.err ? r.err : "");
  vqc_spawn_result_free(&r);
  return load_json(dir, "run.json");
}

/* ---- cases */

Test(not_compared, analyze_names_what_was_not_compared) {
  char dir[512];
  cr_assert_eq(mkdir(dir_in(dir, sizeof dir, "run"), 0777), 0);
  sharded_traces(dir, 2, 2, 2);
  static const char skips[] =
      "{\"event\":\"not_digested\",\"tensor\":\"emb.weight\",\"why\":\"its "
      "storage is freed: no data here\",\"step\":0,\"unchecked\":false}\n"
      "{\"event\":\"not_digested\",\"tensor\":\"pos.bias\",\"why\":\"a meta "
      "tensor\",\"step\":1,\"unchecked\":false}\n";
  live_record(dir, 0, 2, 2, skips, "");
  live_record(dir, 1, 2, 2, skips, "");

  json_t *j = analyze(dir, 0, NULL);
  cr_expect_eq(json_array_size(json_object_get(j, "findings")), 0,
               "a tensor not compared is never a finding");
  cr_expect_eq(int_at(j, "exit_code"), 0);
  const json_t *a = json_object_get(j, "analysis");
  cr_assert(json_is_object(a));
  /* 2 ranks x 2 steps x 2 pieces; 4 distinct (tensor, shard). */
  cr_expect_eq(int_at(a, "no_replica"), 8);
  cr_expect_eq(int_at(a, "no_replica_tensor_count"), 4);
  cr_expect_eq(int_at(a, "digests_compared"), 2, "ln.weight, each step");
  const json_t *lone = json_object_get(a, "no_replica_tensors");
  cr_assert_eq(json_array_size(lone), 4, "%zu pieces listed",
               json_array_size(lone));
  /* In the order met: the lowest rank's file first. */
  cr_expect_str_eq(str_at(json_array_get(lone, 0), "tensor"), "flat0");
  cr_expect_str_eq(str_at(json_array_get(lone, 0), "shard"), "flat:0/2");
  cr_expect_str_eq(str_at(json_array_get(lone, 3), "tensor"), "flat1");
  cr_expect_str_eq(str_at(json_array_get(lone, 3), "shard"), "flat:1/2");

  const json_t *nd = json_object_get(a, "not_digested");
  cr_assert_eq(json_array_size(nd), 4, "%zu not digested",
               json_array_size(nd));
  cr_expect_eq(int_at(a, "not_digested_count"), 4);
  const json_t *e = json_array_get(nd, 2); /* rank 1's first */
  cr_expect_eq(int_at(e, "rank"), 1);
  cr_expect_str_eq(str_at(e, "tensor"), "emb.weight");
  cr_expect_str_eq(str_at(e, "why"), "its storage is freed: no data here");
  cr_expect(json_is_false(json_object_get(e, "unchecked")));
  cr_expect_eq(int_at(e, "step"), 0);
  json_decref(j);

  char *md = read_in(dir, "report.md");
  cr_expect_not_null(strstr(md, "## Not compared"), "%s", md);
  cr_expect_not_null(strstr(md, "no replica: not comparable: 8 lines, 4 "
                                "tensors: flat0 (flat:0/2), flat1 "
                                "(flat:0/2), flat0 (flat:1/2), flat1 "
                                "(flat:1/2)"), "%s", md);
  cr_expect_not_null(strstr(md, "not digested: emb.weight on ranks 0, 1: its "
                                "storage is freed: no data here"),
                     "%s", md);
  cr_expect_not_null(strstr(md, "not digested: pos.bias on ranks 0, 1: a "
                                "meta tensor"), "%s", md);
  free(md);
  char *html = read_in(dir, "report.html");
  cr_expect_not_null(strstr(html, "<section id=\"not-compared\">"));
  cr_expect_not_null(strstr(html, "<a href=\"#not-compared\">"));
  cr_expect_not_null(strstr(html, "no replica: not comparable: 8 lines, 4 "
                                  "tensors: flat0 (flat:0/2)"), "%s", html);
  cr_expect_not_null(strstr(html, "not digested: emb.weight on ranks 0, 1: "
                                  "its storage is freed"));
  free(html);
  char *junit = read_in(dir, "junit.xml");
  cr_expect_not_null(strstr(junit, "<property name=\"not_compared."
                                   "no_replica\" value=\"no replica: not "
                                   "comparable: 8 lines, 4 tensors"),
                     "%s", junit);
  cr_expect_not_null(strstr(junit, "<property name=\"not_compared."
                                   "not_digested\" value=\"not digested: "
                                   "pos.bias on ranks 0, 1: a meta tensor\""),
                     "%s", junit);
  cr_expect_null(strstr(junit, "<failure"), "%s", junit);
  free(junit);
}

Test(not_compared, garbage_not_digested_lines_break_nothing) {
  char dir[512];
  cr_assert_eq(mkdir(dir_in(dir, sizeof dir, "run"), 0777), 0);
  sharded_traces(dir, 2, 1, 1);
  /* A 600-byte name of 2-byte characters: the cut at 255 bytes falls
   * inside one, so 254 bytes are kept. */
  char long_name[700];
  size_t k = 0;
  while (k < 600) {
    long_name[k++] = (char)0xc3;
    long_name[k++] = (char)0xa9; /* U+00E9 */
  }
  long_name[k] = '\0';
  char middle[4096];
  snprintf(middle, sizeof middle,
           "{\"event\":\"not_digested\",\"tensor\":42,\"why\":\"x\"}\n"
           "{\"event\":\"not_digested\"}\n"
           "{\"event\":\"not_digested\",\"tensor\":\"\",\"why\":\"empty\"}\n"
           "{\"event\":\"not_digested\",\"tensor\":\"w\",\"why\":{\"a\":1},"
           "\"step\":\"three\"}\n"
           "{\"event\":\"not_digested\",\"tensor\":\"w\",\"why\":\"again\","
           "\"step\":-4}\n"
           "{\"event\":\"not_digested\",\"tensor\":\"%s\",\"why\":\"long\","
           "\"step\":0}\n"
           "{\"event\":\"not_digested\",\"tensor\":\"q\\u00e9\\u0001\","
           "\"why\":\"ctl\\u0001\",\"step\":0}\n",
           long_name);
  live_record(dir, 0, 2, 1, middle,
              "{\"event\":\"not_digested\",\"tensor\":\"cut"); /* no \n */
  live_record(dir, 1, 2, 1, "", "");

  /* Lines without "unchecked" (an older bridge's) are contents that went
   * unchecked: no verdict. */
  char *err = NULL;
  json_t *j = analyze(dir, 3, &err);
  cr_expect_not_null(strstr(err, "rank-0.live.jsonl:2: a not_digested line "
                                 "without a tensor name (\"tensor\"): "
                                 "skipped (3 such lines in all)"),
                     "stderr: %s", err);
  free(err);
  const json_t *a = json_object_get(j, "analysis");
  const json_t *nd = json_object_get(a, "not_digested");
  /* w (once: the second w of rank 0 repeats it), the long name, q. */
  cr_assert_eq(json_array_size(nd), 3, "%zu listed", json_array_size(nd));
  cr_expect_eq(int_at(a, "not_digested_count"), 4);
  const json_t *w = json_array_get(nd, 0);
  cr_expect_str_eq(str_at(w, "tensor"), "w");
  cr_expect_str_eq(str_at(w, "why"), "no reason given");
  cr_expect(json_is_null(json_object_get(w, "step")));
  const char *cut = str_at(json_array_get(nd, 1), "tensor");
  cr_expect_eq(strlen(cut), 254, "cut to %zu bytes", strlen(cut));
  cr_expect(vqc_utf8_valid(cut, strlen(cut)));
  cr_expect_str_eq(str_at(json_array_get(nd, 2), "tensor"),
                   "q\xc3\xa9?", "control characters are replaced");
  const char *msg = str_at(json_object_get(j, "training"), "message");
  static const char head[] = "not everything was checked: tensor 'w' was "
                             "not digested on rank 0 (no reason given); "
                             "tensor '";
  cr_expect(strncmp(msg, head, strlen(head)) == 0, "%s", msg);
  cr_expect(vqc_utf8_valid(msg, strlen(msg)));
  json_decref(j);
  char *md = read_in(dir, "report.md");
  cr_expect_not_null(strstr(md, "not digested: w on rank 0: no reason "
                                "given"), "%s", md);
  free(md);
  free(read_in(dir, "report.html"));
  free(read_in(dir, "junit.xml"));
}

Test(not_compared, unchecked_contents_are_no_verdict) {
  char dir[512];
  cr_assert_eq(mkdir(dir_in(dir, sizeof dir, "run"), 0777), 0);
  sharded_traces(dir, 2, 2, 1);
  static const char both[] =
      "{\"event\":\"not_digested\",\"tensor\":\"a\",\"why\":\"its element "
      "type torch.bits8 has no digest code\",\"step\":0,\"unchecked\":true}\n"
      "{\"event\":\"not_digested\",\"tensor\":\"m\",\"why\":\"a meta "
      "tensor has no data\",\"step\":0,\"unchecked\":false}\n"
      "{\"event\":\"not_digested\",\"tensor\":\"b\",\"why\":\"tensors on "
      "xla:0 are not digested\",\"step\":1,\"unchecked\":true}\n";
  static const char one[] = /* rank 1 only; "yes" is not false */
      "{\"event\":\"not_digested\",\"tensor\":\"c\",\"why\":\"x\","
      "\"step\":1,\"unchecked\":\"yes\"}\n"
      "{\"event\":\"not_digested\",\"tensor\":\"d\",\"why\":\"y\","
      "\"step\":1,\"unchecked\":true}\n";
  char rank1[1024];
  snprintf(rank1, sizeof rank1, "%s%s", both, one);
  live_record(dir, 0, 2, 2, both, "");
  live_record(dir, 1, 2, 2, rank1, "");
  json_t *j = analyze(dir, 3, NULL);
  cr_expect_eq(json_array_size(json_object_get(j, "findings")), 0);
  const json_t *tr = json_object_get(j, "training");
  cr_expect_str_eq(str_at(tr, "status"), "VQC_EUNSUPPORTED");
  cr_expect_str_eq(str_at(tr, "message"),
                   "not everything was checked: tensor 'a' was not "
                   "digested on ranks 0, 1 (its element type torch.bits8 "
                   "has no digest code); tensor 'b' was not digested on "
                   "ranks 0, 1 (tensors on xla:0 are not digested); tensor "
                   "'c' was not digested on rank 1 (x); and 1 more tensor");
  const json_t *nd = json_object_get(json_object_get(j, "analysis"),
                                     "not_digested");
  cr_expect(json_is_true(json_object_get(json_array_get(nd, 0),
                                         "unchecked")));
  cr_expect(json_is_false(json_object_get(json_array_get(nd, 1),
                                          "unchecked")));
  json_decref(j);
  char *junit = read_in(dir, "junit.xml");
  cr_expect_not_null(strstr(junit, "not everything was checked"), "%s",
                     junit);
  free(junit);

  /* Only tensors with nothing to compare: clean. */
  char clean[512];
  cr_assert_eq(mkdir(dir_in(clean, sizeof clean, "clean"), 0777), 0);
  sharded_traces(clean, 2, 2, 1);
  static const char nothing[] =
      "{\"event\":\"not_digested\",\"tensor\":\"m\",\"why\":\"a meta "
      "tensor has no data\",\"step\":0,\"unchecked\":false}\n";
  live_record(clean, 0, 2, 2, nothing, "");
  live_record(clean, 1, 2, 2, nothing, "");
  json_decref(analyze(clean, 0, NULL));
}

Test(not_compared, the_lists_are_bounded) {
  char dir[512];
  cr_assert_eq(mkdir(dir_in(dir, sizeof dir, "run"), 0777), 0);
  sharded_traces(dir, 2, 1, 70); /* 140 pieces without a replica */
  live_record(dir, 0, 2, 1, "", "");
  live_record(dir, 1, 2, 1, "", "");
  json_t *j = analyze(dir, 0, NULL);
  const json_t *a = json_object_get(j, "analysis");
  cr_expect_eq(int_at(a, "no_replica"), 140);
  cr_expect_eq(int_at(a, "no_replica_tensor_count"), 140);
  cr_expect_eq(json_array_size(json_object_get(a, "no_replica_tensors")),
               100);
  cr_expect_eq(json_array_size(json_object_get(a, "not_digested")), 0);
  json_decref(j);
  char *md = read_in(dir, "report.md");
  cr_expect_not_null(strstr(md, "140 lines, 140 tensors: flat0 (flat:0/2)"),
                     "%s", md);
  cr_expect_not_null(strstr(md, "flat19 (flat:0/2), and 120 more"), "%s",
                     md);
  cr_expect_null(strstr(md, "flat20 (flat:0/2)"), "%s", md);
  free(md);
}

Test(not_compared, compare_names_pieces_without_a_replica) {
  char traces[512], out[512];
  cr_assert_eq(mkdir(dir_in(traces, sizeof traces, "t"), 0777), 0);
  sharded_traces(traces, 2, 3, 1);
  vqc_spawn_result r = run_cli("compare", traces, "--out",
                               dir_in(out, sizeof out, "out"), NULL);
  cr_expect_eq(r.code, 0, "compare exit %d; stderr: %s", r.code, r.err);
  cr_expect_not_null(strstr(r.out, "6 without a replica (2 tensors whose "
                                   "group is one rank"), "stdout: %s", r.out);
  vqc_spawn_result_free(&r);
  json_t *j = load_json(out, "run.json");
  const json_t *c = json_object_get(j, "compare");
  cr_expect_eq(int_at(c, "no_replica"), 6);
  cr_expect_eq(int_at(c, "no_replica_tensor_count"), 2);
  const json_t *lone = json_object_get(c, "no_replica_tensors");
  cr_assert_eq(json_array_size(lone), 2);
  cr_expect_str_eq(str_at(json_array_get(lone, 1), "shard"), "flat:1/2");
  json_decref(j);
  char *md = read_in(out, "report.md");
  cr_expect_not_null(strstr(md, "no replica: not comparable: 6 lines, 2 "
                                "tensors: flat0 (flat:0/2), flat0 "
                                "(flat:1/2)"), "%s", md);
  free(md);
}

Test(not_compared, one_rank_is_not_no_replica) {
  char dir[512];
  cr_assert_eq(mkdir(dir_in(dir, sizeof dir, "run"), 0777), 0);
  trace_line(dir, 0, 0, "w", 0x1, NULL, NULL);
  trace_line(dir, 0, 1, "w", 0x2, NULL, NULL);
  live_record(dir, 0, 1, 2, "", "");
  json_t *j = analyze(dir, 0, NULL);
  const json_t *a = json_object_get(j, "analysis");
  cr_expect_eq(int_at(a, "no_replica"), 0);
  json_decref(j);
  char *md = read_in(dir, "report.md");
  cr_expect_null(strstr(md, "Not compared"), "%s", md);
  free(md);
}
