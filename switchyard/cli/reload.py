"""``switchyard reload``: ask a running ``serve --workers`` supervisor to load its config again."""

from __future__ import annotations

import argparse
import os
import signal

from switchyard.cli._common import HelpFormatter, fail

_EPILOG = """\
Examples:
  switchyard reload 4242              # the supervisor pid `serve --workers` printed at start
  switchyard reload --force 4242      # apply a config that drops the routes in use

What a reload does (docs/deployment.md): the supervisor reads and validates the config file,
then moves its workers to it one at a time, without dropping a request. It refuses, logs why,
and keeps the workers on the previous config when the new one
  - does not validate (its errors are logged with their YAML paths),
  - has no routes at all (a file saved half-written: every request would get 404),
  - has none of the routes, or aliases, that served traffic in the last minute — unless it
    names a default_route, or you pass --force (you are retiring those routes on purpose),
  - cannot be built by a new worker (a missing prompt or probe file).
--force yields only on the routes in use: a config with no routes is refused all the same.

The same without this command: `kill -HUP <pid>` reloads, `kill -USR1 <pid>` is a forced
reload (in Kubernetes the supervisor is PID 1: `kubectl exec POD -- kill -HUP 1`). The outcome
is in the supervisor's log: `reload complete: generation N` or `reload refused, <why>`.
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "reload",
        help="reload the config of a running `serve --workers` (refuses one that would serve nothing)",
        description=(
            "Tell a running `switchyard serve --workers` supervisor to load its config file again and move "
            "its workers to it, one at a time. A config that would serve nothing is refused and the old one "
            "keeps serving."
        ),
        epilog=_EPILOG,
        formatter_class=HelpFormatter,
    )
    p.add_argument("pid", type=int, help="the supervisor's process id (printed by `serve --workers` at start)")
    p.add_argument(
        "--force",
        action="store_true",
        help=(
            "apply the new config even when it has none of the routes that served traffic in the last "
            "minute (their callers will get 404); a config with no routes at all is still refused"
        ),
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    signum = signal.SIGUSR1 if args.force else signal.SIGHUP
    try:
        os.kill(args.pid, signum)
    except ProcessLookupError:
        return fail(f"no process {args.pid}: pass the supervisor pid that `serve --workers` printed at start")
    except PermissionError:
        return fail(f"not allowed to signal process {args.pid} (run as the user that started `serve`)")
    kind = "forced reload" if args.force else "reload"
    print(f"switchyard: asked process {args.pid} for a {kind}; its log says `reload complete` or why it refused")
    return 0
