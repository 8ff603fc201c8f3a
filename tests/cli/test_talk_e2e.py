"""`chorus talk`: hand a session to the agent's own interactive CLI under the
session's policy and sandbox, pause its queue meanwhile, and bring the turns the
person had there into the session's log."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from chorus.agents import find_agent
from chorus.testing import offline_env, text
from chorus.testing._offline import FAKE_API_KEY

if TYPE_CHECKING:
    from collections.abc import Iterator

    from conftest import Chorus

pytestmark = pytest.mark.e2e

# Stands in for the interactive CLI: it records how it was started, then stays
# until the test releases it (a body's headless run gets the real CLI).
FAKE_INTERACTIVE = """#!{python}
import json, os, sys, time
if "-p" in sys.argv:
    os.execv({real!r}, [{real!r}, *sys.argv[1:]])
with open({record!r}, "w") as f:
    json.dump({{"argv": sys.argv[1:], "cwd": os.getcwd()}}, f)
deadline = time.monotonic() + 60
while not os.path.exists({release!r}) and time.monotonic() < deadline:
    time.sleep(0.05)
"""
_ANSI = re.compile(
    rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-B]"
)
_BLANKS = re.compile(rb"\s+")


def _squeezed(data: bytes) -> bytes:
    """``data`` without blanks: the CLI moves the cursor instead of printing some
    spaces, so a phrase is matched letter for letter, blanks aside."""
    return _BLANKS.sub(b"", data)


class Terminal:
    """A pseudo-terminal the talk runs in (its controlling terminal)."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
        self.primary, child = pty.openpty()
        fcntl.ioctl(child, termios.TIOCSWINSZ, b"\x28\x00\x78\x00\x00\x00\x00\x00")  # 40x120
        self.proc = subprocess.Popen(
            argv,
            stdin=child,
            stdout=child,
            stderr=child,
            cwd=cwd,
            env=env,
            start_new_session=True,
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        )
        os.close(child)
        self.seen = b""

    def wait_for(self, *needles: str, timeout: float = 90, since: int = 0) -> str:
        """The first of ``needles`` that shows on the screen after byte ``since`` of
        the output (fails after ``timeout``)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = _squeezed(self.screen(since))
            shown = [n for n in needles if _squeezed(n.encode()) in screen]
            if shown:
                return shown[0]
            self.drain(0.2)
        raise AssertionError(self.screen()[-3000:].decode(errors="replace"))

    def drain(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.primary], [], [], 0.1)
            if ready:
                try:
                    self.seen += os.read(self.primary, 65536)
                except OSError:
                    return

    def screen(self, since: int = 0) -> bytes:
        return _ANSI.sub(b"", self.seen[since:])

    def kill(self) -> None:
        """End whatever still runs in the terminal (a test that failed midway)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
            self.proc.wait(timeout=10)

    def type(self, keys: str) -> None:
        os.write(self.primary, keys.encode())

    def key_by_key(self, keys: str) -> None:
        """Typed as a person types: Codex's and Gemini's UIs take a burst of keys as a
        paste (Enter right after it is a newline, a slash command is not run)."""
        for key in keys:
            self.type(key)
            self.drain(0.04)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def finish(self, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([self.primary], [], [], 0.2)
            if ready:
                try:
                    self.seen += os.read(self.primary, 65536)
                except OSError:
                    break
        try:
            return self.proc.wait(timeout=5)
        finally:
            os.close(self.primary)


def _ask(chorus: Chorus, prompt: str, *more: str, body: str = "claude") -> dict[str, Any]:
    first = chorus.run("ask", prompt, "--body", body, "--json", *more)
    assert first.returncode == 0, first.stderr
    job = chorus.client.job(json.loads(first.stdout.splitlines()[0])["job_id"])
    session = chorus.client.session(job["session_id"])
    assert session["native_session_id"]
    return session


def _logged(chorus: Chorus, session_id: str) -> list[dict[str, Any]]:
    mirror = chorus.home / "sessions" / f"{session_id}.jsonl"
    return [json.loads(line) for line in mirror.read_text().splitlines()]


def _check_talked(chorus: Chorus, term: Terminal, session_id: str) -> None:
    """The talk's summary counted a turn; the typed prompt and its answer joined the
    log once, and the prompt reached the scripted model through the sandboxed CLI."""
    summary = [line for line in term.screen().splitlines() if line.startswith(b'{"session_id"')]
    assert summary, term.screen()[-2000:]
    assert json.loads(summary[-1])["turns"] >= 1
    logged = _logged(chorus, session_id)
    typed = [e["message"] for e in logged if e["type"] == "notice" and e.get("kind") == "talk"]
    assert "ping please" in typed
    assert "hello" not in typed  # only what the talk added
    texts = [e["text"] for e in logged if e["type"] == "text"]
    assert texts.count("talk answer PONG") == 1
    assert any("ping please" in json.dumps(r.body) for r in chorus.server.requests)


def _claude_onboarded(home: Path, work: Path) -> None:
    """The interactive UI's first-run screens (theme, API key, trust) already answered."""
    path = home / ".claude.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data.update(hasCompletedOnboarding=True, theme="dark")
    data["customApiKeyResponses"] = {"approved": [FAKE_API_KEY[-20:]], "rejected": []}
    data["projects"] = {str(work): {"hasTrustDialogAccepted": True}}
    path.write_text(json.dumps(data))


def _ready(term: Terminal) -> None:
    """The CLI's prompt, once a one-off offer it may show first is declined."""
    term.wait_for("? for shortcuts", "Not now")
    term.drain(3.0)
    if b"Notnow" in _squeezed(term.screen()):
        since = len(term.seen)
        term.type("2")
        time.sleep(0.3)
        term.type("\r")
        term.wait_for("? for shortcuts", since=since)


def _proc_with(native_id: str, keep: Callable[[list[bytes]], bool]) -> int | None:
    """A process whose arguments name ``native_id`` and pass ``keep`` (never the
    sandbox wrapper)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if native_id.encode() in argv and b"bwrap" not in argv[0] and keep(argv):
            return int(entry.name)
    return None


def _proc_of(native_id: str) -> int | None:
    """The CLI resuming ``native_id``."""
    return _proc_with(native_id, lambda argv: b"--resume" in argv)


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    """Terminals a test opens, ended after it whatever its outcome."""
    opened: list[Terminal] = []
    yield opened
    for term in opened:
        term.kill()


@pytest.mark.parametrize("sandbox", ["auto", "off"])  # off: the control
def test_talk_runs_claude_under_the_mode_and_sandbox_and_logs_the_turns(
    chorus: Chorus, tmp_path: Path, sandbox: str, terminals: list[Terminal]
) -> None:
    with (chorus.home / "config.toml").open("a") as f:
        f.write(f'[sandbox]\nmode = "{sandbox}"\n')
    chorus.server.script([text("first answer"), text("talk answer PONG")])
    session = _ask(chorus, "hello")
    _claude_onboarded(tmp_path / "claude-home", chorus.work)
    term = Terminal(
        [sys.executable, "-m", "chorus", "talk", session["id"][:10], "--json"], chorus.work
    )
    terminals.append(term)
    _ready(term)
    pid = _proc_of(session["native_session_id"])
    assert pid is not None
    argv = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
    assert argv[argv.index(b"--permission-mode") + 1] == b"default"  # the session's mode
    # inside the session's sandbox: a PID namespace of its own (bwrap --unshare-pid)
    own_pids = os.readlink(f"/proc/{pid}/ns/pid") != os.readlink("/proc/self/ns/pid")
    assert own_pids == (sandbox == "auto")
    # the person runs a shell command from the CLI's own prompt: the sandbox holds
    outside = tmp_path / "outside.txt"
    term.type(f"!touch inside.txt; touch {outside}; echo rc=$?")
    time.sleep(0.5)
    term.type("\r")
    term.wait_for("rc=0", "rc=1")  # its output (the typed line shows "rc=$?")
    term.type("ping please")
    time.sleep(0.5)
    term.type("\r")
    term.wait_for("PONG")
    term.type("/exit")
    time.sleep(0.5)
    term.type("\r")
    assert term.finish() == 0, term.screen()[-2000:]
    assert (chorus.work / "inside.txt").exists()  # the roots are writable
    assert outside.exists() == (sandbox == "off")  # outside them: only without the sandbox
    _check_talked(chorus, term, session["id"])
    _check_session_log(chorus, session["id"])


def _check_session_log(chorus: Chorus, session_id: str) -> None:
    """`chorus log SESSION` shows the talk as a block of its own after the job's events;
    replay (codec events only) and the audit chain still hold."""
    out = chorus.run("log", session_id[:10], "--json")
    assert out.returncode == 0, out.stderr
    shown = [json.loads(line) for line in out.stdout.splitlines()]
    talk = [e for e in shown if e.get("origin") == "talk"]
    assert [e["seq"] for e in shown] == sorted(e["seq"] for e in shown)
    assert {e["turn_id"] for e in talk} == {talk[0]["turn_id"]}  # one talk, one id
    assert talk[0]["turn_id"].startswith("talk-")
    assert all(e["job_id"] is None for e in talk)
    assert any(e["type"] == "text" and e["text"] == "first answer" for e in shown)  # the job
    assert any(e.get("kind") == "talk" and e["message"] == "ping please" for e in talk)
    text = chorus.run("log", session_id[:10])
    assert text.returncode == 0, text.stderr
    assert re.search(r"talk talk-[0-9a-f]+: \d+ turn\(s\)", text.stdout), text.stdout
    assert "you ping please" in text.stdout
    assert "talk answer PONG" in text.stdout
    assert text.stdout.index("first answer") < text.stdout.index("you ping please")
    replayed = chorus.run("replay", session_id)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    verified = chorus.run("audit", "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_talk_hands_over_with_the_mode_and_pauses_the_queue(chorus: Chorus, tmp_path: Path) -> None:
    chorus.server.script([text("first answer"), text("after talk")])
    session = _ask(chorus, "hello", "--permission-mode", "plan")  # the session's mode
    record, release = tmp_path / "talk.json", tmp_path / "release"
    fake = tmp_path / "fake-claude"
    fake.write_text(
        FAKE_INTERACTIVE.format(
            python=sys.executable,
            record=str(record),
            release=str(release),
            real=str(find_agent("claude")),
        )
    )
    fake.chmod(0o755)
    with (chorus.home / "config.toml").open("a") as f:
        f.write(f'[agents.claude]\ncommand = "{fake}"\n[sandbox]\nmode = "off"\n')
    assert chorus.run("stop").returncode == 0  # the daemon plans the talk: its config

    primary, terminal = pty.openpty()  # talk wants a terminal
    talk = subprocess.Popen(
        [sys.executable, "-m", "chorus", "talk", session["id"][:10]],
        stdin=terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=chorus.work,
    )
    os.close(terminal)
    deadline = time.monotonic() + 60
    while not record.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert record.exists(), talk.stderr.read() if talk.poll() is not None else "talk hangs"
    queued = chorus.run("task", "while talking", "--session", session["id"]).stdout.strip()
    time.sleep(1.5)
    assert chorus.client.job(queued)["state"] == "queued"  # paused while the person talks
    release.touch()
    _out, err = talk.communicate(timeout=60)
    os.close(primary)
    assert talk.returncode == 0, err
    started = json.loads(record.read_text())
    native = session["native_session_id"]
    assert started["argv"][:4] == ["--resume", native, "--permission-mode", "plan"]
    assert started["cwd"] == session["cwd"]
    assert "without Chorus's OS sandbox" in err  # said to the person
    assert "0 turn(s)" in err
    assert chorus.run("watch", queued).returncode == 0  # taken back, the queue runs
    assert chorus.client.job(queued)["state"] == "succeeded"


def test_talk_without_a_terminal_says_so(chorus: Chorus) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "chorus", "talk"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=chorus.work,
    )
    assert done.returncode == 2
    assert "run it in a terminal" in done.stderr
    assert "Traceback" not in done.stderr


def test_talk_to_an_unknown_session_exits_2(chorus: Chorus) -> None:
    chorus.server.script([text("first answer")])
    _ask(chorus, "hello")
    primary, terminal = pty.openpty()
    done = subprocess.run(
        [sys.executable, "-m", "chorus", "talk", "nosuchsession"],
        stdin=terminal,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=chorus.work,
    )
    os.close(terminal)
    os.close(primary)
    assert done.returncode == 2, done.stderr
    assert "nosuchsession" in done.stderr
    assert "Traceback" not in done.stderr


#: Per CLI: what its prompt shows when it is ready for the person.
READY = {"codex": "? for shortcuts", "gemini": "Type your message"}


def _other_cli(chorus: Chorus, tmp_path: Path, cli: str) -> None:
    """The session's CLI on the scripted model; its first-run screens answered (Codex:
    the folder trusted; Gemini's settings already turn folder trust off)."""
    env = offline_env(cli, tmp_path / f"{cli}-home", chorus.server.url)  # type: ignore[arg-type]
    with (chorus.home / "config.toml").open("a") as f:
        f.write(f"[agents.{cli}.env]\n")
        f.writelines(f"{k} = {json.dumps(v)}\n" for k, v in env.items())
    if cli == "codex":
        with (Path(env["CODEX_HOME"]) / "config.toml").open("a") as f:
            f.write(f'\n[projects."{chorus.work}"]\ntrust_level = "trusted"\n')


def _ready_ui(term: Terminal, cli: str) -> None:
    """The UI's prompt, once Codex's new-model offer is declined (keep the model)."""
    offer = "Use existing model"
    if term.wait_for(READY[cli], offer) == READY[cli]:
        term.drain(3.0)
    if cli == "codex" and _squeezed(offer.encode()) in _squeezed(term.screen()):
        since = len(term.seen)
        term.key_by_key("2")
        time.sleep(0.3)
        term.type("\r")
        term.wait_for(READY[cli], since=since)
    _takes_keys(term)


def _takes_keys(term: Terminal) -> None:
    """Once the prompt shows what is typed (Gemini drops the keys typed while it still
    starts up): a probe typed and erased until it shows."""
    for _ in range(10):
        since = len(term.seen)
        term.type("%")  # a key neither UI gives a meaning to, nor shows by itself
        term.drain(2.0)
        shown = b"%" in term.screen(since)
        term.type("\x7f")
        term.drain(1.0)
        if shown:
            return
    raise AssertionError(term.screen()[-2000:].decode(errors="replace"))


def _quit(term: Terminal) -> None:
    """``/quit`` at the prompt, Enter again while the UI still runs (a completion menu
    may take the first)."""
    term.type("/quit")
    for _ in range(6):
        time.sleep(1.0)
        term.type("\r")
        term.drain(5.0)
        if not term.alive():
            return


def _native_proc(native_id: str) -> int | None:
    """A process of the CLI resuming ``native_id`` (not the talk itself)."""
    return _proc_with(native_id, lambda argv: b"talk" not in argv)


@pytest.mark.parametrize("cli", ["codex", "gemini"])
def test_talk_drives_the_codex_and_gemini_uis_in_the_sandbox_and_logs_the_turns(
    chorus: Chorus, tmp_path: Path, cli: str, terminals: list[Terminal]
) -> None:
    _other_cli(chorus, tmp_path, cli)
    chorus.server.script([text("first answer"), text("talk answer PONG")])
    session = _ask(chorus, "hello", body=cli)
    # a CI marker in the environment must not turn the CLI's interface off
    term = Terminal(
        [sys.executable, "-m", "chorus", "talk", session["id"][:10], "--json"],
        chorus.work,
        env={**os.environ, "CI": "true"},
    )
    terminals.append(term)
    _ready_ui(term, cli)
    pid = _native_proc(session["native_session_id"])
    assert pid is not None
    assert os.readlink(f"/proc/{pid}/ns/pid") != os.readlink("/proc/self/ns/pid")  # sandboxed
    since = len(term.seen)
    term.key_by_key("ping please")
    time.sleep(1.0)
    term.type("\r")
    term.wait_for("PONG", since=since)
    # the person runs a shell command from the UI's own prompt: the sandbox holds
    outside = tmp_path / "outside.txt"
    since = len(term.seen)
    term.key_by_key(f"!touch inside.txt; touch {outside}; echo rc=$?")
    time.sleep(1.0)
    term.type("\r")
    term.wait_for("rc=1", "rc=0", since=since)
    term.type("\x1b")  # Gemini: out of its shell mode
    time.sleep(1.0)
    _quit(term)
    assert term.finish() == 0, term.screen()[-2000:]
    assert (chorus.work / "inside.txt").exists()  # the roots are writable
    assert not outside.exists()  # outside them: the sandbox refused
    _check_talked(chorus, term, session["id"])
