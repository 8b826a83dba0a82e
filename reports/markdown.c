/* markdown.c: report.md, the report that reads well both raw (a terminal,
 * `cat`) and rendered (a CI summary page, GitHub): verdict, findings table,
 * per-finding detail, the job of a `vqcheck watch` run (job.c), digest
 * agreement in words, what was not compared (not_compared.c), the stuck
 * collective, environment and build (for a comparison of traces, what was
 * compared instead of a scenario, and a note instead of the collective;
 * trace_run.c).
 * Also the suite summary. Strings from the run go through rep_md /
 * rep_md_code so a name cannot break a table or inject markup; detail JSON
 * goes in a fence longer than any backtick run in it. */
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"

static void md_fenced(FILE *f, const char *lang, const char *text) {
  int n = rep_md_backtick_run(text) + 1;
  if (n < 3) n = 3;
  for (int i = 0; i < n; i++) fputc('`', f);
  fprintf(f, "%s\n%s\n", lang, text);
  for (int i = 0; i < n; i++) fputc('`', f);
  fputc('\n', f);
}

static void md_json_value(FILE *f, const json_t *v) {
  if (json_is_string(v)) {
    rep_md(f, json_string_value(v));
    return;
  }
  char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
  rep_md(f, s ? s : "?");
  free(s);
}

static void kv_table(FILE *f, const json_t *obj) {
  fprintf(f, "| field | value |\n|---|---|\n");
  const char *key;
  const json_t *v;
  json_object_foreach((json_t *)obj, key, v) {
    fprintf(f, "| ");
    rep_md(f, key);
    fprintf(f, " | ");
    md_json_value(f, v);
    fprintf(f, " |\n");
  }
  fprintf(f, "\n");
}

static void expectation(FILE *f, const json_t *e) {
  if (json_is_string(e)) {
    rep_md(f, json_string_value(e));
    return;
  }
  size_t i;
  const json_t *x;
  json_array_foreach(e, i, x) {
    if (i) fprintf(f, "; ");
    rep_md(f, rep_str(x, "kind", "?"));
    const json_t *step = json_object_get(x, "step");
    if (json_is_integer(step))
      fprintf(f, " at step %lld", (long long)json_integer_value(step));
    const char *t = rep_str(x, "tensor", NULL);
    if (t) {
      fprintf(f, " in ");
      rep_md_code(f, t, false);
    }
  }
  if (!json_is_array(e)) fprintf(f, "(not stated)");
}

/* The lines under the verdict for a comparison of traces (trace_run.c):
 * what was compared, instead of a scenario's fault, seed and training. */
static void trace_facts(FILE *f, const rep_run *r) {
  const rep_traces *t = &r->traces;
  char steps[160], tensors[64], last[1024];
  rep_traces_steps_text(t, steps, sizeof steps);
  rep_traces_tensors_text(t, tensors, sizeof tensors);
  rep_traces_last_steps_text(t, last, sizeof last);
  fprintf(f, "- program: ");
  if (t->program) {
    rep_md_code(f, t->program, false);
    fprintf(f, " (traces in ");
    rep_md_code(f, t->trace_dir, false);
    fprintf(f, ")");
  } else {
    fprintf(f, "not named in the traces; traces in ");
    rep_md_code(f, t->trace_dir, false);
  }
  fprintf(f, "\n- %d ranks; steps compared: %s; tensors per step: %s",
          r->ranks, steps, tensors);
  if (t->digests_compared >= 0)
    fprintf(f, "; digests compared: %lld", t->digests_compared);
  if (last[0]) fprintf(f, "\n- last step per rank: %s", last);
  fprintf(f, "\n\n");
}

