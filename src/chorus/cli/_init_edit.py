"""The one edit ``chorus init`` makes to config.toml's text: ``[router] bodies``.

Sans-I/O: text in, text out. Everything else in the file (other settings, comments,
blank lines, line endings) is kept byte for byte:

=====================================  ============================================
``[router] bodies`` absent              written with the bodies that can run, under
                                        ``[router]`` (the table is added at the end
                                        when there is none), with :data:`MARKER`
                                        above it; nothing when no body can run
set, :data:`MARKER` on the line above   the bodies that can run now are added to it
                                        (none is ever taken out)
set, no marker                          a person's list: left as it is
=====================================  ============================================

The result is parsed again and must be the old settings plus that one key, else
:class:`~chorus.ConfigError` (a layout the edit cannot follow: nothing is written).
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from typing import Any

from chorus._errors import ConfigError

#: The line above a ``bodies`` list that ``chorus init`` looks after.
MARKER = "# chorus init adds each agent CLI that has a login here (delete this line to stop it)"
_HEADER = re.compile(r"\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?")
_BODIES = re.compile(r"\s*bodies\s*=")


@dataclass(frozen=True, slots=True)
class Edit:
    """The new text (the same text when nothing changes) and the list it sets."""

    text: str
    #: ``[router] bodies`` after the edit (None: not set, the built-in default applies).
    bodies: list[str] | None
    #: Whether the list is ``chorus init``'s to add to (False: a person's, left alone).
    managed: bool


def with_bodies(text: str, ready: list[str]) -> Edit:
    """``text`` with ``[router] bodies`` holding every body in ``ready``, as the
    table above says; raises :class:`ConfigError` when the text is not TOML."""
    data = _parse(text)
    router = data.get("router")
    current = router.get("bodies") if isinstance(router, dict) else None
    if current is None:
        return _added(text, data, ready) if ready else Edit(text, None, True)
    lines = text.splitlines(keepends=True)
    at = _bodies_line(lines)
    if at is None or at == 0 or lines[at - 1].strip() != MARKER:
        return Edit(text, list(current), False)
    wanted = [*current, *(b for b in ready if b not in current)]
    if wanted == current:
        return Edit(text, wanted, True)
    lines[at] = _bodies(wanted, _newline(text))
    return _checked("".join(lines), data, wanted, True)


def _parse(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config.toml: not valid TOML: {exc}") from exc


def _added(text: str, data: dict[str, Any], ready: list[str]) -> Edit:
    """``bodies`` written under ``[router]``, or a ``[router]`` table at the end."""
    nl = _newline(text)
    block = f"{MARKER}{nl}{_bodies(ready, nl)}"
    lines = text.splitlines(keepends=True)
    header = _router_header(lines) if "router" in data else None  # (not one in a string)
    if header is None:
        if lines and not lines[-1].endswith(("\n", "\r")):
            lines[-1] += nl
        gap = nl if lines and lines[-1].strip() else ""
        lines.append(f"{gap}[router]{nl}{block}")
    else:
        lines.insert(header + 1, block)
    return _checked("".join(lines), data, ready, True)


def _checked(new: str, old: dict[str, Any], bodies: list[str], managed: bool) -> Edit:
    """The edit, if ``new`` means ``old`` with ``router.bodies`` set and nothing else."""
    expected = {**old, "router": {**old.get("router", {}), "bodies": bodies}}
    try:
        same = tomllib.loads(new) == expected
    except tomllib.TOMLDecodeError:
        same = False
    if not same:
        raise ConfigError(
            "config.toml: chorus init cannot add to [router] as this file writes it;"
            f" set it yourself: [router] bodies = {json.dumps(bodies)}"
        )
    return Edit(new, bodies, managed)


def _sections(lines: list[str]) -> list[tuple[int, str]]:
    """Each table header: its line and its name (``[[array]]`` headers too)."""
    found = []
    for index, line in enumerate(lines):
        if line.lstrip().startswith("[["):
            found.append((index, "[[]]"))
        elif match := _HEADER.fullmatch(line.rstrip("\r\n")):
            found.append((index, match.group(1).replace(" ", "").replace('"', "")))
    return found


def _router_header(lines: list[str]) -> int | None:
    return next((i for i, name in _sections(lines) if name == "router"), None)


def _bodies_line(lines: list[str]) -> int | None:
    """The ``bodies = [...]`` line of ``[router]``, when it is one whole line."""
    header = _router_header(lines)
    if header is None:
        return None
    ends = [i for i, _ in _sections(lines) if i > header]
    for index in range(header + 1, ends[0] if ends else len(lines)):
        if _BODIES.match(lines[index]):
            return index if "]" in lines[index] else None
    return None


def _bodies(names: list[str], nl: str) -> str:
    return f"bodies = {json.dumps(names)}{nl}"


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"
