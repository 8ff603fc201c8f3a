"""What a word-by-word check of a command line misses (the escapes).

* **Directories**: ``cd .. && sed -i ... home/policy.toml`` writes outside the
  roots although no word says so. :func:`segment_dirs` follows ``cd``,
  ``pushd``, ``popd`` (scoped to subshells and scripts) and per-command
  ``git -C``, ``make -C``, ``env -C`` ..., so each relative path is resolved
  where that command really runs; a target known only at run time is ``None``.
* **Globs**: ``cat .en?`` reads ``.env``. :func:`glob_denied` expands a glob
  word on disk and also compares it with the denied patterns themselves (the
  file may not exist yet).
* **Raw sockets and inline code**: ``/dev/tcp`` redirects, ``python3 -c`` code
  that downloads (and runs) what it fetched.
* **Local addresses**: loopback, link-local and cloud metadata addresses, and
  the gateway's own port, which a tool could use to reach Chorus itself.
"""

from __future__ import annotations

import fnmatch
import glob
import ipaddress
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from urllib.parse import urlsplit

from chorus.policy._paths import PathContext, matches_pattern
from chorus.policy._shell import (
    FETCHERS,
    URL_PATTERN,
    ParsedCommand,
    Segment,
    ShellFinding,
    executes_stdin,
)

# -- directories ------------------------------------------------------------------------

#: Options that run one program in another folder: program -> option names.
_DIR_OPTIONS: dict[str, tuple[str, ...]] = {
    "git": ("-C",),
    "make": ("-C", "--directory"),
    "env": ("-C", "--chdir"),
    "sudo": ("-D", "--chdir"),
    "tar": ("-C", "--directory"),
    "unshare": ("-w", "--wd"),
    "nsenter": ("-w", "--wd"),
    "systemd-run": ("--working-directory",),
}
_DIR_CHANGES = frozenset({"cd", "pushd", "popd", "chdir"})
_DYNAMIC_CHARS = frozenset("$`*?[")


def segment_dirs(parsed: ParsedCommand, cwd: str, home: str) -> list[str | None]:
    """The folder each segment runs in (index-aligned with ``parsed.segments``);
    ``None`` when it is only known at run time (``cd "$X"``, ``popd`` of nothing)."""
    dirs: list[str | None] = []
    state: dict[int | None, str | None] = {None: cwd}
    stacks: dict[int | None, list[str | None]] = {}
    for index, seg in enumerate(parsed.segments):
        here = state.get(seg.parent, cwd)
        dirs.append(_own_dir(seg, here, home))
        state[index] = dirs[-1]  # what it runs ($(...), -c scripts, a subshell) starts here
        if seg.name in _DIR_CHANGES and seg.argv == seg.words:
            state[seg.parent] = _changed(seg, here, home, stacks.setdefault(seg.parent, []))
    return dirs


def _join(base: str | None, target: str, home: str) -> str | None:
    if base is None or not target or _DYNAMIC_CHARS.intersection(target):
        return None
    if target == "~" or target.startswith("~/"):
        return os.path.normpath(home + target[1:])
    if target.startswith("~"):
        return None  # ~user
    return os.path.normpath(os.path.join(base, target))


def _changed(seg: Segment, here: str | None, home: str, stack: list[str | None]) -> str | None:
    args = [a for a in seg.argv[1:] if a not in ("-L", "-P", "-e", "-@", "--")]
    if seg.name == "popd":
        return stack.pop() if stack and not args else None
    if seg.name == "pushd":
        stack.append(here)
        return _join(here, args[0], home) if args and args[0][:1] not in "+-" else None
    if not args:
        return home
    return None if args[0] == "-" else _join(here, args[0], home)


def _own_dir(seg: Segment, here: str | None, home: str) -> str | None:
    """``here`` moved by the segment's own ``-C DIR`` options (each one relative to the last)."""
    for view in seg.views or (seg.argv,):
        options = _DIR_OPTIONS.get(os.path.basename(view[0])) if view else None
        for target in _option_values(view, options or ()):
            here = _join(here, target, home)
    return here


def _option_values(words: Sequence[str], names: Iterable[str]) -> list[str]:
    names = tuple(names)
    found: list[str] = []
    for k, word in enumerate(words[1:], start=1):
        for name in names:
            if word == name and k + 1 < len(words):
                found.append(words[k + 1])
            elif name.startswith("--") and word.startswith(name + "="):
                found.append(word.split("=", 1)[1])
            elif not name.startswith("--") and word.startswith(name) and len(word) > len(name):
                found.append(word[len(name) :])
    return found


