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

_STEM_TRIGGERS = ("key", "secret", "token", "passw", "passphrase", "credential")
_STEM_VALUE = r"\\\"(?:[^\"\\]|\\[^\"])*\\\"|\"[^\"\\\n]+\"|'[^'\n]+'|[^\s\"'\\&;,]+"

# (kind, triggers, pattern). A rule runs only when one of its triggers (lowercase
# substrings) occurs in the text, so clean text costs a few ``in`` checks, not a
# regex scan per rule. A pattern may have a group ``v``: then only that part is
# replaced and the context (``API_KEY=``, ``Bearer ``, ``user:``) stays readable.
# Rules run in this order, most specific first; a marker is never re-redacted.
_RULES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (
        "private_key",
        ("private key-----",),
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(?:[\s\S]*?-----END[A-Z0-9 ]*PRIVATE KEY-----"
        r"|[A-Za-z0-9+/=\s\\]*)",
    ),
    (
        "url_password",
        ("://",),
        r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@\"'\\<>]+:" + _NOT_MARKER + r"(?P<v>[^\s@/\"'\\<>]+)@",
    ),
    ("anthropic_key", ("sk-ant-",), r"\bsk-ant-[A-Za-z0-9_-]{16,}"),
    (
        "openai_key",
        ("sk-",),
        r"\bsk-(?:proj-|svcacct-|admin-)?(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{20,}",
    ),
    (
        "stripe_key",
        ("sk_live_", "sk_test_", "rk_live_", "rk_test_"),
        r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}",
    ),
    ("google_api_key", ("aiza",), r"\bAIza[0-9A-Za-z_-]{30,}"),
    ("google_oauth_token", ("ya29.",), r"\bya29\.[0-9A-Za-z_-]{20,}"),
    (
        "github_token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})",
    ),
    ("gitlab_token", ("glpat-",), r"\bglpat-[A-Za-z0-9_-]{20,}"),
    ("npm_token", ("npm_",), r"\bnpm_[A-Za-z0-9]{36}\b"),
    (
        "aws_access_key",
        ("akia", "asia", "abia", "acca", "agpa", "aida", "aroa", "anpa", "aipa"),
        r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|AIPA)[A-Z0-9]{16}\b",
    ),
    (
        "aws_secret_key",
        ("aws",),
        r"(?i:aws)[A-Za-z0-9_.-]{0,30}?(?i:secret)[A-Za-z0-9_.-]{0,30}?[\"']?\s*[:=]\s*[\"']?"
        r"(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
    ),
    ("slack_token", ("xox",), r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    (
        "slack_webhook",
        ("hooks.slack.com",),
        r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}",
    ),
    ("huggingface_token", ("hf_",), r"\bhf_[A-Za-z0-9]{30,}"),
    ("jwt", ("eyj",), r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
    (
        "bearer_token",
        ("bearer",),
        r"\b(?i:bearer)\s+" + _NOT_MARKER + r"(?P<v>[A-Za-z0-9._~+/-]{16,}=*)",
    ),
    (
        "basic_auth",
        ("authorization",),
        r"(?i:authorization)[\"']?\s*:\s*[\"']?(?i:basic)\s+"
        + _NOT_MARKER
        + r"(?P<v>[A-Za-z0-9+/=]{8,})",
    ),
    (
        # NAME=value, NAME="value", NAME='value', and NAME=\"value\" as it looks
        # inside JSON text; the name (ending in a stem) stays, the value goes.
        "secret_assignment",
        _STEM_TRIGGERS,
        rf"(?i:{_SECRET_STEMS})[\"']?\s*=\s*" + _NOT_MARKER + rf"(?P<v>{_STEM_VALUE})",
    ),
    (
        # "name": "value" inside JSON text (e.g. an Unknown event's raw line).
        "secret_field",
        _STEM_TRIGGERS,
        rf"(?i:{_SECRET_STEMS})\"\s*:\s*\"" + _NOT_MARKER + r"(?P<v>(?:[^\"\\]|\\.)+)\"",
    ),
)


