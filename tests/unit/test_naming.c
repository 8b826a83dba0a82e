/* test_naming.c: the ledger analysis names what happened (issue 23, "the
 * right name for what happened"), on live records written by hand line by
 * line as the Python bridge (`vqcheck watch`) leaves them:
 *
 *   mismatch_*      the same line calls the same collective with another
 *                   count or dtype on two ranks: one collective_mismatch at
 *                   that line naming both calls, whether the backend paired
 *                   them, failed them or aborted the process on them (gloo:
 *                   "Received data size doesn't match expected size" and
 *                   SIGABRT), never a deadlock, and no rank_failure for a
 *                   rank that died inside it;
 *   signal_*        a rank whose supervisor recorded how its process ended
 *                   (vqc_live_mark_end: the signal, its last stderr lines)
 *                   is named with them, not with a guess;
 *   early_exit_*    a rank that ended cleanly while the others went on is
 *                   the rank named, and the message says it left.
 *
 * The fixtures reproduce real runs (torch 2.15, gloo, two ranks). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger_analysis.h"
#include "test_paths.h"

/* ---- writing live records */

static char dir[256];

static void setup(void) {
  cr_assert_not_null(vqc_test_temp_dir(dir, sizeof dir,
                                       "/tmp/vqc-naming-XXXXXX"));
}

static void teardown(void) { vqc_test_remove_dir(dir); }

TestSuite(naming, .init = setup, .fini = teardown, .timeout = 60);

static void append(int rank, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/rank-%d.live.jsonl", dir, rank);
  FILE *f = fopen(path, "a");
  cr_assert_not_null(f, "cannot write %s", path);
  fputs(text, f);
  fclose(f);
}

static void start(int rank, int size) {
  char line[256];
  snprintf(line, sizeof line, "{\"event\":\"start\",\"rank\":%d,\"size\":%d,"
           "\"pid\":%d,\"host\":\"h\"}\n", rank, size, 4000 + rank);
  append(rank, line);
}

/* One ledger line of an all_reduce at /job/mismatch.py:`line` <module>,
 * in state "entered", "done" or "failed" (with its status). */
static void rec(int rank, int seq, const char *dtype, int count, int line,
                const char *state, const char *status) {
  char text[1024];
  snprintf(text, sizeof text,
           "{\"seq\":%d,\"rank\":%d,\"op\":\"all_reduce\",\"redop\":\"sum\","
           "\"dtype\":\"%s\",\"count\":%d,\"root\":-1,\"group_size\":2,"
           "\"file\":\"/job/mismatch.py\",\"line\":%d,\"func\":\"<module>\","
           "\"t_enter_ns\":1,\"t_exit_ns\":%d,\"state\":\"%s\","
           "\"status\":\"%s\"}\n",
           seq, rank, dtype, count, line, strcmp(state, "entered") ? 2 : 0,
           state, status);
  append(rank, text);
}

/* A collective entered and completed. */
static void done(int rank, int seq, int count, int line) {
  rec(rank, seq, "float32", count, line, "entered", "");
  rec(rank, seq, "float32", count, line, "done", "VQC_OK");
}

static void step(int rank, int s) {
  char line[64];
  snprintf(line, sizeof line, "{\"event\":\"step\",\"step\":%d}\n", s);
  append(rank, line);
}

static void finished(int rank, const char *status, int s) {
  char line[128];
  snprintf(line, sizeof line, "{\"event\":\"finished\",\"status\":\"%s\","
           "\"step\":%d}\n", status, s);
  append(rank, line);
}

/* ---- the analysis */

static vqc_findings found;
static int nfound;

static void analyze(int size) {
  vqc_findings_init(&found);
  nfound = -1;
  cr_assert_eq(vqc_ledger_analyze(dir, size, -1, &found, &nfound), VQC_OK,
               "%s", vqc_last_error());
}

static int count_kind(vqc_finding_kind k) {
  int n = 0;
  for (int i = 0; i < found.count; i++) n += found.items[i].kind == k;
  return n;
}

static const vqc_finding *the(vqc_finding_kind k) {
  cr_assert_eq(count_kind(k), 1, "expected one %s among %d findings%s%s",
               vqc_finding_kind_name(k), found.count,
               found.count ? "; the first: " : "",
               found.count ? found.items[0].message : "");
  for (int i = 0; i < found.count; i++)
    if (found.items[i].kind == k) return &found.items[i];
  return NULL;
}

