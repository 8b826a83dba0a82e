/* test_gate_ranks.c: "never a false green" for ranks that die or stop
 * (DESIGN.md): the live records every rank appends as it goes
 * (checkers/ledger_analysis.h) and what `vqcheck analyze` makes of them
 * once a job is gone without its run.json.
 *
 * The run directories are written by hand, line by line as ranks of a real
 * job leave them: a rank killed with SIGKILL (its record just stops), the
 * ranks its launcher then terminated (a "signal" line), a rank a supervisor
 * saw stopped ("lost") and ranks it had to kill ("killed"). The analysis
 * runs in the built CLI (vqc_test_cli(): $VQC_TEST_CLI runs another build, to
 * see these cases fail on a vqcheck that reads no live records: it calls
 * such directories clean). A ledger dump or live record with a line over
 * the 1 MiB cap is exit 2 naming file:line and the cap. The killing of
 * real processes is tests/chaos_ranks.sh. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ledger_analysis.h"
#include "spawn_capture.h"
#include "test_paths.h"

/* ---- writing a run directory */

static void append(const char *dir, int rank, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/rank-%d.live.jsonl", dir, rank);
  FILE *f = fopen(path, "a");
  cr_assert_not_null(f, "cannot write %s", path);
  fputs(text, f);
  fclose(f);
}

static void start(const char *dir, int rank, int size) {
  char line[256];
  snprintf(line, sizeof line, "{\"event\":\"start\",\"rank\":%d,\"size\":%d,"
           "\"pid\":%d,\"host\":\"h\"}\n", rank, size, 1000 + rank);
  append(dir, rank, line);
}

/* Collective seq of rank `rank`: the gradient all_reduce of step seq, its
 * entered line and, unless `entered_only`, its done line. */
static void coll(const char *dir, int rank, int seq, bool entered_only) {
  char line[1024];
  for (int pass = 0; pass < (entered_only ? 1 : 2); pass++) {
    snprintf(line, sizeof line,
             "{\"seq\":%d,\"rank\":%d,\"op\":\"all_reduce\",\"redop\":\"sum\","
             "\"dtype\":\"float32\",\"count\":16,\"root\":-1,"
             "\"file\":\"/src/lib/src/train/ddp.c\",\"line\":67,\"func\":"
             "\"reduce_bucket\",\"t_enter_ns\":1,\"t_exit_ns\":%d,"
             "\"state\":\"%s\",\"status\":\"VQC_OK\"}\n",
             seq, rank, pass ? 2 : 0, pass ? "done" : "entered");
    append(dir, rank, line);
  }
}

static void step(const char *dir, int rank, int s) {
  char line[64];
  snprintf(line, sizeof line, "{\"event\":\"step\",\"step\":%d}\n", s);
  append(dir, rank, line);
}

/* A rank that trained steps 0..n-1, one collective each. */
static void trained(const char *dir, int rank, int size, int n) {
  start(dir, rank, size);
  for (int s = 0; s < n; s++) {
    coll(dir, rank, s, false);
    step(dir, rank, s);
  }
}

/* ---- running the analysis */

typedef struct analysis {
  int code;
  json_t *run;   /* run.json afterwards; NULL when missing */
  char err[2048];
} analysis;

static analysis analyze(const char *dir) {
  analysis a = {0};
  vqc_spawn_result r;
  const char *argv[] = {vqc_test_cli(), "analyze", dir, "--quiet", NULL};
  cr_assert_eq(vqc_spawn_capture(&r, argv, "VQC_DEBUG", NULL), 0);
  a.code = r.code;
  snprintf(a.err, sizeof a.err, "%s", r.err);
  vqc_spawn_result_free(&r);
  char path[512];
  snprintf(path, sizeof path, "%s/run.json", dir);
  a.run = json_load_file(path, 0, NULL);
  return a;
}

/* The findings of kind `kind` in run.json. */
static int count_kind(const analysis *a, const char *kind) {
  const json_t *fs = json_object_get(a->run, "findings");
  int n = 0;
  for (size_t i = 0; i < json_array_size(fs); i++)
    n += strcmp(json_string_value(json_object_get(json_array_get(fs, i),
                                                  "kind")), kind) == 0;
  return n;
}

static const json_t *the_finding(const analysis *a, const char *kind) {
  cr_assert_eq(count_kind(a, kind), 1, "expected one %s finding (exit %d, "
               "stderr: %s)", kind, a->code, a->err);
  const json_t *fs = json_object_get(a->run, "findings");
  for (size_t i = 0; i < json_array_size(fs); i++) {
    const json_t *f = json_array_get(fs, i);
    if (strcmp(json_string_value(json_object_get(f, "kind")), kind) == 0)
      return f;
  }
  return NULL;
}

