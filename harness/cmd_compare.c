/* cmd_compare.c: `vqcheck compare TRACE_DIR`: the divergence check on
 * per-rank traces written by any program (format: docs/trace-format.md).
 *
 * Reads every rank-<r>.trace.jsonl of TRACE_DIR (checkers/trace_compare.h),
 * reports the divergence findings a vqcheck run would have reported from the
 * same digests, and writes a run directory: run.json in the runner's schema
 * (backend "traces"), clean copies of the traces, and the reports. Nothing
 * is created when the input is bad.
 *
 * Exit: 0 the ranks agree at every step of traces that all end at the same
 * step, 1 findings (divergence; rank_failure for traces that stop early or
 * hold no step), 2 usage or bad traces (missing ranks, garbage, unknown
 * schema, a line over 1 MiB: the message names file:line; a single rank's
 * trace or traces sharing no (step, tensor): nothing to compare), 3 I/O.
 * Never 0 when nothing was compared. */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "offline.h"
#include "rundir.h"
#include "trace_compare.h"
#include "vqc/fsutil.h"

typedef struct compare_opts {
  const char *trace_dir;
  const char *out;
  bool json;
  bool quiet;
} compare_opts;

static void compare_help(FILE *f) {
  fprintf(f,
          "usage: vqcheck compare TRACE_DIR [--out DIR] [--json] [--quiet]\n\n"
          "Compares the per-rank digest traces in TRACE_DIR, one file "
          "rank-<r>.trace.jsonl\nper rank (format vqcheck-trace/1, "
          "docs/trace-format.md; written by vqcheck\nruns or by any program, "
          "e.g. docs/pytorch_trace_example.py), step by step\nand tensor by "
          "tensor, and reports where replicated state first differs\nacross "
          "ranks: the step, the tensor, the majority and the outlier ranks\n"
          "(or that there is no majority). Traces that stop early (a rank "
          "died, hung\nor was killed) are a rank_failure finding. Traces "
          "hold digests only, so\nfindings carry no element-level detail "
          "(first differing index, values, max\ndiff): a vqcheck run gives "
          "those.\n\n"
          "Writes a run directory: run.json (findings, the runner's schema), "
          "copies of\nthe traces, report.md, report.html and junit.xml.\n\n"
          "  --out DIR   run directory (default vqcheck-runs/compare-<time>); "
          "the run.json,\n              reports and rank-* files already in "
          "it are replaced\n"
          "  --json      print run.json on stdout instead of the summary\n"
          "  --quiet     no summary (warnings and errors still go to "
          "stderr)\n\n"
          "exit: 0 every rank agrees up to the same last step, 1 findings "
          "(divergence,\n      rank_failure), 2 usage or bad traces "
          "(missing ranks, garbage, unknown\n      schema: named by "
          "file:line; nothing to compare), 3 I/O error\n");
}

static int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "vqcheck compare: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\nhint: 'vqcheck compare --help'\n");
  return 2;
}

/* Parses argv[1..]; -1 to go on, else the exit code (0 after --help). */
static int parse_opts(int argc, char **argv, compare_opts *o) {
  memset(o, 0, sizeof *o);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      compare_help(stdout);
      return 0;
    } else if (strcmp(a, "--json") == 0) {
      o->json = true;
    } else if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
      o->quiet = true;
    } else if (strcmp(a, "--out") == 0) {
      if (i + 1 >= argc || argv[i + 1][0] == '\0')
        return usage_error("--out needs a directory%s", "");
      o->out = argv[++i];
    } else if (a[0] == '-' && a[1] != '\0') {
      return usage_error("unknown option '%s'", a);
    } else if (o->trace_dir) {
      return usage_error("more than one trace directory ('%s')", a);
    } else {
      o->trace_dir = a;
    }
  }
  if (!o->trace_dir)
    return usage_error("no trace directory given%s", "");
  return -1;
}