static void verdict(FILE *f, const rep_run *r) {
  const char *v = rep_verdict(r);
  fprintf(f, "# vqcheck report: ");
  rep_md(f, r->name);
  fprintf(f, "\n\n**Verdict: ");
  if (strcmp(v, "findings") == 0) {
    fprintf(f, "FINDINGS** (%d): ", r->nfindings);
    for (int i = 0; i < r->nfindings && i < 4; i++) {
      const rep_finding *x = &r->findings[i];
      fprintf(f, "%s", i ? "; " : "");
      rep_md(f, x->kind);
      if (x->step >= 0) fprintf(f, " at step %lld", x->step);
    }
    if (r->nfindings > 4) fprintf(f, "; and %d more", r->nfindings - 4);
    fprintf(f, ".");
  } else if (strcmp(v, "clean") == 0) {
    fprintf(f, "CLEAN**: no findings.");
    /* Only the checks that ran passed: name the others. */
    int skipped = 0;
    for (int k = 0; k < VQC_FINDING_KIND_COUNT; k++) {
      const char *why;
      if (rep_check(r, (vqc_finding_kind)k, &why) != REP_CHECK_NOT_RUN)
        continue;
      fprintf(f, "%s", skipped++ ? ", " : " Not checked (did not run): ");
      rep_md(f, vqc_finding_kind_name((vqc_finding_kind)k));
    }
    if (skipped) fprintf(f, ".");
  } else if (rep_no_training(r)) {
    /* a watched job or traces (job.c): no training ran, just no verdict */
    fprintf(f, "ERROR**: no verdict: ");
    rep_md(f, r->training_message);
  } else {
    fprintf(f, "ERROR**: training stopped (");
    rep_md(f, r->training_status);
    fprintf(f, ") and no finding explains it: ");
    rep_md(f, r->training_message);
  }
  const json_t *sc = json_object_get(r->root, "scenario");
  fprintf(f, " Exit code %d.\n\n", r->exit_code);
  if (r->traces.is_traces) {
    trace_facts(f, r);
    return;
  }
  char job[1600];
  if (rep_job_facts_text(r, job, sizeof job)) {
    fprintf(f, "- ");
    rep_md(f, job);
    fprintf(f, "\n\n");
    return;
  }
  if (sc) {
    fprintf(f, "- scenario: ");
    rep_md_code(f, r->name, false);
    fprintf(f, " (");
    rep_md(f, rep_str(sc, "model", "?"));
    fprintf(f, " model), fault injected: ");
    rep_md(f, rep_str(sc, "fault", "none"));
    fprintf(f, "\n- expected: ");
    expectation(f, json_object_get(sc, "expect"));
  } else { /* an instrumented program (checkers/include/vqc/instrument.h) */
    fprintf(f, "- program: ");
    rep_md_code(f, r->name, false);
    fprintf(f, " (instrumented), checkers: ");
    rep_md(f, rep_str(r->root, "check.checkers", "?"));
  }
  fprintf(f, "\n- %d ranks on the ", r->ranks);
  rep_md(f, r->backend);
  fprintf(f, " backend; %lld steps done in %.2f s; training ", r->steps_done,
          r->duration_s);
  rep_md(f, r->training_status);
  if (r->training_message[0]) {
    fprintf(f, ": ");
    rep_md(f, r->training_message);
  }
  fprintf(f, "\n\n");
}

static void findings_table(FILE *f, const rep_run *r) {
  fprintf(f, "## Findings\n\n");
  if (r->nfindings == 0) {
    fprintf(f, "No findings.\n\n");
    return;
  }
  fprintf(f, "| # | kind | step | ranks | tensor | site | message |\n"
          "|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < r->nfindings; i++) {
    const rep_finding *x = &r->findings[i];
    char ranks[512];
    rep_ranks_text(x->ranks, ranks, sizeof ranks);
    fprintf(f, "| %d | ", i + 1);
    rep_md(f, x->kind);
    fprintf(f, " | ");
    if (x->step >= 0) fprintf(f, "%lld", x->step);
    fprintf(f, " | %s | ", ranks);
    rep_md_code(f, x->tensor, true);
    fprintf(f, " | ");
    rep_md_code(f, x->site, true);
    fprintf(f, " | ");
    rep_md(f, x->message);
    fprintf(f, " |\n");
  }
  fprintf(f, "\n");
}

static void finding_details(FILE *f, const rep_run *r) {
  if (r->nfindings == 0) return;
  fprintf(f, "## Finding details\n\n");
  for (int i = 0; i < r->nfindings; i++) {
    const rep_finding *x = &r->findings[i];
    char ranks[512];
    rep_ranks_text(x->ranks, ranks, sizeof ranks);
    fprintf(f, "### %d. ", i + 1);
    rep_md(f, x->kind);
    if (x->step >= 0) fprintf(f, " at step %lld", x->step);
    fprintf(f, "\n\n");
    rep_md(f, x->message);
    fprintf(f, "\n\n- ranks: %s\n", ranks[0] ? ranks : "(none)");
    if (x->tensor[0]) {
      fprintf(f, "- tensor: ");
      rep_md_code(f, x->tensor, false);
      fprintf(f, "\n");
    }
    if (x->site[0]) {
      fprintf(f, "- call site: ");
      rep_md_code(f, x->site, false);
      fprintf(f, "\n");
    }
    fprintf(f, "\n");
    if (x->detail && json_object_size(x->detail) > 0) {
      char *text = json_dumps(x->detail, JSON_INDENT(2));
      md_fenced(f, "json", text ? text : "{}");
      free(text);
      fprintf(f, "\n");
    }
  }
}

