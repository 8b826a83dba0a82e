/* test_naming_watch.c: where `vqcheck watch`'s process facts (exit
 * statuses, signals, stderr tails) meet the ledger analysis
 * (harness/run/watch_job.c), on the run directories and processes of real
 * torch 2.15 gloo runs written by hand:
 *
 *   mismatch_*     mismatch.py's gloo size mismatch: one collective_mismatch
 *                  (the ledger's), and rank 0's SIGABRT told with its last
 *                  stderr lines, not a rank_failure that guesses and not a
 *                  deadlock; with the facts marked on the live records first
 *                  (vqc_watch_mark_ended) the mismatch itself tells them;
 *   early_exit_*   rank 1 exits 0 after one of three steps: the findings
 *                  name rank 1, never rank 0 (which failed only because
 *                  rank 1 had gone), with or without a hang marker;
 *   exception_*    the first exception raised tells the story, over a
 *                  torn-down peer; one out of a mismatched collective
 *                  repeats the collective's finding.
 *
 * The findings callback runs as cmd_watch.c runs it: after the analysis,
 * with every finding so far in `known`. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze.h"
#include "ledger_analysis.h"
#include "test_paths.h"
#include "watch_job.h"

static char dir[256];

static void setup(void) {
  cr_assert_not_null(vqc_test_temp_dir(dir, sizeof dir,
                                       "/tmp/vqc-naming-watch-XXXXXX"));
}

static void teardown(void) { vqc_test_remove_dir(dir); }

TestSuite(naming_watch, .init = setup, .fini = teardown, .timeout = 60);

/* ---- the run directory */

static void append(const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "a");
  cr_assert_not_null(f, "cannot write %s", path);
  fputs(text, f);
  fclose(f);
}

static void live(int rank, const char *text) {
  char name[64];
  snprintf(name, sizeof name, "rank-%d.live.jsonl", rank);
  append(name, text);
}

static void start(int rank) {
  char line[256];
  snprintf(line, sizeof line, "{\"event\":\"start\",\"rank\":%d,\"size\":2,"
           "\"pid\":%d,\"host\":\"h\"}\n", rank, 4000 + rank);
  live(rank, line);
}

static void rec(int rank, int seq, int count, int line, const char *state,
                const char *status) {
  char text[1024];
  snprintf(text, sizeof text,
           "{\"seq\":%d,\"rank\":%d,\"op\":\"all_reduce\",\"redop\":\"sum\","
           "\"dtype\":\"float32\",\"count\":%d,\"root\":-1,"
           "\"file\":\"/job/j.py\",\"line\":%d,\"func\":\"<module>\","
           "\"t_enter_ns\":1,\"t_exit_ns\":2,\"state\":\"%s\","
           "\"status\":\"%s\"}\n",
           seq, rank, count, line, state, status);
  live(rank, text);
}

/* ---- the processes (waitpid's status words, as Linux encodes them) */

static int exited(int code) { return (code & 0xff) << 8; }
static int killed(int sig) { return sig & 0x7f; }

static vqc_watch_proc procs[2];

static void proc(int rank, int status, const char *tail, int order) {
  vqc_watch_proc *p = &procs[rank];
  memset(p, 0, sizeof *p);
  p->pid = 4000 + rank;
  p->rank = rank;
  p->err_fd = -1;
  p->exited = true;
  p->status = status;
  p->exit_order = order;
  p->ntail = strlen(tail);
  memcpy(p->tail, tail, p->ntail);
}

static char *argv_job[] = {"python", "j.py", NULL};
static vqc_watch_opts opts = {.nproc = 2, .interval = 1, .timeout = 20,
                              .cmd_argc = 2, .cmd_argv = argv_job};

static vqc_findings known, more;

/* The analysis as cmd_watch.c runs it: the ledger's findings, then the
 * command's own. */
static void analyze(void) {
  vqc_findings_init(&known);
  vqc_findings_init(&more);
  cr_assert_eq(vqc_ledger_analyze(dir, 2, -1, &known, NULL), VQC_OK, "%s",
               vqc_last_error());
  vqc_watch_ctx ctx = {.dir = dir, .o = &opts, .procs = procs, .nprocs = 2};
  vqc_watch_more_findings(&ctx, &known, &more);
}

