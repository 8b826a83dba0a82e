/* test_rma_races.c: an MPI program's one-sided accesses compared across
 * ranks (harness/run/rma_races.h), fed rank-<r>.rma.jsonl files written
 * by hand in the interposer's format (interpose/vqc_mpi_rma_record.c):
 *
 *   fence_*    two puts to one cell in one fence epoch: a race naming both
 *              ranks, sites, bytes and the epoch; in two epochs, disjoint
 *              cells, a get against a get, accumulates against each other:
 *              nothing; a displacement scaled by the target's own
 *              disp_unit (cells that look apart in the origin's units);
 *              one operation's two accesses never compared;
 *   lock_*     passive target: in flight at once is a race; one completed
 *              before the other was issued is not; an exclusive lock, or
 *              origins on two hosts, or a fence epoch against a lock
 *              epoch: not told;
 *   runs_*     a line standing for a loop's operations ("n", "step"): one
 *              span when its cells touch, its cells one by one when they
 *              leave gaps (interleaved with another rank's: nothing) or
 *              overlap (its own puts race);
 *   local_*    a get into the origin's own window memory against another
 *              rank's get of it: a race;
 *   bad_*      garbage in a file is a warning, never a finding, and
 *              makes the verdict incomplete; a truncated record is said.
 *   (Every clean case also checks that nothing was left uncompared.) */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rma_races.h"

static char dir[64];

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/vqc_rma_XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  (void)system(cmd);
}

static void file(int rank, const char *text) {
  char path[128];
  snprintf(path, sizeof path, "%s/rank-%d.rma.jsonl", dir, rank);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
}

#define HEAD(r, host) "{\"rank\":" #r ",\"host\":\"" host "\",\"pid\":1}\n"
#define WIN(unit) "{\"window\":\"world/win1\",\"disp_unit\":" #unit "}\n"
/* An access: operation id, call, access, target, disp, unit, bytes,
 * fence, epoch, excl, line, t0, t1. */
#define ACC(id, call, acc, target, disp, unit, bytes, fence, epoch, excl,  \
            line, t0, t1)                                                  \
  "{\"w\":\"world/win1\",\"id\":" #id ",\"call\":\"" call "\",\"access\":" \
  "\"" acc "\",\"target\":" #target ",\"disp\":" #disp ",\"unit\":" #unit  \
  ",\"off\":0,\"bytes\":" #bytes ",\"fence\":" #fence ",\"epoch\":" #epoch \
  ",\"excl\":" #excl ",\"file\":\"/src/prog.c\",\"line\":" #line          \
  ",\"func\":\"main\",\"t0\":" #t0 ",\"t1\":" #t1 "}\n"

static char unchecked[600]; /* the last call's */

static int found(json_t **warnings, vqc_findings *f) {
  vqc_findings_init(f);
  *warnings = json_array();
  int64_t n = -1;
  snprintf(unchecked, sizeof unchecked, "(not set)");
  vqc_rma_races(dir, 3, f, *warnings, &n, unchecked, sizeof unchecked);
  cr_assert_geq(n, 0);
  return vqc_findings_count(f);
}

static void done(json_t *w, vqc_findings *f) {
  json_decref(w);
  vqc_findings_free(f);
}

TestSuite(rma, .init = setup, .fini = teardown);

Test(rma, fence_same_epoch_is_a_race) {
  file(0, HEAD(0, "h") WIN(4));
  file(1, HEAD(1, "h") WIN(4)
          ACC(1, "MPI_Put", "w", 0, 7, 0, 4, true, 3, false, 33, 10, 20));
  file(2, HEAD(2, "h") WIN(4)
          ACC(1, "MPI_Put", "w", 0, 6, 0, 8, true, 3, false, 35, 30, 40));
  json_t *w;
  vqc_findings f;
  cr_assert_eq(found(&w, &f), 1);
  const vqc_finding *x = &f.items[0];
  cr_expect_eq(x->kind, VQC_FINDING_LOST_INPLACE);
  cr_expect_eq(x->nranks, 2);
  cr_expect_eq(x->ranks[0], 1);
  cr_expect_eq(x->ranks[1], 2);
  cr_expect_not_null(strstr(x->site, "prog.c:33"), "%s", x->site);
  static const char *const wants[] = {
      "ranks 1 and 2 access bytes 28-31 of rank 0's memory in window "
      "world/win1",
      "rank 1's MPI_Put at prog.c:33 (main) writes them",
      "rank 2's MPI_Put at prog.c:35 (main) writes them", "fence #3"};
  for (size_t i = 0; i < sizeof wants / sizeof wants[0]; i++)
    cr_expect_not_null(strstr(x->message, wants[i]), "%s: %s", wants[i],
                       x->message);
  done(w, &f);
}

