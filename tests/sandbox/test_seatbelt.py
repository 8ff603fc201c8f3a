"""The macOS sandbox profile (SBPL), read back by a small evaluator of the rules it
uses: the last rule that matches an operation on a path decides, as in SBPL.
(This project's CI is Linux: ``sandbox-exec`` itself is not run here.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from chorus.policy import Policy
from chorus.sandbox import Layout, active, layout, profile, write_wrapper

Sexp = str | list["Sexp"]
_TOKEN = re.compile(r'\(|\)|"(?:[^"\\]|\\.)*"|[^\s()]+')


def parse(text: str) -> list[Sexp]:
    stack: list[list[Sexp]] = [[]]
    for token in _TOKEN.findall(text):
        if token == "(":
            stack.append([])
        elif token == ")":
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(token)
    assert len(stack) == 1, "unbalanced profile"
    return stack[0]


def unquote(token: Sexp) -> str:
    assert isinstance(token, str)
    assert token.startswith('"')
    return re.sub(r"\\(.)", r"\1", token[1:-1])


#: The profile's parameters, as ``sandbox-exec -D`` would give them.
PARAMS = {"CHORUS_TMP": "/private/tmp/chorus-body.AbCd1234"}


def matches(rule: list[Sexp], op: str, path: Path) -> bool:
    ops = [t for t in rule[1:] if isinstance(t, str)]
    filters = [t for t in rule[1:] if isinstance(t, list)]
    if not any(_covers(o, op) for o in ops):
        return False
    return not filters or any(_hit(f, path) for f in filters)


def _value(token: Sexp) -> str:
    """A string literal, or ``(param "NAME")`` looked up in :data:`PARAMS`."""
    if isinstance(token, list):
        assert token[0] == "param"
        return PARAMS[unquote(token[1])]
    return unquote(token)


def _covers(name: str, op: str) -> bool:
    return name in (op, "default") or (name.endswith("*") and op.startswith(name[:-1]))


def _hit(filt: Sexp, path: Path) -> bool:
    assert isinstance(filt, list)
    kind, where = filt[0], Path(_value(filt[1]))
    return path == where if kind == "literal" else path == where or path.is_relative_to(where)


def allowed(text: str, op: str, path: Path) -> bool:
    verdict = False
    for rule in parse(text):
        if isinstance(rule, list) and rule[0] in ("allow", "deny") and matches(rule, op, path):
            verdict = rule[0] == "allow"
    return verdict


@pytest.fixture
def box(tmp_path: Path) -> Layout:
    return Layout(
        writable=(tmp_path / "work", tmp_path / "home"),
        hidden_dirs=(tmp_path / "home" / ".ssh",),
        hidden_files=(tmp_path / "work" / ".env",),
        chorus_home=tmp_path / "ch",
        shared=(tmp_path / "ch" / "run" / "chorus.sock", tmp_path / "ch" / "memory"),
        cwd=tmp_path / "work",
        stub_dir=tmp_path / "ch" / "run" / "sandbox" / "stubs",
        stub_names=("sudo",),
        stub_targets=(("sudo", Path("/usr/bin/sudo")),),
        path_env="/usr/bin:/bin",
        read_only=(tmp_path / "home" / "tmp" / "chorus-native-0", tmp_path / "ch" / "memory"),
        tmp=Path("/private/tmp"),
    )


def test_the_roots_are_writable_and_the_rest_is_read_only(box: Layout, tmp_path: Path) -> None:
    text = profile(box)
    assert allowed(text, "file-write-data", tmp_path / "work" / "a.txt")
    assert allowed(text, "file-write-create", tmp_path / "home" / ".claude" / "x.json")
    assert allowed(text, "file-read-data", Path("/etc/hosts"))
    assert not allowed(text, "file-write-data", Path("/etc/hosts"))
    assert not allowed(text, "file-write-create", tmp_path / "victim" / "out.txt")
    assert allowed(text, "file-write-data", Path("/dev/null"))
    assert allowed(text, "file-write-create", Path(PARAMS["CHORUS_TMP"]) / "x")  # its own tmp
    assert not allowed(text, "file-write-create", Path("/private/tmp/other"))  # not the shared
    rules = tmp_path / "home" / "tmp" / "chorus-native-0" / "gemini.toml"
    assert allowed(text, "file-read-data", rules)
    assert not allowed(text, "file-write-data", rules)
    assert allowed(text, "network-outbound", Path("/"))  # the model API stays reachable


def test_denied_paths_and_chorus_home_are_unreadable(box: Layout, tmp_path: Path) -> None:
    text = profile(box)
    for hidden in (tmp_path / "work" / ".env", tmp_path / "home" / ".ssh" / "id_ed25519"):
        assert not allowed(text, "file-read-data", hidden), hidden
        assert not allowed(text, "file-write-data", hidden), hidden
    assert not allowed(text, "file-read-data", tmp_path / "ch" / "audit.log")
    assert not allowed(text, "file-read-data", tmp_path / "ch" / "run" / "gateway.token")
    assert allowed(text, "file-read-data", tmp_path / "ch" / "run" / "chorus.sock")
    assert allowed(text, "file-read-data", tmp_path / "ch" / "memory" / "MEMORY.md")
    assert not allowed(text, "file-write-create", tmp_path / "ch" / "memory" / "note.md")


def test_denied_programs_cannot_run_and_their_stubs_come_first(box: Layout, tmp_path: Path) -> None:
    text = profile(box)
    assert not allowed(text, "process-exec", Path("/usr/bin/sudo"))
    assert allowed(text, "process-exec", Path("/bin/ls"))
    wrapper = write_wrapper(tmp_path / "w.sh", "/usr/bin/sandbox-exec", box, Path("/opt/claude"))
    script = wrapper.read_text()
    sb = tmp_path / "w.sb"
    assert sb.read_text() == text
    lines = script.splitlines()
    assert lines[1] == ("TMPDIR=$(/usr/bin/mktemp -d /private/tmp/chorus-body.XXXXXXXX) || exit 1")
    assert lines[2] == "export TMPDIR"
    assert lines[3].startswith(
        f"exec '/usr/bin/sandbox-exec' '-D' \"CHORUS_TMP=$TMPDIR\" '-f' '{sb}' '/usr/bin/env'"
    )
    assert f"'PATH={box.stub_dir}:/usr/bin:/bin'" in script
    assert script.rstrip().endswith("'/opt/claude' \"$@\"")
    assert box.stub_dir is not None
    assert (box.stub_dir / "sudo").exists()


def test_paths_with_quotes_stay_one_string(tmp_path: Path) -> None:
    odd = tmp_path / 'we"ird\\name'
    box = Layout(writable=(odd,), hidden_dirs=(), hidden_files=(), chorus_home=tmp_path / "ch")
    text = profile(box)
    assert allowed(text, "file-write-data", odd / "x")
    assert not allowed(text, "file-write-data", tmp_path / "we")


def test_a_real_layout_on_macos_keeps_the_same_guarantees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work, home, chorus_home = tmp_path / "work", tmp_path / "home", tmp_path / "ch"
    for folder in (work, home / ".ssh", chorus_home / "memory"):
        folder.mkdir(parents=True)
    (work / ".env").write_text("TOKEN=1")
    text = profile(layout(Policy(), work, {"HOME": str(home)}, chorus_home, cli="codex"))
    assert not allowed(text, "file-read-data", (work / ".env").resolve())
    assert not allowed(text, "file-read-data", (home / ".ssh").resolve() / "id_rsa")
    assert allowed(text, "file-write-data", work.resolve() / "main.py")
    assert allowed(text, "file-write-create", home.resolve() / ".codex" / "sessions" / "x.jsonl")
    assert not allowed(text, "file-write-data", home.resolve() / ".codex" / "config.toml")
    assert not allowed(text, "file-write-data", home.resolve() / ".bashrc")
    assert not allowed(text, "file-write-create", chorus_home.resolve() / "memory" / "MEMORY.md")
    monkeypatch.setattr("chorus.sandbox._build.sys.platform", "darwin")
    monkeypatch.setattr("chorus.sandbox._build.bwrap_path", lambda: None)
    monkeypatch.setattr("chorus.sandbox._build.os.access", lambda path, how: True)
    assert active("enforce") is True
