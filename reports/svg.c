/* svg.c: the three figures of report.html, drawn as inline SVG (no
 * scripts, no fonts, nothing fetched), each one <svg> with a fixed id:
 *
 *   digest-heatmap       step (x) by rank (y): does the rank's digest set
 *                        equal the reference rank's? green yes, red no (the
 *                        number of differing tensors written in the cell when
 *                        it fits), purple no majority (some tensor splits
 *                        the ranks with no group larger than every other:
 *                        no rank shown as agreeing), grey no data;
 *   divergence-plot      tensors differing from the reference (worst rank)
 *                        per step, from the traces; without traces, the
 *                        findings' max abs diff per step; log scale when the
 *                        values span two decades or more;
 *   collective-timeline  sequence number (x) by rank (y) around the stuck
 *                        collective: done, entered, failed, never reached,
 *                        no dump; the stuck column outlined.
 *
 * Every cell and point carries a <title> (a hover tooltip, and text a test
 * or a screen reader finds). Every string from the run is escaped. Large
 * runs are binned (each cell the worst of its steps/ranks) so the page
 * stays small. */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"

#define COLOR_AGREE "#43a047"
#define COLOR_DIFFER "#d32f2f"
#define COLOR_MISSING "#e0e0e0"
/* A step where some tensor splits the ranks with no majority: nobody is
 * shown as agreeing (the reference is only a tie-break there). */
#define COLOR_NOMAJORITY "#8e24aa"
#define COLOR_DONE "#66bb6a"
#define COLOR_ENTERED "#ffa726"
#define COLOR_FAILED "#e53935"
#define COLOR_NODUMP "#bdbdbd"

/* At most this many columns / rows of cells: beyond, cells are binned. A
 * 1000-step run on 64 ranks stays ~20k elements. */
#define HEAT_MAX_COLS 300
#define HEAT_MAX_ROWS 128

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* An <svg> that says why there is nothing to draw. */
static void empty_svg(FILE *f, const char *id, const char *why) {
  fprintf(f, "<svg id=\"%s\" class=\"figure empty\" xmlns=\"http://www.w3.org/"
          "2000/svg\" width=\"880\" height=\"44\" viewBox=\"0 0 880 44\" "
          "role=\"img\" aria-label=\"", id);
  rep_html(f, why);
  fprintf(f, "\"><rect class=\"frame\" x=\"0.5\" y=\"0.5\" width=\"879\" "
          "height=\"43\" fill=\"#fafafa\" stroke=\"#ddd\"/><text x=\"14\" "
          "y=\"27\" class=\"note\">");
  rep_html(f, why);
  fprintf(f, "</text></svg>\n");
}

/* ---- digest-agreement heatmap */

/* The heatmap's rows: which ranks each row shows. Up to REP_FOLD_FROM
 * ranks, one row a rank; beyond, one row per group of ranks with identical
 * rows (rep_grid_groups), so the rank that differs keeps a row of its own;
 * more than HEAT_MAX_ROWS groups are binned, consecutive groups together.
 * members[start[row] .. start[row + 1]) are the row's ranks, ascending. */
typedef struct heat_rows {
  int rows;
  int *start;   /* (rows + 1) */
  int *members; /* (nranks) */
} heat_rows;

static bool heat_rows_make(const rep_grid *g, heat_rows *h) {
  const int n = g->nranks;
  int *row_of = malloc((size_t)n * sizeof *row_of);
  h->start = NULL;
  h->members = malloc((size_t)n * sizeof *h->members);
  if (!row_of || !h->members) goto fail;
  if (n <= REP_FOLD_FROM) {
    h->rows = n;
    for (int r = 0; r < n; r++) row_of[r] = r;
  } else {
    const int ng = rep_grid_groups(g, row_of);
    h->rows = ng < HEAT_MAX_ROWS ? ng : HEAT_MAX_ROWS;
    for (int r = 0; r < n; r++)
      row_of[r] = (int)((long long)row_of[r] * h->rows / ng);
  }
  h->start = calloc((size_t)h->rows + 2, sizeof *h->start);
  if (!h->start) goto fail;
  for (int r = 0; r < n; r++) h->start[row_of[r] + 2]++;
  for (int i = 2; i <= h->rows + 1; i++) h->start[i] += h->start[i - 1];
  for (int r = 0; r < n; r++) h->members[h->start[row_of[r] + 1]++] = r;
  free(row_of);
  return true;
fail:
  free(row_of);
  free(h->members);
  free(h->start);
  return false;
}