static void expect_ranks(const vqc_finding *x, const int *ranks, int n) {
  cr_expect_eq(x->nranks, n, "%d ranks named, expected %d: %s", x->nranks, n,
               x->message);
  for (int i = 0; i < n && i < x->nranks; i++)
    cr_expect_eq(x->ranks[i], ranks[i], "ranks[%d] = %d, expected %d", i,
                 x->ranks[i], ranks[i]);
}

static void expect_in(const char *text, const char *part) {
  cr_expect(strstr(text, part) != NULL, "no \"%s\" in: %s", part, text);
}

static void expect_not_in(const char *text, const char *part) {
  cr_expect(strstr(text, part) == NULL, "\"%s\" in: %s", part, text);
}

/* Whether the detail's array `key` lists differing field `field`. */
static bool differs_in(const vqc_finding *x, const char *field) {
  const json_t *d = json_object_get(x->detail, "differs");
  for (size_t i = 0; i < json_array_size(d); i++)
    if (strcmp(json_string_value(json_array_get(d, i)), field) == 0)
      return true;
  return false;
}

/* The gloo run of mismatch.py (`x = torch.ones(4 + r); dist.all_reduce(x)`
 * at line 3): rank 0 entered its all_reduce of 4 floats and was aborted
 * inside it (its record stops: SIGABRT leaves no end line); rank 1's call of
 * 5 floats failed (connection reset) and it ended with its exception. */
static void gloo_size_mismatch(void) {
  start(0, 2);
  rec(0, 1, "float32", 4, 3, "entered", "");
  start(1, 2);
  rec(1, 1, "float32", 5, 3, "entered", "");
  rec(1, 1, "float32", 5, 3, "failed", "RuntimeError");
  finished(1, "VQC_EINTERNAL", -1);
}

/* ---- same line, same op, another count or dtype */

Test(naming, mismatch_count_is_a_collective_mismatch_at_its_line) {
  gloo_size_mismatch();
  analyze(2);
  cr_expect_eq(count_kind(VQC_FINDING_DEADLOCK), 0, "%s",
               found.count ? found.items[0].message : "");
  /* Rank 0 died inside the mismatched call: the mismatch is its story. */
  cr_expect_eq(count_kind(VQC_FINDING_RANK_FAILURE), 0);
  const vqc_finding *x = the(VQC_FINDING_COLLECTIVE_MISMATCH);
  cr_expect_eq(nfound, 1);
  expect_ranks(x, (int[]){0, 1}, 2);
  cr_expect_str_eq(x->site, "/job/mismatch.py:3 <module>");
  cr_expect_eq(x->step, 0);
  expect_in(x->message, "collective #1 all_reduce at /job/mismatch.py:3");
  expect_in(x->message, "rank 0 all_reduce(float32, count 4)");
  expect_in(x->message, "rank 1 all_reduce(float32, count 5)");
  expect_in(x->message, "different count");
  expect_in(x->message, "rank 0 died in it");
  expect_in(x->message, "rank 1's call failed (RuntimeError)");
  expect_not_in(x->message, "never by");
  cr_expect(differs_in(x, "count"));
  cr_expect(!differs_in(x, "dtype"));
  cr_expect_eq(json_array_size(json_object_get(x->detail, "calls")), 2);
  vqc_findings_free(&found);
}

Test(naming, mismatch_dtype_names_both_dtypes) {
  start(0, 2);
  rec(0, 1, "float32", 4, 3, "entered", "");
  start(1, 2);
  rec(1, 1, "float16", 4, 3, "entered", "");
  rec(1, 1, "float16", 4, 3, "failed", "RuntimeError");
  finished(1, "VQC_EINTERNAL", -1);
  analyze(2);
  const vqc_finding *x = the(VQC_FINDING_COLLECTIVE_MISMATCH);
  cr_expect_eq(found.count, 1, "%s", found.items[found.count - 1].message);
  expect_ranks(x, (int[]){0, 1}, 2);
  expect_in(x->message, "all_reduce(float32, count 4)");
  expect_in(x->message, "all_reduce(float16, count 4)");
  expect_in(x->message, "different dtype");
  cr_expect(differs_in(x, "dtype"));
  cr_expect(!differs_in(x, "count"));
  vqc_findings_free(&found);
}

