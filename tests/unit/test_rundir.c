/* test_rundir.c: the run directory helpers and the common part of run.json
 * (checkers/rundir.h).
 *
 * Every case runs in a fresh temporary directory (made by the fixture,
 * removed with everything in it afterwards):
 *
 *   clear_*, check_*   vqc_run_dir_clear, in a directory with vqcheck's
 *                      marker, removes exactly run.json, report.md,
 *                      report.html, junit.xml, rank-<r>.{trace,ledger,
 *                      live}.jsonl, rank-<r>.status.json and their
 *                      "<name>.tmp.<pid>" temporaries, when they are
 *                      regular files, and keeps the rest (a checkpoint
 *                      rank-0.pt, look-alike names, vqcheck.log,
 *                      subdirectories and what is in them, links); it
 *                      refuses a non-empty directory without the marker
 *                      (a link named like it does not count) and marks an
 *                      empty one; a missing directory is VQC_EIO;
 *   prepare_*          vqc_run_dir_prepare makes a nested directory with
 *                      the marker and the lock, clears an existing one of
 *                      vqcheck's, refuses a foreign one without writing
 *                      into it, and fails on a path through a file;
 *   lock_*             a second process is refused the lock (and prepare
 *                      and clear) with a message naming the holder's pid;
 *                      the holder's end frees it; holds in one process
 *                      count;
 *   choose_*           vqc_run_dir_choose: `wanted` verbatim, else
 *                      "vqcheck-runs/<name>-<YYYYmmdd-HHMMSS>" (local time,
 *                      between the clock read before and after), with -2,
 *                      -3 when the name is taken in the same second;
 *   run_json_*         vqc_run_json_new + vqc_run_json_write: the file
 *                      parses with jansson, holds the documented members in
 *                      the documented order and values (schema_version 1,
 *                      environment of this process, build of this build,
 *                      training, findings with the one added, steps [],
 *                      exit_code), indented and ASCII-only. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "findings.h"
#include "rundir.h"
#include "test_paths.h"
#include "vqc/fsutil.h"
#include "vqc/version.h"

/* ---- helpers */

/* The case's temporary directory (absolute, from the fixture). */
static char tmpdir[256];


static void make_tmpdir(void) {
  cr_assert(vqc_test_temp_dir(tmpdir, sizeof tmpdir,
                              "/tmp/vqc-test-rundir-XXXXXX") != NULL,
            "mkdtemp: %s", strerror(errno));
}

static void remove_tmpdir(void) { vqc_test_remove_dir(tmpdir); }

/* "<tmpdir>/<name>" into buf (n bytes). */
static char *in_tmp(char *buf, size_t n, const char *name) {
  snprintf(buf, n, "%s/%s", tmpdir, name);
  return buf;
}

/* Creates <dir>/<name> holding `text`. */
static void put_file(const char *dir, const char *name, const char *text) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f, "cannot create %s: %s", path, strerror(errno));
  fputs(text, f);
  cr_assert_eq(fclose(f), 0);
}

/* Asserts that <dir>/<name> holds exactly `text`. */
static void assert_file_text(const char *dir, const char *name,
                             const char *text) {
  char path[1024], got[256] = "";
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "cannot read %s: %s", path, strerror(errno));
  size_t n = fread(got, 1, sizeof got - 1, f);
  fclose(f);
  got[n] = '\0';
  cr_assert_str_eq(got, text, "%s", path);
}

/* Asserts that dir holds exactly the names of `want` (sorted, joined
 * with ','): both what is there and what is not. */
static void assert_listing(const char *dir, const char *want) {
  char got[4096];
  cr_assert_eq(vqc_test_dir_listing(dir, got, sizeof got), 0,
               "cannot read %s: %s", dir, strerror(errno));
  cr_assert_str_eq(got, want, "%s holds [%s], want [%s]", dir, got, want);
}

/* The whole file (malloc'd, caller frees). */
static char *read_text_file(const char *path) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "cannot read %s: %s", path, strerror(errno));
  char *text = calloc(1, 8192);
  cr_assert_not_null(text);
  size_t n = fread(text, 1, 8191, f);
  fclose(f);
  text[n] = '\0';
  return text;
}

static bool is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

TestSuite(rundir, .init = make_tmpdir, .fini = remove_tmpdir);

/* ---- vqc_run_dir_clear */

/* Makes dir vqcheck's, as a run would have: the marker only. */
static void mark_dir(const char *dir) {
  put_file(dir, VQC_RUN_DIR_MARKER, "made by a test\n");
}

