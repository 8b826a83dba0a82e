/* test_instrument.c: the instrumentation API (checkers/include/vqc/instrument.h) on the
 * threads backend.
 *
 * Each run is a tiny "foreign" loop on 3 ranks: two registered tensors
 * (w: float32 (4, 8) with a gradient, count: int64 (2)), one all_reduce of
 * the gradient per step, vqc_instr_step_end after it. Cases:
 *
 *   clean              no finding, exit code 0 on every rank, run.json
 *                      readable by the runner's reader with 0 findings;
 *   divergence         rank 1 changes w[1][3] by one ULP after step 2: one
 *                      `divergence` at step 2 in "w", ranks {1}, first index
 *                      11, 1 ULP; every rank returns 1 finding and exit 1;
 *                      run.json holds the same finding;
 *   deadlock           rank 2 leaves the loop before step 1's all_reduce:
 *                      the others time out; finish reports `deadlock` (exit
 *                      1, not 3: the finding explains the failure);
 *   stale_files        create removes run.json and rank-* files of an
 *                      earlier run from the directory and keeps others;
 *   misuse             register after start, step_end before start, a
 *                      strided tensor, equivalence without a reference:
 *                      VQC_EINVAL each. */
#include <criterion/criterion.h>
#include <glob.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "findings.h"
#include "vqc/instrument.h"
#include "report.h"
#include "rundir.h"
#include "runner.h" /* vqc_run_read_json: run.json must read like the runner's */
#include "spawn_capture.h"
#include "test_paths.h"

#define RANKS 3
#define STEPS 4

typedef enum { MODE_CLEAN, MODE_DIVERGE, MODE_LEAVE } mode;

/* The program's name the ranks give vqc_instr_create. */
static const char *program_name = "test_instrument";

typedef struct world {
  mode m;
  char dir[256];
  /* per rank, after finish */
  int nfindings[RANKS];
  int exit_code[RANKS];
  vqc_status finish[RANKS];
  /* rank 0's copy of the merged findings (JSON text) */
  char *findings_json;
  /* whether ranks other than 0 got NULL from vqc_instr_findings (asserted
   * on the test's thread: Criterion asserts must not run on rank threads) */
  bool others_null[RANKS];
} world;

static vqc_status rank_body(vqc_comm *c, void *arg) {
  world *w = arg;
  const int rank = vqc_comm_rank(c);
  float weight[4 * 8], grad[4 * 8];
  int64_t count[2] = {7, 9};
  for (int i = 0; i < 32; i++) weight[i] = 0.25f * (float)i;

  vqc_instr_options o = {0};
  o.name = program_name;
  o.run_dir = w->dir;
  o.timeout_s = 1.0;
  vqc_instr *s = NULL;
  vqc_status st = vqc_instr_create(c, &o, &s);
  if (st != VQC_OK) return st;
  const int64_t wshape[2] = {4, 8}, cshape[1] = {2};
  st = vqc_instr_register(s, "w", VQC_F32, weight, grad, 2, wshape);
  if (st == VQC_OK)
    st = vqc_instr_register(s, "count", VQC_I64, count, NULL, 1, cshape);
  if (st == VQC_OK) st = vqc_instr_start(s);
  for (int64_t step = 0; st == VQC_OK && step < STEPS; step++) {
    if (w->m == MODE_LEAVE && rank == 2 && step == 1) break;
    for (int i = 0; i < 32; i++) grad[i] = (float)(rank + 1) * 0.5f;
    st = vqc_all_reduce(c, grad, grad, 32, VQC_F32, VQC_SUM);
    if (st != VQC_OK) break;
    for (int i = 0; i < 32; i++) weight[i] -= 0.125f * grad[i];
    count[0]++;
    if (w->m == MODE_DIVERGE && rank == 1 && step == 2)
      weight[1 * 8 + 3] = nextafterf(weight[1 * 8 + 3], 1e30f);
    st = vqc_instr_step_end(s, step);
  }
  w->finish[rank] = vqc_instr_finish(s, st, &w->nfindings[rank]);
  w->exit_code[rank] = vqc_instr_exit_code(s);
  const vqc_findings *f = vqc_instr_findings(s);
  if (rank == 0 && f) {
    json_t *arr = json_array();
    for (int i = 0; i < f->count; i++)
      json_array_append_new(arr, vqc_finding_to_json(&f->items[i]));
    w->findings_json = json_dumps(arr, JSON_COMPACT);
    json_decref(arr);
  } else if (rank != 0) {
    w->others_null[rank] = f == NULL;
  }
  vqc_instr_destroy(s);
  return VQC_OK;
}

