"""bench_stats.py: how every Python benchmark summarises and reports a
figure; the twin of bench_stats.h (the C benches'), with the same rules and
the same JSON keys.

Every bench times its cases in interleaved repetitions (case A, case B,
baseline, A, B, baseline, ...; at least MIN_REPS of them), validates its
results before timing, and reports each figure as the median of the
repetitions with their min and max. A ratio against a baseline is the
median of the per-repetition ratios (each repetition's case divided by the
baseline timed beside it), so load that falls on one repetition falls on
both sides of its ratio.

Text goes to stdout for people. With --json a bench prints instead one JSON
object per line per figure (print_figure):
  {"bench": "bench_bridge", "figure": "job_step_i1", "ranks": 2,
   "value": 15.9, "min": 15.1, "max": 17.0, "unit": "ms/step", "reps": 7,
   "baseline": 15.2, "baseline_name": "plain", "ratio": 1.04,
   "ratio_min": 0.98, "ratio_max": 1.09}
where shape, ranks, tokens, baseline* and ratio* appear only when they
apply, and no other key appears. Used as a module by the benches in this
directory (they put it on sys.path)."""
from __future__ import annotations

import json
import math
import statistics
import sys
from typing import IO, Any, Dict, NamedTuple, Optional, Sequence

MIN_REPS = 7


class Summary(NamedTuple):
    """Median, min and max of n values (n = 0: no figure, all NaN)."""
    median: float
    min: float
    max: float
    n: int


def summarize(values: Sequence[float]) -> Summary:
    if not values:
        return Summary(math.nan, math.nan, math.nan, 0)
    return Summary(statistics.median(values), min(values), max(values),
                   len(values))


def ratios(num: Sequence[float], den: Sequence[float]) -> Summary:
    """Summary of the per-repetition ratios num[i] / den[i]."""
    if len(num) != len(den):
        raise ValueError(f"ratios: {len(num)} values against {len(den)} "
                         "baselines: each repetition needs both")
    return summarize([a / b for a, b in zip(num, den)])


def differences(num: Sequence[float], den: Sequence[float]) -> Summary:
    """Summary of the per-repetition differences num[i] - den[i]: what a
    case costs over its baseline, in the figures' unit (a cost per call
    whose target is absolute, not a ratio)."""
    if len(num) != len(den):
        raise ValueError(f"differences: {len(num)} values against "
                         f"{len(den)} baselines: each repetition needs both")
    return summarize([a - b for a, b in zip(num, den)])


def spread(s: Summary, digits: int = 3) -> str:
    """"median (min-max)", for the text report."""
    return f"{s.median:.{digits}f} ({s.min:.{digits}f}-{s.max:.{digits}f})"


def _number(v: float) -> Optional[float]:
    """bench_stats.h's %.6g, and null for what is not finite."""
    if v is None or not math.isfinite(v):
        return None
    return float(f"{v:.6g}")


def figure(bench: str, name: str, unit: str, value: Summary, *,
           shape: Optional[str] = None, ranks: Optional[int] = None,
           tokens: Optional[int] = None,
           baseline: Optional[Summary] = None,
           baseline_name: Optional[str] = None,
           ratio: Optional[Summary] = None) -> Dict[str, Any]:
    """One figure as the JSON object bench_print_figure writes, keys in its
    order; baseline, baseline_name and ratio go together."""
    if (baseline_name is None) != (baseline is None) or \
            (baseline_name is None) != (ratio is None):
        raise ValueError(f"figure {name}: baseline, baseline_name and ratio "
                         "are given together or not at all")
    out: Dict[str, Any] = {"bench": bench, "figure": name}
    if shape:
        out["shape"] = shape
    if ranks:
        out["ranks"] = ranks
    if tokens:
        out["tokens"] = tokens
    out.update(value=_number(value.median), min=_number(value.min),
               max=_number(value.max), unit=unit, reps=value.n)
    if baseline_name is not None:
        assert baseline is not None and ratio is not None
        out.update(baseline=_number(baseline.median),
                   baseline_name=baseline_name,
                   ratio=_number(ratio.median),
                   ratio_min=_number(ratio.min),
                   ratio_max=_number(ratio.max))
    return out


def print_figure(fig: Dict[str, Any], out: IO[str] = sys.stdout) -> None:
    """fig as one JSON line, flushed."""
    out.write(json.dumps(fig) + "\n")
    out.flush()
