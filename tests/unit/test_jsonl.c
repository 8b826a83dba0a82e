/* test_jsonl.c: the bounded JSON Lines reader (checkers/jsonl.h): lines
 * handed with their numbers, blank lines skipped, the 1 MiB bound, a torn
 * last line, bytes that are not UTF-8, lone surrogate escapes, NUL bytes,
 * an empty file and a missing one. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jsonl.h"
#include "vqc/status.h"

/* What the callback saw. */
typedef struct seen {
  int n;
  long lineno[16];
  bool parsed[16], torn[16];
  char text[16][64];
  json_t *json[16];   /* increfed */
  int stop_at;        /* > 0: return VQC_ECOMM at this call */
} seen;

static vqc_status take(const vqc_jsonl_line *l, void *user) {
  seen *s = user;
  if (!l->json && getenv("JSONL_DEBUG"))
    fprintf(stderr, "line %ld: %s\n", l->lineno, l->err->text);
  cr_assert_lt(s->n, 16);
  s->lineno[s->n] = l->lineno;
  s->parsed[s->n] = l->json != NULL;
  s->torn[s->n] = l->torn;
  snprintf(s->text[s->n], sizeof s->text[0], "%s", l->text);
  cr_assert_eq(strlen(l->text) <= l->len, true);
  if (!l->json) cr_assert_not_null(l->err);
  s->json[s->n] = json_incref(l->json);
  s->n++;
  if (s->stop_at > 0 && s->n == s->stop_at)
    return vqc_error(VQC_ECOMM, "stop");
  return VQC_OK;
}

static void seen_free(seen *s) {
  for (int i = 0; i < s->n; i++) json_decref(s->json[i]);
}

/* A file in a fresh directory holding bytes b[0..n). */
static void write_file(char *path, size_t cap, const char *b, size_t n) {
  char dir[] = "/tmp/vqc_jsonl_XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  snprintf(path, cap, "%s/f.jsonl", dir);
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(b, 1, n, f), n);
  fclose(f);
}

/* Removes write_file's file and its directory (nothing left in /tmp). */
static void remove_file(const char *path) {
  char dir[256];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  cr_assert_not_null(slash);
  *slash = '\0';
  cr_assert_eq(unlink(path), 0, "unlink %s", path);
  cr_assert_eq(rmdir(dir), 0, "rmdir %s", dir);
}

static vqc_status read_bytes(const char *b, size_t n, unsigned flags,
                             seen *s) {
  char path[256];
  write_file(path, sizeof path, b, n);
  const vqc_jsonl_opts opts = {flags, JSON_REJECT_DUPLICATES, NULL, NULL};
  bool present = false;
  vqc_status st = vqc_jsonl_read(path, &opts, take, s, &present);
  cr_assert(present);
  remove_file(path);
  return st;
}

Test(jsonl, lines_numbered_blank_skipped) {
  static const char b[] = "{\"a\":1}\n\n   \t\n{\"a\":2}\r\n[3]\n";
  seen s = {0};
  cr_assert_eq(read_bytes(b, sizeof b - 1, 0, &s), VQC_OK);
  cr_assert_eq(s.n, 3);
  cr_assert_eq(s.lineno[0], 1);
  cr_assert_eq(s.lineno[1], 4); /* blank lines are counted */
  cr_assert_eq(s.lineno[2], 5);
  cr_assert_str_eq(s.text[1], "{\"a\":2}"); /* CR and newline stripped */
  cr_assert_eq(json_integer_value(json_object_get(s.json[1], "a")), 2);
  cr_assert(json_is_array(s.json[2]));
  for (int i = 0; i < 3; i++) cr_assert(!s.torn[i]);
  seen_free(&s);
}

Test(jsonl, empty_and_missing_file) {
  seen s = {0};
  cr_assert_eq(read_bytes("", 0, 0, &s), VQC_OK);
  cr_assert_eq(s.n, 0);
  bool present = true;
  cr_assert_eq(vqc_jsonl_read("/nonexistent/vqc/f.jsonl", NULL, take, &s,
                              &present),
               VQC_OK);
  cr_assert(!present);
  cr_assert_eq(s.n, 0);
}