Test(rundir, clear_removes_run_files) {
  mark_dir(tmpdir);
  /* What a run writes, and the temporaries of interrupted writes. */
  const char *stale[] = {
      "run.json",           "report.md",
      "report.html",        "junit.xml",
      "run.json.tmp.1234",  "report.md.tmp.9",
      "report.html.tmp.77", "junit.xml.tmp.5",
      "rank-0.trace.jsonl", "rank-1.ledger.jsonl",
      "rank-12.status.json", "rank-2.status.json.tmp.42",
      "rank-3.live.jsonl",  "rank-0.trace.jsonl.tmp.7"};
  for (size_t i = 0; i < sizeof stale / sizeof stale[0]; i++)
    put_file(tmpdir, stale[i], "stale");
  /* What is not the run's: a user's files, names that only look alike
   * (a checkpoint, a rank in another spelling, other suffixes), and the
   * suite's log. */
  const char *keep[] = {"notes.txt",           "run.json.bak",
                        "old-run.json",        "report.mdx",
                        "junit.xml.orig",      "rank-0.pt",
                        "rank-0.trace",        "rank-01.trace.jsonl",
                        "rank-x.ledger.jsonl", "rank-1.trace.jsonl.bak",
                        "rank-2.status.json.tmp.", "run.json.tmp.12a",
                        "vqcheck.log"};
  for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
    put_file(tmpdir, keep[i], "mine");
  /* A subdirectory, with a run's files inside: not entered. */
  char sub[512];
  cr_assert_eq(vqc_mkdir_p(in_tmp(sub, sizeof sub, "subdir")), VQC_OK);
  put_file(sub, "run.json", "inner");
  put_file(sub, "rank-0.trace.jsonl", "inner");
  /* A directory with a run file's name: not a regular file. (A link of
   * such a name is refused: clear_refuses_link_at_run_name.) */
  char rank_dir[512];
  cr_assert_eq(vqc_mkdir_p(in_tmp(rank_dir, sizeof rank_dir,
                                  "rank-5.trace.jsonl")),
               VQC_OK);

  cr_assert_eq(vqc_run_dir_clear(tmpdir), VQC_OK, "%s", vqc_last_error());
  assert_listing(tmpdir,
                 ".vqcheck-run,junit.xml.orig,notes.txt,old-run.json,"
                 "rank-0.pt,rank-0.trace,rank-01.trace.jsonl,"
                 "rank-1.trace.jsonl.bak,rank-2.status.json.tmp.,"
                 "rank-5.trace.jsonl,"
                 "rank-x.ledger.jsonl,report.mdx,run.json.bak,"
                 "run.json.tmp.12a,subdir,vqcheck.log");
  assert_listing(sub, "rank-0.trace.jsonl,run.json");
  assert_file_text(tmpdir, "notes.txt", "mine");
  assert_file_text(tmpdir, "rank-0.pt", "mine");
}

/* A link at a name a run writes would be written through (rundir.h
 * "Links"): refused, naming it, before anything is removed. */
Test(rundir, clear_refuses_link_at_run_name) {
  mark_dir(tmpdir);
  put_file(tmpdir, "run.json", "stale");
  put_file(tmpdir, "notes.txt", "mine");
  char link[512], target[512];
  cr_assert_eq(symlink(in_tmp(target, sizeof target, "notes.txt"),
                       in_tmp(link, sizeof link, "rank-6.ledger.jsonl")),
               0);
  vqc_clear_error();
  cr_assert_eq(vqc_run_dir_clear(tmpdir), VQC_EINVAL);
  const char *m = vqc_last_error();
  cr_assert_not_null(strstr(m, "refusing to write through the link"),
                     "message: %s", m);
  cr_assert_not_null(strstr(m, "rank-6.ledger.jsonl"), "message: %s", m);
  assert_listing(tmpdir, ".vqcheck-run,notes.txt,rank-6.ledger.jsonl,"
                         "run.json");
  assert_file_text(tmpdir, "notes.txt", "mine");
}

/* The bug this contract fixes: `--out DIR` on a directory of the user's
 * removed every rank-* file in it (a checkpoint rank-0.pt). */
