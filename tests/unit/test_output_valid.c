/* test_output_valid.c: vqcheck's own output is always valid (issue 23):
 * every truncation is UTF-8 safe, every string that goes into run.json,
 * the reports and JUnit is valid UTF-8 (bad bytes replaced, and said so),
 * and a run.json that fails vqcheck's own validation anyway still gets its
 * reports and the verdict's exit code, never 2.
 *
 *   utf8_*              the one helper (checkers/utf8.h): what jansson
 *                       accepts, cuts where a character ends, a tail's
 *                       head, NUL bytes;
 *   finding_*           a finding's JSON form (findings.h): a message cut
 *                       by vsnprintf inside an emoji, strings longer than
 *                       a finding holds (the bridge's: were refused, exit
 *                       2), the bridge's site object, the notes that say
 *                       what was repaired, a detail nested past jansson's
 *                       limit (run.json did not parse back);
 *   nasty_inputs        the fuzz target's check (tests/fuzz/
 *                       watch_output_check.h) on a fixed set of inputs, so
 *                       CI checks it without libFuzzer;
 *   analyze_*           the built vqcheck ($VQC_TEST_CLI: another build):
 *                       a bridge findings file with a cut emoji and a
 *                       600-byte message (was exit 2, no reports); a
 *                       run.json that analyze loads but that fails the
 *                       reports' validation (was exit 2, no reports). */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "findings.h"
#include "rundir.h"
#include "spawn_capture.h"
#include "test_paths.h"
#include "utf8.h"
#include "watch_output_check.h"

/* U+1F525 (fire), 4 bytes, and its first 2: an emoji cut by a kill or a
 * byte-wise truncation. */
#define FIRE "\xF0\x9F\x94\xA5"
#define FIRE_CUT "\xF0\x9F"

/* ---- the helper */

Test(output_valid, utf8_char_len_follows_jansson) {
  cr_expect_eq(vqc_utf8_char_len("a", 1), 1);
  cr_expect_eq(vqc_utf8_char_len("\xC3\xA9", 2), 2);       /* é */
  cr_expect_eq(vqc_utf8_char_len("\xE2\x82\xAC", 3), 3);   /* € */
  cr_expect_eq(vqc_utf8_char_len(FIRE, 4), 4);
  cr_expect_eq(vqc_utf8_char_len(FIRE_CUT, 2), 0);         /* cut short */
  cr_expect_eq(vqc_utf8_char_len("\xC0\x80", 2), 0);       /* overlong NUL */
  cr_expect_eq(vqc_utf8_char_len("\xE0\x80\xAF", 3), 0);   /* overlong / */
  cr_expect_eq(vqc_utf8_char_len("\xED\xA0\x80", 3), 0);   /* surrogate */
  cr_expect_eq(vqc_utf8_char_len("\xF4\x90\x80\x80", 4), 0); /* > 10FFFF */
  cr_expect_eq(vqc_utf8_char_len("\x80", 1), 0);
  /* Whatever vqc_utf8_char_len accepts, jansson accepts, and the reverse,
   * for every lead byte with continuation bytes after it. */
  for (int c = 0x80; c < 0x100; c++) {
    for (int k = 0x80; k < 0xC0; k += 0x0F) {
      const char s[5] = {(char)c, (char)k, (char)0x80, (char)0x80, 0};
      const size_t l = vqc_utf8_char_len(s, 4);
      char one[5] = {0};
      memcpy(one, s, l ? l : 1);
      json_t *j = json_stringn(one, l ? l : 1);
      cr_expect_eq(l != 0, j != NULL, "lead 0x%02X then 0x%02X", c, k);
      json_decref(j);
    }
  }
}

