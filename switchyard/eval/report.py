"""Plain-text tables for evaluation results.

Layer: ``eval``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from switchyard.eval.evaluate import EvalResult
from switchyard.eval.metrics import Row
from switchyard.eval.reliability import render as reliability_lines


def pct(value: float | None, digits: int = 1) -> str:
    """``0.4213`` → ``42.1%``; ``None`` → ``-``."""
    return "-" if value is None else f"{value * 100:.{digits}f}%"


def num(value: float | None, digits: int = 3) -> str:
    """A fixed-point number or ``-``."""
    return "-" if value is None else f"{value:.{digits}f}"


def usd(value: float | None) -> str:
    """Dollars with sensible precision, or ``-``."""
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"${value:,.0f}"
    if abs(value) >= 1:
        return f"${value:,.2f}"
    return f"${value:.4f}"


def two_tier_table(rows: Sequence[Row]) -> list[str]:
    """Rows with quality, capable share, cost, PGR, APGR, CPT(50%), CPT(80%)."""
    width = max(len(r.name) for r in rows) + 2
    head = f"{'':{width}}{'quality':>9}{'capable':>9}{'cost':>12}{'PGR':>8}{'APGR':>8}{'CPT50':>8}{'CPT80':>8}"
    lines = [head]
    for r in rows:
        lines.append(
            f"{r.name:{width}}{num(r.quality, 4):>9}{pct(r.capable_share):>9}{usd(r.cost_usd):>12}"
            f"{num(r.pgr):>8}{num(r.apgr):>8}{pct(r.cpt50):>8}{pct(r.cpt80):>8}"
        )
    return lines


def target_table(rows: Sequence[Row]) -> list[str]:
    """Rows with quality, cost and the share of each target."""
    width = max(len(r.name) for r in rows) + 2
    targets = list(dict.fromkeys(t for r in rows for t in r.shares))
    head = f"{'':{width}}{'quality':>9}{'cost':>12}" + "".join(f"{t:>{max(len(t), 6) + 2}}" for t in targets)
    lines = [head]
    for r in rows:
        shares = "".join(f"{pct(r.shares.get(t)):>{max(len(t), 6) + 2}}" for t in targets)
        lines.append(f"{r.name:{width}}{num(r.quality, 4):>9}{usd(r.cost_usd):>12}{shares}")
    return lines


def group_table(result: EvalResult) -> list[str]:
    """One row per group: items, outcome type, route quality, capable share, APGR, CPT, saved at 95%."""
    width = max(len(g.name) for g in result.groups) + 2
    head = (
        f"{'':{width}}{'n':>6}  {'outcome':<12}{'quality':>9}{'capable':>9}{'always-cap':>11}{'APGR':>8}"
        f"{'CPT50':>8}{'CPT80':>8}{'saved@95':>10}"
    )
    lines = [head]
    for g in result.groups:
        r = g.report
        saved = None
        if r.at95 is not None:
            if r.usd_saved_at_95 is not None and r.capable_cost_usd:
                saved = r.usd_saved_at_95 / r.capable_cost_usd
            else:
                saved = 1 - r.at95.share
        kinds = ",".join(g.outcome_types)[:11]
        lines.append(
            f"{g.name:{width}}{r.n:>6}  {kinds:<12}{num(r.quality, 4):>9}{pct(r.capable_share):>9}"
            f"{num(r.capable_quality, 4):>11}{num(r.apgr):>8}{pct(r.cpt50):>8}{pct(r.cpt80):>8}{pct(saved):>10}"
        )
    return lines


def render(result: EvalResult) -> str:
    """The human-readable report of ``switchyard eval``."""
    skipped = result.skipped
    lines = [
        f"route {result.route} ({result.router}) on {result.dataset}: "
        f"{result.row.n} item(s) decided, {len(skipped)} skipped",
        "models: " + ", ".join(f"{t} = {m}" for t, m in result.mapping.items()),
    ]
    if result.tiers is not None:
        t = result.tiers
        lines.append(f"tiers: capable = {t.capable}, efficient = {t.efficient} (from {t.origin})")
    lines.append("")
    rows = [result.row, *result.baselines]
    tt = result.two_tier
    table = two_tier_table(rows) if tt is not None else target_table(rows)
    lines += ["  " + line for line in table]
    lines.append("")
    lines.append("share per target: " + ", ".join(f"{t} {pct(s)}" for t, s in result.row.shares.items()))
    if result.calibration is not None:
        cal = result.calibration
        apgr = f"APGR {num(tt.apgr)}, " if tt is not None else ""
        lines.append("")
        lines.append(
            f"{apgr}ECE {num(cal.ece)}: calibration of the route's P(success) per target against good-enough "
            f"outcomes ({cal.n} item-target pairs)"
        )
        lines += ["  " + line for line in reliability_lines(cal, "reliability")[1:]]
    if result.groups:
        lines.append("")
        lines.append(f"per {result.group_key} (each in its own units):")
        lines += ["  " + line for line in group_table(result)]
    if result.router_cost_usd:
        lines.append(f"router's own model calls: {usd(result.router_cost_usd)} (included in the route's cost)")
    if tt is not None:
        lines.append(_at95(result))
        if tt.swept:
            lines.append(
                f"curve: {len(tt.curve)} threshold points from the route's scores (APGR and CPT over the full sweep)"
            )
    if skipped:
        reasons = Counter(r.decided.skipped for r in skipped)
        lines.append("")
        lines.append(f"skipped {len(skipped)} item(s):")
        for why, n in reasons.most_common(5):
            ids = [r.id for r in skipped if r.decided.skipped == why][:3]
            more = ", …" if n > 3 else ""
            lines.append(f"  {n} x {why} (e.g. {', '.join(ids)}{more})")
    if result.notes:
        lines.append("")
        lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)


def _at95(result: EvalResult) -> str:
    tt = result.two_tier
    assert tt is not None
    head = "at >= 95% of always-capable's quality: "
    if tt.at95 is None:
        return head + "not reached" + (" (no threshold reaches it)" if tt.swept else " by the route as configured")
    where = f"capable share {pct(tt.at95.share)}, quality {num(tt.at95.quality, 4)}"
    if tt.usd_saved_at_95 is not None and tt.capable_cost_usd:
        frac = tt.usd_saved_at_95 / tt.capable_cost_usd
        return head + f"{where}; saves {usd(tt.usd_saved_at_95)} ({pct(frac)}) against always-capable"
    return head + f"{where}; saves {pct(1 - tt.at95.share)} of capable calls (no dollar costs)"
