"""Run-level rules: trouble that persists across the whole run, and a budget on its turns.

Layer: ``routers`` — imports ``protocol`` only.

The stage router's own signals look at the last few tool results, and on terminal work they
fire on exploration: a first non-zero exit, an interactive command that timed out, a
``command not found`` while the agent looks around are normal there. These rules look at the
whole run instead and are off unless a route turns them on:

* **persistent errors** — the same error class (``nonzero_exit``, ``traceback``,
  ``import_error``, …, as :mod:`switchyard.routers.stage.text` names them) has now come back in
  ``repeats`` tool results of the run; the classes in ``ignore`` (by default timeouts and
  missing commands) never count, nor does the bare non-zero exit that comes with one of them
  (``bash: rg: command not found`` exits 127). A first failure is never enough on its own: it
  takes the class coming back.
* **turn budget** — the run has ``turn_budget`` assistant turns behind it and is still going.

Both only grow within a run, so once one fires it keeps firing: the run stays on the capable
tier (the counterfactual of ``switchyard replay`` latches the same way). The counts are kept per
session with the same validated prefix cache as the turn depth, so a turn reads only its new
messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from switchyard._dataclass import dataclass
from switchyard.protocol.messages import Message, TextPart, ToolResultPart
from switchyard.routers.stage.signals import DEFAULT_PROFILE, Profile, observation_of
from switchyard.routers.stage.text import analyse_result

DEFAULT_IGNORED = ("timeout", "command_not_found")
"""Error classes that are normal while a terminal agent explores: a timed-out interactive
command (``vim``, a server left in the foreground) and a program that is not installed."""

FLAGGED = "tool_error_flag"
_GENERIC = frozenset(("nonzero_exit", "tool_error", FLAGGED))
"""Classes that only say "it failed": they follow the failure they come with."""
"""The class of a result the tool itself flagged as an error with no recognised pattern."""


@dataclass(slots=True, frozen=True)
class RunRules:
    """Which run-level rules a route turns on.

    Attributes:
        repeats: Escalate when one error class has been seen in this many tool results of the
            run (``None``: the rule is off).
        ignore: Error classes that never count.
        turn_budget: Escalate once the run has this many assistant turns (``None``: off).
    """

    repeats: int | None = None
    ignore: frozenset[str] = frozenset(DEFAULT_IGNORED)
    turn_budget: int | None = None

    @property
    def active(self) -> bool:
        """Whether any rule is on."""
        return self.repeats is not None or self.turn_budget is not None


class Tally(NamedTuple):
    """Run-wide counts over the first ``covered`` messages.

    Attributes:
        covered: Messages covered.
        turns: Assistant messages so far.
        classes: ``(error class, tool results it appeared in)``, in order of first appearance.
    """

    covered: int = 0
    turns: int = 0
    classes: tuple[tuple[str, int], ...] = ()


class Fired(NamedTuple):
    """A run-level rule that fired: the decision ``source`` and its one-line ``reason``."""

    source: str
    reason: str


def tally_from(
    messages: Sequence[Message], prefix: Tally | None, rules: RunRules, profile: Profile = DEFAULT_PROFILE
) -> Tally:
    """The run-wide counts of ``messages``, continuing from ``prefix`` (the tally of
    ``messages[:prefix.covered]``, known to be unchanged)."""
    start = prefix or Tally()
    turns = start.turns
    counts = dict(start.classes)
    count_errors = rules.repeats is not None
    for i in range(start.covered, len(messages)):
        msg = messages[i]
        if msg.role == "assistant":
            turns += 1
            continue
        if not count_errors or msg.role not in ("user", "tool"):
            continue
        for result in _results(msg):
            for name in _classes(result, rules.ignore, profile):
                counts[name] = counts.get(name, 0) + 1
    return Tally(len(messages), turns, tuple(counts.items()))


def check(tally: Tally, rules: RunRules) -> Fired | None:
    """The first rule that fires on ``tally``: persistent errors, then the turn budget."""
    if rules.repeats is not None:
        for name, n in tally.classes:
            if n >= rules.repeats:
                return Fired("persistent_errors", f"{name} again: in {n} tool results of this run")
    if rules.turn_budget is not None and tally.turns >= rules.turn_budget:
        return Fired("turn_budget", f"still going after {tally.turns} turns (budget {rules.turn_budget})")
    return None


def _results(msg: Message) -> list[ToolResultPart]:
    content = msg.content
    if msg.role == "user" and len(content) == 1:
        observation = observation_of(content[0])
        if observation is not None:
            return [observation]
    return msg.tool_results


def _classes(result: ToolResultPart, ignore: frozenset[str], profile: Profile) -> set[str]:
    """The error classes one tool result counts for (each once)."""
    text = "\n".join(c.text for c in result.content if isinstance(c, TextPart))
    info = analyse_result(text, profile.tool_errors, profile.failing_tests)
    names = set(info.names) if info.level > 0 else set()
    if result.is_error and not names:
        names.add(FLAGGED)
    if names & ignore:
        # The exit status of a timed-out or missing command is that same event, not a second one.
        names -= _GENERIC
    return names - ignore
