/* cmd_report.c: `vqcheck report RUN_DIR [--format F] [--quiet]`, which
 * (re)makes the reports of a run directory from what the run left there
 * (reports/report.h): after a killed job, after an upgrade of vqcheck, or
 * to print one report on stdout for a pipeline.
 *
 * It writes only where `vqcheck analyze` would (rundir.h): a directory
 * vqcheck made, or one whose report.md, report.html and junit.xml are
 * absent or were written by vqcheck (a user's own report.html is refused,
 * exit 2, and left as it is); locked while it writes.
 *
 * The exit code follows DESIGN.md: once the reports are made it is the
 * run's own (0 clean, 1 findings, 3 the run stopped with an error nothing
 * explained), so `vqcheck report` can gate a CI step on a finished run; 2
 * for bad usage or an invalid run.json, trace or ledger dump; 3 when a
 * report cannot be written. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "report.h"
#include "rundir.h"
#include "vqc/vqc.h"

static void report_help(FILE *f) {
  fprintf(f,
          "usage: vqcheck report RUN_DIR [--format html|md|json|junit] "
          "[--quiet]\n                      [--verbose]\n\n"
          "Makes the reports of a run directory again from its run.json, "
          "digest traces\n(rank-<r>.trace.jsonl) and ledger dumps "
          "(rank-<r>.ledger.jsonl):\n"
          "  report.md    verdict, findings, details, environment and build\n"
          "  report.html  the same with plots, in one self-contained file "
          "(open it in\n               any browser; it fetches nothing)\n"
          "  junit.xml    one testcase per check, for CI test reporters\n"
          "Each is written to a temporary name and renamed into place, "
          "only in a\ndirectory vqcheck made or over report files vqcheck "
          "wrote (a report.html\nof yours there is refused, exit 2).\n\n"
          "  --format F   print only report F on stdout and write nothing: "
          "html, md,\n               junit, or json (the validated run.json)\n"
          "  --quiet      do not list the files written\n"
          "  --verbose    full internal error text (also: VQC_DEBUG=1)\n\n"
          "exit: the run's own exit code once the reports are made (0 clean, "
          "1 findings,\n      3 the run stopped with an unexplained error); "
          "2 bad usage or an invalid\n      run.json, trace or ledger dump; "
          "3 a report cannot be written\n");
}

static int usage_error(const char *what, const char *arg) {
  return vqc_cli_usage_error("report", "%s%s%s", what, arg ? ": " : "",
                             arg ? arg : "");
}

int vqc_cmd_report(int argc, char **argv) {
  const char *dir = NULL;
  unsigned format = 0;
  bool quiet = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      report_help(stdout);
      return 0;
    } else if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
      quiet = true;
    } else if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0) {
      vqc_cli_set_verbose(true);
    } else if (strcmp(a, "--format") == 0 || strncmp(a, "--format=", 9) == 0) {
      const char *v = a[8] == '=' ? a + 9 : (i + 1 < argc ? argv[++i] : NULL);
      if (!v) return usage_error("--format needs a value", NULL);
      if (vqc_report_format_from_name(v, &format) != VQC_OK)
        return usage_error("unknown format (expected html, md, json or "
                           "junit)", v);
    } else if (a[0] == '-') {
      return usage_error("unknown option", a);
    } else if (dir) {
      return usage_error("more than one run directory given", a);
    } else {
      dir = a;
    }
  }
  if (!dir) return usage_error("no run directory given", NULL);

  /* Writing into dir follows the one ownership rule (rundir.h): a
   * directory vqcheck made, or report files vqcheck wrote there before
   * (never a user's report.html), and one writer at a time. A name that is
   * not a directory is left to the reader, which says what is missing. */
  struct stat st;
  bool locked = false;
  vqc_status s = VQC_OK;
  if (!format && stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) {
    static const char *const outputs[] = {"report.md", "report.html",
                                          "junit.xml"};
    s = vqc_run_dir_claim_outputs(dir, outputs, 3);
    if (s == VQC_OK) locked = (s = vqc_run_dir_lock(dir)) == VQC_OK;
    if (s != VQC_OK) {
      fprintf(stderr, "vqcheck report: %s\nhint: 'vqcheck report %s "
              "--format md' prints a report without writing any file\n",
              vqc_cli_error_text(), dir);
      return vqc_status_exit_code(s);
    }
  }
  s = format ? vqc_report_render(dir, format, stdout)
             : vqc_reports_write(dir, VQC_REPORT_ALL);
  if (locked) vqc_run_dir_unlock(dir);
  if (s != VQC_OK) {
    fprintf(stderr, "vqcheck report: %s\n", vqc_cli_error_text());
    return vqc_status_exit_code(s);
  }
  if (!format && !quiet) {
    const unsigned all[] = {VQC_REPORT_MD, VQC_REPORT_HTML, VQC_REPORT_JUNIT};
    for (int i = 0; i < 3; i++)
      printf("wrote %s/%s\n", dir, vqc_report_file_name(all[i]));
  }
  /* The run's own verdict (run.json was just validated: this reads). */
  int code = 3;
  s = vqc_report_run_exit_code(dir, &code);
  if (s != VQC_OK) {
    fprintf(stderr, "vqcheck report: %s\n", vqc_cli_error_text());
    return vqc_status_exit_code(s);
  }
  return code;
}
