/* live_record.c: the live record, rank-<r>.live.jsonl: the writers of its
 * lines (vqc_live_open, vqc_live_record, vqc_live_step, ...,
 * vqc_live_mark_end) and the reader of its event lines (live_event,
 * vqc_live_scan) (ledger_analysis.h "The live record"; split out of
 * ledger_analysis.c, see ledger_analysis_internal.h). */
#include "ledger_analysis_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "ledger_record.h"
#include "live_signal_line.h"
#include "trace.h" /* VQC_TRACE_LINE_MAX */
#include "utf8.h"
#include "vqc/clock.h"
#include "vqc/fsutil.h"

/* ---- the live record (ledger_analysis.h "The live record") */

struct vqc_live {
  int fd;
  bool write_failed; /* a line was lost: later ones are not attempted */
};

/* The descriptor vqc_live_note_signal writes to; -1 when none. Only set
 * once main-level code asked for it (vqc_live_signals), and then never
 * closed: a handler on another thread (MPI runs progress threads) could
 * otherwise write to a number reused by some other file. */
static _Atomic int live_signal_fd = -1;
static _Atomic bool live_signals_wanted = false;

void vqc_live_signals(void) { atomic_store(&live_signals_wanted, true); }

/* Appends s as the body of a JSON string (no quotes) to buf at *k. */
static void append_escaped(char *buf, size_t *k, size_t n, const char *s) {
  for (; s && *s && *k + 8 < n; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') {
      buf[(*k)++] = '\\';
      buf[(*k)++] = (char)ch;
    } else if (ch < 0x20) {
      *k += (size_t)snprintf(buf + *k, n - *k, "\\u%04x", ch);
    } else {
      buf[(*k)++] = (char)ch;
    }
  }
  buf[*k] = '\0';
}

/* One write(2) of a whole line: with O_APPEND, lines of the rank, of its
 * signal handler and of a supervisor never interleave. */
static void live_write(vqc_live *l, const char *line, size_t len) {
  if (!l || l->fd < 0 || l->write_failed) return;
  ssize_t w = write(l->fd, line, len);
  if (w != (ssize_t)len) l->write_failed = true;
}

vqc_status vqc_live_open(const char *run_dir, int rank, int size,
                         double timeout_s, vqc_live **out) {
  if (!out) return vqc_error(VQC_EINVAL, "vqc_live_open: out is NULL");
  *out = NULL;
  char path[4200];
  VQC_TRY(vqc_live_path(run_dir, rank, path, sizeof path));
  vqc_live *l = calloc(1, sizeof *l);
  if (!l) return vqc_error(VQC_ENOMEM, "no memory for a live record");
  /* Never through a link or into a file of other names (vqc/fsutil.h
   * "Links"): VQC_EINVAL naming it, nothing truncated. */
  vqc_status s = vqc_open_write(path, true, true, &l->fd);
  if (s != VQC_OK) {
    free(l);
    return s;
  }
  char host[256] = "", line[1024];
  gethostname(host, sizeof host - 1);
  size_t k = (size_t)snprintf(line, sizeof line, "{\"event\":\"start\","
                              "\"rank\":%d,\"size\":%d,\"pid\":%ld,"
                              "\"host\":\"", rank, size, (long)getpid());
  append_escaped(line, &k, sizeof line - 40, host);
  if (timeout_s > 0)
    k += (size_t)snprintf(line + k, sizeof line - k, "\",\"timeout_s\":%g}\n",
                          timeout_s);
  else
    k += (size_t)snprintf(line + k, sizeof line - k, "\"}\n");
  live_write(l, line, k);
  if (l->write_failed) {
    int err = errno;
    close(l->fd);
    free(l);
    return vqc_error(VQC_EIO, "cannot write %s: %s", path, strerror(err));
  }
  if (atomic_load(&live_signals_wanted)) atomic_store(&live_signal_fd, l->fd);
  *out = l;
  return VQC_OK;
}

void vqc_live_record(vqc_live *l, const vqc_ledger_record *r) {
  if (!l || !r) return;
  vqc_ledger_line ll; /* ledger_record.h */
  vqc_ledger_line_of(r, &ll);
  char line[2048];
  const size_t k = vqc_ledger_line_format(&ll, 0, line, sizeof line);
  if (k < sizeof line) {
    live_write(l, line, k);
    return;
  }
  char *big = malloc(k + 1); /* a site name of kilobytes */
  if (!big) {
    l->write_failed = true; /* the record is no longer complete */
    return;
  }
  vqc_ledger_line_format(&ll, 0, big, k + 1);
  live_write(l, big, k);
  free(big);
}

