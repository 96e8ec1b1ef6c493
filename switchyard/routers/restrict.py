"""Route restriction rules: which requests only targets with certain labels may serve.

Layer: ``routers`` — imports ``protocol`` only; pure (no I/O).

A route's ``restrict:`` list holds :class:`RestrictRule` entries. Each rule looks at the
request's text — everything a target would receive: system prompt and messages, tool
definitions and their schemas, documents and search results, predictions, response formats,
metadata and every other forwarded field (:mod:`switchyard.routers.restrict_text` says exactly
what is read) — with either a regular expression (``pattern``) or a built-in detector
(``detector``), and when it matches, requires that the serving target carry all of the rule's
``require`` labels. The engine (:mod:`switchyard.engine.restriction`) combines the
matched rules with the ``x-switchyard-require`` header and the inbound key's ``require_labels``
and removes every target that lacks a required label from every path of the request.

What a rule matched is never recorded: only the rule's name and how many matches it found (a
detector that recorded the secret it found would copy it into the decision log).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from switchyard.protocol.request import ChatRequest
from switchyard.routers.patterns import checked_pattern
from switchyard.routers.restrict_text import texts

Detector = Literal["secrets", "api_keys", "emails"]

# Each shape names one credential format whose prefix its issuer documents, so ordinary prose
# and code rarely trip it; a generic ``password = ...`` assignment needs a long value. Each comes
# with literal triggers: the expression runs only on text that contains one (a substring search
# in C). See benchmarks/restrict_scan.py for what a scan costs.
_W = "[A-Za-z0-9_]"  # a character that may not precede a token (it would be part of a longer word)
_VALUE = r"\b[\"']?\s*[:=]\s*[\"']?[a-z0-9_/+=.-]{16,}"
_SECRET_SHAPES: tuple[tuple[tuple[str, ...], str, bool], ...] = (
    # Every expression starts with its literal (the regex engine then skips to it), and checks
    # what precedes that literal with a look-behind instead of a leading \b.
    (("sk-ant-",), rf"sk-ant-(?<!{_W}sk-ant-)[A-Za-z0-9_-]{{20,}}", False),  # Anthropic API keys
    (("sk-",), rf"sk-(?<!{_W}sk-)(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{{32,}}", False),  # OpenAI
    (("nvapi-",), rf"nvapi-(?<!{_W}nvapi-)[A-Za-z0-9_-]{{32,}}", False),  # NVIDIA API catalog keys
    (("AKIA", "ASIA"), rf"A[KS]IA(?<!{_W}A[KS]IA)[0-9A-Z]{{16}}\b", False),  # AWS access key ids
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), rf"gh[pousr]_(?<!{_W}gh[pousr]_)[A-Za-z0-9]{{36,}}", False),  # GitHub
    (("github_pat_",), rf"github_pat_(?<!{_W}github_pat_)[A-Za-z0-9_]{{40,}}", False),  # GitHub fine-grained
    (("glpat-",), rf"glpat-(?<!{_W}glpat-)[A-Za-z0-9_-]{{20,}}", False),  # GitLab personal access tokens
    (("xox",), rf"xox[abposr]-(?<!{_W}xox[abposr]-)[A-Za-z0-9-]{{10,}}", False),  # Slack tokens
    (("AIza",), rf"AIza(?<!{_W}AIza)[0-9A-Za-z_-]{{35}}\b", False),  # Google API keys
    (("hf_",), rf"hf_(?<!{_W}hf_)[A-Za-z0-9]{{30,}}", False),  # Hugging Face tokens
    (("PRIVATE KEY",), r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |ENCRYPTED |PGP )?PRIVATE KEY(?: BLOCK)?-----", False),
    # ``api_key = "…"``-style assignments, in any case: searched in the lower-cased text.
    (("api",), rf"api(?<![a-z0-9_]api)[_-]?key{_VALUE}", True),
    (("secret",), rf"secret(?<![a-z0-9_]secret)[_-]?key{_VALUE}", True),
    (("access",), rf"access(?<![a-z0-9_]access)[_-]?token{_VALUE}", True),
    (("auth",), rf"auth(?<![a-z0-9_]auth)[_-]?token{_VALUE}", True),
    (("passw",), rf"passw(?<![a-z0-9_]passw)(?:or)?d{_VALUE}", True),
)
_EMAIL_SHAPES: tuple[tuple[tuple[str, ...], str, bool], ...] = (
    (("@",), r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b", False),
)

DETECTORS: dict[str, tuple[tuple[tuple[str, ...], str, bool], ...]] = {
    "secrets": _SECRET_SHAPES,
    "api_keys": _SECRET_SHAPES,
    "emails": _EMAIL_SHAPES,
}
"""Built-in detectors by name (``api_keys`` is another name for ``secrets``): their shapes as
``(literal triggers, expression, on the lower-cased text)``, compiled only by a route that uses them."""


class Matcher:
    """Counts the places in a text where any of a rule's shapes matches (overlaps counted once).

    Args:
        shapes: ``(literal triggers, compiled expression, on the lower-cased text)``; no
            triggers: the expression always runs.
    """

    def __init__(self, shapes: list[tuple[tuple[str, ...], re.Pattern[str], bool]]) -> None:
        self.shapes = shapes

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where ``text`` matches, overlapping matches merged, in order.

        The spans of shapes searched in the lower-cased text are positions in ``text`` as long
        as lower-casing kept its length; where it did not (a few non-ASCII letters lower-case to
        two characters), such a shape's match covers the whole text.
        """
        lowered: str | None = None
        spans: list[tuple[int, int]] = []
        for triggers, expr, fold in self.shapes:
            hay = text
            if fold:
                lowered = text.lower() if lowered is None else lowered
                hay = lowered
            if triggers and not any(t in hay for t in triggers):
                continue
            found = [m.span() for m in expr.finditer(hay)]
            if found and fold and len(hay) != len(text):
                found = [(0, len(text))]
            spans += found
        if len(spans) < 2:
            return spans
        spans.sort()
        merged = [spans[0]]
        for start, stop in spans[1:]:
            last_start, last_stop = merged[-1]
            if start < last_stop:
                merged[-1] = (last_start, max(last_stop, stop))
            else:
                merged.append((start, stop))
        return merged

    def count(self, text: str) -> int:
        """How many distinct matches ``text`` holds."""
        return len(self.spans(text))

    def redact(self, text: str, mask: str) -> str:
        """``text`` with every match replaced by ``mask``."""
        spans = self.spans(text)
        if not spans:
            return text
        pieces, at = [], 0
        for start, stop in spans:
            pieces += [text[at:start], mask]
            at = stop
        pieces.append(text[at:])
        return "".join(pieces)


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

    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: str | None = None
    detector: Detector | None = None
    pattern: str | None = None
    require: list[str] = Field(min_length=1)

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        return None if value is None else checked_pattern(value)

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

    def compiled(self) -> Matcher:
        """What this rule searches with."""
        if self.detector is not None:
            return Matcher([(t, re.compile(p), fold) for t, p, fold in DETECTORS[self.detector]])
        assert self.pattern is not None  # the validator requires one of the two
        return Matcher([((), re.compile(self.pattern), False)])