Test(rundir, clear_refuses_foreign) {
  put_file(tmpdir, "rank-0.pt", "a checkpoint");
  put_file(tmpdir, "run.json", "the user's own run.json");
  vqc_clear_error();
  cr_assert_eq(vqc_run_dir_clear(tmpdir), VQC_EINVAL);
  const char *m = vqc_last_error();
  cr_assert_not_null(strstr(m, "refusing to use"), "message: %s", m);
  cr_assert_not_null(strstr(m, tmpdir), "message: %s", m);
  cr_assert(strstr(m, "rank-0.pt") || strstr(m, "run.json"), "message: %s",
            m);
  cr_assert_not_null(strstr(m, "pass a new or empty directory"),
                     "message: %s", m);
  /* Nothing removed, nothing written. */
  assert_listing(tmpdir, "rank-0.pt,run.json");
  assert_file_text(tmpdir, "rank-0.pt", "a checkpoint");
}

Test(rundir, clear_refuses_link_marker) {
  /* A link named like the marker is not vqcheck's marker. */
  put_file(tmpdir, "rank-0.trace.jsonl", "the user's trace");
  char link[512], target[512];
  cr_assert_eq(symlink(in_tmp(target, sizeof target, "rank-0.trace.jsonl"),
                       in_tmp(link, sizeof link, VQC_RUN_DIR_MARKER)),
               0);
  cr_assert_eq(vqc_run_dir_clear(tmpdir), VQC_EINVAL);
  assert_file_text(tmpdir, "rank-0.trace.jsonl", "the user's trace");
}

Test(rundir, clear_empty_and_again) {
  /* An empty directory becomes vqcheck's (the marker), then is cleared
   * again and again. */
  cr_assert_eq(vqc_run_dir_clear(tmpdir), VQC_OK, "%s", vqc_last_error());
  assert_listing(tmpdir, ".vqcheck-run");
  put_file(tmpdir, "run.json", "stale");
  cr_assert_eq(vqc_run_dir_clear(tmpdir), VQC_OK, "%s", vqc_last_error());
  cr_assert_eq(vqc_run_dir_clear(tmpdir), VQC_OK, "%s", vqc_last_error());
  assert_listing(tmpdir, ".vqcheck-run");
}

Test(rundir, clear_missing_dir) {
  char dir[512];
  in_tmp(dir, sizeof dir, "not-there");
  vqc_clear_error();
  cr_assert_eq(vqc_run_dir_clear(dir), VQC_EIO);
  cr_assert_not_null(strstr(vqc_last_error(), dir), "message: %s",
                     vqc_last_error());
  assert_listing(tmpdir, "");
}

Test(rundir, check_bookkeeping_only) {
  /* The lock file alone (a prepare interrupted before the marker) does not
   * make a directory anyone's. */
  put_file(tmpdir, VQC_RUN_DIR_LOCK, "");
  cr_assert_eq(vqc_run_dir_check(tmpdir), VQC_OK, "%s", vqc_last_error());
  put_file(tmpdir, "x", "");
  cr_assert_eq(vqc_run_dir_check(tmpdir), VQC_EINVAL);
  mark_dir(tmpdir);
  cr_assert_eq(vqc_run_dir_check(tmpdir), VQC_OK, "%s", vqc_last_error());
}

/* ---- vqc_run_dir_prepare */

Test(rundir, prepare_creates) {
  char dir[512];
  in_tmp(dir, sizeof dir, "runs/a/b");
  cr_assert_eq(vqc_run_dir_prepare(dir), VQC_OK, "%s", vqc_last_error());
  cr_assert(is_dir(dir));
  assert_listing(dir, ".vqcheck-run,.vqcheck.lock");
  /* The marker says what made it. */
  char path[600];
  char *text = read_text_file(in_tmp(path, sizeof path,
                                     "runs/a/b/" VQC_RUN_DIR_MARKER));
  cr_assert_not_null(strstr(text, "vqcheck"), "%s", text);
  free(text);
  vqc_run_dir_unlock(dir);
}

Test(rundir, prepare_clears) {
  char dir[512];
  in_tmp(dir, sizeof dir, "run");
  cr_assert_eq(vqc_run_dir_prepare(dir), VQC_OK, "%s", vqc_last_error());
  vqc_run_dir_unlock(dir);
  put_file(dir, "run.json", "stale verdict");
  put_file(dir, "rank-0.ledger.jsonl", "stale ledger");
  put_file(dir, "report.html.tmp.31337", "half a report");
  put_file(dir, "notes.txt", "keep");
  cr_assert_eq(vqc_run_dir_prepare(dir), VQC_OK, "%s", vqc_last_error());
  assert_listing(dir, ".vqcheck-run,.vqcheck.lock,notes.txt");
  assert_file_text(dir, "notes.txt", "keep");
  vqc_run_dir_unlock(dir);
}