void vqc_live_step(vqc_live *l, int64_t step) {
  char line[96];
  int k = snprintf(line, sizeof line, "{\"event\":\"step\",\"step\":%" PRId64
                   "}\n", step);
  live_write(l, line, (size_t)k);
}

void vqc_live_finished(vqc_live *l, vqc_status status, int64_t step) {
  char line[160];
  int k = snprintf(line, sizeof line, "{\"event\":\"finished\",\"status\":"
                   "\"%s\",\"step\":%" PRId64 "}\n", vqc_status_name(status),
                   step);
  live_write(l, line, (size_t)k);
}

/* The finding line for the live record (malloc'd, ending in a newline), or
 * NULL. bare: without its detail and message, and with its tensor and site
 * made ASCII, for a finding whose full line cannot be written (a string
 * that is not UTF-8, which jansson refuses, or a line over the readers'
 * VQC_TRACE_LINE_MAX). */
static char *finding_line(const vqc_finding *x, bool bare) {
  /* On the heap: a finding is ~5 KiB and this runs on rank threads, whose
   * stacks are small (comm_threads.c). */
  vqc_finding *b = NULL;
  if (bare) {
    b = malloc(sizeof *b);
    if (!b) return NULL;
    *b = *x;
    b->detail = NULL;
    snprintf(b->message, sizeof b->message, "(the full finding could not be "
             "recorded: a string not UTF-8, or too long)");
    for (char *p = b->tensor; *p; p++)
      if ((unsigned char)*p >= 0x80) *p = '?';
    for (char *p = b->site; *p; p++)
      if ((unsigned char)*p >= 0x80) *p = '?';
    x = b;
  }
  json_t *f = vqc_finding_to_json(x);
  /* jansson leaves out a string member that is not UTF-8. */
  if (!json_object_get(f, "message") ||
      (x->tensor[0] && !json_object_get(f, "tensor")) ||
      (x->site[0] && !json_object_get(f, "site"))) {
    json_decref(f);
    free(b);
    return NULL;
  }
  json_t *line = json_pack("{s:s,s:o}", "event", "finding", "finding", f);
  char *text = line ? json_dumps(line, JSON_COMPACT | JSON_ENSURE_ASCII)
                    : NULL;
  json_decref(line);
  free(b);
  if (!text) return NULL;
  const size_t len = strlen(text);
  char *whole = len + 2 <= VQC_TRACE_LINE_MAX ? realloc(text, len + 2) : NULL;
  if (!whole) {
    free(text);
    return NULL;
  }
  whole[len] = '\n';
  whole[len + 1] = '\0';
  return whole;
}

void vqc_live_finding(vqc_live *l, const vqc_finding *x) {
  if (!l || !x) return;
  char *line = finding_line(x, false);
  if (!line) line = finding_line(x, true);
  if (!line) {
    l->write_failed = true; /* the record is no longer complete */
    return;
  }
  live_write(l, line, strlen(line));
  free(line);
}

void vqc_live_close(vqc_live *l) {
  if (!l) return;
  /* The signal handler's descriptor stays open to the end of the process
   * (see live_signal_fd). */
  if (l->fd >= 0 && l->fd != atomic_load(&live_signal_fd)) close(l->fd);
  free(l);
}

void vqc_live_note_signal(int sig) {
  int fd = atomic_load(&live_signal_fd);
  if (fd < 0) return;
  /* No stdio in a handler (live_signal_line.h). t_ns is on the clock of
   * the records' t_enter_ns (vqc_now_ns; clock_gettime is async-signal-
   * safe): how long the rank had waited in its last collective when the
   * signal came. */
  char line[VQC_LIVE_SIGNAL_LINE_MAX];
  const size_t k = vqc_live_signal_line(line, sig, vqc_now_ns(), 0);
  ssize_t w = write(fd, line, k);
  (void)w;
}