/* Both calls returned (a backend that moves min(count) elements): the same
 * finding, with the results called out as wrong. */
Test(naming, mismatch_that_returned_is_a_collective_mismatch) {
  for (int r = 0; r < 2; r++) {
    start(r, 2);
    done(r, 0, 2, 2);
    rec(r, 1, "float32", 4 + r, 3, "entered", "");
    rec(r, 1, "float32", 4 + r, 3, "done", "VQC_OK");
    finished(r, "VQC_OK", 0);
  }
  analyze(2);
  const vqc_finding *x = the(VQC_FINDING_COLLECTIVE_MISMATCH);
  cr_expect_eq(found.count, 1);
  expect_ranks(x, (int[]){0, 1}, 2);
  expect_in(x->message, "rank 0 all_reduce(float32, count 4)");
  expect_in(x->message, "every rank returned from it");
  vqc_findings_free(&found);
}

/* Three ranks, one odd count, the other two agree: the odd rank is named,
 * both calls are told. */
Test(naming, mismatch_with_a_majority_names_the_odd_rank) {
  for (int r = 0; r < 3; r++) {
    start(r, 3);
    done(r, 0, 2, 2);
    rec(r, 1, "float32", r == 2 ? 7 : 4, 3, "entered", "");
  }
  analyze(3);
  cr_expect_eq(count_kind(VQC_FINDING_DEADLOCK), 0);
  const vqc_finding *x = the(VQC_FINDING_COLLECTIVE_MISMATCH);
  expect_ranks(x, (int[]){2}, 1);
  expect_in(x->message, "ranks 0, 1 all_reduce(float32, count 4)");
  expect_in(x->message, "rank 2 all_reduce(float32, count 7)");
  vqc_findings_free(&found);
}

/* Another line is another collective: a skipped or extra call stays what it
 * was (a misaligned deadlock), not a mismatch of sizes. */
Test(naming, another_line_stays_a_deadlock) {
  start(0, 2);
  rec(0, 1, "float32", 4, 3, "entered", "");
  start(1, 2);
  rec(1, 1, "float32", 1, 9, "entered", "");
  analyze(2);
  cr_expect_eq(count_kind(VQC_FINDING_COLLECTIVE_MISMATCH), 0);
  const vqc_finding *x = the(VQC_FINDING_DEADLOCK);
  cr_expect(json_is_true(json_object_get(x->detail, "misaligned")));
  vqc_findings_free(&found);
}

/* ---- how a process ended, as its supervisor saw it */

Test(naming, signal_text) {
  char buf[96];
  vqc_signal_text(SIGABRT, buf, sizeof buf);
  cr_expect_str_eq(buf, "signal 6 (SIGABRT, Aborted)");
  vqc_signal_text(SIGKILL, buf, sizeof buf);
  cr_expect_str_eq(buf, "signal 9 (SIGKILL, Killed)");
  vqc_signal_text(SIGSEGV, buf, sizeof buf);
  cr_expect_str_eq(buf, "signal 11 (SIGSEGV, Segmentation fault)");
}

/* The mismatch with what `vqcheck watch` saw of rank 0's process: the
 * message says the backend aborted on the mismatch. */
Test(naming, mismatch_aborted_by_the_backend) {
  gloo_size_mismatch();
  cr_assert_eq(vqc_live_mark_end(dir, 0, "vqcheck watch", SIGABRT, 0,
                                 "terminate called after throwing an "
                                 "instance of 'gloo::EnforceNotMet'\n  "
                                 "what():  [enforce fail at pair.cc:464] "
                                 "Received data size doesn't match expected "
                                 "size."),
               VQC_OK, "%s", vqc_last_error());
  vqc_live_info info;
  cr_assert_eq(vqc_live_scan(dir, 0, &info), VQC_OK);
  cr_expect(info.lost);
  cr_expect_eq(info.end_signal, SIGABRT);
  expect_in(info.why, "killed by signal 6 (SIGABRT, Aborted)");
  expect_in(info.last_words, "Received data size doesn't match");
  analyze(2);
  cr_expect_eq(count_kind(VQC_FINDING_RANK_FAILURE), 0);
  const vqc_finding *x = the(VQC_FINDING_COLLECTIVE_MISMATCH);
  expect_in(x->message, "rank 0 died in it (killed by signal 6 (SIGABRT, "
                        "Aborted): the backend aborted on the mismatch)");
  const json_t *calls = json_object_get(x->detail, "calls");
  const char *words = json_string_value(
      json_object_get(json_array_get(calls, 0), "last_words"));
  cr_assert_not_null(words);
  expect_in(words, "gloo::EnforceNotMet");
  vqc_findings_free(&found);
}

