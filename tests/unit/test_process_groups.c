/* test_process_groups.c: the ledger analysis of a torch sub-group's
 * collectives (ledger_analysis.h "Process groups"), on live records
 * written by hand as the Python bridge writes them: a sub-group's lines
 * carry "group" (its world ranks) and "group_name", and their "seq" counts
 * that group's calls only.
 *
 *   member_skips_a_call        ranks 0 and 1 all_reduce in group "1"; rank
 *                              0 waits in its 3rd call, rank 1 never made
 *                              it: a deadlock in that group naming rank 1,
 *                              never rank 2 (not a member);
 *   member_calls_another_count ranks 1 and 2 in group "2" call one line
 *                              with 2 and 3 floats: a collective_mismatch
 *                              in that group;
 *   groups_that_agree_are_clean  every member made every call, and rank 2
 *                              made none of group "1"'s: clean;
 *   same_ranks_other_group     two groups with the same ranks and other
 *                              names are two sequences, both clean;
 *   names_not_alike            the same group named otherwise on each rank
 *                              (torch's use_local_synchronization): not
 *                              compared, no false deadlock;
 *   group_without_the_rank     a line naming a group without its own rank
 *                              is refused, naming the file and line. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "findings.h"
#include "ledger_analysis.h"
#include "test_paths.h"

#define SIZE 3

static char dir[256];

static void setup(void) {
  cr_assert_not_null(vqc_test_temp_dir(dir, sizeof dir,
                                       "/tmp/vqc-process-groups-XXXXXX"));
}

static void teardown(void) { vqc_test_remove_dir(dir); }

TestSuite(process_groups, .init = setup, .fini = teardown, .timeout = 60);

static void live(int rank, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/rank-%d.live.jsonl", dir, rank);
  FILE *f = fopen(path, "a");
  cr_assert_not_null(f, "cannot write %s", path);
  fputs(text, f);
  fclose(f);
}

static void start(int rank) {
  char line[256];
  snprintf(line, sizeof line, "{\"event\":\"start\",\"rank\":%d,\"size\":%d,"
           "\"pid\":%d,\"host\":\"h\"}\n", rank, SIZE, 4000 + rank);
  live(rank, line);
}

static void finished(int rank) {
  live(rank, "{\"event\":\"step\",\"step\":0}\n"
             "{\"event\":\"finished\",\"status\":\"VQC_OK\",\"step\":0}\n");
}

/* One ledger line of rank `rank`: group "" is the world's. */
static void rec(int rank, const char *group, const char *name, int seq,
                int count, int line, const char *state) {
  char text[1024], g[160] = "";
  if (group[0])
    snprintf(g, sizeof g, "\"group\":%s,\"group_name\":\"%s\",", group, name);
  snprintf(text, sizeof text,
           "{\"seq\":%d,\"rank\":%d,\"op\":\"all_reduce\",\"redop\":\"sum\","
           "\"dtype\":\"float32\",\"count\":%d,\"root\":-1,%s"
           "\"file\":\"/job/j.py\",\"line\":%d,\"func\":\"main\","
           "\"t_enter_ns\":1,\"t_exit_ns\":2,\"state\":\"%s\","
           "\"status\":\"%s\"}\n",
           seq, rank, count, g, line, state,
           strcmp(state, "done") == 0 ? "VQC_OK" : "");
  live(rank, text);
}

/* Every rank: one world all_reduce at line 9, done. */
static void world_call(void) {
  for (int r = 0; r < SIZE; r++) {
    start(r);
    rec(r, "", "", 1, 4, 9, "done");
  }
}

static vqc_findings found;

static int analyze(void) {
  vqc_findings_init(&found);
  int n = 0;
  cr_assert_eq(vqc_ledger_analyze(dir, SIZE, -1, &found, &n), VQC_OK, "%s",
               vqc_last_error());
  return n;
}

static const vqc_finding *only(void) {
  cr_assert_eq(found.count, 1, "%d findings, the first: %s", found.count,
               found.count ? found.items[0].message : "");
  return &found.items[0];
}

static void expect_group(const vqc_finding *f, const char *ranks_json) {
  const json_t *pg = json_object_get(f->detail, "process_group");
  cr_assert_not_null(pg, "no detail.process_group: %s", f->message);
  json_t *want = json_loads(ranks_json, 0, NULL);
  cr_expect(json_equal(json_object_get(pg, "ranks"), want),
            "process_group.ranks: %s", json_dumps(pg, JSON_COMPACT));
  json_decref(want);
}

