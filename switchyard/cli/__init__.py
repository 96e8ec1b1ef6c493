"""The ``switchyard`` command line.

Layer: ``cli`` — the top; imports anything, heavy parts lazily inside each command.

Each sub-command lives in its own module exposing ``register(subparsers)``; add new ones to
``_MODULE_OF`` under each command name they register (``_COMMANDS`` follows from it). ``main`` imports only the
module of the command it runs (``switchyard serve`` does not import the eval, replay or
fake-upstream tooling); help and unknown commands get every module.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
from collections.abc import Sequence

from switchyard._version import __version__

_MODULE_OF = {
    "serve": "serve",
    "reload": "reload",
    "validate": "validate",
    "route": "route",
    "explain": "route",
    "eval": "eval",
    "calibrate": "calibrate",
    "replay": "replay",
    "stats": "stats",
    "tune": "tune",
    "dashboard": "dashboard",
    "train-probe": "train_probe",
    "train-trajectory": "train_trajectory",
    "demo": "demo",
    "vllm-command": "vllm_command",
    "fake-upstream": "fake_upstream",
    "config": "config_cmd",
    "keys": "keys",
}
"""The module of each command name (a module registers every command that names it)."""

_COMMANDS = tuple(dict.fromkeys(_MODULE_OF.values()))
"""The command modules, in help order."""

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
  switchyard stats decisions.jsonl --experiment   # shadow / control group results (docs/rollout.md)

Docs: docs/index.md (every key: docs/configuration.md). `switchyard COMMAND --help` for each command.
"""


def build_parser(commands: Sequence[str] = _COMMANDS) -> argparse.ArgumentParser:
    """The argument parser with the sub-commands of ``commands`` (modules of ``_COMMANDS``;
    default: every one)."""
    parser = argparse.ArgumentParser(
        prog="switchyard",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"switchyard {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in commands:
        importlib.import_module(f"switchyard.cli.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``switchyard`` console script."""
    args_list = sys.argv[1:] if argv is None else list(argv)
    quiet = args_list[:1] == ["serve"]
    if quiet:
        gc.disable()  # until the server's start-up is frozen (``_common.freeze_startup``)
    try:
        parser = build_parser(_commands_for(args_list))
        args = parser.parse_args(args_list)
        if not getattr(args, "func", None):
            build_parser().print_help()  # every command, whichever ``argv`` named
            return 2
        try:
            code: int = args.func(args)
        except KeyboardInterrupt:
            return 130
        return code
    finally:
        if quiet:
            gc.enable()  # a caller of ``main`` in-process gets its collector back, however it ended


def _commands_for(argv: Sequence[str]) -> Sequence[str]:
    """The command modules ``argv`` needs: the one of its command when it names one first, else
    every one (``--help``, ``--version``, no command, an unknown command)."""
    module = _MODULE_OF.get(argv[0]) if argv else None
    return (module,) if module is not None else _COMMANDS


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
