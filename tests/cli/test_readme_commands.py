"""The README's command table lists every command, and its ``--json`` column says
truly which have ``--json``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer.main

from chorus.cli._app import _register, app

README = Path(__file__).resolve().parents[2] / "README.md"


def _commands() -> dict[tuple[str, ...], Any]:
    """Every runnable command path (groups that run alone, e.g. ``audit``, too)."""
    _register()
    found: dict[tuple[str, ...], Any] = {}

    def walk(command: Any, path: tuple[str, ...]) -> None:
        subs = getattr(command, "commands", {})
        if path and (not subs or getattr(command, "invoke_without_command", False)):
            found[path] = command
        for name, sub in subs.items():
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return found


def _has_json(command: Any) -> bool:
    return any("--json" in p.opts for p in command.params)


def _table() -> dict[tuple[str, ...], str]:
    """Command path -> its ``--json`` cell, from the table under "Everyday use"."""
    section = README.read_text().split("## Everyday use", 1)[1]
    lines = section.split("| command | what | `--json` |", 1)[1].split("\n\n", 1)[0]
    groups = {path[0] for path in _commands() if len(path) > 1}
    table: dict[tuple[str, ...], str] = {}
    for line in lines.strip().splitlines()[1:]:
        cells = [c.strip() for c in line.replace("\\|", "¦").strip("|").split(" | ")]
        paths = [p for alt in cells[0].split(" / ") for p in _paths(alt, groups)]
        parts = cells[2].replace("¦", "|").split(" / ")
        if len(parts) != len(paths):
            parts = [cells[2]] * len(paths)
        table.update(zip(paths, parts, strict=True))
    return table


def _paths(alt: str, groups: set[str]) -> list[tuple[str, ...]]:
    words = alt.strip("` ").split()
    if words[0].startswith("--") or words[0] not in groups or len(words) == 1:
        return [(words[0],)]
    sub = words[1]
    if sub.startswith("["):  # `audit [verify]`: the group alone and its subcommand
        return [(words[0],), (words[0], sub.strip("[]"))]
    return [(words[0], s) for s in sub.split("¦")]


def test_every_command_is_in_the_table() -> None:
    listed = _table()
    missing = sorted(" ".join(p) for p in _commands() if p not in listed)
    assert missing == []
    unknown = sorted(" ".join(p) for p in listed if p not in _commands() and p != ("--version",))
    assert unknown == []


def test_the_json_column_is_true() -> None:
    commands = _commands()
    wrong = [
        (" ".join(path), cell)
        for path, cell in _table().items()
        if path in commands and _has_json(commands[path]) != (cell.strip() != "-")
    ]
    assert wrong == []