Test(process_groups, member_skips_a_call) {
  world_call();
  for (int seq = 1; seq <= 2; seq++) {
    rec(0, "[0,1]", "1", seq, 2, 20, "done");
    rec(1, "[0,1]", "1", seq, 2, 20, "done");
  }
  rec(0, "[0,1]", "1", 3, 2, 20, "entered"); /* rank 1 never comes */
  for (int r = 0; r < SIZE; r++) /* then `vqcheck watch` stopped the job */
    live(r, "{\"event\":\"killed\",\"by\":\"vqcheck watch\","
            "\"why\":\"no progress for 5 s\"}\n");
  analyze();
  const vqc_finding *f = only();
  cr_expect_eq(f->kind, VQC_FINDING_DEADLOCK);
  cr_expect_eq(f->nranks, 1);
  cr_expect_eq(f->ranks[0], 1, "names rank %d", f->ranks[0]);
  cr_expect(strncmp(f->message, "in process group 1 (ranks 0, 1): "
                    "collective #3 all_reduce", 55) == 0, "%s", f->message);
  cr_expect(strstr(f->message, "entered by rank 0 but never by rank 1") !=
                NULL, "%s", f->message);
  cr_expect(strstr(f->site, "j.py:20") != NULL, "%s", f->site);
  expect_group(f, "[0,1]");
  vqc_findings_free(&found);
}

Test(process_groups, member_calls_another_count) {
  world_call();
  rec(1, "[1,2]", "2", 1, 2, 30, "done");
  rec(2, "[1,2]", "2", 1, 3, 30, "done");
  for (int r = 0; r < SIZE; r++) finished(r);
  analyze();
  const vqc_finding *f = only();
  cr_expect_eq(f->kind, VQC_FINDING_COLLECTIVE_MISMATCH, "%s", f->message);
  cr_expect(strstr(f->message, "in process group 2 (ranks 1, 2): ") ==
                f->message, "%s", f->message);
  cr_expect(strstr(f->message, "different count") != NULL, "%s", f->message);
  cr_expect(strstr(f->message, "rank 0") == NULL, "%s", f->message);
  expect_group(f, "[1,2]");
  /* Rank 0 is no member: not among the calls, nor absent. */
  cr_expect_eq(json_array_size(json_object_get(f->detail, "absent")), 0);
  vqc_findings_free(&found);
}

Test(process_groups, groups_that_agree_are_clean) {
  world_call();
  for (int seq = 1; seq <= 3; seq++) {
    rec(0, "[0,1]", "1", seq, 2, 20, "done");
    rec(1, "[0,1]", "1", seq, 2, 20, "done");
  }
  for (int r = 0; r < SIZE; r++) finished(r);
  cr_expect_eq(analyze(), 0, "%s", found.count ? found.items[0].message : "");
  vqc_findings_free(&found);
}

Test(process_groups, same_ranks_other_group) {
  /* Rank 0 calls group "1" twice then group "3" once; rank 1 interleaves
   * them otherwise: each group's own order agrees. */
  world_call();
  rec(0, "[0,1]", "1", 1, 2, 20, "done");
  rec(0, "[0,1]", "1", 2, 2, 20, "done");
  rec(0, "[0,1]", "3", 1, 8, 40, "done");
  rec(1, "[0,1]", "3", 1, 8, 40, "done");
  rec(1, "[0,1]", "1", 1, 2, 20, "done");
  rec(1, "[0,1]", "1", 2, 2, 20, "done");
  for (int r = 0; r < SIZE; r++) finished(r);
  cr_expect_eq(analyze(), 0, "%s", found.count ? found.items[0].message : "");
  vqc_findings_free(&found);
}

Test(process_groups, names_not_alike) {
  world_call();
  for (int seq = 1; seq <= 2; seq++) {
    rec(0, "[0,1]", "h0", seq, 2, 20, "done");
    rec(1, "[0,1]", "h1", seq, 2, 20, "done");
  }
  for (int r = 0; r < SIZE; r++) finished(r);
  cr_expect_eq(analyze(), 0, "%s", found.count ? found.items[0].message : "");
  vqc_findings_free(&found);
}

Test(process_groups, group_without_the_rank) {
  world_call();
  rec(2, "[0,1]", "1", 1, 2, 20, "done");
  vqc_findings_init(&found);
  cr_expect_eq(vqc_ledger_analyze(dir, SIZE, -1, &found, NULL), VQC_EPARSE);
  cr_expect(strstr(vqc_last_error(), "rank-2.live.jsonl:3") != NULL &&
                strstr(vqc_last_error(), "without rank 2") != NULL,
            "%s", vqc_last_error());
  vqc_findings_free(&found);
}
