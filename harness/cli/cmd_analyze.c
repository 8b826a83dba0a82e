/* cmd_analyze.c: `vqcheck analyze RUN_DIR`: re-analyses what a job left in
 * its run directory, offline: typically after the job was killed (by a
 * scheduler's time limit, or by hand while it hung) before rank 0 could
 * write run.json, or to re-check a run directory copied off a cluster. The
 * analysis is harness/run/analyze.c (what it reads and how it merges are
 * in its file comment); this file parses the options and prints the
 * outcome, for `vqcheck analyze` and for the commands that end with the
 * same analysis (vqc_cli_analyze: `vqcheck run` under a launcher,
 * supervise.c, and `vqcheck watch`).
 *
 * Exit: 0 clean, 1 findings, 2 usage or bad input, 3 I/O error or (as for
 * `vqcheck run`) training that stopped with an error no finding explains. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "analyze.h"
#include "cli.h"
#include "offline.h"

typedef struct analyze_opts {
  const char *run_dir;
  bool json;
  bool quiet;
} analyze_opts;

static void analyze_help(FILE *f) {
  fprintf(f,
          "usage: vqcheck analyze RUN_DIR [--json] [--quiet]\n\n"
          "Re-analyses a run directory offline, e.g. after the job was "
          "killed: the\nledger dumps (rank-<r>.ledger.jsonl, "
          "rank-<r>.status.json) and the live\nrecords every rank appends "
          "as it goes (rank-<r>.live.jsonl) for deadlocks\nand failed ranks "
          "(a rank whose record stops early: its last step and\n"
          "collective), and the "
          "digest traces (rank-<r>.trace.jsonl) for divergence.\nNew "
          "findings are merged with those of RUN_DIR/run.json (a finding the "
          "run\nalready recorded is kept as the run wrote it); run.json is "
          "rewritten, or\ncreated when the job died before writing it, and "
          "the reports regenerated.\nThe findings files of vqcheck watch's "
          "Python bridge (rank-<r>.findings.jsonl)\nare read and merged too. "
          "What needs the live state\n(gradient_mismatch, lost_inplace, "
          "shape_mismatch, nonfinite, element-level\ndivergence detail) is "
          "not found anew: it comes from run.json, or from the\nfindings "
          "each rank put on its live record as it made them. Without\n"
          "run.json, a directory that compared nothing or whose ranks did "
          "not all finish\nevery step is never clean.\n\n"
          "  --json      print the new run.json on stdout instead of the "
          "summary\n"
          "  --quiet     no summary (warnings and errors still go to "
          "stderr)\n\n"
          "exit: 0 clean, 1 findings, 2 usage or bad input (a corrupt "
          "run.json, dump\n      or trace), 3 I/O error, or training "
          "stopped without a finding that\n      explains it\n");
}

static int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "vqcheck analyze: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\nhint: 'vqcheck analyze --help'\n");
  return 2;
}

static int parse_opts(int argc, char **argv, analyze_opts *o) {
  memset(o, 0, sizeof *o);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      analyze_help(stdout);
      return 0;
    } else if (strcmp(a, "--json") == 0) {
      o->json = true;
    } else if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
      o->quiet = true;
    } else if (a[0] == '-' && a[1] != '\0') {
      return usage_error("unknown option '%s'", a);
    } else if (o->run_dir) {
      return usage_error("more than one run directory ('%s')", a);
    } else {
      o->run_dir = a;
    }
  }
  if (!o->run_dir) return usage_error("no run directory given%s", "");
  return -1;
}

static void print_warnings(const char *cmd, const json_t *warnings) {
  for (size_t i = 0; i < json_array_size(warnings); i++)
    fprintf(stderr, "vqcheck %s: warning: %s\n", cmd,
            json_string_value(json_array_get(warnings, i)));
}

/* What vqc_analyze_run_dir found (r), or why it failed (s, r->error), as
 * `vqcheck <cmd>` says it: warnings and errors on stderr, then run.json
 * (json) or the summary (unless quiet) on stdout. */