/* A rank killed with SIGKILL mid-step (the OOM killer): with the signal on
 * record the rank_failure names it and the rank's last words, instead of
 * listing what it might have been. */
Test(naming, signal_on_record_is_named_in_the_rank_failure) {
  for (int r = 0; r < 2; r++) {
    start(r, 2);
    done(r, 0, 8, 12);
    step(r, 0);
    rec(r, 1, "float32", 8, 12, "entered", "");
  }
  append(1, "{\"event\":\"signal\",\"signal\":15}\n");
  cr_assert_eq(vqc_live_mark_end(dir, 0, "vqcheck watch", SIGKILL, 0,
                                 "loading shard 3 of 4\n"), VQC_OK);
  analyze(2);
  const vqc_finding *f = the(VQC_FINDING_RANK_FAILURE);
  expect_ranks(f, (int[]){0}, 1);
  expect_in(f->message, "killed by signal 9 (SIGKILL, Killed)");
  expect_in(f->message, "loading shard 3 of 4");
  expect_not_in(f->message, "OOM killer), crashed");
  const json_t *one = json_array_get(json_object_get(f->detail,
                                                     "failed_ranks"), 0);
  cr_expect_eq(json_integer_value(json_object_get(one, "signal")), SIGKILL);
  vqc_findings_free(&found);
}

/* An exit status on record: "exited with status 3". */
Test(naming, exit_status_on_record_is_named) {
  for (int r = 0; r < 2; r++) {
    start(r, 2);
    done(r, 0, 8, 12);
  }
  finished(1, "VQC_OK", 0);
  cr_assert_eq(vqc_live_mark_end(dir, 0, "vqcheck watch", 0, 3,
                                 "fatal: out of disk\n"), VQC_OK);
  analyze(2);
  const vqc_finding *f = the(VQC_FINDING_RANK_FAILURE);
  expect_ranks(f, (int[]){0}, 1);
  expect_in(f->message, "exited with status 3");
  expect_in(f->message, "fatal: out of disk");
  vqc_findings_free(&found);
}

/* ---- a rank that left early */

/* early.py: three steps of two gradient all_reduces at line 12; rank 1
 * calls sys.exit(0) after step 0. Rank 0 enters step 1's first all_reduce
 * (#3), which fails (connection closed by peer). */
Test(naming, early_exit_names_the_rank_that_left) {
  for (int r = 0; r < 2; r++) {
    start(r, 2);
    done(r, 1, 8, 12);
    done(r, 2, 2, 12);
    step(r, 0);
  }
  finished(1, "VQC_OK", 0);
  rec(0, 3, "float32", 8, 12, "entered", "");
  rec(0, 3, "float32", 8, 12, "failed", "RuntimeError");
  finished(0, "VQC_EINTERNAL", 0);
  analyze(2);
  cr_expect_eq(count_kind(VQC_FINDING_RANK_FAILURE), 0);
  const vqc_finding *x = the(VQC_FINDING_DEADLOCK);
  expect_ranks(x, (int[]){1}, 1);
  cr_expect(strncmp(x->message, "rank 1 left early", 17) == 0, "%s",
            x->message);
  expect_in(x->message, "it left its training loop (VQC_OK) after 1 step");
  cr_expect(json_is_true(json_object_get(x->detail, "left_early")));
  vqc_findings_free(&found);
}

/* Last words longer than a message holds: their end is kept (what a
 * process says last tells most), from a word's start. */
Test(naming, long_last_words_keep_their_end) {
  for (int r = 0; r < 2; r++) {
    start(r, 2);
    done(r, 0, 8, 12);
  }
  finished(1, "VQC_OK", 0);
  char words[600];
  snprintf(words, sizeof words, "%0200d\n%0200d\nthe real reason: %0100d "
           "out of memory on node 3\n", 1, 2, 3);
  cr_assert_eq(vqc_live_mark_end(dir, 0, "vqcheck watch", SIGKILL, 0, words),
               VQC_OK);
  analyze(2);
  const vqc_finding *f = the(VQC_FINDING_RANK_FAILURE);
  expect_in(f->message, "out of memory on node 3)");
  expect_in(f->message, "its stderr ended: ... ");
  vqc_findings_free(&found);
}