static void digests(FILE *f, const rep_grid *g) {
  fprintf(f, "## Digest agreement\n\n");
  if (!g->any) {
    fprintf(f, "No digest traces in this run directory.\n\n");
    return;
  }
  if (g->nsteps == 0) {
    fprintf(f, "The traces hold no step: training stopped before the first "
            "step ended.\n\n");
    return;
  }
  fprintf(f, "Reference: rank %d. Traced steps: %d (%lld to %lld).\n\n",
          g->ref_rank, g->nsteps, (long long)g->steps[0],
          (long long)g->steps[g->nsteps - 1]);
  int first = -1;
  for (int si = 0; si < g->nsteps && first < 0; si++)
    if (rep_grid_worst(g, si) > 0) first = si;
  if (first < 0)
    fprintf(f, "Every traced rank's digests equal the reference's at every "
            "step both traced.\n\n");
  else if (g->nomajority && g->nomajority[first] > 0)
    fprintf(f, "First disagreement at step %lld, with no majority: %d of %d "
            "tensors split the ranks with no majority, so no rank can be "
            "told to be the wrong one.\n\n", (long long)g->steps[first],
            g->nomajority[first], g->ntensors[first]);
  else
    fprintf(f, "First disagreement at step %lld.\n\n",
            (long long)g->steps[first]);
  if (g->nranks <= REP_FOLD_FROM) {
    for (int r = 0; r < g->nranks; r++)
      if (!g->has_trace[r]) fprintf(f, "- rank %d left no trace\n", r);
  } else {
    /* One line, folded: at 1024 ranks a line a rank is noise. */
    int *none = malloc((size_t)g->nranks * sizeof *none);
    int n = 0;
    for (int r = 0; r < g->nranks && none; r++)
      if (!g->has_trace[r]) none[n++] = r;
    if (n > 0) {
      char list[512];
      vqc_rank_ranges_text(none, n, list, sizeof list);
      fprintf(f, "- rank%s %s left no trace\n", n == 1 ? "" : "s", list);
    }
    free(none);
  }
  /* A table where it stays readable: = equal, a number of differing
   * tensors, - not traced. */
  if (g->nranks <= 16 && g->nsteps <= 60) {
    fprintf(f, "| step |");
    for (int r = 0; r < g->nranks; r++) fprintf(f, " rank %d |", r);
    fprintf(f, "\n|---|");
    for (int r = 0; r < g->nranks; r++) fprintf(f, "---|");
    fprintf(f, "\n");
    for (int si = 0; si < g->nsteps; si++) {
      fprintf(f, "| %lld |", (long long)g->steps[si]);
      for (int r = 0; r < g->nranks; r++) {
        int c = g->cell[(size_t)r * g->nsteps + si];
        if (c == REP_CELL_MISSING) fprintf(f, " - |");
        else if (g->nomajority && g->nomajority[si] > 0)
          fprintf(f, " **no majority** |");
        else if (c == 0) fprintf(f, " = |");
        else fprintf(f, " **%d differ** |", c);
      }
      fprintf(f, "\n");
    }
    fprintf(f, "\n`=` equal to the reference, `-` not traced, **no "
            "majority**: a tensor splits the ranks with no group larger than "
            "every other, so no rank agrees.\n\n");
  }
}

static void collectives(FILE *f, const rep_timeline *t) {
  if (!t->any || !t->has_focus || t->focus < t->first ||
      t->focus >= t->first + (uint64_t)t->ncols)
    return;
  const int c = (int)(t->focus - t->first);
  fprintf(f, "## Stuck collective\n\nCollective #%llu (from %s), as each "
          "rank's ledger dump records it:\n\n| rank | state | collective | "
          "call site | status |\n|---|---|---|---|---|\n",
          (unsigned long long)t->focus, t->focus_why);
  /* Beyond REP_FOLD_FROM ranks, one row per group of ranks in the same
   * state at #focus, from its lowest rank. */
  int *group_of = malloc((size_t)t->nranks * sizeof *group_of);
  const bool folded = group_of && t->nranks > REP_FOLD_FROM;
  if (folded) rep_timeline_groups(t, c, group_of);
  int next_group = 0;
  for (int r = 0; r < t->nranks; r++) {
    const rep_coll *k = &t->cells[(size_t)r * t->ncols + c];
    if (folded) {
      if (group_of[r] != next_group) continue; /* shown with its group */
      next_group++;
      char list[512];
      int n = 0;
      rep_group_text(group_of, t->nranks, group_of[r], list, sizeof list, &n);
      fprintf(f, "| %s%s | ", n == 1 ? "" : "ranks ", list);
    } else {
      fprintf(f, "| %d | ", r);
    }
    if (!t->has_dump[r]) {
      fprintf(f, "no ledger dump | | | |\n");
      continue;
    }
    switch (k->state) {
      case REP_COLL_DONE: fprintf(f, "done"); break;
      case REP_COLL_ENTERED: fprintf(f, "**entered, never completed**"); break;
      case REP_COLL_FAILED: fprintf(f, "**failed**"); break;
      default:
        fprintf(f, "**never reached** (last: #%lld)", (long long)t->last_seq[r]);
    }
    fprintf(f, " | ");
    rep_md(f, k->describe);
    fprintf(f, " | ");
    rep_md_code(f, k->site, true);
    fprintf(f, " | ");
    rep_md(f, k->status);
    fprintf(f, " |\n");
  }
  fprintf(f, "\n");
  free(group_of);
}

