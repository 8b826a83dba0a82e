/* harness/cli/ owns: main, one cmd_<name>.c per subcommand, their options
 *   (run_options.c) and the launcher supervisor (supervise.c).
 * May use: run/, models/, scenario/, conformance/, checkers/, reports/,
 *   libvqcheck.
 *
 * cli.h: the subcommand table shared by vqcheck.c and the command files, and
 * the small helpers every subcommand uses to follow the same conventions
 * (DESIGN.md, STYLE.md "jq and git"): usage errors on stderr with a hint and
 * exit 2, progress only on a terminal, and error messages for people. */
#ifndef VQC_CLI_H
#define VQC_CLI_H

#include <stdbool.h>
#include <stddef.h>

typedef struct vqc_cli_command {
  const char *name;
  const char *summary;
  /* argv[0] is the command name; returns the process exit code. */
  int (*run)(int argc, char **argv);
} vqc_cli_command;

int vqc_cmd_smoke(int argc, char **argv);
int vqc_cmd_conformance(int argc, char **argv);
int vqc_cmd_list(int argc, char **argv);
int vqc_cmd_run(int argc, char **argv);
int vqc_cmd_suite(int argc, char **argv);
int vqc_cmd_compare(int argc, char **argv);
int vqc_cmd_analyze(int argc, char **argv);
int vqc_cmd_report(int argc, char **argv);
int vqc_cmd_watch(int argc, char **argv);

/* ---- the offline analysis, printed (cmd_analyze.c) */

struct vqc_analyze_opts;

/* Runs vqc_analyze_run_dir (analyze.h) on o, its library errors worded by
 * vqc_cli_error_text, and prints the outcome as `vqcheck <cmd>` (cmd:
 * "analyze", or "run" and "watch", whose summary also names the run
 * directory): warnings and errors on stderr, then the new run.json (json)
 * or the summary and findings (unless quiet) on stdout. Returns the exit
 * code: 0 clean, 1 findings, 2 bad input, 3 I/O error or a run that
 * stopped without a finding that explains it. */
int vqc_cli_analyze(const struct vqc_analyze_opts *o, const char *cmd,
                    bool json, bool quiet);

/* ---- helpers (cli.c) */

/* Library messages start with the C source location that raised them
 * ("scenario.c:412: VQC_EPARSE: tests/x.yaml:3: ranks: ..."): useful to us,
 * noise to a user. Copies `in` into out (n bytes, always terminated) with
 * every such "<file>.<ext>:<line>: VQC_<NAME>: " prefix removed, wherever it
 * appears (messages are sometimes nested). */
void vqc_cli_strip_internal(const char *in, char *out, size_t n);

/* The calling thread's vqc_last_error() for a person: stripped as above,
 * unless debugging is on (vqc_cli_debug). The pointer is valid until the
 * thread's next call. */
const char *vqc_cli_error_text(void);

/* Debugging: the full library text in error messages. On after
 * vqc_cli_set_verbose(true) (a subcommand's --verbose) or when the
 * environment has VQC_DEBUG set to anything but "" or "0". */
void vqc_cli_set_verbose(bool on);
bool vqc_cli_debug(void);

/* An integer option's value: s is a decimal integer (an optional sign,
 * digits, nothing after) in [lo, hi]; its value goes to *out. False
 * otherwise (junk, empty, out of range or of a long's range), *out left
 * as it was. */
bool vqc_cli_parse_long(const char *s, long lo, long hi, long *out);

/* Misuse: prints "vqcheck <cmd>: <message>" and "hint: 'vqcheck <cmd>
 * --help'" on stderr; returns 2, the usage exit code. */
int vqc_cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* An --out value a command was given: NULL (not given) or a directory name
 * is fine (0); "" (an unset shell variable, say) would silently mean the
 * default directory, so it is misuse: prints why on stderr (as
 * vqc_cli_usage_error) and returns 2. Every command with --out calls it
 * before it chooses its directory. */
int vqc_cli_check_out(const char *cmd, const char *out);

/* The end of every command (main calls it once with the command's exit
 * code): flushes and closes stdout and returns the code to exit with. A
 * document that did not reach stdout (a full disk, /dev/full, a closed
 * pipe end) is an environment error: said on stderr with the reason, and
 * the code becomes 3 unless it is 3 or more already (an interrupted suite's
 * 130/143 stays). A stdout that was closed before vqcheck started and had
 * nothing written to it is not an error (gnulib's close_stdout rule). */
int vqc_cli_close_stdout(int code);

/* Whether to print progress (a line per step or per scenario): only for a
 * person watching, i.e. stdout is a terminal, and not with --quiet or
 * while stdout carries a --json document. */
bool vqc_cli_show_progress(bool quiet, bool json);

/* An installed vqcheck's data: <this executable's directory>/../share/
 * vqcheck/<what> (scenarios, bridge) into buf (n bytes); false when the
 * executable's path is unknown or the result does not fit. Whether the
 * directory exists is the caller's question. */
bool vqc_cli_installed_data(const char *what, char *buf, size_t n);

/* The scenario directory `list` and `suite` use when none is given:
 * $VQC_SCENARIO_DIR; else the installed share/vqcheck/scenarios when it
 * exists (cmake --install, the .deb); else the source tree's scenarios/
 * this binary was built from (compiled in). Never NULL; static storage. */
const char *vqc_cli_default_scenarios(void);

#endif