static void done_all(void) {
  vqc_findings_free(&known);
  vqc_findings_free(&more);
}

/* Whether finding x names rank r. */
static bool names(const vqc_finding *x, int r) {
  for (int i = 0; i < x->nranks; i++)
    if (x->ranks[i] == r) return true;
  return false;
}

static int count_kind(const vqc_findings *f, vqc_finding_kind k) {
  int n = 0;
  for (int i = 0; i < f->count; i++) n += f->items[i].kind == k;
  return n;
}

static void expect_in(const char *text, const char *part) {
  cr_expect(strstr(text, part) != NULL, "no \"%s\" in: %s", part, text);
}

/* ---- mismatch.py: x = torch.ones(4 + r); dist.all_reduce(x) at line 3 */

static const char gloo_abort[] =
    "terminate called after throwing an instance of 'gloo::EnforceNotMet'\n"
    "  what():  [enforce fail at /__w/pytorch/pytorch/third_party/gloo/gloo/"
    "transport/tcp/pair.cc:464] op.preamble.length <= op.nbytes. 8 vs 4. "
    "Received data size doesn't match expected size. Is there a distributed "
    "collective mismatch in your code?\n";

static void gloo_size_mismatch(void) {
  start(0);
  rec(0, 1, 4, 3, "entered", "");
  start(1);
  rec(1, 1, 5, 3, "entered", "");
  rec(1, 1, 5, 3, "failed", "RuntimeError");
  live(1, "{\"event\":\"finished\",\"status\":\"VQC_EINTERNAL\",\"step\":-1}\n");
  proc(0, killed(SIGABRT), gloo_abort, 1);
  proc(1, exited(1),
       "[rank1]:     work.wait()\n[rank1]: RuntimeError: [pair.cc:545] Read "
       "error [127.0.0.1]:3237: Connection reset by peer.\n", 2);
}

Test(naming_watch, mismatch_abort_is_told_with_its_signal_and_last_words) {
  gloo_size_mismatch();
  analyze();
  cr_expect_eq(count_kind(&known, VQC_FINDING_DEADLOCK), 0);
  cr_expect_eq(count_kind(&known, VQC_FINDING_RANK_FAILURE), 0,
               "the ledger guessed how rank 0 ended");
  cr_assert_eq(count_kind(&known, VQC_FINDING_COLLECTIVE_MISMATCH), 1);
  /* The SIGABRT, with what rank 0 last said, and only about rank 0: rank
   * 1's RuntimeError is the mismatch's doing. */
  cr_assert_eq(more.count, 1, "%d findings of watch's own", more.count);
  const vqc_finding *f = &more.items[0];
  cr_expect_eq(f->kind, VQC_FINDING_RANK_FAILURE);
  cr_expect(names(f, 0) && !names(f, 1), "%s", f->message);
  expect_in(f->message, "killed by signal 6 (SIGABRT, Aborted)");
  expect_in(f->message, "the collective_mismatch at /job/j.py:3 <module>");
  expect_in(f->message, "the backend aborted the process on it");
  expect_in(f->message, "Received data size doesn't match expected size");
  done_all();
}

/* With the facts on the live records before the analysis (what
 * cmd_watch.c does once a job has ended), the mismatch tells the abort
 * itself and watch adds nothing. */
Test(naming_watch, mismatch_with_marked_records_tells_the_abort) {
  gloo_size_mismatch();
  vqc_watch_mark_ended(dir, procs, 2);
  vqc_live_info info;
  cr_assert_eq(vqc_live_scan(dir, 0, &info), VQC_OK);
  cr_expect(info.lost && info.end_signal == SIGABRT);
  /* Rank 1 wrote its own end: nothing is added to its record. */
  cr_assert_eq(vqc_live_scan(dir, 1, &info), VQC_OK);
  cr_expect(!info.lost);
  analyze();
  cr_assert_eq(known.count, 1, "%d findings", known.count);
  const vqc_finding *x = &known.items[0];
  cr_expect_eq(x->kind, VQC_FINDING_COLLECTIVE_MISMATCH);
  expect_in(x->message, "killed by signal 6 (SIGABRT, Aborted): the backend "
                        "aborted on the mismatch");
  cr_expect_eq(more.count, 0, "%s", more.count ? more.items[0].message : "");
  done_all();
}