Test(rundir, prepare_refuses_foreign) {
  char dir[512];
  in_tmp(dir, sizeof dir, "out");
  cr_assert_eq(vqc_mkdir_p(dir), VQC_OK);
  put_file(dir, "rank-0.pt", "a checkpoint");
  vqc_clear_error();
  cr_assert_eq(vqc_run_dir_prepare(dir), VQC_EINVAL);
  cr_assert_not_null(strstr(vqc_last_error(), "rank-0.pt"), "message: %s",
                     vqc_last_error());
  /* Not even the lock file or the marker is written into it. */
  assert_listing(dir, "rank-0.pt");
}

Test(rundir, prepare_through_file) {
  char dir[512];
  put_file(tmpdir, "plain", "p");
  in_tmp(dir, sizeof dir, "plain/run");
  cr_assert_eq(vqc_run_dir_prepare(dir), VQC_EIO);
  assert_listing(tmpdir, "plain");
}

/* ---- the lock */

/* A child process that takes dir's lock, says so on a pipe, and holds it
 * until its stdin-like pipe closes. Returns its pid; *release is the fd to
 * close to let it go. */
static pid_t lock_in_child(const char *dir, int *release) {
  int ready[2], hold[2];
  cr_assert_eq(pipe(ready), 0);
  cr_assert_eq(pipe(hold), 0);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    close(ready[0]);
    close(hold[1]);
    const char ok = vqc_run_dir_lock(dir) == VQC_OK ? 'y' : 'n';
    if (write(ready[1], &ok, 1) != 1) _exit(2);
    char c;
    while (read(hold[0], &c, 1) > 0) {
    }
    _exit(0);
  }
  close(ready[1]);
  close(hold[0]);
  char ok = 'n';
  cr_assert_eq(read(ready[0], &ok, 1), 1);
  close(ready[0]);
  cr_assert_eq(ok, 'y', "the child could not take the lock");
  *release = hold[1];
  return pid;
}

static void end_child(pid_t pid, int release) {
  close(release);
  int st;
  cr_assert_eq(waitpid(pid, &st, 0), pid);
}

Test(rundir, lock_refuses_second_process) {
  mark_dir(tmpdir);
  put_file(tmpdir, "run.json", "the first one's verdict");
  int release;
  pid_t child = lock_in_child(tmpdir, &release);
  vqc_clear_error();
  cr_assert_eq(vqc_run_dir_lock(tmpdir), VQC_EINVAL);
  char pid_text[32];
  snprintf(pid_text, sizeof pid_text, "pid %d ", (int)child);
  const char *m = vqc_last_error();
  cr_assert_not_null(strstr(m, "is in use by"), "message: %s", m);
  cr_assert_not_null(strstr(m, pid_text), "message: %s", m);
  cr_assert_not_null(strstr(m, "pass another --out"), "message: %s", m);
  /* Neither prepare nor a bare clear touches the holder's files. */
  cr_assert_eq(vqc_run_dir_prepare(tmpdir), VQC_EINVAL);
  cr_assert_eq(vqc_run_dir_clear(tmpdir), VQC_EINVAL);
  assert_file_text(tmpdir, "run.json", "the first one's verdict");
  end_child(child, release);
  /* The holder gone (even without unlocking), the lock is free. */
  cr_assert_eq(vqc_run_dir_prepare(tmpdir), VQC_OK, "%s", vqc_last_error());
  vqc_run_dir_unlock(tmpdir);
}

Test(rundir, lock_counts_holds) {
  cr_assert_eq(vqc_run_dir_lock(tmpdir), VQC_OK, "%s", vqc_last_error());
  cr_assert_eq(vqc_run_dir_lock(tmpdir), VQC_OK, "%s", vqc_last_error());
  /* Held twice: the prepare of this same process goes through. */
  cr_assert_eq(vqc_run_dir_prepare(tmpdir), VQC_OK, "%s", vqc_last_error());
  vqc_run_dir_unlock(tmpdir);
  vqc_run_dir_unlock(tmpdir);
  vqc_run_dir_unlock(tmpdir);
  /* Every hold given back: another process can have it. */
  int release;
  pid_t child = lock_in_child(tmpdir, &release);
  cr_assert_eq(vqc_run_dir_lock(tmpdir), VQC_EINVAL);
  end_child(child, release);
}

