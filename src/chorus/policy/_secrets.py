"""Secrets: encrypted at rest, handed to bodies as environment variables only when
the policy says so, and never written anywhere in the clear.

``CHORUS_HOME/secrets/vault.json`` holds one AES-256-GCM ciphertext per secret
(a fresh 96-bit nonce each time; the secret's name is the associated data, so a
ciphertext moved to another name fails to decrypt). The 256-bit master key
lives in the OS keyring when a real backend exists (service ``chorus``, user =
the CHORUS_HOME path), else in ``CHORUS_HOME/secrets/master.key`` with mode
0600; a key file readable by anyone else is refused, as ssh refuses such keys.
``CHORUS_KEYRING=file`` forces the key file.

Every value is registered with the redactor (:meth:`SecretStore.register_with`)
so events, logs and the audit log replace it; :func:`scan_for_leaks` proves it
by searching every file under CHORUS_HOME for every value.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import re
import stat
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from chorus.config import chorus_home
from chorus.policy._errors import (
    InvalidSecretError,
    KeyFileModeError,
    SecretNotFoundError,
    SecretStoreError,
)
from chorus.policy._model import Policy
from chorus.policy._redact import MIN_SECRET_CHARS, RedactorLike

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_KEY_BYTES = 32
_NONCE_BYTES = 12
_SERVICE = "chorus"
MAX_SECRET_BYTES = 64 * 1024


class KeySource(Protocol):
    """Where the master key lives. ``load_or_create`` is idempotent."""

    description: str

    def load_or_create(self) -> bytes: ...


class FileKey:
    """A 32-byte key in a file created with mode 0600 (its folder 0700)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.description = f"key file {path}"

    def load_or_create(self) -> bytes:
        try:
            return self._load()
        except FileNotFoundError:
            pass
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return self._load()  # another process created it first
        with os.fdopen(fd, "wb") as handle:
            handle.write(os.urandom(_KEY_BYTES))
            handle.flush()
            os.fsync(handle.fileno())
        return self._load()

    def _load(self) -> bytes:
        info = os.stat(self.path)
        if stat.S_IMODE(info.st_mode) & 0o077:
            raise KeyFileModeError(str(self.path), stat.S_IMODE(info.st_mode))
        key = self.path.read_bytes()
        if len(key) != _KEY_BYTES:
            raise SecretStoreError(f"{self.path}: not a {_KEY_BYTES}-byte key")
        return key


class KeyringKey:
    """The key, base64-encoded, in the OS keyring."""

    def __init__(self, username: str, service: str = _SERVICE) -> None:
        self.username = username
        self.service = service
        self.description = f"OS keyring ({service} / {username})"

    def load_or_create(self) -> bytes:
        import keyring
        from keyring.errors import KeyringError

        try:
            stored = keyring.get_password(self.service, self.username)
            if stored is None:
                stored = base64.b64encode(os.urandom(_KEY_BYTES)).decode()
                keyring.set_password(self.service, self.username, stored)
        except KeyringError as exc:
            raise SecretStoreError(f"keyring: {exc}") from exc
        key = base64.b64decode(stored)
        if len(key) != _KEY_BYTES:
            raise SecretStoreError(f"keyring entry {self.service}/{self.username} is not a key")
        return key


def keyring_usable() -> bool:
    """True when ``keyring`` has a real backend (not the fail/null ones) and
    ``CHORUS_KEYRING`` does not force the key file."""
    if os.environ.get("CHORUS_KEYRING", "").lower() in ("0", "no", "off", "false", "file"):
        return False
    try:
        import keyring

        backend = keyring.get_keyring()
    except Exception:  # keyring's backend discovery can fail in many ways; all mean "no"
        return False
    module = type(backend).__module__
    if "fail" in module or "null" in module:
        return False
    return float(getattr(backend, "priority", 0)) > 0


def default_key_source(home: Path | None = None) -> KeySource:
    """The keyring when usable, else ``<home>/secrets/master.key``."""
    home = home or chorus_home()
    if keyring_usable():
        return KeyringKey(str(home.resolve()))
    return FileKey(home / "secrets" / "master.key")


