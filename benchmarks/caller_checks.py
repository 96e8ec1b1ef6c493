"""CPU cost of the per-request caller checks of issue 23 (no server: the functions themselves).

Usage::

    PYTHONPATH=. .venv/bin/python benchmarks/caller_checks.py

Times, per call (best of 5 repeats): the header meter on a typical SDK request head arriving in
one read (``HeadMeter.feed``), the ``Host`` rules (``host_problem``, cached per value), the
access-log escape of a printable path (``printable``) and the session-id bound on a 36-character
id (``bounded_id``). Compare with the proxy's ~250 µs of CPU per request (docs/benchmarks.md).
"""

from __future__ import annotations

import timeit

from switchyard.engine.session import bounded_id
from switchyard.server.access_log import printable
from switchyard.server.connections import HeadMeter
from switchyard.server.guard import host_problem

HEAD = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:4000\r\nAccept-Encoding: gzip, deflate\r\n"
    b"Connection: keep-alive\r\nAccept: application/json\r\nContent-Type: application/json\r\n"
    b"User-Agent: OpenAI/Python 1.99.0\r\nX-Stainless-Lang: python\r\nX-Stainless-Package-Version: 1.99.0\r\n"
    b"X-Stainless-OS: Linux\r\nX-Stainless-Arch: x64\r\nX-Stainless-Runtime: CPython\r\n"
    b"X-Stainless-Runtime-Version: 3.11.7\r\nAuthorization: Bearer sy-0123456789abcdef0123456789abcdef0123456\r\n"
    b"X-Stainless-Async: false\r\nx-stainless-retry-count: 0\r\nx-stainless-read-timeout: 600\r\n"
    b"Content-Length: 1200\r\n\r\n"
) + b'{"model": "agent", "messages": []}' * 35


def main() -> int:
    meter = HeadMeter(16 * 1024, 100)
    fields = [tuple(line.split(b": ", 1)) for line in HEAD.split(b"\r\n\r\n")[0].split(b"\r\n")[1:]]
    raw = [(k.lower(), v) for k, v in fields]
    headers = {k.decode(): v.decode() for k, v in raw}

    def feed() -> None:
        meter.restart()
        meter.feed(HEAD)

    cases = [
        ("HeadMeter.feed (18 fields + body, one read)", feed),
        ("host_problem", lambda: host_problem(raw, headers, "1.1")),  # type: ignore[arg-type]
        ("printable(path)", lambda: printable("/v1/chat/completions")),
        ("bounded_id(36 chars)", lambda: bounded_id("0b8f6c1e-6a57-4f0e-9d5e-1f1bbd0c2a11")),
        ("(empty call, for scale)", lambda: None),
    ]
    n = 100_000
    for name, fn in cases:
        best = min(timeit.repeat(fn, number=n, repeat=5)) / n
        print(f"{name:<45} {best * 1e9:8.0f} ns")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
