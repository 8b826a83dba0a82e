/* job.c: the "Job" section of report.md and report.html, for a run
 * directory `vqcheck watch` wrote (run.json's "job" section,
 * harness/cli/cmd_watch.c): the command, each process's exit status, and the
 * stderr tails of those that failed. Nothing for other run directories.
 * Read leniently: a member of the wrong type is left out, never an error
 * (the section is informative; findings carry the verdict). */
#include <string.h>

#include "report_internal.h"
#include "utf8.h"

/* "exit 0", "exit 3", "signal 9", "(running)" for a process object. */
static void status_text(const json_t *p, char *buf, size_t n) {
  const json_t *code = json_object_get(p, "exit_code");
  const json_t *sig = json_object_get(p, "signal");
  if (json_is_integer(code))
    snprintf(buf, n, "exit %lld", (long long)json_integer_value(code));
  else if (json_is_integer(sig))
    snprintf(buf, n, "signal %lld", (long long)json_integer_value(sig));
  else
    snprintf(buf, n, "(unknown)");
}

/* Whether the process ended other than with exit 0. */
static bool proc_failed(const json_t *p) {
  const json_t *code = json_object_get(p, "exit_code");
  return !(json_is_integer(code) && json_integer_value(code) == 0);
}

/* "rank 1" or "launcher" into buf. */
static void who_text(const json_t *p, char *buf, size_t n) {
  const json_t *rank = json_object_get(p, "rank");
  if (json_is_integer(rank))
    snprintf(buf, n, "rank %lld", (long long)json_integer_value(rank));
  else
    snprintf(buf, n, "launcher");
}

/* What a row and a stderr block show of one process object. */
typedef struct {
  char who[48];     /* "rank 1" | "launcher" */
  char status[48];  /* "exit 3" | "signal 9" | "(unknown)" */
  long long pid;    /* -1 when not recorded */
  const char *stopped; /* "yes" | "no" (stopped by vqcheck) */
  const char *tail; /* its stderr tail when it failed and has one; else NULL */
} proc_view;

static proc_view view_of(const json_t *p) {
  proc_view v;
  who_text(p, v.who, sizeof v.who);
  status_text(p, v.status, sizeof v.status);
  const json_t *pid = json_object_get(p, "pid");
  v.pid = json_is_integer(pid) ? (long long)json_integer_value(pid) : -1LL;
  v.stopped = json_is_true(json_object_get(p, "stopped_by_vqcheck")) ? "yes"
                                                                     : "no";
  v.tail = json_string_value(json_object_get(p, "stderr_tail"));
  if (!proc_failed(p) || !v.tail || !v.tail[0]) v.tail = NULL;
  return v;
}

/* The command line as one string (arguments joined by spaces; a caller
 * escapes it). */
static void command_text(const json_t *job, char *buf, size_t n) {
  size_t k = 0;
  buf[0] = '\0';
  size_t i;
  const json_t *a;
  json_array_foreach(json_object_get(job, "command"), i, a) {
    const char *s = json_string_value(a);
    if (!s) continue;
    int w = snprintf(buf + k, n - k, "%s%s", k ? " " : "", s);
    if (w < 0 || k + (size_t)w >= n) break;
    k += (size_t)w;
  }
  (void)vqc_utf8_clean(buf, 0); /* a cut may fall inside a character */
}

/* (report_internal.h) */
bool rep_watched_job(const rep_run *r) {
  return json_is_object(json_object_get(r->root, "job"));
}

/* (report_internal.h) */
bool rep_no_training(const rep_run *r) {
  return rep_watched_job(r) || r->traces.is_traces;
}

/* (report_internal.h) */
bool rep_job_facts_text(const rep_run *r, char *buf, size_t n) {
  if (!rep_watched_job(r)) return false;
  const json_t *job = json_object_get(r->root, "job");
  const bool mpi = json_is_string(json_object_get(job, "mpi_preload"));
  int k = snprintf(buf, n, "%s under vqcheck watch (the command is under "
                   "Job): %d rank%s",
                   mpi ? "an MPI program, checked through the PMPI "
                         "interposer in each rank,"
                       : "a job, checked by the Python bridge in each "
                         "process,",
                   r->ranks, r->ranks == 1 ? "" : "s");
  if (k < 0 || (size_t)k >= n) return true;
  if (r->duration_s > 0)
    k += snprintf(buf + k, n - (size_t)k, ", ran %.2f s", r->duration_s);
  if (k < 0 || (size_t)k >= n) return true;
  if (mpi)
    k += snprintf(buf + k, n - (size_t)k, "; an MPI program has no training "
                  "steps: its collectives and blocking waits are checked");
  else
    k += snprintf(buf + k, n - (size_t)k, "; %lld step%s done",
                  r->steps_done, r->steps_done == 1 ? "" : "s");
  if (k < 0 || (size_t)k >= n) return true;
  if (strcmp(r->training_status, "VQC_OK") != 0 && r->training_message[0])
    snprintf(buf + k, n - (size_t)k, "; %s", r->training_message);
  (void)vqc_utf8_clean(buf, 0); /* a cut may fall inside a character */
  return true;
}