class _Rule:
    """One built-in pattern with its cheap pre-check."""

    __slots__ = ("kind", "pattern", "triggers")

    def __init__(self, kind: str, triggers: tuple[str, ...], pattern: str) -> None:
        self.kind = kind
        self.triggers = triggers
        self.pattern = re.compile(pattern)

    def apply(self, text: str, lowered: str) -> str:
        if not any(trigger in lowered for trigger in self.triggers):
            return text
        return self.pattern.sub(self._replace, text)

    def _replace(self, match: re.Match[str]) -> str:
        if "v" not in self.pattern.groupindex or match.start("v") < 0:
            return marker(self.kind)
        text, offset = match.group(0), match.start()
        start, end = match.start("v") - offset, match.end("v") - offset
        return text[:start] + marker(self.kind) + text[end:]


def _trie_pattern(words: Iterable[str]) -> str:
    """A regex matching any of ``words``, shaped as a trie (``a(?:ws|iza)``) so
    the engine rejects most positions on their first character."""
    trie: dict[str, Any] = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}
    return _trie_branch(trie)


def _trie_branch(node: dict[str, Any]) -> str:
    if "" in node:
        return ""  # a shorter word already ends here: longer ones add nothing
    alternatives = [re.escape(char) + _trie_branch(child) for char, child in sorted(node.items())]
    return alternatives[0] if len(alternatives) == 1 else f"(?:{'|'.join(alternatives)})"


_BUILTIN = tuple(_Rule(kind, triggers, pattern) for kind, triggers, pattern in _RULES)
#: Matches (in lowercased text) wherever some built-in rule could apply.
_ANY_TRIGGER = re.compile(_trie_pattern({t for rule in _BUILTIN for t in rule.triggers}))


def marker(kind: str) -> str:
    """The text that replaces a secret of ``kind``."""
    return _MARKER.format(kind)


def looks_secret_name(name: str) -> bool:
    """True if a variable or JSON field called ``name`` should hold a secret."""
    return _SECRET_NAME_RE.fullmatch(name) is not None


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

    def might_contain_secret(self, text: str) -> bool:
        """A cheap conservative pre-check: False means :meth:`redact_text` (and
        :meth:`redact_json` on the JSON that ``text`` serializes) would change nothing."""
        if self._custom:
            return True  # arbitrary user regexes have no cheap pre-check
        secrets_re = self._secrets_re
        if secrets_re is not None and secrets_re.search(text):
            return True
        return _ANY_TRIGGER.search(text.lower()) is not None

    def redact_text(self, text: str) -> str:
        """``text`` with every secret replaced; the same object when nothing matched."""
        out = text
        secrets_re = self._secrets_re
        if secrets_re is not None:
            out = secrets_re.sub(marker("secret"), out)
        for pattern in self._custom:
            out = pattern.sub(_replace_custom, out)
        lowered = out.lower()
        if _ANY_TRIGGER.search(lowered) is not None:
            for rule in _BUILTIN:
                out = rule.apply(out, lowered)
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
        if not self._event_might_contain_secret(event):
            return event
        data = event.model_dump(mode="json")
        redacted = self.redact_json(data)
        return event if redacted is data else event_from_dict(redacted)

    def _event_might_contain_secret(self, event: Event) -> bool:
        # Checking the string fields one by one scans only the content, not the
        # JSON keys and ids around it; anything nested gets the full check.
        for name in type(event).model_fields:
            value = getattr(event, name)
            if isinstance(value, str):
                if value and self.might_contain_secret(value):
                    return True
            elif value is not None and not isinstance(value, int | float):
                return self.might_contain_secret(event.model_dump_json())
        return False

    def logging_filter(self) -> logging.Filter:
        """A :class:`logging.Filter` that redacts each record's message and
        traceback in place, so handlers never see a secret. Attach it to handlers
        (not loggers) to cover records from child loggers too."""
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
        if record.exc_info and not record.exc_text:
            # Formatters reuse a cached exc_text, so the traceback is redacted too.
            text = logging.Formatter().formatException(record.exc_info)
            record.exc_text = self._redactor.redact_text(text)
        return True
