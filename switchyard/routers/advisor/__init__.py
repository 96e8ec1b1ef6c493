"""``type: advisor`` — the efficient executor serves every turn; a frontier advisor reviews some.

Layer: ``routers`` — imports ``protocol`` only. See :mod:`switchyard.routers.advisor.gate` for
the flow and docs/advisor.md for the configuration and the differences from NVIDIA's gate.
"""

from switchyard.routers.advisor.gate import AdvisorConfig, AdvisorRouter
from switchyard.routers.advisor.review import Verdict, parse_verdict, review_transcript

__all__ = ["AdvisorConfig", "AdvisorRouter", "Verdict", "parse_verdict", "review_transcript"]
