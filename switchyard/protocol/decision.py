"""Typed-choice questions and answers: what a decision model is asked and what it answers.

Layer: ``protocol`` — imports nothing of ours.

A *decision model* (TypeSafe's Jev behind its System One API, or any service of that shape) does
not write text: given a state and a closed set of options it answers one probability per option.
A :class:`~switchyard.protocol.request.ChatRequest` carries such a question in its ``choice``
field and the answer comes back in :attr:`~switchyard.protocol.response.ChatResponse.choice`.
Only a decision client (``llm_clients.<name>.format: system_one``) can answer one; the config
never lets such a target serve a chat answer (see docs/decision-model.md).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ChoiceQuestion(BaseModel):
    """Which one of ``options`` fits the request's conversation.

    Attributes:
        instructions: The question, in plain words.
        options: Option label → what the option means (System One's ``criteria``), in the
            order they are offered.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    instructions: str = Field(min_length=1)
    options: dict[str, str] = Field(min_length=2)


class ChoiceAnswer(BaseModel):
    """A decision model's answer to a :class:`ChoiceQuestion`, as the upstream sent it.

    Nothing here is checked beyond its types: whether the labels match the question and the
    probabilities add up is the asking router's business (it fails open on a bad answer).

    Attributes:
        choice: The label the model picked.
        probabilities: Label → probability, as answered.
        confidence: The model's own confidence in ``choice``, when it reports one.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    choice: str
    probabilities: dict[str, float]
    confidence: float | None = None
