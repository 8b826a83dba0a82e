/* test_mpi_leaks.c: the ranks' "leaks" lines (interpose/vqc_mpi_leaks.c)
 * joined into warnings (harness/run/mpi_leaks.c), on live records written
 * here as libvqcheck_mpi.so leaves them:
 *
 *   ranks_are_joined_by_site  one site's objects on two ranks with other
 *                      counts are one warning ("ranks 0, 1 ... 5
 *                      communicators ... (3-5 per rank, 8 in all)"); a
 *                      site on one rank names it alone, singular for one;
 *   rest_and_not_followed  "more_count" and "not_followed"
 *                      are told, each in a warning of its own;
 *   the_warnings_are_bounded  20 sites: 16 warnings, then one counting
 *                      the other 4 sites' objects;
 *   what_is_no_leaks_line_adds_nothing  a record without the line, one
 *                      whose line is cut (no newline: the rank died
 *                      writing it), one whose line does not parse, zeros
 *                      after the last line, no record at all: no warning;
 *   the_line_is_found_past_a_long_record  4 MiB of lines before it: read
 *                      from the record's end;
 *   a_path_not_in_utf8_is_mended  a site's file name with bytes that are
 *                      not UTF-8 (the interposer writes a path's bytes as
 *                      they are): the line is read, the bytes become '?',
 *                      the warning is valid UTF-8. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_leaks.h"
#include "test_paths.h"
#include "utf8.h"

static char tmpdir[256];

static void make_tmpdir(void) {
  cr_assert(vqc_test_temp_dir(tmpdir, sizeof tmpdir,
                              "/tmp/vqc-test-mpi-leaks-XXXXXX") != NULL,
            "mkdtemp: %s", strerror(errno));
}

static void remove_tmpdir(void) { vqc_test_remove_dir(tmpdir); }

TestSuite(mpi_leaks, .init = make_tmpdir, .fini = remove_tmpdir,
          .timeout = 60);

/* Appends text (n bytes) to rank r's live record. */
static void append(int r, const char *text, size_t n) {
  char path[512];
  snprintf(path, sizeof path, "%s/rank-%d.live.jsonl", tmpdir, r);
  FILE *f = fopen(path, "ab");
  cr_assert_not_null(f, "%s: %s", path, strerror(errno));
  cr_assert_eq(fwrite(text, 1, n, f), n);
  cr_assert_eq(fclose(f), 0);
}

static void append_text(int r, const char *text) {
  append(r, text, strlen(text));
}

/* One "objects" entry: count objects of kind (singular, plural, free
 * call) made by call at file:line. */
static void entry(char *buf, size_t n, const char *one, const char *many,
                  const char *free_with, unsigned count, const char *call,
                  const char *file, int line) {
  snprintf(buf, n, "{\"object\":\"%s\",\"objects\":\"%s\",\"free_with\":"
           "\"%s\",\"count\":%u,\"call\":\"%s\",\"site\":{\"file\":\"%s\","
           "\"line\":%d,\"func\":\"main\"}}", one, many, free_with, count,
           call, file, line);
}

/* Rank r's record: a start line, the leaks line of `objects` (JSON array
 * contents) and the rest's counts, then the end line. */
static void record(int r, const char *objects, unsigned more,
                   unsigned not_followed) {
  char text[65536];
  snprintf(text, sizeof text, "{\"event\":\"start\",\"rank\":%d,\"size\":2,"
           "\"pid\":%d,\"mpi\":true}\n", r, 100 + r);
  append_text(r, text);
  snprintf(text, sizeof text, "{\"event\":\"leaks\",\"objects\":[%s],"
           "\"more_count\":%u,\"not_followed\":%u}\n", objects, more,
           not_followed);
  append_text(r, text);
  append_text(r, "{\"event\":\"finished\",\"status\":\"VQC_OK\",\"step\":-1}\n");
}

static json_t *leaks_of(int ranks) {
  json_t *w = json_array();
  cr_assert_not_null(w);
  vqc_mpi_leaks(tmpdir, ranks, w);
  return w;
}

static const char *warning(const json_t *w, size_t i) {
  cr_assert_lt(i, json_array_size(w), "only %zu warnings",
               json_array_size(w));
  return json_string_value(json_array_get(w, i));
}

/* ---- cases */

Test(mpi_leaks, ranks_are_joined_by_site) {
  char a[1024], b[1024], both[2100];
  entry(a, sizeof a, "communicator", "communicators", "MPI_Comm_free", 3,
        "MPI_Comm_dup", "ring.c", 13);
  record(0, a, 0, 0);
  entry(a, sizeof a, "communicator", "communicators", "MPI_Comm_free", 5,
        "MPI_Comm_dup", "ring.c", 13);
  entry(b, sizeof b, "datatype", "datatypes", "MPI_Type_free", 1,
        "MPI_Type_vector", "ring.c", 20);
  snprintf(both, sizeof both, "%s,%s", a, b);
  record(1, both, 0, 0);
  json_t *w = leaks_of(2);
  cr_assert_eq(json_array_size(w), 2, "%s", json_dumps(w, 0));
  cr_expect_str_eq(warning(w, 0),
      "MPI objects never freed: ranks 0, 1 reached MPI_Finalize with 5 "
      "communicators made by MPI_Comm_dup at ring.c:13 (main) not freed "
      "(3-5 per rank, 8 in all): MPI holds each until it is freed, and "
      "made in a loop they run out; free each with MPI_Comm_free once done "
      "with it");
  cr_expect(strstr(warning(w, 1), "rank 1 reached MPI_Finalize with 1 "
                   "datatype made by MPI_Type_vector at ring.c:20 (main) not "
                   "freed: ") != NULL, "%s", warning(w, 1));
  cr_expect(strstr(warning(w, 1), "with MPI_Type_free") != NULL);
  json_decref(w);
}

