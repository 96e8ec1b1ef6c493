"""A real ``redis-server`` for tests: own port, own temporary directory, no persistence.

Integration tests of the Redis state backend use the real server, never a fake. When the binary
is missing the tests fail with the command that installs it (``make test`` installs it itself
when it runs as root); ``SWITCHYARD_SKIP_REDIS=1`` turns that failure into a skip.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pytest
from _waits import stop, wait_until

INSTALL_HINT = (
    "these tests need a real redis-server on PATH: apt-get install -y redis-server "
    "(Debian/Ubuntu; `make test` does this when run as root), brew install redis (macOS); "
    "or set SWITCHYARD_SKIP_REDIS=1 to skip them"
)


def redis_binary() -> str:
    """The ``redis-server`` path, or a test failure (skip with ``SWITCHYARD_SKIP_REDIS=1``)."""
    found = shutil.which("redis-server")
    if found is None:
        if os.environ.get("SWITCHYARD_SKIP_REDIS") == "1":
            pytest.skip("redis-server is not installed (SWITCHYARD_SKIP_REDIS=1)")
        pytest.fail(INSTALL_HINT)
    return found


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """One ``redis-server`` process on 127.0.0.1; :meth:`kill` and :meth:`start` again keep the port.

    Args:
        workdir: Its working directory (a pytest ``tmp_path``).
        password: Require this password (``requirepass``); :attr:`url` then carries it.
    """

    def __init__(self, workdir: Path, password: str | None = None) -> None:
        self.binary = redis_binary()
        self.workdir = workdir
        self.password = password
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT/0`` (``redis://:PASSWORD@…`` with a password)."""
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        """Starts the server and waits (≤ 10 s) until it answers PING."""
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.workdir)]
        args += ["--save", "", "--appendonly", "no", "--protected-mode", "no", "--loglevel", "warning"]
        if self.password:
            args += ["--requirepass", self.password]
        with (self.workdir / "redis.log").open("ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        proc = self.proc

        def up() -> bool:
            assert proc.poll() is None, f"redis-server exited with {proc.returncode}"
            return self.ping()

        try:
            wait_until(up, 10, "redis-server answering PING", every=0.02)
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {(self.workdir / 'redis.log').read_text()[-500:]}") from None
        return self

    def ping(self) -> bool:
        """Whether the server answers ``PING`` right now."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                if self.password:
                    sock.sendall(f"AUTH {self.password}\r\n".encode())
                    if not sock.recv(16).startswith(b"+OK"):
                        return False
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def pause(self) -> None:
        """Freezes the server (SIGSTOP): connections stay open and nothing answers — a hung Redis."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """Lets a paused server run again (SIGCONT)."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """Kills the server at once (SIGKILL: no goodbye to connected clients); its data is lost."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None

    def stop(self) -> None:
        """Stops the server (if running)."""
        if self.proc is not None:
            self.resume()
            stop(self.proc)
            self.proc = None