Test(output_valid, utf8_copy_replaces_cuts_and_says_so) {
  char out[16];
  size_t n = 0;
  unsigned d = vqc_utf8_copy(out, sizeof out, "ok " FIRE_CUT ".", 6, 0, &n);
  cr_expect_str_eq(out, "ok ??.");
  cr_expect_eq(d, VQC_UTF8_REPLACED);
  /* A cut never splits a character: "ab" + FIRE needs 6 bytes + NUL. */
  d = vqc_utf8_copy(out, 6, "ab" FIRE "c", 7, 0, &n);
  cr_expect_str_eq(out, "ab");
  cr_expect_eq(d, VQC_UTF8_CUT);
  /* A tail that starts inside a character drops the rest of it. */
  d = vqc_utf8_copy(out, sizeof out, "\x94\xA5" "end", 5, VQC_UTF8_TAIL, &n);
  cr_expect_str_eq(out, "end");
  /* NUL and, on request, control characters become '?'. */
  d = vqc_utf8_copy(out, sizeof out, "a\0b\x1b\n", 5, VQC_UTF8_NO_CONTROLS,
                    &n);
  cr_expect_eq(n, 5);
  cr_expect_str_eq(out, "a?b?\n");
  /* In place. */
  char s[] = "x" FIRE_CUT "y";
  cr_expect_eq(vqc_utf8_clean(s, 0), VQC_UTF8_REPLACED);
  cr_expect_str_eq(s, "x??y");
  /* The JSON form is never NULL, and with VQC_UTF8_NOTE it says so. */
  json_t *j = vqc_json_text_opts("bad " FIRE_CUT, 6, VQC_UTF8_NOTE, NULL);
  cr_assert_not_null(j);
  cr_expect_str_eq(json_string_value(j), "bad ??" VQC_UTF8_NOTE_TEXT);
  json_decref(j);
  j = vqc_json_text_opts("good " FIRE, 9, VQC_UTF8_NOTE, NULL);
  cr_expect_str_eq(json_string_value(j), "good " FIRE);
  json_decref(j);
}

/* ---- a finding's JSON form */

/* Whether the JSON array a holds the string s. */
static bool lists(const json_t *a, const char *s) {
  size_t i;
  const json_t *v;
  json_array_foreach(a, i, v) if (strcmp(json_string_value(v), s) == 0)
      return true;
  return false;
}

Test(output_valid, finding_message_cut_inside_an_emoji_keeps_whole_chars) {
  /* 509 bytes of 'a', then the emoji: byte 512 (a NUL) lands inside it. */
  char text[520];
  memset(text, 'a', 509);
  memcpy(text + 509, FIRE, 5);
  vqc_finding x;
  vqc_finding_init(&x, VQC_FINDING_RANK_FAILURE, 1, "%s", text);
  cr_expect_eq(strlen(x.message), 509, "the half emoji is taken back");
  cr_expect(vqc_utf8_valid(x.message, strlen(x.message)));
  json_t *j = vqc_finding_to_json(&x);
  cr_expect(lists(json_object_get(j, "truncated"), "message"));
  cr_expect_null(json_object_get(j, "invalid_utf8"));
  json_decref(j);
  json_decref(x.detail);
}

Test(output_valid, finding_strings_longer_than_a_finding_are_cut_not_refused) {
  /* The bridge writes what Python has: a 600-byte message of emoji, a
   * 200-byte tensor name, a 300-byte site. Each was refused (exit 2). */
  char msg[700] = "lost ", tensor[260] = "t", site[400] = "/x/";
  for (int i = 0; i < 150; i++) strcat(msg, FIRE);
  for (int i = 0; i < 50; i++) strcat(tensor, FIRE);
  for (int i = 0; i < 75; i++) strcat(site, FIRE);
  json_t *j = json_pack("{s:s,s:i,s:[i],s:s,s:s,s:s}", "kind", "lost_inplace",
                        "step", 2, "ranks", 1, "message", msg, "tensor",
                        tensor, "site", site);
  cr_assert_not_null(j);
  vqc_finding x;
  cr_assert_eq(vqc_finding_from_json(j, &x), VQC_OK, "%s", vqc_last_error());
  cr_expect_eq(strlen(x.message), 5 + 4 * 126, "cut where a character ends");
  cr_expect_eq(strncmp(x.message, msg, strlen(x.message)), 0);
  cr_expect_eq(strlen(x.tensor), 1 + 4 * 31);
  cr_expect_eq(strlen(x.site), 3 + 4 * 63);
  cr_expect_eq(x.truncated, VQC_FINDING_TEXT_MESSAGE |
                                VQC_FINDING_TEXT_TENSOR |
                                VQC_FINDING_TEXT_SITE);
  /* Said so, and kept through the JSON form. */
  json_t *out = vqc_finding_to_json(&x);
  const json_t *cut = json_object_get(out, "truncated");
  cr_expect(lists(cut, "message") && lists(cut, "tensor") &&
            lists(cut, "site"));
  vqc_finding back;
  cr_assert_eq(vqc_finding_from_json(out, &back), VQC_OK);
  cr_expect_eq(back.truncated, x.truncated);
  cr_expect_str_eq(back.message, x.message);
  json_decref(back.detail);
  json_decref(out);
  json_decref(x.detail);
  json_decref(j);
}

