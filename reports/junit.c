/* junit.c: junit.xml, for CI systems (GitLab, Jenkins, GitHub test
 * reporters) that read the common JUnit shape:
 *
 *   <testsuites name tests failures errors time>
 *     <testsuite name tests failures errors skipped time [timestamp]
 *                [hostname]>
 *       <properties><property name value/>...</properties>
 *       <testcase name classname time>
 *         [<failure message type>text</failure> | <error .../> |
 *          <skipped message/>]
 *         [<system-out>text</system-out>]
 *       </testcase>...
 *
 * A run is one suite with one testcase per check (every finding kind of
 * checkers/findings.h, whether or not it fired, so a CI page shows what was
 * checked) plus "training", which errors when training stopped and no
 * finding explains it (exit code 3). A check fails when run.json holds a
 * finding of its kind (the message is the first finding's, the text lists
 * all of them), passes only when run.json records that it ran, and is
 * otherwise <skipped/> with the reason (rep_check in run_data.c): a check
 * that did not run is never a pass. What the check could not compare
 * (tensors without a replica, tensors not digested: not_compared.c) is a
 * property each ("not_compared.no_replica", "not_compared.not_digested"),
 * never a testcase. A suite of scenarios is one testcase
 * per scenario. Text and attributes are XML-escaped (rep_xml). */
#include <string.h>

#include "report_internal.h"
#include "utf8.h"

static void xml_attr(FILE *f, const char *name, const char *value) {
  fprintf(f, " %s=\"", name);
  rep_xml(f, value);
  fputc('"', f);
}

static void property(FILE *f, const char *name, const char *value) {
  fprintf(f, "      <property");
  xml_attr(f, "name", name);
  xml_attr(f, "value", value);
  fprintf(f, "/>\n");
}

/* A comparison of traces has no fault and no training: its properties say
 * what was compared (trace_run.c), each only when run.json records it. */
static void trace_properties(FILE *f, const rep_traces *t) {
  char text[160];
  if (t->program) property(f, "program", t->program);
  property(f, "trace_dir", t->trace_dir);
  if (t->steps_compared >= 0) {
    rep_traces_steps_text(t, text, sizeof text);
    property(f, "steps_compared", text);
  }
  if (t->tensors_max >= 0) {
    rep_traces_tensors_text(t, text, sizeof text);
    property(f, "tensors_per_step", text);
  }
}

vqc_status rep_render_junit(const rep_run *r, FILE *f) {
  /* Which kinds fired, and which checks did not run. */
  int failures = 0, skipped = 0;
  int first_of[VQC_FINDING_KIND_COUNT];
  const char *skip_why[VQC_FINDING_KIND_COUNT];
  for (int k = 0; k < VQC_FINDING_KIND_COUNT; k++) {
    first_of[k] = -1;
    for (int i = 0; i < r->nfindings && first_of[k] < 0; i++)
      if (strcmp(r->findings[i].kind,
                 vqc_finding_kind_name((vqc_finding_kind)k)) == 0)
        first_of[k] = i;
    if (first_of[k] >= 0) failures++;
    skip_why[k] = NULL;
    const char *why = "";
    if (rep_check(r, (vqc_finding_kind)k, &why) == REP_CHECK_NOT_RUN) {
      skip_why[k] = why;
      skipped++;
    }
  }
  const bool error = r->exit_code == 3 && r->nfindings == 0;
  const int tests = VQC_FINDING_KIND_COUNT + 1;
  char suite[300];
  snprintf(suite, sizeof suite, "vqcheck.%s", r->name);
  (void)vqc_utf8_clean(suite, 0); /* a cut may fall inside a character */

  fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites");
  xml_attr(f, "name", "vqcheck");
  fprintf(f, " tests=\"%d\" failures=\"%d\" errors=\"%d\" time=\"%.3f\">\n",
          tests, failures, error ? 1 : 0, r->duration_s);
  fprintf(f, "  <testsuite");
  xml_attr(f, "name", suite);
  fprintf(f, " tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\" "
          "time=\"%.3f\"", tests, failures, error ? 1 : 0, skipped,
          r->duration_s);
  /* JUnit timestamps carry no zone: the runner's is UTC ("...Z"). */
  char stamp[64];
  snprintf(stamp, sizeof stamp, "%s", rep_str(r->root, "finished", ""));
  size_t n = strlen(stamp);
  if (n > 0 && stamp[n - 1] == 'Z') stamp[n - 1] = '\0';
  if (stamp[0]) xml_attr(f, "timestamp", stamp);
  const char *host = rep_str(r->root, "environment.hostname", "");
  if (host[0]) xml_attr(f, "hostname", host);
  fprintf(f, ">\n    <properties>\n");
  char num[32];
  property(f, "scenario", r->name);
  if (r->traces.is_traces) {
    trace_properties(f, &r->traces);
  } else {
    property(f, "fault", rep_str(r->root, "scenario.fault", "none"));
  }
  property(f, "backend", r->backend);
  snprintf(num, sizeof num, "%d", r->ranks);
  property(f, "ranks", num);
  if (!r->traces.is_traces) {
    snprintf(num, sizeof num, "%lld", r->steps_done);
    property(f, "steps_done", num);
  }
  snprintf(num, sizeof num, "%d", r->exit_code);
  property(f, "exit_code", num);
  property(f, "version", rep_str(r->root, "build.version", "?"));
  /* What could not be checked (not_compared.c): properties, never a
   * testcase, so it fails nothing. */
  json_t *not_compared = rep_not_compared_lines(r);
  size_t li;
  const json_t *line;
  json_array_foreach(not_compared, li, line) {
    const char *text = json_string_value(line);
    property(f, strncmp(text, "no replica", 10) == 0
                    ? "not_compared.no_replica" : "not_compared.not_digested",
             text);
  }
  json_decref(not_compared);
  fprintf(f, "    </properties>\n");

  for (int k = 0; k < VQC_FINDING_KIND_COUNT; k++) {
    const char *kind = vqc_finding_kind_name((vqc_finding_kind)k);
    fprintf(f, "    <testcase");
    xml_attr(f, "name", kind);
    xml_attr(f, "classname", suite);
    fprintf(f, " time=\"0\"");
    if (first_of[k] < 0 && skip_why[k]) {
      fprintf(f, ">\n      <skipped");
      xml_attr(f, "message", skip_why[k]);
      fprintf(f, "/>\n    </testcase>\n");
      continue;
    }
    if (first_of[k] < 0) {
      fprintf(f, "/>\n");
      continue;
    }
    fprintf(f, ">\n      <failure");
    xml_attr(f, "message", r->findings[first_of[k]].message);
    xml_attr(f, "type", kind);
    fprintf(f, ">");
    for (int i = first_of[k]; i < r->nfindings; i++) {
      const rep_finding *x = &r->findings[i];
      if (strcmp(x->kind, kind) != 0) continue;
      char ranks[512];
      rep_ranks_text(x->ranks, ranks, sizeof ranks);
      fprintf(f, "step %lld, ranks [%s]", x->step, ranks);
      if (x->tensor[0]) {
        fprintf(f, ", tensor ");
        rep_xml(f, x->tensor);
      }
      if (x->site[0]) {
        fprintf(f, ", at ");
        rep_xml(f, x->site);
      }
      fprintf(f, ": ");
      rep_xml(f, x->message);
      fprintf(f, "\n");
    }
    fprintf(f, "</failure>\n    </testcase>\n");
  }
  fprintf(f, "    <testcase");
  xml_attr(f, "name", "training");
  xml_attr(f, "classname", suite);
  fprintf(f, " time=\"%.3f\"", r->duration_s);
  if (!error) {
    fprintf(f, "/>\n");
  } else {
    char msg[1200];
    if (rep_no_training(r)) /* no training vqcheck ran: no verdict */
      snprintf(msg, sizeof msg, "no verdict (%s): %s", r->training_status,
               r->training_message);
    else
      snprintf(msg, sizeof msg, "training stopped (%s) and no finding "
               "explains it: %s", r->training_status, r->training_message);
    (void)vqc_utf8_clean(msg, 0);
    fprintf(f, ">\n      <error");
    xml_attr(f, "message", msg);
    xml_attr(f, "type", r->training_status);
    fprintf(f, "/>\n    </testcase>\n");
  }
  fprintf(f, "  </testsuite>\n</testsuites>\n");
  return ferror(f) ? vqc_error(VQC_EIO, "cannot render junit.xml") : VQC_OK;
}

