/* html.c: report.html, one self-contained page a person opens from a CI
 * artifact or a cluster's file system: no network (a Content-Security-Policy
 * forbids every fetch and every script), inline CSS, inline SVG (svg.c),
 * local fonts only. Everything is in the markup, so it reads the same with
 * scripts off, printed, or dumped by a headless browser.
 *
 * Sections, top to bottom: verdict banner, summary, findings table (with
 * call sites), digest-agreement heatmap, what was not compared
 * (not_compared.c, only when something was not), divergence over steps
 * (+ the findings' measured magnitudes), collective timeline (+ each rank's
 * record of the stuck collective), finding details, per-step summary,
 * environment and build. A comparison of traces (trace_run.c) shows what was compared
 * in the banner, the run table and the per-step table instead of a
 * scenario's fault, seed and training, and a note that the collective
 * checks did not run instead of an empty timeline. Every string that comes
 * from the run is escaped (rep_html). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"

static const char *const CSS =
    ":root{--ok:#2e7d32;--bad:#c62828;--warn:#ef6c00;--ink:#212121;"
    "--mute:#616161;--line:#e0e0e0}\n"
    "*{box-sizing:border-box}\n"
    "body{margin:0;font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,"
    "'DejaVu Sans',sans-serif;color:var(--ink);background:#fff}\n"
    "main{max-width:1240px;margin:0 auto;padding:0 24px 48px}\n"
    "header.verdict{padding:20px 24px;color:#fff}\n"
    "header.verdict .inner{max-width:1192px;margin:0 auto}\n"
    ".verdict-clean{background:var(--ok)}.verdict-findings{background:"
    "var(--bad)}.verdict-error{background:var(--warn)}\n"
    "header h1{margin:0;font-size:26px;letter-spacing:.02em}\n"
    "header p{margin:6px 0 0;font-size:15px;opacity:.95}\n"
    "nav{margin:14px 0 4px;font-size:13px}nav a{margin-right:14px;color:"
    "#1565c0}\n"
    "h2{margin:32px 0 8px;padding-bottom:4px;border-bottom:2px solid "
    "var(--line);font-size:19px}\n"
    "h3{margin:22px 0 6px;font-size:16px}\n"
    "p.explain{color:var(--mute);margin:4px 0 10px;max-width:900px}\n"
    "table{border-collapse:collapse;margin:6px 0 10px;font-size:13px}\n"
    "th,td{border:1px solid var(--line);padding:4px 8px;text-align:left;"
    "vertical-align:top}\n"
    "th{background:#f5f5f5;font-weight:600}\n"
    "table.findings td.message{max-width:520px}\n"
    "table.kv th{width:190px}\n"
    "code,pre{font-family:ui-monospace,'DejaVu Sans Mono',Menlo,Consolas,"
    "monospace;font-size:12px}\n"
    "code{background:#f5f5f5;padding:1px 4px;border-radius:3px;"
    "word-break:break-all}\n"
    "pre{background:#fafafa;border:1px solid var(--line);padding:10px;"
    "overflow:auto;max-height:420px}\n"
    ".kind{display:inline-block;padding:1px 7px;border-radius:10px;"
    "background:#ffebee;color:var(--bad);font-weight:600;font-size:12px}\n"
    ".figure{display:block;max-width:100%;height:auto;margin:8px 0}\n"
    "svg text{font:11px system-ui,'DejaVu Sans',sans-serif;fill:#424242}\n"
    "svg text.title{font-size:12px;fill:#212121}\n"
    "svg text.count,svg text.op{font-size:10px;font-weight:600}\n"
    "svg text.op{fill:#212121}svg text.count{fill:#fff}\n"
    "svg text.stuck-label{font-size:12px;font-weight:700;fill:#212121}\n"
    "svg text.note{font-size:13px;fill:var(--mute)}\n"
    ".legend{font-size:12px;color:var(--mute);margin:2px 0 8px}\n"
    ".legend span{display:inline-block;margin-right:16px}\n"
    ".sw{display:inline-block;width:12px;height:12px;margin-right:5px;"
    "vertical-align:-2px;border:1px solid #bbb}\n"
    "article.finding{border-left:4px solid var(--bad);padding:2px 0 2px 14px;"
    "margin:14px 0}\n"
    "footer{margin-top:40px;color:var(--mute);font-size:12px}\n";

/* ---- small helpers */

