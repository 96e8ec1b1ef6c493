"""The OpenAI/Anthropic-compatible proxy (extra ``server``).

Layer: ``server`` — imports ``api``.
"""

from switchyard.server.app import SwitchyardApp, create_app

__all__ = ["SwitchyardApp", "create_app"]
