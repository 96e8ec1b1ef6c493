"""``switchyard serve``: the OpenAI-compatible proxy."""

from __future__ import annotations

import argparse

from switchyard.cli._common import HelpFormatter, add_config_arg, fail, load_or_exit, setup_logging

_EPILOG = """\
Examples:
  switchyard serve -c router.yaml
  switchyard serve -c router.yaml --port 8080 --decision-log decisions.jsonl

Point an agent at it:
  OpenAI SDK / LangChain / Hermes Agent:  base_url = http://127.0.0.1:4000/v1, model = <route name>
  curl http://127.0.0.1:4000/v1/models     # lists the routes

Endpoints: POST /v1/chat/completions (JSON and SSE), GET /v1/models, GET /health,
GET /v1/stats (reliability counters, USD spent and saved), GET /metrics (Prometheus).
Several replicas: state.backend: redis (see docs/deployment.md).
Every response carries x-switchyard-selected-model, x-switchyard-route,
x-switchyard-decision-source and x-switchyard-overhead-ms.
The default bind is 127.0.0.1: the proxy has no inbound auth, so expose it deliberately.
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "serve",
        help="run the OpenAI-compatible routing proxy",
        description="Serve a router config as an HTTP proxy speaking the OpenAI API.",
        epilog=_EPILOG,
        formatter_class=HelpFormatter,
    )
    add_config_arg(p)
    p.add_argument("--host", default="127.0.0.1", help="address to bind")
    p.add_argument("-p", "--port", type=int, default=4000, help="port to bind")
    p.add_argument("--decision-log", metavar="FILE", help="append one JSON decision record per request")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    setup_logging(args.log_level)
    loaded = load_or_exit(args.config)
    if loaded is None:
        return 1
    from switchyard.api import Switchyard
    from switchyard.config.load import ConfigError

    try:
        sy = Switchyard(loaded, decision_log=args.decision_log)
    except ConfigError as exc:
        return fail(f"cannot build {args.config}:\n  " + str(exc).replace("\n", "\n  "))
    try:
        from switchyard.server.runner import serve
    except ImportError:
        return fail("the proxy needs the server extra: pip install 'switchyard-router[server]'")
    print(
        f"switchyard: serving {len(sy.routes)} route(s) ({', '.join(sy.routes)}) on http://{args.host}:{args.port}/v1",
        flush=True,
    )
    serve(sy, args.host, args.port, log_level=args.log_level)
    return 0