Test(jsonl, torn_last_line) {
  static const char b[] = "{\"a\":1}\n{\"a\":2}\n{\"a\":";
  /* Handed, not JSON, marked torn. */
  seen s = {0};
  cr_assert_eq(read_bytes(b, sizeof b - 1, 0, &s), VQC_OK);
  cr_assert_eq(s.n, 3);
  cr_assert(s.torn[2]);
  cr_assert(!s.parsed[2]);
  cr_assert_eq(s.lineno[2], 3);
  seen_free(&s);
  /* Skipped with VQC_JSONL_SKIP_TORN; a bad line before it still comes. */
  static const char c[] = "{\"a\":1}\nnot json\n{\"a\":";
  seen t = {0};
  cr_assert_eq(read_bytes(c, sizeof c - 1, VQC_JSONL_SKIP_TORN, &t), VQC_OK);
  cr_assert_eq(t.n, 2);
  cr_assert(!t.parsed[1]);
  cr_assert(!t.torn[1]);
  seen_free(&t);
  /* A complete last line without its newline is JSON: handed, torn. */
  static const char d[] = "{\"a\":1}\n{\"a\":2}";
  seen u = {0};
  cr_assert_eq(read_bytes(d, sizeof d - 1, VQC_JSONL_SKIP_TORN, &u), VQC_OK);
  cr_assert_eq(u.n, 2);
  cr_assert(u.torn[1]);
  cr_assert(u.parsed[1]);
  seen_free(&u);
}

Test(jsonl, bad_utf8_and_surrogates) {
  /* \xff is no UTF-8: jansson refuses the line. A lone surrogate escape
   * (Python's json.dumps of a surrogateescape'd name) is mended to '?'. */
  static const char b[] = "{\"f\":\"caf\xff\"}\n{\"f\":\"caf\\udce9\"}\n";
  seen s = {0};
  cr_assert_eq(read_bytes(b, sizeof b - 1, 0, &s), VQC_OK);
  cr_assert_eq(s.n, 2);
  cr_assert(!s.parsed[0]);
  cr_assert(s.parsed[1]);
  cr_assert_str_eq(json_string_value(json_object_get(s.json[1], "f")),
                   "caf?");
  seen_free(&s);
  /* VQC_JSONL_SKIP_BAD: only the good one comes. */
  seen t = {0};
  cr_assert_eq(read_bytes(b, sizeof b - 1, VQC_JSONL_SKIP_BAD, &t), VQC_OK);
  cr_assert_eq(t.n, 1);
  cr_assert_eq(t.lineno[0], 2);
  seen_free(&t);
}

/* Zeros inside a line end it: the part before them is a torn line (not
 * handed on as JSON), what follows them the next one. */
Test(jsonl, nul_byte_ends_the_line) {
  static const char b[] = "{\"a\":1}\n{\"a\"\0:1}\n";
  seen s = {0};
  cr_assert_eq(read_bytes(b, sizeof b - 1, 0, &s), VQC_OK);
  cr_assert_eq(s.n, 3);
  cr_assert(s.torn[1] && !s.parsed[1]);
  cr_assert_str_eq(s.text[2], ":1}");
  cr_assert(!s.parsed[2]);
  seen_free(&s);
}

/* A shared-mapping writer killed after its lines (interpose/vqc_mpi_record.c):
 * the zeros past them are no data, not a line holding NUL bytes. */
Test(jsonl, zero_tail_is_the_end) {
  static const char b[] = "{\"a\":1}\n{\"a\":2}\n\0\0\0\0\0\0\0\0";
  seen s = {0};
  cr_assert_eq(read_bytes(b, sizeof b - 1, 0, &s), VQC_OK);
  cr_assert_eq(s.n, 2);
  cr_assert(s.parsed[0] && s.parsed[1]);
  cr_assert(!s.torn[1]);
  seen_free(&s);
}

/* Killed in the middle of a line: the part before the zeros is a torn
 * last line (skipped with VQC_JSONL_SKIP_TORN), the zeros nothing. */
Test(jsonl, zero_tail_after_a_torn_line) {
  static const char b[] = "{\"a\":1}\n{\"a\":\0\0\0\0";
  seen s = {0};
  cr_assert_eq(read_bytes(b, sizeof b - 1, 0, &s), VQC_OK);
  cr_assert_eq(s.n, 2);
  cr_assert(s.torn[1]);
  cr_assert(!s.parsed[1]);
  seen_free(&s);
  seen t = {0};
  cr_assert_eq(read_bytes(b, sizeof b - 1, VQC_JSONL_SKIP_TORN, &t), VQC_OK);
  cr_assert_eq(t.n, 1);
  seen_free(&t);
}

/* A supervisor's line appended after a killed writer's zeros: read, the
 * zeros skipped (cmd_watch.c marks a rank it stopped so). */
Test(jsonl, line_after_zeros_is_read) {
  static const char b[] = "{\"a\":1}\n\0\0\0{\"a\":2}\n";
  seen s = {0};
  cr_assert_eq(read_bytes(b, sizeof b - 1, 0, &s), VQC_OK);
  cr_assert_eq(s.n, 2);
  cr_assert(s.parsed[0] && s.parsed[1]);
  cr_assert_eq(s.lineno[1], 2);
  seen_free(&s);
}