/* A rank SIGKILLed mid-step (the OOM killer), marked: the ledger's
 * rank_failure names the signal, and watch adds no second one. */
Test(naming_watch, marked_sigkill_is_one_rank_failure_naming_it) {
  for (int r = 0; r < 2; r++) {
    start(r);
    rec(r, 0, 8, 12, "entered", "");
    rec(r, 0, 8, 12, "done", "VQC_OK");
    live(r, "{\"event\":\"step\",\"step\":0}\n");
    rec(r, 1, 8, 12, "entered", "");
  }
  live(1, "{\"event\":\"signal\",\"signal\":15}\n");
  proc(0, killed(SIGKILL), "epoch 0 step 1\n", 1);
  proc(1, killed(SIGTERM), "", 2);
  procs[1].stopped = true;
  vqc_watch_mark_ended(dir, procs, 2);
  analyze();
  cr_assert_eq(count_kind(&known, VQC_FINDING_RANK_FAILURE), 1);
  const vqc_finding *f = &known.items[0];
  expect_in(f->message, "killed by signal 9 (SIGKILL, Killed)");
  expect_in(f->message, "epoch 0 step 1");
  cr_expect_eq(more.count, 0, "%s", more.count ? more.items[0].message : "");
  done_all();
}

/* ---- early.py: rank 1 calls sys.exit(0) after step 0 of 3 */

static void early_exit_records(void) {
  for (int r = 0; r < 2; r++) {
    start(r);
    rec(r, 1, 8, 12, "entered", "");
    rec(r, 1, 8, 12, "done", "VQC_OK");
    rec(r, 2, 2, 12, "entered", "");
    rec(r, 2, 2, 12, "done", "VQC_OK");
    live(r, "{\"event\":\"step\",\"step\":0}\n");
  }
  live(1, "{\"event\":\"finished\",\"status\":\"VQC_OK\",\"step\":0}\n");
  rec(0, 3, 8, 12, "entered", "");
}

/* Rank 0's next all_reduce fails (connection closed by peer) and it exits
 * 1: rank 1 is the rank named, and rank 0's exit is no rank_failure. */
Test(naming_watch, early_exit_names_the_rank_that_left) {
  early_exit_records();
  rec(0, 3, 8, 12, "failed", "RuntimeError");
  live(0, "{\"event\":\"finished\",\"status\":\"VQC_EINTERNAL\",\"step\":0}\n");
  proc(1, exited(0), "", 1);
  proc(0, exited(1),
       "[rank0]: RuntimeError: [pair.cc:561] Connection closed by peer "
       "[127.0.0.1]:31379.\n", 2);
  analyze();
  for (int i = 0; i < known.count; i++)
    cr_expect(names(&known.items[i], 1) && !names(&known.items[i], 0),
              "%s: %s", vqc_finding_kind_name(known.items[i].kind),
              known.items[i].message);
  cr_expect_eq(more.count, 0, "%s", more.count ? more.items[0].message : "");
  done_all();
}

/* The same with a backend that waits instead (rank 0 hangs in #3 and
 * writes its hang marker; vqcheck watch stops it): the hang's deadlock
 * names rank 1, which had left, and says so. */