/* A JSON value as text: strings as they are, others as compact JSON. */
static void html_json_value(FILE *f, const json_t *v) {
  if (json_is_string(v)) {
    rep_html(f, json_string_value(v));
    return;
  }
  char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
  rep_html(f, s ? s : "?");
  free(s);
}

/* A two-column table of an object's members. */
static void kv_table(FILE *f, const json_t *obj) {
  fprintf(f, "<table class=\"kv\">\n");
  const char *key;
  const json_t *v;
  json_object_foreach((json_t *)obj, key, v) {
    fprintf(f, "<tr><th>");
    rep_html(f, key);
    fprintf(f, "</th><td>");
    html_json_value(f, v);
    fprintf(f, "</td></tr>\n");
  }
  fprintf(f, "</table>\n");
}

/* "divergence at step 1 in encoder.0.weight" for one expectation. */
static void html_expectation(FILE *f, const json_t *e) {
  if (json_is_string(e)) {
    rep_html(f, json_string_value(e));
    return;
  }
  if (!json_is_array(e)) {
    fprintf(f, "(not stated)");
    return;
  }
  size_t i;
  const json_t *x;
  json_array_foreach(e, i, x) {
    if (i) fprintf(f, "; ");
    rep_html(f, rep_str(x, "kind", "?"));
    const json_t *step = json_object_get(x, "step");
    if (json_is_integer(step))
      fprintf(f, " at step %lld", (long long)json_integer_value(step));
    const char *t = rep_str(x, "tensor", NULL);
    if (t) {
      fprintf(f, " in <code>");
      rep_html(f, t);
      fprintf(f, "</code>");
    }
    const char *site = rep_str(x, "site", NULL);
    if (site) {
      fprintf(f, " at <code>");
      rep_html(f, site);
      fprintf(f, "</code>");
    }
  }
}

/* ---- sections */

/* Steps the verdict counts: for a comparison of traces the steps compared
 * (steps_done when an older run.json does not record them). */
static long long steps_shown(const rep_run *r) {
  if (r->traces.is_traces && r->traces.steps_compared >= 0)
    return r->traces.steps_compared;
  return r->steps_done;
}

/* The banner's last line for a comparison of traces, closing the banner:
 * what was compared, instead of a model, a backend and a duration. */
static void trace_banner_line(FILE *f, const rep_run *r) {
  const rep_traces *t = &r->traces;
  char steps[160];
  rep_traces_steps_text(t, steps, sizeof steps);
  if (t->program) {
    fprintf(f, "traces of ");
    rep_html(f, t->program);
    fprintf(f, " in ");
  } else {
    fprintf(f, "traces in ");
  }
  rep_html(f, t->trace_dir);
  fprintf(f, ", %d ranks, steps compared: %s, exit code %d</p>\n"
          "</div></header>\n", r->ranks, steps, r->exit_code);
}