/* "rank 3" or "ranks 0-1021, 1023" for a row's ranks. */
static void row_label(const heat_rows *h, int row, char *buf, size_t n) {
  const int *m = h->members + h->start[row];
  const int k = h->start[row + 1] - h->start[row];
  if (k == 1) {
    snprintf(buf, n, "rank %d", m[0]);
    return;
  }
  /* Up to REP_FOLD_FROM ranks a bin is a plain span, as it always was. */
  if (m[k - 1] - m[0] + 1 == k) {
    snprintf(buf, n, "ranks %d-%d", m[0], m[k - 1]);
    return;
  }
  int used = snprintf(buf, n, "ranks ");
  if (used > 0 && (size_t)used < n)
    vqc_rank_ranges_text(m, k, buf + used, n - (size_t)used);
}

void rep_svg_heatmap(FILE *f, const rep_grid *g) {
  if (!g->any) {
    empty_svg(f, "digest-heatmap", "No digest traces (rank-<r>.trace.jsonl) "
              "in this run directory.");
    return;
  }
  if (g->nsteps == 0) {
    empty_svg(f, "digest-heatmap", "The traces hold no step: training "
              "stopped before the first step ended.");
    return;
  }
  heat_rows h;
  if (!heat_rows_make(g, &h)) {
    empty_svg(f, "digest-heatmap", "Out of memory drawing this figure.");
    return;
  }
  const bool folded = g->nranks > REP_FOLD_FROM;
  const int cols = g->nsteps < HEAT_MAX_COLS ? g->nsteps : HEAT_MAX_COLS;
  const int rows = h.rows;
  const int cw = clampi(880 / cols, 3, 48);
  const int ch = clampi(420 / rows, 4, 28);
  /* Folded rows carry range labels: a wider margin, cut at LABEL_MAX. */
  const int left = folded ? 168 : 104, top = 10, bottom = 46;
  const int width = left + cols * cw + 16, height = top + rows * ch + bottom;
  fprintf(f, "<svg id=\"digest-heatmap\" class=\"figure\" xmlns=\"http://www"
          ".w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
          "role=\"img\" aria-label=\"digest agreement per step and rank\"%s>\n",
          width, height, width, height,
          folded ? " data-folded=\"ranks with identical rows share one\"" : "");
  fprintf(f, "<g class=\"cells\">\n");
  char label[512];
  for (int row = 0; row < rows; row++) {
    const int *m = h.members + h.start[row];
    const int k = h.start[row + 1] - h.start[row];
    row_label(&h, row, label, sizeof label);
    for (int col = 0; col < cols; col++) {
      const int s0 = (int)((long long)col * g->nsteps / cols);
      const int s1 = (int)((long long)(col + 1) * g->nsteps / cols);
      int worst = REP_CELL_MISSING, tensors = 0, nomaj = 0;
      for (int i = 0; i < k; i++)
        for (int s = s0; s < s1; s++) {
          int c = g->cell[(size_t)m[i] * g->nsteps + s];
          if (c > worst) worst = c;
          if (g->ntensors[s] > tensors) tensors = g->ntensors[s];
          /* Only cells the rank traced: a gap stays a gap. */
          if (c != REP_CELL_MISSING && g->nomajority &&
              g->nomajority[s] > nomaj)
            nomaj = g->nomajority[s];
        }
      const char *cls = worst == REP_CELL_MISSING ? "missing"
                        : nomaj > 0               ? "nomajority"
                        : worst == 0              ? "agree"
                                                  : "differ";
      const char *fill = worst == REP_CELL_MISSING ? COLOR_MISSING
                         : nomaj > 0               ? COLOR_NOMAJORITY
                         : worst == 0              ? COLOR_AGREE
                                                   : COLOR_DIFFER;
      const int x = left + col * cw, y = top + row * ch;
      fprintf(f, "<rect class=\"cell %s\" x=\"%d\" y=\"%d\" width=\"%d\" "
              "height=\"%d\" fill=\"%s\" stroke=\"#fff\" stroke-width=\"%s\">"
              "<title>", cls, x, y, cw, ch, fill, cw >= 8 && ch >= 8 ? "1" : "0");
      if (s1 - s0 == 1) fprintf(f, "step %" PRId64, g->steps[s0]);
      else fprintf(f, "steps %" PRId64 "-%" PRId64, g->steps[s0], g->steps[s1 - 1]);
      fprintf(f, ", %s: ", label);
      if (worst == REP_CELL_MISSING)
        fprintf(f, "no digests traced");
      else if (nomaj > 0)
        fprintf(f, "no majority: %d of %d tensors split the ranks with no "
                "group larger than every other, so no rank is shown as "
                "agreeing", nomaj, tensors);
      else if (worst == 0)
        fprintf(f, "digests equal rank %d's", g->ref_rank);
      else
        fprintf(f, "%d of %d tensors differ from rank %d", worst, tensors,
                g->ref_rank);
      fprintf(f, "</title></rect>\n");
      if (worst > 0 && cw >= 18 && ch >= 14)
        fprintf(f, "<text class=\"count\" x=\"%d\" y=\"%d\" text-anchor=\"middle"
                "\" fill=\"#fff\">%d</text>\n", x + cw / 2, y + ch / 2 + 4, worst);
    }
  }
  fprintf(f, "</g>\n<g class=\"axis y\">\n");
  const int ystride = ch >= 12 ? 1 : (12 + ch - 1) / ch;
  for (int row = 0; row < rows; row += ystride) {
    const int *m = h.members + h.start[row];
    const int k = h.start[row + 1] - h.start[row];
    bool ref = false;
    for (int i = 0; i < k; i++) ref = ref || m[i] == g->ref_rank;
    row_label(&h, row, label, sizeof label);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", left - 6,
            top + row * ch + ch / 2 + 4);
    /* A long range list is cut on the axis; its <title> has all of it. */
    enum { LABEL_MAX = 24 };
    if (strlen(label) > LABEL_MAX) {
      fprintf(f, "<title>");
      rep_html(f, label);
      fprintf(f, "</title>");
      snprintf(label + LABEL_MAX - 3, 4, "...");
    }
    rep_html(f, label);
    if (ref) fprintf(f, " (ref)");
    fprintf(f, "</text>\n");
  }
  fprintf(f, "</g>\n<g class=\"axis x\">\n");
  const int xstride = (32 + cw - 1) / cw; /* a label every ~32 px */
  for (int col = 0; col < cols; col += xstride) {
    const int s0 = (int)((long long)col * g->nsteps / cols);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%" PRId64
            "</text>\n", left + col * cw + cw / 2, top + rows * ch + 16,
            g->steps[s0]);
  }
  fprintf(f, "<text class=\"title\" x=\"%d\" y=\"%d\" text-anchor=\"middle\">"
          "step</text>\n</g>\n</svg>\n", left + cols * cw / 2,
          top + rows * ch + 38);
  free(h.start);
  free(h.members);
}

