"""``switchyard validate``: check a config without serving it."""

from __future__ import annotations

import argparse
import sys

from switchyard.cli._common import HelpFormatter, load_or_exit

_EPILOG = """\
Examples:
  switchyard validate router.yaml
  switchyard validate router.yaml --strict      # warnings (e.g. unset API-key variables) fail too

Every problem is printed as FILE:LINE: yaml.path: message, e.g.
  router.yaml:14: routes.mix.targets[1]: unknown target 'ghost'
Exit status: 0 valid, 1 invalid. Every key: docs/configuration.md.
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "validate",
        help="check a config file and name every bad key",
        description="Validate a router config: YAML syntax, keys, types, references between "
        "clients, targets and routes, and that every router can be built.",
        epilog=_EPILOG,
        formatter_class=HelpFormatter,
    )
    p.add_argument("file", metavar="FILE", help="config file (YAML)")
    p.add_argument("--strict", action="store_true", help="treat warnings as errors")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    loaded = load_or_exit(args.file)
    if loaded is None:
        return 1
    from switchyard.config.build import build_routes, target_infos
    from switchyard.config.load import ConfigError

    try:
        build_routes(loaded, target_infos(loaded))
    except ConfigError as exc:
        print(f"error: invalid config {args.file}:", file=sys.stderr)
        for line in str(exc).splitlines():
            print(f"  {line}", file=sys.stderr)
        return 1
    if args.strict and loaded.warnings:
        print(f"error: {len(loaded.warnings)} warning(s) with --strict", file=sys.stderr)
        return 1
    cfg = loaded.config
    print(
        f"OK: {args.file} — {len(cfg.llm_clients)} client(s), {len(cfg.targets)} target(s), "
        f"{len(loaded.routes)} route(s): {', '.join(f'{n} ({s.type})' for n, s in loaded.routes.items())}"
    )
    return 0
