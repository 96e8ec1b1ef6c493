"""One worker process of ``switchyard serve --workers N`` (started by the supervisor, not by hand).

Run as ``python -m switchyard.cli.worker``. It serves the config on the listening socket the
supervisor passed (``--listen-fd``), writes the line ``R`` on ``--status-fd`` once it accepts
connections, ``C`` once a shutdown stopped accepting, and ``T <route>`` lines as routes serve
traffic (``server/reload_check.py``), and stops (draining like ``serve``)
when the supervisor's end of ``--life-fd`` closes — so a supervisor killed with SIGKILL leaves
no worker behind. See :mod:`switchyard.server.workers`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from switchyard.cli._common import (
    build_or_fail,
    freeze_startup,
    load_or_exit,
    setup_logging,
    show_access_log,
    uvicorn_level,
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m switchyard.cli.worker", description=__doc__)
    p.add_argument("-c", "--config", required=True, help="the supervisor's copy of the config")
    p.add_argument("--config-source", help="the file it was copied from (relative paths resolve there)")
    p.add_argument("--listen-fd", type=int, required=True)
    p.add_argument("--status-fd", type=int, required=True)
    p.add_argument("--life-fd", type=int, required=True)
    p.add_argument("--decision-log")
    p.add_argument("--access-log", action="store_true")
    p.add_argument("--log-level", default="info")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Builds the router and serves it on the inherited socket until told to stop."""
    gc.disable()  # until start-up is frozen, as under ``serve`` (``_common.freeze_startup``)
    args = _parser().parse_args(argv)
    # SIGHUP is the supervisor's (a reload); a terminal hang-up must not kill workers one by one.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    setup_logging(args.log_level)
    if args.access_log:
        show_access_log()
    loaded = load_or_exit(args.config)
    if loaded is None:
        return 1
    if args.config_source:
        # Relative paths in the config (probe files, decision logs) mean the original's folder.
        loaded.base_dir = Path(args.config_source).resolve().parent
        loaded.source = args.config_source
    from switchyard.server.runner import serve_socket

    sy = build_or_fail(loaded, loaded.source, decision_log=args.decision_log)
    if sy is None:
        return 1
    freeze_startup()  # as `serve` does
    sock = socket.socket(fileno=args.listen_fd)
    status_fd: int = args.status_fd
    life_fd: int = args.life_fd
    with contextlib.suppress(OSError):
        os.set_blocking(status_fd, False)  # a supervisor slow to read must never stall serving

    def tell(line: bytes) -> None:
        with contextlib.suppress(OSError):  # the supervisor is gone (or its pipe is full): nobody to tell
            os.write(status_fd, line)

    from switchyard.server.reload_check import ServedRoutes

    sy.on_decision(ServedRoutes(tell))  # which routes serve traffic: what a reload must keep

    def started() -> None:
        tell(b"R\n")
        # EOF on the life pipe: the supervisor died; stop as on SIGTERM.
        asyncio.get_running_loop().add_reader(life_fd, orphaned)

    def orphaned() -> None:
        asyncio.get_running_loop().remove_reader(life_fd)
        print(f"switchyard: worker {os.getpid()}: the supervisor is gone; stopping", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGTERM)

    serve_socket(
        sy,
        sock,
        log_level=uvicorn_level(args.log_level),
        access_log=args.access_log,
        on_started=started,
        on_closed=lambda: tell(b"C\n"),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
