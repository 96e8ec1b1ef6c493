"""Route restriction rules: which requests only targets with certain labels may serve.

Layer: ``routers`` — imports ``protocol`` only; pure (no I/O).

A route's ``restrict:`` list holds :class:`RestrictRule` entries. Each rule looks at the
request's text — every message (system prompt, user and assistant text, reasoning, tool-call
arguments and tool results) — with either a regular expression (``pattern``) or a built-in
detector (``detector``), and when it matches, requires that the serving target carry all of
the rule's ``require`` labels. The engine (:mod:`switchyard.engine.restriction`) combines the
matched rules with the ``x-switchyard-require`` header and the inbound key's ``require_labels``
and removes every target that lacks a required label from every path of the request.

What a rule matched is never recorded: only the rule's name and how many matches it found (a
detector that recorded the secret it found would copy it into the decision log).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from switchyard.protocol.messages import ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from switchyard.protocol.request import ChatRequest

Detector = Literal["secrets", "api_keys", "emails"]

# Each pattern names one credential shape whose prefix its issuer documents, so ordinary prose
# and code rarely trip it; a generic ``password = ...`` assignment needs a long value.
_SECRET_PATTERNS: tuple[str, ...] = (
    r"\bsk-ant-[A-Za-z0-9_-]{20,}",  # Anthropic API keys
    r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,}",  # OpenAI API keys
    r"\bnvapi-[A-Za-z0-9_-]{32,}",  # NVIDIA API catalog keys
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key ids
    r"\bgh[pousr]_[A-Za-z0-9]{36,}",  # GitHub tokens
    r"\bgithub_pat_[A-Za-z0-9_]{40,}",  # GitHub fine-grained tokens
    r"\bglpat-[A-Za-z0-9_-]{20,}",  # GitLab personal access tokens
    r"\bxox[abposr]-[A-Za-z0-9-]{10,}",  # Slack tokens
    r"\bAIza[0-9A-Za-z_-]{35}\b",  # Google API keys
    r"\bhf_[A-Za-z0-9]{30,}",  # Hugging Face tokens
    r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |ENCRYPTED |PGP )?PRIVATE KEY(?: BLOCK)?-----",
    r"(?i:\b(?:api[_-]?key|secret[_-]?key|access[_-]?token|auth[_-]?token|password|passwd)"
    r"\b[\"']?\s*[:=]\s*[\"']?[A-Za-z0-9_/+=.-]{16,})",
)
_EMAIL_PATTERN = r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"

DETECTORS: dict[str, str] = {
    "secrets": "|".join(f"(?:{p})" for p in _SECRET_PATTERNS),
    "api_keys": "|".join(f"(?:{p})" for p in _SECRET_PATTERNS),
    "emails": _EMAIL_PATTERN,
}
"""Built-in detectors' expressions by name (``api_keys`` is another name for ``secrets``);
compiled only by a route that uses them."""


def clean_labels(value: list[str]) -> list[str]:
    """Labels trimmed and de-duplicated; raises ``ValueError`` for an empty one or a comma."""
    out: list[str] = []
    for label in value:
        label = label.strip()
        if not label:
            raise ValueError("labels must not be empty")
        if "," in label:
            raise ValueError(f"label {label!r} contains a comma (the header separates labels with commas)")
        out.append(label)
    return list(dict.fromkeys(out))


class RestrictRule(BaseModel):
    """One entry of a route's ``restrict:`` list.

    Attributes:
        name: How records and errors name the rule (default: the detector's name, or
            ``pattern``).
        detector: A built-in detector: ``secrets`` (alias ``api_keys``: provider API keys,
            cloud access keys, tokens, private-key blocks, long ``password=``-style values) or
            ``emails`` (e-mail addresses).
        pattern: A Python regular expression searched in the request's text.
        require: Labels the serving target must all carry when the rule matches.
    """

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    detector: Detector | None = None
    pattern: str | None = None
    require: list[str] = Field(min_length=1)

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from None
        return value

    @field_validator("require")
    @classmethod
    def _clean(cls, value: list[str]) -> list[str]:
        return clean_labels(value)

    @model_validator(mode="after")
    def _one_check(self) -> RestrictRule:
        if (self.detector is None) == (self.pattern is None):
            raise ValueError("set exactly one of 'detector' and 'pattern'")
        return self

    @property
    def label(self) -> str:
        """The rule's name in records and errors."""
        return self.name or self.detector or "pattern"

    def compiled(self) -> re.Pattern[str]:
        """The expression this rule searches with."""
        if self.detector is not None:
            return re.compile(DETECTORS[self.detector])
        assert self.pattern is not None  # the validator requires one of the two
        return re.compile(self.pattern)


def request_texts(request: ChatRequest) -> Iterator[str]:
    """Every piece of text the request would send upstream, message by message."""
    for message in request.messages:
        for part in message.content:
            if isinstance(part, TextPart | ReasoningPart):
                if part.text:
                    yield part.text
            elif isinstance(part, ToolCallPart):
                yield part.arguments
            elif isinstance(part, ToolResultPart):
                text = part.text
                if text:
                    yield text


class RestrictPolicy:
    """A route's compiled ``restrict:`` rules.

    Args:
        rules: The validated rules, in config order.
    """

    def __init__(self, rules: Sequence[RestrictRule]) -> None:
        self.rules = list(rules)
        self._compiled = [(rule, rule.compiled()) for rule in self.rules]

    def matches(self, request: ChatRequest) -> list[tuple[RestrictRule, int]]:
        """The rules that match ``request``, each with its number of matches."""
        if not self._compiled:
            return []
        texts = list(request_texts(request))
        found: list[tuple[RestrictRule, int]] = []
        for rule, expr in self._compiled:
            count = sum(1 for text in texts for _ in expr.finditer(text))
            if count:
                found.append((rule, count))
        return found


def parse_labels(value: str) -> list[str]:
    """Labels from a comma-separated header value (blank items ignored)."""
    return list(dict.fromkeys(item.strip() for item in value.split(",") if item.strip()))
