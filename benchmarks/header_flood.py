"""Header floods against a real ``switchyard serve``: how much memory an oversized head costs.

Usage::

    PYTHONPATH=. .venv/bin/python benchmarks/header_flood.py            # 4 connections per attack
    PYTHONPATH=. .venv/bin/python benchmarks/header_flood.py --json out.json

Two attacks, each from ``--connections`` raw sockets at once, none of which ever finishes its
head: one header line of ``--line-mib`` MiB, and ``--fields`` small header fields. Each runs
against the proxy twice — with the default caps (``server.limits.max_header_bytes`` 16 KiB,
``max_header_fields`` 100) and with the caps lifted out of reach (what the proxy did before
them: httptools keeps a field's bytes until the field ends). The proxy runs in a subprocess
(``python -m switchyard serve``), so ``VmHWM`` (peak RSS) in ``/proc`` is its own; the table
shows peak RSS above the idle reading, and what each client was answered.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

CHUNK = 64 * 1024


def _status(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def _config(caps: bool) -> dict[str, Any]:
    server: dict[str, Any] = {"client_timeouts": {"header_s": 60}}
    if not caps:
        server["limits"] = {"max_header_bytes": 1 << 30, "max_header_fields": 1 << 30}
    return {
        "llm_clients": {"dead": {"format": "openai_chat", "base_url": "http://127.0.0.1:9/v1"}},
        "targets": {"t": {"client": "dead", "model": "m"}},
        "routes": {"r": {"type": "passthrough", "target": "t"}},
        "server": server,
    }


def _attack(port: int, payload: bytes, results: list[str], sent: list[int], held: threading.Event) -> None:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    total = 0
    try:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        for i in range(0, len(payload), CHUNK):
            sock.sendall(payload[i : i + CHUNK])
            total += min(CHUNK, len(payload) - i)
        answer = b"(held: no answer)"
        held.wait(30)  # every client has sent all it could: the proxy's peak is now
    except (BrokenPipeError, ConnectionResetError):
        answer = b""
    sock.settimeout(2)
    try:
        answer = sock.recv(64).split(b"\r\n")[0] or answer
    except OSError:
        pass
    results.append(answer.decode("latin-1") or "(closed)")
    sent.append(total)
    sock.close()


def run(caps: bool, attack: str, payload: bytes, connections: int) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="switchyard-flood-"))
    (tmp / "flood.yaml").write_text(yaml.safe_dump(_config(caps)))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    cmd = [sys.executable, "-m", "switchyard", "serve", "-c", str(tmp / "flood.yaml"), "--port", str(port)]
    proc = subprocess.Popen(
        [*cmd, "--log-level", "error"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit("proxy did not start") from None
                time.sleep(0.1)
        time.sleep(0.5)
        idle = _status(proc.pid)["VmRSS"]
        results: list[str] = []
        sent: list[int] = []
        held = threading.Event()
        threads = [
            threading.Thread(target=_attack, args=(port, payload, results, sent, held)) for _ in range(connections)
        ]
        for t in threads:
            t.start()
        # Wait until the proxy has read everything it will read (its RSS stops moving), bounded.
        last, stable, until = -1, 0, time.monotonic() + 30
        while stable < 5 and time.monotonic() < until:
            time.sleep(0.2)
            now = _status(proc.pid)["VmHWM"]
            stable = stable + 1 if now == last else 0
            last = now
        held.set()
        for t in threads:
            t.join(30)
        peak = _status(proc.pid)["VmHWM"]
    finally:
        proc.terminate()
        proc.wait(10)
    return {
        "attack": attack,
        "caps": "default" if caps else "lifted",
        "connections": connections,
        "payload_mib": round(len(payload) / 2**20, 2),
        "client_sent_mib_max": round(max(sent or [0]) / 2**20, 2),
        "peak_rss_over_idle_mib": round((peak - idle) / 1024, 1),
        "answers": sorted(set(results)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--line-mib", type=int, default=8)
    parser.add_argument("--fields", type=int, default=20_000)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    line = b"x-big: " + b"a" * (args.line_mib * 2**20)
    fields = b"".join(b"x-f%d: v\r\n" % i for i in range(args.fields))
    rows = [
        run(caps, name, payload, args.connections)
        for name, payload in (("one long line", line), ("many fields", fields))
        for caps in (True, False)
    ]
    for r in rows:
        print(
            f"{r['attack']:>14} caps {r['caps']:>7}: {r['connections']} x {r['payload_mib']} MiB, "
            f"client sent <= {r['client_sent_mib_max']} MiB, peak RSS +{r['peak_rss_over_idle_mib']} MiB, "
            f"answers {r['answers']}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
