/* test_live_short.c: the short lines of a live record (ledger_analysis.h
 * "The live record"): libvqcheck_mpi.so writes a loop's collective, one
 * whose every field but "seq" and the times is the last full "entered"
 * line's, as {"same":SEQ,"as":K,"in":DT} and {"same":SEQ,"out":DT}, "in"
 * and "out" left out when DT is 0 (the split communicator's calls of
 * mismatch_inside_a_loop are written so). The analysis
 * reads them as those full lines; records written by hand as the
 * interposer writes them:
 *
 *   mismatch_inside_a_loop   6 steps of two all_reduces, one on the world
 *                            and one on a split communicator (short lines
 *                            past the first step, naming kept heads 0 and
 *                            1); rank 1's 4th world call has another
 *                            count: a collective_mismatch at the world's
 *                            #4 naming rank 1, none on the other;
 *   stuck_in_a_short_call    ranks 0 and 1 wait in #3, entered as a short
 *                            line; rank 2 finished after #2: a deadlock at
 *                            #3, its site the full line's, naming rank 2;
 *   times_add_up             a short entered line's time is the last
 *                            entered time plus its "in": ranks ended
 *                            from outside 2 s into a call are cut short,
 *                            not deadlocked (5.25 s read wrongly);
 *   refused_without_full_line, refused_out_never_in, refused_empty_head,
 *   refused_bad_fields, refused_done_with_head
 *                            a short line that cannot be read is an
 *                            error naming the file and line, never a
 *                            record taken from nowhere. */
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
                                       "/tmp/vqc-live-short-XXXXXX"));
}

static void teardown(void) { vqc_test_remove_dir(dir); }

TestSuite(live_short, .init = setup, .fini = teardown, .timeout = 60);

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
           "\"pid\":%d,\"host\":\"h\",\"mpi\":true,\"timeout_s\":5,"
           "\"heads\":8}\n", rank, SIZE,
           4000 + rank);
  live(rank, line);
}

static void finished(int rank) {
  live(rank, "{\"event\":\"finished\",\"status\":\"VQC_OK\",\"step\":-1}\n");
}

/* A full line as libvqcheck_mpi.so writes it: an all_reduce of `count`
 * float64 at loop.c:`line`, on the world (group "") or a communicator. */
static void full(int rank, const char *group, int seq, int count, int line,
                 unsigned long long t_enter, const char *state) {
  char text[1024];
  snprintf(text, sizeof text,
           "{\"seq\":%d,\"rank\":%d,\"op\":\"all_reduce\",\"redop\":\"sum\","
           "\"dtype\":\"float64\",\"count\":%d,\"root\":-1,"
           "\"group_size\":%d,\"any_site\":true,%s\"file\":\"loop.c\","
           "\"line\":%d,\"func\":\"main\",\"t_enter_ns\":%llu,"
           "\"t_exit_ns\":%llu,\"state\":\"%s\",\"status\":\"%s\"}\n",
           seq, rank, count, SIZE, group, line, t_enter,
           strcmp(state, "done") == 0 ? t_enter + 100 : 0, state,
           strcmp(state, "done") == 0 ? "VQC_OK" : "");
  live(rank, text);
}

/* Collective seq entered dt ns after the last, as kept head k (a dt of
 * 0 left out, as the interposer leaves it out). */
static void short_in(int rank, int seq, int k, unsigned dt) {
  char text[128];
  if (dt > 0)
    snprintf(text, sizeof text, "{\"same\":%d,\"as\":%d,\"in\":%u}\n",
             seq, k, dt);
  else
    snprintf(text, sizeof text, "{\"same\":%d,\"as\":%d}\n", seq, k);
  live(rank, text);
}

static void short_out(int rank, int seq, unsigned dt) {
  char text[128];
  if (dt > 0)
    snprintf(text, sizeof text, "{\"same\":%d,\"out\":%u}\n", seq, dt);
  else
    snprintf(text, sizeof text, "{\"same\":%d}\n", seq);
  live(rank, text);
}

static vqc_findings found;

static vqc_status analyze(void) {
  vqc_findings_init(&found);
  int n = 0;
  return vqc_ledger_analyze(dir, SIZE, -1, &found, &n);
}

static const vqc_finding *only(void) {
  cr_assert_eq(found.count, 1, "%d findings, the first: %s", found.count,
               found.count ? found.items[0].message : "");
  return &found.items[0];
}

static long long detail_int(const vqc_finding *f, const char *key) {
  const json_t *v = json_object_get(f->detail, key);
  cr_assert(json_is_integer(v), "no integer detail.%s: %s", key, f->message);
  return (long long)json_integer_value(v);
}

#define SPLIT "\"group\":[0,1,2],\"group_name\":\"world/split1\","

Test(live_short, mismatch_inside_a_loop) {
  /* Each step: the gradients' all_reduce on the world (loop.c:12, kept
   * head 0) and the loss's on a split communicator (loop.c:14, head 1). */
  for (int r = 0; r < SIZE; r++) {
    start(r);
    full(r, "", 1, 4, 12, 1000, "entered");
    full(r, "", 1, 4, 12, 1000, "done");
    full(r, SPLIT, 1, 1, 14, 2000, "entered");
    full(r, SPLIT, 1, 1, 14, 2000, "done");
    for (int seq = 2; seq <= 6; seq++) {
      if (r == 1 && seq == 4) { /* its own full lines: another count */
        full(r, "", 4, 3, 12, 5000, "entered");
        full(r, "", 4, 3, 12, 5000, "done");
      } else {
        short_in(r, seq, 0, 900);
        short_out(r, seq, 80);
      }
      short_in(r, seq, 1, 0); /* the clock did not tick: no "in" */
      short_out(r, seq, 0);
    }
    finished(r);
  }
  cr_assert_eq(analyze(), VQC_OK, "%s", vqc_last_error());
  const vqc_finding *f = only();
  cr_expect_eq(f->kind, VQC_FINDING_COLLECTIVE_MISMATCH, "%s", f->message);
  cr_expect_eq(f->nranks, 1);
  cr_expect_eq(f->ranks[0], 1, "names rank %d: %s", f->ranks[0], f->message);
  cr_expect_eq(detail_int(f, "seq"), 4, "%s", f->message);
  cr_expect(strstr(f->message, "count 3") != NULL, "%s", f->message);
  cr_expect(strstr(f->message, "world/split1") == NULL, "%s", f->message);
  cr_expect(strstr(f->site, "loop.c:12") != NULL, "%s", f->site);
  vqc_findings_free(&found);
}