/* One line all_reduces each gradient in turn (8 floats, then 2): rank 1
 * skips one (a parameter without a gradient there) and pairs its next call
 * with the others' skipped one. Both calls are ones that line always
 * makes: a misaligned call, told as a deadlock, not a mismatch of sizes. */
Test(naming, loop_of_sizes_with_a_skipped_call_stays_a_deadlock) {
  for (int r = 0; r < 2; r++) {
    start(r, 2);
    done(r, 0, 8, 12);
    done(r, 1, 2, 12);
    step(r, 0);
  }
  rec(0, 2, "float32", 8, 12, "entered", "");
  rec(1, 2, "float32", 2, 12, "entered", "");
  analyze(2);
  cr_expect_eq(count_kind(VQC_FINDING_COLLECTIVE_MISMATCH), 0, "%s",
               found.count ? found.items[0].message : "");
  const vqc_finding *x = the(VQC_FINDING_DEADLOCK);
  cr_expect(json_is_true(json_object_get(x->detail, "misaligned")));
  vqc_findings_free(&found);
}

/* ---- a rank whose own deadline fired is no culprit */

/* The MPI deadline case (test_gate_mpi_deadline, seen on a loaded
 * machine): rank 2 is stopped inside #2; rank 1 went on to #3, where its
 * own deadline fired (failed, VQC_ETIMEOUT), and the launcher ended the
 * job before rank 1 wrote its end; rank 0 was ended by the launcher
 * (signal). Rank 2 alone is the rank_failure: rank 1 was alive and
 * waiting on it. */
Test(naming, own_deadline_is_no_failure_of_its_own) {
  for (int r = 0; r < 3; r++) {
    start(r, 3);
    done(r, 0, 8, 12);
    step(r, 0);
  }
  rec(0, 1, "float32", 8, 12, "entered", "");
  rec(0, 1, "float32", 8, 12, "done", "VQC_OK");
  rec(1, 1, "float32", 8, 12, "entered", "");
  rec(1, 1, "float32", 8, 12, "done", "VQC_OK");
  rec(2, 1, "float32", 8, 12, "entered", "");
  rec(1, 2, "float32", 8, 12, "entered", "");
  rec(1, 2, "float32", 8, 12, "failed", "VQC_ETIMEOUT");
  append(0, "{\"event\":\"signal\",\"signal\":15}\n");
  analyze(3);
  const vqc_finding *f = the(VQC_FINDING_RANK_FAILURE);
  expect_ranks(f, (int[]){2}, 1);
  vqc_findings_free(&found);
}

/* Every rank that failed timed out waiting: nobody else to name, so they
 * stay the ranks named (never a clean verdict). */
Test(naming, all_timed_out_stay_named) {
  for (int r = 0; r < 2; r++) {
    start(r, 2);
    done(r, 0, 8, 12);
    rec(r, 1, "float32", 8, 12, "entered", "");
    rec(r, 1, "float32", 8, 12, "failed", "VQC_ETIMEOUT");
  }
  analyze(2);
  cr_expect(found.count > 0, "no finding for two ranks that timed out");
  vqc_findings_free(&found);
}

/* ---- a job ended from outside while calls were in flight is no hang */

/* A start line with the rank's collective deadline. */
static void start_timed(int rank, int size, double timeout_s) {
  char line[256];
  snprintf(line, sizeof line, "{\"event\":\"start\",\"rank\":%d,\"size\":%d,"
           "\"pid\":%d,\"host\":\"h\",\"timeout_s\":%g}\n", rank, size,
           4000 + rank, timeout_s);
  append(rank, line);
}

/* all_reduce #seq entered at t_ns and never left. */
static void entered_at(int rank, int seq, long long t_ns) {
  char text[512];
  snprintf(text, sizeof text,
           "{\"seq\":%d,\"rank\":%d,\"op\":\"all_reduce\",\"redop\":\"sum\","
           "\"dtype\":\"float32\",\"count\":8,\"root\":-1,"
           "\"file\":\"/job/train.c\",\"line\":35,\"func\":\"reduce_counts\","
           "\"t_enter_ns\":%lld,\"t_exit_ns\":0,\"state\":\"entered\","
           "\"status\":\"VQC_OK\"}\n", seq, rank, t_ns);
  append(rank, text);
}