static void verdict_banner(FILE *f, const rep_run *r) {
  const char *v = rep_verdict(r);
  fprintf(f, "<header class=\"verdict verdict-%s\" id=\"verdict\" data-verdict"
          "=\"%s\"><div class=\"inner\">\n<h1>", v, v);
  if (strcmp(v, "findings") == 0)
    fprintf(f, "FINDINGS: %d finding%s", r->nfindings,
            r->nfindings == 1 ? "" : "s");
  else if (strcmp(v, "clean") == 0)
    fprintf(f, "CLEAN: no findings");
  else if (rep_no_training(r)) /* a watched job or traces (job.c) */
    fprintf(f, "ERROR: no verdict");
  else
    fprintf(f, "ERROR: training stopped unexplained");
  fprintf(f, " &mdash; ");
  rep_html(f, r->name);
  fprintf(f, "</h1>\n<p>");
  if (strcmp(v, "findings") == 0) {
    for (int i = 0; i < r->nfindings && i < 4; i++) {
      const rep_finding *x = &r->findings[i];
      fprintf(f, "%s", i ? "; " : "");
      rep_html(f, x->kind);
      if (x->step >= 0) fprintf(f, " at step %lld", x->step);
      if (x->tensor[0]) {
        fprintf(f, " in ");
        rep_html(f, x->tensor);
      }
    }
    if (r->nfindings > 4) fprintf(f, "; and %d more", r->nfindings - 4);
  } else if (strcmp(v, "clean") == 0) {
    /* Only the checks that ran passed: name the others. */
    int skipped = 0;
    for (int k = 0; k < VQC_FINDING_KIND_COUNT; k++) {
      const char *why;
      if (rep_check(r, (vqc_finding_kind)k, &why) != REP_CHECK_NOT_RUN)
        continue;
      fprintf(f, "%s", skipped++ ? ", " : "");
      if (skipped == 1)
        fprintf(f, "%lld steps %son %d ranks, every check that ran passed; "
                "not checked: ", steps_shown(r),
                r->traces.is_traces ? "compared " : "", r->ranks);
      rep_html(f, vqc_finding_kind_name((vqc_finding_kind)k));
    }
    if (skipped == 0)
      fprintf(f, "%lld steps %son %d ranks, every check passed",
              steps_shown(r), r->traces.is_traces ? "compared " : "",
              r->ranks);
  } else {
    rep_html(f, rep_no_training(r)
                    ? "no verdict" /* a watched job or traces (job.c) */
                    : r->training_status);
    fprintf(f, ": ");
    rep_html(f, r->training_message[0] ? r->training_message
                                       : "no message recorded");
  }
  fprintf(f, "</p>\n<p>");
  if (r->traces.is_traces) {
    trace_banner_line(f, r);
    return;
  }
  char job[1600];
  if (rep_job_facts_text(r, job, sizeof job)) {
    rep_html(f, job);
    fprintf(f, ", exit code %d</p>\n</div></header>\n", r->exit_code);
    return;
  }
  if (json_object_get(r->root, "scenario"))
    rep_html(f, rep_str(r->root, "scenario.model", "?"));
  else
    rep_html(f, "instrumented program");
  fprintf(f, "%s, %d ranks on the ",
          json_object_get(r->root, "scenario") ? " model" : "", r->ranks);
  rep_html(f, r->backend);
  fprintf(f, " backend, %lld steps done in %.2f s, exit code %d</p>\n"
          "</div></header>\n", r->steps_done, r->duration_s, r->exit_code);
}

/* One <tr> of the run table: a header and escaped text. */
static void kv_row(FILE *f, const char *key, const char *text) {
  fprintf(f, "<tr><th>%s</th><td>", key);
  rep_html(f, text);
  fprintf(f, "</td></tr>\n");
}

/* The run table of a comparison of traces (trace_run.c): what was
 * compared, instead of a scenario's fault, seed and training. */
static void trace_summary_section(FILE *f, const rep_run *r) {
  const rep_traces *t = &r->traces;
  char steps[160], tensors[64], last[1024], num[32];
  rep_traces_steps_text(t, steps, sizeof steps);
  rep_traces_tensors_text(t, tensors, sizeof tensors);
  rep_traces_last_steps_text(t, last, sizeof last);
  fprintf(f, "<section id=\"summary\"><h2>Traces compared</h2>\n"
          "<table class=\"kv\">\n<tr><th>program</th><td>");
  if (t->program) {
    fprintf(f, "<code>");
    rep_html(f, t->program);
    fprintf(f, "</code>");
  } else {
    fprintf(f, "not named in the traces (see the trace directory)");
  }
  fprintf(f, "</td></tr>\n<tr><th>trace directory</th><td><code>");
  rep_html(f, t->trace_dir);
  fprintf(f, "</code></td></tr>\n<tr><th>ranks</th><td>%d</td></tr>\n",
          r->ranks);
  kv_row(f, "steps compared", steps);
  kv_row(f, "tensors per step", tensors);
  if (t->digests_compared >= 0) {
    snprintf(num, sizeof num, "%lld", t->digests_compared);
    kv_row(f, "digests compared", num);
  }
  if (last[0]) kv_row(f, "last step per rank", last);
  kv_row(f, "finished",
         rep_str(r->root, "finished", rep_str(r->root, "started", "?")));
  fprintf(f, "<tr><th>exit code</th><td>%d</td></tr>\n</table>\n"
          "</section>\n", r->exit_code);
}