/* ---- a line plot */

/* No axis draws more than this many ticks (and labels), whatever its data:
 * a trace's steps may be any int64 and run.json's magnitudes any finite
 * double. Tick values are computed as first + i * step for a counted i,
 * never by adding a step to a running double: that stops advancing once
 * the step is below the value's ulp (steps >= 2^53) and looped forever. */
#define MAX_TICKS 12

typedef struct plot_series {
  const int64_t *x; /* steps, exact: labels near INT64_MAX stay exact */
  const double *y;  /* finite */
  int n;
  bool integer_y;
  const char *ylabel;
  const char *point_label; /* "tensors differing" / "max abs diff" */
} plot_series;

/* 1, 2 or 5 x 10^k, the smallest such step giving at most `ticks` ticks
 * over range; at least 1 for integer data. A finite, positive range in,
 * a finite, positive step out (1 otherwise). */
static double nice_step(double range, int ticks, bool integer) {
  if (!(range > 0) || !isfinite(range)) return 1.0;
  double raw = range / ticks;
  double p = pow(10.0, floor(log10(raw)));
  /* A subnormal raw rounds p to 0: take raw itself, not a nice number. */
  if (!(p > 0) || !isfinite(p)) return raw > 0 ? raw : 1.0;
  double m = raw / p;
  double step = m <= 1 ? p : m <= 2 ? 2 * p : m <= 5 ? 5 * p : 10 * p;
  if (integer && step < 1.0) step = 1.0;
  return step;
}

/* The same on the integers: the smallest 1, 2 or 5 x 10^k with span / step
 * <= ticks, exactly (uint64: any two int64 steps differ by at most
 * 2^64 - 1, and with ticks >= 10 the answer is at most 2 x 10^18). */
static uint64_t nice_step_u64(uint64_t span, int ticks) {
  const uint64_t t = (uint64_t)(ticks > 0 ? ticks : 1);
  const uint64_t need = span / t + (span % t != 0);
  static const uint64_t mult[3] = {1, 2, 5};
  for (uint64_t p = 1;; p *= 10) {
    for (int i = 0; i < 3; i++)
      if (mult[i] * p >= need) return mult[i] * p;
    if (p > UINT64_MAX / 100) return need; /* unreachable for ticks >= 10 */
  }
}

