"""The stage router: route each agent turn by what its tools have been doing.

Layer: ``routers`` — imports ``protocol`` only.

* :mod:`.signals` reads signals off the IR conversation (any inbound wire format);
* :mod:`.tables`, :mod:`.text` and :mod:`.shell` hold the vocabularies and read tool output
  and shell commands;
* :mod:`.scorer` turns signals into a tier (the tanh scorer and the signal cascade);
* :mod:`.router` adds the classifier seam, hysteresis, handoff notes and tier system prompts;
* :mod:`.spec` is the YAML block (``type: stage_router``).

See ``docs/stage-router.md``.
"""

from switchyard.routers.stage.classifier import TierVerdict, TurnClassifier
from switchyard.routers.stage.router import Behaviour, HandoffNotes, StageConfig, StageRouter
from switchyard.routers.stage.scorer import Dimensions, Verdict, dimensions, pick, score
from switchyard.routers.stage.signals import DEFAULT_PROFILE, NVIDIA_PROFILE, Profile, Signals, extract
from switchyard.routers.stage.spec import StageRouterSpec
from switchyard.routers.stage.tables import ToolKind

__all__ = [
    "DEFAULT_PROFILE",
    "NVIDIA_PROFILE",
    "Behaviour",
    "Dimensions",
    "HandoffNotes",
    "Profile",
    "Signals",
    "StageConfig",
    "StageRouter",
    "StageRouterSpec",
    "TierVerdict",
    "ToolKind",
    "TurnClassifier",
    "Verdict",
    "dimensions",
    "extract",
    "pick",
    "score",
]