static void summary_section(FILE *f, const rep_run *r) {
  if (r->traces.is_traces) {
    trace_summary_section(f, r);
    return;
  }
  /* A watched job has no scenario, fault or seed: its Job section says
   * what ran (job.c). */
  if (rep_watched_job(r)) return;
  const json_t *sc = json_object_get(r->root, "scenario");
  fprintf(f, "<section id=\"summary\"><h2>Run</h2>\n<table class=\"kv\">\n");
  fprintf(f, "<tr><th>scenario</th><td>");
  rep_html(f, r->name);
  const char *path = rep_str(sc, "path", NULL);
  if (path) {
    fprintf(f, " (<code>");
    rep_html(f, path);
    fprintf(f, "</code>)");
  }
  fprintf(f, "</td></tr>\n");
  const char *desc = rep_str(sc, "description", "");
  if (desc[0]) {
    fprintf(f, "<tr><th>description</th><td>");
    rep_html(f, desc);
    fprintf(f, "</td></tr>\n");
  }
  fprintf(f, "<tr><th>fault injected</th><td>");
  rep_html(f, rep_str(sc, "fault", "none"));
  fprintf(f, "</td></tr>\n<tr><th>expected</th><td>");
  html_expectation(f, json_object_get(sc, "expect"));
  fprintf(f, "</td></tr>\n<tr><th>training</th><td>");
  rep_html(f, r->training_status);
  if (r->training_message[0]) {
    fprintf(f, ": ");
    rep_html(f, r->training_message);
  }
  const json_t *steps = json_object_get(sc, "steps");
  fprintf(f, " (%lld", r->steps_done);
  if (json_is_integer(steps))
    fprintf(f, " of %lld", (long long)json_integer_value(steps));
  fprintf(f, " steps)</td></tr>\n<tr><th>seed</th><td>");
  rep_html(f, rep_str(sc, "seed", "?"));
  fprintf(f, "</td></tr>\n<tr><th>finished</th><td>");
  rep_html(f, rep_str(r->root, "finished", rep_str(r->root, "started", "?")));
  fprintf(f, "</td></tr>\n<tr><th>exit code</th><td>%d</td></tr>\n</table>\n"
          "</section>\n", r->exit_code);
}

static void findings_section(FILE *f, const rep_run *r) {
  fprintf(f, "<section id=\"findings\"><h2>Findings (%d)</h2>\n", r->nfindings);
  if (r->nfindings == 0) {
    fprintf(f, "<p class=\"none\">No findings.</p>\n</section>\n");
    return;
  }
  fprintf(f, "<table class=\"findings\">\n<thead><tr><th>#</th><th>kind</th>"
          "<th>step</th><th>ranks</th><th>tensor</th><th>call site</th>"
          "<th>message</th></tr></thead>\n<tbody>\n");
  for (int i = 0; i < r->nfindings; i++) {
    const rep_finding *x = &r->findings[i];
    char ranks[512];
    rep_ranks_text(x->ranks, ranks, sizeof ranks);
    fprintf(f, "<tr class=\"finding-row\" id=\"finding-row-%d\"><td>%d</td>"
            "<td><a href=\"#finding-%d\"><span class=\"kind\">", i + 1, i + 1,
            i + 1);
    rep_html(f, x->kind);
    fprintf(f, "</span></a></td><td>");
    if (x->step >= 0) fprintf(f, "%lld", x->step);
    fprintf(f, "</td><td>%s</td><td class=\"tensor\">", ranks);
    if (x->tensor[0]) {
      fprintf(f, "<code>");
      rep_html(f, x->tensor);
      fprintf(f, "</code>");
    }
    fprintf(f, "</td><td class=\"site\">");
    if (x->site[0]) {
      fprintf(f, "<code>");
      rep_html(f, x->site);
      fprintf(f, "</code>");
    }
    fprintf(f, "</td><td class=\"message\">");
    rep_html(f, x->message);
    fprintf(f, "</td></tr>\n");
  }
  fprintf(f, "</tbody></table>\n</section>\n");
}

static void legend(FILE *f, const char *const *colors,
                   const char *const *labels, int n) {
  fprintf(f, "<div class=\"legend\">");
  for (int i = 0; i < n; i++)
    fprintf(f, "<span><i class=\"sw\" style=\"background:%s\"></i>%s</span>",
            colors[i], labels[i]);
  fprintf(f, "</div>\n");
}