static void run(world *w, mode m, const char *name) {
  memset(w, 0, sizeof *w);
  w->m = m;
  snprintf(w->dir, sizeof w->dir, "/tmp/vqc-test-instrument-%d-%s",
           (int)getpid(), name);
  cr_assert_eq(vqc_threads_run(RANKS, 5.0, rank_body, w, NULL), VQC_OK, "%s",
               vqc_last_error());
  cr_assert_not_null(w->findings_json, "rank 0 has the merged findings");
  for (int r = 1; r < RANKS; r++)
    cr_expect(w->others_null[r], "rank %d: only rank 0 holds the findings", r);
}

/* The findings and exit code of w->dir/run.json, through the runner's
 * reader. */
static void read_run_json(const world *w, vqc_findings *f, int *exit_code) {
  char path[512];
  snprintf(path, sizeof path, "%s/run.json", w->dir);
  vqc_findings_init(f);
  cr_assert_eq(vqc_run_read_json(path, f, exit_code), VQC_OK, "%s",
               vqc_last_error());
}

/* Each test runs in its own process and names its run directories
 * /tmp/vqc-test-instrument-<pid>-<case>: remove them when it ends. */
static void remove_run_dirs(void) {
  char pattern[128];
  snprintf(pattern, sizeof pattern, "/tmp/vqc-test-instrument-%d-*",
           (int)getpid());
  glob_t g;
  if (glob(pattern, 0, NULL, &g) != 0) return;
  for (size_t i = 0; i < g.gl_pathc; i++) vqc_test_remove_dir(g.gl_pathv[i]);
  globfree(&g);
}

TestSuite(instrument, .fini = remove_run_dirs);

Test(instrument, clean) {
  world w;
  run(&w, MODE_CLEAN, "clean");
  for (int r = 0; r < RANKS; r++) {
    cr_expect_eq(w.finish[r], VQC_OK, "rank %d finish", r);
    cr_expect_eq(w.nfindings[r], 0, "rank %d findings", r);
    cr_expect_eq(w.exit_code[r], 0, "rank %d exit code", r);
  }
  cr_expect_str_eq(w.findings_json, "[]");
  vqc_findings f;
  int code = -1;
  read_run_json(&w, &f, &code);
  cr_expect_eq(f.count, 0);
  cr_expect_eq(code, 0);
  vqc_findings_free(&f);
  /* The divergence checker's per-rank traces are there too. */
  for (int r = 0; r < RANKS; r++) {
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "%s/rank-%d.trace.jsonl", w.dir, r);
    cr_expect_eq(stat(path, &st), 0, "missing %s", path);
  }
  free(w.findings_json);
}

