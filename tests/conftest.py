"""Shared fixtures: loopback-only networking, a real fake upstream, the issue's example config."""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Generator, Iterator
from typing import Any

import pytest
from _configs import skeleton_config

from switchyard.testing import FakeUpstream, serve_fake

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _loopback_only(address: Any) -> None:
    if isinstance(address, tuple) and address:
        host = address[0]
        try:
            if ipaddress.ip_address(host).is_loopback:
                return
        except ValueError:
            if host == "localhost":
                return
        raise ConnectionRefusedError(f"tests may only reach 127.0.0.1, not {host!r}")


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """Serve as ``switchyard serve`` does: uvicorn's access logger without handlers.

    pytest's log capture attaches its handlers to every logger that does not propagate, uvicorn's
    access logger too (uvicorn turns it off that way). uvicorn reads "has handlers" as "access log
    on" and its ASGI send then logs each answer, so the proxy leaves every answer to that send
    (server/whole_answer.py) and the suite would never run the path ``serve`` runs. This hook runs
    inside the capture's: the access logger goes back to no handlers for the test's body.
    """
    access = logging.getLogger("uvicorn.access")
    if not access.propagate:
        access.handlers = []
    yield


@pytest.fixture(autouse=True)
def _no_internet(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every socket connection outside loopback fails fast."""

    def connect(self: socket.socket, address: Any) -> None:
        _loopback_only(address)
        _real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        _loopback_only(address)
        return _real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)


@pytest.fixture
def upstream() -> Iterator[Any]:
    """A started fake OpenAI-compatible upstream; ``upstream.app`` is the :class:`FakeUpstream`."""
    server = serve_fake(FakeUpstream())
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def module_upstream() -> Iterator[Any]:
    """Like ``upstream``, shared by the tests of one module (starting a server costs ~0.3 s).

    Tests must not depend on ``received`` being empty; look at the latest entries instead.
    """
    server = serve_fake(FakeUpstream())
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def config(upstream: Any) -> dict[str, Any]:
    """The skeleton config over the running fake upstream."""
    return skeleton_config(upstream.port)


@pytest.fixture(scope="module")
def module_config(module_upstream: Any) -> dict[str, Any]:
    """The skeleton config over the module's shared fake upstream."""
    return skeleton_config(module_upstream.port)