/* The offset from lo of the first multiple of step at or after lo (step
 * from nice_step_u64, at most 2 x 10^18: it fits an int64). */
static uint64_t first_multiple(int64_t lo, uint64_t step) {
  if (step == 0 || step > (uint64_t)INT64_MAX) return 0;
  const int64_t st = (int64_t)step;
  int64_t r = lo % st;
  if (r < 0) r += st;
  return r == 0 ? 0 : (uint64_t)(st - r);
}

static void fmt_num(double v, bool integer, char *buf, size_t n) {
  if ((integer && fabs(v) < 1e15) ||
      (fabs(v) < 1e15 && v == floor(v) && fabs(v) >= 1))
    snprintf(buf, n, "%.0f", v);
  else
    snprintf(buf, n, "%.3g", v);
}

/* Plot geometry. */
enum { PW = 900, PH = 300, PL = 72, PR = 20, PT = 16, PB = 46 };

typedef struct plot_axes {
  /* x: steps xlo..xhi, xlo < xhi; xspan = xhi - xlo, exact in uint64. */
  int64_t xlo, xhi;
  uint64_t xspan;
  /* y, linear: ylo < yhi, finite. */
  double ylo, yhi;
  /* y, log: decades elo < ehi (10^elo .. 10^ehi), within the normal
   * doubles. */
  bool log;
  int elo, ehi;
} plot_axes;

/* A step's distance from xlo, exact (two's complement wrap-around gives
 * the true difference of two int64 as a uint64). */
static uint64_t x_offset(const plot_axes *a, int64_t x) {
  return (uint64_t)x - (uint64_t)a->xlo;
}

static double px_off(uint64_t off, uint64_t span) {
  return PL + (double)off / (double)span * (PW - PL - PR);
}

static double px(const plot_axes *a, int64_t x) {
  return px_off(x_offset(a, x), a->xspan);
}

static double py(const plot_axes *a, double y) {
  double t;
  if (a->log) {
    /* Zero (or less) cannot sit on a log axis: it is drawn on the floor. */
    t = y > 0 ? (log10(y) - a->elo) / (double)(a->ehi - a->elo) : 0.0;
  } else {
    /* Halves: hi - lo overflows when the values span most of the doubles. */
    t = (y * 0.5 - a->ylo * 0.5) / (a->yhi * 0.5 - a->ylo * 0.5);
  }
  if (!(t > 0)) t = 0; /* also NaN */
  if (t > 1) t = 1;
  return PH - PB - t * (PH - PT - PB);
}

static void y_tick(FILE *f, const plot_axes *a, double v, bool integer) {
  char buf[64];
  const double y = py(a, v);
  fmt_num(v, integer, buf, sizeof buf);
  fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\""
          "#eee\"/><text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>"
          "\n", PL, PW - PR, y, y, PL - 6, y + 4, buf);
}

/* The linear y axis over [ymin, ymax] (finite) and its ticks: *st and
 * *nticks when they are nice (ylo + i * st, i < nticks), else *nticks 0 and
 * the caller spaces MAX_TICKS / 2 ticks evenly. */
static void linear_y(plot_axes *a, double ymin, double ymax, bool integer,
                     double *st, int *nticks) {
  a->ylo = ymin < 0 ? ymin : 0;
  double hi = ymax > a->ylo ? ymax : a->ylo;
  /* A span the doubles can tell apart from ylo, so the ticks are distinct:
   * no span (all values equal) gets one unit, as ever; a span below a
   * billionth of |ylo| (huge, nearly equal values) is widened to that. */
  const double least = fabs(a->ylo) * 1e-9;
  if (!(hi > a->ylo)) hi = a->ylo + fmax(1.0, least);
  else if (hi - a->ylo < least) hi = a->ylo + least;
  *nticks = 0;
  *st = nice_step(hi - a->ylo, 5, integer);
  const double k = ceil((hi - a->ylo) / *st);
  a->yhi = a->ylo + k * *st;
  if (isfinite(a->yhi) && a->yhi > a->ylo && k >= 1 && k < MAX_TICKS) {
    *nticks = (int)k + 1;
    return;
  }
  /* The span overflows (values near -DBL_MAX and DBL_MAX) or is otherwise
   * not nice: the data's own bounds. */
  a->yhi = isfinite(hi) ? hi : DBL_MAX;
  if (!(a->yhi > a->ylo)) a->yhi = a->ylo + fmax(1.0, least);
}

/* Draws the plot; `marks` (nmarks steps) get a dashed vertical line labelled
 * with mark_label[i]. */
