"""``switchyard serve --workers N``: a supervisor process and N worker processes on one port.

Layer: ``server``. The supervisor only binds sockets, validates configs and watches
processes; each worker is ``python -m switchyard.cli.worker`` (a fresh interpreter, not a fork,
so nothing half-alive — threads, an event loop, connection pools — is ever copied into one).

**Sockets.** The supervisor binds one listening socket per worker *slot*, all on the same port
with ``SO_REUSEPORT``, and hands each worker its slot's socket. The kernel spreads new
connections across the slots, so every worker gets its share (one shared socket tends to feed
the worker that woke last). Because the supervisor keeps every slot's socket open, a worker
that exits — a crash, a rolling restart — never takes queued connections with it: they wait in
the slot's backlog for the next worker of that slot. Where ``SO_REUSEPORT`` does not balance
(not Linux), all workers share one socket instead.

**Signals to the supervisor.**

* ``SIGHUP`` — reload: the config file is loaded again; a config that does not validate is
  refused (its errors, with their YAML paths, are logged) and the running workers keep
  serving. Otherwise, slot by slot, a worker on the new config is started, and once it accepts
  connections the slot's old worker is told to stop (``SIGTERM``: it stops accepting and lets its
  open requests and streams finish within ``server.drain_s``). A new worker that fails to start
  refuses the reload the same way. One slot at a time, so capacity never drops by more than one
  worker's. A config that validates but would serve nothing — no routes, or none of the routes
  that served traffic in the last minute — is refused too, with its reason
  (:mod:`switchyard.server.reload_check`).
* ``SIGUSR1`` — a forced reload (``switchyard reload --force``): as ``SIGHUP``, except that a
  config without the routes that served traffic lately is applied anyway.
* ``SIGTERM`` / ``SIGINT`` — stop: every worker drains as a single ``serve`` does, then the
  supervisor exits.
* A worker that dies on its own is started again on its slot (with a growing pause when it keeps
  dying before it is ready).

**Metrics.** The workers keep prometheus_client's multiprocess files in one directory
(``PROMETHEUS_MULTIPROC_DIR``; a fresh temporary one unless set), so ``GET /metrics`` on any
worker shows the counters summed over all of them (see :mod:`switchyard.server.metrics`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import field

from switchyard._dataclass import dataclass
from switchyard._listen import bind
from switchyard.config.load import ConfigError, LoadedConfig, load_config
from switchyard.server.reload_check import RecentRoutes, dropped, refusal
from switchyard.server.runner import DRAIN_GRACE_S

logger = logging.getLogger("switchyard.workers")

START_TIMEOUT_S = 120.0
"""How long a new worker may take to accept connections before it counts as failed."""

READY = b"R"
CLOSED = b"C"
"""What a worker writes on its status pipe, one line each: accepting connections / no longer
accepting (and ``T <route>`` lines, :mod:`switchyard.server.reload_check`)."""


def worker_count(text: str) -> int:
    """``--workers`` as a number: a positive integer, or ``auto`` (the cores this process may use)."""
    if text == "auto":
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        count = int(text)
    except ValueError:
        raise ValueError(f"--workers must be a positive integer or 'auto', got {text!r}") from None
    if count < 1:
        raise ValueError(f"--workers must be at least 1, got {count}")
    return count


def memory_state_warning(loaded: LoadedConfig, workers: int) -> str | None:
    """The warning for ``state.backend: memory`` with several workers and a stateful route (or
    an API key with a daily budget).

    Each worker then keeps its own copy of every session's state, and a session whose requests
    land on different workers is routed as if each worker saw only its own share of them; a
    key's daily spend is likewise counted per worker.
    """
    if workers < 2 or loaded.config.state.backend != "memory":
        return None
    stateful = sorted(name for name, spec in loaded.routes.items() if spec.uses_session_state())
    budgeted = sorted(k.name for k in loaded.config.server.api_keys if k.budget_usd_per_day is not None)
    if not stateful and not budgeted:
        return None
    what = []
    if stateful:
        what.append(f"route(s) {', '.join(stateful)} keep per-session state")
    if budgeted:
        what.append(f"API key(s) {', '.join(budgeted)} have daily budgets")
    return (
        f"{workers} workers with state.backend: memory: {' and '.join(what)}, and each worker would keep "
        f"its own copy (a session's state, a key's spend); set state.backend: redis (docs/deployment.md)"
    )


@dataclass(slots=True, eq=False)
class Worker:
    """One worker process and what the supervisor knows of it."""

    slot: int
    generation: int
    proc: subprocess.Popen[bytes]
    status_fd: int
    life_fd: int
    started_at: float = field(default_factory=time.monotonic)
    ready: bool = False
    closed: bool = False
    retiring: bool = False
    exit_code: int | None = None
    partial: bytes = b""  # the start of a status line not yet whole

    @property
    def alive(self) -> bool:
        return self.exit_code is None


class Supervisor:
    """Starts, watches, reloads and stops the workers of ``serve --workers``.

    Args:
        config_path: The config file (read again on ``SIGHUP``).
        host: Address to bind.
        port: Port to bind (0 picks one; see :attr:`port`).
        workers: How many worker processes.
        worker_args: Extra arguments for every worker (``--decision-log``, ``--log-level`` …).
        drain_s: ``server.drain_s`` of the config (how long a stopping worker may take).
        say: Where status lines go (the CLI prints them).

    Raises:
        OSError: The port cannot be bound.
    """

    def __init__(
        self,
        config_path: str,
        host: str,
        port: int,
        workers: int,
        *,
        worker_args: Sequence[str] = (),
        drain_s: float = 10.0,
        say: Callable[[str], None] = print,
    ) -> None:
        self.config_path = config_path
        self.count = workers
        self.worker_args = list(worker_args)
        self.drain_s = drain_s
        self.say = say
        balanced = sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")
        first = bind(host, port, reuse_port=balanced)
        self.port: int = first.getsockname()[1]
        self.sockets = [first]
        try:
            for _ in range(1, workers):
                # Port 0 was resolved by the first bind; the others join its port.
                self.sockets.append(bind(host, self.port, reuse_port=True) if balanced else first)
        except OSError:
            self._close_sockets()
            raise
        self.generation = 1
        self.workers: list[Worker] = []
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._stopping = False
        self._reload_asked = False
        self._force_asked = False
        self.recent = RecentRoutes()  # the routes the workers report serving
        self._failures: dict[int, int] = {}  # slot -> deaths before ready in a row
        self._respawn_at: dict[int, float] = {}
        # Private: the config snapshot of each generation, and the metrics files unless the
        # environment names a directory for them.
        self._private = tempfile.mkdtemp(prefix="switchyard-serve-")
        self.metrics_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or os.path.join(self._private, "metrics")
        os.makedirs(self.metrics_dir, exist_ok=True)
        self._config_file = ""

    # -- processes ----------------------------------------------------------------------------

    def _snapshot(self, generation: int) -> tuple[str, LoadedConfig]:
        """Copies the config file as it is now and validates the copy.

        Workers load the copy, never the file itself: a worker started again after a crash
        gets the config its generation was accepted with, even when the file has been edited
        (or broken) since.

        Raises:
            ConfigError: The config is invalid (the messages name the original file).
            OSError: It cannot be read.
        """
        with open(self.config_path, "rb") as fh:
            text = fh.read()
        copy = os.path.join(self._private, f"config-{generation}.yaml")
        with open(copy, "wb") as fh:
            fh.write(text)
        try:
            return copy, load_config(copy)
        except ConfigError as exc:
            os.unlink(copy)
            raise ConfigError(exc.issues, self.config_path) from None

    def _spawn(self, slot: int, generation: int, config_file: str | None = None) -> Worker:
        sock = self.sockets[slot]
        status_r, status_w = os.pipe()
        life_r, life_w = os.pipe()
        args = [sys.executable, "-m", "switchyard.cli.worker", "-c", config_file or self._config_file]
        args += ["--config-source", self.config_path]
        args += ["--listen-fd", str(sock.fileno()), "--status-fd", str(status_w), "--life-fd", str(life_r)]
        env = {
            **os.environ,
            "PROMETHEUS_MULTIPROC_DIR": self.metrics_dir,
            "SWITCHYARD_WORKER": f"{slot}:{generation}",
        }
        try:
            proc = subprocess.Popen(
                [*args, *self.worker_args], pass_fds=(sock.fileno(), status_w, life_r), env=env, close_fds=True
            )
        finally:
            os.close(status_w)
            os.close(life_r)
        os.set_blocking(status_r, False)
        worker = Worker(slot, generation, proc, status_r, life_w)
        self._selector.register(status_r, selectors.EVENT_READ, worker)
        self.workers.append(worker)
        return worker

    def _on_status(self, worker: Worker) -> None:
        try:
            data = os.read(worker.status_fd, 4096)
        except BlockingIOError:
            return
        *lines, worker.partial = (worker.partial + data).split(b"\n")
        for line in lines:
            if line == READY:
                worker.ready = True
                self._failures.pop(worker.slot, None)
                logger.info("worker %d (pid %d, generation %d) ready", worker.slot, worker.proc.pid, worker.generation)
            elif line == CLOSED:
                worker.closed = True
            else:
                self.recent.heard(line)
        if len(worker.partial) > 65536:
            worker.partial = b""  # no line is that long: not a worker's
        if not data:  # EOF: the worker's end is gone, it is exiting
            self._selector.unregister(worker.status_fd)
            os.close(worker.status_fd)
            worker.status_fd = -1

    def _reap(self) -> None:
        for worker in list(self.workers):
            code = worker.proc.poll()
            if code is None:
                continue
            worker.exit_code = code
            self.workers.remove(worker)
            if worker.status_fd >= 0:
                self._selector.unregister(worker.status_fd)
                os.close(worker.status_fd)
            os.close(worker.life_fd)
            if worker.retiring or self._stopping:
                continue
            if worker.generation == self.generation and not any(
                w.slot == worker.slot and not w.retiring for w in self.workers
            ):
                fails = self._failures.get(worker.slot, 0) + (0 if worker.ready else 1)
                self._failures[worker.slot] = fails
                pause = 0.0 if worker.ready else min(30.0, 0.5 * 2 ** (fails - 1))
                self.say(
                    f"switchyard: worker {worker.slot} (pid {worker.proc.pid}) exited with {code}; "
                    f"starting it again{f' in {pause:g}s' if pause else ''}"
                )
                self._respawn_at[worker.slot] = time.monotonic() + pause

    def _respawn_due(self) -> None:
        now = time.monotonic()
        for slot, at in list(self._respawn_at.items()):
            if at <= now and not self._stopping:
                del self._respawn_at[slot]
                if not any(w.slot == slot and not w.retiring for w in self.workers):
                    self._spawn(slot, self.generation)  # (a reload may have filled the slot meanwhile)

    def _pump(self, timeout: float) -> None:
        """Waits up to ``timeout`` for a signal or a worker's status, and handles what came."""
        for key, _ in self._selector.select(timeout):
            if key.fd == self._wake_r:
                with contextlib.suppress(BlockingIOError):
                    for signum in os.read(self._wake_r, 64):
                        self._on_signal(signum)
            else:
                self._on_status(key.data)
        self._reap()
        self._respawn_due()

    def _wait(self, done: Callable[[], bool], timeout: float) -> bool:
        """Pumps until ``done()`` (``True``) or ``timeout`` seconds have passed (``False``)."""
        deadline = time.monotonic() + timeout
        while not done():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._pump(min(left, 0.5))
        return True

    # -- signals ------------------------------------------------------------------------------

    def _on_signal(self, signum: int) -> None:
        if signum in (signal.SIGTERM, signal.SIGINT):
            self._stopping = True
        elif signum == signal.SIGHUP:
            self._reload_asked = True
        elif signum == signal.SIGUSR1:
            self._reload_asked = self._force_asked = True

    def _install_signals(self) -> None:
        # The handlers only wake the loop (the wakeup fd carries the signal number); the work
        # happens in _pump, outside signal context.
        signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGCHLD):
            signal.signal(signum, lambda *_: None)

    # -- lifecycle ----------------------------------------------------------------------------

    def run(self) -> int:
        """Starts the workers and supervises them until SIGTERM/SIGINT; returns the exit status."""
        self._install_signals()
        try:
            try:
                self._config_file, _ = self._snapshot(self.generation)
            except (ConfigError, OSError) as exc:
                self.say(f"switchyard: error: {self.config_path}: {exc}")
                return 1
            for slot in range(self.count):
                self._spawn(slot, self.generation)
            if not self._wait(lambda: self._stopping or self._all_ready(), START_TIMEOUT_S) or not self._all_ready():
                if not self._stopping:
                    self.say("switchyard: error: the workers did not start (their errors are above)")
                self._stop_all()
                return 0 if self._stopping else 1
            pids = ", ".join(str(w.proc.pid) for w in self.workers)
            self.say(f"switchyard: {self.count} worker(s) ready (pids {pids}); SIGHUP reloads {self.config_path}")
            while not self._stopping:
                if self._reload_asked:
                    force, self._reload_asked, self._force_asked = self._force_asked, False, False
                    self.reload(force=force)
                    continue
                self._pump(1.0)
            self._stop_all()
            return 0
        finally:
            signal.set_wakeup_fd(-1)
            self._close()

    def _all_ready(self) -> bool:
        current = [w for w in self.workers if not w.retiring]
        return len(current) == self.count and all(w.ready for w in current)

    def reload(self, *, force: bool = False) -> bool:
        """Rolls every slot over to a freshly loaded config; ``False`` when it was refused.

        Args:
            force: Apply a config that lacks every route that served traffic lately (one with
                no routes at all is refused still; see :mod:`switchyard.server.reload_check`).
        """
        generation = self.generation + 1
        try:
            config_file, loaded = self._snapshot(generation)
        except ConfigError as exc:
            detail = str(exc).replace("\n", "\n  ")
            self.say(f"switchyard: reload refused, invalid config {self.config_path}:\n  {detail}")
            self.say("switchyard: the workers keep serving the previous config")
            return False
        except OSError as exc:
            self.say(f"switchyard: reload refused, cannot read {self.config_path}: {exc}")
            return False
        recent = self.recent.recent()
        why = refusal(loaded, recent, force=force)
        if why is not None:
            os.unlink(config_file)
            self.say(f"switchyard: reload refused, {self.config_path}: {why}")
            self.say("switchyard: the workers keep serving the previous config")
            return False
        for warning in loaded.warnings:
            self.say(f"  {warning.render(self.config_path)}")
        if gone := dropped(loaded, recent):
            self.say(f"switchyard: warning: routes that served traffic in the last minute are gone: {', '.join(gone)}")
        note = memory_state_warning(loaded, self.count)
        if note:
            self.say(f"switchyard: warning: {note}")
        started: list[Worker] = []
        for slot in range(self.count):
            fresh = self._spawn(slot, generation, config_file)
            started.append(fresh)

            def settled(w: Worker = fresh) -> bool:
                return w.ready or not w.alive or self._stopping

            self._wait(settled, START_TIMEOUT_S)
            if not (fresh.ready and fresh.alive):
                if self._stopping:
                    return False
                self.say(
                    f"switchyard: reload refused: the new worker {slot} did not start (its errors are above); "
                    f"the workers keep serving the previous config"
                )
                self._roll_back(started)
                os.unlink(config_file)
                return False
            old = [w for w in self.workers if w.slot == slot and w.generation < generation and not w.retiring]
            for worker in old:
                self._retire(worker)

            def closed(ws: list[Worker] = old) -> bool:
                return all(w.closed or not w.alive for w in ws)

            # Before the next slot: the old worker no longer accepts (its status says so, or it exited).
            self._wait(closed, 30.0)
        self.generation = generation
        with contextlib.suppress(OSError):
            os.unlink(self._config_file)  # every worker of the old generation has loaded it
        self._config_file = config_file
        self._respawn_at.clear()
        pids = ", ".join(str(w.proc.pid) for w in self.workers if w.generation == generation)
        self.say(f"switchyard: reload complete: generation {generation} serving (pids {pids})")
        return True

    def _roll_back(self, started: list[Worker]) -> None:
        """Puts the slots a refused reload already switched back on the previous config."""
        restored = {w.slot: self._spawn(w.slot, self.generation) for w in started if w.alive and w.ready}

        def settled() -> bool:
            return self._stopping or all(w.ready or not w.alive for w in restored.values())

        self._wait(settled, START_TIMEOUT_S)
        for worker in started:
            back = restored.get(worker.slot)
            if back is not None and not (back.ready and back.alive):
                # Better the new config than an empty slot.
                self.say(f"switchyard: warning: worker {worker.slot} stays on the new config (restart failed)")
                continue
            self._retire(worker)

    def _retire(self, worker: Worker) -> None:
        """Tells a worker to stop accepting and finish its open requests."""
        worker.retiring = True
        with contextlib.suppress(ProcessLookupError):
            worker.proc.send_signal(signal.SIGTERM)

    def _stop_all(self) -> None:
        self._stopping = True
        for worker in self.workers:
            self._retire(worker)
        # A worker ends its open requests drain_s after SIGTERM and exits soon after.
        if not self._wait(lambda: not self.workers, self.drain_s + DRAIN_GRACE_S + 5):
            for worker in self.workers:
                with contextlib.suppress(ProcessLookupError):
                    worker.proc.kill()
            self._wait(lambda: not self.workers, 10)

    def _close_sockets(self) -> None:
        for sock in {id(s): s for s in self.sockets}.values():
            with contextlib.suppress(OSError):
                sock.close()

    def _close(self) -> None:
        self._close_sockets()
        self._selector.close()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self._private, ignore_errors=True)
