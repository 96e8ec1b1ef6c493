"""Helpers shared by CLI commands."""

from __future__ import annotations

import argparse
import logging
import sys

from switchyard.config.load import ConfigError, LoadedConfig, load_config


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Keeps example blocks as written and shows defaults."""


def add_config_arg(parser: argparse.ArgumentParser, *, positional_ok: bool = False) -> None:
    """Adds ``-c/--config``."""
    parser.add_argument(
        "-c",
        "--config",
        required=not positional_ok,
        metavar="FILE",
        help="router config (YAML); see docs/configuration.md",
    )


def load_or_exit(path: str) -> LoadedConfig | None:
    """Loads a config, printing every problem to stderr on failure (returns ``None``)."""
    try:
        loaded = load_config(path)
    except ConfigError as exc:
        print(f"error: invalid config {path}:", file=sys.stderr)
        for line in str(exc).splitlines():
            print(f"  {line}", file=sys.stderr)
        return None
    for warning in loaded.warnings:
        print(f"  {warning.render(loaded.source)}", file=sys.stderr)
    return loaded


def setup_logging(level: str) -> None:
    """Plain logging to stderr."""
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


def fail(message: str, code: int = 1) -> int:
    """Prints ``error: message`` and returns ``code``."""
    print(f"error: {message}", file=sys.stderr)
    return code
