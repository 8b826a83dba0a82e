/* escape.c: how untrusted text (tensor names, call sites, messages: they
 * come from run.json and traces other programs may write) goes into HTML,
 * XML and Markdown so that it is always shown as text and never read as
 * markup. Every string a report prints goes through one of these. */
#include <string.h>

#include "report_internal.h"

/* Control characters are not allowed in XML 1.0 even as references, and are
 * parse errors in HTML: shown as U+FFFD (the replacement character). */
static bool is_bad_control(unsigned char c) {
  return (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f;
}

static void markup_escape(FILE *f, const char *s, const char *apos) {
  if (!s) return;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
      case '&': fputs("&amp;", f); break;
      case '<': fputs("&lt;", f); break;
      case '>': fputs("&gt;", f); break;
      case '"': fputs("&quot;", f); break;
      case '\'': fputs(apos, f); break;
      default:
        if (is_bad_control(*p)) fputs("\xef\xbf\xbd", f);
        else fputc(*p, f);
    }
  }
}

void rep_html(FILE *f, const char *s) { markup_escape(f, s, "&#39;"); }

void rep_xml(FILE *f, const char *s) { markup_escape(f, s, "&apos;"); }

static bool is_alnum(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
         (c >= 'A' && c <= 'Z');
}

/* Escapes only what can change how a line renders, so raw text stays
 * readable ("vq_mism", not "vq\_mism"): an underscore between two letters
 * or digits can neither open nor close emphasis (CommonMark), a `]` without
 * its `[` makes no link, and `#` only matters at the start of a line. */
void rep_md(FILE *f, const char *s) {
  if (!s) return;
  const unsigned char *start = (const unsigned char *)s;
  for (const unsigned char *p = start; *p; p++) {
    const bool intraword_underscore =
        *p == '_' && p > start && is_alnum(p[-1]) && is_alnum(p[1]);
    if (*p == '\n' || *p == '\r') {
      fputc(' ', f);
    } else if ((strchr("\\`*[<>|&", *p) ||
                (*p == '_' && !intraword_underscore) ||
                (*p == '#' && p == start))) {
      fputc('\\', f);
      fputc(*p, f);
    } else if (is_bad_control(*p)) {
      fputs("\xef\xbf\xbd", f);
    } else {
      fputc(*p, f);
    }
  }
}

int rep_md_backtick_run(const char *s) {
  int best = 0, run = 0;
  for (; s && *s; s++) {
    run = *s == '`' ? run + 1 : 0;
    if (run > best) best = run;
  }
  return best;
}

void rep_md_code(FILE *f, const char *s, bool in_table) {
  if (!s || !s[0]) return;
  const int fence = rep_md_backtick_run(s) + 1;
  /* A space pads a span that starts or ends with a backtick (CommonMark
   * strips one space on each side). */
  const size_t n = strlen(s);
  const bool pad = s[0] == '`' || s[n - 1] == '`';
  for (int i = 0; i < fence; i++) fputc('`', f);
  if (pad) fputc(' ', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '\n' || *p == '\r') fputc(' ', f);
    else if (*p == '|' && in_table) fputs("\\|", f);
    else if (is_bad_control(*p)) fputs("\xef\xbf\xbd", f);
    else fputc(*p, f);
  }
  if (pad) fputc(' ', f);
  for (int i = 0; i < fence; i++) fputc('`', f);
}