/* ---- vqc_run_dir_choose */

/* Now as vqc_run_default_dir stamps it ("YYYYmmdd-HHMMSS", local time). */
static void local_stamp(char *buf, size_t n) {
  time_t t = time(NULL);
  struct tm tm;
  localtime_r(&t, &tm);
  strftime(buf, n, "%Y%m%d-%H%M%S", &tm);
}

Test(rundir, choose_wanted) {
  char buf[512];
  vqc_run_dir_choose("out/my-run", "ddp_clean", buf, sizeof buf);
  cr_assert_str_eq(buf, "out/my-run");
}

Test(rundir, choose_default) {
  /* The default is relative to the working directory: this case's own. */
  cr_assert_eq(chdir(tmpdir), 0);
  const char *wanted[] = {NULL, ""}; /* both mean "no choice made" */
  for (int w = 0; w < 2; w++) {
    char before[32], after[32], buf[512];
    local_stamp(before, sizeof before);
    vqc_run_dir_choose(wanted[w], "ddp_lost_inplace", buf, sizeof buf);
    local_stamp(after, sizeof after);
    const char prefix[] = "vqcheck-runs/ddp_lost_inplace-";
    cr_assert_eq(strncmp(buf, prefix, strlen(prefix)), 0, "got %s", buf);
    const char *stamp = buf + strlen(prefix);
    /* YYYYmmdd-HHMMSS: 8 digits, '-', 6 digits, nothing after. */
    cr_assert_eq(strlen(stamp), 15u, "got %s", buf);
    for (int i = 0; i < 15; i++) {
      if (i == 8)
        cr_assert_eq(stamp[i], '-', "got %s", buf);
      else
        cr_assert(stamp[i] >= '0' && stamp[i] <= '9', "got %s", buf);
    }
    /* Fixed-width stamps order as strings: taken between the two reads. */
    cr_assert(strcmp(before, stamp) <= 0 && strcmp(stamp, after) <= 0,
              "stamp %s not within [%s, %s]", stamp, before, after);
  }
}

Test(rundir, choose_taken) {
  cr_assert_eq(chdir(tmpdir), 0);
  /* The suffixes only appear within one second; retry the (rare) attempt
   * that straddles a second boundary. */
  bool checked = false;
  for (int attempt = 0; attempt < 5 && !checked; attempt++) {
    vqc_test_remove_dir("vqcheck-runs");
    char a[512], b[512], c[512];
    const time_t t0 = time(NULL);
    vqc_run_dir_choose(NULL, "s", a, sizeof a);
    cr_assert_eq(vqc_mkdir_p(a), VQC_OK, "%s", vqc_last_error());
    vqc_run_dir_choose(NULL, "s", b, sizeof b);
    cr_assert_eq(vqc_mkdir_p(b), VQC_OK, "%s", vqc_last_error());
    vqc_run_dir_choose(NULL, "s", c, sizeof c);
    if (time(NULL) != t0) continue;
    char want[600];
    snprintf(want, sizeof want, "%s-2", a);
    cr_assert_str_eq(b, want);
    snprintf(want, sizeof want, "%s-3", a);
    cr_assert_str_eq(c, want);
    checked = true;
  }
  cr_assert(checked, "every attempt straddled a second");
}

/* ---- run.json */

/* The position of top-level member `key` in the text of a run.json written
 * with indent 2 (a top-level member is the only kind at that indent). */
static long member_pos(const char *text, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\n  \"%s\":", key);
  const char *p = strstr(text, pat);
  return p ? (long)(p - text) : -1;
}

/* Asserts that the top-level members of text appear in exactly the order
 * of keys (n of them) and that there are no others. */
static void assert_member_order(const char *text, const char *const *keys,
                                int n) {
  long last = -1;
  for (int i = 0; i < n; i++) {
    const long pos = member_pos(text, keys[i]);
    cr_assert_gt(pos, last, "member %s missing or out of order", keys[i]);
    last = pos;
  }
}

/* The file's text (malloc'd, caller frees). */
static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "cannot read %s: %s", path, strerror(errno));
  struct stat st;
  cr_assert_eq(fstat(fileno(f), &st), 0);
  char *text = malloc((size_t)st.st_size + 1);
  cr_assert_not_null(text);
  const size_t n = fread(text, 1, (size_t)st.st_size, f);
  fclose(f);
  text[n] = '\0';
  return text;
}

