"""Context assembly: identity, time, environment, memory and project files, within
a token budget, the same for every body; and what Chorus adds to a body it starts
(:func:`build_body_extras`)."""

from chorus.context._assemble import TRIM_ORDER, Context, Section, assemble, tokens
from chorus.context._extras import (
    RECALL_LIMIT,
    Brief,
    add_body_extras,
    build_body_extras,
    client_brief,
    context_items,
    recall_block,
    with_body_extras,
)
from chorus.context._project import ProjectContext, load_project, project_root
from chorus.context._recall import Recall
from chorus.context._system import DEFAULT_SOUL, soul, system_spec

__all__ = [
    "DEFAULT_SOUL",
    "RECALL_LIMIT",
    "TRIM_ORDER",
    "Brief",
    "Context",
    "ProjectContext",
    "Recall",
    "Section",
    "add_body_extras",
    "assemble",
    "build_body_extras",
    "client_brief",
    "context_items",
    "load_project",
    "project_root",
    "recall_block",
    "soul",
    "system_spec",
    "tokens",
    "with_body_extras",
]