Test(naming_watch, early_exit_then_hang_names_the_rank_that_left) {
  early_exit_records();
  append("rank-0.hang", "{\"rank\":0,\"op\":\"all_reduce\",\"seq\":3,"
         "\"site\":\"/job/j.py:12 <module>\",\"step\":1,\"waited_s\":20.1,"
         "\"last_completed\":{\"op\":\"all_reduce\",\"seq\":2,"
         "\"site\":\"/job/j.py:12 <module>\"}}");
  proc(1, exited(0), "", 1);
  procs[1].at_hang = VQC_WATCH_AT_HANG_ENDED;
  proc(0, killed(SIGTERM), "", 2);
  procs[0].stopped = true;
  procs[0].at_hang = VQC_WATCH_AT_HANG_MARKED;
  /* What analyze keeps with caller_reports_hangs: not the ledger's
   * deadlock, which the hang's replaces. */
  vqc_findings_init(&known);
  vqc_findings_init(&more);
  vqc_watch_ctx ctx = {.dir = dir, .o = &opts, .procs = procs, .nprocs = 2};
  vqc_watch_more_findings(&ctx, &known, &more);
  cr_assert_eq(count_kind(&more, VQC_FINDING_DEADLOCK), 1);
  const vqc_finding *x = &more.items[0];
  cr_expect(names(x, 1) && !names(x, 0), "%s", x->message);
  cr_expect(strncmp(x->message, "rank 1 left early", 17) == 0, "%s",
            x->message);
  expect_in(x->message, "exited with status 0");
  expect_in(x->message, "rank 0 waits in all_reduce at j.py:12");
  cr_expect_eq(more.count, 1, "%s", more.items[more.count - 1].message);
  done_all();
}

Test(naming_watch, end_text_names_the_signal) {
  char buf[128];
  proc(0, killed(SIGKILL), "", 1);
  vqc_watch_end_text(&procs[0], buf, sizeof buf);
  cr_expect_str_eq(buf, "was killed by signal 9 (SIGKILL, Killed)");
  proc(0, exited(3), "", 1);
  vqc_watch_end_text(&procs[0], buf, sizeof buf);
  cr_expect_str_eq(buf, "exited with status 3");
}

/* ---- an exception that ended a rank (the bridge's note of it) */

/* Rank r's note of the exception that ended it, as the bridge writes it
 * (python/vqcheck/_bridge/__init__.py note_exception). */
static void raised(int r, double when, int line, const char *type,
                   const char *op) {
  char text[1024], name[64];
  snprintf(text, sizeof text,
           "{\"kind\":\"rank_failure\",\"step\":2,\"ranks\":[%d],"
           "\"tensor\":\"\",\"site\":{\"file\":\"/job/j.py\",\"line\":%d,"
           "\"func\":\"<module>\"},\"message\":\"rank %d raised %s: x, in "
           "step 2 at j.py:%d (<module>)\",\"detail\":{\"exception\":\"%s\","
           "\"exception_message\":\"x\",\"in_collective\":%s%s%s,"
           "\"raised_at\":%.3f,\"source_of_finding\":\"python bridge\"}}\n",
           r, line, r, type, line, type, op ? "\"" : "", op ? op : "null",
           op ? "\"" : "", when);
  snprintf(name, sizeof name, "rank-%d.findings.jsonl", r);
  append(name, text);
}

/* The whole analysis, as `vqcheck watch` runs it (its process facts
 * through more_findings): the run.json findings in *out. */
static void analyze_dir(vqc_analyze_result *out, int nprocs) {
  vqc_watch_ctx ctx = {.dir = dir, .o = &opts, .procs = procs,
                       .nprocs = nprocs};
  vqc_analyze_opts o = {.run_dir = dir, .ranks = 2, .backend = "watch",
                        .more_findings = vqc_watch_more_findings,
                        .more_ctx = &ctx, .caller_reports_hangs = true};
  cr_assert_eq(vqc_analyze_run_dir(&o, out), VQC_OK, "%s",
               vqc_last_error());
}

/* Rank 1 raised in its own code at step 2; rank 0's gradient all_reduce
 * then failed (its peer gone) and it raised too, 0.4 s later. The files are
 * read in rank order, so rank 0's note comes first: the time decides. One
 * rank_failure: rank 1's story first, then rank 0's, both ranks named, and
 * no process failure beside it. */