Test(jsonl, needle_filters_before_parsing) {
  static const char b[] =
      "{\"seq\":1}\n{\"event\":\"x\"}\nnot json, not_digested\n"
      "{\"event\":\"not_digested\"}\n";
  char path[256];
  write_file(path, sizeof path, b, sizeof b - 1);
  const vqc_jsonl_opts opts = {VQC_JSONL_SKIP_BAD, 0, "not_digested", NULL};
  seen s = {0};
  cr_assert_eq(vqc_jsonl_read(path, &opts, take, &s, NULL), VQC_OK);
  cr_assert_eq(s.n, 1);
  cr_assert_eq(s.lineno[0], 4);
  seen_free(&s);
  remove_file(path);
}

/* The lines the needle passed over are counted (blank ones are not): the
 * live record's ledger lines, counted without a parse. */
Test(jsonl, needle_counts_what_it_passed_over) {
  static const char b[] =
      "{\"seq\":1}\n\n{\"event\":\"x\"}\n{\"seq\":2}\n   \nnot json\n";
  char path[256];
  write_file(path, sizeof path, b, sizeof b - 1);
  unsigned long over = 0;
  const vqc_jsonl_opts opts = {VQC_JSONL_SKIP_BAD, 0, "\"event\"", &over};
  seen s = {0};
  cr_assert_eq(vqc_jsonl_read(path, &opts, take, &s, NULL), VQC_OK);
  cr_assert_eq(s.n, 1);
  cr_assert_eq(s.lineno[0], 3);
  cr_expect_eq(over, 3, "passed over %lu lines, expected 3", over);
  seen_free(&s);
  remove_file(path);
}

Test(jsonl, duplicates_by_flag) {
  static const char b[] = "{\"a\":1,\"a\":2}\n";
  seen s = {0};
  cr_assert_eq(read_bytes(b, sizeof b - 1, 0, &s), VQC_OK);
  cr_assert(!s.parsed[0]); /* JSON_REJECT_DUPLICATES */
  seen_free(&s);
  char path[256];
  write_file(path, sizeof path, b, sizeof b - 1);
  seen t = {0};
  cr_assert_eq(vqc_jsonl_read(path, NULL, take, &t, NULL), VQC_OK);
  cr_assert(t.parsed[0]);
  seen_free(&t);
  remove_file(path);
}

Test(jsonl, callback_stops) {
  static const char b[] = "{}\n{}\n{}\n";
  seen s = {0};
  s.stop_at = 2;
  cr_assert_eq(read_bytes(b, sizeof b - 1, 0, &s), VQC_ECOMM);
  cr_assert_eq(s.n, 2);
  seen_free(&s);
}

Test(jsonl, bound) {
  /* A line of exactly VQC_JSONL_LINE_MAX bytes is read; one byte more is
   * VQC_EPARSE naming file:line, and nothing after it is handed. */
  const size_t max = VQC_JSONL_LINE_MAX;
  char *b = malloc(2 * max + 64);
  cr_assert_not_null(b);
  size_t n = 0;
  n += (size_t)sprintf(b + n, "{\"a\":1}\n");
  n += (size_t)sprintf(b + n, "{\"a\":\"");
  memset(b + n, 'x', max - 8);
  n += max - 8;
  n += (size_t)sprintf(b + n, "\"}\n");
  seen s = {0};
  cr_assert_eq(read_bytes(b, n, 0, &s), VQC_OK);
  cr_assert_eq(s.n, 2);
  cr_assert(s.parsed[1]);
  seen_free(&s);

  b[n - 1] = ' '; /* the second line is now max + 1 bytes and more */
  b[n++] = '\n';
  n += (size_t)sprintf(b + n, "{\"a\":3}\n");
  seen t = {0};
  cr_assert_eq(read_bytes(b, n, 0, &t), VQC_EPARSE);
  cr_assert_eq(t.n, 1);
  cr_assert(strstr(vqc_last_error(), "f.jsonl:2: the line is longer than"),
            "%s", vqc_last_error());
  seen_free(&t);
  free(b);
}

Test(jsonl, read_line_primitive) {
  char path[256];
  static const char b[] = "ab\ncd";
  write_file(path, sizeof path, b, sizeof b - 1);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f);
  char *buf = NULL;
  size_t cap = 0, len = 0;
  cr_assert_eq(vqc_jsonl_read_line(f, path, 1, &buf, &cap, &len), VQC_OK);
  cr_assert_eq(len, 3);
  cr_assert_str_eq(buf, "ab\n");
  cr_assert_eq(vqc_jsonl_read_line(f, path, 2, &buf, &cap, &len), VQC_OK);
  cr_assert_eq(len, 2);
  cr_assert_str_eq(buf, "cd");
  cr_assert_eq(vqc_jsonl_read_line(f, path, 3, &buf, &cap, &len), VQC_OK);
  cr_assert_eq(len, 0);
  free(buf);
  fclose(f);
  remove_file(path);
}
