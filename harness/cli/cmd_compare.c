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
#include <unistd.h>

#include "cli.h"
#include "offline.h"
#include "rundir.h"
#include "trace_compare.h"
#include "utf8.h"
#include "vqc/clock.h"
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
          "an earlier\n              comparison's run.json, reports and "
          "rank-* files in it are\n              replaced; one holding "
          "another run's run.json (its verdict) is\n              refused "
          "(exit 2)\n"
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

/* VQC_OK when out holds no run.json, or the run.json of a comparison (it
 * has the "compare" section compare_json writes), which a new comparison
 * may replace. Anything else is another run's verdict: replacing it would
 * turn a run's findings into the comparison's, a red run into a green one
 * (DESIGN.md "never a false green"): VQC_EINVAL saying so and what to do.
 * Called with out locked, before anything in it is removed or written. */
static vqc_status no_other_verdict(const char *out) {
  char path[4200];
  int n = snprintf(path, sizeof path, "%s/run.json", out);
  if (n < 0 || (size_t)n >= sizeof path)
    return vqc_error(VQC_EINVAL, "run directory path too long: %.200s...",
                     out);
  struct stat st;
  if (lstat(path, &st) != 0) return VQC_OK;
  json_t *j = NULL;
  if (vqc_run_json_load(path, &j) != VQC_OK) {
    char why[1024];
    snprintf(why, sizeof why, "%s", vqc_last_error());
    return vqc_error(VQC_EINVAL, "refusing to write the comparison into %s: "
                     "it holds a run.json that is not a comparison's (%s); "
                     "pass another --out, or move run.json away yourself",
                     out, why);
  }
  if (json_is_object(json_object_get(j, "compare"))) {
    json_decref(j);
    return VQC_OK;
  }
  const char *name = json_string_value(
      json_object_get(json_object_get(j, "scenario"), "name"));
  if (!name) name = json_string_value(json_object_get(j, "program"));
  const json_t *code = json_object_get(j, "exit_code");
  const size_t nfind = json_array_size(json_object_get(j, "findings"));
  char what[400];
  snprintf(what, sizeof what, "%s%.200s%s%zu finding%s, exit code %lld",
           name ? "'" : "", name ? name : "", name ? "': " : "", nfind,
           nfind == 1 ? "" : "s",
           json_is_integer(code) ? (long long)json_integer_value(code) : -1);
  json_decref(j);
  return vqc_error(VQC_EINVAL, "refusing to write the comparison into %s: "
                   "its run.json is the verdict of another run (%s), which "
                   "the comparison would replace, findings and all; pass "
                   "another --out (e.g. --out %.3000s-compare)", out, what,
                   out);
}

/* run.json's "compare" section (new reference): what was compared, the one
 * place every report and the summary read it from.
 *   trace_dir           TRACE_DIR as given
 *   program             the traces' "program" (trace.h), null when no line
 *                       names one
 *   ranks               ranks (one trace each)
 *   steps               steps that hold a line of some trace
 *   steps_compared      steps at which some tensor was compared (every rank
 *                       wrote it); first_step / last_step: the first and
 *                       last of them (null when none)
 *   tensors_per_step    the most tensors compared at one step;
 *                       tensors_per_step_min the fewest (equal when every
 *                       step compared as many; 0 when none was compared)
 *   rank_last_step      per rank 0..ranks-1, the last step of its trace
 *                       (null: its trace holds no step)
 *   lines_read, digests_compared, lines_not_compared, warnings
 *   no_replica          (step, tensor) whose replica group (trace.h
 *                       "group") is one rank: not comparable
 *   no_replica_tensors  the first VQC_TRACE_NO_REPLICA_LISTED distinct
 *                       (tensor, shard) of them, [{"tensor","shard"}];
 *                       no_replica_tensor_count how many there are
 *                       (no_replica_tensor_count_capped: true when the
 *                       count stopped at VQC_TRACE_NO_REPLICA_COUNT_MAX) */
