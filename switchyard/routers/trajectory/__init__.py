"""The learned trajectory router (``type: trajectory``): the gain of switching an agent run to the
capable model now, estimated from its task text and partial run (docs/trajectory-router.md)."""