/* Now as run.json's "finished" should read, "YYYY-mm-ddTHH:MM:SSZ" (UTC);
 * made here, not with vqc_run_json_time, so a wrong clock there shows. */
static void utc_stamp(char *buf, size_t n) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static json_t *load_run_json(const char *dir) {
  char path[600];
  snprintf(path, sizeof path, "%s/run.json", dir);
  json_error_t err;
  json_t *j = json_load_file(path, 0, &err);
  cr_assert_not_null(j, "%s does not parse: %s (line %d)", path, err.text,
                     err.line);
  cr_assert(json_is_object(j));
  return j;
}

static const char *str_at(const json_t *obj, const char *key) {
  const json_t *v = json_object_get(obj, key);
  cr_assert(json_is_string(v), "%s is not a string", key);
  return json_string_value(v);
}

static json_int_t int_at(const json_t *obj, const char *key) {
  const json_t *v = json_object_get(obj, key);
  cr_assert(json_is_integer(v), "%s is not an integer", key);
  return json_integer_value(v);
}

Test(rundir, run_json_fields) {
  /* One finding, as a checker would add it. */
  vqc_findings findings;
  vqc_findings_init(&findings);
  vqc_finding x;
  vqc_finding_init(&x, VQC_FINDING_DIVERGENCE, 3, "w differs on rank %d", 1);
  vqc_finding_add_rank(&x, 1);
  snprintf(x.tensor, sizeof x.tensor, "w");
  json_object_set_new(x.detail, "ulps", json_integer(1));
  cr_assert_eq(vqc_findings_add(&findings, &x), VQC_OK);

  json_t *head = json_object();
  json_object_set_new(head, "scenario", json_string("ddp_divergence"));
  /* 1.5 and the message's "\u00e9" are exact in JSON and in a double. */
  vqc_run_json_info info = {.backend = "threads",
                            .device = "cpu",
                            .ranks = 3,
                            .duration_s = 1.5,
                            .training = VQC_ETIMEOUT,
                            .failed_rank = 2,
                            .message = "rank 2 stuck \xc3\xa9",
                            .steps_done = 7,
                            .findings = &findings,
                            .exit_code = 1};
  char before[32], after[32];
  utc_stamp(before, sizeof before);
  json_t *doc = vqc_run_json_new(head, &info);
  utc_stamp(after, sizeof after);
  cr_assert_not_null(doc);
  cr_assert_eq(vqc_run_json_write(tmpdir, doc), VQC_OK, "%s",
               vqc_last_error());
  json_decref(doc);
  vqc_findings_free(&findings);
  assert_listing(tmpdir, "run.json"); /* and no temporary */

  /* The text: indented, ASCII only, members in the documented order. */
  char path[600];
  char *text = read_text(in_tmp(path, sizeof path, "run.json"));
  for (const char *p = text; *p; p++)
    cr_assert((unsigned char)*p < 0x80, "non-ASCII byte at %ld",
              (long)(p - text));
  /* The escape's hex case is jansson's choice. */
  cr_assert(strstr(text, "stuck \\u00e9") || strstr(text, "stuck \\u00E9"),
            "%s", text);
  const char *order[] = {"schema_version", "scenario",   "environment",
                         "build",          "finished",   "duration_s",
                         "training",       "findings",   "steps",
                         "exit_code"};
  assert_member_order(text, order, (int)(sizeof order / sizeof order[0]));
  free(text);

  json_t *j = load_run_json(tmpdir);
  cr_assert_eq(json_object_size(j), 10u);
  cr_assert_eq(int_at(j, "schema_version"), 1);
  cr_assert_str_eq(str_at(j, "scenario"), "ddp_divergence");

  const json_t *env = json_object_get(j, "environment");
  cr_assert(json_is_object(env));
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  cr_assert_str_eq(str_at(env, "hostname"), host);
  cr_assert_str_eq(str_at(env, "backend"), "threads");
  cr_assert_str_eq(str_at(env, "device"), "cpu");
  cr_assert_eq(int_at(env, "ranks"), 3);
  cr_assert_eq(int_at(env, "pid"), (json_int_t)getpid());
  cr_assert_eq(json_object_size(env), 5u);

  const json_t *build = json_object_get(j, "build");
  cr_assert(json_is_object(build));
  cr_assert_str_eq(str_at(build, "version"), VQC_VERSION_STRING);
  cr_assert_str_eq(str_at(build, "build_type"), VQC_BUILD_TYPE);
  cr_assert_str_eq(str_at(build, "compiler"), VQC_C_COMPILER);
  cr_assert(json_is_boolean(json_object_get(build, "mpi")));
  cr_assert_eq(json_is_true(json_object_get(build, "mpi")), VQC_WITH_MPI != 0);
  cr_assert(json_is_boolean(json_object_get(build, "cuda")));
  cr_assert_eq(json_is_true(json_object_get(build, "cuda")),
               VQC_WITH_CUDA != 0);

  /* "YYYY-mm-ddTHH:MM:SSZ", between the two clock reads (fixed width:
   * string order is time order). */
  const char *finished = str_at(j, "finished");
  cr_assert_eq(strlen(finished), 20u, "finished %s", finished);
  cr_assert(strcmp(before, finished) <= 0 && strcmp(finished, after) <= 0,
            "finished %s not within [%s, %s]", finished, before, after);
  cr_assert(finished[4] == '-' && finished[10] == 'T' && finished[19] == 'Z',
            "finished %s", finished);

  const json_t *dur = json_object_get(j, "duration_s");
  cr_assert(json_is_number(dur));
  cr_assert_eq(json_number_value(dur), 1.5);

  const json_t *tr = json_object_get(j, "training");
  cr_assert(json_is_object(tr));
  cr_assert_str_eq(str_at(tr, "status"), "VQC_ETIMEOUT");
  cr_assert_eq(int_at(tr, "failed_rank"), 2);
  cr_assert_str_eq(str_at(tr, "message"), "rank 2 stuck \xc3\xa9");
  cr_assert_eq(int_at(tr, "steps_done"), 7);

  const json_t *fs = json_object_get(j, "findings");
  cr_assert(json_is_array(fs));
  cr_assert_eq(json_array_size(fs), 1u);
  const json_t *f0 = json_array_get(fs, 0);
  cr_assert_str_eq(str_at(f0, "kind"), "divergence");
  cr_assert_eq(int_at(f0, "step"), 3);
  const json_t *ranks = json_object_get(f0, "ranks");
  cr_assert(json_is_array(ranks) && json_array_size(ranks) == 1);
  cr_assert_eq(json_integer_value(json_array_get(ranks, 0)), 1);
  cr_assert_str_eq(str_at(f0, "tensor"), "w");
  cr_assert_eq(int_at(json_object_get(f0, "detail"), "ulps"), 1);
  cr_assert_str_eq(str_at(f0, "message"), "w differs on rank 1");
  /* And it reads back as the same finding. */
  vqc_finding back;
  cr_assert_eq(vqc_finding_from_json(f0, &back), VQC_OK, "%s",
               vqc_last_error());
  cr_assert_eq(back.kind, VQC_FINDING_DIVERGENCE);
  json_decref(back.detail);

  const json_t *steps = json_object_get(j, "steps");
  cr_assert(json_is_array(steps) && json_array_size(steps) == 0);
  cr_assert_eq(int_at(j, "exit_code"), 1);
  json_decref(j);
}

