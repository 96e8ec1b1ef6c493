"""``switchyard demo``: the whole loop on simulated models — no keys, no GPU."""

from __future__ import annotations

import argparse

from switchyard.cli._common import HelpFormatter

_EPILOG = """\
What it does:
  1. starts two simulated OpenAI-compatible model servers on 127.0.0.1: an "efficient"
     Lightning-like model (cheap, fast, terse) and a "frontier" model (pricey, slower, verbose);
  2. builds routers over them from an embedded config (a weighted random route and a
     stage router that reads the agent's tool activity);
  3. drives multi-turn, tool-using coding-agent sessions through the drop-in OpenAI client
     (in-process) and through the proxy with the real openai SDK — in the stage-router session
     the agent escalates on a repeated traceback and drops back once the tests pass;
  4. prints one row per turn — route, selected model, decision source, tokens, cost — and the
     total against sending every turn to the frontier model.

Example:
  switchyard demo
  switchyard demo --show-config     # print the embedded router config and exit

The routers it uses: docs/stage-router.md; writing your own config: docs/configuration.md.
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "demo",
        help="run a routed agent session on simulated models (no keys, no GPU)",
        description="Run the Switchyard demo on its embedded default config.",
        epilog=_EPILOG,
        formatter_class=HelpFormatter,
    )
    p.add_argument("--show-config", action="store_true", help="print the embedded config and exit")
    p.add_argument("--no-proxy", action="store_true", help="skip the pass through the HTTP proxy")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from switchyard.demo import main

    return main(show_config=args.show_config, use_proxy=not args.no_proxy)