vqc_status rep_render_junit_suite(const char *suite_name,
                                  const vqc_suite_case *cases, int ncases,
                                  FILE *f) {
  int failures = 0, errors = 0;
  double seconds = 0;
  for (int i = 0; i < ncases; i++) {
    if (cases[i].passed) continue;
    if (cases[i].error) errors++;
    else failures++;
  }
  for (int i = 0; i < ncases; i++) seconds += cases[i].seconds;
  char suite[300];
  snprintf(suite, sizeof suite, "vqcheck.%s", suite_name);
  (void)vqc_utf8_clean(suite, 0);
  fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites");
  xml_attr(f, "name", "vqcheck");
  fprintf(f, " tests=\"%d\" failures=\"%d\" errors=\"%d\" time=\"%.3f\">\n",
          ncases, failures, errors, seconds);
  fprintf(f, "  <testsuite");
  xml_attr(f, "name", suite);
  fprintf(f, " tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"0\" "
          "time=\"%.3f\">\n", ncases, failures, errors, seconds);
  for (int i = 0; i < ncases; i++) {
    const vqc_suite_case *c = &cases[i];
    fprintf(f, "    <testcase");
    xml_attr(f, "name", c->name);
    xml_attr(f, "classname", suite);
    fprintf(f, " time=\"%.3f\">\n", c->seconds);
    if (!c->passed) {
      fprintf(f, "      <%s", c->error ? "error" : "failure");
      xml_attr(f, "message", c->message[0] ? c->message
                                            : "the expectation did not hold");
      xml_attr(f, "type", c->error ? "run" : "expectation");
      fprintf(f, ">");
      if (c->fault[0]) {
        fprintf(f, "fault: ");
        rep_xml(f, c->fault);
        fprintf(f, "\n");
      }
      if (c->expected[0]) {
        fprintf(f, "expected: ");
        rep_xml(f, c->expected);
        fprintf(f, "\n");
      }
      if (c->found[0]) {
        fprintf(f, "found: ");
        rep_xml(f, c->found);
        fprintf(f, "\n");
      }
      fprintf(f, "</%s>\n", c->error ? "error" : "failure");
    }
    if (c->run_dir[0]) {
      fprintf(f, "      <system-out>run directory: ");
      rep_xml(f, c->run_dir);
      fprintf(f, "</system-out>\n");
    }
    fprintf(f, "    </testcase>\n");
  }
  fprintf(f, "  </testsuite>\n</testsuites>\n");
  return ferror(f) ? vqc_error(VQC_EIO, "cannot render junit.xml") : VQC_OK;
}