/* Whether a and b name the same existing directory. */
static bool same_dir(const char *a, const char *b) {
  struct stat sa, sb;
  return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

/* Takes back a run directory this command made, after a failed
 * comparison: vqcheck's own bookkeeping files in it (rundir.h's marker and
 * lock), then the directory, which rmdir removes only if nothing else is in
 * it. */
static void remove_created(const char *out) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", out, VQC_RUN_DIR_MARKER);
  unlink(path);
  snprintf(path, sizeof path, "%s/%s", out, VQC_RUN_DIR_LOCK);
  unlink(path);
  rmdir(out);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* run.json for the comparison (new reference). */
static json_t *compare_json(const compare_opts *o, int nranks,
                            vqc_findings *fl,
                            const vqc_trace_compare_result *res,
                            double seconds) {
  json_t *j = vqc_offline_run_json(
      "compare", o->trace_dir,
      "per-rank digest traces compared offline by vqcheck compare",
      "traces", nranks > 0 ? nranks : 1);
  json_object_set_new(j, "duration_s", json_real(seconds));
  json_object_set_new(json_object_get(j, "training"), "steps_done",
                      json_integer(res->nsteps));
  json_object_set_new(j, "findings", vqc_findings_to_json(fl));
  json_t *steps = json_object_get(j, "steps");
  for (int64_t i = 0; i < res->nsteps; i++) {
    const vqc_trace_step *st = &res->steps[i];
    json_array_append_new(
        steps, json_pack("{s:I,s:f,s:n,s:i,s:I,s:I}", "step",
                         (json_int_t)st->step, "seconds", 0.0, "loss",
                         "findings", st->findings, "digests_compared",
                         (json_int_t)st->compared, "digests_differing",
                         (json_int_t)st->differing));
  }
  json_object_set_new(j, "exit_code", json_integer(fl->count > 0 ? 1 : 0));
  json_t *trace_dir = json_string(o->trace_dir);
  json_t *c = json_pack("{s:o,s:i,s:I,s:I,s:I,s:I,s:O}", "trace_dir",
                        trace_dir ? trace_dir : json_string("(not UTF-8)"),
                        "ranks", nranks, "steps", (json_int_t)res->nsteps,
                        "lines_read", (json_int_t)res->lines_read,
                        "digests_compared", (json_int_t)res->digests_compared,
                        "lines_not_compared",
                        (json_int_t)res->lines_not_compared, "warnings",
                        res->warnings);
  json_object_set_new(j, "compare", c);
  /* The only check traces allow to run in full; the reports show the
   * others as not run (junit <skipped/>), never as passed, and say why.
   * rank_failure is not claimed either: traces show a rank that stopped
   * before the others (then it is a finding), but a job whose ranks all
   * stopped together looks finished. */
  json_object_set_new(j, "checks", json_pack("[s]", "divergence"));
  static const char digests_only[] =
      "traces hold digests only: not checked by vqcheck compare";
  static const char no_ledger[] =
      "traces hold no collective ledger: not checked by vqcheck compare "
      "(vqcheck analyze reads ledger dumps)";
  json_object_set_new(
      j, "checks_not_run",
      json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "lost_inplace", digests_only,
                "deadlock", no_ledger, "collective_mismatch", no_ledger,
                "shape_mismatch", digests_only, "gradient_mismatch",
                digests_only, "rank_failure",
                "traces show a rank failure only when a rank's trace stops "
                "before the others' (then it is a finding); ranks that all "
                "stopped together look like a finished job",
                "nonfinite", "a digest cannot show NaN or Inf: not checked "
                "by vqcheck compare"));
  return j;
}

static void print_summary(const compare_opts *o, int nranks, vqc_findings *fl,
                          const vqc_trace_compare_result *res,
                          const char *out) {
  printf("compare %s: %d rank%s, %" PRId64 " step%s", o->trace_dir, nranks,
         nranks == 1 ? "" : "s", res->nsteps, res->nsteps == 1 ? "" : "s");
  if (res->nsteps > 0)
    printf(" (%" PRId64 "..%" PRId64 ")", res->steps[0].step,
           res->steps[res->nsteps - 1].step);
  printf(", %" PRId64 " digests compared", res->digests_compared);
  if (res->lines_not_compared > 0)
    printf(", %" PRId64 " lines not compared", res->lines_not_compared);
  printf("\n");
  vqc_offline_print_findings(stdout, fl);
  if (fl->count > 0)
    printf("(from traces: digests only, no element-level detail)\n");
  printf("run directory: %s\n", out);
}

