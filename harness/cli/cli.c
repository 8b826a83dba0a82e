/* cli.c: the helpers of cli.h that keep every vqcheck subcommand's
 * conventions the same: error text for people, usage errors, progress only
 * on a terminal. */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdio_ext.h> /* __fpending (glibc, musl) */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vqc/status.h"

static bool verbose = false;

void vqc_cli_set_verbose(bool on) { verbose = on; }

bool vqc_cli_debug(void) {
  const char *env = getenv("VQC_DEBUG");
  return verbose || (env && env[0] && strcmp(env, "0") != 0);
}

/* Characters of a source file's base name (vqc_error_at records the base
 * name only, never a directory). */
static bool name_char(char c) {
  return isalnum((unsigned char)c) || c == '_' || c == '-';
}

/* The length of a "<name>.<ext>:<digits>: VQC_<NAME>: " prefix at s (the
 * form vqc_error_at writes), 0 when s does not start with one. Only C, C++
 * and CUDA sources: "run.yaml:3: ..." is the user's file and stays. */
static size_t internal_prefix_len(const char *s) {
  static const char *const exts[] = {"c:", "h:", "cu:", "cc:", "cpp:"};
  size_t i = 0;
  while (name_char(s[i])) i++;
  if (i == 0 || s[i] != '.') return 0;
  i++;
  size_t ext = 0;
  for (size_t k = 0; k < sizeof exts / sizeof exts[0] && ext == 0; k++)
    if (strncmp(s + i, exts[k], strlen(exts[k])) == 0) ext = strlen(exts[k]);
  if (ext == 0) return 0;
  i += ext;
  const size_t digits = i;
  while (isdigit((unsigned char)s[i])) i++;
  if (i == digits || strncmp(s + i, ": VQC_", 6) != 0) return 0;
  i += 6;
  const size_t code = i;
  while (isupper((unsigned char)s[i]) || isdigit((unsigned char)s[i]) ||
         s[i] == '_')
    i++;
  if (i == code || strncmp(s + i, ": ", 2) != 0) return 0;
  return i + 2;
}

void vqc_cli_strip_internal(const char *in, char *out, size_t n) {
  if (n == 0) return;
  size_t o = 0;
  for (size_t i = 0; in[i] && o + 1 < n;) {
    /* A prefix only starts a word: "x/runner.c:1: ..." is part of a path
     * and "abc.c" inside "xabc.c" is not a file name of its own. */
    const bool word_start =
        i == 0 || !(name_char(in[i - 1]) || in[i - 1] == '.' ||
                    in[i - 1] == '/');
    const size_t skip = word_start ? internal_prefix_len(in + i) : 0;
    if (skip > 0) {
      i += skip;
      continue;
    }
    out[o++] = in[i++];
  }
  out[o] = '\0';
}

bool vqc_cli_parse_long(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || errno != 0 || v < lo || v > hi)
    return false;
  *out = v;
  return true;
}

const char *vqc_cli_error_text(void) {
  static _Thread_local char text[1024];
  if (vqc_cli_debug()) return vqc_last_error();
  vqc_cli_strip_internal(vqc_last_error(), text, sizeof text);
  return text;
}

int vqc_cli_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "vqcheck %s: ", cmd);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\nhint: 'vqcheck %s --help'\n", cmd);
  va_end(ap);
  return 2;
}

int vqc_cli_check_out(const char *cmd, const char *out) {
  if (!out || out[0]) return 0;
  return vqc_cli_usage_error(cmd, "--out is empty: pass a directory (a new "
                             "or empty one, or one vqcheck made before), or "
                             "leave --out out for the default");
}

int vqc_cli_close_stdout(int code) {
  /* Decided before the flush, which empties the buffer: bytes still
   * pending, or an earlier failed write (a command's own fflush, whose
   * result it may not check, leaves ferror set). */
  const bool pending = __fpending(stdout) != 0;
  const bool failed_before = ferror(stdout) != 0;
  errno = 0;
  const bool flush_failed = fflush(stdout) != 0;
  int err = flush_failed ? errno : 0;
  errno = 0;
  const bool close_failed = fclose(stdout) != 0;
  const int close_err = errno;
  /* EBADF from the close alone, with nothing to write: stdout was closed
   * (`>&-`) and the command printed nothing, so nothing was lost. */
  const bool lost = failed_before || flush_failed ||
                    (close_failed && !(close_err == EBADF && !pending));
  if (!lost) return code;
  if (err == 0) err = close_err;
  fprintf(stderr, "vqcheck: cannot write to standard output: %s\n"
          "hint: what this command printed is incomplete; check the disk "
          "or pipe stdout goes to, or leave out --json\n",
          err ? strerror(err) : "an earlier write failed");
  return code < 3 ? 3 : code;
}

bool vqc_cli_show_progress(bool quiet, bool json) {
  return !quiet && !json && isatty(STDOUT_FILENO);
}

#ifndef VQC_SCENARIO_DIR
#define VQC_SCENARIO_DIR "scenarios"
#endif

bool vqc_cli_installed_data(const char *what, char *buf, size_t n) {
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) return false;
  self[len] = '\0';
  char *slash = strrchr(self, '/');
  if (!slash) return false;
  *slash = '\0';
  int k = snprintf(buf, n, "%s/../share/vqcheck/%s", self, what);
  return k > 0 && (size_t)k < n;
}

const char *vqc_cli_default_scenarios(void) {
  const char *env = getenv("VQC_SCENARIO_DIR");
  if (env && env[0]) return env;
  static char installed[4200];
  struct stat st;
  if (vqc_cli_installed_data("scenarios", installed, sizeof installed) &&
      stat(installed, &st) == 0 && S_ISDIR(st.st_mode))
    return installed;
  return VQC_SCENARIO_DIR;
}
