"""``switchyard fake-upstream``: simulated model servers for trying configs without keys or GPUs."""

from __future__ import annotations

import argparse
import sys

from switchyard.cli._common import HelpFormatter, cannot_listen, fail

_EPILOG = """\
What it serves (on every port given, the same app):
  POST /v1/chat/completions              OpenAI Chat Completions / vLLM (JSON and SSE)
  POST /v1/messages                      Anthropic Messages (JSON and SSE)
  POST /v1/messages/count_tokens         Anthropic token count
  POST /v1/responses                     OpenAI Responses (JSON and SSE)
  POST /v1/responses/input_tokens        Responses token count
  POST /v1/systemone                     a System One-style decision model (typed choices)
  POST /tokenize                         vLLM token count
  GET  /v1/models                        models seen so far (max_model_len 131072)
  GET  /health                           200 (vLLM's liveness endpoint)

Which model answers:
  Every model name answers. Names containing lightning, nemotron, efficient, mini, small,
  haiku, judge or flash are an *efficient* simulated model (about 20 ms to the first byte);
  any other name is a *frontier* model (about 150 ms, slower stream). The answer is
  "[model-name] <your last message>".
  Tool calls: write "use a tool" (or "use tools in parallel") in the user message of a request
  that carries tools; after the tool results the model reports what the tools said.
  Write "sloppy" too and an efficient model calls the first tool with no arguments (a malformed
  call, for trying a route's verify: block).
  Judges: a request with response_format (what llm_classifier and stage_router judges send)
  gets a verdict — capability forecasts say p_solve 0.3 for debugging/design/traceback tasks
  and 0.85 otherwise; escalation reviews escalate when the turn under review shows a failure.
  Decision models (what type: decision_model asks, on /v1/systemone or as an RLCD verdict on
  Chat) favour the option whose description shares words with the request; a "[route:LABEL]" or
  "[route:LABEL@0.35]" marker in the message decides instead.
  Advisor reviews (what type: advisor sends) get REDO and a plan when the executor's turn
  reports a failure (traceback, FAILED, error:), else APPROVE.

Faults (use the fault as the model name, or send the header x-fake-fault: NAME):
{faults}
Use it with the examples (in another terminal):
  switchyard fake-upstream                      # ports 8000 (as vLLM) and 9000 (as a frontier API)
  switchyard serve -c examples/router.yaml
  curl -s http://127.0.0.1:4000/v1/chat/completions -H 'content-type: application/json' \\
       -d '{{"model": "fast", "messages": [{{"role": "user", "content": "hello"}}]}}'

  For examples that call hosted APIs, point the SDK-standard variables at it:
  export ANTHROPIC_BASE_URL=http://127.0.0.1:9000 OPENAI_BASE_URL=http://127.0.0.1:9000/v1
  export ANTHROPIC_API_KEY=fake OPENAI_API_KEY=fake

Walkthrough of every example: examples/README.md. From Python, the same server is
switchyard.testing.simulated.SimulatedUpstream (serve it with switchyard.testing.serve_fake).
"""


def _epilog() -> str:
    from switchyard.testing.fake_common import FAULTS

    width = max(len(k) for k in FAULTS) + 2
    faults = "".join(f"  {name:<{width}}{what}\n" for name, what in FAULTS.items())
    return _EPILOG.format(faults=faults)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "fake-upstream",
        help="serve simulated efficient and frontier models (all three APIs, no keys, no GPU)",
        description=(
            "Serve simulated models on 127.0.0.1 speaking OpenAI Chat Completions, Anthropic Messages and "
            "OpenAI Responses, with tool calls, judges and injectable faults, so that any Switchyard "
            "config can be tried without keys or GPUs."
        ),
        epilog=_epilog(),
        formatter_class=HelpFormatter,
    )
    p.add_argument(
        "-p",
        "--port",
        type=int,
        action="append",
        metavar="PORT",
        help="port to listen on; repeat for several (default: 8000 and 9000)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind")
    p.add_argument(
        "--latency-scale",
        type=float,
        default=1.0,
        metavar="X",
        help="multiply every simulated latency by X (0 answers at once)",
    )
    p.add_argument("--stall-s", type=float, default=30.0, metavar="S", help="how long the stall-* faults stay silent")
    p.add_argument("-q", "--quiet", action="store_true", help="do not log one line per request")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.latency_scale < 0 or args.stall_s < 0:
        return fail("--latency-scale and --stall-s must be >= 0")
    try:
        import uvicorn

        from switchyard._listen import bind
    except ImportError:
        return fail("the fake upstream needs the server extra: pip install 'switchyard-router[server]'")
    from switchyard.testing import quiet_injected_resets
    from switchyard.testing.simulated import SimulatedUpstream

    quiet_injected_resets()  # the reset-mid fault drops connections on purpose

    ports: list[int] = args.port or [8000, 9000]
    sockets = []
    for port in ports:
        try:
            sockets.append(bind(args.host, port))
        except OSError as exc:
            for sock in sockets:
                sock.close()
            return cannot_listen(args.host, port, exc)
    app = SimulatedUpstream(latency_scale=args.latency_scale, stall_s=args.stall_s)
    urls = " and ".join(f"http://{args.host}:{s.getsockname()[1]}/v1" for s in sockets)
    print(f"switchyard fake-upstream: simulated models on {urls} (Ctrl-C stops)", flush=True)
    print("  see `switchyard fake-upstream --help` for model names, tool calls, judges and faults", flush=True)
    config = uvicorn.Config(app, log_level="info", access_log=not args.quiet, lifespan="on")
    server = uvicorn.Server(config)
    try:
        server.run(sockets=sockets)
    finally:
        for sock in sockets:
            sock.close()
    sys.stdout.flush()
    return 0
