"""Fronts: Chorus speaking the protocols programs and editors already use.

Each front serves one client protocol on stdio and drives Chorus sessions through
the daemon over UCP v1 (:class:`Link`), so every turn is logged, policed and can
fail over whatever the client:

* :class:`AcpFront` (``chorus acp``): an ACP agent, for Zed and other ACP clients;
* :class:`ClaudeFront` (``chorus-claude``): Claude Code's stream-json on stdio, for
  Claude Agent SDK programs (``cli_path``) and ``claude-code-acp``;
* :class:`CodexFront` (``chorus codex-app-server``, ``chorus-codex``): the Codex
  app-server JSON-RPC, for the ``openai-codex`` SDK.

Each module is a sans-I/O codec (protocol frames <-> UCP requests and canonical
events) plus the thin loop of :class:`Front`. Shared, also sans-I/O: where a client
is asked (:class:`ClaudeRules`, :class:`CodexRules`: each front reviews every call
Chorus's policy allows and puts to its client the ones its own CLI would), an SDK
program's :class:`Hooks`, and the client's MCP servers as reported (:class:`McpReport`).
"""

from chorus.fronts._acp import AcpFront, AcpRenderer
from chorus.fronts._claude import ClaudeCodec, ClaudeFront
from chorus.fronts._claude import main as claude_main
from chorus.fronts._claude_argv import ClaudeArgs, parse_argv
from chorus.fronts._codex import CodexArgs, CodexCodec, CodexFront, parse_codex_argv
from chorus.fronts._codex import main as codex_main
from chorus.fronts._front import EXIT_OK, EXIT_UNREACHABLE, Front, run_front
from chorus.fronts._hooks import HookError, Hooks
from chorus.fronts._link import Link, LinkError, ensure_daemon
from chorus.fronts._mcp import McpReport
from chorus.fronts._rules import ClaudeRules, CodexRules, Roots

__all__ = [
    "EXIT_OK",
    "EXIT_UNREACHABLE",
    "AcpFront",
    "AcpRenderer",
    "ClaudeArgs",
    "ClaudeCodec",
    "ClaudeFront",
    "ClaudeRules",
    "CodexArgs",
    "CodexCodec",
    "CodexFront",
    "CodexRules",
    "Front",
    "HookError",
    "Hooks",
    "Link",
    "LinkError",
    "McpReport",
    "Roots",
    "claude_main",
    "codex_main",
    "ensure_daemon",
    "parse_argv",
    "parse_codex_argv",
    "run_front",
]
