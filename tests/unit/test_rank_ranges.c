/* test_rank_ranges.c: vqc_rank_ranges_text (checkers/findings.h), the one
 * folding of rank lists every message about many ranks uses, and the
 * "rank_ranges" a finding's JSON carries when its list is long.
 *
 * Expected texts are written out in full: the folding rules (runs of 3+
 * consecutive ranks, runs of 4+ with one larger stride, the cut with its
 * count) are the contract readers of messages rely on. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "findings.h"

static const char *ranges(const int *ranks, int n, size_t cap) {
  static char buf[4096];
  cr_assert_leq(cap, sizeof buf);
  memset(buf, 'X', sizeof buf);
  vqc_rank_ranges_text(ranks, n, buf, cap);
  cr_assert(memchr(buf, '\0', cap) != NULL, "not terminated within %zu", cap);
  return buf;
}

/* 0..n-1 with the listed ranks left out (sorted, ascending). */
static int all_but(int n, const int *out, int nout, int *buf) {
  int k = 0;
  for (int r = 0; r < n; r++) {
    bool skip = false;
    for (int i = 0; i < nout; i++) skip = skip || out[i] == r;
    if (!skip) buf[k++] = r;
  }
  return k;
}

Test(rank_ranges, small_lists_stay_lists) {
  cr_expect_str_eq(ranges(NULL, 0, 64), "");
  cr_expect_str_eq(ranges((int[]){7}, 1, 64), "7");
  cr_expect_str_eq(ranges((int[]){1022, 1023}, 2, 64), "1022, 1023");
  /* three apart from each other are no run */
  cr_expect_str_eq(ranges((int[]){0, 5, 9}, 3, 64), "0, 5, 9");
  /* three with one stride > 1 are still spelled out */
  cr_expect_str_eq(ranges((int[]){0, 2, 4}, 3, 64), "0, 2, 4");
}

Test(rank_ranges, consecutive_runs_fold) {
  cr_expect_str_eq(ranges((int[]){0, 1, 2}, 3, 64), "0-2");
  cr_expect_str_eq(ranges((int[]){0, 1, 3, 4, 5, 9}, 6, 64), "0, 1, 3-5, 9");
  /* The brief's case: 1022 ranks entered, 1022 and 1023 missing. */
  int *v = malloc(1024 * sizeof *v);
  int n = all_but(1024, (int[]){1022, 1023}, 2, v);
  cr_expect_eq(n, 1022);
  cr_expect_str_eq(ranges(v, n, 64), "0-1021");
  n = all_but(1024, (int[]){1022}, 1, v);
  cr_expect_str_eq(ranges(v, n, 64), "0-1021, 1023");
  free(v);
}

Test(rank_ranges, strided_runs_fold_with_their_step) {
  int odd[512], even[512];
  for (int i = 0; i < 512; i++) {
    odd[i] = 2 * i + 1;
    even[i] = 2 * i;
  }
  cr_expect_str_eq(ranges(odd, 512, 64), "1-1023 (step 2)");
  cr_expect_str_eq(ranges(even, 512, 64), "0-1022 (step 2)");
  cr_expect_str_eq(ranges((int[]){3, 7, 11, 15}, 4, 64), "3-15 (step 4)");
  /* A consecutive run wins where it starts; the stride run after it. */
  cr_expect_str_eq(ranges((int[]){0, 1, 2, 4, 6, 8, 10}, 7, 64),
                   "0-2, 4-10 (step 2)");
}

Test(rank_ranges, any_order_and_repeats_give_the_sorted_set) {
  /* A finding's ranks are in order of first appearance. */
  cr_expect_str_eq(ranges((int[]){5, 3, 4, 3, 9}, 5, 64), "3-5, 9");
  int big[200];
  for (int i = 0; i < 200; i++) big[i] = 199 - i; /* beyond the stack copy */
  cr_expect_str_eq(ranges(big, 200, 64), "0-199");
  /* The caller's array is left as it was. */
  cr_expect_eq(big[0], 199);
  cr_expect_eq(big[199], 0);
}

Test(rank_ranges, a_cut_text_says_how_many) {
  /* Every third rank of 1024 alone is one strided run; mix strides so no
   * run folds: 0, 1, 3, 6, 10, ... (gaps grow). */
  int v[40];
  int n = 0;
  for (int r = 0, gap = 1; r < 1024 && n < 40; r += gap, gap++) v[n++] = r;
  const char *t = ranges(v, n, 48);
  cr_expect(strlen(t) < 48, "%s", t);
  char tail[32];
  snprintf(tail, sizeof tail, ", ... (%d ranks)", n);
  cr_expect(strstr(t, tail) != NULL && strlen(strstr(t, tail)) == strlen(tail),
            "'%s' does not end with '%s'", t, tail);
  cr_expect_eq(strncmp(t, "0, 1, 3, 6", 10), 0, "%s", t);
  /* Too small for even the first piece: the count alone. */
  cr_expect_str_eq(ranges(v, n, 17), "... (40 ranks)");
  /* Exactly enough room for the whole text: no cut. */
  cr_expect_str_eq(ranges((int[]){1, 2, 3, 7}, 4, 7), "1-3, 7");
  cr_expect_str_eq(ranges((int[]){1, 2, 3, 7}, 4, 1), "");
}

Test(rank_ranges, finding_json_adds_ranges_for_long_lists) {
  vqc_finding x;
  vqc_finding_init(&x, VQC_FINDING_DEADLOCK, 1, "stuck");
  for (int r = 0; r < VQC_FINDING_RANGES_FROM; r++) vqc_finding_add_rank(&x, r);
  json_t *j = vqc_finding_to_json(&x);
  cr_expect_null(json_object_get(j, "rank_ranges"),
                 "a short list needs no ranges");
  json_decref(j);
  /* 1024 ranks less two: every rank fits a finding, and the text folds. */
  for (int r = 0; r < 1022; r++) vqc_finding_add_rank(&x, r);
  cr_assert_eq(x.nranks, 1022);
  j = vqc_finding_to_json(&x);
  cr_expect_eq(json_array_size(json_object_get(j, "ranks")), 1022);
  cr_expect_str_eq(json_string_value(json_object_get(j, "rank_ranges")),
                   "0-1021");
  /* Readers take "ranks" and ignore the text. */
  vqc_finding back;
  cr_assert_eq(vqc_finding_from_json(j, &back), VQC_OK, "%s",
               vqc_last_error());
  cr_expect_eq(back.nranks, 1022);
  cr_expect_eq(back.ranks[1021], 1021);
  json_decref(back.detail);
  json_decref(j);
  json_decref(x.detail);
}