Test(rundir, run_json_defaults) {
  /* No head, no device, no message, no findings list. */
  vqc_run_json_info info = {.backend = "mpi",
                            .ranks = 2,
                            .training = VQC_OK,
                            .failed_rank = -1};
  json_t *doc = vqc_run_json_new(NULL, &info);
  cr_assert_not_null(doc);
  cr_assert_eq(vqc_run_json_write(tmpdir, doc), VQC_OK, "%s",
               vqc_last_error());
  json_decref(doc);

  char path[600];
  char *text = read_text(in_tmp(path, sizeof path, "run.json"));
  const char *order[] = {"schema_version", "environment", "build",
                         "finished",       "duration_s",  "training",
                         "findings",       "steps",       "exit_code"};
  assert_member_order(text, order, (int)(sizeof order / sizeof order[0]));
  free(text);

  json_t *j = load_run_json(tmpdir);
  cr_assert_eq(json_object_size(j), 9u);
  cr_assert_eq(int_at(j, "schema_version"), 1);
  const json_t *env = json_object_get(j, "environment");
  cr_assert_null(json_object_get(env, "device"));
  cr_assert_str_eq(str_at(env, "backend"), "mpi");
  cr_assert_eq(int_at(env, "ranks"), 2);
  const json_t *tr = json_object_get(j, "training");
  cr_assert_str_eq(str_at(tr, "status"), "VQC_OK");
  cr_assert_eq(int_at(tr, "failed_rank"), -1);
  cr_assert_str_eq(str_at(tr, "message"), "");
  const json_t *fs = json_object_get(j, "findings");
  cr_assert(json_is_array(fs) && json_array_size(fs) == 0);
  cr_assert_eq(int_at(j, "exit_code"), 0);
  json_decref(j);
}