static json_t *compare_section(const compare_opts *o, int nranks,
                               const vqc_trace_compare_result *res) {
  int64_t ncompared = 0, first = -1, last = -1, most = 0, fewest = 0;
  for (int64_t i = 0; i < res->nsteps; i++) {
    const vqc_trace_step *st = &res->steps[i];
    if (st->compared == 0) continue;
    if (ncompared == 0) {
      first = st->step;
      most = fewest = st->compared;
    }
    last = st->step;
    if (st->compared > most) most = st->compared;
    if (st->compared < fewest) fewest = st->compared;
    ncompared++;
  }
  json_t *last_steps = json_array();
  for (int r = 0; r < res->nranks; r++)
    json_array_append_new(last_steps, res->rank_last_step[r] >= 0
                                          ? json_integer(res->rank_last_step[r])
                                          : json_null());
  json_t *trace_dir = json_string(o->trace_dir);
  /* The program was valid UTF-8 in the trace (jansson checked it). */
  json_t *program = res->program[0] ? json_string(res->program) : NULL;
  json_t *c = json_object();
  json_object_set_new(c, "trace_dir",
                      trace_dir ? trace_dir : json_string("(not UTF-8)"));
  json_object_set_new(c, "program", program ? program : json_null());
  json_object_set_new(c, "ranks", json_integer(nranks));
  json_object_set_new(c, "steps", json_integer(res->nsteps));
  json_object_set_new(c, "steps_compared", json_integer(ncompared));
  json_object_set_new(c, "first_step",
                      first >= 0 ? json_integer(first) : json_null());
  json_object_set_new(c, "last_step",
                      last >= 0 ? json_integer(last) : json_null());
  json_object_set_new(c, "tensors_per_step", json_integer(most));
  json_object_set_new(c, "tensors_per_step_min", json_integer(fewest));
  json_object_set_new(c, "rank_last_step", last_steps);
  json_object_set_new(c, "lines_read", json_integer(res->lines_read));
  json_object_set_new(c, "digests_compared",
                      json_integer(res->digests_compared));
  json_object_set_new(c, "lines_not_compared",
                      json_integer(res->lines_not_compared));
  json_object_set_new(c, "no_replica", json_integer(res->no_replica));
  json_object_set_new(c, "no_replica_tensors", vqc_trace_no_replica_json(res));
  json_object_set_new(c, "no_replica_tensor_count",
                      json_integer(res->no_replica_tensors));
  if (res->no_replica_tensors_capped)
    json_object_set_new(c, "no_replica_tensor_count_capped", json_true());
  json_object_set(c, "not_digested", res->not_digested.list);
  json_object_set_new(c, "not_digested_count",
                      json_integer(res->not_digested.count));
  json_object_set(c, "warnings", res->warnings);
  return c;
}

/* The exit code: 1 with findings; else 3 when some tensor's contents went
 * unchecked (a not_digested line: no clean verdict), with why in
 * unchecked (cap bytes; "" otherwise); else 0. */