Test(rma, fence_ordered_or_harmless_is_clean) {
  file(0, HEAD(0, "h") WIN(8)
          /* a put, the next epoch a get of the same cell */
          ACC(1, "MPI_Put", "w", 1, 0, 0, 8, true, 1, false, 10, 1, 2)
          /* accumulates into one counter, gets of one cell */
          ACC(2, "MPI_Accumulate", "a", 1, 4, 0, 8, true, 1, false, 11, 1,
              2)
          ACC(3, "MPI_Get", "r", 1, 5, 0, 8, true, 1, false, 12, 1, 2)
          /* its own cell */
          ACC(4, "MPI_Put", "w", 1, 8, 0, 8, true, 1, false, 13, 1, 2));
  file(1, HEAD(1, "h") WIN(8));
  file(2, HEAD(2, "h") WIN(8)
          ACC(1, "MPI_Get", "r", 1, 0, 0, 8, true, 2, false, 20, 3, 4)
          ACC(2, "MPI_Accumulate", "a", 1, 4, 0, 8, true, 1, false, 21, 1,
              2)
          ACC(3, "MPI_Get", "r", 1, 5, 0, 8, true, 1, false, 22, 1, 2)
          ACC(4, "MPI_Put", "w", 1, 9, 0, 8, true, 1, false, 23, 1, 2));
  json_t *w;
  vqc_findings f;
  cr_expect_eq(found(&w, &f), 0, "%s", f.count ? f.items[0].message : "");
  cr_expect_eq(json_array_size(w), 0);
  cr_expect_str_empty(unchecked);
  done(w, &f);
}

Test(rma, fence_target_unit_scales) {
  /* Rank 0's disp 1 is in rank 1's unit (8 bytes): bytes 8-15, which
   * rank 1's get writes into its own window memory (byte offset 8, unit
   * 1). Read in the origin's units they would look apart. */
  file(0, HEAD(0, "h") WIN(8)
          ACC(1, "MPI_Put", "w", 1, 1, 0, 8, true, 1, false, 10, 1, 2));
  file(1, HEAD(1, "h") WIN(8)
          /* a get into its own window memory: bytes 8-15, unit 1 */
          ACC(1, "MPI_Get", "w", 1, 8, 1, 8, true, 1, false, 20, 1, 2)
          /* the same get's remote side: another cell, never compared with
           * its own local access */
          ACC(1, "MPI_Get", "r", 2, 8, 0, 8, true, 1, false, 20, 1, 2));
  file(2, HEAD(2, "h") WIN(8));
  json_t *w;
  vqc_findings f;
  cr_assert_eq(found(&w, &f), 1);
  cr_expect_not_null(strstr(f.items[0].message, "bytes 8-15 of rank 1's"),
                     "%s", f.items[0].message);
  done(w, &f);
}

Test(rma, fence_one_operation_not_compared_with_itself) {
  file(0, HEAD(0, "h") WIN(1)
          /* a put to itself from its own window memory, overlapping */
          ACC(1, "MPI_Put", "w", 0, 0, 0, 8, true, 1, false, 10, 1, 2)
          ACC(1, "MPI_Put", "r", 0, 4, 1, 8, true, 1, false, 10, 1, 2));
  json_t *w;
  vqc_findings f;
  cr_expect_eq(found(&w, &f), 0);
  done(w, &f);
}

Test(rma, lock_in_flight_at_once_is_a_race) {
  file(0, HEAD(0, "h") WIN(8)
          ACC(1, "MPI_Put", "w", 1, 2, 0, 8, false, 0, false, 28, 100, 500));
  file(1, HEAD(1, "h") WIN(8));
  file(2, HEAD(2, "h") WIN(8)
          ACC(1, "MPI_Get", "r", 1, 2, 0, 8, false, 0, false, 33, 300, 400));
  json_t *w;
  vqc_findings f;
  cr_assert_eq(found(&w, &f), 1);
  cr_expect_not_null(strstr(f.items[0].message, "both in flight at once"));
  cr_expect_not_null(strstr(f.items[0].message,
                            "rank 2's MPI_Get at prog.c:33 (main) reads them"));
  done(w, &f);
}

Test(rma, lock_ordered_exclusive_or_two_hosts_is_clean) {
  file(0, HEAD(0, "h") WIN(8)
          /* completed (t1 200) before rank 2's was issued (t0 300) */
          ACC(1, "MPI_Put", "w", 1, 2, 0, 8, false, 0, false, 28, 100, 200)
          /* under an exclusive lock, in flight with rank 2's */
          ACC(2, "MPI_Put", "w", 1, 3, 0, 8, false, 0, true, 29, 100, 900));
  file(1, HEAD(1, "h") WIN(8));
  file(2, HEAD(2, "h") WIN(8)
          ACC(1, "MPI_Put", "w", 1, 2, 0, 8, false, 0, false, 33, 300, 400)
          ACC(2, "MPI_Put", "w", 1, 3, 0, 8, false, 0, false, 34, 300, 400)
          /* a fence epoch's access against rank 0's lock epoch */
          ACC(3, "MPI_Put", "w", 1, 2, 0, 8, true, 0, false, 35, 150, 160));
  json_t *w;
  vqc_findings f;
  cr_expect_eq(found(&w, &f), 0, "%s", f.count ? f.items[0].message : "");
  done(w, &f);
  /* In flight at once, but on two hosts: their clocks are not one. */
  file(2, HEAD(2, "other")
          WIN(8)
          ACC(1, "MPI_Put", "w", 1, 3, 0, 8, false, 0, false, 33, 100, 900));
  file(0, HEAD(0, "h") WIN(8)
          ACC(1, "MPI_Put", "w", 1, 3, 0, 8, false, 0, false, 28, 100, 900));
  cr_expect_eq(found(&w, &f), 0, "%s", f.count ? f.items[0].message : "");
  done(w, &f);
}

