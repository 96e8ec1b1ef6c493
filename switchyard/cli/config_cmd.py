"""``switchyard config``: the config's JSON Schema, and importing NVIDIA Switchyard TOML configs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from switchyard.cli._common import HelpFormatter, fail

_EPILOG = """\
Sub-commands:
  schema    print the JSON Schema of a router config (for editors and CI)
  import    convert a NeMo Switchyard 0.3 TOML config into a Switchyard YAML config

Examples:
  switchyard config schema > switchyard.schema.json
  switchyard config import routes.toml -o router.yaml
  switchyard validate router.yaml

Docs: docs/configuration.md ("Editor completion", "Coming from NVIDIA's NeMo Switchyard").
"""

_SCHEMA_EPILOG = """\
Editor completion and checking (VS Code with the YAML extension, Neovim/Helix/Zed with
yaml-language-server): save the schema next to your config and put this line at the top of
the YAML file:

  # yaml-language-server: $schema=./switchyard.schema.json

Example: check a config in CI without Switchyard installed (any JSON Schema validator, draft 2020-12):
  switchyard config schema > switchyard.schema.json
  check-jsonschema --schemafile switchyard.schema.json router.yaml

The schema is generated from the same pydantic models the loader uses; `switchyard validate`
checks more (that names refer to existing targets, files exist, thresholds make sense).
Docs: docs/configuration.md ("Editor completion: the JSON Schema").
"""

_IMPORT_EPILOG = """\
What is converted (NeMo Switchyard 0.3 `switchyard-server --config` TOML):
  [llm_clients.NAME]   format, base_url, api_key_env, max_retries; extra_headers -> headers
  [targets.NAME]       id -> model, llm_client -> client, extra_body
  [routes.NAME]        passthrough, random, llm_classifier (capability, escalation, custom),
                       stage_router and advisor; the route's public `id` becomes the route
                       name (the model name clients send); stage routers get `compat: nvidia`
                       so they decide as NVIDIA's 0.3.0 does; composite (stage + classifier)
                       becomes a cascade; `subagents` blocks keep their policy; 0.4's rlcd
                       and type_safe_classifier (with [type_safe_client]) become
                       decision_model routes (docs/decision-model.md).
Keys that have no counterpart (noop, plan_execute, auto and prefill_router routes,
forward_auth, advertising-only flags) are listed on stderr and in a comment at the top of the
output; the command never drops a key silently. The result is checked by Switchyard's own
loader before it is written.

Examples:
  switchyard config import routes.toml                 # YAML to standard output
  switchyard config import routes.toml -o router.yaml  # ... or to a file
  switchyard config import routes.toml --strict        # exit 3 if anything is not carried over

Docs: docs/configuration.md ("Coming from NVIDIA's NeMo Switchyard").
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "config",
        help="print the config's JSON Schema, or import a NeMo Switchyard TOML config",
        description="Tools for router configs.",
        epilog=_EPILOG,
        formatter_class=HelpFormatter,
    )
    inner = p.add_subparsers(dest="config_command", metavar="SUBCOMMAND")
    schema = inner.add_parser(
        "schema",
        help="print the JSON Schema of a router config",
        description="Print the JSON Schema (draft 2020-12) of a Switchyard router config.",
        epilog=_SCHEMA_EPILOG,
        formatter_class=HelpFormatter,
    )
    schema.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
    schema.set_defaults(func=run_schema)
    imp = inner.add_parser(
        "import",
        help="convert a NeMo Switchyard 0.3 TOML config to YAML",
        description=(
            "Convert a NeMo Switchyard 0.3 TOML config (clients, targets, routes) into a Switchyard YAML config."
        ),
        epilog=_IMPORT_EPILOG,
        formatter_class=HelpFormatter,
    )
    imp.add_argument("toml", metavar="ROUTES.toml", help="the NeMo Switchyard config to convert")
    imp.add_argument("-o", "--output", metavar="FILE", help="write the YAML to FILE instead of standard output")
    imp.add_argument("--strict", action="store_true", help="exit with status 3 when any key could not be carried over")
    imp.set_defaults(func=run_import)
    p.set_defaults(func=lambda _args: _usage(p))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _write(text: str, output: str | None) -> str | None:
    """Writes ``text`` to ``output`` (standard output when ``None``); the error, if any."""
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return None
    try:
        Path(output).write_text(text, encoding="utf-8")
    except OSError as exc:
        return f"cannot write {output}: {exc.strerror or exc}"
    return None


def run_schema(args: argparse.Namespace) -> int:
    from switchyard.config.json_schema import config_json_schema

    error = _write(json.dumps(config_json_schema(), indent=2) + "\n", args.output)
    return fail(error) if error else 0


def run_import(args: argparse.Namespace) -> int:
    from switchyard.config.load import ConfigError
    from switchyard.config.nemo_import import TomlImportError, convert_file

    try:
        result = convert_file(args.toml)
    except OSError as exc:
        return fail(f"cannot read {args.toml}: {exc.strerror}")
    except TomlImportError as exc:
        return fail(f"{args.toml}: {exc}")
    except ConfigError as exc:
        return fail(f"{args.toml} converts to a config Switchyard rejects:\n  " + str(exc).replace("\n", "\n  "))
    for note in result.dropped:
        print(f"not carried over: {note.path}: {note.reason}", file=sys.stderr)
    error = _write(result.yaml, args.output)
    if error:
        return fail(error)
    if args.output:
        print(f"wrote {args.output} ({len(result.config.get('routes', {}))} route(s))", file=sys.stderr)
    return 3 if args.strict and result.dropped else 0