static void expect_ranks(const json_t *f, int rank) {
  const json_t *rs = json_object_get(f, "ranks");
  cr_expect_eq(json_array_size(rs), 1, "ranks: %zu", json_array_size(rs));
  cr_expect_eq(json_integer_value(json_array_get(rs, 0)), rank);
}

static char dir[256];

static void setup(void) {
  cr_assert_not_null(vqc_test_temp_dir(dir, sizeof dir,
                                       "/tmp/vqc-gate-ranks-XXXXXX"));
}

static void teardown(void) { vqc_test_remove_dir(dir); }

TestSuite(gate_ranks, .init = setup, .fini = teardown, .timeout = 60);

/* mpirun -np 3 vqcheck run ...; kill -9 of rank 1 after it finished step 3
 * (collective #3); mpirun then SIGTERMs ranks 0 and 2, which by then had
 * entered collective #4. No run.json: the job wrote nothing else. */
Test(gate_ranks, killed_rank_is_a_rank_failure_with_its_last_step) {
  for (int r = 0; r < 3; r++) trained(dir, r, 3, 4);
  coll(dir, 0, 4, true);
  coll(dir, 2, 4, true);
  append(dir, 0, "{\"event\":\"signal\",\"signal\":15}\n");
  append(dir, 2, "{\"event\":\"signal\",\"signal\":15}\n");
  analysis a = analyze(dir);
  cr_assert_not_null(a.run, "no run.json (exit %d): %s", a.code, a.err);
  cr_expect_eq(a.code, 1, "exit %d: %s", a.code, a.err);
  const json_t *f = the_finding(&a, "rank_failure");
  expect_ranks(f, 1);
  cr_expect_eq(json_integer_value(json_object_get(f, "step")), 4);
  const char *msg = json_string_value(json_object_get(f, "message"));
  cr_expect(strstr(msg, "rank 1 ") && strstr(msg, "step 4") &&
                strstr(msg, "#3 all_reduce(float32, count 16) at "
                            "lib/src/train/ddp.c:67 reduce_bucket (completed)") &&
                strstr(msg, "wait in #4"),
            "message: %s", msg);
  /* The terminated ranks were cut off, not stuck: no deadlock. */
  cr_expect_eq(count_kind(&a, "deadlock"), 0);
  json_decref(a.run);
}

/* The same job killed as a whole (Ctrl-C to mpirun: every rank notes
 * SIGINT) before any rank finished: no rank failed by itself, but the run
 * did not finish, so it is not clean. */
Test(gate_ranks, a_job_that_did_not_finish_is_never_clean) {
  for (int r = 0; r < 3; r++) {
    trained(dir, r, 3, 2);
    append(dir, r, "{\"event\":\"signal\",\"signal\":2}\n");
  }
  analysis a = analyze(dir);
  cr_assert_not_null(a.run, "no run.json (exit %d): %s", a.code, a.err);
  cr_expect_neq(a.code, 0, "a job cut short was called clean");
  cr_expect_eq(a.code, 3, "exit %d: %s", a.code, a.err);
  const json_t *tr = json_object_get(a.run, "training");
  cr_expect_str_eq(json_string_value(json_object_get(tr, "status")),
                   "VQC_EABORTED");
  cr_expect(strstr(json_string_value(json_object_get(tr, "message")),
                   "ranks 0, 1, 2"), "%s",
            json_string_value(json_object_get(tr, "message")));
  json_decref(a.run);
}

/* A supervisor saw rank 2 stopped (kill -STOP) in collective #2, marked it
 * lost, and killed ranks 0 and 1 waiting in #2. */
Test(gate_ranks, stopped_rank_marked_lost_is_named) {
  for (int r = 0; r < 3; r++) {
    trained(dir, r, 3, 2);
    coll(dir, r, 2, true);
  }
  cr_assert_eq(vqc_live_mark(dir, 2, "lost", "test", "stopped for 5 s"),
               VQC_OK);
  cr_assert_eq(vqc_live_mark(dir, 0, "killed", "test", "rank 2 stopped"),
               VQC_OK);
  cr_assert_eq(vqc_live_mark(dir, 1, "killed", "test", "rank 2 stopped"),
               VQC_OK);
  analysis a = analyze(dir);
  cr_assert_not_null(a.run, "no run.json (exit %d): %s", a.code, a.err);
  cr_expect_eq(a.code, 1, "exit %d: %s", a.code, a.err);
  const json_t *f = the_finding(&a, "rank_failure");
  expect_ranks(f, 2);
  const char *msg = json_string_value(json_object_get(f, "message"));
  cr_expect(strstr(msg, "stopped for 5 s") &&
                strstr(msg, "#2 all_reduce(float32, count 16) at "
                            "lib/src/train/ddp.c:67 reduce_bucket (entered, never "
                            "completed)"),
            "message: %s", msg);
  json_decref(a.run);
}

