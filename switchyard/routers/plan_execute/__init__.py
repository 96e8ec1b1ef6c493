"""``type: plan_execute`` — planning turns to the capable target, execution turns to the efficient one.

Layer: ``routers`` — imports ``protocol`` and the stage router's signal extraction.
"""

from switchyard.routers.plan_execute.phase import Phase, classify
from switchyard.routers.plan_execute.router import PlanExecuteRouter
from switchyard.routers.plan_execute.spec import PlanExecuteSpec

__all__ = ["Phase", "PlanExecuteRouter", "PlanExecuteSpec", "classify"]