class RestrictPolicy:
    """A route's compiled ``restrict:`` rules.

    Args:
        rules: The validated rules, in config order.
    """

    def __init__(self, rules: Sequence[RestrictRule]) -> None:
        self.rules = list(rules)
        self._compiled = [(rule, rule.compiled()) for rule in self.rules]

    def matches(self, request: ChatRequest, body: dict[str, Any] | None = None) -> list[tuple[RestrictRule, int]]:
        """The rules that match ``request``, each with its number of matches.

        Args:
            request: The IR request.
            body: The caller's JSON body it was decoded from, if any: an upstream of the
                caller's format receives it verbatim, so it is read as well.

        The texts read (:func:`switchyard.routers.restrict_text.texts`) are searched as one,
        joined by newlines: a rule scans once however many pieces a request has.
        """
        if not self._compiled:
            return []
        joined = "\n".join(texts(request, body))
        found: list[tuple[RestrictRule, int]] = []
        for rule, expr in self._compiled:
            count = expr.count(joined)
            if count:
                found.append((rule, count))
        return found

    def redactor(self, rules: Sequence[RestrictRule], mask: str) -> Callable[[str], str]:
        """A function that replaces in a text whatever any of ``rules`` (of this policy) matches
        with ``mask``: what previews of the request show."""
        chosen = [expr for rule, expr in self._compiled if any(rule is r for r in rules)]

        def redact(text: str) -> str:
            for expr in chosen:
                text = expr.redact(text, mask)
            return text

        return redact


def parse_labels(value: str) -> list[str]:
    """Labels from a comma-separated header value (blank items ignored)."""
    return list(dict.fromkeys(item.strip() for item in value.split(",") if item.strip()))