static void line_plot(FILE *f, const char *id, const plot_series *s,
                      const int64_t *marks, const char *const *mark_label,
                      int nmarks) {
  plot_axes a = {0};
  int64_t xmin = s->x[0], xmax = s->x[0];
  double ymax = -INFINITY, yminpos = INFINITY, ymin = INFINITY;
  for (int i = 0; i < s->n; i++) {
    if (s->x[i] < xmin) xmin = s->x[i];
    if (s->x[i] > xmax) xmax = s->x[i];
    if (s->y[i] > ymax) ymax = s->y[i];
    if (s->y[i] < ymin) ymin = s->y[i];
    if (s->y[i] > 0 && s->y[i] < yminpos) yminpos = s->y[i];
  }
  a.xlo = xmin;
  a.xhi = xmax;
  if (a.xlo == a.xhi) { /* one step: a unit either side, where there is one */
    if (a.xlo > INT64_MIN) a.xlo--;
    if (a.xhi < INT64_MAX) a.xhi++;
  }
  a.xspan = (uint64_t)a.xhi - (uint64_t)a.xlo;
  /* Log scale when the positive values span two decades or more. */
  a.log = isfinite(yminpos) && ymax / yminpos >= 100.0;
  double yst = 1.0;
  int ynticks = 0;
  if (a.log) {
    /* Whole decades, kept to the normal doubles (10^-307 .. 10^308): a
     * subnormal floor would be pow() == 0. */
    double elo = floor(log10(yminpos)), ehi = ceil(log10(ymax));
    a.elo = (int)fmax(elo, -307.0);
    a.ehi = (int)fmin(ehi, 308.0);
    if (a.ehi <= a.elo) {
      if (a.ehi < 308) a.ehi = a.elo + 1;
      else a.elo = a.ehi - 1;
    }
  } else {
    linear_y(&a, ymin, ymax, s->integer_y, &yst, &ynticks);
  }

  fprintf(f, "<svg id=\"%s\" class=\"figure\" xmlns=\"http://www.w3.org/2000/"
          "svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" "
          "aria-label=\"", id, PW, PH, PW, PH);
  rep_html(f, s->ylabel);
  fprintf(f, " per step%s\" data-scale=\"%s\">\n",
          a.log ? " (log scale)" : "", a.log ? "log" : "linear");
  char buf[64];
  /* Grid and y ticks. */
  fprintf(f, "<g class=\"axis y\">\n");
  if (a.log) {
    const int decades = a.ehi - a.elo;
    const int every = (decades + MAX_TICKS - 1) / MAX_TICKS;
    for (int e = a.elo; e <= a.ehi; e += every)
      y_tick(f, &a, pow(10.0, e), false);
  } else if (ynticks > 0) {
    for (int i = 0; i < ynticks; i++)
      y_tick(f, &a, a.ylo + i * yst, s->integer_y);
  } else {
    for (int i = 0; i <= MAX_TICKS / 2; i++) {
      const double t = (double)i / (MAX_TICKS / 2);
      y_tick(f, &a, a.ylo * (1 - t) + a.yhi * t, false);
    }
  }
  fprintf(f, "<text class=\"title\" transform=\"translate(16 %d) rotate(-90)\" "
          "text-anchor=\"middle\">", (PT + PH - PB) / 2);
  rep_html(f, s->ylabel);
  fprintf(f, "%s</text>\n</g>\n<g class=\"axis x\">\n", a.log ? " (log)" : "");
  /* x ticks: multiples of a nice integer step, counted. */
  const uint64_t xst = nice_step_u64(a.xspan, 10);
  const uint64_t first = first_multiple(a.xlo, xst); /* offset from xlo */
  const uint64_t nx = first <= a.xspan ? (a.xspan - first) / xst + 1 : 0;
  for (uint64_t i = 0; i < nx && i <= MAX_TICKS; i++) {
    const uint64_t off = first + i * xst;
    const int64_t v = (int64_t)((uint64_t)a.xlo + off);
    const double x = px_off(off, a.xspan);
    fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#999"
            "\"/><text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%" PRId64
            "</text>\n", x, x, PH - PB, PH - PB + 5, x, PH - PB + 18, v);
  }
  fprintf(f, "<text class=\"title\" x=\"%d\" y=\"%d\" text-anchor=\"middle\">"
          "step</text>\n", (PL + PW - PR) / 2, PH - 8);
  fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#555\"/>"
          "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#555\"/>\n"
          "</g>\n", PL, PW - PR, PH - PB, PH - PB, PL, PL, PT, PH - PB);

  /* Findings' steps. */
  fprintf(f, "<g class=\"marks\">\n");
  for (int i = 0; i < nmarks; i++) {
    if (marks[i] < a.xlo || marks[i] > a.xhi) continue;
    double x = px(&a, marks[i]);
    fprintf(f, "<line class=\"mark\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d"
            "\" stroke=\"" COLOR_DIFFER "\" stroke-dasharray=\"4 3\"><title>",
            x, x, PT, PH - PB);
    rep_html(f, mark_label[i]);
    fprintf(f, "</title></line><text class=\"mark-label\" x=\"%.1f\" y=\"%d\" "
            "fill=\"" COLOR_DIFFER "\">", x + 4, PT + 10 + 12 * (i % 3));
    rep_html(f, mark_label[i]);
    fprintf(f, "</text>\n");
  }
  fprintf(f, "</g>\n<polyline class=\"series\" fill=\"none\" stroke=\"#1565c0"
          "\" stroke-width=\"2\" points=\"");
  for (int i = 0; i < s->n; i++)
    fprintf(f, "%s%.1f,%.1f", i ? " " : "", px(&a, s->x[i]), py(&a, s->y[i]));
  fprintf(f, "\"/>\n<g class=\"points\">\n");
  if (s->n <= 400) {
    for (int i = 0; i < s->n; i++) {
      fmt_num(s->y[i], s->integer_y, buf, sizeof buf);
      fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"><title>"
              "step %" PRId64 ": %s ", px(&a, s->x[i]), py(&a, s->y[i]),
              s->y[i] > 0 ? COLOR_DIFFER : "#1565c0", s->x[i], buf);
      rep_html(f, s->point_label);
      fprintf(f, "</title></circle>\n");
    }
  }
  fprintf(f, "</g>\n</svg>\n");
}