Test(instrument, divergence) {
  world w;
  run(&w, MODE_DIVERGE, "divergence");
  for (int r = 0; r < RANKS; r++) {
    cr_expect_eq(w.finish[r], VQC_OK, "rank %d finish", r);
    cr_expect_eq(w.nfindings[r], 1, "rank %d findings", r);
    cr_expect_eq(w.exit_code[r], 1, "rank %d exit code", r);
  }
  vqc_findings f;
  int code = -1;
  read_run_json(&w, &f, &code);
  cr_assert_eq(f.count, 1, "%s", w.findings_json);
  const vqc_finding *x = &f.items[0];
  cr_expect_eq(x->kind, VQC_FINDING_DIVERGENCE);
  cr_expect_eq(x->step, 2);
  cr_expect_str_eq(x->tensor, "w");
  cr_expect_eq(x->nranks, 1);
  cr_expect_eq(x->ranks[0], 1);
  cr_expect_eq(json_integer_value(json_object_get(x->detail, "first_index")),
               11);
  cr_expect_eq(json_integer_value(json_object_get(x->detail, "ulp")), 1);
  cr_expect_eq(json_integer_value(json_object_get(x->detail, "differing")), 1);
  cr_expect_eq(code, 1);
  vqc_findings_free(&f);
  free(w.findings_json);
}

Test(instrument, deadlock) {
  world w;
  run(&w, MODE_LEAVE, "deadlock");
  for (int r = 0; r < RANKS; r++) {
    cr_expect_eq(w.nfindings[r], 1, "rank %d findings", r);
    cr_expect_eq(w.exit_code[r], 1, "rank %d exit code", r);
  }
  vqc_findings f;
  int code = -1;
  read_run_json(&w, &f, &code);
  cr_assert_eq(f.count, 1, "%s", w.findings_json);
  cr_expect_eq(f.items[0].kind, VQC_FINDING_DEADLOCK, "%s", w.findings_json);
  cr_expect_eq(code, 1);
  vqc_findings_free(&f);
  free(w.findings_json);
}

Test(instrument, stale_files) {
  char dir[256], path[512];
  snprintf(dir, sizeof dir, "/tmp/vqc-test-instrument-%d-stale",
           (int)getpid());
  mkdir(dir, 0777);
  /* An earlier run's directory: its marker says vqcheck made it. */
  const char *names[] = {VQC_RUN_DIR_MARKER, "rank-7.ledger.jsonl", "run.json",
                         "notes.txt"};
  for (int i = 0; i < 4; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("old\n", f);
    fclose(f);
  }
  vqc_threads_world *tw = NULL;
  cr_assert_eq(vqc_threads_world_create(1, &tw), VQC_OK);
  vqc_instr_options o = {0};
  o.run_dir = dir;
  vqc_instr *s = NULL;
  cr_assert_eq(vqc_instr_create(vqc_threads_world_comm(tw, 0), &o, &s), VQC_OK,
               "%s", vqc_last_error());
  struct stat st;
  snprintf(path, sizeof path, "%s/rank-7.ledger.jsonl", dir);
  cr_expect_neq(stat(path, &st), 0, "stale ledger dump kept");
  snprintf(path, sizeof path, "%s/run.json", dir);
  cr_expect_neq(stat(path, &st), 0, "stale run.json kept");
  snprintf(path, sizeof path, "%s/notes.txt", dir);
  cr_expect_eq(stat(path, &st), 0, "a file that is not a run's was removed");
  cr_expect_str_eq(vqc_instr_run_dir(s), dir);
  vqc_instr_destroy(s);
  vqc_threads_world_destroy(tw);
}

