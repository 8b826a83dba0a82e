/* watch_output_check.h: the property "vqcheck's own output is always
 * valid" (issue 23), as one check that the libFuzzer target
 * fuzz_watch_output.c runs on random bytes and the unit test
 * tests/unit/test_output_valid.c runs on a fixed set of nasty inputs (so CI
 * checks it without libFuzzer).
 *
 * An input is a set of byte strings, the places outside text enters
 * run.json by (woc_part). woc_check builds from them what `vqcheck watch`
 * and `vqcheck analyze` build -- findings made in memory, the Python
 * bridge's findings file and a live record read back, watch's own
 * rank_failure and deadlock (vqc_watch_more_findings), run.json's "job"
 * section, the training message -- writes run.json as they do, and checks:
 *   - run.json parses back (vqc_run_json_load) and passes vqcheck's own
 *     validation (vqc_report_run_exit_code, what every reader uses);
 *   - no finding went missing and each has its "message";
 *   - report.md, report.html and junit.xml are written and valid UTF-8.
 * An input file the readers refuse (VQC_EPARSE naming file:line: the
 * documented exit 2 for a malformed bridge file) is no failure: the check
 * goes on without that file's findings. */
#ifndef VQC_WATCH_OUTPUT_CHECK_H
#define VQC_WATCH_OUTPUT_CHECK_H

#include <stddef.h>
#include <stdint.h>

typedef enum woc_part {
  WOC_STDERR,   /* rank 1's stderr tail (it exited with status 3) */
  WOC_MESSAGE,  /* a finding's message; the training message; the reason
                   vqcheck stopped the job */
  WOC_TENSOR,   /* a finding's tensor name */
  WOC_SITE,     /* a finding's call site; the bridge directory */
  WOC_DETAIL,   /* a string in a finding's detail */
  WOC_ARG,      /* an argument of the job's command; the scenario path */
  WOC_FINDINGS, /* rank-0.findings.jsonl, the bridge's findings file */
  WOC_LIVE,     /* rank-1.live.jsonl, a live record (finding lines) */
  WOC_HANG,     /* rank-0.hang, a hang marker */
  WOC_STACKS,   /* rank-1.stacks.txt, faulthandler's stack dump */
  WOC_NPARTS
} woc_part;

typedef struct woc_input {
  const char *part[WOC_NPARTS]; /* borrowed; NULL is "" */
  size_t len[WOC_NPARTS];
} woc_input;

/* Splits fuzzer bytes into parts, each a 2-byte little-endian length then
 * that many bytes (fewer at the end of the data); parts past the data are
 * "". The parts point into data. */
void woc_split(const uint8_t *data, size_t size, woc_input *in);

/* Runs the check of the file comment in dir (an existing, empty directory;
 * left empty again). NULL when the property holds, else what failed (a
 * static buffer: the next call overwrites it). */
const char *woc_check(const char *dir, const woc_input *in);

#endif /* VQC_WATCH_OUTPUT_CHECK_H */
