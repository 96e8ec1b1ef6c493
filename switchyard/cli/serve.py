"""``switchyard serve``: the OpenAI-compatible proxy."""

from __future__ import annotations

import argparse
import os
import socket
from typing import TYPE_CHECKING

from switchyard._listen import bind
from switchyard.cli._common import (
    HelpFormatter,
    add_config_arg,
    build_or_fail,
    cannot_listen,
    fail,
    freeze_startup,
    load_or_exit,
    setup_logging,
    show_access_log,
    uvicorn_level,
)

if TYPE_CHECKING:
    from switchyard.config.load import LoadedConfig

_EPILOG = """\
Examples:
  switchyard serve -c router.yaml
  switchyard serve -c router.yaml --port 8080 --decision-log decisions.jsonl --access-log
  switchyard fake-upstream &  switchyard serve -c examples/router.yaml   # try it without keys
  switchyard serve -c router.yaml --host 0.0.0.0 --workers auto           # every core of the machine

Endpoints (every inference endpoint takes any route as its model, in JSON or SSE):
  POST /v1/chat/completions          OpenAI Chat Completions  (Hermes Agent, LangChain, OpenAI SDK)
  POST /v1/messages                  Anthropic Messages       (Claude Code; ?beta=true accepted)
  POST /v1/messages/count_tokens     Anthropic token count    (Claude Code calls it often)
  POST /v1/responses                 OpenAI Responses         (Codex)
  POST /v1/decision                  the decision only, for a body in any of the three formats
                                     (target, model, fallbacks, session state change; docs/decision.md)
  POST /v1/feedback                  how a session or request ended (docs/rollout.md)
  GET  /v1/models                    the routes, as models
  GET  /health                       200 while serving; ?deep=1 probes every backend now
                                     (details and probes: admin key, or loopback without keys)
  GET  /v1/stats                     reliability counters, USD spent and saved per route and session
  GET  /metrics                      Prometheus metrics (docs/deployment.md)
                                     (with api_keys set, both need an admin key: docs/security.md)
  GET  /openapi.json                 an OpenAPI description of these endpoints
  GET  /dashboard/                   the dashboard and session explorer, with server.dashboard.enabled
                                     (loopback clients only without server.api_keys, else an admin key)

Point an agent at it (recipes for Claude Code, Codex, Hermes Agent and others: docs/agents.md):
  OpenAI SDK / LangChain / Hermes:  base_url = http://127.0.0.1:4000/v1, model = <route name>
  Claude Code:  ANTHROPIC_BASE_URL=http://127.0.0.1:4000 ANTHROPIC_MODEL=<route name> claude
  curl http://127.0.0.1:4000/v1/models     # lists the routes

Every response carries x-switchyard-selected-model, x-switchyard-route,
x-switchyard-decision-source and x-switchyard-overhead-ms.
Logs: every routed request writes its decision record (JSON, with the request path) at info on
the switchyard.decisions logger, and every count_tokens call a line on switchyard.count_tokens;
--access-log adds one line per request (method, path, route, status, model, overhead, duration);
--log-level debug adds Switchyard's debug lines and keeps third-party libraries at info;
debug-all also shows httpx/httpcore/uvicorn internals.
Every core: --workers auto (or N) runs N processes on the port under a supervisor;
  `switchyard reload <supervisor pid>` (or kill -HUP) reloads the config worker by worker without
  dropping requests; a config that does not validate, has no routes, or has none of the routes
  that served traffic in the last minute is refused and the old one keeps serving
  (`switchyard reload --force` applies the last kind anyway).
Several workers or replicas with stateful routes: state.backend: redis (see docs/deployment.md).

Security (docs/security.md): the default bind is 127.0.0.1. Without server.api_keys only
loopback Host names (and server.allowed_hosts) are answered, browser Origins are refused unless
listed in server.allowed_origins, and bodies must be application/json. Create keys with
`switchyard keys create`. Slow clients are cut (server.client_timeouts); on SIGTERM open
requests get server.drain_s, then end with an error event.
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "serve",
        help="run the routing proxy (OpenAI Chat, Anthropic Messages and OpenAI Responses)",
        description=(
            "Serve a router config as an HTTP proxy speaking OpenAI Chat Completions, Anthropic Messages "
            "and OpenAI Responses; every request is routed and translated to the chosen model's API."
        ),
        epilog=_EPILOG,
        formatter_class=HelpFormatter,
    )
    add_config_arg(p)
    p.add_argument("--host", default="127.0.0.1", help="address to bind")
    p.add_argument("-p", "--port", type=int, default=4000, help="port to bind")
    p.add_argument("--decision-log", metavar="FILE", help="append one JSON decision record per request")
    p.add_argument(
        "--access-log", action="store_true", help="log one line per request (route, status, model, overhead, duration)"
    )
    p.add_argument(
        "--workers",
        metavar="N",
        help=(
            "run N worker processes on the port (auto: one per usable core) under a supervisor: "
            "SIGHUP reloads the config worker by worker, a worker that dies is restarted "
            "(default: one process, no supervisor; see docs/deployment.md)"
        ),
    )
    p.add_argument(
        "--log-level",
        default="info",
        choices=["debug-all", "debug", "info", "warning", "error"],
        help="debug: Switchyard's own decisions; debug-all: also library internals (httpx, httpcore, uvicorn)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.workers is not None:
        from switchyard.server.workers import worker_count

        try:
            count = worker_count(args.workers)
        except ValueError as exc:
            return fail(str(exc))
        loaded = _load(args)
        return 1 if loaded is None else _run_workers(args, loaded, count)
    # One process: the port is bound before the config, the engine and the server load (some
    # 0.3 s), so a busy port is reported at once, and a client (a readiness probe, an agent)
    # that connects meanwhile waits in the backlog for its answer instead of being refused.
    try:
        sock = bind(args.host, args.port)
    except OSError as exc:
        return cannot_listen(args.host, args.port, exc)
    try:
        loaded = _load(args)
        return 1 if loaded is None else _run_one(args, loaded, sock)
    finally:
        sock.close()


def _load(args: argparse.Namespace) -> LoadedConfig | None:
    """Logging set up, the config loaded and its keys checked (``None`` once the reason is printed)."""
    setup_logging(args.log_level)
    if args.access_log:
        show_access_log()
    loaded = load_or_exit(args.config)
    if loaded is None:
        return None
    try:
        from switchyard.server.auth import KeyRing
        from switchyard.server.guard import is_loopback_host
    except ImportError:
        fail("the proxy needs the server extra: pip install 'switchyard-router[server]'")
        return None
    try:
        keys = KeyRing(loaded.config.server.api_keys, tenants=loaded.config.server.tenants)
    except ValueError as exc:
        fail(str(exc))
        return None
    if not keys and not is_loopback_host(args.host):
        print(
            f"switchyard: warning: binding {args.host} without server.api_keys; only loopback Host names "
            f"and server.allowed_hosts are answered (see docs/security.md)",
            flush=True,
        )
    return loaded


def _run_one(args: argparse.Namespace, loaded: LoadedConfig, sock: socket.socket) -> int:
    """One process serving on ``sock`` (bound by :func:`run`)."""
    try:
        from switchyard.server.runner import serve_socket
    except ImportError:
        return fail("the proxy needs the server extra: pip install 'switchyard-router[server]'")
    sy = build_or_fail(loaded, args.config, decision_log=args.decision_log)
    if sy is None:
        return 1
    port = sock.getsockname()[1]  # the one chosen when --port 0 asked for any
    print(
        f"switchyard: serving {len(sy.routes)} route(s) ({', '.join(sy.routes)}) on http://{args.host}:{port}/v1",
        flush=True,
    )
    freeze_startup()
    serve_socket(sy, sock, log_level=uvicorn_level(args.log_level), access_log=args.access_log)
    return 0


def _run_workers(args: argparse.Namespace, loaded: LoadedConfig, count: int) -> int:
    """``--workers``: the config validated here, then ``count`` supervised worker processes
    (each builds the router itself)."""
    from switchyard.server.workers import Supervisor, memory_state_warning

    freeze_startup()  # the supervisor serves no request; it lives as long as its workers
    note = memory_state_warning(loaded, count)
    if note:
        print(f"switchyard: warning: {note}", flush=True)
    worker_args = ["--log-level", args.log_level]
    if args.decision_log:
        worker_args += ["--decision-log", args.decision_log]
    if args.access_log:
        worker_args.append("--access-log")
    try:
        supervisor = Supervisor(
            args.config,
            args.host,
            args.port,
            count,
            worker_args=worker_args,
            drain_s=loaded.config.server.drain_s,
            say=lambda line: print(line, flush=True),
        )
    except OSError as exc:
        return cannot_listen(args.host, args.port, exc)
    print(
        f"switchyard: serving {len(loaded.routes)} route(s) ({', '.join(loaded.routes)}) on "
        f"http://{args.host}:{supervisor.port}/v1 with {count} worker(s) (supervisor pid {os.getpid()})",
        flush=True,
    )
    return supervisor.run()