/* ---- divergence over steps */

void rep_svg_divergence(FILE *f, const rep_data *d) {
  const rep_grid *g = &d->grid;
  const rep_run *run = &d->run;
  int n = 0, cap = g->nsteps > run->nfindings ? g->nsteps : run->nfindings;
  int64_t *x = malloc((size_t)(cap ? cap : 1) * sizeof *x);
  double *y = malloc((size_t)(cap ? cap : 1) * sizeof *y);
  int64_t *marks = malloc((size_t)(run->nfindings + 1) * sizeof *marks);
  const char **labels = malloc((size_t)(run->nfindings + 1) * sizeof *labels);
  if (!x || !y || !marks || !labels) {
    empty_svg(f, "divergence-plot", "Out of memory drawing this plot.");
    goto done;
  }
  int nmarks = 0;
  for (int i = 0; i < run->nfindings; i++) {
    const rep_finding *fd = &run->findings[i];
    if (fd->step < 0) continue;
    bool seen = false;
    for (int k = 0; k < nmarks; k++) seen = seen || marks[k] == (int64_t)fd->step;
    if (seen) continue;
    marks[nmarks] = (int64_t)fd->step;
    labels[nmarks++] = fd->kind;
  }
  char ylabel[96];
  plot_series s = {x, y, 0, true, ylabel, "tensors differ"};
  if (g->any && g->nsteps > 0) {
    for (int si = 0; si < g->nsteps; si++) {
      int w = rep_grid_worst(g, si);
      if (w == REP_CELL_MISSING) continue;
      x[n] = g->steps[si];
      y[n++] = w;
    }
    snprintf(ylabel, sizeof ylabel, "tensors differing from rank %d",
             g->ref_rank);
  } else {
    /* No traces: the magnitudes the findings measured. */
    for (int i = 0; i < run->nfindings; i++) {
      const rep_finding *fd = &run->findings[i];
      double v;
      if (fd->step < 0 || !fd->detail ||
          !rep_json_number(json_object_get(fd->detail, "max_abs_diff"), &v) ||
          !isfinite(v))
        continue;
      int k = 0;
      while (k < n && x[k] != (int64_t)fd->step) k++;
      if (k == n) {
        x[n] = (int64_t)fd->step;
        y[n++] = v;
      } else if (v > y[k]) {
        y[k] = v;
      }
    }
    snprintf(ylabel, sizeof ylabel, "max abs diff (from the findings)");
    s.integer_y = false;
    s.point_label = "max abs diff";
  }
  s.n = n;
  if (n == 0)
    empty_svg(f, "divergence-plot", "Nothing to plot: no step traced by "
              "a rank and the reference, and no measured differences.");
  else
    line_plot(f, "divergence-plot", &s, marks, labels, nmarks);
done:
  free(x);
  free(y);
  free(marks);
  free(labels);
}