vqc_status vqc_live_mark(const char *run_dir, int rank, const char *event,
                         const char *by, const char *why) {
  char path[4200], line[1024];
  VQC_TRY(vqc_live_path(run_dir, rank, path, sizeof path));
  size_t k = (size_t)snprintf(line, sizeof line, "{\"event\":\"");
  append_escaped(line, &k, 64, event);
  k += (size_t)snprintf(line + k, sizeof line - k, "\",\"by\":\"");
  append_escaped(line, &k, 200, by);
  k += (size_t)snprintf(line + k, sizeof line - k, "\",\"why\":\"");
  append_escaped(line, &k, sizeof line - 8, why);
  k += (size_t)snprintf(line + k, sizeof line - k, "\"}\n");
  int fd = -1;
  VQC_TRY(vqc_open_write(path, false, true, &fd)); /* no link followed */
  ssize_t w = write(fd, line, k);
  int err = errno;
  close(fd);
  if (w != (ssize_t)k)
    return vqc_error(VQC_EIO, "cannot write %s: %s", path, strerror(err));
  return VQC_OK;
}

/* The signals a rank's process is seen killed by, with their names: the
 * name is what a person searches for ("SIGABRT gloo"), strsignal's text
 * what they read. */
static const struct {
  int sig;
  const char *name;
} signal_names[] = {
    {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"},
    {SIGILL, "SIGILL"},   {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"},
    {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"},
    {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
    {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},
    {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"},
};

void vqc_signal_text(int sig, char *buf, size_t n) {
  const char *name = NULL;
  for (size_t i = 0; i < sizeof signal_names / sizeof signal_names[0]; i++)
    if (signal_names[i].sig == sig) name = signal_names[i].name;
  if (name)
    snprintf(buf, n, "signal %d (%s, %s)", sig, name, strsignal(sig));
  else
    snprintf(buf, n, "signal %d (%s)", sig, strsignal(sig));
}

vqc_status vqc_live_mark_end(const char *run_dir, int rank, const char *by,
                             int signal, int exit_code,
                             const char *last_words) {
  char path[4200], why[128], sig[96];
  VQC_TRY(vqc_live_path(run_dir, rank, path, sizeof path));
  if (signal > 0) {
    vqc_signal_text(signal, sig, sizeof sig);
    snprintf(why, sizeof why, "killed by %s", sig);
  } else {
    snprintf(why, sizeof why, "exited with status %d", exit_code);
  }
  json_t *j = json_object();
  json_object_set_new(j, "event", json_string("lost"));
  json_object_set_new(j, "by", json_string(by ? by : ""));
  json_object_set_new(j, "why", json_string(why));
  json_object_set_new(j, signal > 0 ? "signal" : "exit_code",
                      json_integer(signal > 0 ? signal : exit_code));
  if (last_words && last_words[0]) {
    /* Its end, from a character's start (the cut may fall inside one). */
    size_t len = strlen(last_words), from = 0;
    if (len > VQC_LIVE_LAST_WORDS - 1) from = len - (VQC_LIVE_LAST_WORDS - 1);
    while (from < len && ((unsigned char)last_words[from] & 0xC0) == 0x80)
      from++;
    /* Bytes that are not UTF-8 become '?' (utf8.h): the words stay. */
    json_object_set_new(j, "last_words",
                        vqc_json_text_opts(last_words + from, len - from,
                                           VQC_UTF8_TAIL |
                                               VQC_UTF8_NO_CONTROLS,
                                           NULL));
  }
  char *text = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII);
  json_decref(j);
  if (!text) return vqc_error(VQC_ENOMEM, "no memory for a live record line");
  /* One write(2) of the whole line (O_APPEND): never interleaved. */
  const size_t k = strlen(text);
  char *line = realloc(text, k + 2);
  if (!line) {
    free(text);
    return vqc_error(VQC_ENOMEM, "no memory for a live record line");
  }
  line[k] = '\n';
  line[k + 1] = '\0';
  int fd = -1;
  vqc_status s = vqc_open_write(path, false, true, &fd); /* no link */
  if (s != VQC_OK) {
    free(line);
    return s;
  }
  ssize_t w = write(fd, line, k + 1);
  int err = errno;
  close(fd);
  free(line);
  if (w != (ssize_t)(k + 1))
    return vqc_error(VQC_EIO, "cannot write %s: %s", path, strerror(err));
  return VQC_OK;
}

/* Drops an incomplete character at the end of s (a copy cut to its
 * buffer), so that the text stays UTF-8 for the findings it goes into. */
void utf8_cut(char *s) {
  size_t k = strlen(s), lead = k;
  while (lead > 0 && ((unsigned char)s[lead - 1] & 0xC0) == 0x80) lead--;
  if (lead == 0 || (unsigned char)s[lead - 1] < 0xC0) return;
  const unsigned char c = (unsigned char)s[lead - 1];
  const size_t want = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
  if (k - (lead - 1) < want) s[lead - 1] = '\0';
}

/* A "p2p_wait" line's peer or tag: a rank or tag >= 0, "any"
 * (VQC_P2P_ANY), else VQC_P2P_NONE (absent, null, out of range). */
static int live_peer(const json_t *v) {
  if (json_is_string(v) && strcmp(json_string_value(v), "any") == 0)
    return VQC_P2P_ANY;
  if (json_is_integer(v) && json_integer_value(v) >= 0 &&
      json_integer_value(v) <= INT32_MAX)
    return (int)json_integer_value(v);
  return VQC_P2P_NONE;
}

/* A point-to-point call of a "p2p_wait" line (a wait's request, another
 * thread's call) into *o. */
static void live_p2p_call(const json_t *q, struct vqc_live_p2p_req *o) {
  const json_t *v;
  memset(o, 0, sizeof *o);
  if (json_is_string(v = json_object_get(q, "call")))
    snprintf(o->call, sizeof o->call, "%s", json_string_value(v));
  if (json_is_string(v = json_object_get(q, "communicator")))
    snprintf(o->comm, sizeof o->comm, "%s", json_string_value(v));
  if (json_is_string(v = json_object_get(q, "file")))
    snprintf(o->file, sizeof o->file, "%s", json_string_value(v));
  if (json_is_integer(v = json_object_get(q, "line")) &&
      json_integer_value(v) >= 0 && json_integer_value(v) <= INT32_MAX)
    o->line = (int)json_integer_value(v);
  o->to = live_peer(json_object_get(q, "to"));
  o->send_tag = live_peer(json_object_get(q, "send_tag"));
  o->from = live_peer(json_object_get(q, "from"));
  o->recv_tag = live_peer(json_object_get(q, "recv_tag"));
}

/* Applies event line j (it has "event") to *info. */
void live_event(const json_t *j, vqc_live_info *info) {
  const char *ev = json_string_value(json_object_get(j, "event"));
  const json_t *v;
  if (!ev) return;
  if (strcmp(ev, "start") == 0) {
    info->started = true;
    if (json_is_integer(v = json_object_get(j, "size")))
      info->size = (int)json_integer_value(v);
    if (json_is_integer(v = json_object_get(j, "pid")))
      info->pid = (long)json_integer_value(v);
    if (json_is_string(v = json_object_get(j, "host")))
      snprintf(info->host, sizeof info->host, "%s", json_string_value(v));
    info->mpi = json_is_true(json_object_get(j, "mpi"));
    info->sync_sends = json_is_true(json_object_get(j, "sync_sends"));
    if (json_is_number(v = json_object_get(j, "timeout_s")) &&
        json_number_value(v) > 0)
      info->timeout_s = json_number_value(v);
  } else if (strcmp(ev, "step") == 0) {
    if (json_is_integer(v = json_object_get(j, "step")))
      info->steps_done = (int64_t)json_integer_value(v) + 1;
  } else if (strcmp(ev, "finished") == 0) {
    info->finished = true;
    if (json_is_string(v = json_object_get(j, "status")))
      snprintf(info->status, sizeof info->status, "%s",
               json_string_value(v));
    if (json_is_string(v = json_object_get(j, "unchecked"))) {
      snprintf(info->unchecked, sizeof info->unchecked, "%s",
               json_string_value(v));
      utf8_cut(info->unchecked);
      v = json_object_get(j, "unchecked_status");
      snprintf(info->unchecked_status, sizeof info->unchecked_status, "%s",
               json_is_string(v) ? json_string_value(v) : "VQC_EIO");
    }
  } else if (strcmp(ev, "signal") == 0) {
    if (json_is_integer(v = json_object_get(j, "signal")))
      info->signal = (int)json_integer_value(v);
    if (info->signal <= 0) info->signal = -1;
    if (json_is_integer(v = json_object_get(j, "t_ns")) &&
        json_integer_value(v) > 0)
      info->signal_t_ns = (uint64_t)json_integer_value(v);
    if (json_is_integer(v = json_object_get(j, "from_pid")) &&
        json_integer_value(v) > 0 && json_integer_value(v) <= INT32_MAX)
      info->signal_from_pid = (long)json_integer_value(v);
  } else if (strcmp(ev, "p2p_wait") == 0) {
    /* The latest says where the rank was when last asked. */
    info->p2p_call[0] = info->p2p_comm[0] = '\0';
    info->p2p_to = info->p2p_send_tag = VQC_P2P_NONE;
    info->p2p_from = info->p2p_recv_tag = VQC_P2P_NONE;
    if (json_is_string(v = json_object_get(j, "call")))
      snprintf(info->p2p_call, sizeof info->p2p_call, "%s",
               json_string_value(v));
    if (json_is_string(v = json_object_get(j, "communicator")))
      snprintf(info->p2p_comm, sizeof info->p2p_comm, "%s",
               json_string_value(v));
    info->p2p_to = live_peer(json_object_get(j, "to"));
    info->p2p_send_tag = live_peer(json_object_get(j, "send_tag"));
    info->p2p_from = live_peer(json_object_get(j, "from"));
    info->p2p_recv_tag = live_peer(json_object_get(j, "recv_tag"));
    info->p2p_nreq = info->p2p_nkept = 0;
    if (json_is_integer(v = json_object_get(j, "nrequests")) &&
        json_integer_value(v) > 0 && json_integer_value(v) <= INT32_MAX)
      info->p2p_nreq = (int)json_integer_value(v);
    const json_t *reqs = json_object_get(j, "requests");
    for (size_t i = 0; i < json_array_size(reqs) && i < VQC_P2P_REQS; i++)
      live_p2p_call(json_array_get(reqs, i), &info->p2p_req[i]);
    info->p2p_nkept = json_array_size(reqs) < VQC_P2P_REQS
                          ? (int)json_array_size(reqs) : VQC_P2P_REQS;
    if (info->p2p_nreq < info->p2p_nkept) info->p2p_nreq = info->p2p_nkept;
    /* MPI_THREAD_MULTIPLE: the call's own site, and the other threads' */
    info->p2p_file[0] = '\0';
    info->p2p_line = 0;
    if (json_is_string(v = json_object_get(j, "file")))
      snprintf(info->p2p_file, sizeof info->p2p_file, "%s",
               json_string_value(v));
    if (json_is_integer(v = json_object_get(j, "line")) &&
        json_integer_value(v) >= 0 && json_integer_value(v) <= INT32_MAX)
      info->p2p_line = (int)json_integer_value(v);
    info->p2p_threads = info->p2p_nother = 0;
    if (json_is_integer(v = json_object_get(j, "threads")) &&
        json_integer_value(v) > 0 && json_integer_value(v) <= INT32_MAX)
      info->p2p_threads = (int)json_integer_value(v);
    const json_t *others = json_object_get(j, "other_threads");
    for (size_t i = 0; i < json_array_size(others) && i < VQC_P2P_REQS; i++)
      live_p2p_call(json_array_get(others, i),
                    &info->p2p_other[info->p2p_nother++]);
    if (info->p2p_threads < 1 + info->p2p_nother && info->p2p_call[0])
      info->p2p_threads = info->p2p_threads ? 1 + info->p2p_nother : 0;
  } else if (strcmp(ev, "lost") == 0 || strcmp(ev, "killed") == 0) {
    bool lost = ev[0] == 'l';
    if (lost) info->lost = true;
    else info->killed = true;
    if ((lost || !info->why[0]) &&
        json_is_string(v = json_object_get(j, "why")))
      snprintf(info->why, sizeof info->why, "%s", json_string_value(v));
    /* How the process ended, as its supervisor saw it (vqc_live_mark_end). */
    if (lost && json_is_integer(v = json_object_get(j, "signal")) &&
        json_integer_value(v) > 0 && json_integer_value(v) < 256)
      info->end_signal = (int)json_integer_value(v);
    if (lost && json_is_string(v = json_object_get(j, "last_words"))) {
      snprintf(info->last_words, sizeof info->last_words, "%s",
               json_string_value(v));
      utf8_cut(info->last_words);
    }
  }
}

vqc_status vqc_live_scan(const char *run_dir, int rank, vqc_live_info *out) {
  if (!out) return vqc_error(VQC_EINVAL, "vqc_live_scan: out is NULL");
  memset(out, 0, sizeof *out);
  char path[4200];
  VQC_TRY(vqc_live_path(run_dir, rank, path, sizeof path));
  return read_live(path, rank, NULL, NULL, NULL, out);
}