void rep_render_md_job(FILE *f, const rep_run *r) {
  const json_t *job = json_object_get(r->root, "job");
  if (!json_is_object(job)) return;
  char cmd[2048];
  command_text(job, cmd, sizeof cmd);
  fprintf(f, "## Job\n\n- command: ");
  rep_md_code(f, cmd, false);
  const json_t *nproc = json_object_get(job, "nproc");
  if (json_is_integer(nproc))
    fprintf(f, "\n- processes started by vqcheck watch: %lld",
            (long long)json_integer_value(nproc));
  else
    fprintf(f, "\n- started once (a launcher)");
  const char *stopped = json_string_value(json_object_get(job, "stopped"));
  if (stopped) {
    fprintf(f, "\n- stopped: ");
    rep_md(f, stopped);
  }
  fprintf(f, "\n\n| process | pid | ended | stopped by vqcheck |\n"
          "|---|---|---|---|\n");
  const json_t *procs = json_object_get(job, "processes");
  size_t i;
  const json_t *p;
  json_array_foreach(procs, i, p) {
    proc_view v = view_of(p);
    fprintf(f, "| %s | %lld | %s | %s |\n", v.who, v.pid, v.status,
            v.stopped);
  }
  fprintf(f, "\n");
  json_array_foreach(procs, i, p) {
    proc_view v = view_of(p);
    if (!v.tail) continue;
    fprintf(f, "### stderr of %s (%s), last lines\n\n", v.who, v.status);
    int n = rep_md_backtick_run(v.tail) + 1;
    if (n < 3) n = 3;
    for (int k = 0; k < n; k++) fputc('`', f);
    fprintf(f, "text\n%s%s", v.tail,
            v.tail[strlen(v.tail) - 1] == '\n' ? "" : "\n");
    for (int k = 0; k < n; k++) fputc('`', f);
    fprintf(f, "\n\n");
  }
}

void rep_render_html_job(FILE *f, const rep_run *r) {
  const json_t *job = json_object_get(r->root, "job");
  if (!json_is_object(job)) return;
  char cmd[2048];
  command_text(job, cmd, sizeof cmd);
  fprintf(f, "<section id=\"job\"><h2>Job</h2>\n<table class=\"kv\">\n"
          "<tr><th>command</th><td><code>");
  rep_html(f, cmd);
  fprintf(f, "</code></td></tr>\n");
  const json_t *nproc = json_object_get(job, "nproc");
  if (json_is_integer(nproc))
    fprintf(f, "<tr><th>processes</th><td>%lld, started by vqcheck watch"
            "</td></tr>\n", (long long)json_integer_value(nproc));
  else
    fprintf(f, "<tr><th>processes</th><td>started once (a launcher)"
            "</td></tr>\n");
  const char *stopped = json_string_value(json_object_get(job, "stopped"));
  if (stopped) {
    fprintf(f, "<tr><th>stopped</th><td>");
    rep_html(f, stopped);
    fprintf(f, "</td></tr>\n");
  }
  fprintf(f, "</table>\n<table><thead><tr><th>process</th><th>pid</th>"
          "<th>ended</th><th>stopped by vqcheck</th></tr></thead><tbody>\n");
  const json_t *procs = json_object_get(job, "processes");
  size_t i;
  const json_t *p;
  json_array_foreach(procs, i, p) {
    proc_view v = view_of(p);
    fprintf(f, "<tr><td>%s</td><td>%lld</td><td>%s</td><td>%s</td></tr>\n",
            v.who, v.pid, v.status, v.stopped);
  }
  fprintf(f, "</tbody></table>\n");
  json_array_foreach(procs, i, p) {
    proc_view v = view_of(p);
    if (!v.tail) continue;
    fprintf(f, "<h3>stderr of %s (%s), last lines</h3>\n<pre>", v.who,
            v.status);
    rep_html(f, v.tail);
    fprintf(f, "</pre>\n");
  }
  fprintf(f, "</section>\n");
}
