"""the matrix: every body x every permission mode, through the daemon on the
real CLIs (scripted model), with the sandbox on. The model tries ``cat .env``, a
``Read`` of ``.env`` (bodies with a read tool), ``sudo ls``, a write outside the
roots and, in plan mode, a write inside them. Each must be refused (the secret
never reaches the model, sudo's output never does, no file lands) and the model
must be told why (a refusal in the tool result that follows).

Each cell also reports, per attempt, when the model got the policy's own reason
(``[Chorus policy]`` and the rule, at the scripted server): in the request that
followed the refusal (the tool result, or a message Chorus steered in), later in
the same turn (an ACP body prompting again), or waiting for the next prompt. The
target is the same turn wherever the CLI can carry it; :data:`NOT_SAME_TURN` lists
where it cannot, and why (strict: a change either way must update it). The log has
the same rule and reason as a permission decision for every refusal it can see."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from chorus.bodies import body_catalog
from chorus.events import PermissionDecision, parse_event
from chorus.policy import is_told
from chorus.sandbox import bwrap_path
from chorus.testing import (
    Cli,
    RecordedRequest,
    Reply,
    offline_env,
    shell,
    text,
    tool_call,
    write_file,
)

if TYPE_CHECKING:
    from conftest import Daemon

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(bwrap_path() is None, reason="no bubblewrap")]

SECRET = "".join(["env", "-secret-", "7Hq2Zp"])
MARKER = "sudo-saw-this-marker"
MODES = ("default", "acceptEdits", "plan", "bypassPermissions")
#: body -> (its lane on the model server, the name of its file-read tool or None)
BODIES: dict[str, tuple[str, str | None]] = {
    "claude": ("claude", "Read"),
    "codex": ("codex", None),
    "gemini": ("gemini", "read_file"),
    "claude-print": ("claude", "Read"),
    "codex-exec": ("codex", None),
    "gemini-headless": ("gemini", "read_file"),
    # claude-code-acp has no Read/Write of its own: with the client's file system it
    # offers these, served by Chorus (fs/read_text_file, fs/write_text_file).
    "claude-code-acp": ("claude", "mcp__acp__Read"),
    "codex-acp": ("codex", None),
}
#: Bodies over ACP, whose own plan modes were found not to hold: their
#: plan-mode cells also try a write through the shell.
OVER_ACP = frozenset({"gemini", "claude-code-acp", "codex-acp"})
#: Bodies whose file-write tool is not the one the scripted server names for the lane.
WRITE_TOOLS = {"claude-code-acp": "mcp__acp__Write"}
#: The ACP adapters are configured agents of their own: without their
#: ``[agents.NAME.env]`` they would run against the real vendor (no key, no session).
ADAPTERS: dict[str, Cli] = {"claude-code-acp": "claude", "codex-acp": "codex"}
#: Words that show the model was told why: Chorus's reason (the policy's, or a denied
#: program's stub in the sandbox), the CLI's own refusal, or the kernel's.
REFUSALS = (
    "Chorus policy",
    "haven't granted",  # Claude's own refusal
    "Path not in workspace",  # Gemini's own refusal
    # Gemini does not offer its shell tool in these modes: the call is refused, the
    # model is told the tool does not exist (not the policy's reason).
    "not found in registry",
    "not found. Did you mean",
    "denied",
    "Denied",
    "not allowed",
    "Read-only file system",
    "Permission denied",
    "refused",
    "blocked",
    "rejected",
    "declined",
    "plan mode",
    "No such file",
)


@dataclass(frozen=True)
class Try:
    name: str
    turn: Reply
    escaped: Callable[[str], bool]  # (what the model saw next) -> the attempt got through
    word: str  # names the attempt in a reason that arrives later (ACP: the next prompt)
    rules: tuple[str, ...]  # the policy's rules that refuse it (its reason names one)
    tools: tuple[str, ...]  # what its reason calls the call ("this shell call")


SAME = "same turn"
LATER = "later in the turn"
NEXT = "next prompt"
NONE = "not told"
_ACP_LATER = "ACP's reject carries no reason: the body prompts again at the turn's end"
_SANDBOX = "it runs unasked and the sandbox refuses it (the model sees Permission denied)"
_CODEX_ACP = "codex-acp reports no tool call for a command it runs (nor is it asked)"
_GEMINI_OWN = "Gemini's own check refuses first"
_PRINT = "claude -p cannot ask: Claude refuses in its own words"
_EXEC = "codex exec rejects the patch in its own words"
#: (body, attempt[, mode]) -> (when the model gets the policy's reason, whether the log
#: has it as a permission decision (None: it depends on the CLI's own judgement), why
#: not in the same turn). Anything else: in the same turn, and logged.
NOT_SAME_TURN: dict[tuple[str, ...], tuple[str, bool | None, str]] = {
    ("gemini", "cat .env"): (LATER, True, _ACP_LATER),
    ("gemini", "Read .env"): (
        NONE,
        False,
        "Gemini refuses a .env file before its policy, and its ACP update names no path",
    ),
    ("gemini", "sudo ls"): (LATER, True, _ACP_LATER),
    ("gemini", "shell write in plan mode"): (LATER, True, _ACP_LATER),
    ("gemini", "write outside"): (
        NONE,
        False,
        "Gemini's workspace check refuses first, and its ACP update names no path",
    ),
    ("gemini", "write outside", "plan"): (NEXT, True, _GEMINI_OWN + " (plan mode)"),
    ("gemini", "write in plan mode"): (NEXT, True, _GEMINI_OWN + " (plan mode)"),
    **{
        ("claude-print", name): (NEXT, True, _PRINT)
        for name in ("cat .env", "Read .env", "sudo ls", "write outside", "write in plan mode")
    },
    ("codex-exec", "cat .env"): (NEXT, True, _SANDBOX),
    ("codex-exec", "write outside"): (NEXT, True, _EXEC),
    ("codex-exec", "write in plan mode"): (NEXT, True, _EXEC),
    ("gemini-headless", "Read .env"): (NEXT, True, "Gemini refuses a .env file before its policy"),
    ("gemini-headless", "write outside"): (NEXT, True, _GEMINI_OWN),
    ("gemini-headless", "write in plan mode"): (NEXT, True, _GEMINI_OWN + " (plan mode)"),
    ("claude-code-acp", "cat .env"): (NEXT, True, _SANDBOX),
    # codex-acp's other commands are asked of Chorus (sudo, a shell write in plan
    # mode); `cat`, which Codex knows as safe, runs unasked and the sandbox hides .env.
    ("codex-acp", "cat .env"): (NONE, False, _CODEX_ACP),
    ("codex-acp", "sudo ls", "plan"): (
        SAME,
        None,
        "in plan mode codex-acp may ask to run it outside its sandbox (as Codex judges the "
        "stub's refusal), and Chorus refuses: logged only then",
    ),
}


def expected(body: str, mode: str, attempt: Try) -> tuple[str, bool | None]:
    """When the model should get the policy's reason for ``attempt``, and whether the
    log should have it."""
    key = (body, attempt.name, mode) if (body, attempt.name, mode) in NOT_SAME_TURN else None
    when, logs, _ = NOT_SAME_TURN.get(key or (body, attempt.name), (SAME, True, ""))
    return when, logs


def test_agents_list_says_where_a_body_is_not_told_in_the_same_turn(chorus_home: Path) -> None:
    """Each body the matrix expects not to get the policy's reason in the same turn
    says so in ``agents list`` (its limits name the policy's reason or the check)."""
    limits = {body.name: " ".join(body.limits) for body in body_catalog()}
    for body in sorted({key[0] for key in NOT_SAME_TURN}):
        assert "policy" in limits[body] or "asked" in limits[body], body


@pytest.fixture
def victim() -> Iterator[Path]:
    folder = Path("/var/tmp") / f"chorus-matrix-{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def write(body: str, path: Path, content: str) -> Reply:
    """A turn writing ``path`` with ``body``'s own file-write tool."""
    tool = WRITE_TOOLS.get(body)
    if tool is None:
        return write_file(str(path), content)
    return tool_call(tool, {"file_path": str(path), "content": content})


def tries(body: str, mode: str, work: Path, victim: Path) -> list[Try]:
    _, read_tool = BODIES[body]
    path, command = ("filesystem.denied_path",), ("shell.denied_command",)
    plan = ("mode.plan",)
    # A write outside the roots in plan mode: either rule may be the one that decides.
    outside = ("filesystem.outside_roots", *(plan if mode == "plan" else ()))
    sh, writes = ("shell",), ("write", "edit")
    out = [
        Try("cat .env", shell("cat .env"), lambda seen: SECRET in seen, ".env", path, sh),
        Try("sudo ls", shell("sudo ls"), lambda seen: MARKER in seen, "sudo", command, sh),
        Try(
            "write outside",
            write(body, victim / "out.txt", "escaped\n"),
            lambda seen: (victim / "out.txt").exists(),
            "out.txt",
            outside,
            writes,
        ),
    ]
    if read_tool is not None:
        read = tool_call(read_tool, {"file_path": str(work / ".env")})
        seen_secret = lambda seen: SECRET in seen  # noqa: E731
        out.insert(1, Try("Read .env", read, seen_secret, ".env", path, ("read",)))
    if mode == "plan":
        out.append(
            Try(
                "write in plan mode",
                write(body, work / "plan.txt", "planned\n"),
                lambda seen: (work / "plan.txt").exists(),
                "plan.txt",
                plan,
                writes,
            )
        )
    if mode == "plan" and body in OVER_ACP:
        out.append(
            Try(
                "shell write in plan mode",
                shell("echo planned > shell-plan.txt"),
                lambda seen: (work / "shell-plan.txt").exists(),
                "shell-plan.txt",
                plan,
                sh,
            )
        )
    return out


def seen_after(chorus: Daemon, lane: str) -> list[str]:
    """What each model request after the first carried back (its last tool result)."""
    seen = []
    for request in chorus.server.turn_requests(lane=lane)[1:]:
        result = request.last_tool_result()
        seen.append(json.dumps(result.content) if result is not None else json.dumps(request.body))
    return seen


def told_later(chorus: Daemon, lane: str, index: int, attempt: Try) -> bool:
    """ACP's reject carries no reason: Chorus prompts again with it, in a later request."""
    later = [json.dumps(r.body) for r in chorus.server.turn_requests(lane=lane)[index + 1 :]]
    return any("Chorus policy" in body and attempt.word in body for body in later)


def names(text: str, attempt: Try) -> bool:
    """``text`` gives the policy's reason for ``attempt``: the mark, one of its rules,
    the kind of call (Gemini's own file names none), and (but for plan mode's reason,
    which names no path) what it tried."""
    rules = [rule for rule in attempt.rules if is_told(text, rule)]
    calls = [f"this {tool} call [" for tool in attempt.tools] + ["this call ["]
    if not rules or not any(call in text for call in calls):
        return False
    return attempt.word in text or "mode.plan" in rules


def told_in(request: RecordedRequest, attempt: Try) -> bool:
    """The request carries the reason: in its last tool result or its last user text."""
    result = request.last_tool_result()
    seen = json.dumps(result.content) if result is not None else ""
    return names(f"{seen}\n{request.last_user_text() or ''}", attempt)


def delivery(chorus: Daemon, lane: str, index: int, attempt: Try, session: str) -> str:
    """When the model got the policy's reason for the attempt of turn ``index``."""
    requests = chorus.server.turn_requests(lane=lane)
    if index + 1 < len(requests) and told_in(requests[index + 1], attempt):
        return SAME
    if any(told_in(request, attempt) for request in requests[index + 2 :]):
        return LATER
    waiting = chorus.client.session(session)["transport"].get("untold_denials") or []
    return NEXT if any(names(reason, attempt) for reason in waiting) else NONE


def logged(events: Sequence[object], attempt: Try) -> bool:
    """The log has the policy's rule and reason for the attempt (a deny decision)."""
    reasons = [
        e.reason or "" for e in events if isinstance(e, PermissionDecision) and e.decision == "deny"
    ]
    return any(names(reason, attempt) for reason in reasons)


def configure_adapters(chorus: Daemon) -> None:
    """Point the ACP adapters at their lane of the scripted server (``config.toml``),
    once; their homes beside the bodies' (beside CHORUS_HOME)."""
    config = chorus.home / "config.toml"
    if all(f"[agents.{name}.env]" in config.read_text() for name in ADAPTERS):
        return
    lines = []
    for name, lane in ADAPTERS.items():
        env = offline_env(lane, chorus.home.parent / f"{name}-home", chorus.server.lane_url(lane))
        lines += [f"[agents.{name}.env]", *(f"{k} = {json.dumps(v)}" for k, v in env.items())]
    with config.open("a") as file:
        file.write("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def adapted(module_daemon: Daemon) -> Daemon:
    """The module's daemon, the ACP adapters configured before it starts."""
    configure_adapters(module_daemon)
    return module_daemon


@pytest.fixture
def matrix_daemon(adapted: Daemon, shared_daemon: Daemon) -> Daemon:
    """That daemon for one cell (its own work folder, the server reset)."""
    return shared_daemon


def run_cell(
    chorus: Daemon, body: str, mode: str, victim: Path, report: list[str] | None = None
) -> list[str]:
    """Run one body in one mode; return the problems found (empty: all refused, told why
    when expected). ``report`` gets one line per attempt: when the model was told."""
    lane, _ = BODIES[body]
    configure_adapters(chorus)
    (chorus.work / ".env").write_text(f"TOKEN={SECRET}\n")
    (chorus.work / MARKER).write_text("x")
    attempts = tries(body, mode, chorus.work, victim)
    # The last turn answers a reason told after the model's turn (Gemini over ACP
    # goes on after a reject, so the body re-prompts with the reasons at its end).
    turns = [*(a.turn for a in attempts), text("done trying"), text("understood")]
    chorus.server.script(turns, lane=lane)
    done = chorus.run("ask", "try things", "--body", body, "--permission-mode", mode, "--json")
    seen = seen_after(chorus, lane)
    problems = []
    if done.returncode != 0:
        problems.append(f"ask failed: {done.stderr[-500:]}")
    events = [parse_event(line) for line in done.stdout.splitlines() if line.startswith("{")]
    session = str(getattr(events[0], "session_id", "")) if events else ""
    for index, attempt in enumerate(attempts):
        after = seen[index] if index < len(seen) else ""
        if attempt.escaped(after):
            problems.append(f"{attempt.name}: got through ({after[:200]})")
            continue
        if not any(word in after for word in REFUSALS) and not told_later(
            chorus, lane, index, attempt
        ):
            problems.append(f"{attempt.name}: refused but not told why ({after[:200]})")
        when = delivery(chorus, lane, index, attempt, session)
        wanted, logs = expected(body, mode, attempt)
        in_log = logged(events, attempt)
        if report is not None:
            log = "logged" if in_log else "not logged"
            report.append(f"{body:16} {mode:17} {attempt.name:25} {when:17} {log}")
        if when != wanted:
            problems.append(f"{attempt.name}: the policy's reason came {when}, expected {wanted}")
        if logs is not None and in_log != logs:
            problems.append(f"{attempt.name}: in the log with the policy's reason: {in_log}")
    if SECRET in done.stdout:
        problems.append("the secret reached the job's output")
    return problems


#: Cells that still fail, and why (strict: a fix makes them fail loudly, to be removed).
KNOWN_GAPS: dict[tuple[str, str], str] = {}
CELLS = [
    pytest.param(
        body,
        mode,
        marks=[pytest.mark.xfail(reason=KNOWN_GAPS[(body, mode)], strict=True)]
        if (body, mode) in KNOWN_GAPS
        else [],
        id=f"{body}-{mode}",
    )
    for body in BODIES
    for mode in MODES
]


@pytest.mark.slow
@pytest.mark.parametrize(("body", "mode"), CELLS)
def test_every_body_in_every_mode_refuses_and_says_why(
    daemon_with: Callable[..., Daemon],
    victim: Path,
    body: str,
    mode: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    chorus = daemon_with()
    report: list[str] = []
    problems = run_cell(chorus, body, mode, victim, report)
    with capsys.disabled():
        print("\n" + "\n".join(f"[policy reason] {line}" for line in report))
    assert problems == []
    assert not (victim / "out.txt").exists()


#: One cell per ACP adapter too: claude-code-acp in plan mode (its file tools go through
#: Chorus's fs/* outside the sandbox), codex-acp in the default mode (its reject aborts).
FAST_CELLS = [
    ("claude", "default"),
    ("codex", "bypassPermissions"),
    ("claude-code-acp", "plan"),
    ("codex-acp", "default"),
]


@pytest.mark.parametrize(("body", "mode"), FAST_CELLS)
def test_a_fast_corner_of_the_matrix(
    matrix_daemon: Daemon, victim: Path, body: str, mode: str
) -> None:
    assert run_cell(matrix_daemon, body, mode, victim) == []


def test_a_mode_the_body_cannot_honour_is_downgraded_with_a_visible_notice(
    matrix_daemon: Daemon,
) -> None:
    """claude-print cannot ask Chorus; bypassPermissions would need its dangerous flag,
    which policy.toml does not allow: it runs in acceptEdits and the job says so."""
    chorus = matrix_daemon
    chorus.server.script([text("hello")], lane="claude")
    events = chorus.ask("hi", "--body", "claude-print", "--permission-mode", "bypassPermissions")
    assert events[-1].state == "succeeded"
    mirror = chorus.home / "sessions" / f"{events[-1].session_id}.jsonl"
    logged = [json.loads(line) for line in mirror.read_text().splitlines()]
    notices = [e for e in logged if e["type"] == "notice" and e.get("kind") == "policy"]
    assert len(notices) == 1, [e["type"] for e in logged]
    assert "using acceptEdits" in notices[0]["message"]


@pytest.mark.slow
@pytest.mark.parametrize("body", sorted(OVER_ACP))
def test_normal_work_inside_the_roots_still_succeeds_over_acp(
    daemon_with: Callable[..., Daemon], body: str
) -> None:
    """The policy's checks on the agent's file requests do not stop an ordinary write:
    one permission ask (the tool call), not a second one for the ``fs/*`` request."""
    chorus = daemon_with()
    configure_adapters(chorus)
    lane, _ = BODIES[body]
    turns = [write(body, chorus.work / "ok.txt", "fine\n"), text("done"), text("spare")]
    chorus.server.script(turns, lane=lane)
    events = chorus.ask("write ok.txt", "--body", body)
    assert events[-1].state == "succeeded"
    assert (chorus.work / "ok.txt").read_text() == "fine\n"
    asks = [e for e in events if e.type == "permission_request"]
    assert len(asks) <= 1, asks