static void digest_section(FILE *f, const rep_data *d) {
  const rep_grid *g = &d->grid;
  fprintf(f, "<section id=\"digests\"><h2>Digest agreement</h2>\n");
  if (g->any) {
    fprintf(f, "<p class=\"explain\">Each cell compares one rank's digests of "
            "its replicated tensors at the end of a step with those of rank %d "
            "(the reference): green, every tensor equal; red, the number of "
            "tensors that differ; purple, no majority (some tensor splits the "
            "ranks into groups none larger than every other, so the reference "
            "is only a tie-break and no rank is shown as agreeing); grey, "
            "nothing traced.", g->ref_rank);
    /* The first disagreement, in words. */
    for (int si = 0; si < g->nsteps; si++) {
      if (rep_grid_worst(g, si) <= 0) continue;
      if (g->nomajority && g->nomajority[si] > 0) {
        fprintf(f, " First disagreement at step %lld, with no majority: %d "
                "of %d tensors split the ranks with no group larger than "
                "every other, so no rank can be told to be the wrong one.", (long long)g->steps[si],
                g->nomajority[si], g->ntensors[si]);
        break;
      }
      fprintf(f, " First disagreement at step %lld: rank",
              (long long)g->steps[si]);
      if (g->nranks > REP_FOLD_FROM) {
        /* Folded: the ranks that differ as ranges, and how much. */
        int *bad = malloc((size_t)g->nranks * sizeof *bad);
        int n = 0, lo = 0, hi = 0;
        for (int r = 0; r < g->nranks && bad; r++) {
          int c = g->cell[(size_t)r * g->nsteps + si];
          if (c <= 0) continue;
          if (n == 0 || c < lo) lo = c;
          if (c > hi) hi = c;
          bad[n++] = r;
        }
        char list[512] = "";
        if (bad) vqc_rank_ranges_text(bad, n, list, sizeof list);
        free(bad);
        fprintf(f, "%s ", n == 1 ? "" : "s");
        rep_html(f, list);
        if (lo == hi)
          fprintf(f, " (%d of %d tensors).", lo, g->ntensors[si]);
        else
          fprintf(f, " (%d to %d of %d tensors).", lo, hi, g->ntensors[si]);
        break;
      }
      int shown = 0;
      for (int r = 0; r < g->nranks; r++) {
        int c = g->cell[(size_t)r * g->nsteps + si];
        if (c <= 0) continue;
        if (shown < 8)
          fprintf(f, "%s %d (%d of %d tensors)", shown ? "," : "", r, c,
                  g->ntensors[si]);
        shown++;
      }
      if (shown > 8) fprintf(f, " and %d more ranks", shown - 8);
      fprintf(f, ".");
      break;
    }
    fprintf(f, "</p>\n");
  }
  rep_svg_heatmap(f, g);
  static const char *const colors[] = {"#43a047", "#d32f2f", "#8e24aa",
                                       "#e0e0e0"};
  static const char *const labels[] = {"equal to the reference",
                                       "differs (n tensors)",
                                       "no majority (no rank agrees)",
                                       "not traced"};
  if (g->any) legend(f, colors, labels, 4);
  fprintf(f, "</section>\n");
}

/* The magnitudes the checkers measured, one row per finding that has any. */
static void magnitude_table(FILE *f, const rep_run *r) {
  static const char *const keys[] = {"max_abs_diff", "max_rel_diff", "ulp",
                                     "differing", "rel_error"};
  bool header = false;
  for (int i = 0; i < r->nfindings; i++) {
    const rep_finding *x = &r->findings[i];
    if (!x->detail) continue;
    bool any = false;
    for (int k = 0; k < 5; k++) any = any || json_object_get(x->detail, keys[k]);
    if (!any) continue;
    if (!header) {
      fprintf(f, "<table class=\"magnitudes\"><thead><tr><th>#</th><th>kind"
              "</th><th>step</th><th>tensor</th><th>ranks</th>");
      for (int k = 0; k < 5; k++) fprintf(f, "<th>%s</th>", keys[k]);
      fprintf(f, "</tr></thead><tbody>\n");
      header = true;
    }
    char ranks[512];
    rep_ranks_text(x->ranks, ranks, sizeof ranks);
    fprintf(f, "<tr><td><a href=\"#finding-%d\">%d</a></td><td>", i + 1, i + 1);
    rep_html(f, x->kind);
    fprintf(f, "</td><td>%lld</td><td><code>", x->step);
    rep_html(f, x->tensor);
    fprintf(f, "</code></td><td>%s</td>", ranks);
    for (int k = 0; k < 5; k++) {
      const json_t *v = json_object_get(x->detail, keys[k]);
      fprintf(f, "<td>");
      if (v) html_json_value(f, v);
      fprintf(f, "</td>");
    }
    fprintf(f, "</tr>\n");
  }
  if (header) fprintf(f, "</tbody></table>\n");
}

static void divergence_section(FILE *f, const rep_data *d) {
  fprintf(f, "<section id=\"divergence\"><h2>Divergence over steps</h2>\n"
          "<p class=\"explain\">");
  if (d->grid.any)
    fprintf(f, "For each step, the number of tensors whose digest differs from "
            "rank %d's on the worst rank (from the traces). Dashed lines mark "
            "the steps of findings.", d->grid.ref_rank);
  else
    fprintf(f, "No traces: the largest absolute difference the findings "
            "measured at each step.");
  fprintf(f, " The scale turns logarithmic when the values span two decades "
          "or more.</p>\n");
  rep_svg_divergence(f, d);
  magnitude_table(f, &d->run);
  fprintf(f, "</section>\n");
}