Test(mpi_leaks, rest_and_not_followed) {
  char a[1024];
  entry(a, sizeof a, "group", "groups", "MPI_Group_free", 2,
        "MPI_Comm_group", "g.c", 7);
  record(0, a, 30, 0);
  record(1, "", 4, 12);
  json_t *w = leaks_of(2);
  cr_assert_eq(json_array_size(w), 3, "%s", json_dumps(w, 0));
  cr_expect(strstr(warning(w, 0), "rank 0 reached MPI_Finalize with 2 "
                   "groups made by MPI_Comm_group at g.c:7") != NULL);
  cr_expect_str_eq(warning(w, 1),
                   "MPI objects never freed: 34 more, made at other call "
                   "sites or by other calls (not listed here)");
  cr_expect(strstr(warning(w, 2), "MPI objects not followed: 12 made while "
                   "over 786000 others were alive") != NULL,
            "%s", warning(w, 2));
  json_decref(w);
}

Test(mpi_leaks, the_warnings_are_bounded) {
  char objects[40000] = "", a[1024];
  size_t k = 0;
  for (int i = 0; i < 20; i++) {
    entry(a, sizeof a, "datatype", "datatypes", "MPI_Type_free",
          (unsigned)(100 - i), "MPI_Type_contiguous", "t.c", 10 + i);
    k += (size_t)snprintf(objects + k, sizeof objects - k, "%s%s",
                          i ? "," : "", a);
  }
  record(0, objects, 0, 0);
  json_t *w = leaks_of(1);
  cr_assert_eq(json_array_size(w), 17, "%zu warnings", json_array_size(w));
  cr_expect(strstr(warning(w, 0), "with 100 datatypes made by "
                   "MPI_Type_contiguous at t.c:10 ") != NULL);
  /* sites 16..19: 84 + 83 + 82 + 81 objects */
  cr_expect_str_eq(warning(w, 16),
                   "MPI objects never freed: 330 more, made at other call "
                   "sites or by other calls (not listed here)");
  json_decref(w);
}

Test(mpi_leaks, what_is_no_leaks_line_adds_nothing) {
  char a[1024];
  entry(a, sizeof a, "communicator", "communicators", "MPI_Comm_free", 3,
        "MPI_Comm_dup", "x.c", 3);
  /* rank 0: no leaks line */
  append_text(0, "{\"event\":\"start\",\"rank\":0,\"size\":5}\n"
                 "{\"event\":\"finished\",\"status\":\"VQC_OK\"}\n");
  /* rank 1: the line cut short (no newline: the rank died writing it) */
  char text[2048];
  snprintf(text, sizeof text, "{\"event\":\"start\",\"rank\":1}\n"
           "{\"event\":\"leaks\",\"objects\":[%s],\"more_count\":0", a);
  append_text(1, text);
  /* rank 2: a line that does not parse, then zeros */
  append_text(2, "{\"event\":\"start\",\"rank\":2}\n"
                 "{\"event\":\"leaks\",\"objects\":[{\"count\":3,}]}\n");
  static const char zeros[4096];
  append(2, zeros, sizeof zeros);
  /* rank 3: a leaks line that is not an object's list: counts nothing */
  append_text(3, "{\"event\":\"leaks\",\"objects\":7,\"more_count\":\"x\"}\n");
  /* rank 4: no record at all */
  json_t *w = leaks_of(5);
  cr_expect_eq(json_array_size(w), 0, "%s", json_dumps(w, 0));
  json_decref(w);
}

Test(mpi_leaks, the_line_is_found_past_a_long_record) {
  char line[256];
  snprintf(line, sizeof line, "{\"same\":1234567,\"as\":0}\n");
  const size_t n = strlen(line), lines = (4u << 20) / n;
  char *filler = malloc(n * lines);
  cr_assert_not_null(filler);
  for (size_t i = 0; i < lines; i++) memcpy(filler + i * n, line, n);
  append(0, filler, n * lines);
  free(filler);
  char a[1024];
  entry(a, sizeof a, "reduction operation", "reduction operations",
        "MPI_Op_free", 1, "MPI_Op_create", "op.c", 9);
  record(0, a, 0, 0);
  json_t *w = leaks_of(1);
  cr_assert_eq(json_array_size(w), 1, "%s", json_dumps(w, 0));
  cr_expect(strstr(warning(w, 0), "rank 0 reached MPI_Finalize with 1 "
                   "reduction operation made by MPI_Op_create at op.c:9 "
                   "(main)") != NULL, "%s", warning(w, 0));
  json_decref(w);
}

Test(mpi_leaks, a_path_not_in_utf8_is_mended) {
  char a[1024];
  entry(a, sizeof a, "group", "groups", "MPI_Group_free", 4,
        "MPI_Comm_group", "caf\xe9/\xff.c", 12);
  record(0, a, 0, 0);
  json_t *w = leaks_of(1);
  cr_assert_eq(json_array_size(w), 1, "%s", json_dumps(w, 0));
  const char *text = warning(w, 0);
  cr_expect(vqc_utf8_valid(text, strlen(text)));
  cr_expect(strstr(text, "4 groups made by MPI_Comm_group at caf?/?.c:12 "
                   "(main)") != NULL, "%s", text);
  json_decref(w);
}