static void signal_at(int rank, int sig, long long t_ns) {
  char line[128];
  snprintf(line, sizeof line, "{\"event\":\"signal\",\"signal\":%d,"
           "\"t_ns\":%lld}\n", sig, t_ns);
  append(rank, line);
}

/* `scancel` (slurm.real_cluster, seen in a CI run): SIGTERM reached all
 * four ranks while ranks 0-2 had entered #2 a millisecond before and rank
 * 3 was still computing. Nobody waited out the 5 s deadline: no deadlock
 * and no rank_failure (the run was cut short). */
static void cut_while_in_flight(long long waited_ns) {
  const long long t0 = 1000000000LL;
  for (int r = 0; r < 4; r++) {
    start_timed(r, 4, 5.0);
    done(r, 1, 8, 12);
    step(r, 0);
  }
  for (int r = 0; r < 3; r++) {
    entered_at(r, 2, t0 + r * 1000);
    signal_at(r, 15, t0 + waited_ns);
  }
  signal_at(3, 15, t0 + waited_ns);
  analyze(4);
}

Test(naming, ended_from_outside_mid_call_is_no_deadlock) {
  cut_while_in_flight(1000000LL); /* 1 ms */
  cr_expect_eq(count_kind(VQC_FINDING_DEADLOCK), 0,
               "a job scancel'd a millisecond into a collective is no hang");
  cr_expect_eq(count_kind(VQC_FINDING_RANK_FAILURE), 0);
  vqc_findings_free(&found);
}

/* The same records with the ranks waiting 6 s (past the 5 s deadline)
 * before the signal: a hang that was then ended, still the deadlock
 * naming rank 3. */
Test(naming, ended_after_the_deadline_stays_a_deadlock) {
  cut_while_in_flight(6000000000LL);
  const vqc_finding *f = the(VQC_FINDING_DEADLOCK);
  expect_ranks(f, (int[]){3}, 1);
  vqc_findings_free(&found);
}

/* Records that do not say when the signal came (older writers, the Python
 * bridge) keep the deadlock: nothing is excused on a guess. */
Test(naming, signal_without_time_stays_a_deadlock) {
  for (int r = 0; r < 2; r++) {
    start_timed(r, 2, 5.0);
    done(r, 1, 8, 12);
  }
  entered_at(0, 2, 1000);
  append(0, "{\"event\":\"signal\",\"signal\":15}\n");
  append(1, "{\"event\":\"signal\",\"signal\":15}\n");
  analyze(2);
  cr_expect_eq(count_kind(VQC_FINDING_DEADLOCK), 1);
  vqc_findings_free(&found);
}

/* ---- a reduction mismatch names both reductions */

/* One line reduces with the default "sum" on rank 0 and "max" on rank 1:
 * the message says "sum" as well as "max" (describe_rec leaves the
 * default out elsewhere). */
Test(naming, reduction_mismatch_names_the_default_sum) {
  static const char *const redop[] = {"sum", "max"};
  for (int r = 0; r < 2; r++) {
    start(r, 2);
    char text[512];
    for (int pass = 0; pass < 2; pass++) {
      snprintf(text, sizeof text,
               "{\"seq\":1,\"rank\":%d,\"op\":\"all_reduce\",\"redop\":\"%s\","
               "\"dtype\":\"float32\",\"count\":8,\"root\":-1,"
               "\"file\":\"/job/train.c\",\"line\":20,\"func\":\"main\","
               "\"t_enter_ns\":1,\"t_exit_ns\":%d,\"state\":\"%s\","
               "\"status\":\"VQC_OK\"}\n", r, redop[r], pass ? 2 : 0,
               pass ? "done" : "entered");
      append(r, text);
    }
    finished(r, "VQC_OK", 0);
  }
  analyze(2);
  const vqc_finding *f = the(VQC_FINDING_COLLECTIVE_MISMATCH);
  cr_expect(strstr(f->message, "different reduction"), "%s", f->message);
  cr_expect(strstr(f->message, "count 8, sum)"), "%s", f->message);
  cr_expect(strstr(f->message, "count 8, max)"), "%s", f->message);
  vqc_findings_free(&found);
}
