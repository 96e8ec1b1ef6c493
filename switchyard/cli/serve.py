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

Endpoints: POST /v1/chat/completions, /v1/messages, /v1/messages/count_tokens, /v1/responses
(JSON and SSE), GET /v1/models, /v1/stats, /health, /openapi.json.
Every response carries x-switchyard-selected-model, x-switchyard-route,
x-switchyard-decision-source and x-switchyard-overhead-ms.

Security (docs/security.md): the default bind is 127.0.0.1. Without server.api_keys only
loopback Host names (and server.allowed_hosts) are answered, browser Origins are refused unless
listed in server.allowed_origins, and bodies must be application/json. Create keys with
`switchyard keys create`. Slow clients are cut (server.client_timeouts); on SIGTERM open
requests get server.drain_s, then end with an error event.
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
        from switchyard.server.auth import KeyRing
        from switchyard.server.runner import serve
    except ImportError:
        return fail("the proxy needs the server extra: pip install 'switchyard-router[server]'")
    settings = loaded.config.server
    try:
        keys = KeyRing(settings.api_keys)
    except ValueError as exc:
        return fail(str(exc))
    if not keys and not _loopback(args.host):
        print(
            f"switchyard: warning: binding {args.host} without server.api_keys; only loopback Host names "
            f"and server.allowed_hosts are answered (see docs/security.md)",
            flush=True,
        )
    print(
        f"switchyard: serving {len(sy.routes)} route(s) ({', '.join(sy.routes)}) on http://{args.host}:{args.port}/v1",
        flush=True,
    )
    serve(sy, args.host, args.port, log_level=args.log_level)
    return 0


def _loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
