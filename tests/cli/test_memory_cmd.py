"""``chorus memory …`` and ``chorus context show`` as a person runs them (the real CLI in
a subprocess): JSON output, the log, and bad input exiting 2 with nothing written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from chorus.store import SqliteStore


def chorus(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chorus", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


def _no_clock(text: str) -> str:
    return re.sub(r"## Now\n\n.*\n", "## Now\n\n", text)


def _files(home: Path) -> list[str]:
    root = home / "memory"
    return (
        sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
        if root.exists()
        else []
    )


async def test_add_search_show_edit_forget_and_the_log(chorus_home: Path) -> None:
    added = json.loads(
        chorus("memory", "add", "Prefers tea over coffee", "-t", "preference", "--json").stdout
    )
    item_id = added["item"]["id"]
    assert added["op"] == "add"
    hits = json.loads(chorus("memory", "search", "tea", "--json").stdout)
    assert [h["item"]["id"] for h in hits] == [item_id]
    shown = json.loads(chorus("memory", "show", item_id, "--json").stdout)
    assert shown["path"] == str(chorus_home / "memory" / "items" / f"{item_id}.md")
    edited = chorus("memory", "edit", item_id, "--text", "Prefers green tea", "--json")
    assert json.loads(edited.stdout)["item"]["text"] == "Prefers green tea"
    assert chorus("memory", "forget", item_id).returncode == 0
    assert json.loads(chorus("memory", "list", "--json").stdout) == []
    every = json.loads(chorus("memory", "list", "--all", "--json").stdout)
    assert [(i["id"], i["status"]) for i in every] == [(item_id, "forgotten")]
    async with SqliteStore() as store:
        logged = await store.read_events("memory")
    assert [(e.op, e.item_id) for e in logged] == [  # type: ignore[union-attr]
        ("add", item_id),
        ("edit", item_id),
        ("forget", item_id),
    ]


def test_edit_with_an_editor_rereads_the_file(chorus_home: Path, tmp_path: Path) -> None:
    item_id = json.loads(chorus("memory", "add", "old words", "--json").stdout)["item"]["id"]
    editor = tmp_path / "editor.sh"
    editor.write_text("#!/bin/sh\nsed -i 's/old words/new words/' \"$1\"\n")
    editor.chmod(0o755)
    done = chorus("memory", "edit", item_id, "--json", env={"EDITOR": str(editor)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["item"]["text"] == "new words"
    assert json.loads(chorus("memory", "search", "new", "--json").stdout)[0]["text"] == "new words"


@pytest.mark.parametrize(
    "args",
    [
        ("memory", "forget", "m0123456789ab"),
        ("memory", "show", "nope"),
        ("memory", "edit", "m0123456789ab", "--text", "x"),
        ("memory", "add", "   "),
        ("memory", "add", "valid text", "--type", "opinion"),
        ("memory", "add", "valid text", "--supersedes", "m0123456789ab"),
        ("context", "show", "--body", "no-such-body"),
        ("context", "show", "--cwd", "/no/such/dir"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(chorus_home: Path, args: tuple[str, ...]) -> None:
    done = chorus(*args)
    assert done.returncode == 2, done.stderr
    assert "error:" in done.stderr
    # Nothing of the memory is written; opening it may create the (empty) index cache.
    assert [f for f in _files(chorus_home) if not f.startswith("index.db")] == []


def test_a_bad_memory_table_in_config_exits_2(chorus_home: Path) -> None:
    chorus_home.mkdir(parents=True, exist_ok=True)
    (chorus_home / "config.toml").write_text('[memory]\nembedder = "word2vec"\n')
    done = chorus("memory", "list")
    assert done.returncode == 2
    assert "memory.embedder" in done.stderr


def test_reindex_reports_broken_files_with_file_and_line(chorus_home: Path) -> None:
    chorus("memory", "add", "a fine item")
    bad = chorus_home / "memory" / "items" / "m00000000bad0.md"
    bad.write_text("---\nkind: fact\nstatus: sleeping\n---\nstill loads\n")
    done = chorus("memory", "reindex", "--json")
    report = json.loads(done.stdout)
    assert report["items"] == 2
    assert report["warnings"] == [
        f"{bad}:3: status: 'sleeping' is not one of active, superseded, forgotten"
    ]


def test_context_show_prints_what_the_body_gets(chorus_home: Path, tmp_path: Path) -> None:
    chorus("memory", "add", "The user is called Sam", "-t", "profile")
    (tmp_path / "CHORUS.md").write_text("Run make check before pushing.\n")
    text = chorus("context", "show", "--body", "claude", "--cwd", str(tmp_path)).stdout
    assert text.startswith("# Context from Chorus")
    assert "The user is called Sam" in text
    assert "Run make check before pushing." in text
    data = json.loads(
        chorus("context", "show", "--body", "codex", "--cwd", str(tmp_path), "--json").stdout
    )
    assert data["channel"] == "-c developer_instructions"
    # The same text, but for the clock (the two runs may straddle a minute).
    assert _no_clock(data["text"]) == _no_clock(text)
    assert data["mcp_servers"]["chorus"]["type"] == "http"  # the session's channel


def test_context_show_takes_the_prompt_the_plan_and_a_later_prompt(
    chorus_home: Path, tmp_path: Path
) -> None:
    (chorus_home / "config.toml").parent.mkdir(parents=True, exist_ok=True)
    (chorus_home / "config.toml").write_text("[memory]\ntop_n = 1\n")
    chorus("memory", "add", "The staging database runs on db-staging-7", "-t", "fact")
    chorus("memory", "add", "The release codename is Bluefin", "-t", "fact")
    chorus("memory", "add", "The office plant is a ficus", "-t", "fact")
    shown = chorus(
        "context", "show", "--cwd", str(tmp_path), "--prompt", "staging database host?",
        "--plan", "1. find the host\n2. report it", "--next", "release codename?", "--json",
    )  # fmt: skip
    data = json.loads(shown.stdout)
    assert "db-staging-7" in data["text"]  # the prompt's item, not the most recent one
    assert "ficus" not in data["text"]
    assert data["sections"][-1]["name"] == "plan"
    assert data["text"].rstrip().endswith("1. find the host\n2. report it")
    assert "Bluefin" in data["next"]["text"]  # what the later prompt would recall
    assert "db-staging-7" not in data["next"]["text"]  # in the context already
    plain = chorus("context", "show", "--cwd", str(tmp_path), "--next", "office plant?").stdout
    assert "# Before the later prompt\n\n(nothing new to recall)" in plain  # ficus: shown