Test(output_valid, finding_invalid_utf8_note_survives_the_round_trip) {
  vqc_finding x;
  vqc_finding_init(&x, VQC_FINDING_RANK_FAILURE, -1, "died: %s", FIRE_CUT);
  json_t *j = vqc_finding_to_json(&x);
  cr_expect_str_eq(json_string_value(json_object_get(j, "message")),
                   "died: ??");
  cr_expect(lists(json_object_get(j, "invalid_utf8"), "message"));
  vqc_finding back;
  cr_assert_eq(vqc_finding_from_json(j, &back), VQC_OK);
  cr_expect_eq(back.invalid_utf8, VQC_FINDING_TEXT_MESSAGE);
  json_t *again = vqc_finding_to_json(&back);
  cr_expect(json_equal(j, again), "the second trip changes nothing");
  json_decref(again);
  json_decref(back.detail);
  json_decref(j);
  json_decref(x.detail);
}

Test(output_valid, finding_site_object_with_a_long_path_keeps_its_end) {
  /* The bridge's site object, a path of 100 emoji (400 bytes): the end
   * kept from where a character starts, func cut to 40 bytes. */
  char file[420] = "/abs/", func[100] = "f";
  for (int i = 0; i < 100; i++) strcat(file, FIRE);
  strcat(file, ".py");
  for (int i = 0; i < 20; i++) strcat(func, FIRE);
  json_t *j = json_pack("{s:s,s:i,s:[],s:{s:s,s:i,s:s}}", "kind",
                        "lost_inplace", "step", 0, "ranks", "site", "file",
                        file, "line", 7, "func", func);
  vqc_finding x;
  cr_assert_eq(vqc_finding_from_json(j, &x), VQC_OK, "%s", vqc_last_error());
  cr_expect(vqc_utf8_valid(x.site, strlen(x.site)), "%s", x.site);
  const char *want_end = ".py:7 f" FIRE FIRE FIRE FIRE FIRE FIRE FIRE FIRE
                         FIRE;
  const size_t ls = strlen(x.site), le = strlen(want_end);
  cr_assert_geq(ls, le);
  cr_expect_str_eq(x.site + ls - le, want_end);
  cr_expect_eq(x.truncated, VQC_FINDING_TEXT_SITE);
  json_decref(x.detail);
  json_decref(j);
}

Test(output_valid, finding_ranks_and_step_outside_the_schema_are_refused) {
  /* What the reports' validation refuses is refused where it is read,
   * naming the field (a malformed bridge line: exit 2, file:line), never
   * written into run.json. */
  static const char *const bad[] = {
      "{\"kind\":\"divergence\",\"step\":1,\"ranks\":[-1]}",
      "{\"kind\":\"divergence\",\"step\":1,\"ranks\":[4294967296]}",
      "{\"kind\":\"divergence\",\"step\":-2,\"ranks\":[]}"};
  static const char *const field[] = {"'ranks[0]'", "'ranks[0]'", "'step'"};
  for (int i = 0; i < 3; i++) {
    json_t *j = json_loads(bad[i], 0, NULL);
    vqc_finding x;
    cr_expect_eq(vqc_finding_from_json(j, &x), VQC_EPARSE, "%s", bad[i]);
    cr_expect(strstr(vqc_last_error(), field[i]) != NULL, "%s",
              vqc_last_error());
    json_decref(j);
  }
  /* In memory, a negative rank is no rank. */
  vqc_finding x;
  vqc_finding_init(&x, VQC_FINDING_DEADLOCK, -5, "x");
  vqc_finding_add_rank(&x, -1);
  cr_expect_eq(x.nranks, 0);
  json_t *j = vqc_finding_to_json(&x);
  cr_expect_eq(json_integer_value(json_object_get(j, "step")), -1);
  json_decref(j);
  json_decref(x.detail);
}