def unknown_dir_segments(parsed: ParsedCommand, dirs: Sequence[str | None]) -> list[Segment]:
    """Commands that run in a folder Chorus cannot know before they run."""
    return [
        seg
        for seg, folder in zip(parsed.segments, dirs, strict=True)
        if folder is None and not seg.group and seg.argv and seg.name not in _DIR_CHANGES
    ]


def in_dir(raw: str, folder: str | None, cwd: str) -> str | None:
    """``raw`` as the segment running in ``folder`` means it (``None``: cannot tell)."""
    if os.path.isabs(raw) or raw.startswith("~"):
        return raw
    if folder is None:
        return None
    return raw if folder == cwd else os.path.join(folder, raw)


# -- globs --------------------------------------------------------------------------------

_GLOB = frozenset("*?[")
_MAX_EXPANSION = 500


def is_glob(word: str) -> bool:
    return bool(_GLOB.intersection(word))


def glob_denied(word: str, ctx: PathContext, denied: Sequence[str]) -> str | None:
    """The denied pattern a glob ``word`` can reach (on disk or by its pattern), else None."""
    expanded = ctx.expand(word)
    if not os.path.isabs(expanded):
        expanded = os.path.join(ctx.cwd, expanded)
    for k, match in enumerate(glob.iglob(expanded)):
        if k >= _MAX_EXPANSION:
            break
        hit = next(
            (p for p in denied if matches_pattern(Path(os.path.normpath(match)), p, ctx)), None
        )
        if hit is not None:
            return hit
    return next((p for p in denied if _could_match(expanded, ctx.expand(p))), None)


def _could_match(word: str, pattern: str) -> bool:
    """True if some path the glob ``word`` names is, or is inside, a ``pattern`` path."""
    word, pattern = word.casefold(), pattern.casefold()
    if not _GLOB.intersection(pattern):
        parts = word.split("/")
        return any(
            fnmatch.fnmatchcase(pattern, "/".join(parts[:k])) for k in range(2, len(parts) + 1)
        )
    base_word = os.path.basename(word)
    if not base_word.strip("*?[]"):
        return False  # `*` alone: only what is on disk counts
    base_pattern = os.path.basename(pattern)
    samples = {base_pattern.replace("*", ""), base_pattern.replace("*", "x")}
    return any(_glob_hits(sample, base_word) for sample in samples if sample)


def _glob_hits(name: str, word: str) -> bool:
    if name.startswith(".") and word[:1] in _GLOB:
        return False  # the shell's wildcards never match a leading dot
    return fnmatch.fnmatchcase(name, word)


# -- raw sockets and inline code ------------------------------------------------------------

_DEV_SOCKET = re.compile(r"/dev/(tcp|udp)/")
_INLINE_FLAGS: dict[str, tuple[str, ...]] = {
    "python": ("-c",),
    "perl": ("-e", "-E"),
    "ruby": ("-e",),
    "node": ("-e", "--eval", "-p", "--print"),
    "nodejs": ("-e", "--eval", "-p", "--print"),
    "deno": ("eval",),
    "bun": ("-e", "--eval"),
    "php": ("-r",),
    "lua": ("-e",),
    "osascript": ("-e",),
}
_DOWNLOADS = re.compile(
    r"urlopen|urllib|requests\.(get|post)|http\.client|httpx|socket\.|LWP|HTTP::Tiny|"
    r"Net::HTTP|open-uri|URI\.open|\bfetch\(|https?\.get|file_get_contents\(['\"]https?:"
)
_RUNS_CODE = re.compile(
    r"\bexec\b|\beval\b|subprocess|os\.system|os\.popen|\bsystem\(|child_process|spawn|"
    r"`|\bpopen\b|runpy|_{2}import_{2}|compile\("
)


def dev_socket_findings(parsed: ParsedCommand) -> list[ShellFinding]:
    """``bash -i >& /dev/tcp/host/port``: bash opens a network socket itself."""
    findings: list[ShellFinding] = []
    for seg in parsed.segments:
        words = [r.target for r in seg.redirects] + list(seg.words)
        if any(_DEV_SOCKET.search(w) for w in words):
            reason = f"`{seg.text}` opens a raw network socket through /dev/tcp (denied)"
            findings.append(ShellFinding("shell.dev_tcp", reason, seg.text))
    return findings


