"""``switchyard route``: show how a route decides a request, without the answer call."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from switchyard.cli._common import HelpFormatter, add_config_arg, fail, load_or_exit

if TYPE_CHECKING:
    from switchyard.api import Switchyard
    from switchyard.engine.records import DecisionRecord

_EPILOG = """\
Examples:
  switchyard route -c router.yaml -m agent --message "rename this variable"
  switchyard route -c router.yaml -m agent --request body.json --session s-1 --json

--request takes a Chat Completions body (JSON); its "model" is replaced by -m when given.
Routers that consult a judge model call it; the judge's cost is shown.
The decision is not booked: nothing is written to the config's decision_log (a running
proxy may be writing it) and no feedback can match it. With --session, the session's
state is read and updated as a real request would (with state.backend: redis, the
deployment's own sessions).
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for name in ("route", "explain"):
        p = sub.add_parser(
            name,
            help="show the routing decision for a request (no answer call)" if name == "route" else "alias of 'route'",
            description="Run a route's decision for one request and print it.",
            epilog=_EPILOG,
            formatter_class=HelpFormatter,
        )
        add_config_arg(p)
        p.add_argument("-m", "--model", help="route id (default: the request's model)")
        group = p.add_mutually_exclusive_group(required=True)
        group.add_argument("--message", help="a single user message")
        group.add_argument("--request", metavar="FILE", help="a Chat Completions request body (JSON)")
        p.add_argument("--session", help="session id (as x-switchyard-session-id)")
        p.add_argument("--json", action="store_true", help="print the decision record as JSON")
        p.set_defaults(func=run)


def _body(args: argparse.Namespace) -> dict[str, Any] | None:
    if args.message is not None:
        body: dict[str, Any] = {"messages": [{"role": "user", "content": args.message}]}
    else:
        try:
            body = json.loads(Path(args.request).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            print(f"error: cannot read {args.request}: {exc}", file=sys.stderr)
            return None
    if args.model:
        body["model"] = args.model
    return body


async def _decide(sy: Switchyard, body: dict[str, Any], session: str | None) -> DecisionRecord:
    headers = {"x-switchyard-session-id": session} if session else {}
    # Unlike Switchyard.decide, not to the sinks: an inspection run is no decision the agent
    # acted on, and must not land in the decision log, metrics or experiment figures.
    try:
        return await sy.engine.decide(sy.build_request(**body), headers, emit=False)
    finally:
        await sy.aclose()


def run(args: argparse.Namespace) -> int:
    loaded = load_or_exit(args.config)
    if loaded is None:
        return 1
    body = _body(args)
    if body is None:
        return 1
    if not body.get("model"):
        return fail(f"name a route with -m; routes: {', '.join(loaded.routes)}")
    from switchyard.api import Switchyard
    from switchyard.protocol.errors import SwitchyardError

    sy = Switchyard(loaded)
    try:
        record = asyncio.run(_decide(sy, body, args.session))
    except SwitchyardError as exc:
        return fail(exc.message)
    finally:
        sy.close()  # the decision log's file, opened at start
    if args.json:
        print(json.dumps(record.to_dict(), indent=2))
        return 0
    print(f"route      {record.route} ({record.router})")
    print(f"selected   {record.selected} -> {record.selected_model}")
    print(f"fallbacks  {', '.join(record.candidates[1:]) or '-'}")
    print(f"source     {record.source}" + (f" — {record.reason}" if record.reason else ""))
    if record.score is not None:
        print(f"score      {record.score:.3f}")
    if record.router_cost.calls:
        rc = record.router_cost
        print(f"judge      {rc.calls} call(s), {rc.input_tokens}+{rc.output_tokens} tokens, ${rc.cost_usd:.6f}")
    print(f"overhead   {record.overhead_ms:.2f} ms")
    return 0
