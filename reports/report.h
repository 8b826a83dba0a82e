/* report.h: the report writers. They turn a run directory (DESIGN.md "Run
 * directory") into files a person or a CI system reads:
 *
 *   report.md    verdict, findings table, per-finding detail, digest
 *                agreement, the stuck collective, environment and build;
 *   report.html  one self-contained page (inline CSS and SVG, no scripts,
 *                nothing fetched): verdict banner, findings table with call
 *                sites, a step x rank digest-agreement heatmap
 *                (<svg id="digest-heatmap">), a divergence-over-steps plot
 *                (<svg id="divergence-plot">), a per-rank collective
 *                timeline around the stuck collective
 *                (<svg id="collective-timeline">), finding details,
 *                environment and build;
 *   junit.xml    one <testsuite>, one <testcase> per check (a finding kind)
 *                plus "training"; a check with findings carries a <failure>
 *                whose message is the first finding's message.
 *
 * Inputs (read only): run_dir/run.json (schema_version 1, written by the
 * runner; validated here: a corrupt one is VQC_EPARSE naming the file and
 * the field), run_dir/rank-<r>.trace.jsonl (checkers/trace.h) and
 * run_dir/rank-<r>.ledger.jsonl (checkers/ledger_analysis.h) when present.
 * A trace whose last line has no newline and does not parse is a line the
 * writer was killed in the middle of, and is ignored; any other bad line is
 * VQC_EPARSE "file:line: ...".
 *
 * Every file is rendered in memory first, then written to
 * "<name>.tmp.<pid>" and renamed over <name>: a crash or a failed write
 * never leaves half a report, and a failure leaves the previous report as
 * it was. When any input is bad nothing is written. */
#ifndef VQC_REPORT_H
#define VQC_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "vqc/status.h"

/* Format bits. JSON is the validated run.json itself, so it is only
 * rendered (vqc_report_render), never written by vqc_reports_write: the
 * runner owns run.json. */
enum {
  VQC_REPORT_MD = 1u << 0,    /* report.md */
  VQC_REPORT_HTML = 1u << 1,  /* report.html */
  VQC_REPORT_JUNIT = 1u << 2, /* junit.xml */
  VQC_REPORT_JSON = 1u << 3,  /* run.json (vqc_report_render only) */
  VQC_REPORT_ALL = VQC_REPORT_MD | VQC_REPORT_HTML | VQC_REPORT_JUNIT,
};

/* Writes the reports selected by `formats` (VQC_REPORT_ALL for all three)
 * into run_dir. VQC_EPARSE for an invalid run.json, trace or ledger dump
 * (message names file:line and field), VQC_EIO when a file cannot be read or
 * written, VQC_EINVAL for bad arguments (a JSON bit, no bit). */
vqc_status vqc_reports_write(const char *run_dir, unsigned formats);

/* Renders ONE format (exactly one bit, JSON included) of run_dir to out
 * (e.g. stdout) and writes nothing into run_dir. Errors as above. */
vqc_status vqc_report_render(const char *run_dir, unsigned format, FILE *out);

/* "md" / "markdown", "html", "junit", "json" -> the format bit; VQC_EINVAL
 * otherwise. */
vqc_status vqc_report_format_from_name(const char *name, unsigned *out);

/* The file a format is written to: "report.md", "report.html", "junit.xml",
 * "run.json"; NULL for anything but one bit. */
const char *vqc_report_file_name(unsigned format);

/* The run's own exit code (run.json "exit_code": 0 clean, 1 findings, 3
 * unexplained error) into *exit_code, after validating run.json as above. */
vqc_status vqc_report_run_exit_code(const char *run_dir, int *exit_code);

/* ---- suites */

/* One scenario of a suite, as `vqcheck suite` saw it. Fixed-size strings so
 * the suite loop can fill one per scenario with snprintf and forget it
 * (longer text is cut). Empty strings are left out of the report. */
typedef struct vqc_suite_case {
  char name[128];      /* the scenario's name: the testcase name */
  char fault[64];      /* the injected fault ("none" for a clean twin) */
  char expected[256];  /* vqc_scenario_expect_string, e.g. "clean" */
  char found[256];     /* e.g. "divergence@1, gradient_mismatch@1" */
  bool passed;         /* the expectation held */
  bool error;          /* it did not run (did not load, crashed, killed):
                          an <error> rather than a <failure> */
  char message[1024];  /* why it failed; "" when it passed */
  double seconds;
  char run_dir[1024];  /* its run directory; its own reports live there */
} vqc_suite_case;

/* Writes out_dir/junit.xml (one <testsuite name="vqcheck.<suite_name>">,
 * one <testcase> per case, a <failure> or <error> carrying `message` for
 * each case that did not pass) and out_dir/report.md (a table of the cases
 * with links to their run directories), each atomically. suite_name: e.g.
 * "suite"; NULL means "suite". ncases may be 0. VQC_EIO when out_dir cannot
 * be written. */
vqc_status vqc_reports_write_suite(const char *out_dir, const char *suite_name,
                                   const vqc_suite_case *cases, int ncases);

#endif /* VQC_REPORT_H */
