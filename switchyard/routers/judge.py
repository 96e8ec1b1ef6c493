"""Shared machinery of every router that asks a model for a JSON verdict.

Layer: ``routers`` — imports ``protocol`` only. No I/O: the judge is reached through the
injected :class:`~switchyard.protocol.call.ModelCall`, whose calls the engine books as routing
overhead (calls, tokens, USD, latency in ``DecisionRecord.router_cost``).

A judge call is one fresh request: our instructions as the only system message (the client's
system prompt is never forwarded), one user message holding a rendered view of the
conversation, no tools, and a ``response_format``:

* ``json_schema`` — structured output: the provider is asked to follow the schema strictly;
* ``json_object`` — plain JSON mode for providers without structured output: the schema is
  appended to the instructions.

Either way the answer is parsed and validated here (providers do not always obey), with one
Markdown code fence tolerated around the JSON. Reasoning-model judges (Nemotron, DeepSeek) often
leave ``content`` empty and put the verdict in their reasoning; ``verdict_from_reasoning``
falls back to that text. Every failure becomes a :class:`JudgeFailure` with a short reason the
router turns into its fail-open decision.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from switchyard._dataclass import dataclass
from switchyard.protocol.call import ModelCall
from switchyard.protocol.errors import (
    ContextWindowExceededError,
    SwitchyardError,
    UpstreamConnectionError,
    UpstreamProtocolError,
    UpstreamStatusError,
    UpstreamTimeoutError,
)
from switchyard.protocol.messages import Message
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse
from switchyard.routers.jsonschema import validate

logger = logging.getLogger("switchyard.routers.judge")

ResponseFormatType = Literal["json_schema", "json_object"]
"""How the judge is asked for JSON."""

FailureReason = Literal[
    "timeout",
    "transport",
    "upstream_5xx",
    "upstream_4xx",
    "context_overflow",
    "invalid_response",
    "empty",
    "parse_error",
    "invalid_verdict",
    "inconsistent",
    "missing_labels",
    "unknown_labels",
    "duplicate_labels",
    "bad_probability",
    "probability_sum",
]
"""Why a judge gave no usable verdict (recorded in ``details["judge_failure"]``). The
``*_labels``, ``bad_probability`` and ``probability_sum`` reasons are a decision model's
(docs/decision-model.md)."""

Check = Callable[[dict[str, Any]], "str | None"]
"""A semantic check beyond the schema: returns a problem, or ``None`` when the verdict holds."""

_FENCE = re.compile(r"^```[A-Za-z0-9_+-]*[ \t]*\n(?P<body>.*?)\n?```$", re.DOTALL)


class JudgeFailure(Exception):
    """A judge call that produced no usable verdict.

    Attributes:
        reason: A :data:`FailureReason`.
        detail: One short line for logs and records; never an upstream body.
    """

    def __init__(self, reason: FailureReason, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason: FailureReason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True)
class JudgeSettings:
    """How one judge target is called.

    Attributes:
        target: Name of the judge target (never a routing destination).
        response_format_type: ``json_schema`` or ``json_object``.
        max_output_tokens: Cap on the judge's answer (reasoning included).
        timeout_s: Deadline for the whole judge call; ``None`` leaves only the client timeouts.
        verdict_from_reasoning: Parse the reasoning text when ``content`` is empty.
    """

    target: str
    response_format_type: ResponseFormatType = "json_schema"
    max_output_tokens: int = 4096
    timeout_s: float | None = 30.0
    verdict_from_reasoning: bool = False


def packaged_text(name: str) -> str:
    """A file shipped in ``switchyard/routers/prompts``."""
    return resources.files("switchyard.routers").joinpath("prompts", name).read_text(encoding="utf-8")


def packaged_schema(name: str) -> dict[str, Any]:
    """A JSON Schema shipped in ``switchyard/routers/prompts``."""
    value = json.loads(packaged_text(name))
    assert isinstance(value, dict)
    return value


class JsonJudge:
    """Asks one judge target for one JSON object that matches a schema.

    Args:
        settings: Target and call options.
        prompt: The judge's instructions (system message).
        schema: JSON Schema of the verdict (an object schema).
        schema_name: Name sent with a ``json_schema`` response format.
        check: Extra semantic validation after the schema passed.
    """

    def __init__(
        self,
        settings: JudgeSettings,
        *,
        prompt: str,
        schema: Mapping[str, Any],
        schema_name: str,
        check: Check | None = None,
    ) -> None:
        self.settings = settings
        self.schema = dict(schema)
        self.schema_name = schema_name
        self._check = check
        if settings.response_format_type == "json_object":
            rendered = json.dumps(self.schema, indent=2)
            self.instructions = (
                prompt.rstrip()
                + "\n\n## Answer format\n\nAnswer with one JSON object and nothing else — no prose before or after "
                "it. The object must validate against this JSON Schema:\n\n```json\n" + rendered + "\n```\n"
            )
            self.response_format: dict[str, Any] = {"type": "json_object"}
        else:
            self.instructions = prompt
            self.response_format = {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "strict": True, "schema": self.schema},
            }

    @property
    def target(self) -> str:
        """The judge target's name."""
        return self.settings.target

    def build_request(self, view: str) -> ChatRequest:
        """The judge request for a rendered conversation ``view``."""
        return ChatRequest(
            messages=[Message.of("system", self.instructions), Message.of("user", view)],
            max_tokens=self.settings.max_output_tokens,
            response_format=self.response_format,
        )

    async def ask(self, call: ModelCall, view: str) -> dict[str, Any]:
        """Calls the judge and returns its validated verdict.

        Raises:
            JudgeFailure: Timeout, upstream error, or an answer that is not a valid verdict.
        """
        return self.parse(await call_judge(call, self.settings, self.build_request(view)))

    def parse(self, response: ChatResponse) -> dict[str, Any]:
        """Extracts and validates the verdict of a judge answer.

        Raises:
            JudgeFailure: ``empty``, ``parse_error``, ``invalid_verdict`` or ``inconsistent``.
        """
        value = self.extract(response)
        if not isinstance(value, dict):
            raise self._failed("invalid_verdict", f"expected a JSON object, got {type(value).__name__}")
        problems = validate(value, self.schema)
        if problems:
            raise self._failed("invalid_verdict", "; ".join(problems[:3]))
        if self._check is not None:
            problem = self._check(value)
            if problem:
                raise self._failed("inconsistent", problem)
        return value

    def extract(self, response: ChatResponse) -> Any:
        """The JSON document of a judge answer, not yet validated (from the reasoning text when
        ``content`` is empty and ``verdict_from_reasoning`` is on).

        Raises:
            JudgeFailure: ``empty`` or ``parse_error``.
        """
        text = response.text.strip()
        lenient = False
        if not text and self.settings.verdict_from_reasoning:
            text, lenient = response.reasoning.strip(), True
        if not text:
            hint = "" if self.settings.verdict_from_reasoning else " (set verdict_from_reasoning for reasoning judges)"
            detail = "answer has no content" + (hint if response.reasoning else "")
            raise self._failed("empty", detail)
        value = extract_json(text, lenient=lenient)
        if value is None:
            raise self._failed("parse_error", f"answer of {len(text)} chars holds no JSON object")
        return value

    def _failed(self, reason: FailureReason, detail: str) -> JudgeFailure:
        return judge_failed(self.target, reason, detail)