Test(output_valid, finding_detail_nested_too_deep_is_pruned) {
  /* A detail 2046 levels deep is one jansson reads (at most 2048) in a
   * bridge line, where it sits 1 level down; in run.json it sits 3 levels
   * down, and the file vqcheck wrote did not parse back. */
  enum { DEPTH = 2046 };
  json_t *cur = json_object();
  for (int i = 1; i < DEPTH - 1; i++) {
    json_t *wrap = json_array();
    json_array_append_new(wrap, cur);
    cur = wrap;
  }
  json_t *detail = json_pack("{s:o}", "x", cur);
  vqc_finding x;
  vqc_finding_init(&x, VQC_FINDING_LOST_INPLACE, 1, "deep");
  json_decref(x.detail);
  x.detail = detail;
  vqc_findings list;
  vqc_findings_init(&list);
  cr_assert_eq(vqc_findings_add(&list, &x), VQC_OK);
  json_t *arr = vqc_findings_to_json(&list);
  json_t *doc = json_pack("{s:o}", "findings", arr);
  char *text = json_dumps(doc, 0);
  json_error_t err;
  json_t *back = json_loads(text, 0, &err);
  cr_expect_not_null(back, "run.json's findings do not parse back: %s",
                     err.text);
  cr_expect(strstr(text, "nested too deep") != NULL);
  /* The same detail as a bridge line reads, so it can arrive. */
  json_t *line = json_pack("{s:O}", "detail", detail);
  char *ltext = json_dumps(line, 0);
  json_t *lback = json_loads(ltext, 0, &err);
  cr_expect_not_null(lback, "the line itself parses: %s", err.text);
  json_decref(lback);
  free(ltext);
  json_decref(line);
  json_decref(back);
  free(text);
  json_decref(doc);
  vqc_findings_free(&list);
}

/* ---- the fuzz target's check, on fixed inputs */

static void check_one(const char *what, woc_input *in) {
  char dir[128];
  cr_assert_not_null(vqc_test_temp_dir(dir, sizeof dir,
                                       "/tmp/vqc-test-output-valid-XXXXXX"));
  const char *why = woc_check(dir, in);
  cr_expect_null(why, "%s: %s", what, why);
  vqc_test_remove_dir(dir);
}

#define PART(in, p, s) ((in).part[p] = (s), (in).len[p] = sizeof(s) - 1)

