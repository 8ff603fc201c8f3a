"""``chorus repl``: a terminal brain over the same session API a remote brain uses.

A plain line is a user message (start it with ``::`` to send a line that
begins with ``:``). Commands::

    :model <name|default>     set_model (default: the CLI's own default)
    :mode <permission mode>   set_permission_mode
    :interrupt                interrupt the running turn
    :steer <text>             steer the running turn (bodies that can)
    :status                   the session's status
    :allow [FLAG]             approve a waiting tool or flag (default: this session's newest)
    :deny [FLAG] [reason]     deny / reject it, telling the model why
    :mcp                      mcp_status
    :brain connect <url>      make Chorus dial a brain (wss://, see chorus connect)
    :brain disconnect         hang up the brain link
    :brain status             the brain link's state
    :help                     this list
    :quit                     leave (the session keeps running in the daemon)

The REPL is I/O-free: it is fed lines and writes through callbacks, so the
CLI wires it to the terminal and tests wire it to lists.
"""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

from chorus._errors import ChorusError
from chorus.events import Event, JsonDict
from chorus.gateway._client import UcpClient
from chorus.gateway._errors import ResponseError

HELP = __doc__.split("Commands::", 1)[1].split("The REPL", 1)[0].rstrip() if __doc__ else ""


class BrainControl(Protocol):
    """Where ``:brain`` commands go (the daemon's ``/gateway/brain`` routes)."""

    async def connect(self, url: str) -> JsonDict: ...

    async def disconnect(self) -> JsonDict: ...

    async def status(self) -> JsonDict: ...


Say = Callable[[str], None]
Show = Callable[[Event], None]
#: ``answer(verb, flag_id, reason)`` -> what to say: ``verb`` is approve or reject,
#: ``flag_id`` None for the session's newest pending one.
FlagAnswerer = Callable[[str, str | None, str | None], Awaitable[str]]


class Repl:
    """Turn lines into UCP requests on ``client``; :meth:`handle` returns False on ``:quit``."""

    def __init__(
        self,
        client: UcpClient,
        brain: BrainControl | None,
        say: Say,
        flags: FlagAnswerer | None = None,
    ) -> None:
        self._client = client
        self._brain = brain
        self._say = say
        self._flags = flags
        self._commands: dict[str, Callable[[list[str]], Awaitable[None]]] = {
            "model": self._model,
            "mode": self._mode,
            "interrupt": self._interrupt,
            "steer": self._steer,
            "status": self._status,
            "mcp": self._mcp,
            "brain": self._brain_command,
            "allow": lambda args: self._answer("approve", args),
            "deny": lambda args: self._answer("reject", args),
            "help": self._help,
        }

    async def run(self, lines: AsyncIterator[str], show: Show) -> None:
        """Print events with ``show`` while handling ``lines`` until ``:quit`` or their end."""
        async with asyncio.TaskGroup() as tg:
            printer = tg.create_task(self._print_events(show), name="repl-printer")
            try:
                async for line in lines:
                    if not await self.handle(line):
                        break
            finally:
                printer.cancel()

    async def _print_events(self, show: Show) -> None:
        async for event in self._client.events():
            show(event)

    async def handle(self, line: str) -> bool:
        """Act on one input line. Errors are reported with ``say``, never raised."""
        line = line.rstrip("\n")
        if not line.strip():
            return True
        if line.startswith("::") or not line.startswith(":"):
            await self._client.send_user(line[1:] if line.startswith("::") else line)
            return True
        try:
            words = shlex.split(line[1:])
        except ValueError as exc:
            self._say(f"error: {exc}")
            return True
        if not words:
            return True
        if words[0] in ("quit", "exit", "q"):
            return False
        await self._run_command(words[0], words[1:])
        return True

    async def _run_command(self, name: str, args: list[str]) -> None:
        command = self._commands.get(name)
        if command is None:
            self._say(f"unknown command :{name} (try :help)")
            return
        try:
            await command(args)
        except ResponseError as exc:
            self._say(f"error [{exc.code}]: {exc.message}")
        except (ChorusError, TimeoutError) as exc:
            self._say(f"error: {exc or type(exc).__name__}")

    async def _request(self, subtype: str, **fields: Any) -> None:
        self._say(_render(await self._client.request(subtype, **fields)))

    async def _model(self, args: list[str]) -> None:
        if len(args) != 1:
            self._say("usage: :model <name|default>")
            return
        await self._request("set_model", model=None if args[0] == "default" else args[0])

    async def _mode(self, args: list[str]) -> None:
        if len(args) != 1:
            self._say("usage: :mode <default|acceptEdits|plan|bypassPermissions>")
            return
        await self._request("set_permission_mode", mode=args[0])

    async def _interrupt(self, args: list[str]) -> None:
        await self._request("interrupt")

    async def _steer(self, args: list[str]) -> None:
        if not args:
            self._say("usage: :steer <text>")
            return
        await self._request("steer", text=" ".join(args))

    async def _status(self, args: list[str]) -> None:
        await self._request("status")

    async def _mcp(self, args: list[str]) -> None:
        await self._request("mcp_status")

    async def _answer(self, verb: str, args: list[str]) -> None:
        if self._flags is None:
            self._say(":allow/:deny need the daemon's home (run chorus repl without --url)")
            return
        named = bool(args) and args[0].startswith(("fl-", "f-"))  # an id, else all reason
        flag_id = args[0] if named else None
        reason = " ".join(args[1:] if named else args) or None
        self._say(await self._flags(verb, flag_id, reason))

    async def _help(self, args: list[str]) -> None:
        self._say(HELP)

    async def _brain_command(self, args: list[str]) -> None:
        if self._brain is None:
            self._say(":brain needs the daemon's unix socket (run chorus repl without --url)")
            return
        match args:
            case ["connect", url]:
                self._say(_render(await self._brain.connect(url)))
            case ["disconnect"]:
                self._say(_render(await self._brain.disconnect()))
            case ["status"]:
                self._say(_render(await self._brain.status()))
            case _:
                self._say("usage: :brain connect <url> | :brain disconnect | :brain status")


def _render(payload: JsonDict) -> str:
    return json.dumps(payload, indent=2, sort_keys=True) if payload else "ok"