/* ---- collective timeline */

static const char *op_abbrev(const char *op) {
  if (strcmp(op, "all_reduce") == 0) return "AR";
  if (strcmp(op, "all_gather") == 0) return "AG";
  if (strcmp(op, "all_gatherv") == 0) return "AGV";
  if (strcmp(op, "broadcast") == 0) return "BC";
  if (strcmp(op, "barrier") == 0) return "BAR";
  return "?";
}

static const char *state_name(rep_coll_state s) {
  switch (s) {
    case REP_COLL_ENTERED: return "entered";
    case REP_COLL_DONE: return "done";
    case REP_COLL_FAILED: return "failed";
    default: return "absent";
  }
}

/* At most this many rows of the timeline when ranks are folded; the
 * ranks of further groups share a last row that says so. */
#define TL_MAX_ROWS 48

void rep_svg_timeline(FILE *f, const rep_timeline *t) {
  if (!t->any || t->ncols == 0) {
    empty_svg(f, "collective-timeline", "No ledger dumps: the collective "
              "checker writes rank-<r>.ledger.jsonl only when a collective "
              "gets stuck or fails.");
    return;
  }
  /* The rows: every rank up to REP_FOLD_FROM; beyond, one per group of
   * ranks with identical rows (rep_timeline_groups), drawn from the
   * group's lowest rank. */
  const bool folded = t->nranks > REP_FOLD_FROM;
  int *group_of = malloc((size_t)t->nranks * sizeof *group_of);
  int *low = malloc((size_t)t->nranks * sizeof *low);
  if (!group_of || !low) {
    free(group_of);
    free(low);
    empty_svg(f, "collective-timeline", "Out of memory drawing this figure.");
    return;
  }
  int ngroups = t->nranks;
  if (folded) {
    ngroups = rep_timeline_groups(t, -1, group_of);
  } else {
    for (int r = 0; r < t->nranks; r++) group_of[r] = r;
  }
  for (int r = t->nranks - 1; r >= 0; r--) low[group_of[r]] = r;
  const int shown = ngroups <= TL_MAX_ROWS || !folded ? ngroups
                                                      : TL_MAX_ROWS - 1;
  const int nrows = shown + (shown < ngroups);
  const int cw = 46, ch = clampi(320 / nrows, 6, 26);
  const int left = folded ? 168 : 84, top = 40, bottom = 40;
  const int width = left + t->ncols * cw + 24;
  const int height = top + nrows * ch + bottom;
  fprintf(f, "<svg id=\"collective-timeline\" class=\"figure\" xmlns=\"http://"
          "www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d "
          "%d\" role=\"img\" aria-label=\"collectives per rank around the "
          "stuck one\"%s>\n<g class=\"cells\">\n", width, height, width, height,
          folded ? " data-folded=\"ranks with identical rows share one\"" : "");
  char who[512];
  for (int row = 0; row < shown; row++) {
    const int r = low[row];
    const int y = top + row * ch;
    int k = 1;
    if (folded) {
      char list[480];
      rep_group_text(group_of, t->nranks, row, list, sizeof list, &k);
      snprintf(who, sizeof who, "%s %s", k == 1 ? "rank" : "ranks", list);
    } else {
      snprintf(who, sizeof who, "rank %d", r);
    }
    if (!t->has_dump[r]) {
      fprintf(f, "<rect class=\"nodump\" x=\"%d\" y=\"%d\" width=\"%d\" height"
              "=\"%d\" fill=\"" COLOR_NODUMP "\" stroke=\"#fff\"><title>",
              left, y, t->ncols * cw, ch);
      rep_html(f, who);
      fprintf(f, " left no ledger dump (crashed, killed or never finished)"
              "</title></rect>\n");
      if (ch >= 12)
        fprintf(f, "<text class=\"nodump-label\" x=\"%d\" y=\"%d\">no ledger "
                "dump</text>\n", left + 8, y + ch / 2 + 4);
      continue;
    }
    for (int c = 0; c < t->ncols; c++) {
      const rep_coll *kc = &t->cells[(size_t)r * t->ncols + c];
      const uint64_t seq = t->first + (uint64_t)c;
      const int x = left + c * cw;
      const char *fill = kc->state == REP_COLL_DONE      ? COLOR_DONE
                         : kc->state == REP_COLL_ENTERED ? COLOR_ENTERED
                         : kc->state == REP_COLL_FAILED  ? COLOR_FAILED
                                                         : "#fff";
      fprintf(f, "<rect class=\"coll %s\" x=\"%d\" y=\"%d\" width=\"%d\" "
              "height=\"%d\" fill=\"%s\" stroke=\"%s\"%s><title>",
              state_name(kc->state), x + 1, y + 1, cw - 2, ch - 2, fill,
              kc->state == REP_COLL_ABSENT ? "#bbb" : "#fff",
              kc->state == REP_COLL_ABSENT ? " stroke-dasharray=\"3 2\"" : "");
      rep_html(f, who);
      fprintf(f, ", #%" PRIu64 ": ", seq);
      if (kc->state == REP_COLL_ABSENT) {
        fprintf(f, "never reached (%s dump ends at #%" PRId64 ")",
                k == 1 ? "its" : "their", t->last_seq[r]);
      } else {
        rep_html(f, kc->describe);
        if (kc->site[0]) {
          fprintf(f, " at ");
          rep_html(f, kc->site);
        }
        fprintf(f, ": %s", state_name(kc->state));
        if (kc->status[0]) {
          fprintf(f, " (");
          rep_html(f, kc->status);
          fprintf(f, ")");
        }
      }
      fprintf(f, "</title></rect>\n");
      if (kc->state != REP_COLL_ABSENT && ch >= 14)
        fprintf(f, "<text class=\"op\" x=\"%d\" y=\"%d\" text-anchor=\"middle"
                "\">%s</text>\n", x + cw / 2, y + ch / 2 + 4, op_abbrev(kc->op));
    }
  }
  if (shown < ngroups) {
    /* The ranks of the groups not drawn, in one grey row. */
    int nrest = 0;
    for (int r = 0; r < t->nranks; r++) nrest += group_of[r] >= shown;
    const int y = top + shown * ch;
    fprintf(f, "<rect class=\"more\" x=\"%d\" y=\"%d\" width=\"%d\" height="
            "\"%d\" fill=\"#eeeeee\" stroke=\"#fff\"><title>%d more ranks in "
            "%d other patterns: see the stuck-collective table and the ledger "
            "dumps</title></rect>\n", left, y, t->ncols * cw, ch, nrest,
            ngroups - shown);
    if (ch >= 12)
      fprintf(f, "<text class=\"more-label\" x=\"%d\" y=\"%d\">%d more ranks "
              "in %d other patterns</text>\n", left + 8, y + ch / 2 + 4, nrest,
              ngroups - shown);
  }
  fprintf(f, "</g>\n<g class=\"axis y\">\n");
  const int ystride = ch >= 12 ? 1 : (12 + ch - 1) / ch;
  for (int row = 0; row < nrows; row += ystride) {
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", left - 6,
            top + row * ch + ch / 2 + 4);
    if (!folded) {
      fprintf(f, "rank %d</text>\n", low[row]);
      continue;
    }
    if (row == shown) {
      fprintf(f, "the others</text>\n");
      continue;
    }
    int k = 0;
    char list[480];
    rep_group_text(group_of, t->nranks, row, list, sizeof list, &k);
    snprintf(who, sizeof who, "%s %s", k == 1 ? "rank" : "ranks", list);
    enum { LABEL_MAX = 24 };
    if (strlen(who) > LABEL_MAX) {
      fprintf(f, "<title>");
      rep_html(f, who);
      fprintf(f, "</title>");
      snprintf(who + LABEL_MAX - 3, 4, "...");
    }
    rep_html(f, who);
    fprintf(f, "</text>\n");
  }
  fprintf(f, "</g>\n<g class=\"axis x\">\n");
  for (int c = 0; c < t->ncols; c++)
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">#%" PRIu64
            "</text>\n", left + c * cw + cw / 2, top + nrows * ch + 16,
            t->first + (uint64_t)c);
  fprintf(f, "<text class=\"title\" x=\"%d\" y=\"%d\" text-anchor=\"middle\">"
          "collective sequence number</text>\n</g>\n",
          left + t->ncols * cw / 2, top + nrows * ch + 34);
  if (t->has_focus && t->focus >= t->first &&
      t->focus < t->first + (uint64_t)t->ncols) {
    const int x = left + (int)(t->focus - t->first) * cw;
    fprintf(f, "<g class=\"focus\"><rect class=\"stuck\" x=\"%d\" y=\"%d\" "
            "width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#212121\" "
            "stroke-width=\"3\"/><text class=\"stuck-label\" x=\"%d\" y=\"%d\" "
            "text-anchor=\"middle\">stuck: #%" PRIu64 "</text></g>\n", x - 1,
            top - 4, cw + 2, nrows * ch + 8, x + cw / 2, top - 12, t->focus);
  }
  fprintf(f, "</svg>\n");
  free(group_of);
  free(low);
}