Test(output_valid, nasty_inputs, .timeout = 120) {
  /* 1. Last words that end inside an emoji, and every text cut so. */
  woc_input in;
  memset(&in, 0, sizeof in);
  PART(in, WOC_STDERR, "Traceback:\nRuntimeError: gloo mismatch " FIRE_CUT);
  PART(in, WOC_MESSAGE, "size mismatch " FIRE_CUT);
  PART(in, WOC_TENSOR, "w" FIRE_CUT);
  PART(in, WOC_SITE, "/home/u/caf\xE9.py:12 train");
  PART(in, WOC_DETAIL, "\xFF\xFE");
  PART(in, WOC_ARG, "job-" FIRE_CUT ".py");
  check_one("cut emoji", &in);

  /* 2. Control characters, NUL, lone surrogates (CESU), overlong forms,
   * code points past U+10FFFF. */
  memset(&in, 0, sizeof in);
  PART(in, WOC_STDERR, "\x1b[31mred\x1b[0m\0after NUL\r\n\xED\xA0\x80\n");
  PART(in, WOC_MESSAGE, "\xC0\xAF\xE0\x80\xAF\xF4\x90\x80\x80\x7F");
  PART(in, WOC_TENSOR, "\xED\xB0\x80");
  PART(in, WOC_SITE, "\xF8\x88\x80\x80\x80:1 f");
  PART(in, WOC_ARG, "\x01\x02");
  check_one("controls and bad forms", &in);

  /* 3. Bridge and live-record lines with long and escaped strings. */
  /* big: 160 escaped surrogate pairs (12 bytes each, 1920 in all), longer
   * than any string the readers keep; the lines hold it whole. */
  static char findings[5 * 2048 + 512], live[3 * 2048 + 512], big[2048];
  big[0] = '\0';
  for (int i = 0; i < 160; i++) strcat(big, "\\ud83d\\udd25"); /* escaped */
  snprintf(findings, sizeof findings,
           "{\"kind\":\"lost_inplace\",\"step\":1,\"message\":\"%s\","
           "\"tensor\":\"%s\",\"site\":{\"file\":\"%s\",\"line\":3,"
           "\"func\":\"%s\"},\"detail\":{\"s\":\"%s\"}}\n",
           big, big, big, big, big);
  snprintf(live, sizeof live,
           "{\"event\":\"start\",\"rank\":1,\"size\":2,\"pid\":1,"
           "\"host\":\"h\"}\n"
           "{\"event\":\"finding\",\"finding\":{\"kind\":\"nonfinite\","
           "\"step\":0,\"ranks\":[1],\"message\":\"%s\",\"tensor\":\"%s\","
           "\"site\":\"%s\"}}\n",
           big, big, big);
  memset(&in, 0, sizeof in);
  in.part[WOC_FINDINGS] = findings;
  in.len[WOC_FINDINGS] = strlen(findings);
  in.part[WOC_LIVE] = live;
  in.len[WOC_LIVE] = strlen(live);
  PART(in, WOC_STDERR, "ok");
  check_one("long bridge and live-record strings", &in);

  /* 4. A hang marker and a stack dump whose sites hold bad bytes, and a
   * stderr tail longer than watch keeps, starting inside a character. */
  static char tail[6000];
  size_t k = 0;
  while (k + 3 <= 5000) {
    memcpy(tail + k, "\xE2\x82\xAC", 3);
    k += 3;
  }
  memcpy(tail + k, "\xE2\x82", 2);
  k += 2;
  memset(&in, 0, sizeof in);
  in.part[WOC_STDERR] = tail;
  in.len[WOC_STDERR] = k;
  PART(in, WOC_HANG, "{\"rank\":0,\"op\":\"all_reduce\xF0\x9F\",\"seq\":7,"
                     "\"site\":\"/abs/tr\xE9.py:15 ma\xFFin\",\"step\":2,"
                     "\"waited_s\":5.1,\"last_completed\":{\"op\":\"x\"}}");
  PART(in, WOC_LIVE, "{\"event\":\"start\",\"rank\":1,\"size\":2,\"pid\":1,"
                     "\"host\":\"h\xFF\"}\n");
  PART(in, WOC_STACKS, "Current thread 0x1 (most recent call first):\n"
                       "  File \"/abs/\xF0\x9F.py\", line 3 in f\xE9\n\n");
  check_one("hang marker and stacks", &in);

  /* 5. Nothing at all. */
  memset(&in, 0, sizeof in);
  check_one("empty", &in);
}

/* ---- the built vqcheck */

static char tmpdir[256];

static void make_tmpdir(void) {
  cr_assert(vqc_test_temp_dir(tmpdir, sizeof tmpdir,
                              "/tmp/vqc-test-output-valid-XXXXXX") != NULL,
            "mkdtemp: %s", strerror(errno));
}

static void remove_tmpdir(void) { vqc_test_remove_dir(tmpdir); }

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f, "%s: %s", path, strerror(errno));
  fputs(text, f);
  fclose(f);
}

/* `vqcheck analyze DIR`, and the three reports written and valid UTF-8. */
static vqc_spawn_result analyze_expecting_reports(const char *dir) {
  const char *argv[] = {vqc_test_cli(), "analyze", dir, NULL};
  vqc_spawn_result r;
  cr_assert_eq(vqc_spawn_capture(&r, argv, "VQC_DEBUG", NULL), 0);
  static const char *const names[] = {"report.md", "report.html",
                                      "junit.xml", "run.json"};
  for (int i = 0; i < 4; i++) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    char *text = vqc_read_file(path);
    cr_expect_not_null(text, "%s was not written (exit %d; stderr: %s)",
                       names[i], r.code, r.err);
    if (text)
      cr_expect(vqc_utf8_valid(text, strlen(text)), "%s is not UTF-8",
                names[i]);
    free(text);
  }
  return r;
}