def inline_code(seg: Segment) -> str | None:
    """The code of ``python3 -c CODE``, ``perl -e CODE``, ``node -e CODE`` ..., else None."""
    family = re.sub(r"[\d.]+$", "", seg.name)
    flags = _INLINE_FLAGS.get(family)
    if not flags:
        return None
    letters = {f[1] for f in flags if len(f) == 2 and f[0] == "-"}
    for k, arg in enumerate(seg.argv[1:-1], start=1):
        cluster = arg.startswith("-") and not arg.startswith("--") and arg[-1:] in letters
        if arg in flags or cluster:
            return seg.argv[k + 1]
    return None


def downloads(seg: Segment) -> bool:
    """A fetcher, or inline code that fetches from the network."""
    code = inline_code(seg)
    return seg.name in FETCHERS or (code is not None and bool(_DOWNLOADS.search(code)))


def inline_download_findings(parsed: ParsedCommand) -> list[ShellFinding]:
    """Inline code that downloads and runs code, or whose download is piped into a shell."""
    findings: list[ShellFinding] = []
    for seg in parsed.commands():
        code = inline_code(seg)
        if code is not None and _DOWNLOADS.search(code) and _RUNS_CODE.search(code):
            findings.append(_finding(seg, "downloads code and runs it"))
    for pipeline_id in sorted({s.pipeline for s in parsed.segments}):
        members = [s for _, s in parsed.pipeline(pipeline_id)]
        for k, seg in enumerate(members):
            piped = any(executes_stdin(later) for later in members[k + 1 :])
            if piped and seg.name not in FETCHERS and downloads(seg):
                findings.append(_finding(seg, "downloads code that the pipeline executes"))
    return findings


def _finding(seg: Segment, what: str) -> ShellFinding:
    reason = f"`{seg.text}` {what} (download-and-execute is denied)"
    return ShellFinding("shell.download_exec", reason, seg.text)


# -- local addresses ------------------------------------------------------------------------

_METADATA_HOSTS = frozenset({"metadata.google.internal", "metadata", "instance-data"})
_LOCAL_NETWORKS = tuple(
    ipaddress.ip_network(n)
    for n in (
        "127.0.0.0/8",
        "169.254.0.0/16",
        "::1/128",
        "fe80::/10",
        "0.0.0.0/32",
        "100.100.100.200/32",
        "fd00:ec2::254/128",
    )
)
_SOCKET_PROGRAMS = frozenset({"nc", "ncat", "netcat", "socat", "telnet", "ssh", "scp", "sftp"})


def local_address(host: str, port: int | None, blocked_ports: Iterable[int]) -> str | None:
    """Why ``host``:``port`` is off limits to tools (loopback, link-local, metadata,
    Chorus's own gateway port), else None."""
    host = host.strip("[]").lower().rstrip(".")
    if port is not None and port in set(blocked_ports):
        return f"port {port} is the Chorus gateway's"
    if host == "localhost" or host.endswith(".localhost") or host in _METADATA_HOSTS:
        return f"{host} is a local or metadata address"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if any(address in net for net in _LOCAL_NETWORKS if net.version == address.version):
        return f"{host} is a loopback, link-local or cloud metadata address"
    return None


def host_and_port(word: str) -> tuple[str, int | None] | None:
    """The host (and port) a word names: a URL, or ``host:port`` / ``user@host``."""
    url = word if URL_PATTERN.match(word) else "tcp://" + word.split("@")[-1]
    try:
        parts = urlsplit(url)
        return (parts.hostname or "", parts.port) if parts.hostname else None
    except ValueError:
        return None


def socket_targets(parsed: ParsedCommand) -> list[tuple[Segment, str, int | None]]:
    """Hosts that network programs (``curl``, ``nc``, ``ssh`` ...) are pointed at."""
    found: list[tuple[Segment, str, int | None]] = []
    for seg in parsed.commands():
        if seg.name not in FETCHERS and seg.name not in _SOCKET_PROGRAMS:
            continue
        words = [a for a in seg.argv[1:] if not a.startswith("-")]
        port = _port_word(seg, words)
        for word in words:
            target = host_and_port(word)
            if target is not None and target[0]:
                found.append((seg, target[0], target[1] if target[1] is not None else port))
    return found


def _port_word(seg: Segment, words: list[str]) -> int | None:
    """``nc HOST PORT``: a bare number after the host."""
    if seg.name not in ("nc", "ncat", "netcat", "telnet"):
        return None
    return next((int(w) for w in words if w.isdigit() and int(w) < 65536), None)