@dataclass(frozen=True, slots=True)
class SecretInfo:
    """A stored secret's name and dates (never its value)."""

    name: str
    created: float
    updated: float


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class SecretStore:
    """Set, list, remove and decrypt secrets under ``home`` (default CHORUS_HOME).

    The key source is resolved lazily, so listing names never touches the key.
    """

    def __init__(
        self,
        home: Path | None = None,
        *,
        key_source: KeySource | None = None,
        redactor: RedactorLike | None = None,
    ) -> None:
        self.home = home or chorus_home()
        self.path = self.home / "secrets" / "vault.json"
        self._key_source = key_source
        self._key: bytes | None = None
        self.redactor = redactor

    @property
    def key_source(self) -> KeySource:
        if self._key_source is None:
            self._key_source = default_key_source(self.home)
        return self._key_source

    def _aead(self) -> AESGCM:
        if self._key is None:
            self._key = self.key_source.load_or_create()
        return AESGCM(self._key)

    # -- file ----------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path.with_name(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {"version": 1, "cipher": "AES-256-GCM", "secrets": {}}
        except ValueError as exc:
            raise SecretStoreError(f"{self.path}: corrupt: {exc}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("secrets"), dict):
            raise SecretStoreError(f"{self.path}: not a Chorus secret store")
        return data

    def _write(self, data: dict[str, Any]) -> None:
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)

    # -- operations ------------------------------------------------------------------

    def set(self, name: str, value: str) -> SecretInfo:
        """Encrypt and store ``value`` under ``name`` (replacing any old value)."""
        _check(name, value)
        aead = self._aead()
        nonce = os.urandom(_NONCE_BYTES)
        ciphertext = aead.encrypt(nonce, value.encode(), _aad(name))
        with self._locked():
            data = self._read()
            now = time.time()
            created = data["secrets"].get(name, {}).get("created", now)
            data["secrets"][name] = {
                "nonce": _b64(nonce),
                "ciphertext": _b64(ciphertext),
                "created": created,
                "updated": now,
            }
            self._write(data)
        if self.redactor is not None:
            self.redactor.add_secret(value)
        return SecretInfo(name, created, now)

    def get(self, name: str) -> str:
        """The value of ``name``; :class:`SecretNotFoundError` if there is none."""
        entry = self._read()["secrets"].get(name)
        if entry is None:
            raise SecretNotFoundError(f"no secret named {name!r}")
        try:
            nonce, ciphertext = (
                base64.b64decode(entry["nonce"]),
                base64.b64decode(entry["ciphertext"]),
            )
            return self._aead().decrypt(nonce, ciphertext, _aad(name)).decode()
        except (InvalidTag, KeyError, ValueError) as exc:
            raise SecretStoreError(
                f"cannot decrypt secret {name!r}: wrong master key or the store was altered"
            ) from exc

    def entries(self) -> list[SecretInfo]:
        """Stored secrets by name (no values, no key needed)."""
        secrets = self._read()["secrets"]
        return [
            SecretInfo(n, float(e["created"]), float(e["updated"]))
            for n, e in sorted(secrets.items())
        ]

    def rm(self, name: str) -> None:
        """Remove ``name``; :class:`SecretNotFoundError` if there is none."""
        with self._locked():
            data = self._read()
            if data["secrets"].pop(name, None) is None:
                raise SecretNotFoundError(f"no secret named {name!r}")
            self._write(data)

    def items(self) -> dict[str, str]:
        """Every secret decrypted, by name."""
        return {info.name: self.get(info.name) for info in self.entries()}

    def values(self) -> list[str]:
        """Every secret value (for the policy engine's literal-secret check)."""
        return list(self.items().values())

    def register_with(self, redactor: RedactorLike) -> int:
        """Register every value with ``redactor``; returns how many. Call at startup."""
        values = self.values()
        for value in values:
            redactor.add_secret(value)
        return len(values)

    def env_for(self, body: str, policy: Policy) -> dict[str, str]:
        """The secrets ``policy`` lets ``body`` have, as environment variables.

        Only names the policy lists (``secrets.env_allowed`` and
        ``secrets.body_env[body]``) and that exist; nothing else ever leaves the store.
        """
        stored = {info.name for info in self.entries()}
        return {n: self.get(n) for n in policy.secrets.allowed_for(body) if n in stored}


def _aad(name: str) -> bytes:
    return f"chorus-secret:{name}".encode()


def _check(name: str, value: str) -> None:
    if not _NAME.match(name):
        raise InvalidSecretError(
            f"{name!r} is not a secret name (letters, digits and _; not starting with a digit)"
        )
    if len(value) < MIN_SECRET_CHARS:
        raise InvalidSecretError(
            f"a secret needs at least {MIN_SECRET_CHARS} characters (shorter ones cannot be"
            " redacted)"
        )
    if len(value.encode()) > MAX_SECRET_BYTES or "\x00" in value:
        raise InvalidSecretError("a secret must be text without NUL, at most 64 KiB")


# -- leak checking ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Leak:
    """A secret found in the clear: which file, which secret, in what form."""

    path: Path
    name: str
    form: str


def _needles(value: str) -> dict[str, bytes]:
    forms = {
        "plain": value.encode(),
        "json": json.dumps(value)[1:-1].encode(),
        "json-utf8": json.dumps(value, ensure_ascii=False)[1:-1].encode(),
        "base64": base64.b64encode(value.encode()),
    }
    unique: dict[str, bytes] = {}
    for form, needle in forms.items():
        if len(needle) >= MIN_SECRET_CHARS and needle not in unique.values():
            unique[form] = needle  # one report per distinct encoding
    return unique


def _files(root: Path) -> Iterator[Path]:
    for folder, _dirs, names in os.walk(root, followlinks=False):
        for name in names:
            path = Path(folder) / name
            if path.is_file() and not path.is_symlink():
                yield path


def _scan_file(
    path: Path, needles: Mapping[tuple[str, str], bytes], chunk: int
) -> set[tuple[str, str]]:
    """Keys of the needles found in ``path``; chunks overlap so none is split unseen."""
    found: set[tuple[str, str]] = set()
    overlap = max((len(n) for n in needles.values()), default=1) - 1
    tail = b""
    with path.open("rb") as handle:
        while block := handle.read(chunk):
            window = tail + block
            found.update(k for k, n in needles.items() if k not in found and n in window)
            tail = window[-overlap:] if overlap else b""
    return found


def scan_for_leaks(
    secrets: Mapping[str, str], root: Path | None = None, *, chunk: int = 1 << 20
) -> list[Leak]:
    """Search every regular file under ``root`` (default CHORUS_HOME) for every value
    in ``secrets`` (name -> value), plain, JSON-escaped and base64. Symlinks are not
    followed. Returns one :class:`Leak` per file, secret and form."""
    root = root or chorus_home()
    needles = {(name, form): n for name, v in secrets.items() for form, n in _needles(v).items()}
    if not needles or not root.exists():
        return []
    leaks: list[Leak] = []
    for path in _files(root):
        try:
            hits = _scan_file(path, needles, chunk)
        except OSError:
            continue  # vanished or unreadable mid-walk; nothing readable leaked from it
        leaks.extend(Leak(path, name, form) for name, form in sorted(hits))
    return leaks
