"""Anthropic message threads in the fake upstream (beta ``message-threads-2026-08-12``).

As the Anthropic SDKs (``anthropic`` 2.15 for Python, ``@anthropic-ai/sdk`` 1.15 for
JavaScript) describe the API: ``thread`` is accepted only with the beta flag in
``anthropic-beta``; ``{"type": "create"}`` keeps the conversation (system, tools, messages and
the reply) under the reply's ``id``; ``{"type": "continue", "previous_message_id": id}`` sends
only the new messages, takes ``system`` and ``tools`` from the thread (and refuses a request
that repeats them), and continues each reply at most once. An unknown id is answered 404
``not_found_error`` with ``error.details.error_code: "thread_not_found"``; a reply continued a
second time 400 ``thread_already_continued``. The rules and their sources: ``docs/fakes.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from switchyard._dataclass import dataclass

BETA = "message-threads-2026-08-12"
CREATE_ONLY = ("system", "tools")
"""Fields a ``continue`` takes from the thread (the SDKs' ``CREATE_ONLY_FIELDS``)."""


class ThreadError(Exception):
    """A thread request the real API refuses: status, error type and ``error_code``."""

    def __init__(self, status: int, kind: str, code: str | None, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.code = code

    def body(self) -> dict[str, Any]:
        """The Anthropic error envelope, with ``details.error_code`` when there is a code."""
        error: dict[str, Any] = {"type": self.kind, "message": str(self)}
        if self.code:
            error["details"] = {"error_code": self.code}
        return {"type": "error", "error": error, "request_id": "req_fake"}


@dataclass(slots=True)
class _Held:
    fields: dict[str, Any]
    messages: list[dict[str, Any]]
    continued: bool = False


class Threads:
    """The threads one fake server holds, by reply id."""

    def __init__(self) -> None:
        self._held: dict[str, _Held] = {}

    def __len__(self) -> int:
        return len(self._held)

    def expand(self, body: dict[str, Any], headers: Mapping[str, str]) -> tuple[dict[str, Any], str | None]:
        """The request as the model sees it (the thread's history and fields prepended), and
        what its reply continues: ``""`` for a new thread, the previous id for a ``continue``,
        ``None`` when the request is not threaded.

        Raises:
            ThreadError: A ``thread`` the real API refuses.
        """
        thread = body.get("thread")
        if thread is None:
            return body, None
        flags = {flag.strip() for flag in (headers.get("anthropic-beta") or "").split(",")}
        if BETA not in flags:
            raise ThreadError(400, "invalid_request_error", None, "thread: Extra inputs are not permitted")
        rest = {k: v for k, v in body.items() if k != "thread"}
        kind = thread.get("type") if isinstance(thread, dict) else None
        if kind == "create":
            return rest, ""
        if kind != "continue":
            raise ThreadError(400, "invalid_request_error", None, "thread.type: Input should be 'create' or 'continue'")
        previous = thread.get("previous_message_id")
        held = self._held.get(previous) if isinstance(previous, str) else None
        if held is None:
            raise ThreadError(
                404,
                "not_found_error",
                "thread_not_found",
                f"No thread state was found for previous_message_id {previous!r}; replay the conversation "
                'with thread: {"type": "create"}',
            )
        if held.continued:
            raise ThreadError(
                400,
                "invalid_request_error",
                "thread_already_continued",
                f"{previous!r} has already been continued; continue from the thread's most recent response id",
            )
        repeated = [f for f in CREATE_ONLY if f in rest]
        if repeated:
            raise ThreadError(
                400, "invalid_request_error", None, f"{repeated[0]}: cannot be set on a thread continue request"
            )
        assert isinstance(previous, str)
        return {**rest, **held.fields, "messages": [*held.messages, *(rest.get("messages") or [])]}, previous

    def keep(self, request: dict[str, Any], reply: dict[str, Any], previous: str) -> None:
        """Keeps the expanded ``request`` and its ``reply`` under the reply's ``id``; the reply it
        continued (``previous``) cannot be continued again."""
        if previous and previous in self._held:
            self._held[previous].continued = True
        fields = {k: request[k] for k in CREATE_ONLY if k in request}
        answer = {"role": "assistant", "content": reply.get("content") or []}
        self._held[str(reply["id"])] = _Held(fields, [*(request.get("messages") or []), answer])
