/* live_signal_line.h: the live record's "signal" line, made without stdio
 * or allocation, so a signal handler can make it (async-signal-safe):
 *
 *   {"event":"signal","signal":SIG,"t_ns":T}                 from_pid 0
 *   {"event":"signal","signal":SIG,"t_ns":T,"from_pid":P}
 *
 * T is CLOCK_MONOTONIC in ns, the clock of the records' t_enter_ns. Its
 * writers: vqcheck's own ranks (live_record.c vqc_live_note_signal) and
 * the Python bridge's SIGTERM handler (python/core.c); its reader:
 * live_record.c ("ended by others"). Header-only, so the Python extension
 * makes the same line without linking the live record's reader. */
#ifndef VQC_LIVE_SIGNAL_LINE_H
#define VQC_LIVE_SIGNAL_LINE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Room for the longest line: the keys and three numbers of 20 digits. */
#define VQC_LIVE_SIGNAL_LINE_MAX 128

/* The decimal digits of v at line + k; the new k. */
static inline size_t vqc_live_put_decimal(char *line, size_t k, uint64_t v) {
  char digits[24];
  int nd = 0;
  do {
    digits[nd++] = (char)('0' + v % 10);
    v /= 10;
  } while (v && nd < (int)sizeof digits);
  while (nd > 0) line[k++] = digits[--nd];
  return k;
}

/* The line, newline included, into line (VQC_LIVE_SIGNAL_LINE_MAX bytes);
 * its length. from_pid <= 0 leaves "from_pid" out. */
static inline size_t vqc_live_signal_line(char *line, int sig, uint64_t t_ns,
                                          long from_pid) {
  static const char head[] = "{\"event\":\"signal\",\"signal\":";
  static const char t[] = ",\"t_ns\":", from[] = ",\"from_pid\":";
  size_t k = sizeof head - 1;
  memcpy(line, head, k);
  k = vqc_live_put_decimal(line, k, sig > 0 ? (uint64_t)sig : 0u);
  memcpy(line + k, t, sizeof t - 1);
  k = vqc_live_put_decimal(line, k + sizeof t - 1, t_ns);
  if (from_pid > 0) {
    memcpy(line + k, from, sizeof from - 1);
    k = vqc_live_put_decimal(line, k + sizeof from - 1, (uint64_t)from_pid);
  }
  line[k++] = '}';
  line[k++] = '\n';
  return k;
}

#endif /* VQC_LIVE_SIGNAL_LINE_H */
