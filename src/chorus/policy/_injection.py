"""Prompt injection coming in, and secrets going out.

*Incoming*: tool output and fetched pages are scanned for text written to steer
the model ("ignore previous instructions", fake ``<system>`` tags, chat-template
tokens, invisible Unicode). A hit marks the :class:`ToolResult` ``untrusted``;
the policy gate then treats the session as tainted, so later network calls
score higher risk. Text is normalized first (NFKC, zero-width characters
removed) so full-width letters and ``ig\u200bnore`` are not a way around it.

*Outgoing*: a tool call is checked for data flowing to the network that should
not: the environment (``env | curl``), credential files (``curl -d @.env``,
``scp ~/.ssh/id_rsa host:``), secret-named variables (``curl -H "$GITHUB_TOKEN"``),
and the literal value of any stored secret anywhere in the call's input.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from chorus.events import ToolResult
from chorus.policy._paths import PathContext, matches_pattern, resolve_path
from chorus.policy._shell import URL_PATTERN, ParsedCommand, Segment

#: Bytes of text scanned: the head and the tail (injections hide at either end).
MAX_SCAN_CHARS = 1_000_000
_EXCERPT = 80


@dataclass(frozen=True, slots=True)
class InjectionPattern:
    """One kind of injection: a stable ``id``, what it means, and its regex."""

    id: str
    description: str
    regex: re.Pattern[str]


def _p(id_: str, description: str, pattern: str, flags: int = re.IGNORECASE) -> InjectionPattern:
    return InjectionPattern(id_, description, re.compile(pattern, flags))


_AI = r"(?:ai|assistant|agent|llm|language\s+model|chatbot|claude|codex|gemini|gpt|copilot)"

INJECTION_PATTERNS: tuple[InjectionPattern, ...] = (
    _p(
        "ignore_instructions",
        "tells the model to drop its instructions",
        r"\b(?:ignore|disregard|forget|override|skip)\s+(?:all\s+|any\s+|the\s+|your\s+|of\s+)*"
        r"(?:previous|prior|above|earlier|preceding|original|system|existing)\s+"
        r"(?:instructions?|prompts?|rules|directions|directives|guidelines|context|messages?)",
    ),
    _p(
        "new_instructions",
        "announces replacement instructions",
        r"\b(?:new|updated|revised|real|actual|true)\s+(?:system\s+)?instructions?\s*(?::|-|are\b)",
    ),
    _p(
        "role_reassignment",
        "tries to give the model a new identity or rules",
        r"\byou\s+are\s+(?:now|no\s+longer)\b|\bfrom\s+now\s+on,?\s+you\s+(?:will|must|are|shall)\b",
    ),
    _p(
        "prompt_extraction",
        "asks the model to reveal its system prompt",
        r"\b(?:reveal|print|show|output|repeat|display|leak|dump)\s+(?:me\s+)?(?:your|the)\s+"
        r"(?:full\s+|entire\s+|hidden\s+|original\s+|initial\s+)?"
        r"(?:system\s+prompt|system\s+message|instructions|initial\s+prompt|hidden\s+prompt)",
    ),
    _p(
        "chat_template_tokens",
        "contains chat-template control tokens",
        r"<\|(?:im_start|im_end|system|user|assistant|endoftext|start_header_id|end_header_id|eot_id)"
        r"\|>|\[/?INST\]|<</?SYS>>",
    ),
    _p(
        "fake_system_tag",
        "imitates a system or harness message",
        r"<\s*/?\s*(?:system|system-reminder|system_prompt|system-prompt|instructions|admin)\s*>"
        r"|\[(?:SYSTEM|ADMIN)\s*(?:MESSAGE|OVERRIDE|NOTE|INSTRUCTIONS?)?\]",
    ),
    _p(
        "concealment",
        "asks the model to hide something from the user",
        r"\b(?:do\s+not|don'?t|never)\s+(?:tell|inform|mention\s+(?:this\s+)?to|reveal\s+"
        r"(?:this\s+)?to|alert|notify|let)\s+(?:the\s+)?(?:user|human|operator|developer)",
    ),
    _p(
        "jailbreak",
        "classic jailbreak phrasing",
        r"\b(?:jailbreak|jailbroken|DAN\s+mode|developer\s+mode\s+(?:enabled|on|activated)"
        r"|do\s+anything\s+now|without\s+(?:any\s+)?(?:restrictions|limitations|filters|guardrails)"
        r"|no\s+ethical\s+(?:guidelines|constraints))\b",
    ),
    _p(
        "exfiltration_request",
        "asks for secrets to be sent somewhere",
        r"\b(?:send|post|upload|e-?mail|forward|exfiltrate|transmit|leak|paste)\b[^\n]{0,60}?"
        r"(?:\b(?:api[\s_-]?keys?|credentials|secrets?|passwords?|access\s+tokens?|private\s+keys?"
        r"|ssh\s+keys?|environment\s+variables|id_rsa)|\.env\b)",
    ),
    _p(
        "addressed_to_ai",
        "text addressed to the AI reading it",
        rf"\b(?:attention|note\s+to|message\s+(?:to|for)|instructions?\s+for|dear|hey)\s+"
        rf"(?:the\s+|any\s+|all\s+)?{_AI}s?\b",
    ),
    _p(
        "imperative_to_ai",
        "orders an AI to act",
        rf"\b{_AI}s?\b[^.\n]{{0,40}}\b(?:must|should|shall|are\s+(?:required|instructed)\s+to)\s+"
        r"(?:now\s+|immediately\s+)?(?:ignore|disregard|run|execute|send|delete|reveal|call|visit"
        r"|fetch|download|curl|email)\b",
    ),
    _p(
        "safety_override",
        "asks the model to switch off its safeguards",
        r"\b(?:override|bypass|disable|turn\s+off|ignore)\s+(?:your\s+|all\s+|the\s+|any\s+)*"
        r"(?:safety|security|content\s+policy|guidelines|guardrails|restrictions|permission"
        r"\s+checks?|sandbox)\b",
    ),
    _p(
        "urgent_override",
        "uses urgency to demand compliance",
        rf"\b(?:IMPORTANT|URGENT|CRITICAL|PRIORITY|OVERRIDE)\s*[!:]+\s*(?:ignore|disregard|you\s+must"
        rf"|the\s+{_AI})",
    ),
    _p(
        "decode_and_run",
        "asks for an encoded payload to be decoded and executed",
        r"\b(?:decode|base64\s+-d|atob|unhex)\b[^.\n]{0,50}\b(?:then\s+|and\s+)?"
        r"(?:execute|run|follow|eval|obey)\b",
    ),
    _p(
        "hidden_unicode",
        "invisible Unicode tag or bidirectional-override characters",
        "[\U000e0000-\U000e007f\u202a-\u202e\u2066-\u2069]",
        0,
    ),
)

_ZERO_WIDTH = re.compile("[\u200b\u200c\u200d\u2060\ufeff\u00ad]")


@dataclass(frozen=True, slots=True)
class InjectionMatch:
    """Where a pattern matched, with a short excerpt of the normalized text."""

    pattern: str
    description: str
    excerpt: str


@dataclass(frozen=True, slots=True)
class InjectionReport:
    """Result of :func:`scan_text`; ``untrusted`` when anything matched."""

    matches: tuple[InjectionMatch, ...] = ()

    @property
    def untrusted(self) -> bool:
        return bool(self.matches)

    @property
    def pattern_ids(self) -> tuple[str, ...]:
        return tuple(m.pattern for m in self.matches)


def _normalize(text: str) -> str:
    if len(text) > MAX_SCAN_CHARS:
        half = MAX_SCAN_CHARS // 2
        text = text[:half] + "\n" + text[-half:]
    return unicodedata.normalize("NFKC", _ZERO_WIDTH.sub("", text))


def scan_text(text: str) -> InjectionReport:
    """Scan ``text`` for every pattern in :data:`INJECTION_PATTERNS`. Pure."""
    raw_hidden = INJECTION_PATTERNS[-1].regex.search(text)
    normalized = _normalize(text)
    found: list[InjectionMatch] = []
    for pattern in INJECTION_PATTERNS:
        source = text if pattern.id == "hidden_unicode" else normalized
        match = raw_hidden if pattern.id == "hidden_unicode" else pattern.regex.search(source)
        if match is None:
            continue
        start = max(0, match.start() - 20)
        excerpt = source[start : match.end() + 20].replace("\n", " ")[:_EXCERPT]
        found.append(InjectionMatch(pattern.id, pattern.description, excerpt))
    return InjectionReport(tuple(found))


#: Tools whose output comes from outside the machine and is never trusted.
EXTERNAL_TOOLS = frozenset({"web_fetch", "web_search"})


def mark_untrusted(result: ToolResult, *, tool: str | None = None) -> ToolResult:
    """``result`` with ``untrusted=True`` if its output looks like an injection
    (or it came from the web, per ``tool``); otherwise ``result`` itself."""
    if result.untrusted:
        return result
    if tool in EXTERNAL_TOOLS or scan_text(result.output).untrusted:
        return result.model_copy(update={"untrusted": True})
    return result


# -- outgoing: exfiltration -----------------------------------------------------

#: Programs that send data to another host.
SENDERS = frozenset(
    {
        "curl",
        "wget",
        "nc",
        "ncat",
        "netcat",
        "socat",
        "telnet",
        "ssh",
        "scp",
        "sftp",
        "rsync",
        "ftp",
        "mail",
        "sendmail",
        "mutt",
        "http",
        "https",
        "xh",
        "rclone",
        "aws",
        "gsutil",
    }
)
_SECRET_VAR = re.compile(
    r"\$\{?([A-Za-z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIALS?))\b",
    re.IGNORECASE,
)
_UPLOAD_VALUE_OPTS = frozenset(
    {"-T", "--upload-file", "--post-file", "--body-file", "-i", "--input-file"}
)


@dataclass(frozen=True, slots=True)
class ExfilFinding:
    """One outgoing flow that is not allowed: ``rule`` id and a reason for the model."""

    rule: str
    reason: str


def _data_sources(seg: Segment) -> list[str]:
    """Local files a sending command would read: ``@file`` values, upload options,
    ``<`` redirects, and plain path arguments (scp/rsync sources)."""
    sources: list[str] = []
    args = seg.argv[1:]
    for k, arg in enumerate(args):
        value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
        if "@" in value and not URL_PATTERN.match(value):
            sources.append(value.split("@", 1)[1])
        if arg in _UPLOAD_VALUE_OPTS and k + 1 < len(args):
            sources.append(args[k + 1])
        if arg.startswith("--post-file=") or arg.startswith("--body-file="):
            sources.append(arg.split("=", 1)[1])
        if not arg.startswith("-") and not URL_PATTERN.match(arg) and ":" not in arg:
            sources.append(arg)
    sources.extend(r.target for r in seg.redirects if r.op in ("<", "<>"))
    return [s for s in sources if s]


def _is_env_dump(seg: Segment) -> bool:
    """True if the segment prints environment variables (``env``, ``printenv [NAME]``,
    ``set``, ``export -p``, ``/proc/*/environ``)."""
    head = os.path.basename(seg.words[0]) if seg.words else ""
    if head == "env" and not seg.argv:
        return True  # env with no program to run prints the environment
    if seg.name == "printenv" or (seg.name in ("set", "declare") and len(seg.argv) <= 2):
        return True
    if seg.name == "export" and (len(seg.argv) == 1 or "-p" in seg.argv):
        return True
    return any("/proc/" in a and a.endswith("/environ") for a in seg.argv[1:])


def check_shell_exfiltration(
    parsed: ParsedCommand,
    ctx: PathContext,
    sensitive: Iterable[str],
    *,
    trusted_domain: Callable[[str], bool] = lambda host: False,
) -> list[ExfilFinding]:
    """Flows from the environment, secret variables or ``sensitive`` files to a sender.

    A flow is: a sender's own arguments, anything upstream of it in its pipeline,
    or anything substituted into its words (``curl -d "$(cat .env)"``). A secret
    *variable* may go to a host that ``trusted_domain`` accepts (a token for the
    API it belongs to); the environment and credential files never may.
    """
    is_sensitive = _sensitive_matcher(ctx, list(sensitive))
    findings: list[ExfilFinding] = []
    for index, seg in enumerate(parsed.segments):
        if seg.name not in SENDERS:
            continue
        feeding = _feeding(parsed, index)
        trusted = _all_hosts_trusted(seg, trusted_domain)
        findings.extend(_flows_into(seg, feeding, is_sensitive, secret_vars_ok=trusted))
    return list(dict.fromkeys(findings))


def _all_hosts_trusted(seg: Segment, trusted_domain: Callable[[str], bool]) -> bool:
    hosts = [urlsplit(u).hostname or "" for a in seg.argv[1:] for u in URL_PATTERN.findall(a)]
    return bool(hosts) and all(trusted_domain(h) for h in hosts)


def _feeding(parsed: ParsedCommand, index: int) -> list[Segment]:
    """Segments whose output reaches the segment at ``index``: those before it in
    its pipeline, and everything substituted into it or into them."""
    seg = parsed.segments[index]
    feeding: list[Segment] = []
    for member_index, member in parsed.pipeline(seg.pipeline):
        if member.position < seg.position:
            feeding.append(member)
        if member.position <= seg.position:
            feeding.extend(parsed.descendants(member_index))
    return feeding


def _flows_into(
    sender: Segment,
    feeding: list[Segment],
    is_sensitive: Callable[[str], bool],
    *,
    secret_vars_ok: bool,
) -> list[ExfilFinding]:
    out = sender.name
    findings = [
        ExfilFinding("exfil.environment", f"`{seg.text}` sends the environment through `{out}`")
        for seg in feeding
        if _is_env_dump(seg)
    ]
    for seg in [sender, *feeding]:
        sources = _data_sources(seg) if seg is sender else list(seg.argv[1:])
        findings.extend(
            ExfilFinding("exfil.sensitive_file", f"`{out}` would send the credential file {src!r}")
            for src in sources
            if is_sensitive(src)
        )
        if secret_vars_ok:
            continue
        findings.extend(
            ExfilFinding(
                "exfil.secret_variable",
                f"`{out}` would send ${var} to a host not in network.allowed_domains",
            )
            for word in (*seg.argv[1:], *seg.assignments)
            for var in _SECRET_VAR.findall(word)
        )
    return findings


def _sensitive_matcher(ctx: PathContext, patterns: list[str]) -> Callable[[str], bool]:
    def is_sensitive(raw: str) -> bool:
        if not raw or "\x00" in raw or URL_PATTERN.match(raw):
            return False
        resolved = resolve_path(raw, ctx)
        return any(
            matches_pattern(resolved.lexical, p, ctx) or matches_pattern(resolved.real, p, ctx)
            for p in patterns
        )

    return is_sensitive


def check_secret_values(value: Any, secrets: Iterable[str]) -> list[ExfilFinding]:
    """The literal value of a stored secret anywhere in a tool call's input.

    The model should never have seen a secret (they reach bodies as environment
    variables and are redacted from everything), so a literal one in a call is
    either a leak in progress or an injection that found one.
    """
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    hits = [s for s in secrets if len(s) >= 6 and s in text]
    if not hits:
        return []
    return [
        ExfilFinding(
            "exfil.secret_value",
            f"the tool input contains the value of {len(hits)} stored secret(s); "
            "use the environment variable instead",
        )
    ]


def url_secret_leak(url: str) -> bool:
    """True if a URL carries a secret-named query parameter (``?api_key=...``)."""
    query = url.partition("?")[2]
    return bool(re.search(r"(?i)(?:^|&)[a-z0-9_]*(?:key|token|secret|password)=[^&]{6,}", query))