/* Every rank reached its end: clean (the live records add no false red),
 * once the ranks' digests were compared (without traces nothing was, and
 * that is never clean: test_gate_verdict). */
Test(gate_ranks, finished_ranks_are_clean) {
  for (int r = 0; r < 2; r++) {
    trained(dir, r, 2, 3);
    append(dir, r, "{\"event\":\"finished\",\"status\":\"VQC_OK\","
                   "\"step\":3}\n");
    char path[512];
    snprintf(path, sizeof path, "%s/rank-%d.trace.jsonl", dir, r);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    for (int step = 0; step < 3; step++)
      fprintf(f, "{\"schema\":\"vqcheck-trace/1\",\"rank\":%d,\"step\":%d,"
              "\"tensor\":\"w\",\"dtype\":\"float32\",\"shape\":[2],"
              "\"digest_algo\":\"vqc-xxh3-tree-1\",\"digest\":"
              "\"6c2fb54e585a545%d\"}\n", r, step, step);
    cr_assert_eq(fclose(f), 0);
  }
  analysis a = analyze(dir);
  cr_expect_eq(a.code, 0, "exit %d: %s", a.code, a.err);
  cr_expect_eq(count_kind(&a, "rank_failure") + count_kind(&a, "deadlock"),
               0);
  json_decref(a.run);
}

/* The writer: the lines above are what a rank writes, a signal handler's
 * line included. */
Test(gate_ranks, live_writer_round_trip) {
  vqc_live *l = NULL;
  vqc_live_signals(); /* as a rank process does before its handlers */
  cr_assert_eq(vqc_live_open(dir, 1, 4, 0, &l), VQC_OK, "%s", vqc_last_error());
  vqc_ledger_record r = {.seq = 0, .rank = 1, .op = VQC_COLL_BROADCAST,
                         .dtype = VQC_I64, .count = 2, .root = 0,
                         .site = {"a \"quoted\" file.c", 7, "fn"},
                         .state = VQC_REC_DONE};
  vqc_live_record(l, &r);
  vqc_live_step(l, 0);
  vqc_live_note_signal(SIGTERM);
  vqc_live_info info;
  cr_assert_eq(vqc_live_scan(dir, 1, &info), VQC_OK);
  cr_expect(info.exists && info.started && !info.finished);
  cr_expect_eq(info.size, 4);
  cr_expect_eq(info.pid, (long)getpid());
  cr_expect_eq(info.records, 1);
  cr_expect_eq(info.steps_done, 1);
  cr_expect_eq(info.signal, SIGTERM);
  vqc_live_finished(l, VQC_OK, 1);
  vqc_live_close(l);
  cr_assert_eq(vqc_live_scan(dir, 1, &info), VQC_OK);
  cr_expect(info.finished);
  cr_expect_str_eq(info.status, "VQC_OK");
}

/* A ledger dump or live record with a line over the 1 MiB cap (a file that
 * is not vqcheck's, or a corrupt one) is exit 2 naming file:line and the
 * cap, read no further than the cap: it used to be read whole with getline
 * (a 1 GB line cost 3 GB of RSS). */
Test(gate_ranks, a_line_over_the_cap_is_exit_2_in_dumps_and_records) {
  static const char *const names[2] = {"rank-0.ledger.jsonl",
                                       "rank-0.live.jsonl"};
  for (int k = 0; k < 2; k++) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, names[k]);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fputs("{\"rank\":0,\"x\":\"", f);
    for (int i = 0; i < (2 << 20); i++) fputc('a', f);
    fputs("\"}\n", f);
    fclose(f);
    analysis a = analyze(dir);
    cr_expect_eq(a.code, 2, "%s: exit %d: %s", names[k], a.code, a.err);
    char want[128];
    snprintf(want, sizeof want, "%s:1: the line is longer than 1048576 bytes",
             names[k]);
    cr_expect(strstr(a.err, want), "%s: stderr: %s", names[k], a.err);
    json_decref(a.run);
    cr_assert_eq(unlink(path), 0);
  }
}