Test(output_valid, lone_surrogate_escapes_read_as_question_marks) {
  /* Python's json.dumps of a surrogate-escaped name: valid JSON text that
   * jansson refuses. A pair stays a pair; "\\\\udcff" is a backslash and
   * text, no escape. */
  char a[] = "{\"f\":\"caf\\udcff/x \\ud83d\\udd25 \\\\udcff \\ud800\"}";
  cr_expect_eq(vqc_json_mend_surrogates(a, strlen(a)), 2);
  cr_expect_str_eq(a, "{\"f\":\"caf\\u003f/x \\ud83d\\udd25 \\\\udcff "
                      "\\u003f\"}");
  const char *line = "{\"tensor\":\"w\\udcff\",\"n\":1}";
  bool mended = false;
  json_error_t err;
  cr_assert_null(json_loads(line, 0, &err));
  json_t *j = vqc_json_loadb_mended(line, strlen(line), 0, &err, &mended);
  cr_assert_not_null(j, "%s", err.text);
  cr_expect(mended);
  cr_expect_str_eq(json_string_value(json_object_get(j, "tensor")), "w?");
  json_decref(j);
  /* Other faults stay faults; a clean line is not "mended". */
  cr_expect_null(vqc_json_loadb_mended("{\"a\":", 5, 0, &err, &mended));
  j = vqc_json_loadb_mended("{\"a\":\"\\ud83d\\udd25\"}", 20, 0, &err,
                            &mended);
  cr_expect_not_null(j);
  cr_expect(!mended);
  json_decref(j);
}

TestSuite(output_valid_cli, .init = make_tmpdir, .fini = remove_tmpdir,
          .timeout = 120);

Test(output_valid_cli, analyze_bridge_file_with_cut_and_long_strings) {
  /* A findings line of the bridge: the site object's path cut inside an
   * emoji by the reader's room, a 600-byte message. Was exit 2:
   * "finding fields 'tensor', 'site' and 'message' must be (short)
   * strings", and no report. */
  char line[4096] = "{\"kind\":\"lost_inplace\",\"step\":1,\"ranks\":[0],"
                    "\"message\":\"lost ";
  for (int i = 0; i < 150; i++) strcat(line, FIRE);
  strcat(line, "\",\"site\":{\"file\":\"/abs/");
  for (int i = 0; i < 100; i++) strcat(line, FIRE);
  /* "x.py": the reader's room (255 bytes less ":7 f") then starts 153
   * bytes into the run of emoji, inside one. */
  strcat(line, "x.py\",\"line\":7,\"func\":\"f\"}}\n");
  char path[512];
  snprintf(path, sizeof path, "%s/rank-0.findings.jsonl", tmpdir);
  write_text(path, line);
  vqc_spawn_result r = analyze_expecting_reports(tmpdir);
  cr_expect_eq(r.code, 1, "exit %d; stderr: %s", r.code, r.err);
  snprintf(path, sizeof path, "%s/run.json", tmpdir);
  json_t *doc = NULL;
  cr_assert_eq(vqc_run_json_load(path, &doc), VQC_OK, "%s", vqc_last_error());
  const json_t *f = json_array_get(json_object_get(doc, "findings"), 0);
  cr_expect(lists(json_object_get(f, "truncated"), "message"));
  cr_expect(lists(json_object_get(f, "truncated"), "site"));
  json_decref(doc);
  vqc_spawn_result_free(&r);
}