static void print_analysis(const char *cmd, const vqc_analyze_result *r,
                           vqc_status s, bool json, bool quiet) {
  if (r->invalid[0])
    fprintf(stderr, "vqcheck %s: warning: the run.json vqcheck wrote fails "
            "its own validation (%s): it is rebuilt from the findings, with "
            "\"validation_error\" saying so, and the reports are written "
            "from that; please report this (a vqcheck bug, or a member of "
            "the run.json it was given that it kept)\n", cmd, r->invalid);
  if (r->rebuilt_invalid[0])
    fprintf(stderr, "vqcheck %s: error: the rebuilt run.json fails "
            "vqcheck's validation too (%s): no reports were written; please "
            "report this vqcheck bug\n", cmd, r->rebuilt_invalid);
  print_warnings(cmd, r->warnings);
  if (s != VQC_OK) {
    fprintf(stderr, "vqcheck %s: %s\n", cmd, r->error);
    return;
  }
  if (json) {
    json_dumpf(r->run_json, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII);
    printf("\n");
    return;
  }
  if (quiet) return;
  printf("%s %s: %s run.json, %d ledger dump%s, %d live record%s (%d "
         "finding%s on record), %d trace%s (%" PRId64 " digests "
         "compared)\n", cmd, r->run_dir,
         r->had_run_json ? "updated its" : "no run.json: wrote a new",
         r->ledger_dumps, r->ledger_dumps == 1 ? "" : "s", r->live_records,
         r->live_records == 1 ? "" : "s", r->recorded_findings,
         r->recorded_findings == 1 ? "" : "s", r->trace_files,
         r->trace_files == 1 ? "" : "s", r->digests_compared);
  printf("new findings: %d (%d already in run.json)\n", r->added,
         r->already_known);
  /* Said, never a finding (report.md "Not compared" names them). */
  if (r->no_replica > 0)
    printf("no replica (not comparable): %" PRId64 " line%s, %" PRId64
           " tensor%s\n", r->no_replica, r->no_replica == 1 ? "" : "s",
           r->no_replica_tensors, r->no_replica_tensors == 1 ? "" : "s");
  if (r->not_digested > 0)
    printf("not digested: a tensor left out %" PRId64 " time%s (once per "
           "tensor and rank)\n", r->not_digested,
           r->not_digested == 1 ? "" : "s");
  vqc_offline_print_findings(stdout, (vqc_findings *)&r->findings);
  /* No finding and no verdict: say why here, not only in the reports. */
  const json_t *tr = json_object_get(r->run_json, "training");
  const char *why = json_string_value(json_object_get(tr, "message"));
  if (json_integer_value(json_object_get(r->run_json, "exit_code")) == 3 &&
      r->findings.count == 0 && why && why[0])
    printf("no verdict (exit 3): %s\n", why);
  if (strcmp(cmd, "analyze") != 0) /* the supervisor's summary */
    printf("run directory: %s (run.json, report.html, report.md, "
           "junit.xml)\n", r->run_dir);
}

/* The bytes of the ranks' files (rank-*) in dir: what the analysis reads. */
static double records_bytes(const char *dir) {
  double total = 0;
  DIR *d = dir ? opendir(dir) : NULL;
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    char path[4400];
    struct stat st;
    if (strncmp(e->d_name, "rank-", 5) != 0) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
      total += (double)st.st_size;
  }
  if (d) closedir(d);
  return total;
}

/* Records past this many bytes take seconds to read: say so first. */
#define RECORDS_SAID_BYTES (64.0 * 1024 * 1024)

int vqc_cli_analyze(const vqc_analyze_opts *o, const char *cmd, bool json,
                    bool quiet) {
  if (!quiet) {
    const double bytes = records_bytes(o->run_dir);
    if (bytes >= RECORDS_SAID_BYTES) {
      fprintf(stderr, "vqcheck %s: reading %.0f MiB of the ranks' records "
              "in %s: this takes a few seconds per 100 MiB...\n", cmd,
              bytes / (1024.0 * 1024.0), o->run_dir);
      fflush(stderr);
    }
  }
  vqc_analyze_opts ao = *o;
  ao.error_text = vqc_cli_error_text;
  vqc_analyze_result r;
  vqc_status s = vqc_analyze_run_dir(&ao, &r);
  print_analysis(cmd, &r, s, json, quiet);
  const int code = r.exit_code;
  vqc_analyze_result_free(&r);
  return code;
}

int vqc_cmd_analyze(int argc, char **argv) {
  analyze_opts o;
  int rc = parse_opts(argc, argv, &o);
  if (rc >= 0) return rc;
  struct stat st;
  errno = 0;
  if (stat(o.run_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    int err = errno; /* 0 when it exists but is no directory */
    fprintf(stderr, "vqcheck analyze: %s is not a directory%s%s\n", o.run_dir,
            err ? ": " : "", err ? strerror(err) : "");
    fprintf(stderr, "hint: 'vqcheck analyze --help'\n");
    return 2;
  }
  const vqc_analyze_opts ao = {.run_dir = o.run_dir};
  return vqc_cli_analyze(&ao, "analyze", o.json, o.quiet);
}