static int verdict_code(const vqc_findings *fl,
                        const vqc_trace_compare_result *res, char *unchecked,
                        size_t cap) {
  vqc_not_digested_unchecked(&res->not_digested, unchecked, cap);
  if (fl->count > 0) return 1;
  return unchecked[0] ? 3 : 0;
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
  char unchecked[1200];
  const int code = verdict_code(fl, res, unchecked, sizeof unchecked);
  json_object_set_new(j, "exit_code", json_integer(code));
  if (unchecked[0] && code == 3) { /* no verdict: some state went unread */
    char msg[1400];
    snprintf(msg, sizeof msg, "not everything was checked: %s", unchecked);
    json_t *tr = json_object_get(j, "training");
    json_object_set_new(tr, "status",
                        json_string(vqc_status_name(VQC_EUNSUPPORTED)));
    json_object_set_new(tr, "message",
                        vqc_json_text_opts(msg, strlen(msg), VQC_UTF8_NOTE,
                                           NULL));
  }
  json_object_set_new(j, "compare", compare_section(o, nranks, res));
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

/* A member of run.json's compare section as an integer; -1 when it is null
 * or absent. */
static long long section_int(const json_t *c, const char *key) {
  const json_t *v = json_object_get(c, key);
  return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

/* rank_last_step[rank] of the compare section; -1 for null (no step). */
static long long last_step_at(const json_t *last_steps, size_t rank) {
  const json_t *v = json_array_get(last_steps, rank);
  return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

/* "  last step per rank: step 9: ranks 0, 1, 3; step 4: rank 2\n", only
 * when the ranks' traces end at different steps. Groups from the furthest
 * step down, at most 8 groups of at most 8 ranks shown. */
static void print_last_steps(const json_t *last_steps) {
  const size_t n = json_array_size(last_steps);
  long long hi = -2, lo = LLONG_MAX;
  for (size_t r = 0; r < n; r++) {
    const long long x = last_step_at(last_steps, r);
    if (x > hi) hi = x;
    if (x < lo) lo = x;
  }
  if (n == 0 || hi == lo) return;
  printf("  last step per rank:");
  long long cur = LLONG_MAX; /* the groups printed are above cur */
  for (int g = 0; g < 8; g++) {
    long long next = -2;
    for (size_t r = 0; r < n; r++) {
      const long long x = last_step_at(last_steps, r);
      if (x < cur && x > next) next = x;
    }
    if (next == -2) break;
    cur = next;
    if (next >= 0) printf("%s step %lld:", g ? ";" : "", next);
    else printf("%s no step:", g ? ";" : "");
    int shown = 0, count = 0;
    for (size_t r = 0; r < n; r++)
      count += last_step_at(last_steps, r) == next;
    for (size_t r = 0; r < n; r++) {
      if (last_step_at(last_steps, r) != next) continue;
      if (shown < 8)
        printf("%s %zu", shown ? "," : count > 1 ? " ranks" : " rank", r);
      shown++;
    }
    if (shown > 8) printf(" and %d more", shown - 8);
  }
  if (cur > lo) printf("; ...");
  printf("\n");
}

/* The summary on stdout, from run.json's compare section (compare_section)
 * so that it says what the reports say. */
static void print_summary(const json_t *j, vqc_findings *fl, const char *out) {
  const json_t *c = json_object_get(j, "compare");
  const char *program = json_string_value(json_object_get(c, "program"));
  const char *dir = json_string_value(json_object_get(c, "trace_dir"));
  if (program)
    printf("compare %s (traces in %s)", program, dir ? dir : "?");
  else
    printf("compare the traces in %s", dir ? dir : "?");
  const long long ranks = section_int(c, "ranks");
  const long long steps = section_int(c, "steps_compared");
  const long long most = section_int(c, "tensors_per_step");
  const long long fewest = section_int(c, "tensors_per_step_min");
  printf(": %lld rank%s, ", ranks, ranks == 1 ? "" : "s");
  if (steps > 0) {
    printf("steps %lld..%lld compared (%lld step%s), ",
           section_int(c, "first_step"), section_int(c, "last_step"), steps,
           steps == 1 ? "" : "s");
    if (fewest != most) printf("%lld..%lld tensors per step, ", fewest, most);
    else printf("%lld tensor%s per step, ", most, most == 1 ? "" : "s");
  } else {
    printf("no step compared, ");
  }
  printf("%lld digests compared", section_int(c, "digests_compared"));
  const long long not_compared = section_int(c, "lines_not_compared");
  if (not_compared > 0) printf(", %lld lines not compared", not_compared);
  const long long lone = section_int(c, "no_replica");
  if (lone > 0)
    printf(", %lld without a replica (%lld tensor%s whose group is one rank: "
           "not comparable; listed in the reports)", lone,
           section_int(c, "no_replica_tensor_count"),
           section_int(c, "no_replica_tensor_count") == 1 ? "" : "s");
  printf("\n");
  print_last_steps(json_object_get(c, "rank_last_step"));
  const long long left_out = section_int(c, "not_digested_count");
  if (left_out > 0)
    printf("  not digested: a tensor left out %lld time%s (once per tensor "
           "and rank; listed in the reports)\n", left_out,
           left_out == 1 ? "" : "s");
  vqc_offline_print_findings(stdout, fl);
  if (fl->count > 0)
    printf("(from traces: digests only, no element-level detail)\n");
  const json_t *tr = json_object_get(j, "training");
  const char *status = json_string_value(json_object_get(tr, "status"));
  const char *why = json_string_value(json_object_get(tr, "message"));
  if (fl->count == 0 && status && strcmp(status, "VQC_OK") != 0 && why)
    printf("no verdict (exit 3): %s\n", why);
  printf("run directory: %s\n", out);
}

int vqc_cmd_compare(int argc, char **argv) {
  compare_opts o;
  int rc = parse_opts(argc, argv, &o);
  if (rc >= 0) return rc;
  const double t0 = vqc_now_s();

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
  /* Made now (and so taken back if the comparison fails)? Only the one
   * process whose mkdir made it: of several compares racing for a new
   * --out, the others never remove what the winner put there. */
  bool created = false;
  s = vqc_run_dir_make(out, &created);
  /* Writing into TRACE_DIR itself: keep its files, copy nothing, overwrite
   * nothing vqcheck did not write. Else the directory is taken as for
   * `vqcheck run` (refused when it holds a user's files; what an earlier
   * comparison left there goes). Either way it is locked until this ends,
   * and another run's verdict in it is never replaced (no_other_verdict,
   * checked under the lock, before anything is removed). */
  const bool in_place = s == VQC_OK && same_dir(out, o.trace_dir);
  bool locked = false;
  if (s == VQC_OK && in_place) {
    static const char *const outputs[] = {"run.json", "report.md",
                                          "report.html", "junit.xml"};
    s = vqc_run_dir_claim_outputs(out, outputs, 4);
  } else if (s == VQC_OK) {
    s = vqc_run_dir_check(out); /* before the lock file is made */
  }
  if (s == VQC_OK) locked = (s = vqc_run_dir_lock(out)) == VQC_OK;
  if (s == VQC_OK) s = no_other_verdict(out);
  if (s == VQC_OK && !in_place) s = vqc_run_dir_clear(out);
  if (s != VQC_OK) {
    fprintf(stderr, "vqcheck compare: %s\n", vqc_cli_error_text());
    if (created) vqc_run_dir_abandon(out); /* gives back our lock too */
    else if (locked) vqc_run_dir_unlock(out);
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
    if (created) vqc_run_dir_abandon(out);
    else vqc_run_dir_unlock(out);
    vqc_findings_free(&fl);
    vqc_trace_compare_result_free(&res);
    return vqc_status_exit_code(s);
  }

  json_t *j = compare_json(&o, nranks, &fl, &res, vqc_now_s() - t0);
  s = vqc_run_json_write(out, j);
  if (s == VQC_OK) s = vqc_offline_write_reports(out);
  int code = (int)json_integer_value(json_object_get(j, "exit_code"));
  if (s != VQC_OK) {
    fprintf(stderr, "vqcheck compare: %s\n", vqc_cli_error_text());
    code = vqc_status_exit_code(s);
  } else if (o.json) {
    json_dumpf(j, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII);
    printf("\n");
  } else if (!o.quiet) {
    print_summary(j, &fl, out);
  }
  json_decref(j);
  vqc_run_dir_unlock(out);
  vqc_findings_free(&fl);
  vqc_trace_compare_result_free(&res);
  return code;
}