/* A "## title" section of lines (a JSON array of plain-text strings,
 * taken), after a sentence saying they are not findings; nothing when
 * there are none. */
static void note_list(FILE *f, const char *title, const char *what,
                      json_t *lines) {
  if (json_array_size(lines) > 0) {
    fprintf(f, "## %s\n\nNot findings: %s.\n\n", title, what);
    size_t i;
    const json_t *x;
    json_array_foreach(lines, i, x) {
      fprintf(f, "- ");
      rep_md(f, json_string_value(x));
      fprintf(f, "\n");
    }
    fprintf(f, "\n");
  }
  json_decref(lines);
}

/* Instead of the stuck collective, for a comparison of traces without
 * ledger dumps: the collective checks did not run, and why (once). */
static void collectives_not_run(FILE *f, const rep_run *r) {
  char text[1200];
  if (rep_collectives_not_run(r, text, sizeof text) == 0) return;
  fprintf(f, "## Collectives\n\nCollective checks not run (so no "
          "collective timeline): ");
  rep_md(f, text);
  fprintf(f, ".\n\n");
}

vqc_status rep_render_md(const rep_data *d, FILE *f) {
  const rep_run *r = &d->run;
  verdict(f, r);
  findings_table(f, r);
  finding_details(f, r);
  rep_render_md_job(f, r);
  digests(f, &d->grid);
  /* What could not be checked, by name, and the analysis' warnings
   * (not_compared.c). */
  note_list(f, "Not compared", "what the check could not compare",
            rep_not_compared_lines(r));
  note_list(f, "Warnings", "what the analysis noticed besides",
            rep_warning_lines(r));
  if (r->traces.is_traces && !d->tl.any) collectives_not_run(f, r);
  else collectives(f, &d->tl);
  fprintf(f, "## Environment\n\n");
  kv_table(f, json_object_get(r->root, "environment"));
  fprintf(f, "## Build\n\n");
  kv_table(f, json_object_get(r->root, "build"));
  fprintf(f, "---\nGenerated by vqcheck from ");
  rep_md_code(f, r->path, false);
  fprintf(f, " (run.json schema 1).\n");
  return ferror(f) ? vqc_error(VQC_EIO, "cannot render report.md") : VQC_OK;
}

vqc_status rep_render_md_suite(const char *suite_name,
                               const vqc_suite_case *cases, int ncases,
                               FILE *f) {
  int passed = 0;
  double seconds = 0;
  for (int i = 0; i < ncases; i++) {
    passed += cases[i].passed;
    seconds += cases[i].seconds;
  }
  fprintf(f, "# vqcheck suite: ");
  rep_md(f, suite_name);
  fprintf(f, "\n\n**%s**: %d passed, %d failed (%.1f s).\n\n",
          passed == ncases ? "PASS" : "FAIL", passed, ncases - passed, seconds);
  fprintf(f, "| scenario | fault | expected | found | result | seconds | "
          "run directory |\n|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < ncases; i++) {
    const vqc_suite_case *c = &cases[i];
    fprintf(f, "| ");
    rep_md(f, c->name);
    fprintf(f, " | ");
    rep_md(f, c->fault);
    fprintf(f, " | ");
    rep_md(f, c->expected);
    fprintf(f, " | ");
    rep_md(f, c->found);
    fprintf(f, " | %s | %.2f | ", c->passed ? "pass"
                                   : c->error ? "**ERROR**" : "**FAIL**",
            c->seconds);
    rep_md_code(f, c->run_dir, true);
    fprintf(f, " |\n");
  }
  bool header = false;
  for (int i = 0; i < ncases; i++) {
    const vqc_suite_case *c = &cases[i];
    if (c->passed) continue;
    if (!header) fprintf(f, "\n## Failures\n\n");
    header = true;
    fprintf(f, "- **");
    rep_md(f, c->name);
    fprintf(f, "**: ");
    rep_md(f, c->message[0] ? c->message : "(no message)");
    fprintf(f, "\n");
  }
  return ferror(f) ? vqc_error(VQC_EIO, "cannot render report.md") : VQC_OK;
}