Test(live_short, stuck_in_a_short_call) {
  for (int r = 0; r < SIZE; r++) {
    start(r);
    full(r, "", 1, 1, 30, 1000, "entered");
    full(r, "", 1, 1, 30, 1000, "done");
    short_in(r, 2, 0, 500);
    short_out(r, 2, 40);
  }
  short_in(0, 3, 0, 600); /* ranks 0 and 1 wait in #3; rank 2 left */
  short_in(1, 3, 0, 650);
  finished(2);
  for (int r = 0; r < 2; r++)
    live(r, "{\"event\":\"killed\",\"by\":\"vqcheck watch\","
            "\"why\":\"no progress for 5 s\"}\n");
  cr_assert_eq(analyze(), VQC_OK, "%s", vqc_last_error());
  const vqc_finding *f = only();
  cr_expect_eq(f->kind, VQC_FINDING_DEADLOCK, "%s", f->message);
  cr_expect_eq(detail_int(f, "seq"), 3, "%s", f->message);
  cr_expect_eq(f->nranks, 1);
  cr_expect_eq(f->ranks[0], 2, "names rank %d: %s", f->ranks[0], f->message);
  cr_expect(strstr(f->site, "loop.c:30") != NULL, "%s", f->site);
  vqc_findings_free(&found);
}

Test(live_short, times_add_up) {
  /* Full #1 entered at T0; #2 to #4 each 1 s after the last; ranks 0 and
   * 1 enter #5 0.25 s after #4 (rank 2 is not there yet), and every rank
   * is ended by SIGTERM 2 s later, its collective deadline 5 s. Read
   * right, ranks 0 and 1 had waited 2 s: the job was ended from outside
   * in flight, not hung (ledger_analysis.c cut_in_flight), so no deadlock.
   * A short line's time taken as its full line's would be 5.25 s of
   * waiting: a deadlock. */
  const unsigned long long t0 = 1000000000000ull, s = 1000000000ull;
  for (int r = 0; r < SIZE; r++) {
    start(r);
    full(r, "", 1, 1, 30, t0, "entered");
    full(r, "", 1, 1, 30, t0, "done");
    for (int seq = 2; seq <= 4; seq++) {
      short_in(r, seq, 0, (unsigned)s);
      short_out(r, seq, 10);
    }
    if (r < 2) short_in(r, 5, 0, (unsigned)(s / 4));
    char sig[128];
    snprintf(sig, sizeof sig, "{\"event\":\"signal\",\"signal\":15,"
             "\"t_ns\":%llu}\n", t0 + 3 * s + s / 4 + 2 * s);
    live(r, sig);
  }
  cr_assert_eq(analyze(), VQC_OK, "%s", vqc_last_error());
  for (int i = 0; i < found.count; i++)
    cr_expect_neq(found.items[i].kind, VQC_FINDING_DEADLOCK, "%s",
                  found.items[i].message);
  vqc_findings_free(&found);
}

/* A short line that cannot be read: VQC_EPARSE naming rank-0's line 3. */
static void expect_refused(const char *why) {
  cr_expect_eq(analyze(), VQC_EPARSE, "accepted a short line that %s", why);
  cr_expect(strstr(vqc_last_error(), "rank-0.live.jsonl:3") != NULL, "%s",
            vqc_last_error());
  vqc_findings_free(&found);
}

Test(live_short, refused_without_full_line) {
  for (int r = 0; r < SIZE; r++) start(r);
  full(0, "", 1, 1, 30, 1000, "done"); /* a done line is no template */
  short_in(0, 2, 0, 10);
  expect_refused("has no full entered line before it");
  cr_expect(strstr(vqc_last_error(), "no full \"entered\" line before it")
                != NULL, "%s", vqc_last_error());
}

Test(live_short, refused_out_never_in) {
  for (int r = 0; r < SIZE; r++) start(r);
  full(0, "", 1, 1, 30, 1000, "entered");
  short_out(0, 7, 10);
  expect_refused("closes a call never entered");
  cr_expect(strstr(vqc_last_error(), "not the short call entered last") !=
                NULL, "%s", vqc_last_error());
}

Test(live_short, refused_empty_head) {
  for (int r = 0; r < SIZE; r++) start(r);
  full(0, "", 1, 1, 30, 1000, "entered");
  short_in(0, 2, 1, 10); /* head 1: no second full entered line yet */
  expect_refused("names a head no full line filled");
}

Test(live_short, refused_bad_fields) {
  for (int r = 0; r < SIZE; r++) start(r);
  full(0, "", 1, 1, 30, 1000, "entered");
  live(0, "{\"same\":2,\"as\":0,\"in\":5,\"out\":6}\n");
  expect_refused("has both in and out");
}

Test(live_short, refused_done_with_head) {
  for (int r = 0; r < SIZE; r++) start(r);
  full(0, "", 1, 1, 30, 1000, "entered");
  live(0, "{\"same\":2,\"as\":0,\"out\":6}\n");
  expect_refused("a done line names a head");
}