/* A section (id, title) of lines (plain-text strings) after a sentence
 * saying they are not findings: only when there is something to say.
 * Used for what could not be checked and the analysis' warnings
 * (not_compared.c). */
static void note_section(FILE *f, const char *id, const char *title,
                         const char *what, const json_t *lines) {
  if (json_array_size(lines) == 0) return;
  fprintf(f, "<section id=\"%s\"><h2>%s</h2>\n<p class=\"explain\">Not "
          "findings: %s.</p>\n<ul>\n", id, title, what);
  size_t i;
  const json_t *x;
  json_array_foreach(lines, i, x) {
    fprintf(f, "<li>");
    rep_html(f, json_string_value(x));
    fprintf(f, "</li>\n");
  }
  fprintf(f, "</ul>\n</section>\n");
}

/* Instead of the timeline, for a comparison of traces without ledger
 * dumps: the collective checks did not run, and why (once). */
static void collectives_not_run(FILE *f, const rep_run *r) {
  char text[1200];
  fprintf(f, "<section id=\"collectives\"><h2>Collectives</h2>\n");
  if (rep_collectives_not_run(r, text, sizeof text) > 0) {
    fprintf(f, "<p class=\"explain\">Collective checks not run (so no "
            "collective timeline): ");
    rep_html(f, text);
    fprintf(f, ".</p>\n");
  }
  fprintf(f, "</section>\n");
}

static void timeline_section(FILE *f, const rep_data *d) {
  const rep_timeline *t = &d->tl;
  if (d->run.traces.is_traces && !t->any) {
    collectives_not_run(f, &d->run);
    return;
  }
  fprintf(f, "<section id=\"collectives\"><h2>Collective timeline</h2>\n");
  if (t->any) {
    fprintf(f, "<p class=\"explain\">Each rank's ledger dump, by collective "
            "sequence number: every rank must call the same collectives in the "
            "same order.");
    if (t->has_focus)
      fprintf(f, " Outlined: #%llu, the collective the ranks got stuck in "
              "(from %s).", (unsigned long long)t->focus, t->focus_why);
    fprintf(f, "</p>\n");
  }
  rep_svg_timeline(f, t);
  static const char *const colors[] = {"#66bb6a", "#ffa726", "#e53935", "#fff",
                                       "#bdbdbd"};
  static const char *const labels[] = {"done", "entered, never completed",
                                       "failed", "never reached",
                                       "no ledger dump"};
  if (!t->any) {
    fprintf(f, "</section>\n");
    return;
  }
  legend(f, colors, labels, 5);
  if (t->has_focus && t->focus >= t->first &&
      t->focus < t->first + (uint64_t)t->ncols) {
    const int c = (int)(t->focus - t->first);
    fprintf(f, "<table class=\"stuck\"><thead><tr><th>rank</th><th>#%llu"
            "</th><th>collective</th><th>call site</th><th>status</th></tr>"
            "</thead><tbody>\n", (unsigned long long)t->focus);
    /* Beyond REP_FOLD_FROM ranks, one row per group of ranks in the same
     * state at #focus ("ranks 0-1022 (step 2)"), from its lowest rank. */
    int *group_of = malloc((size_t)t->nranks * sizeof *group_of);
    const bool folded = group_of && t->nranks > REP_FOLD_FROM;
    const int ngroups = folded ? rep_timeline_groups(t, c, group_of) : 0;
    int next_group = 0;
    for (int r = 0; r < t->nranks; r++) {
      const rep_coll *k = &t->cells[(size_t)r * t->ncols + c];
      if (folded) {
        /* Groups are numbered by their lowest rank: r opens group
         * next_group or belongs to one already shown. */
        if (group_of[r] != next_group) continue;
        next_group++;
        char list[512];
        int n = 0;
        rep_group_text(group_of, t->nranks, group_of[r], list, sizeof list,
                       &n);
        fprintf(f, "<tr><td>%s", n == 1 ? "" : "ranks ");
        rep_html(f, list);
        fprintf(f, "</td><td>");
      } else {
        fprintf(f, "<tr><td>%d</td><td>", r);
      }
      if (!t->has_dump[r]) {
        fprintf(f, "no ledger dump</td><td></td><td></td><td></td></tr>\n");
        continue;
      }
      switch (k->state) {
        case REP_COLL_DONE: fprintf(f, "done"); break;
        case REP_COLL_ENTERED: fprintf(f, "<b>entered, never completed</b>"); break;
        case REP_COLL_FAILED: fprintf(f, "<b>failed</b>"); break;
        default:
          fprintf(f, "<b>never reached</b> (last: #%lld)",
                  (long long)t->last_seq[r]);
      }
      fprintf(f, "</td><td>");
      rep_html(f, k->describe);
      fprintf(f, "</td><td>");
      if (k->site[0]) {
        fprintf(f, "<code>");
        rep_html(f, k->site);
        fprintf(f, "</code>");
      }
      fprintf(f, "</td><td>");
      rep_html(f, k->status);
      fprintf(f, "</td></tr>\n");
    }
    fprintf(f, "</tbody></table>\n");
    if (folded)
      fprintf(f, "<p class=\"explain\">%d ranks in %d rows: ranks in the "
              "same state at #%llu share a row.</p>\n", t->nranks, ngroups,
              (unsigned long long)t->focus);
    free(group_of);
  }
  fprintf(f, "</section>\n");
}

