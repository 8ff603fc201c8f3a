"""Starting bodies: the one place that builds :class:`BodyOptions` and calls
:func:`chorus.bodies.create_body` for the daemon and the gateway alike.

A body gets the process environment, its ``[agents.NAME.env]``, the secrets the
policy lets it have, its model API's base URL at its session's meter
(``chorus.meter``), the native permission flags the policy allows when it cannot ask
(one-shot bodies), the CLI the daemon's config points at (Codex's native program,
not its Node launcher: ``_native``), the
session's model and cwd, its native resume id, the store's raw tap, and a
permission callback (the session's trampoline to the current turn's gate).
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chorus._errors import UnknownBodyError
from chorus.bodies import (
    CLI_OF,
    Body,
    BodyOptions,
    PermissionCallback,
    RawTap,
    Support,
    body_class,
    create_body,
)
from chorus.config import ChorusConfig, chorus_home, run_dir
from chorus.context import Brief, Recall, add_body_extras
from chorus.events import Event, Notice, Text, TurnCompleted, TurnFailed
from chorus.memory import memory_settings
from chorus.meter import point_body
from chorus.policy import (
    PERMISSION_MODES,
    AuditLog,
    PathContext,
    PermissionMode,
    Policy,
    SecretStore,
    register_env,
)
from chorus.sandbox import active as sandbox_active
from chorus.sandbox import git_paths, state_cli, tool_path, write_wrapper
from chorus.sandbox import layout as sandbox_layout
from chorus.session._errors import SessionError
from chorus.session._native import NativeCli, native_cli
from chorus.session._reattach import detached_options
from chorus.session._spares import Redirect, Spare
from chorus.store import ORIGIN_CHORUS, SessionRecord, Store

if TYPE_CHECKING:  # the policy's engine loads with the first gate, not at the start
    from chorus.policy import NativeFlags, PolicyGate

log = logging.getLogger("chorus.session")

BodyFactory = Callable[[str, BodyOptions], Body]


@dataclass(frozen=True, slots=True)
class PolicyGuards:
    """The daemon's policy parts; each turn (or gateway session) gets its own gate."""

    policy: Policy
    audit: AuditLog | None = None
    secrets: SecretStore | None = None

    def gate(self, *, session_id: str, cwd: str | None, mode: str | None) -> PolicyGate:
        """A fresh gate (``mode`` None: the policy's own mode)."""
        from chorus.policy import policy_callback  # the engine: with the first gate

        return policy_callback(
            self.policy,
            self.audit,
            mode=checked_mode(mode),
            cwd=Path(cwd) if cwd else None,
            session_id=session_id,
            secrets=self.secrets.values if self.secrets is not None else (),
        )

    def env_for(self, body: str) -> dict[str, str]:
        """The secrets the policy lets ``body`` have, as environment variables."""
        if self.secrets is None:
            return {}
        return self.secrets.env_for(body, self.policy)


def policy_guards(
    policy: Policy | None, audit: AuditLog | None = None, secrets: SecretStore | None = None
) -> PolicyGuards | None:
    """Guards, or None when there is no policy (every tool allowed)."""
    return PolicyGuards(policy, audit, secrets) if policy is not None else None


def checked_mode(mode: str | None) -> PermissionMode | None:
    """``mode`` if it is a Chorus permission mode (None stays None), else
    :class:`SessionError` ``invalid_request``."""
    if mode is None:
        return None
    for known in PERMISSION_MODES:
        if mode == known:
            return known
    raise SessionError(
        "invalid_request",
        f"unknown permission mode {mode!r}; use one of {', '.join(PERMISSION_MODES)}",
    )


def native_mode(gate: PolicyGate | None, mode: str | None) -> str:
    """The mode the CLI itself runs in: the gate's (``plan`` or ``default``, so every
    tool call reaches the gate), or the requested one when no policy is in force."""
    return gate.native_mode if gate is not None else (mode or "default")