Test(naming_watch, exception_first_raised_tells_the_story) {
  for (int r = 0; r < 2; r++) {
    start(r);
    live(r, "{\"event\":\"step\",\"step\":0}\n{\"event\":\"step\","
            "\"step\":1}\n");
    live(r, "{\"event\":\"finished\",\"status\":\"VQC_EINTERNAL\","
            "\"step\":1}\n");
  }
  raised(1, 1000.0, 10, "RuntimeError", NULL);
  raised(0, 1000.4, 11, "RuntimeError", "all_reduce");
  proc(1, exited(1), "RuntimeError: mat1 and mat2 shapes\n", 1);
  proc(0, exited(1), "RuntimeError: Connection closed by peer\n", 2);
  vqc_analyze_result res;
  analyze_dir(&res, 2);
  cr_assert_eq(res.findings.count, 1, "%s",
               res.findings.count ? res.findings.items[1 % res.findings.count]
                                        .message : "");
  const vqc_finding *x = &res.findings.items[0];
  cr_expect_eq(x->kind, VQC_FINDING_RANK_FAILURE);
  cr_expect_eq(x->step, 2);
  cr_expect(names(x, 0) && names(x, 1));
  cr_expect(strstr(x->site, "j.py:10") != NULL, "%s", x->site);
  cr_expect(strncmp(x->message, "rank 1 raised RuntimeError", 26) == 0, "%s",
            x->message);
  expect_in(x->message, "; then rank 0's all_reduce failed (RuntimeError "
                        "at j.py:11 <module>)");
  const json_t *then = json_object_get(x->detail, "then");
  cr_expect_eq(json_array_size(then), 1);
  cr_expect_eq(res.exit_code, 1);
  vqc_analyze_result_free(&res);
}

/* Under a launcher (torchrun: the one process watch started) rank 0 was
 * torn down before it could end its record ("killed", as the ledger sees
 * it) after rank 1 raised, and the launcher exited 1: the exception is the
 * story, not rank 0 and not the launcher. */
Test(naming_watch, exception_wins_over_a_torn_down_peer) {
  for (int r = 0; r < 2; r++) {
    start(r);
    live(r, "{\"event\":\"step\",\"step\":0}\n{\"event\":\"step\","
            "\"step\":1}\n");
  }
  live(1, "{\"event\":\"finished\",\"status\":\"VQC_EINTERNAL\","
          "\"step\":1}\n");
  raised(1, 1000.0, 10, "ValueError", NULL);
  proc(0, exited(1), "torch.distributed.elastic...ChildFailedError\n", 1);
  procs[0].rank = -1; /* the launcher */
  vqc_analyze_result res;
  analyze_dir(&res, 1);
  cr_assert_geq(res.findings.count, 1);
  const vqc_finding *x = &res.findings.items[0];
  cr_expect(strncmp(x->message, "rank 1 raised ValueError", 24) == 0, "%s",
            x->message);
  for (int i = 1; i < res.findings.count; i++)
    cr_expect_neq(res.findings.items[i].kind, VQC_FINDING_RANK_FAILURE,
                  "%s", res.findings.items[i].message);
  vqc_analyze_result_free(&res);
}

/* An exception that came out of a collective that the ledger shows
 * mismatched (gloo's size mismatch raised on rank 1, rank 0 aborted) is
 * the collective_mismatch's consequence: not a rank_failure of its own
 * (rank 0's abort is told as before, with its signal). */
Test(naming_watch, exception_out_of_a_mismatched_collective_repeats_it) {
  for (int r = 0; r < 2; r++) {
    start(r);
    rec(r, 1, 4 + r, 5, "failed", "RuntimeError");
  }
  raised(1, 1000.0, 5, "RuntimeError", "all_reduce");
  proc(0, killed(SIGABRT), "Received data size doesn't match\n", 1);
  proc(1, exited(1), "RuntimeError: Connection closed by peer\n", 2);
  vqc_analyze_result res;
  analyze_dir(&res, 2);
  cr_expect_eq(count_kind(&res.findings, VQC_FINDING_COLLECTIVE_MISMATCH), 1);
  for (int i = 0; i < res.findings.count; i++)
    cr_expect(!json_object_get(res.findings.items[i].detail, "exception"),
              "%s", res.findings.items[i].message);
  vqc_analyze_result_free(&res);
}