static void details_section(FILE *f, const rep_run *r) {
  if (r->nfindings == 0) return;
  fprintf(f, "<section id=\"details\"><h2>Finding details</h2>\n");
  for (int i = 0; i < r->nfindings; i++) {
    const rep_finding *x = &r->findings[i];
    char ranks[512];
    rep_ranks_text(x->ranks, ranks, sizeof ranks);
    fprintf(f, "<article class=\"finding\" id=\"finding-%d\"><h3>%d. ", i + 1,
            i + 1);
    rep_html(f, x->kind);
    if (x->step >= 0) fprintf(f, " at step %lld", x->step);
    fprintf(f, "</h3>\n<p class=\"message\">");
    rep_html(f, x->message);
    fprintf(f, "</p>\n<table class=\"kv\"><tr><th>ranks</th><td>%s</td></tr>",
            ranks[0] ? ranks : "(none)");
    if (x->tensor[0]) {
      fprintf(f, "<tr><th>tensor</th><td><code>");
      rep_html(f, x->tensor);
      fprintf(f, "</code></td></tr>");
    }
    if (x->site[0]) {
      fprintf(f, "<tr><th>call site</th><td><code>");
      rep_html(f, x->site);
      fprintf(f, "</code></td></tr>");
    }
    fprintf(f, "</table>\n");
    if (x->detail && json_object_size(x->detail) > 0) {
      char *text = json_dumps(x->detail, JSON_INDENT(2));
      fprintf(f, "<pre class=\"detail\">");
      rep_html(f, text ? text : "");
      fprintf(f, "</pre>\n");
      free(text);
    }
    fprintf(f, "</article>\n");
  }
  fprintf(f, "</section>\n");
}

/* The per-step table of a comparison of traces: what was compared at each
 * step (run.json "steps": digests_compared, digests_differing). */
static void trace_steps_section(FILE *f, const json_t *steps, size_t n) {
  fprintf(f, "<section id=\"steps\"><h2>Steps</h2>\n<details><summary>"
          "Per-step comparison (%zu steps in the traces)</summary>\n<table>"
          "<thead><tr><th>step</th><th>tensors compared</th><th>tensors "
          "differing</th><th>findings so far</th></tr></thead><tbody>\n", n);
  static const char *const keys[] = {"digests_compared", "digests_differing",
                                     "findings"};
  size_t i;
  const json_t *s;
  json_array_foreach(steps, i, s) {
    fprintf(f, "<tr><td>%lld</td>",
            (long long)json_integer_value(json_object_get(s, "step")));
    for (int k = 0; k < 3; k++) {
      const json_t *v = json_object_get(s, keys[k]);
      fprintf(f, "<td>");
      if (v) html_json_value(f, v);
      fprintf(f, "</td>");
    }
    fprintf(f, "</tr>\n");
  }
  fprintf(f, "</tbody></table>\n</details>\n</section>\n");
}

