"""The everyday commands (``ask``, ``task``, ``watch``, ``steer``, ``jobs``,
``status``, ``start``, ``log``, ``sessions list``) as typer commands, built from the
one command table of ``_fast`` (:data:`SPECS`, :data:`HELP`, :data:`SUMMARY`): the
same options and arguments, and
the same runner (:data:`RUN`) given the same values, whichever parser read argv.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import typer

from chorus.cli._fast import ARGUMENT_HELP, RUN, SPECS, SUMMARY, Spec


def _arguments(name: str, spec: Spec) -> list[inspect.Parameter]:
    helps = ARGUMENT_HELP.get(name, {})
    return [
        inspect.Parameter(
            dest,
            inspect.Parameter.KEYWORD_ONLY,
            default=typer.Argument(... if i < spec.required else None, help=helps.get(dest)),
            annotation=str if i < spec.required else str | None,
        )
        for i, dest in enumerate(spec.positionals)
    ]


def _names(table: dict[str, str]) -> dict[str, list[str]]:
    """Each destination with its spellings (``--body``, ``-b``), in table order."""
    names: dict[str, list[str]] = {}
    for flag, dest in table.items():
        names.setdefault(dest, []).append(flag)
    return names


def _options(spec: Spec) -> list[inspect.Parameter]:
    kind = inspect.Parameter.KEYWORD_ONLY
    options = [_option(spec, dest, names) for dest, names in _names(spec.options).items()]
    flags = [
        inspect.Parameter(
            dest, kind, default=typer.Option(False, *names, help=spec.help(dest)), annotation=bool
        )
        for dest, names in _names(spec.flags).items()
    ]
    return options + flags


def _option(spec: Spec, dest: str, names: list[str]) -> inspect.Parameter:
    """A text option (None when not given), or a whole number with its default."""
    number = dest in spec.numbers
    return inspect.Parameter(
        dest,
        inspect.Parameter.KEYWORD_ONLY,
        default=typer.Option(spec.numbers.get(dest), *names, help=spec.help(dest)),
        annotation=int if number else str | None,
    )


def everyday_command(name: str) -> Callable[..., None]:
    """The typer callback of command ``name``: its signature comes from ``SPECS``."""

    def command(**values: Any) -> None:
        raise typer.Exit(RUN[name](values))

    command.__name__ = name.rpartition(" ")[2]
    command.__doc__ = SUMMARY[name]
    spec = SPECS[name]
    params = [*_arguments(name, spec), *_options(spec)]
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return command


def register_everyday(app: typer.Typer, group: str = "") -> None:
    """Add the table's commands of ``group`` to ``app``: with no group the one-word
    commands (to the root app), else the group's (``sessions``: ``sessions list``)."""
    for name in SPECS:
        head, _, word = name.rpartition(" ")
        if head == group:
            app.command(word, help=SUMMARY[name])(everyday_command(name))
