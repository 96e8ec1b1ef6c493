"""``switchyard dashboard``: the dashboard page over a decision log, offline."""

from __future__ import annotations

import argparse

from switchyard.cli._common import HelpFormatter, fail, load_or_exit

_EPILOG = """\
Examples:
  switchyard serve -c router.yaml --decision-log decisions.jsonl     # writes the log
  switchyard dashboard --log decisions.jsonl                         # then open http://127.0.0.1:4001/dashboard/
  switchyard dashboard --log replay.jsonl -c router.yaml --port 8088 # re-price tiers and baselines

The same page as `switchyard serve` with server.dashboard.enabled, over the log instead of live
traffic: "since start" is the whole log, the window ends at its last record (and spans the whole
log unless --window-s says otherwise), and the session explorer shows every session in it. Logs
carry no prompt text (previews stay in the live proxy's memory), so timelines show none.
It answers loopback clients only (no keys offline). See docs/deployment.md#dashboard.
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "dashboard",
        help="serve the dashboard and session explorer over a decision log (offline)",
        description="Serve the built-in dashboard over a decision log (switchyard serve --decision-log, replay, eval).",
        epilog=_EPILOG,
        formatter_class=HelpFormatter,
    )
    p.add_argument("--log", required=True, metavar="DECISIONS.jsonl", help="decision log to show")
    p.add_argument("-c", "--config", metavar="FILE", help="router config: re-price tiers and baselines from it")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (loopback clients only are answered)")
    p.add_argument("-p", "--port", type=int, default=4001, help="port to bind")
    p.add_argument("--window-s", type=float, metavar="SECONDS", help="default window (default: the log's span)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from switchyard.engine.records import DecisionRecord

    reprice = None
    if args.config:
        loaded = load_or_exit(args.config)
        if loaded is None:
            return 1
        from switchyard.config.build import build_pricing

        reprice = build_pricing(loaded)
    if args.window_s is not None and args.window_s <= 0:
        return fail("--window-s must be positive")
    try:
        from switchyard._listen import bind
        from switchyard.server.dashboard.offline import OfflineApp, offline_views, read_feedback, read_log
    except ImportError:
        return fail("the dashboard needs the server extra: pip install 'switchyard-router[server]'")
    try:
        records: list[DecisionRecord]
        records, warnings = read_log(args.log, reprice=reprice)
        outcomes = read_feedback(args.log)
    except OSError as exc:
        return fail(f"cannot read {args.log}: {exc.strerror or exc}")
    for warning in warnings[:20]:
        print(f"warning: {warning}")
    if len(warnings) > 20:
        print(f"warning: … and {len(warnings) - 20} more unreadable line(s)")
    if not records:
        return fail(f"{args.log} holds no decision records")
    import uvicorn

    app = OfflineApp(offline_views(records, args.log, window_s=args.window_s, outcomes=outcomes))
    sock = bind(args.host, args.port)
    host, port = sock.getsockname()[:2]
    print(
        f"switchyard: dashboard over {len(records)} record(s) of {args.log} on http://{host}:{port}/dashboard/",
        flush=True,
    )
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    server.run(sockets=[sock])
    return 0
