# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Calls into the optional hooks the owner defines in agent_server/agent.py.

agent.py is rendered once and `copier update` never touches it again, so an app
generated before a hook existed has no such function: every hook is optional,
and a missing one keeps the template's behaviour.
"""

from __future__ import annotations

from typing import Any

from agent_server import agent


def customize_history(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The owner's `customize_history(items)` applied to the rendered history, if agent.py defines one."""
    hook = getattr(agent, "customize_history", None)
    return items if hook is None else hook(items)
