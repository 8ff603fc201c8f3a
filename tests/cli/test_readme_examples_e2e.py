"""Every shell example in the README is run by a test, as written (placeholders filled,
``a | b`` alternatives and ``[--optional]`` parts each run): here the memory and
worktree blocks; the everyday block has its own walk; the quick start is ``./run demo``
(tests/cli/test_demo.py) and ``./run test`` (CI itself)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from chorus.testing import shell, text

if TYPE_CHECKING:
    from conftest import Chorus

README = Path(__file__).resolve().parents[2] / "README.md"
#: Blocks walked by other tests, by a line they start with.
WALKED_ELSEWHERE = {
    "./run demo": "tests/cli/test_demo.py",
    './run ask "fix the failing test"': "tests/cli/test_readme_everyday_e2e.py",
    "chorus team create": "tests/daemon/test_teams_e2e.py (the team block's commands)",
    "createuser chorus": "PostgreSQL's own commands, not Chorus's",
}


def blocks() -> list[list[str]]:
    """Each ``sh`` block of the README as its command lines (comments dropped)."""
    found = re.findall(r"```sh\n(.*?)```", README.read_text(), re.S)
    lines = [[ln for ln in b.splitlines() if ln.strip() and not ln.startswith("#")] for b in found]
    return [b for b in lines if b]


def block_starting(prefix: str) -> list[str]:
    return next(b for b in blocks() if b[0].startswith(prefix))


def expand(line: str) -> list[list[str]]:
    """One README line as the commands it shows: ``|`` separates alternatives (a bare
    one continues the first command's group), ``[...]`` parts are included."""
    words = [w.strip("[]") if w.startswith("[") or w.endswith("]") else w for w in _split(line)]
    parts: list[list[str]] = [[]]
    for word in words:
        parts.append([]) if word == "|" else parts[-1].append(word)
    first = parts[0]
    return [p if p[0] == "./run" else [*first[:2], *p] for p in parts]


def _split(line: str) -> list[str]:
    return shlex.split(line, comments=True)


def test_every_readme_block_is_walked_by_a_test() -> None:
    starts = [b[0] for b in blocks()]
    walked_here = ("./run memory add", './run task "add a login page" --worktree')
    for start in starts:
        assert start.startswith(walked_here) or any(
            start.startswith(prefix) for prefix in WALKED_ELSEWHERE
        ), f"README example with no test walking it: {start}"


def test_expand_reads_alternatives_and_optional_parts() -> None:
    assert expand("./run worktree rm JOB [--force] | ./run worktree prune") == [
        ["./run", "worktree", "rm", "JOB", "--force"],
        ["./run", "worktree", "prune"],
    ]
    assert expand("./run memory list | show ID   # x") == [
        ["./run", "memory", "list"],
        ["./run", "memory", "show", "ID"],
    ]


def _fill(words: list[str], values: dict[str, str]) -> list[str]:
    return [values.get(w, w) for w in words[1:]]  # without ./run


@pytest.mark.e2e
def test_the_memory_block_as_written(chorus: Chorus, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDITOR", "true")  # `memory edit ID` opens the editor: keep as is
    monkeypatch.setenv("HOME", str(chorus.work.parent))
    (chorus.work.parent / "src" / "app").mkdir(parents=True)
    values = {"~/src/app": str(chorus.work.parent / "src" / "app")}
    for line in block_starting("./run memory add"):
        for command in expand(line):
            args = _fill(command, values)
            done = chorus.run(*args, *([] if "--json" in args else ["--json"]))
            assert done.returncode == 0, (args, done.stdout, done.stderr)
            _learn(args, done.stdout, values)
    assert "ID" in values


def _learn(args: list[str], out: str, values: dict[str, str]) -> None:
    """Keep the ids later lines name; check the search finds what was added."""
    if args[:2] == ["memory", "add"]:
        values["ID"] = json.loads(out)["item"]["id"]
    if args[:2] == ["memory", "search"]:
        hits = json.loads(out)
        assert [h["item"]["id"] for h in hits if h.get("item")] == [values["ID"]], out


def _repo(path: Path) -> None:
    for args in (
        ("init", "-q", "-b", "main"),
        (
            "-c",
            "user.name=T",
            "-c",
            "user.email=t@example.com",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "first",
        ),
    ):
        subprocess.run(["git", *args], cwd=path, check=True)


@pytest.mark.e2e
def test_the_worktree_block_as_written(chorus: Chorus) -> None:
    _repo(chorus.work)
    chorus.server.script([shell("echo '<form></form>' > login.html"), text("added")])
    values = {"NAME": "login-page", "REF": "main"}
    for line in block_starting('./run task "add a login page" --worktree'):
        for command in expand(line):
            args = _fill(command, values)
            if args[0] == "task":
                args += ["--body", "claude", "--permission-mode", "acceptEdits"]
            done = chorus.run(*args)
            assert done.returncode == 0, (args, done.stdout, done.stderr)
            if args[0] == "task":
                values["JOB"] = done.stdout.strip()
                assert chorus.run("watch", values["JOB"]).returncode == 0
            if args[:2] == ["worktree", "diff"]:
                assert "login.html" in done.stdout
    assert (chorus.work / "login.html").read_text() == "<form></form>\n"  # merged
