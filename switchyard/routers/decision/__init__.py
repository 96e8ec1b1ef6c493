"""``type: decision_model`` routes: a decision model's probability per label picks the target.

Layer: ``routers`` — imports ``protocol`` only. See docs/decision-model.md.

* :mod:`~switchyard.routers.decision.spec` — the YAML block;
* :mod:`~switchyard.routers.decision.ask` — the two ways of asking (RLCD JSON, typed choice);
* :mod:`~switchyard.routers.decision.verdict` — checking the distribution, ranking targets;
* :mod:`~switchyard.routers.decision.router` — the route's flow, affinity and fail-open.
"""