/* A run line: ACC's fields with "n" and "step" after "bytes". */
#define RUN(id, target, disp, bytes, n, step, epoch, line)                 \
  "{\"w\":\"world/win1\",\"id\":" #id ",\"call\":\"MPI_Put\",\"access\":" \
  "\"w\",\"target\":" #target ",\"disp\":" #disp ",\"unit\":0,\"off\":0," \
  "\"bytes\":" #bytes ",\"n\":" #n ",\"step\":" #step ",\"fence\":true,"   \
  "\"epoch\":" #epoch ",\"excl\":false,\"file\":\"/src/prog.c\",\"line\":" \
  #line ",\"func\":\"main\",\"t0\":1,\"t1\":2}\n"

Test(rma, runs_touching_or_interleaved) {
  /* Rank 0's loop put cells 0..99 of rank 1 (one run, cells end to end);
   * rank 2 puts cell 50 in the same epoch: a race on bytes 400-407. */
  file(0, HEAD(0, "h") WIN(8) RUN(1, 1, 0, 8, 100, 1, 1, 30));
  file(1, HEAD(1, "h") WIN(8));
  file(2, HEAD(2, "h") WIN(8)
          ACC(1, "MPI_Put", "w", 1, 50, 0, 8, true, 1, false, 40, 1, 2));
  json_t *w;
  vqc_findings f;
  cr_assert_eq(found(&w, &f), 1);
  cr_expect_not_null(strstr(f.items[0].message, "bytes 400-407 of rank 1's"),
                     "%s", f.items[0].message);
  done(w, &f);
  /* Even cells from rank 0, odd ones from rank 2 (runs with gaps, their
   * spans interleaved): no cell shared, nothing told; a run never races
   * with itself. */
  file(0, HEAD(0, "h") WIN(8) RUN(1, 1, 0, 8, 50, 2, 1, 30));
  file(2, HEAD(2, "h") WIN(8) RUN(1, 1, 1, 8, 50, 2, 1, 40));
  cr_expect_eq(found(&w, &f), 0, "%s", f.count ? f.items[0].message : "");
  done(w, &f);
  /* A run whose cells overlap one another (16 bytes every 8): its own
   * puts race. */
  file(2, HEAD(2, "h") WIN(8));
  file(0, HEAD(0, "h") WIN(8) RUN(1, 1, 0, 16, 3, 1, 1, 30));
  cr_expect_eq(found(&w, &f), 1);
  done(w, &f);
}

Test(rma, local_get_into_window_against_remote_get) {
  /* MBI's GlobalConcurrency rl Get/Get: rank 1 gets into its own window
   * cells 5..14 while rank 0 reads its cells 0..9. */
  file(0, HEAD(0, "h") WIN(4)
          ACC(1, "MPI_Get", "r", 1, 0, 0, 40, true, 1, false, 60, 1, 2));
  file(1, HEAD(1, "h") WIN(4)
          ACC(1, "MPI_Get", "w", 1, 20, 1, 40, true, 1, false, 63, 1, 2)
          ACC(1, "MPI_Get", "r", 0, 0, 0, 40, true, 1, false, 63, 1, 2));
  json_t *w;
  vqc_findings f;
  cr_assert_eq(found(&w, &f), 1);
  cr_expect_not_null(strstr(f.items[0].message, "bytes 20-39 of rank 1's"),
                     "%s", f.items[0].message);
  done(w, &f);
}

Test(rma, bad_file_is_a_warning) {
  file(0, HEAD(0, "h") WIN(4) "{not json\n"
          ACC(1, "MPI_Put", "w", 1, 0, 0, 4, true, 1, false, 10, 1, 2));
  file(1, HEAD(1, "h") WIN(4) "{\"truncated\":true}\n");
  file(2, HEAD(2, "h") WIN(4)
          ACC(1, "MPI_Put", "w", 1, 0, 0, 4, true, 1, false, 20, 1, 2));
  json_t *w;
  vqc_findings f;
  cr_expect_eq(found(&w, &f), 0);
  cr_assert_eq(json_array_size(w), 2);
  cr_expect_not_null(strstr(json_string_value(json_array_get(w, 0)),
                            "rank 0's RMA accesses were not all checked"));
  cr_expect_not_null(strstr(json_string_value(json_array_get(w, 1)),
                            "rank 1 made more RMA accesses"));
  /* the verdict is told incomplete (the truncation by the rank itself) */
  cr_expect_not_null(strstr(unchecked, "rank 0's RMA accesses were not all "
                                       "compared"), "%s", unchecked);
  done(w, &f);
}
