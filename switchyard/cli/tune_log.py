"""``switchyard tune --decision-log``: a route's setting fitted on the user's own logged sessions."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from switchyard.cli._common import fail, json_objects
from switchyard.config.load import LoadedConfig

LOG_EPILOG = """
Your own sessions (docs/rollout.md, step 4):
  switchyard tune -c router.yaml --route agent --decision-log decisions.jsonl \\
      --grid threshold=-0.1,0,0.05,0.1,0.2 --max-points-lost 2
  switchyard tune -c coding-agent.yaml --route agent --decision-log decisions.jsonl \\
      --grid persistent_errors.repeats=2,3,4 --outcome score
  switchyard tune ... --feedback outcomes.jsonl --folds 5 --write router-tuned.yaml

--decision-log reads serve --decision-log's records and the feedback lines in it (plus
--feedback FILE), joined by tenant and session or request id, the latest report winning. It
tunes a type: trajectory route's threshold (each turn's logged score, the net gain of switching,
against each value) or a type: stage_router route's confidence_threshold,
persistent_errors.repeats or turn_budget (each turn's logged signals and run counts decided again
by the router's own rules; no classifier, no hold_turns). A session switched earlier than logged
is scored with the mean outcome of the control/shadow sessions (served by the capable model
whole), so the log needs at least --min-capable of them: keep experiment: {control_share: 0.1}.
Sessions are split into --folds folds; each fold is scored under the value chosen on the others,
next to the current one. Below --min-sessions routed sessions with feedback, when the
intervals overlap, or when those held-out rows show the change losing on one measure without a
sure gain on the other, the current value is kept.
"""


def add_log_args(p: argparse.ArgumentParser) -> None:
    """The flags of tuning on a decision log."""
    g = p.add_argument_group("your own sessions (with --decision-log)")
    g.add_argument("--decision-log", metavar="LOG", help="serve --decision-log's file: records and feedback lines")
    g.add_argument("--feedback", metavar="FILE", help="more feedback lines (JSONL, POST /v1/feedback's fields)")
    g.add_argument("--tenant", help="only this tenant's sessions and reports")
    g.add_argument(
        "--outcome", choices=("resolved", "score", "reward"), default="resolved", help="which report field counts"
    )
    g.add_argument("--folds", type=int, default=5, metavar="K", help="cross-validation folds by session (default 5)")
    g.add_argument(
        "--min-sessions",
        type=int,
        default=30,
        metavar="N",
        help="fewest routed sessions with feedback to change anything (default 30)",
    )
    g.add_argument(
        "--min-capable",
        type=int,
        default=10,
        metavar="N",
        help="fewest control/shadow sessions with feedback (the outcome after a would-be switch; default 10)",
    )


def run_log(args: argparse.Namespace, loaded: LoadedConfig) -> int:
    """Tunes on the log; prints the config diff, the held-out rows and notes."""
    from switchyard.engine.joined_log import join_log
    from switchyard.eval.agent_replay import parse_sweep
    from switchyard.eval.log_stage import current_value, stage_decider
    from switchyard.eval.log_tune import LogTuneError, sessions_from, trajectory_decider, tune_log
    from switchyard.eval.paired import PairedError

    if args.folds < 2:
        return fail("--folds must be >= 2")
    if args.min_capable < 1:
        return fail("--min-capable must be >= 1: the outcome after a would-be switch comes from those sessions")
    route = loaded.raw.get("routes", {}).get(args.route)
    kind = route.get("type") if isinstance(route, dict) else None
    if kind not in ("trajectory", "stage_router"):
        return fail(
            f"routes.{args.route}.type is {kind!r}: tune --decision-log replays a type: trajectory route's "
            "threshold or a type: stage_router route's confidence_threshold, persistent_errors.repeats or "
            "turn_budget (their records carry what each turn was decided on); tune other routers with --suite"
        )
    assert isinstance(route, dict)
    try:
        key, values = parse_sweep(args.grid)
    except PairedError as exc:
        return fail(str(exc))
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return fail(f"--grid: tune --decision-log takes numbers ({key}=v1,v2,...)")
    try:
        feedback = list(json_objects(args.feedback)) if args.feedback else []
        joined = join_log(json_objects(args.decision_log), tenant=args.tenant, route=args.route, feedback=feedback)
    except OSError as exc:
        return fail(f"cannot read {exc.filename}: {exc.strerror or exc}")
    if kind == "stage_router":
        try:
            decide = stage_decider(route, key)
            current: Any = current_value(route, key)
        except LogTuneError as exc:
            return fail(f"routes.{args.route}: {exc}")
    else:
        decide = trajectory_decider
        if key != "threshold":
            return fail("--grid: on a type: trajectory route tune --decision-log takes threshold=v1,v2,...")
        current = route.get("threshold")
        if isinstance(current, dict):
            return fail(
                f"routes.{args.route}.threshold is {current!r}: a controlled threshold (target_capable_share) "
                "moves with traffic, so a fixed one cannot be replayed against it; set a number first"
            )
        if current is None:  # the checkpoint's default: the one the logged decisions compared with
            current = _logged_threshold(joined)
            if current is None:
                return fail(f"routes.{args.route}.threshold is unset and no record says which one served; set it")
    data = sessions_from(joined, capable_target=str(route.get("capable")), outcome=args.outcome)
    try:
        result = tune_log(
            data,
            [float(v) for v in values],
            float(current),
            max_points_lost=args.max_points_lost,
            folds=args.folds,
            min_sessions=args.min_sessions,
            min_capable=args.min_capable,
            resamples=args.bootstrap,
            seed=args.seed,
            decide=decide,
        )
    except LogTuneError as exc:
        return fail(f"{exc}; keeping routes.{args.route}.{key}: {current}")
    result["route"] = args.route
    result["key"] = key
    result["unmatched_reports"] = len(joined.unmatched)
    if args.write and result["verdict"] == "changed":
        chosen = result["chosen"]
        value = int(chosen) if key != "threshold" and key != "confidence_threshold" else chosen
        written = write_setting(args.config, args.write, args.route, key, value)
        if isinstance(written, int):
            return written
        result["wrote"] = written
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        _print(result, Path(args.decision_log).name)
    return 0


def write_setting(source: str, target: str, route: str, key: str, value: Any) -> str | int:
    """Writes ``source`` with ``routes.<route>.<key>`` set to ``value`` to ``target``.

    Returns:
        ``target``, or the exit status after printing why it could not be written.
    """
    from switchyard.eval.yaml_edit import YamlEditError, set_route_key

    if not isinstance(value, int | float) or isinstance(value, bool):
        return fail(f"--write sets numbers only; set {key}: {value!r} in {target} by hand")
    try:
        text = set_route_key(Path(source).read_text(encoding="utf-8"), route, key, value)
    except YamlEditError as exc:
        return fail(f"cannot write {target}: {exc}")
    Path(target).write_text(text, encoding="utf-8")
    return target


def _logged_threshold(joined: Any) -> float | None:
    from collections import Counter

    seen: Counter[float] = Counter()
    for session in joined.sessions.values():
        for record in session.records:
            details = record.get("details")
            value = details.get("threshold") if isinstance(details, dict) else None
            if isinstance(value, int | float) and not isinstance(value, bool):
                seen[float(value)] += 1
    return seen.most_common(1)[0][0] if seen else None


def _iv(row: dict[str, Any], key: str, pct: bool) -> str:
    found = row["intervals"].get(key)
    if not found:
        return ""
    lo, hi = found
    return f"[{100 * lo:+.0f}, {100 * hi:+.0f}]" if pct else f"[{lo:+.1f}, {hi:+.1f}]"


def _line(name: str, row: dict[str, Any]) -> str:
    return (
        f"  {name:<26} {row['points_lost']:>+8.1f} {_iv(row, 'points_lost', False):>14} "
        f"{100 * row['cost_saved']:>6.0f}% {_iv(row, 'cost_saved', True):>11}"
    )


def _print(d: dict[str, Any], log: str) -> None:
    head = f"  {d['key']:<26} {'pts lost':>8} {'[95%]':>14} {'saved':>7} {'[95%]':>11}"
    print(
        f"{log}: {d['sessions']} routed sessions with a {d['outcome']!r} report, {d['capable_sessions']} "
        f"control/shadow ({d['outcome']} {d['capable_rate']:.1%}: the outcome after a would-be switch), "
        f"{d['without_outcome']} without a report, {d['unmatched_reports']} report(s) matching no session"
    )
    print("all sessions: points lost / cost saved against always-capable")
    print(head)
    for r in d["rows"]:
        mark = " (current)" if r["current"] else ""
        print(_line(f"{r['value']:g}{mark}", r) + f"  moved {r['moved']}, censored {r['censored']}")
    print(f"\nrule: the most cost saved within {d['max_points_lost']:g} points lost -> {d['verdict']}")
    key = f"routes.{d['route']}.{d['key']}"
    if d["verdict"] == "changed":
        print(f"  - {key}: {d['current']:g}\n  + {key}: {d['chosen']:g}")
    else:
        print(f"  keeping {key}: {d['current']:g}")
    print(f"\nheld out ({d['folds']} folds by session; each fold scored under the value chosen on the others)")
    print(head)
    for r in d["held_out"]:
        print(_line(r["name"], r))
    diff = d["held_out_difference"]
    iv = diff["intervals"]
    if iv:
        print(
            f"  tuned - current: points lost {diff['points_lost']:+.1f} [{iv['points_lost'][0]:+.1f}, "
            f"{iv['points_lost'][1]:+.1f}], cost saved {100 * diff['cost_saved']:+.1f} pts "
            f"[{100 * iv['cost_saved'][0]:+.1f}, {100 * iv['cost_saved'][1]:+.1f}]"
        )
    b = d["bootstrap"]
    print(f"intervals: session bootstrap, {b['resamples']} resamples, seed {b['seed']}, 95% percentile")
    for note in d["notes"]:
        print(f"note: {note}")
    if "wrote" in d:
        print(f"wrote {d['wrote']}")
