"""The handoff bundle built from a job's events and the files on disk."""

from __future__ import annotations

from pathlib import Path

from chorus.events import (
    ErrorCode,
    ErrorInfo,
    FileChange,
    Plan,
    PlanEntry,
    Text,
    ToolCall,
    ToolResult,
)
from chorus.router import build_bundle

FAIL = ErrorInfo(code=ErrorCode.QUOTA_EXHAUSTED, message="You have exhausted your quota")


def test_bundle_has_task_steps_files_and_failure(tmp_path: Path) -> None:
    (tmp_path / "one.txt").write_text("first\n")
    events = [
        Plan(entries=[PlanEntry(content="write one.txt"), PlanEntry(content="write two.txt")]),
        Text(text="I will write one.txt first."),
        ToolCall(
            call_id="c1",
            tool="shell",
            native_tool="Bash",
            input={"command": "echo first > one.txt"},
        ),
        ToolResult(call_id="c1", output=""),
        ToolCall(
            call_id="c2",
            tool="write",
            native_tool="Write",
            input={"file_path": str(tmp_path / "x.md")},
        ),
        ToolResult(call_id="c2", output="denied", is_error=True),
        FileChange(path=str(tmp_path / "gone.txt"), kind="delete"),
    ]
    bundle = build_bundle(
        task="write one.txt and two.txt",
        from_body="claude",
        failure=FAIL,
        events=events,
        cwd=tmp_path,
    )
    prompt = bundle.render()
    assert "write one.txt and two.txt" in prompt
    assert "quota_exhausted" in prompt
    assert "[ok] shell: echo first > one.txt" in prompt
    assert "[failed] write" in prompt
    assert "one.txt: shell, now 1 lines" in prompt
    assert "gone.txt: delete (missing now)" in prompt
    assert "[pending] write two.txt" in prompt
    assert "Resume note" in prompt


def test_history_is_trimmed_to_budget_keeping_the_latest(tmp_path: Path) -> None:
    events = [Text(text=f"message number {i} " + "x" * 300) for i in range(100)]
    bundle = build_bundle(
        task="t", from_body="codex", failure=FAIL, events=events, cwd=tmp_path, token_budget=300
    )
    history = "\n".join(bundle.history)
    assert "message number 99" in history
    assert "message number 0 " not in history
    assert "earlier history trimmed" in history
    assert len(history) < 300 * 4 + 500


def test_the_bundle_names_the_jobs_worktree_and_branch(tmp_path: Path) -> None:
    from chorus.store import WorktreeRecord

    tree = WorktreeRecord(
        job_id="j1",
        repo="/r",
        path=str(tmp_path / "wt"),
        branch="chorus/j1-fix",
        base="main",
        base_commit="a" * 40,
        into="main",
        state="locked",
        created_at=0.0,
        updated_at=0.0,
    )
    bundle = build_bundle(
        task="t", from_body="claude", failure=FAIL, events=[], cwd=tmp_path, worktree=tree
    )
    prompt = bundle.render()
    assert f"The git worktree {tmp_path / 'wt'} on branch chorus/j1-fix" in prompt
    plain = build_bundle(task="t", from_body="claude", failure=FAIL, events=[], cwd=tmp_path)
    assert "worktree" not in plain.render()