Test(instrument, misuse) {
  char dir[256];
  snprintf(dir, sizeof dir, "/tmp/vqc-test-instrument-%d-misuse",
           (int)getpid());
  vqc_threads_world *tw = NULL;
  cr_assert_eq(vqc_threads_world_create(1, &tw), VQC_OK);
  vqc_comm *c = vqc_threads_world_comm(tw, 0);

  vqc_instr_options o = {0};
  o.run_dir = dir;
  o.checks = VQC_INSTR_EQUIVALENCE;
  vqc_instr *s = NULL;
  cr_expect_eq(vqc_instr_create(c, &o, &s), VQC_EINVAL,
               "equivalence needs a reference");
  cr_expect_null(s);

  o.checks = 0;
  cr_assert_eq(vqc_instr_create(c, &o, &s), VQC_OK, "%s", vqc_last_error());
  float data[6] = {0};
  const int64_t shape[2] = {2, 3};
  cr_expect_eq(vqc_instr_step_end(s, 0), VQC_EINVAL, "step_end before start");

  vqc_tensor t = {0}, tt = {0};
  cr_assert_eq(vqc_tensor_wrap(&t, data, VQC_F32, 2, shape), VQC_OK);
  cr_assert_eq(vqc_tensor_transpose(&t, 0, 1, &tt), VQC_OK);
  cr_expect_eq(vqc_instr_register_tensor(s, "strided", &tt, NULL), VQC_EINVAL,
               "a strided view cannot be digested in place");
  cr_expect_eq(vqc_instr_register_tensor(s, "t", &t, NULL), VQC_OK, "%s",
               vqc_last_error());
  cr_expect_eq(vqc_instr_start(s), VQC_OK, "%s", vqc_last_error());
  cr_expect_eq(vqc_instr_register(s, "late", VQC_F32, data, NULL, 2, shape),
               VQC_EINVAL, "register after start");
  cr_expect_eq(vqc_instr_step_end(s, 0), VQC_OK, "%s", vqc_last_error());
  int n = -1;
  cr_expect_eq(vqc_instr_finish(s, VQC_OK, &n), VQC_OK, "%s", vqc_last_error());
  cr_expect_eq(n, 0);
  cr_expect_eq(vqc_instr_finish(s, VQC_OK, &n), VQC_EINVAL, "finish twice");
  vqc_tensor_free(&tt);
  vqc_tensor_free(&t);
  vqc_instr_destroy(s);
  vqc_threads_world_destroy(tw);
}

/* An instrumented program's run directory renders like a scenario run's:
 * run.json's subject is "program" (rundir.h), which the report reader used
 * to refuse ("field 'scenario': missing"), so API users got no report. */
Test(instrument, run_directory_renders) {
  world w;
  run(&w, MODE_DIVERGE, "renders");
  cr_assert_eq(vqc_reports_write(w.dir, VQC_REPORT_ALL), VQC_OK, "%s",
               vqc_last_error());
  char path[512];
  snprintf(path, sizeof path, "%s/report.md", w.dir);
  char *md = vqc_read_file(path);
  cr_assert_not_null(md, "no %s", path);
  cr_expect_not_null(strstr(md, "# vqcheck report: test_instrument"), "%s", md);
  cr_expect_not_null(strstr(md, "- program: `test_instrument` (instrumented)"),
                     "%s", md);
  cr_expect_not_null(strstr(md, "divergence at step 2"), "%s", md);
  free(md);
  snprintf(path, sizeof path, "%s/report.html", w.dir);
  char *html = vqc_read_file(path);
  cr_assert_not_null(html, "no %s", path);
  cr_expect_not_null(strstr(html, "instrumented program, 3 ranks"), "%s",
                     path);
  free(html);
  free(w.findings_json);
}

/* A program name that is not UTF-8 (bytes from argv[0] of a binary under
 * a folder named in Latin-1): run.json stays valid and vqcheck reads it
 * back, the bad bytes as '?'. Was a run.json without its program name,
 * which vqcheck's own validation then refused. */
Test(instrument, program_name_not_utf8) {
  program_name = "train-caf\xe9-\xff";
  world w;
  run(&w, MODE_CLEAN, "name");
  program_name = "test_instrument";
  vqc_findings f;
  int code = -1;
  read_run_json(&w, &f, &code);
  cr_expect_eq(code, 0);
  vqc_findings_free(&f);
  char path[512];
  snprintf(path, sizeof path, "%s/run.json", w.dir);
  char *text = NULL;
  FILE *fp = fopen(path, "r");
  cr_assert_not_null(fp);
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, fp);
  fclose(fp);
  buf[n] = '\0';
  text = strstr(buf, "train-caf?-?");
  cr_expect_not_null(text, "run.json does not name the program as "
                     "train-caf?-?: %.2000s", buf);
  free(w.findings_json);
}