int vqc_cmd_compare(int argc, char **argv) {
  compare_opts o;
  int rc = parse_opts(argc, argv, &o);
  if (rc >= 0) return rc;
  const double t0 = now_s();

  vqc_trace_set_options so = {.allow_missing_ranks = false,
                              .expected_ranks = 0,
                              .allow_empty = false,
                              .require_comparison = true};
  vqc_trace_set *set = NULL;
  vqc_status s = vqc_trace_set_open(o.trace_dir, &so, &set);
  if (s != VQC_OK) {
    fprintf(stderr, "vqcheck compare: %s\n", vqc_cli_error_text());
    return vqc_status_exit_code(s);
  }
  const int nranks = vqc_trace_set_ranks(set);

  char out[4096];
  vqc_run_dir_choose(o.out, "compare", out, sizeof out);
  /* Made now (and so removed again if the comparison fails)? */
  struct stat before;
  const bool created = stat(out, &before) != 0;
  s = vqc_mkdir_p(out);
  /* Writing into TRACE_DIR itself: keep its files, copy nothing, overwrite
   * nothing vqcheck did not write. Else the directory is prepared as for
   * `vqcheck run` (refused when it holds a user's files; what an earlier
   * run left there goes). Either way it is locked until this ends. */
  const bool in_place = s == VQC_OK && same_dir(out, o.trace_dir);
  if (s == VQC_OK && in_place) {
    static const char *const outputs[] = {"run.json", "report.md",
                                          "report.html", "junit.xml"};
    s = vqc_run_dir_claim_outputs(out, outputs, 4);
    if (s == VQC_OK) s = vqc_run_dir_lock(out);
  } else if (s == VQC_OK) {
    s = vqc_run_dir_prepare(out);
  }
  if (s != VQC_OK) {
    fprintf(stderr, "vqcheck compare: %s\n", vqc_cli_error_text());
    if (created) remove_created(out);
    vqc_trace_set_close(set);
    return vqc_status_exit_code(s);
  }

  vqc_findings fl;
  vqc_findings_init(&fl);
  vqc_trace_compare_result res;
  s = vqc_trace_set_compare(set, in_place ? NULL : out, &fl, &res);
  vqc_trace_set_close(set);
  for (size_t i = 0; i < json_array_size(res.warnings); i++)
    fprintf(stderr, "vqcheck compare: warning: %s\n",
            json_string_value(json_array_get(res.warnings, i)));
  if (s != VQC_OK) {
    fprintf(stderr, "vqcheck compare: %s\n", vqc_cli_error_text());
    vqc_run_dir_unlock(out);
    if (created) remove_created(out);
    vqc_findings_free(&fl);
    vqc_trace_compare_result_free(&res);
    return vqc_status_exit_code(s);
  }

  json_t *j = compare_json(&o, nranks, &fl, &res, now_s() - t0);
  s = vqc_run_json_write(out, j);
  if (s == VQC_OK) s = vqc_offline_write_reports(out);
  int code = fl.count > 0 ? 1 : 0;
  if (s != VQC_OK) {
    fprintf(stderr, "vqcheck compare: %s\n", vqc_cli_error_text());
    code = vqc_status_exit_code(s);
  } else if (o.json) {
    json_dumpf(j, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII);
    printf("\n");
  } else if (!o.quiet) {
    print_summary(&o, nranks, &fl, &res, out);
  }
  json_decref(j);
  vqc_run_dir_unlock(out);
  vqc_findings_free(&fl);
  vqc_trace_compare_result_free(&res);
  return code;
}
