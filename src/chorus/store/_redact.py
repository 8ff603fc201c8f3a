"""Redaction: secrets are replaced by ``[REDACTED:kind]`` before anything is stored.

The store runs every event, raw line, record field and log message through a
:class:`Redactor` before it reaches SQLite, the JSONL mirror or a log handler.
Three sources of secrets, applied in this order (so a narrower rule never
leaves half of a wider secret behind):

1. exact values registered with :meth:`Redactor.add_secret` (the vault's secrets);
2. user regexes from ``config.toml`` ``redact_patterns`` (kind ``custom``);
3. built-in patterns: provider API keys and tokens, JWTs, bearer tokens, private
   key blocks, passwords in URLs, and the values of assignments and JSON fields
   whose names look secret (``API_KEY=``, ``"password": ...``).

JSON is redacted structurally (:meth:`Redactor.redact_json` walks the strings),
so a redacted payload is still valid JSON. Redaction is idempotent: a marker is
never redacted again.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Iterable
from typing import Any

from chorus.events import Event, event_from_dict
from chorus.store._errors import RedactionError

#: Known secret values shorter than this are refused: replacing them everywhere
#: would shred ordinary text and still not protect anything.
MIN_SECRET_CHARS = 6

_MARKER = "[REDACTED:{}]"
_NOT_MARKER = r"(?!\[REDACTED:)"

# Names whose values are secret: the name must END with one of these stems, so
# ``GITHUB_TOKEN`` and ``apiKey`` match but ``MAX_TOKENS`` and ``tokenType`` do not.
_SECRET_STEMS = (
    r"api[_.-]?key|access[_.-]?key|secret[_.-]?key|private[_.-]?key|client[_.-]?secret"
    r"|secret|token|password|passwd|passphrase|credentials?"
)
_SECRET_NAME = rf"[A-Za-z0-9_.-]*?(?i:{_SECRET_STEMS})"
_SECRET_NAME_RE = re.compile(_SECRET_NAME)

# (kind, pattern). A pattern may contain a group named ``v`` (renamed per kind
# below): then only that part is replaced and the context (``API_KEY=``,
# ``Bearer ``, ``user:``) stays readable. Order breaks ties at one position.
_BUILTIN: tuple[tuple[str, str], ...] = (
    (
        "private_key",
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(?:[\s\S]*?-----END[A-Z0-9 ]*PRIVATE KEY-----"
        r"|[A-Za-z0-9+/=\s\\]*)",
    ),
    (
        "url_password",
        r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@\"'\\<>]+:" + _NOT_MARKER + r"(?P<v>[^\s@/\"'\\<>]+)@",
    ),
    ("basic_auth", r"(?i:authorization)[\"']?\s*:\s*[\"']?(?i:basic)\s+(?P<v>[A-Za-z0-9+/=]{8,})"),
    ("bearer_token", r"\b(?i:bearer)\s+" + _NOT_MARKER + r"(?P<v>[A-Za-z0-9._~+/-]{16,}=*)"),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
    ("anthropic_key", r"\bsk-ant-[A-Za-z0-9_-]{16,}"),
    ("openai_key", r"\bsk-(?:proj-|svcacct-|admin-)?(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{20,}"),
    ("stripe_key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    ("google_api_key", r"\bAIza[0-9A-Za-z_-]{30,}"),
    ("google_oauth_token", r"\bya29\.[0-9A-Za-z_-]{20,}"),
    ("github_token", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
    ("gitlab_token", r"\bglpat-[A-Za-z0-9_-]{20,}"),
    ("npm_token", r"\bnpm_[A-Za-z0-9]{36}\b"),
    ("aws_access_key", r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|AIPA)[A-Z0-9]{16}\b"),
    (
        "aws_secret_key",
        r"(?i:aws)[A-Za-z0-9_.-]{0,30}?(?i:secret)[A-Za-z0-9_.-]{0,30}?[\"']?\s*[:=]\s*[\"']?"
        r"(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
    ),
    ("slack_token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    ("slack_webhook", r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}"),
    ("huggingface_token", r"\bhf_[A-Za-z0-9]{30,}"),
    (
        # NAME=value, NAME="value", NAME='value', and NAME=\"value\" as it looks
        # inside JSON text; the name stays, the value goes.
        "secret_assignment",
        r"(?<![A-Za-z0-9_.-])" + _SECRET_NAME + r"[\"']?\s*=\s*" + _NOT_MARKER + r"(?P<v>"
        r"\\\"(?:[^\"\\]|\\[^\"])*\\\"|\"[^\"\\\n]+\"|'[^'\n]+'|[^\s\"'\\&;,]+)",
    ),
    (
        # "name": "value" inside JSON text (e.g. an Unknown event's raw line).
        "secret_field",
        r"\"" + _SECRET_NAME + r"\"\s*:\s*\"" + _NOT_MARKER + r"(?P<v>(?:[^\"\\]|\\.)+)\"",
    ),
)


def _compile_builtin() -> tuple[re.Pattern[str], tuple[str, ...]]:
    parts = []
    for kind, pattern in _BUILTIN:
        inner = pattern.replace("(?P<v>", f"(?P<v_{kind}>")
        parts.append(f"(?P<k_{kind}>{inner})")
    return re.compile("|".join(parts)), tuple(kind for kind, _ in _BUILTIN)


_BUILTIN_RE, _BUILTIN_KINDS = _compile_builtin()


def marker(kind: str) -> str:
    """The text that replaces a secret of ``kind``."""
    return _MARKER.format(kind)


def looks_secret_name(name: str) -> bool:
    """True if a variable or JSON field called ``name`` should hold a secret."""
    return _SECRET_NAME_RE.fullmatch(name) is not None


def _replace_builtin(match: re.Match[str]) -> str:
    for kind in _BUILTIN_KINDS:
        if match.group(f"k_{kind}") is None:
            continue
        start, end = match.span(f"v_{kind}") if f"v_{kind}" in match.re.groupindex else (-1, -1)
        if start < 0:
            return marker(kind)
        text, offset = match.group(0), match.start()
        return text[: start - offset] + marker(kind) + text[end - offset :]
    return match.group(0)  # unreachable: some alternative matched


def _compile_custom(patterns: Iterable[str]) -> tuple[re.Pattern[str], ...]:
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern))
        except re.error as exc:
            raise RedactionError(
                f"redact_patterns: {pattern!r} is not a valid regex: {exc}"
            ) from exc
    return tuple(compiled)


def _replace_custom(match: re.Match[str]) -> str:
    # With groups, only group 1 is the secret (so ``key=(\w+)`` keeps ``key=``).
    if match.re.groups == 0 or match.start(1) < 0:
        return marker("custom")
    text, offset = match.group(0), match.start()
    return text[: match.start(1) - offset] + marker("custom") + text[match.end(1) - offset :]


class Redactor:
    """Replaces secrets in text, JSON values and events. Thread-safe.

    ``patterns`` are user regexes (config ``redact_patterns``); an invalid one
    raises :class:`RedactionError` here rather than at the first write.
    """

    def __init__(self, patterns: Iterable[str] = (), *, secrets: Iterable[str] = ()) -> None:
        self._custom = _compile_custom(patterns)
        self._lock = threading.Lock()
        self._secrets: frozenset[str] = frozenset()
        self._secrets_re: re.Pattern[str] | None = None
        for value in secrets:
            self.add_secret(value)

    @classmethod
    def from_config(cls, patterns: Iterable[str] | None = None) -> Redactor:
        """A redactor with config ``redact_patterns`` (loaded when not given)."""
        if patterns is None:
            from chorus.config import load_config

            patterns = load_config().redact_patterns
        return cls(patterns)

    def add_secret(self, value: str) -> None:
        """Redact every later occurrence of ``value`` (kind ``secret``). Idempotent.

        Its JSON-escaped form is covered too, so it is also caught inside raw
        JSON text. Raises :class:`RedactionError` for values shorter than
        :data:`MIN_SECRET_CHARS`.
        """
        if len(value) < MIN_SECRET_CHARS:
            raise RedactionError(f"a secret must have at least {MIN_SECRET_CHARS} characters")
        variants = {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
        with self._lock:
            merged = self._secrets | variants
            # Longest first, so a secret that contains another is replaced whole.
            alternation = "|".join(re.escape(s) for s in sorted(merged, key=len, reverse=True))
            # Publish the pattern before the set: a reader never sees a set it can't match.
            self._secrets_re = re.compile(alternation)
            self._secrets = merged

    def redact_text(self, text: str) -> str:
        """``text`` with every secret replaced; the same object when nothing matched."""
        secrets_re = self._secrets_re
        out = text
        if secrets_re is not None:
            out = secrets_re.sub(marker("secret"), out)
        for pattern in self._custom:
            out = pattern.sub(_replace_custom, out)
        out = _BUILTIN_RE.sub(_replace_builtin, out)
        return text if out == text else out

    def redact_json(self, value: Any) -> Any:
        """Walk a decoded JSON value and redact every string (keys included).

        A string under a key that looks secret (``looks_secret_name``) is
        replaced whole. Returns ``value`` itself when nothing changed, so
        callers can skip re-validation cheaply (``result is value``).
        """
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, dict):
            return self._redact_dict(value)
        if isinstance(value, list):
            new = [self.redact_json(item) for item in value]
            return value if all(a is b for a, b in zip(new, value, strict=True)) else new
        return value

    def _redact_dict(self, value: dict[Any, Any]) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        changed = False
        for key, item in value.items():
            new_key = self.redact_text(key) if isinstance(key, str) else key
            if isinstance(key, str) and isinstance(item, str) and item and looks_secret_name(key):
                new_item: Any = item if item.startswith("[REDACTED:") else marker("secret_field")
            else:
                new_item = self.redact_json(item)
            changed = changed or new_key is not key or new_item is not item
            out[new_key] = new_item
        return out if changed else value

    def redact_line(self, line: str) -> str:
        """Redact one raw line: structurally when it is a JSON object or array
        (so it stays valid JSON), as text otherwise. Unchanged lines are returned
        byte for byte, not re-serialized."""
        stripped = line.lstrip()
        if stripped[:1] in ("{", "["):
            try:
                decoded = json.loads(line)
            except ValueError:
                return self.redact_text(line)
            redacted = self.redact_json(decoded)
            return (
                line
                if redacted is decoded
                else json.dumps(redacted, ensure_ascii=False, separators=(",", ":"))
            )
        return self.redact_text(line)

    def redact_event(self, event: Event) -> Event:
        """The event with every string field redacted (``event`` itself if clean)."""
        data = event.model_dump(mode="json")
        redacted = self.redact_json(data)
        return event if redacted is data else event_from_dict(redacted)

    def logging_filter(self) -> logging.Filter:
        """A :class:`logging.Filter` that redacts each record's message in place,
        so handlers never see a secret. Attach it to handlers (not loggers) to
        cover records from child loggers too."""
        return _RedactingFilter(self)


class _RedactingFilter(logging.Filter):
    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self._redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = self._redactor.redact_text(message)
        if redacted is not message:
            record.msg, record.args = redacted, None
        return True
