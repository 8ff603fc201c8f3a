"""A package's public names loaded from their private modules on first use (PEP 562).

A package lists each public name's module (and its name there) and takes
``__getattr__`` and ``__dir__`` from :func:`lazy_names`: importing the package loads
none of its modules; the first ``package.Name`` loads the one module that has it and
keeps the value in the package, so later lookups are plain attribute reads.
"""

from __future__ import annotations

import importlib
import sys

#: ``typing`` is not imported at run time (the packages using this avoid it too).
TYPE_CHECKING = False

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any


def lazy_names(
    package: str, table: Mapping[str, tuple[str, str]], public: Iterable[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, whose public name ``N`` is
    ``table[N] = (module, name there)``."""
    names = frozenset(public)

    def get(name: str) -> Any:
        try:
            module, attr = table[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module), attr)
        setattr(sys.modules[package], name, value)
        return value

    def listing() -> list[str]:
        return sorted({*vars(sys.modules[package]), *names})

    return get, listing
