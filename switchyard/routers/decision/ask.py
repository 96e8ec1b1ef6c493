"""Asking a decision model which label fits: the RLCD JSON convention, or a typed choice.

Layer: ``routers`` — imports ``protocol`` only. No I/O: both askers await the injected
:class:`~switchyard.protocol.call.ModelCall` through :func:`~switchyard.routers.judge.call_judge`
(one deadline, upstream errors classified as for every judge).

* :class:`RlcdAsker` — any OpenAI-compatible decision model (vLLM, a hosted endpoint, a chat
  model told the convention): one JSON object ``{"target": label, "probabilities": [{"option":
  label, "probability": p}, …]}`` answering our instructions, asked with ``response_format``
  (``json_object`` by default, as self-hosted endpoints broadly support it; ``json_schema`` lets
  vLLM's guided decoding keep the labels exact).
* :class:`SystemOneAsker` — a System One-style API (``format: system_one``): the request carries
  a :class:`~switchyard.protocol.decision.ChoiceQuestion` and the answer comes back typed.

Each asks in two steps, so a malformed answer still reports its model and tokens:
:meth:`Asker.ask` makes the call, :meth:`Asker.read` turns its response into an :class:`Asked`
(the raw pairs and the named pick), checked afterwards by
:func:`~switchyard.routers.decision.verdict.check`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from switchyard._dataclass import dataclass
from switchyard.protocol.call import ModelCall
from switchyard.protocol.decision import ChoiceQuestion
from switchyard.protocol.messages import Message
from switchyard.protocol.request import ChatRequest
from switchyard.protocol.response import ChatResponse
from switchyard.routers.judge import JsonJudge, JudgeSettings, call_judge, judge_failed

PROTOCOLS = ("rlcd", "system_one")


@dataclass(frozen=True, slots=True)
class Asked:
    """A decision model's answer before it is checked.

    Attributes:
        pairs: ``(label, probability)`` as answered, in the answer's order.
        named: The label the model named as its pick.
        confidence: The model's own confidence in its pick, when it reports one.
    """

    pairs: list[tuple[Any, Any]]
    named: Any
    confidence: float | None = None


class Asker(Protocol):
    """One decision protocol."""

    protocol: str

    @property
    def target(self) -> str:
        """The decision target."""
        ...

    async def ask(self, call: ModelCall, view: str) -> ChatResponse:
        """Asks which label fits the conversation ``view``.

        Raises:
            JudgeFailure: No answer (timeout, upstream error).
        """
        ...

    def read(self, response: ChatResponse) -> Asked:
        """The answer's pairs and pick.

        Raises:
            JudgeFailure: An answer of the wrong shape.
        """
        ...


def rlcd_schema(labels: list[str]) -> dict[str, Any]:
    """JSON Schema of an RLCD verdict over ``labels`` (sent with ``json_schema`` or in the prompt)."""
    option = {"type": "string", "enum": labels}
    return {
        "type": "object",
        "properties": {
            "target": option,
            "probabilities": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"option": option, "probability": {"type": "number", "minimum": 0, "maximum": 1}},
                    "required": ["option", "probability"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["target", "probabilities"],
        "additionalProperties": False,
    }


def rlcd_prompt(question: str, options: Mapping[str, str]) -> str:
    """The instructions of an RLCD decision request."""
    listed = "\n".join(f"- `{label}`: {meaning}" for label, meaning in options.items())
    return (
        f"{question.strip()}\n\n"
        "You are a decision model: you do not answer the conversation, you decide which option fits it. "
        f"The options (use these labels exactly):\n\n{listed}\n\n"
        "Give each option your probability that it is the best fit. Answer with one JSON object: "
        '"probabilities" lists every option exactly once as {"option": <label>, "probability": <0 to 1>} '
        'with the probabilities summing to 1, and "target" is the option with the highest probability.'
    )


class RlcdAsker:
    """Asks an OpenAI-compatible decision model for one probability per label (RLCD convention).

    Args:
        settings: Decision target, response format, output cap, deadline.
        question: What is asked.
        options: Label → meaning, in config order.
    """

    protocol = "rlcd"

    def __init__(self, settings: JudgeSettings, question: str, options: Mapping[str, str]) -> None:
        self.settings = settings
        self.judge = JsonJudge(
            settings,
            prompt=rlcd_prompt(question, options),
            schema=rlcd_schema(list(options)),
            schema_name="decision_verdict",
        )

    @property
    def target(self) -> str:
        """The decision target."""
        return self.settings.target

    async def ask(self, call: ModelCall, view: str) -> ChatResponse:
        return await call_judge(call, self.settings, self.judge.build_request(view))

    def read(self, response: ChatResponse) -> Asked:
        value = self.judge.extract(response)
        entries = value.get("probabilities") if isinstance(value, dict) else None
        if not isinstance(entries, list) or not all(isinstance(e, dict) and "option" in e for e in entries):
            raise judge_failed(
                self.target, "invalid_verdict", 'expected {"target": …, "probabilities": [{"option", "probability"}…]}'
            )
        assert isinstance(value, dict)
        if "target" not in value:
            raise judge_failed(self.target, "invalid_verdict", "the verdict names no 'target'")
        return Asked([(e["option"], e.get("probability")) for e in entries], value["target"])


class SystemOneAsker:
    """Asks a System One-style API one typed-choice question.

    Args:
        settings: Decision target and deadline (response format and output cap do not apply).
        question: The question's ``instructions``.
        options: Label → meaning (its ``criteria``), in config order.
    """

    protocol = "system_one"

    def __init__(self, settings: JudgeSettings, question: str, options: Mapping[str, str]) -> None:
        self.settings = settings
        self.question = ChoiceQuestion(instructions=question, options=dict(options))

    @property
    def target(self) -> str:
        """The decision target."""
        return self.settings.target

    async def ask(self, call: ModelCall, view: str) -> ChatResponse:
        request = ChatRequest(messages=[Message.of("user", view)], choice=self.question)
        return await call_judge(call, self.settings, request)

    def read(self, response: ChatResponse) -> Asked:
        answer = response.choice
        if answer is None:
            raise judge_failed(self.target, "invalid_response", "the decision target answered no typed choice")
        return Asked(list(answer.probabilities.items()), answer.choice, answer.confidence)
