"""One tool vocabulary for every body; the native name is always kept beside it."""

from __future__ import annotations

_NORMALIZED: dict[str, str] = {
    # Claude Code
    "Bash": "shell",
    "BashOutput": "shell_output",
    "KillShell": "shell_kill",
    "Read": "read",
    "Write": "write",
    "Edit": "edit",
    "MultiEdit": "edit",
    "NotebookEdit": "edit",
    "Grep": "search",
    "Glob": "glob",
    "WebFetch": "web_fetch",
    "WebSearch": "web_search",
    "AskUserQuestion": "ask_user",
    "TodoWrite": "todo",
    "Task": "task",
    "Agent": "task",
    # Codex
    "exec_command": "shell",
    "commandExecution": "shell",
    "command_execution": "shell",
    "shell": "shell",
    "local_shell": "shell",
    "write_stdin": "shell_input",
    "apply_patch": "edit",
    "fileChange": "edit",
    "file_change": "edit",
    "view_image": "read",
    "web_search": "web_search",
    "request_user_input": "ask_user",
    "update_plan": "todo",
    # Gemini CLI
    "run_shell_command": "shell",
    "read_file": "read",
    "read_many_files": "read",
    "write_file": "write",
    "replace": "edit",
    "grep_search": "search",
    "search_file_content": "search",
    "glob": "glob",
    "list_directory": "list",
    "web_fetch": "web_fetch",
    "google_web_search": "web_search",
    "write_todos": "todo",
    "invoke_agent": "task",
    # ACP tool kinds
    "execute": "shell",
    "read": "read",
    "edit": "edit",
    "delete": "delete",
    "move": "move",
    "search": "search",
    "fetch": "web_fetch",
    "think": "think",
}


def normalize_tool(native: str) -> str:
    """Map a native tool name to Chorus's vocabulary.

    MCP tools (``mcp__server__tool``; Gemini's ``mcp_server_tool``) become ``mcp``;
    anything unknown is kept as ``other`` so that policy treats it conservatively.
    """
    if native in _NORMALIZED:
        return _NORMALIZED[native]
    if native.startswith("mcp_"):
        return "mcp"
    return "other"
