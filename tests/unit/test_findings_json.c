/* test_findings_json.c: a finding is always valid JSON, whatever bytes its
 * strings hold (issue 22/23, "vqcheck's own output always valid"), and it
 * survives the trip through a rank's live record (findings_record.h).
 *
 * A rank's last stderr line cut in the middle of a character (torch 2.x gloo
 * errors end in an emoji) used to lose the finding's "message": jansson
 * refuses a string that is not UTF-8, the member went missing, and vqcheck
 * then rejected its own run.json (exit 2, no reports). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checker.h"
#include "findings.h"
#include "findings_record.h"
#include "ledger_analysis.h"
#include "test_paths.h"

/* "... failed 🔥" cut after two of the emoji's four bytes. */
static const char cut_emoji[] = "gloo: size mismatch \xF0\x9F";
/* A path in Latin-1 ("café.py"), not UTF-8. */
static const char latin1_site[] = "/home/u/caf\xE9.py:12 train";

static void bad_finding(vqc_finding *x) {
  vqc_finding_init(x, VQC_FINDING_RANK_FAILURE, 2, "rank 1 died: %s",
                   cut_emoji);
  vqc_finding_add_rank(x, 1);
  snprintf(x->site, sizeof x->site, "%s", latin1_site);
  snprintf(x->tensor, sizeof x->tensor, "w\xFF");
}

Test(findings_json, bad_bytes_become_question_marks) {
  vqc_finding x;
  bad_finding(&x);
  json_t *j = vqc_finding_to_json(&x);
  const char *msg = json_string_value(json_object_get(j, "message"));
  cr_assert_not_null(msg, "the message went missing");
  cr_expect_str_eq(msg, "rank 1 died: gloo: size mismatch ??");
  cr_expect_str_eq(json_string_value(json_object_get(j, "site")),
                   "/home/u/caf?.py:12 train");
  cr_expect_str_eq(json_string_value(json_object_get(j, "tensor")), "w?");
  /* Readable back as a finding (what analyze and report do). */
  vqc_finding back;
  cr_assert_eq(vqc_finding_from_json(j, &back), VQC_OK, "%s",
               vqc_last_error());
  json_decref(back.detail);
  json_decref(j);
  json_decref(x.detail);
}

Test(findings_json, good_text_is_kept) {
  vqc_finding x;
  vqc_finding_init(&x, VQC_FINDING_DIVERGENCE, 0, "ranks differ \xF0\x9F\x94\xA5");
  json_t *j = vqc_finding_to_json(&x);
  cr_expect_str_eq(json_string_value(json_object_get(j, "message")),
                   "ranks differ \xF0\x9F\x94\xA5");
  json_decref(j);
  json_decref(x.detail);
}

/* vqc_check_report puts each finding on the rank's live record, and the
 * reader gives back what the run's list holds, bad bytes and all. */
Test(findings_json, live_record_round_trip) {
  char dir[] = "/tmp/vqc-test-findings-json-XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  vqc_findings list;
  vqc_findings_init(&list);
  for (int rank = 0; rank < 2; rank++) {
    vqc_live *l = NULL;
    cr_assert_eq(vqc_live_open(dir, rank, 2, 0, &l), VQC_OK, "%s",
                 vqc_last_error());
    vqc_check_ctx ctx = {.rank = rank, .size = 2, .findings = &list,
                         .live = l};
    vqc_finding x;
    bad_finding(&x);
    cr_assert_eq(vqc_check_report(&ctx, -1, &x), VQC_OK);
    vqc_finding y;
    vqc_finding_init(&y, VQC_FINDING_LOST_INPLACE, 3 - rank, "lost");
    vqc_finding_add_rank(&y, rank);
    snprintf(y.site, sizeof y.site, "a.c:1 f");
    cr_assert_eq(vqc_check_report(&ctx, -1, &y), VQC_OK);
    vqc_live_finished(l, VQC_OK, 4);
    vqc_live_close(l);
  }
  vqc_findings back;
  vqc_findings_init(&back);
  int lines = 0;
  cr_assert_eq(vqc_recorded_findings_read(dir, &back, &lines), VQC_OK, "%s",
               vqc_last_error());
  cr_expect_eq(lines, 4);
  /* The two rank_failures are one (same kind, step, tensor, site), the
   * lost_inplace ones one per site, the earliest step's, with both ranks. */
  cr_assert_eq(back.count, 2);
  cr_expect_eq(back.items[0].kind, VQC_FINDING_RANK_FAILURE);
  cr_expect_eq(back.items[0].step, 2);
  cr_expect_str_eq(back.items[0].message,
                   "rank 1 died: gloo: size mismatch ??");
  cr_expect_eq(back.items[1].kind, VQC_FINDING_LOST_INPLACE);
  cr_expect_eq(back.items[1].step, 2);
  cr_expect_eq(back.items[1].nranks, 2);
  vqc_findings_free(&back);
  vqc_findings_free(&list);
  vqc_test_remove_dir(dir);
}