@dataclass(frozen=True, slots=True)
class Launch:
    """What one body start needs beyond the stored session."""

    body: str
    model: str | None
    resume: str | None
    gate: PolicyGate | None
    mode: str | None
    permission: PermissionCallback
    #: The transcript from the log, for when native resume is impossible or fails.
    history: str | None = None
    #: The task and plan for the context; a client's instructions and MCP servers.
    brief: Brief = field(default_factory=Brief)


_NOTICED_KEPT = 1024


class BodyLauncher:
    """Builds options and bodies. ``factory`` replaces :func:`create_body` in tests."""

    def __init__(
        self,
        config: ChorusConfig,
        store: Store,
        *,
        guards: PolicyGuards | None = None,
        factory: BodyFactory | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.guards = guards
        self._factory = factory or (lambda name, opts: create_body(name, opts, self.config))
        #: (session, job, notice) logged, the latest :data:`_NOTICED_KEPT` (a job's
        #: notices come together at its start; the set must not grow for ever)
        self._noticed: dict[tuple[str, str, str], None] = {}
        self._recall = Recall()

    def create(self, record: SessionRecord, launch: Launch) -> Body:
        """A new, unstarted body for ``record`` (the caller starts and owns it)."""
        return self._factory(launch.body, self.options(record, launch))

    def spare(self, cwd: str, launch: Launch) -> Spare:
        """A new, unstarted spare body for ``cwd`` (no session yet; see ``_spares``)."""
        redirect = Redirect(self.store)
        launch = replace(launch, resume=None, permission=redirect.permission, brief=Brief())
        options = self.options_for(cwd, launch, redirect.tap)
        return Spare(self._factory(launch.body, options), redirect)

    def options(self, record: SessionRecord, launch: Launch) -> BodyOptions:
        return self.options_for(record.cwd, launch, self.store.raw_tap(record.id), record.id)

    def options_for(
        self, cwd: str | None, launch: Launch, tap: RawTap, session_id: str | None = None
    ) -> BodyOptions:
        env = self._env(launch.body)
        metered = point_body(cli_name(launch.body), env, session_id)  # its model calls
        env.update(metered.env)
        folder = Path(cwd or os.getcwd())
        native = self.native_flags(launch.body, launch.gate)
        if native is not None:
            env.update(native.env)
            register_env(self.store.redactor, native.env, os.environ)
        options = BodyOptions(
            cwd=folder,
            model=launch.model,
            permission_mode=native_mode(launch.gate, launch.mode),
            resume=launch.resume,
            env=env,
            permission_callback=launch.permission,
            permission_args=native.args if native is not None else None,
            extra_args=metered.args,
            raw_tap=tap,
            history=launch.history,
            orphan_timeout=self.config.daemon.orphan_timeout_s or None,
            start_timeout=self.config.daemon.body_start_timeout_s,
            extra=self._extra(metered.env),
        )
        options = self._native_rules(options, launch.body)  # the CLI's own rules
        # the context, the client's instructions and servers, Chorus's.
        replaces = self.replaces_system_prompt(launch.body)
        options = add_body_extras(
            options, session_id, self.config, launch.brief, replaces_system_prompt=replaces
        )
        # the CLI and its sandbox last: the servers it starts are known now
        launches = [(s.command, *s.args) for s in options.mcp_servers.values() if s.command]
        boxed = self._sandboxed(launch.body, folder, env, launches)
        options = replace(options, executable=boxed)
        return detached_options(options, launch.body, session_id, self.config)

    async def ask_once(
        self,
        body: str,
        prompt: str,
        *,
        model: str | None,
        timeout: float,  # noqa: ASYNC109 - the run's own turn deadline
    ) -> str:
        """One prompt on a fresh ``body`` outside any stored session (memory
        extraction's run): in an empty folder, read-only (``plan``), in the body's
        sandbox, with its configured env and none of Chorus's context. Returns the
        model's final text; a failed turn raises :class:`SessionError`."""
        with tempfile.TemporaryDirectory(prefix="chorus-ask-") as cwd:
            folder = Path(cwd)
            env = self._env(body)
            options = BodyOptions(
                cwd=folder,
                model=model,
                permission_mode="plan",
                env=env,
                executable=self._sandboxed(body, folder, env),
                turn_timeout=timeout,
            )
            async with self._factory(body, options) as started:
                return await _final_text(started.turn(prompt))

    async def recall(self, prompt: str, known: set[str]) -> tuple[str, list[str]]:
        """The "relevant memory" block for a warm body's turn (``chorus.context``)."""
        return await self._recall.block(prompt, known, memory_settings(self.config.memory))

    def close(self) -> None:
        """Close what the launcher keeps open between starts (the recall's memory)."""
        self._recall.close()

    def replaces_system_prompt(self, body: str) -> bool:
        """Whether ``body`` takes a client's system prompt in place of its CLI's own."""
        try:
            return body_class(body, self.config).replaces_system_prompt
        except UnknownBodyError:  # a test's own factory body
            return False

    def gate(self, record: SessionRecord, mode: str | None) -> PolicyGate | None:
        if self.guards is None:
            return None
        return self.guards.gate(session_id=record.id, cwd=record.cwd, mode=mode)

    def native_flags(self, body: str, gate: PolicyGate | None) -> NativeFlags | None:
        """A body that cannot ask (a one-shot mode) starts with the native flags that
        match the policy and the gate's mode (their paths seen from the gate's folder,
        the session's)."""
        if self.guards is None or gate is None:
            return None
        if body_class(body, self.config).capabilities.permission_callback != Support.UNSUPPORTED:
            return None
        from chorus.policy import native_flags

        ctx = PathContext.current(gate.engine.cwd)
        flags = native_flags(body, self.guards.policy, mode=gate.mode, ctx=ctx)
        for note in flags.notes:
            log.info("%s: %s", body, note)
            self._notice(gate, f"{body}: {note}")
        return flags

    def _native_rules(self, options: BodyOptions, body: str) -> BodyOptions:
        """A long-lived body's CLI refuses by itself what the policy denies, even the
        calls it would approve without asking Chorus (``chorus.policy.native_rules``)."""
        if self.guards is None:
            return options
        from chorus.policy import native_rules

        ctx = PathContext.current(options.cwd)
        rules = native_rules(body, self.guards.policy, ctx=ctx, also=self._git_roots(options.cwd))
        extra = {**options.extra, "allowed_roots": rules.roots} if rules.roots else options.extra
        return replace(options, extra_args=(*options.extra_args, *rules.args), extra=extra)

    def _git_roots(self, cwd: Path) -> tuple[str, ...]:
        """In a git worktree, under the OS sandbox: what a commit writes of the main
        repository, writable in the CLI's own sandbox too (Codex's workspace sandbox
        runs each command first, and only a denial it recognises in the output, which
        it may read too early on a loaded machine, retries it outside). The OS sandbox
        keeps the repository's config and hooks, and the worktree's pointers, read-only."""
        if not sandbox_active(self.config.sandbox.mode):
            return ()
        return tuple(str(p) for p in git_paths(cwd).writable)

    def _notice(self, gate: PolicyGate, message: str) -> None:
        """A mode the body cannot honour is never changed silently: the
        session's log says so, in the stream of the job it runs for (``chorus ask``
        prints it), once per job."""
        key = (gate.session_id or "", gate.job_id or "", message)
        if gate.session_id and key not in self._noticed:
            self._noticed[key] = None
            if len(self._noticed) > _NOTICED_KEPT:
                del self._noticed[next(iter(self._noticed))]
            notice = Notice(message=message, kind="policy", job_id=gate.job_id)
            # Chorus's own: replay compares only what a codec decodes.
            self.store.append_nowait(gate.session_id, notice, origin=ORIGIN_CHORUS)

    def interactive(
        self, body: str, cwd: Path, more_env: dict[str, str]
    ) -> tuple[Path | None, dict[str, str]]:
        """The CLI and environment of a person's interactive run of ``body`` in ``cwd``
        (``chorus talk``): the body's own environment plus ``more_env``, and its CLI
        wrapped in the same OS sandbox a body of the session gets."""
        env = {**self._env(body), **more_env}
        return self._sandboxed(body, cwd, env), env

    def _env(self, body: str) -> dict[str, str]:
        """The process environment plus what Chorus gives ``body``; every value Chorus
        gives is registered with the redactor."""
        given: dict[str, str] = {}
        agent = self.config.agents.get(cli_name(body))
        if agent is not None:
            given.update(agent.env)
        if self.guards is not None:
            given.update(self.guards.env_for(body))
        register_env(self.store.redactor, given, os.environ)
        cli = self._cli(body)
        return {**os.environ, **given, **(cli.env if cli is not None else {})}

    def _executable(self, body: str) -> Path | None:
        """The program of a built-in body's CLI (None for ACP)."""
        cli = self._cli(body)
        return cli.path if cli is not None else None

    def _cli(self, body: str) -> NativeCli | None:
        """A built-in body's CLI as the daemon's config says, its native program run
        directly (no Node start per body, see ``_native``); None for ACP."""
        from chorus.agents import find_agent

        return native_cli(find_agent(CLI_OF[body], self.config)) if body in CLI_OF else None

    def _extra(self, meter_env: dict[str, str]) -> dict[str, Any]:
        """The body's ``extra``: the meter's variables, and ``os_sandbox`` when the OS
        sandbox holds the CLI (so its own command sandbox is not nested inside)."""
        extra: dict[str, Any] = {"meter_env": meter_env} if meter_env else {}
        if self._contained():
            extra["os_sandbox"] = True
        return extra

    def _contained(self) -> bool:
        sandbox = self.config.sandbox
        return sandbox_active(sandbox.mode) and tool_path() is not None and not sandbox.nested

    def _sandboxed(
        self, body: str, cwd: Path, env: dict[str, str], launches: Sequence[Sequence[str]] = ()
    ) -> Path | None:
        """The body's CLI, wrapped in its OS sandbox when ``[sandbox]`` says so, with
        what the commands it is given to start (``launches``) run from."""
        exe = self._executable(body)
        tool = tool_path()
        if not sandbox_active(self.config.sandbox.mode) or tool is None:
            return exe
        if exe is None:  # an ACP agent: its arguments may name a script it runs
            exe, own = _acp_launch(body, self.config)
            launches = [own, *launches]
        policy = self.guards.policy if self.guards is not None else Policy()
        cli = state_cli(cli_name(body), exe)  # an ACP agent of the config: its CLI's state
        box = sandbox_layout(policy, cwd, env, chorus_home(), cli=cli, launches=launches)
        digest = hashlib.sha256(repr((body, exe, box)).encode()).hexdigest()[:16]
        return write_wrapper(run_dir() / "sandbox" / f"{body}-{digest}.sh", tool, box, exe)


async def _final_text(events: AsyncIterator[Event]) -> str:
    """The turn's result (or its texts joined); a failed turn raises."""
    texts: list[str] = []
    async for event in events:
        if isinstance(event, Text):
            texts.append(event.text)
        elif isinstance(event, TurnCompleted):
            return event.result or "\n".join(texts)
        elif isinstance(event, TurnFailed):
            raise SessionError("internal", f"one-shot run failed: {event.error.message}")
    return "\n".join(texts)


def _acp_launch(body: str, config: ChorusConfig) -> tuple[Path, tuple[str, ...]]:
    """An ACP agent's program, and the command it is started with."""
    from chorus.bodies.acp import acp_agent

    agent = acp_agent(body, config)
    exe = Path(agent.executable())
    return exe, (str(exe), *agent.args)


def cli_name(body: str) -> str:
    """The agent entry a body's CLI is configured under (``claude-print`` → ``claude``)."""
    return CLI_OF.get(body, body)