def judge_failed(target: str, reason: FailureReason, detail: str) -> JudgeFailure:
    """A :class:`JudgeFailure` of judge ``target``, logged once as a warning."""
    logger.warning("judge %r gave no verdict (%s): %s", target, reason, detail)
    return JudgeFailure(reason, detail)


async def call_judge(call: ModelCall, settings: JudgeSettings, request: ChatRequest) -> ChatResponse:
    """One judge call on ``settings.target`` within ``settings.timeout_s``.

    Raises:
        JudgeFailure: ``timeout``, or the class of the upstream error (``upstream_5xx`` …).
    """
    try:
        if settings.timeout_s is None:
            return await call(settings.target, request)
        return await asyncio.wait_for(call(settings.target, request), settings.timeout_s)
    except TimeoutError:
        raise judge_failed(settings.target, "timeout", f"no verdict within {settings.timeout_s:g}s") from None
    except SwitchyardError as exc:
        raise judge_failed(settings.target, *_classify_error(exc)) from None


def _classify_error(exc: SwitchyardError) -> tuple[FailureReason, str]:
    # Only the error class and status go to logs: upstream bodies may echo prompts or secrets.
    name = type(exc).__name__
    if isinstance(exc, ContextWindowExceededError):
        return "context_overflow", "judge prompt exceeds the judge's context window"
    if isinstance(exc, UpstreamTimeoutError):
        return "timeout", f"{name} from the judge's client"
    if isinstance(exc, UpstreamStatusError):
        return ("upstream_5xx" if exc.upstream_status >= 500 else "upstream_4xx"), f"HTTP {exc.upstream_status}"
    if isinstance(exc, UpstreamConnectionError):
        return "transport", name
    if isinstance(exc, UpstreamProtocolError):
        return "invalid_response", name
    return "transport", f"{name} (status {exc.status})"


def extract_json(text: str, *, lenient: bool = False) -> Any:
    """Parses the JSON document in ``text``.

    Strict mode (answers in ``content``) accepts the bare document or the document inside one
    Markdown code fence, nothing else. Lenient mode (verdicts read from reasoning, where the JSON
    follows the model's deliberation) also takes the last JSON object that appears in the text.

    Returns:
        The parsed value, or ``None`` when there is none.
    """
    text = text.strip()
    fenced = _FENCE.match(text)
    candidate = fenced.group("body") if fenced else text
    try:
        return json.loads(candidate)
    except ValueError:
        pass
    if not lenient:
        return None
    return _last_object(text)


def _last_object(text: str, max_tries: int = 64) -> dict[str, Any] | None:
    """The last top-level JSON object embedded in prose (a bounded number of parse attempts)."""
    decoder = json.JSONDecoder()
    starts = [m.start() for m in re.finditer(r"\{", text)][-max_tries:]
    found: dict[str, Any] | None = None
    found_end = -1
    for start in starts:
        if start < found_end:
            continue  # inside the object already found
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(value, dict):
            found, found_end = value, end
    return found


LEGACY_PLACEHOLDER = "{{RESPONSE_SCHEMA}}"
"""A placeholder older judge prompts carried; the schema is now supplied automatically."""


def read_prompt(prompt: str | None, prompt_file: str | None, config_dir: str | None) -> str | None:
    """A judge prompt given inline or as a file (relative to the config's directory).

    Raises:
        ValueError: The file cannot be read, is empty, or carries the legacy placeholder.
    """
    if prompt_file is None:
        return prompt
    path = Path(prompt_file)
    if not path.is_absolute() and config_dir:
        path = Path(config_dir) / path
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"prompt_file: cannot read {path}: {exc.strerror or exc}") from None
    if not text.strip():
        raise ValueError(f"prompt_file: {path} is empty")
    if LEGACY_PLACEHOLDER in text:
        raise ValueError(f"prompt_file: {path} contains {LEGACY_PLACEHOLDER}; remove it")
    return text