Test(output_valid_cli, analyze_rewritten_run_json_failing_validation_still_reports) {
  /* A run.json analyze reads (schema_version, findings) but the reports'
   * validation refuses once rewritten (no "scenario", no "training"). Was
   * exit 2 and no report; now the verdict's exit 1, a warning naming the
   * validation error, a rebuilt run.json that says why, and the reports. */
  char path[512];
  snprintf(path, sizeof path, "%s/run.json", tmpdir);
  write_text(path, "{\"schema_version\": 1, \"findings\": [{\"kind\": "
                   "\"divergence\", \"step\": 1, \"ranks\": [1], "
                   "\"tensor\": \"w\", \"message\": \"w differs\"}]}\n");
  vqc_spawn_result r = analyze_expecting_reports(tmpdir);
  cr_expect_eq(r.code, 1, "exit %d; stderr: %s", r.code, r.err);
  cr_expect(strstr(r.err, "fails its own validation") != NULL &&
                strstr(r.err, "field 'scenario': missing") != NULL,
            "%s", r.err);
  json_t *doc = NULL;
  cr_assert_eq(vqc_run_json_load(path, &doc), VQC_OK, "%s", vqc_last_error());
  cr_expect(strstr(json_string_value(json_object_get(doc,
                                                     "validation_error")),
                   "scenario") != NULL);
  cr_expect_eq(json_integer_value(json_object_get(doc, "exit_code")), 1);
  cr_expect_eq(json_array_size(json_object_get(doc, "findings")), 1);
  json_decref(doc);
  char *md = NULL;
  snprintf(path, sizeof path, "%s/report.md", tmpdir);
  md = vqc_read_file(path);
  cr_expect(md && strstr(md, "w differs"), "the finding is in the report");
  free(md);
  vqc_spawn_result_free(&r);
  /* Analysing again reads the rebuilt one: valid, nothing to repair. */
  r = analyze_expecting_reports(tmpdir);
  cr_expect_eq(r.code, 1, "%s", r.err);
  cr_expect(strstr(r.err, "validation") == NULL, "%s", r.err);
  vqc_spawn_result_free(&r);
}

Test(output_valid_cli, analyze_lines_with_lone_surrogate_escapes) {
  /* What the bridge wrote before it cleaned its strings (a job under a
   * folder named with a byte that is not UTF-8): a live record whose
   * events and ledger lines, and a findings line, hold \udcff escapes.
   * Was exit 2 ("not a JSON object") and no report. */
  char path[512];
  snprintf(path, sizeof path, "%s/rank-0.live.jsonl", tmpdir);
  write_text(path,
             "{\"event\":\"start\",\"rank\":0,\"size\":1,\"pid\":1,"
             "\"host\":\"h\\udcff\"}\n"
             "{\"seq\":1,\"rank\":0,\"op\":\"all_reduce\",\"redop\":\"sum\","
             "\"dtype\":\"float32\",\"count\":4,\"root\":-1,"
             "\"group_size\":1,\"file\":\"/caf\\udcff/j.py\",\"line\":3,"
             "\"func\":\"f\",\"t_enter_ns\":1,\"t_exit_ns\":2,"
             "\"state\":\"done\",\"status\":\"VQC_OK\"}\n"
             "{\"event\":\"step\",\"step\":0}\n"
             "{\"event\":\"finished\",\"status\":\"VQC_OK\",\"step\":0}\n");
  snprintf(path, sizeof path, "%s/rank-0.findings.jsonl", tmpdir);
  write_text(path, "{\"kind\":\"lost_inplace\",\"step\":0,\"ranks\":[0],"
                   "\"tensor\":\"w\\udcff\",\"message\":\"lost\","
                   "\"site\":{\"file\":\"/caf\\udcff/j.py\",\"line\":3,"
                   "\"func\":\"f\"}}\n");
  vqc_spawn_result r = analyze_expecting_reports(tmpdir);
  cr_expect_eq(r.code, 1, "exit %d; stderr: %s", r.code, r.err);
  snprintf(path, sizeof path, "%s/run.json", tmpdir);
  json_t *doc = NULL;
  cr_assert_eq(vqc_run_json_load(path, &doc), VQC_OK, "%s", vqc_last_error());
  const json_t *fs = json_object_get(doc, "findings");
  cr_expect_eq(json_array_size(fs), 1, "findings: %zu", json_array_size(fs));
  const json_t *f = json_array_get(fs, 0);
  cr_expect_str_eq(json_string_value(json_object_get(f, "tensor")), "w?");
  cr_expect(lists(json_object_get(f, "invalid_utf8"), "tensor"));
  cr_expect(lists(json_object_get(f, "invalid_utf8"), "site"));
  json_decref(doc);
  vqc_spawn_result_free(&r);
}
