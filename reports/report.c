/* report.c: the public entry points of report.h: load the run once, render
 * every requested format into memory, then write each file to a temporary
 * name and rename it into place. Rendering everything before writing
 * anything means a bad input leaves every previous report as it was; the
 * rename means a crash or a full disk mid-write never leaves half a file
 * under the real name. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"
#include "vqc/fsutil.h"

/* The formats vqc_reports_write can write, in the order it writes them. */
static const unsigned file_formats[] = {VQC_REPORT_MD, VQC_REPORT_HTML,
                                        VQC_REPORT_JUNIT};
enum { NFILE_FORMATS = 3 };

const char *vqc_report_file_name(unsigned format) {
  switch (format) {
    case VQC_REPORT_MD: return "report.md";
    case VQC_REPORT_HTML: return "report.html";
    case VQC_REPORT_JUNIT: return "junit.xml";
    case VQC_REPORT_JSON: return "run.json";
    default: return NULL;
  }
}

vqc_status vqc_report_format_from_name(const char *name, unsigned *out) {
  if (!name) return vqc_error(VQC_EINVAL, "no report format given");
  if (strcmp(name, "md") == 0 || strcmp(name, "markdown") == 0)
    *out = VQC_REPORT_MD;
  else if (strcmp(name, "html") == 0)
    *out = VQC_REPORT_HTML;
  else if (strcmp(name, "junit") == 0 || strcmp(name, "xml") == 0)
    *out = VQC_REPORT_JUNIT;
  else if (strcmp(name, "json") == 0)
    *out = VQC_REPORT_JSON;
  else
    return vqc_error(VQC_EINVAL, "unknown report format '%s' (expected html, "
                     "md, json or junit)", name);
  return VQC_OK;
}

/* Writes len bytes of data to dir/name, atomically (vqc/fsutil.h). */
static vqc_status write_atomic(const char *dir, const char *name,
                               const char *data, size_t len) {
  char path[4200];
  int n = snprintf(path, sizeof path, "%s/%s", dir, name);
  if (n < 0 || (size_t)n >= sizeof path)
    return vqc_error(VQC_EINVAL, "path too long: %s/%s", dir, name);
  return vqc_write_file_atomic(path, data, len);
}

/* Renders one format of d into a malloc'd buffer (*buf, *len). */
static vqc_status render_to_memory(const rep_data *d, unsigned format,
                                   char **buf, size_t *len) {
  *buf = NULL;
  *len = 0;
  FILE *f = open_memstream(buf, len);
  if (!f) return vqc_error(VQC_ENOMEM, "no memory to render a report");
  vqc_status s;
  switch (format) {
    case VQC_REPORT_MD: s = rep_render_md(d, f); break;
    case VQC_REPORT_HTML: s = rep_render_html(d, f); break;
    case VQC_REPORT_JUNIT: s = rep_render_junit(&d->run, f); break;
    default: s = rep_render_json(&d->run, f); break;
  }
  if (fclose(f) != 0 && s == VQC_OK)
    s = vqc_error(VQC_ENOMEM, "no memory to render a report");
  if (s != VQC_OK) {
    free(*buf);
    *buf = NULL;
  }
  return s;
}

vqc_status vqc_reports_write(const char *run_dir, unsigned formats) {
  if (!run_dir || formats == 0 || (formats & ~(unsigned)VQC_REPORT_ALL))
    return vqc_error(VQC_EINVAL, "vqc_reports_write: formats must be a "
                     "non-empty set of VQC_REPORT_MD, _HTML and _JUNIT");
  rep_data d;
  const bool traces = formats & (VQC_REPORT_MD | VQC_REPORT_HTML);
  vqc_status s = rep_data_load(run_dir, traces, &d);
  char *buf[NFILE_FORMATS] = {NULL};
  size_t len[NFILE_FORMATS] = {0};
  for (int i = 0; s == VQC_OK && i < NFILE_FORMATS; i++)
    if (formats & file_formats[i])
      s = render_to_memory(&d, file_formats[i], &buf[i], &len[i]);
  for (int i = 0; s == VQC_OK && i < NFILE_FORMATS; i++)
    if (formats & file_formats[i])
      s = write_atomic(run_dir, vqc_report_file_name(file_formats[i]), buf[i],
                       len[i]);
  for (int i = 0; i < NFILE_FORMATS; i++) free(buf[i]);
  rep_data_free(&d);
  return s;
}

vqc_status vqc_report_render(const char *run_dir, unsigned format, FILE *out) {
  if (!run_dir || !out || vqc_report_file_name(format) == NULL)
    return vqc_error(VQC_EINVAL, "vqc_report_render: exactly one format and "
                     "an output are needed");
  rep_data d;
  const bool traces = format & (VQC_REPORT_MD | VQC_REPORT_HTML);
  vqc_status s = rep_data_load(run_dir, traces, &d);
  char *buf = NULL;
  size_t len = 0;
  if (s == VQC_OK) s = render_to_memory(&d, format, &buf, &len);
  if (s == VQC_OK && (fwrite(buf, 1, len, out) != len || fflush(out) != 0))
    s = vqc_error(VQC_EIO, "cannot write the %s report: %s",
                  vqc_report_file_name(format), strerror(errno));
  free(buf);
  rep_data_free(&d);
  return s;
}

vqc_status vqc_report_run_exit_code(const char *run_dir, int *exit_code) {
  if (!exit_code) return vqc_error(VQC_EINVAL, "exit_code is NULL");
  rep_run r;
  vqc_status s = rep_run_load(run_dir, &r);
  if (s == VQC_OK) *exit_code = r.exit_code;
  rep_run_free(&r);
  return s;
}

vqc_status vqc_reports_write_suite(const char *out_dir, const char *suite_name,
                                   const vqc_suite_case *cases, int ncases) {
  if (!out_dir || ncases < 0 || (ncases > 0 && !cases))
    return vqc_error(VQC_EINVAL, "vqc_reports_write_suite: bad arguments");
  if (!suite_name || !suite_name[0]) suite_name = "suite";
  char *buf[2] = {NULL, NULL};
  size_t len[2] = {0, 0};
  vqc_status s = VQC_OK;
  for (int i = 0; i < 2 && s == VQC_OK; i++) {
    FILE *f = open_memstream(&buf[i], &len[i]);
    if (!f) {
      s = vqc_error(VQC_ENOMEM, "no memory to render the suite report");
      break;
    }
    s = i == 0 ? rep_render_junit_suite(suite_name, cases, ncases, f)
               : rep_render_md_suite(suite_name, cases, ncases, f);
    if (fclose(f) != 0 && s == VQC_OK)
      s = vqc_error(VQC_ENOMEM, "no memory to render the suite report");
  }
  if (s == VQC_OK) s = write_atomic(out_dir, "junit.xml", buf[0], len[0]);
  if (s == VQC_OK) s = write_atomic(out_dir, "report.md", buf[1], len[1]);
  free(buf[0]);
  free(buf[1]);
  return s;
}
