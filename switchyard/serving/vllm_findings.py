"""What a ``vllm serve`` check is made of: the rule, its context, a finding and the report.

Layer: ``serving`` — standard library only.

The rule table itself lives in :mod:`switchyard.serving.vllm_rules`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from typing import Any, Literal

from switchyard._dataclass import dataclass
from switchyard.serving.vllm_args import ServeCommand
from switchyard.serving.vllm_profiles import Gpu

Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class CheckContext:
    """What a rule looks at: the parsed command and the GPU it will run on (``None``: unknown)."""

    cmd: ServeCommand
    gpu: Gpu | None


@dataclass(frozen=True, slots=True)
class Rule:
    """One check of a ``vllm serve`` command.

    Attributes:
        id: Stable identifier (shown in reports, used in tests and docs).
        severity: ``error`` (non-zero exit) or ``warning``.
        message: What is wrong, in one sentence.
        fix: What to change.
        check: Returns ``None`` when the command passes, else a detail (may be empty).
    """

    id: str
    severity: Severity
    message: str
    fix: str
    check: Callable[[CheckContext], str | None]


@dataclass(frozen=True, slots=True)
class Finding:
    """A rule that fired."""

    rule: str
    severity: Severity
    message: str
    fix: str

    def to_dict(self) -> dict[str, str]:
        """JSON-ready form."""
        return {"rule": self.rule, "severity": self.severity, "message": self.message, "fix": self.fix}


@dataclass(slots=True)
class CheckReport:
    """The result of checking one command."""

    command: ServeCommand
    gpu: Gpu | None
    findings: list[Finding] = field(default_factory=list)

    @property
    def errors(self) -> list[Finding]:
        """Findings of severity ``error``."""
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        """Findings of severity ``warning``."""
        return [f for f in self.findings if f.severity == "warning"]

    @property
    def ok(self) -> bool:
        """No errors."""
        return not self.errors

    def rule_ids(self) -> list[str]:
        """Ids of the rules that fired, in table order."""
        return [f.rule for f in self.findings]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "ok": self.ok,
            "gpu": self.gpu.key if self.gpu else None,
            "model": self.command.model,
            "errors": len(self.errors),
            "warnings": len(self.warnings),
            "findings": [f.to_dict() for f in self.findings],
        }
