"""Helpers shared by CLI commands."""

from __future__ import annotations

import argparse
import gc
import logging
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

# What follows loads lazily: ``switchyard serve`` binds its port before the config loader, the
# engine and asyncio are imported (serve.py), and ``--help`` needs none of them.
if TYPE_CHECKING:
    from switchyard.api import Switchyard
    from switchyard.config.load import LoadedConfig
    from switchyard.routers.base import RouterSpec


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Keeps example blocks as written and shows defaults.

    Only defaults that tell something are appended: not ``None``, ``False`` or an empty list
    (a required option, a flag, a repeatable option), and not after a help text that already
    says its default in words (``(default: tuned)`` would grow a ``(default: None)``).
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help
        silent = action.default is None or action.default is False or action.default == []
        if text is not None and (silent or "(default" in text):
            return text
        return super()._get_help_string(action)


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
    from switchyard.config.load import ConfigError, load_config

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


def build_or_fail(loaded: LoadedConfig, name: str | None, *, decision_log: str | None) -> Switchyard | None:
    """Builds the router of a loaded config, printing why it cannot be built (returns ``None``).

    ``serve`` and each ``serve --workers`` worker build through here, so both say the same.

    Args:
        loaded: The validated config.
        name: The config file named in the error (as the operator gave it).
        decision_log: ``--decision-log``, if given.
    """
    from switchyard.api import Switchyard
    from switchyard.config.load import ConfigError

    try:
        return Switchyard(loaded, decision_log=decision_log)
    except ConfigError as exc:
        fail(f"cannot build {name}:\n  " + str(exc).replace("\n", "\n  "))
        return None


def freeze_startup() -> None:
    """Moves what start-up built out of the cyclic garbage collector's sight, and lets the
    collector run.

    What start-up built (modules, the config, validators) lives as long as the process: frozen,
    the collections while serving walk request objects only. ``switchyard serve`` starts with
    the collector off (``cli.main``): start-up keeps nearly everything it allocates, so its
    collections walk ever more objects to free almost nothing — some 90 of them and the full one
    before freezing took ~50 ms of a ~0.45 s cold start; with the collector off, about a
    thousand unreachable objects are left in all, frozen with the rest rather than collected.
    """
    gc.freeze()
    gc.enable()


def show_access_log() -> None:
    """``--access-log``: asked for explicitly, so shown even under ``--log-level warning``."""
    logging.getLogger("switchyard.access").setLevel(logging.INFO)


_CHATTY = (
    "httpx",
    "httpcore",
    "hpack",
    "h2",
    "asyncio",
    "urllib3",
    "uvicorn",
    "litellm",
    "LiteLLM",
    "openai",
    "anthropic",
)
"""Third-party loggers kept at INFO under ``--log-level debug`` (their debug lines drown ours)."""


def setup_logging(level: str) -> None:
    """Plain logging to stderr.

    ``debug`` shows Switchyard's own debug lines (each routing decision) and keeps third-party
    libraries at INFO; ``debug-all`` shows everything.
    """
    from switchyard.cli.log_handler import FORMAT, Formatter, TurnBatchingHandler
    from switchyard.engine.records import set_direct_writer

    everything = level == "debug-all"
    name = "DEBUG" if everything else level.upper()
    # Lines logged in the event loop leave together (≤ LINGER_S late), asctime is formatted once a second
    # (log_handler.py: the standard handler cost ~1/6 of a proxied request's CPU).
    handler = TurnBatchingHandler()
    handler.setFormatter(Formatter(FORMAT))
    logging.basicConfig(level=getattr(logging, name, logging.INFO), handlers=[handler])
    set_direct_writer(handler.write_direct)
    # The format above names none of these: leaving them out of every LogRecord (the logging
    # docs' "Optimization" list) spares each request's decision line a stack walk and lookups.
    logging._srcfile = None  # no pathname/lineno/funcName
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    if name == "DEBUG" and not everything:
        for chatty in _CHATTY:
            logging.getLogger(chatty).setLevel(logging.INFO)


def uvicorn_level(level: str) -> str:
    """uvicorn's log level for ours (``debug-all`` is uvicorn's ``debug``; ``debug`` keeps it at info)."""
    return {"debug-all": "debug", "debug": "info"}.get(level, level)


def route_or_fail(loaded: LoadedConfig, name: str) -> RouterSpec | None:
    """The spec of route ``name``, or ``None`` once the error naming the config's routes is printed."""
    try:
        return loaded.route_spec(name)
    except KeyError as exc:
        fail(str(exc.args[0]))
        return None


def cannot_listen(host: str, port: int, exc: OSError) -> int:
    """Prints why ``host:port`` cannot be listened on (a busy port, a bad address); returns 1."""
    return fail(f"cannot listen on {host}:{port}: {exc.strerror} (choose another with --port)")


def fail(message: str, code: int = 1) -> int:
    """Prints ``error: message`` and returns ``code``."""
    print(f"error: {message}", file=sys.stderr)
    return code


def json_objects(path: str, warn: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSONL file, one a line; blank lines and other values are skipped.

    Args:
        path: The file (a decision log or a feedback file).
        warn: Gets ``path:line: skipped (why)`` for each line that is not JSON; ``None`` skips
            such lines silently.

    Raises:
        OSError: The file cannot be opened.
    """
    import orjson

    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                if warn is not None:
                    warn.append(f"{path}:{number}: skipped ({exc})")
                continue
            if isinstance(obj, dict):
                yield obj
