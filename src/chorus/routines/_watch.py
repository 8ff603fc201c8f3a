"""File-change triggers: watchfiles with a trailing debounce.

A burst of writes becomes one batch once the folder has been quiet for the
routine's debounce (capped, so endless writes still fire now and then). ``.git``
and editor noise are ignored (watchfiles' ``DefaultFilter``). If the native
watcher cannot start (e.g. inotify limits), the watch degrades to polling and
says so through ``notice``.

The changed paths reach the routine's prompt (``{trigger_path}``) through
:func:`paths_text`: one per line, each in double quotes with backslashes, quotes
and every control or format character escaped (``\\n``, ``\\u202e`` ...). A file
name is data someone else chose: a newline in it cannot start a line of the prompt,
and text in it cannot pass for Chorus's own words.
"""

from __future__ import annotations

import asyncio
import logging
import unicodedata
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from watchfiles import DefaultFilter, awatch

log = logging.getLogger("chorus.routines")

Batch = Callable[[list[str]], Awaitable[None]]
Notice = Callable[[str], None]
WatchFn = Callable[..., AsyncIterator[set[tuple[Any, str]]]]

#: Longest one burst is grouped before it fires anyway.
MAX_GROUPING_S = 60.0
#: Raw batches waiting for the debouncer (the watcher waits when it is full).
_QUEUE = 256
#: Paths listed in a prompt; the rest are counted.
MAX_PROMPT_PATHS = 200
_SHORT_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
#: Control, format (bidi overrides, zero-width), line and paragraph separators, unpaired.
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def quote_path(path: str) -> str:
    """``path`` in double quotes, with ``\\``, ``"`` and invisible characters escaped."""
    return '"' + "".join(_escape(c) for c in path) + '"'


def _escape(char: str) -> str:
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    if unicodedata.category(char) in _ESCAPED_CATEGORIES:
        code = ord(char)
        return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
    return char


def paths_text(paths: list[str], limit: int = MAX_PROMPT_PATHS) -> str:
    """The paths for a prompt: quoted (:func:`quote_path`), one per line, at most
    ``limit`` (then how many more there were)."""
    lines = [quote_path(str(p)) for p in paths[:limit]]
    if len(paths) > limit:
        lines.append(f"(and {len(paths) - limit} more)")
    return "\n".join(lines)


async def watch_changes(
    path: str,
    debounce_s: float,
    on_batch: Batch,
    *,
    notice: Notice,
    watch: WatchFn = awatch,
) -> None:
    """Call ``on_batch(paths)`` for every debounced burst of changes under ``path``,
    forever (cancel to stop). Paths are sorted and unique."""
    polling = False
    while True:
        try:
            await _watch(path, debounce_s, on_batch, polling=polling, watch=watch)
            return
        except (OSError, RuntimeError) as exc:
            if polling:
                raise
            polling = True
            notice(f"file watcher for {path} failed ({exc}); degraded to polling")


async def _watch(
    path: str, debounce_s: float, on_batch: Batch, *, polling: bool, watch: WatchFn
) -> None:
    queue: asyncio.Queue[set[str] | BaseException] = asyncio.Queue(maxsize=_QUEUE)
    producer = asyncio.create_task(_produce(path, queue, polling=polling, watch=watch))
    try:
        while True:
            await on_batch(sorted(await _one_burst(queue, debounce_s)))
    finally:
        producer.cancel()
        await asyncio.gather(producer, return_exceptions=True)


async def _produce(
    path: str,
    queue: asyncio.Queue[set[str] | BaseException],
    *,
    polling: bool,
    watch: WatchFn,
) -> None:
    """Put each raw batch of changed paths on ``queue``; a failure goes on it too."""
    stop = asyncio.Event()
    root, watched, keep = _target(Path(path))
    try:
        async for changes in watch(
            watched,
            watch_filter=DefaultFilter(),
            step=50,
            force_polling=polling,
            poll_delay_ms=100,
            stop_event=stop,
        ):
            changed = {name for _, name in changes if keep(name, root)}
            if changed:
                await queue.put(changed)
    except (OSError, RuntimeError) as exc:
        await queue.put(exc)
    finally:
        stop.set()


def _target(path: Path) -> tuple[str, Path, Callable[[str, str], bool]]:
    """``(root, what to watch, which changes count)``. A folder is watched itself (its
    own entry, which polling also reports, says less than its files). A single file
    is watched through its folder, so an editor that replaces it (write a copy,
    rename over) is still seen, and only changes to that file count."""
    root = str(path)
    if path.is_dir():
        return root, path, lambda name, r: name != r
    return root, path.parent, lambda name, r: name == r


async def _one_burst(queue: asyncio.Queue[set[str] | BaseException], quiet_s: float) -> set[str]:
    """Wait for a change, then collect until ``quiet_s`` pass without one (a trailing
    debounce), or :data:`MAX_GROUPING_S` since the first."""
    paths = _take(await queue.get())
    loop = asyncio.get_running_loop()
    deadline = loop.time() + MAX_GROUPING_S
    while (left := min(quiet_s, deadline - loop.time())) > 0:
        try:
            paths |= _take(await asyncio.wait_for(queue.get(), left))
        except TimeoutError:
            break
    return paths


def _take(item: set[str] | BaseException) -> set[str]:
    if isinstance(item, BaseException):
        raise item
    return item
