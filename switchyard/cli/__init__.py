"""The ``switchyard`` command line.

Layer: ``cli`` — the top; imports anything, heavy parts lazily inside each command.

Each sub-command lives in its own module exposing ``register(subparsers)``; add new ones to
``_COMMANDS``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from switchyard._version import __version__

_COMMANDS = (
    "serve",
    "validate",
    "route",
    "eval",
    "calibrate",
    "replay",
    "stats",
    "dashboard",
    "train_probe",
    "demo",
    "vllm_command",
    "fake_upstream",
    "config_cmd",
    "keys",
)

_DESCRIPTION = """\
Switchyard routes every LLM call of an agent to the model that should serve it (a cheap efficient
model such as Nemotron 3.5 Lightning, or a frontier model) and translates between provider APIs.

Start here:
  switchyard demo                          # simulated models, no keys, no GPU
  switchyard fake-upstream                 # simulated model servers for the examples (examples/README.md)
  switchyard validate router.yaml          # check a config; bad keys are named by YAML path
  switchyard config schema > schema.json   # JSON Schema of the config, for editor completion
  switchyard config import routes.toml     # convert a NeMo Switchyard 0.3 TOML config to YAML
  switchyard serve -c router.yaml          # OpenAI-compatible proxy on 127.0.0.1:4000
  switchyard dashboard --log decisions.jsonl                # the dashboard over a decision log
  switchyard route -c router.yaml -m ROUTE --message "fix the failing test"   # show a decision
  switchyard vllm-command --profile h100   # a checked vllm serve command for Nemotron 3.5 Lightning
  switchyard eval -c router.yaml --route ROUTE --dataset outcomes.jsonl       # APGR, CPT, cost offline

Docs: docs/index.md (every key: docs/configuration.md). `switchyard COMMAND --help` for each command.
"""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every sub-command."""
    parser = argparse.ArgumentParser(
        prog="switchyard",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"switchyard {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMANDS:
        importlib.import_module(f"switchyard.cli.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``switchyard`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
