/* status.c: names, messages and exit codes generated from VQC_STATUS_LIST,
 * plus the thread-local last-error message. */
#include "vqc/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[1024];

const char *vqc_status_name(vqc_status s) {
  switch (s) {
#define X(name, code, msg) case VQC_##name: return "VQC_" #name;
    VQC_STATUS_LIST(X)
#undef X
    default: return "VQC_UNKNOWN";
  }
}

const char *vqc_status_message(vqc_status s) {
  switch (s) {
#define X(name, code, msg) case VQC_##name: return msg;
    VQC_STATUS_LIST(X)
#undef X
    default: return "unknown status";
  }
}

int vqc_status_exit_code(vqc_status s) {
  switch (s) {
#define X(name, code, msg) case VQC_##name: return code;
    VQC_STATUS_LIST(X)
#undef X
    default: return 3;
  }
}

vqc_status vqc_error_at(vqc_status s, const char *file, int line,
                        const char *fmt, ...) {
  /* Formatted into a local buffer first: callers may pass vqc_last_error()
   * itself as an argument (to add context to an inner error), and the
   * source and destination of vsnprintf must not overlap. */
  char msg[sizeof last_error];
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  int n = snprintf(msg, sizeof msg, "%s:%d: %s: ", base, line,
                   vqc_status_name(s));
  if (n < 0 || (size_t)n >= sizeof msg) return s;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
  va_end(ap);
  memcpy(last_error, msg, sizeof last_error);
  return s;
}

const char *vqc_last_error(void) { return last_error; }

void vqc_clear_error(void) { last_error[0] = '\0'; }