Test(rundir, run_json_replaces) {
  /* A second write replaces the first whole (a rerun's verdict). */
  put_file(tmpdir, "run.json", "{\"schema_version\": 0, \"stale\": true}");
  vqc_run_json_info info = {.backend = "threads", .ranks = 4,
                            .failed_rank = -1, .exit_code = 0};
  json_t *doc = vqc_run_json_new(NULL, &info);
  cr_assert_eq(vqc_run_json_write(tmpdir, doc), VQC_OK, "%s",
               vqc_last_error());
  json_decref(doc);
  json_t *j = load_run_json(tmpdir);
  cr_assert_eq(int_at(j, "schema_version"), 1);
  cr_assert_null(json_object_get(j, "stale"));
  json_decref(j);
  assert_listing(tmpdir, "run.json");
}

Test(rundir, run_json_no_dir) {
  char dir[512];
  in_tmp(dir, sizeof dir, "missing");
  vqc_run_json_info info = {.backend = "threads", .ranks = 1,
                            .failed_rank = -1};
  json_t *doc = vqc_run_json_new(NULL, &info);
  vqc_clear_error();
  cr_assert_eq(vqc_run_json_write(dir, doc), VQC_EIO);
  json_decref(doc);
  char path[600];
  snprintf(path, sizeof path, "%s/run.json", dir);
  cr_assert_not_null(strstr(vqc_last_error(), path), "message: %s",
                     vqc_last_error());
  assert_listing(tmpdir, "");
}

/* A run.json of any length is one vqcheck reads back: "steps" beyond
 * VQC_RUN_JSON_MAX_STEPS are thinned as written, keeping the first, the
 * last and every step where the findings count changed, and saying how
 * many were left out. (A 1,000,000-step run wrote ~140 MiB before.) */
Test(rundir, long_runs_keep_a_bounded_steps_list) {
  const json_int_t n = 3 * VQC_RUN_JSON_MAX_STEPS + 7;
  json_t *j = json_object();
  json_t *steps = json_array();
  for (json_int_t i = 0; i < n; i++) /* findings: 1 from step 123457 on */
    json_array_append_new(steps, json_pack("{s:I,s:f,s:n,s:i}", "step", i,
                                           "seconds", 0.001, "loss",
                                           "findings", i >= 123457 ? 1 : 0));
  json_object_set_new(j, "schema_version", json_integer(1));
  json_object_set_new(j, "findings", json_array());
  json_object_set_new(j, "steps", steps);
  char dir[512];
  in_tmp(dir, sizeof dir, "long");
  cr_assert_eq(vqc_mkdir_p(dir), VQC_OK);
  cr_assert_eq(vqc_run_json_write(dir, j), VQC_OK, "%s", vqc_last_error());
  cr_expect_eq(json_array_size(json_object_get(j, "steps")), (size_t)n,
               "the caller's document was changed");
  char path[600];
  snprintf(path, sizeof path, "%s/run.json", dir);
  json_t *back = NULL;
  cr_assert_eq(vqc_run_json_load(path, &back), VQC_OK, "%s",
               vqc_last_error());
  const json_t *kept = json_object_get(back, "steps");
  const size_t k = json_array_size(kept);
  cr_expect_leq(k, (size_t)VQC_RUN_JSON_MAX_STEPS + 2, "%zu steps kept", k);
  cr_expect_gt(k, (size_t)VQC_RUN_JSON_MAX_STEPS / 4);
  cr_expect_eq(json_integer_value(json_object_get(back, "steps_omitted")),
               n - (json_int_t)k);
  bool change = false;
  json_int_t prev = -1;
  for (size_t i = 0; i < k; i++) {
    json_int_t s = json_integer_value(
        json_object_get(json_array_get(kept, i), "step"));
    cr_assert_gt(s, prev, "steps out of order");
    prev = s;
    change = change || s == 123457;
  }
  cr_expect_eq(json_integer_value(
                   json_object_get(json_array_get(kept, 0), "step")), 0);
  cr_expect_eq(prev, n - 1, "the last step is kept");
  cr_expect(change, "the step where the findings changed is kept");
  json_decref(back);
  json_decref(j);
}
