"""Every tool the server serves: Chorus's own (memory, notify) and those registered."""

from __future__ import annotations

from chorus.mcpserver._memory_tools import MEMORY_TOOLS
from chorus.mcpserver._registry import ToolSpec, added_tools


def registered_tools() -> list[ToolSpec]:
    """Chorus's own tools and every tool registered (:func:`register_tools`), by name."""
    tools = {spec.name: spec for spec in MEMORY_TOOLS}
    tools.update((spec.name, spec) for spec in added_tools())
    return sorted(tools.values(), key=lambda spec: spec.name)