static void steps_section(FILE *f, const rep_run *r) {
  const json_t *steps = json_object_get(r->root, "steps");
  const size_t n = json_array_size(steps);
  if (n == 0) return;
  if (r->traces.is_traces) {
    trace_steps_section(f, steps, n);
    return;
  }
  fprintf(f, "<section id=\"steps\"><h2>Steps</h2>\n<details><summary>"
          "Per-step summary on rank 0 (%zu steps)</summary>\n<table><thead>"
          "<tr><th>step</th><th>seconds</th><th>loss</th><th>findings so far"
          "</th></tr></thead><tbody>\n", n);
  size_t i;
  const json_t *s;
  json_array_foreach(steps, i, s) {
    fprintf(f, "<tr><td>%lld</td><td>",
            (long long)json_integer_value(json_object_get(s, "step")));
    const json_t *v = json_object_get(s, "seconds");
    if (json_is_number(v)) fprintf(f, "%.4f", json_number_value(v));
    fprintf(f, "</td><td>");
    v = json_object_get(s, "loss");
    if (json_is_number(v)) fprintf(f, "%.6g", json_number_value(v));
    else if (v) html_json_value(f, v);
    fprintf(f, "</td><td>");
    v = json_object_get(s, "findings");
    if (v) html_json_value(f, v);
    fprintf(f, "</td></tr>\n");
  }
  fprintf(f, "</tbody></table>\n</details>\n</section>\n");
}

static void environment_section(FILE *f, const rep_run *r) {
  fprintf(f, "<section id=\"environment\"><h2>Environment and build</h2>\n"
          "<h3>Environment</h3>\n");
  kv_table(f, json_object_get(r->root, "environment"));
  fprintf(f, "<h3>Build</h3>\n");
  kv_table(f, json_object_get(r->root, "build"));
  if (r->traces.is_traces) {
    /* run.json's compare section: the facts the run table shows. */
    const json_t *c = json_object_get(r->root, "compare");
    if (json_is_object(c)) {
      fprintf(f, "<h3>Comparison</h3>\n");
      kv_table(f, c);
    }
    fprintf(f, "</section>\n");
    return;
  }
  const json_t *sc = json_object_get(r->root, "scenario");
  fprintf(f, "<h3>Scenario</h3>\n");
  kv_table(f, sc);
  fprintf(f, "</section>\n");
}

vqc_status rep_render_html(const rep_data *d, FILE *f) {
  const rep_run *r = &d->run;
  fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\""
          "utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, "
          "initial-scale=1\">\n"
          /* Nothing may be fetched or run: the page is complete as it is. */
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src "
          "'none'; style-src 'unsafe-inline'; img-src data:\">\n"
          "<meta name=\"generator\" content=\"vqcheck\">\n<title>vqcheck: ");
  rep_html(f, r->name);
  fprintf(f, " &mdash; %s</title>\n<style>\n%s</style>\n</head>\n<body>\n",
          rep_verdict(r), CSS);
  verdict_banner(f, r);
  json_t *not_compared = rep_not_compared_lines(r); /* freed below */
  json_t *warned = rep_warning_lines(r);             /* freed below */
  fprintf(f, "<main>\n<nav><a href=\"#summary\">run</a><a href=\"#findings\">"
          "findings</a><a href=\"#digests\">digest agreement</a>%s%s<a href=\""
          "#divergence\">divergence</a><a href=\"#collectives\">collectives"
          "</a>%s%s<a href=\"#environment\">environment and build</a></nav>\n",
          json_array_size(not_compared)
              ? "<a href=\"#not-compared\">not compared</a>" : "",
          json_array_size(warned) ? "<a href=\"#warnings\">warnings</a>" : "",
          r->nfindings ? "<a href=\"#details\">details</a>" : "",
          rep_watched_job(r) ? "<a href=\"#job\">job</a>" : "");
  summary_section(f, r);
  findings_section(f, r);
  rep_render_html_job(f, r);
  digest_section(f, d);
  note_section(f, "not-compared", "Not compared",
               "what the check could not compare", not_compared);
  json_decref(not_compared);
  note_section(f, "warnings", "Warnings",
               "what the analysis noticed besides", warned);
  json_decref(warned);
  divergence_section(f, d);
  timeline_section(f, d);
  details_section(f, r);
  steps_section(f, r);
  environment_section(f, r);
  fprintf(f, "<footer>Generated by vqcheck from <code>");
  rep_html(f, r->path);
  fprintf(f, "</code> (run.json schema 1), vqcheck ");
  rep_html(f, rep_str(r->root, "build.version", "?"));
  fprintf(f, ".</footer>\n</main>\n</body>\n</html>\n");
  return ferror(f) ? vqc_error(VQC_EIO, "cannot render report.html")
                   : VQC_OK;
}
