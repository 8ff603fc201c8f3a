"""Shell command lines split into the simple commands that will really run.

A tool call's command is one string, but the shell runs many programs from it:
``a | b``, ``a && b``, ``a; b``, ``(a)``, ``$(a)``, backticks, ``<(a)``,
``bash -c 'a'``, ``eval``, ``find -exec a``, ``xargs a``, heredocs fed to a
shell. :func:`parse_command` finds every one of them (a :class:`Segment`) so
that each can be checked on its own, and strips what only *launches* a
program (``VAR=x``, ``env``, ``sudo``, ``timeout``, ``nice`` ...) to find the
program itself while remembering the launchers (``wrappers``).

The parser is deliberately small (no bashlex): quoting, escapes, ANSI-C
``$'..'`` strings, redirections and heredocs are understood; anything it cannot
analyse raises :class:`ShellSyntaxError`, and the policy treats that as a risk,
never as "no commands found".
"""

from __future__ import annotations

import functools
import os
import re
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from urllib.parse import urlsplit

MAX_DEPTH = 8

#: Launchers that run their arguments as a command with raised privileges.
PRIVILEGE_WRAPPERS = frozenset({"sudo", "doas", "su", "pkexec", "runuser"})
#: Programs that execute code they are given (stdin, a file, a string).
# fmt: off
INTERPRETERS = frozenset({
    "sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "csh", "tcsh", "busybox",
    "python", "python2", "python3", "perl", "ruby", "node", "nodejs", "deno", "bun",
    "php", "pwsh", "powershell", "lua", "tclsh", "osascript", "source", ".", "eval",
})
# fmt: on
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "csh", "tcsh"})
#: Programs that download from the network.
FETCHERS = frozenset({"curl", "wget", "fetch", "aria2c", "http", "https", "xh", "lwp-request"})
#: Shell syntax and harmless builtins; not programs an allowlist must name.
# fmt: off
SYNTAX_WORDS = frozenset({
    "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}",
    "[[", "]]", "[", "test", "true", "false", ":", "cd", "export", "set", "shift",
    "local", "read", "return", "exit", "break", "continue", "wait", "unset",
})
# fmt: on
_LEADING_KEYWORDS = frozenset({"if", "then", "else", "elif", "do", "while", "until", "!", "{"})
_TRAILING_KEYWORDS = frozenset({"fi", "done", "}"})

_METACHARS = frozenset(" \t\n|&;()<>")
_REDIRECT_OPS = ("&>>", "&>", ">>", ">|", ">&", "<<<", "<<-", "<<", "<&", "<>", ">", "<")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=")


class ShellSyntaxError(ValueError):
    """The command line cannot be analysed (unbalanced quotes, unsupported syntax)."""


@dataclass(frozen=True, slots=True)
class Redirect:
    """``fd op target``, e.g. ``2>> log``; ``target`` is the word after quote removal."""

    op: str
    target: str
    fd: str | None = None

    @property
    def writes(self) -> bool:
        """True if the redirection creates or overwrites ``target`` as a file."""
        return self.op in (">", ">>", ">|", "&>", "&>>", "<>") and not self.target.isdigit()


@dataclass(frozen=True, slots=True)
class Segment:
    """One simple command that the shell would run.

    ``words`` is what was written (quotes removed; assignments and redirections
    taken out). ``argv`` is the program that really runs once ``wrappers``
    (``sudo``, ``env``, ``timeout`` ...) are stripped; ``views`` holds the words
    at each stripping step, outermost first. Segments of one pipeline share
    ``pipeline`` and are ordered by ``position``. ``parent`` is the index of the
    segment that runs this one (a substitution in its words, its ``-c`` script,
    ``find -exec``); ``group`` marks the placeholder of a ``( ... )`` subshell.
    """

    words: tuple[str, ...]
    argv: tuple[str, ...]
    wrappers: tuple[str, ...] = ()
    views: tuple[tuple[str, ...], ...] = ()
    assignments: tuple[str, ...] = ()
    redirects: tuple[Redirect, ...] = ()
    dynamic: bool = False
    pipeline: int = 0
    position: int = 0
    depth: int = 0
    parent: int | None = None
    origin: str = "line"
    group: bool = False

    @property
    def name(self) -> str:
        """Base name of the program (``/usr/bin/sudo`` -> ``sudo``), or ``""``."""
        return os.path.basename(self.argv[0]) if self.argv else ""

    @property
    def privileged(self) -> bool:
        """True if a wrapper such as ``sudo`` raises the program's privileges."""
        return any(os.path.basename(w) in PRIVILEGE_WRAPPERS for w in self.wrappers) or (
            self.name in PRIVILEGE_WRAPPERS
        )

    @property
    def text(self) -> str:
        """The segment as one line, for reasons shown to people and models."""
        return shlex.join(self.views[0] if self.views else self.words) or "(group)"


@dataclass(frozen=True, slots=True)
class ParsedCommand:
    """Every segment of a command line, nested ones included, in source order."""

    source: str
    segments: tuple[Segment, ...]

    def commands(self) -> Iterator[Segment]:
        """Segments that run something: a program, or a launcher alone (``sudo -i``).
        Subshell placeholders and bare redirections are skipped."""
        return (s for s in self.segments if not s.group and (s.argv or s.wrappers))

    def descendants(self, index: int) -> Iterator[Segment]:
        """Segments run, directly or not, by the segment at ``index``."""
        frontier = {index}
        for i, seg in enumerate(self.segments):
            if seg.parent in frontier:
                frontier.add(i)
                yield seg

    def pipeline(self, pipeline_id: int) -> list[tuple[int, Segment]]:
        """``(index, segment)`` pairs of one pipeline, by position."""
        members = [(i, s) for i, s in enumerate(self.segments) if s.pipeline == pipeline_id]
        return sorted(members, key=lambda pair: pair[1].position)


# -- lexing -------------------------------------------------------------------


@dataclass(slots=True)
class _Word:
    value: str = ""
    quoted: bool = False
    first_quote: int | None = None  # where in ``value`` quoting began (None: never)
    dynamic: bool = False
    subs: list[tuple[str, str]] = field(default_factory=list)  # (origin, source)


@dataclass(slots=True)
class _Heredoc:
    delimiter: str
    quoted: bool
    strip_tabs: bool
    owner: list[int]  # filled with the owning segment's index once it is built
    body: str | None = None


@dataclass(slots=True)
class _Token:
    kind: str  # "word" | "op" | "redir" | "eof"
    value: str = ""
    word: _Word | None = None
    fd: str | None = None
    heredoc: _Heredoc | None = None


_ANSI_ESCAPES = {
    **dict(zip("ntrabfv", "\n\t\r\a\b\f\v", strict=True)),
    **{"e": "\x1b", "E": "\x1b", "\\": "\\", "'": "'", '"': '"', "?": "?"},
}


class _Lexer:
    """Turns a command line into words, operators and redirections."""

    def __init__(self, source: str, start: int = 0) -> None:
        self.s = source
        self.i = start
        self.heredocs: list[_Heredoc] = []
        self._pending: list[_Heredoc] = []

    # - low level -

    def _peek(self, offset: int = 0) -> str:
        j = self.i + offset
        return self.s[j] if j < len(self.s) else ""

    def _skip_blanks(self) -> None:
        while self.i < len(self.s):
            if self.s[self.i] in " \t":
                self.i += 1
            elif self.s.startswith("\\\n", self.i):
                self.i += 2
            elif self.s[self.i] == "#":
                end = self.s.find("\n", self.i)
                self.i = len(self.s) if end < 0 else end
            else:
                return

    def next(self) -> _Token:
        """The next token; at a newline, heredoc bodies announced on the line are read."""
        self._skip_blanks()
        if self.i >= len(self.s):
            return _Token("eof")
        c = self.s[self.i]
        if c == "\n":
            self.i += 1
            self._read_heredocs()
            return _Token("op", "\n")
        if c in "<>" and self._peek(1) == "(":
            return self._process_substitution()
        if c in "<>" or self.s.startswith("&>", self.i):
            return self._redirect(None)
        for op in ("&&", "||", ";;", "|&", "|", ";", "&", "(", ")"):
            if self.s.startswith(op, self.i):
                self.i += len(op)
                return _Token("op", op)
        word = self._word()
        if word.value.isdigit() and not word.quoted and self._peek() in ("<", ">"):
            return self._redirect(word.value)
        return _Token("word", word.value, word)

    # - words -

    def _word(self) -> _Word:
        word = _Word()
        while self.i < len(self.s) and self.s[self.i] not in _METACHARS:
            c = self.s[self.i]
            if c == "\\":
                self._escape(word)
            elif c == "'":
                self._single_quoted(word)
            elif c == '"':
                self.i += 1
                self._double_quoted(word, terminator='"')
            elif c == "$":
                self._dollar(word, in_quotes=False)
            elif c == "`":
                self._backtick(word)
            else:
                if c in "*?[" or (c == "{" and _brace_expansion(self.s, self.i)):
                    word.dynamic = True  # globs and brace expansion change the words
                word.value += c
                self.i += 1
        return word

    def _escape(self, word: _Word) -> None:
        nxt = self._peek(1)
        self.i += 2
        if nxt == "\n":
            return  # line continuation
        _quote(word)
        word.value += nxt

    def _single_quoted(self, word: _Word) -> None:
        end = self.s.find("'", self.i + 1)
        if end < 0:
            raise ShellSyntaxError("unterminated single quote")
        _quote(word)
        word.value += self.s[self.i + 1 : end]
        self.i = end + 1

    def _double_quoted(self, word: _Word, terminator: str | None) -> None:
        """Read a ``"..."`` body (or a heredoc body when ``terminator`` is None)."""
        _quote(word)
        while self.i < len(self.s):
            c = self.s[self.i]
            if terminator is not None and c == terminator:
                self.i += 1
                return
            if c == "\\" and self._peek(1) in ('"', "\\", "$", "`", "\n"):
                word.value += "" if self._peek(1) == "\n" else self._peek(1)
                self.i += 2
            elif c == "$":
                self._dollar(word, in_quotes=True)
            elif c == "`":
                self._backtick(word)
            else:
                word.value += c
                self.i += 1
        if terminator is not None:
            raise ShellSyntaxError("unterminated double quote")

    def _dollar(self, word: _Word, *, in_quotes: bool) -> None:
        nxt = self._peek(1)
        if nxt == "'" and not in_quotes:
            self._ansi_c(word)
        elif self.s.startswith("$((", self.i):
            self._arithmetic(word)
        elif nxt == "(":
            inner_start = self.i + 2
            end = matching_paren(self.s, inner_start)
            word.subs.append(("substitution", self.s[inner_start:end]))
            word.value += self.s[self.i : end + 1]
            word.dynamic = True
            self.i = end + 1
        elif nxt == "{":
            self._braced_parameter(word)
        elif nxt and (nxt.isalnum() or nxt in "_@*#?$!-"):
            match = re.match(r"\$([A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-])", self.s[self.i :])
            token = match.group(0) if match else "$" + nxt
            word.value += token
            word.dynamic = True
            self.i += len(token)
        else:
            word.value += "$"
            self.i += 1

    def _ansi_c(self, word: _Word) -> None:
        """``$'...'``: decoded, so ``$'\\x73udo'`` is seen as ``sudo``."""
        j = self.i + 2
        out: list[str] = []
        while j < len(self.s) and self.s[j] != "'":
            if self.s[j] == "\\" and j + 1 < len(self.s):
                decoded, j = _ansi_escape(self.s, j + 1)
                out.append(decoded)
            else:
                out.append(self.s[j])
                j += 1
        if j >= len(self.s):
            raise ShellSyntaxError("unterminated $'...' string")
        _quote(word)
        word.value += "".join(out)
        self.i = j + 1

    def _arithmetic(self, word: _Word) -> None:
        end = self.s.find("))", self.i + 3)
        if end < 0:
            raise ShellSyntaxError("unterminated $((...))")
        body = self.s[self.i + 3 : end]
        if "$(" in body or "`" in body:
            raise ShellSyntaxError("command substitution inside arithmetic is not analysed")
        word.value += self.s[self.i : end + 2]
        word.dynamic = True
        self.i = end + 2

    def _braced_parameter(self, word: _Word) -> None:
        end = self.s.find("}", self.i + 2)
        if end < 0:
            raise ShellSyntaxError("unterminated ${...}")
        body = self.s[self.i + 2 : end]
        if "$(" in body or "`" in body:
            raise ShellSyntaxError("command substitution inside ${...} is not analysed")
        word.value += self.s[self.i : end + 1]
        word.dynamic = True
        self.i = end + 1

    def _backtick(self, word: _Word) -> None:
        j = self.i + 1
        out: list[str] = []
        while j < len(self.s) and self.s[j] != "`":
            if self.s[j] == "\\" and j + 1 < len(self.s) and self.s[j + 1] in "`\\$":
                out.append(self.s[j + 1])
                j += 2
            else:
                out.append(self.s[j])
                j += 1
        if j >= len(self.s):
            raise ShellSyntaxError("unterminated backtick")
        word.subs.append(("substitution", "".join(out)))
        word.value += self.s[self.i : j + 1]
        word.dynamic = True
        self.i = j + 1

    def _process_substitution(self) -> _Token:
        inner_start = self.i + 2
        end = matching_paren(self.s, inner_start)
        word = _Word(value="/dev/fd/63", dynamic=True)
        word.subs.append(("process_substitution", self.s[inner_start:end]))
        self.i = end + 1
        return _Token("word", word.value, word)

    # - redirections and heredocs -

    def _redirect(self, fd: str | None) -> _Token:
        op = next(o for o in _REDIRECT_OPS if self.s.startswith(o, self.i))
        self.i += len(op)
        self._skip_blanks()
        if self.i >= len(self.s) or self.s[self.i] in _METACHARS:
            raise ShellSyntaxError(f"redirection {op!r} without a target")
        target = self._word()
        heredoc = None
        if op in ("<<", "<<-"):
            heredoc = _Heredoc(target.value, target.quoted, op == "<<-", owner=[])
            self._pending.append(heredoc)
            self.heredocs.append(heredoc)
        return _Token("redir", op, target, fd=fd, heredoc=heredoc)

    def _read_heredocs(self) -> None:
        for doc in self._pending:
            lines: list[str] = []
            while self.i < len(self.s):
                end = self.s.find("\n", self.i)
                end = len(self.s) if end < 0 else end
                line = self.s[self.i : end]
                self.i = min(end + 1, len(self.s))
                if (line.lstrip("\t") if doc.strip_tabs else line) == doc.delimiter:
                    break
                lines.append(line)
            doc.body = "\n".join(lines)
        self._pending.clear()


def _quote(word: _Word) -> None:
    word.quoted = True
    if word.first_quote is None:
        word.first_quote = len(word.value)


def _is_assignment(word: _Word) -> bool:
    """``NAME=value`` where ``NAME=`` itself was not quoted (``'A=1'`` is a command)."""
    match = _ASSIGNMENT.match(word.value)
    return match is not None and (word.first_quote is None or match.end() <= word.first_quote)


def _brace_expansion(s: str, i: int) -> bool:
    end = s.find("}", i)
    return end > i and ("," in s[i:end] or ".." in s[i:end])


def _ansi_escape(s: str, j: int) -> tuple[str, int]:
    """Decode the escape starting at ``s[j]`` (after the backslash); return text, next index."""
    c = s[j]
    if c in _ANSI_ESCAPES:
        return _ANSI_ESCAPES[c], j + 1
    for prefix, width, base in (("x", 2, 16), ("u", 4, 16), ("U", 8, 16)):
        if c == prefix:
            digits = re.match(rf"[0-9a-fA-F]{{1,{width}}}", s[j + 1 :])
            if digits:
                return chr(int(digits.group(0), base)), j + 1 + len(digits.group(0))
    octal = re.match(r"[0-7]{1,3}", s[j:])
    if octal:
        return chr(int(octal.group(0), 8)), j + len(octal.group(0))
    return "\\" + c, j + 1


def matching_paren(source: str, start: int) -> int:
    """Index of the ``)`` closing a group whose body starts at ``start``.

    Found by lexing, so parentheses inside quotes, nested substitutions and
    heredocs do not count. Raises :class:`ShellSyntaxError` when unbalanced.
    """
    lexer = _Lexer(source, start)
    depth = 0
    while True:
        token = lexer.next()
        if token.kind == "eof":
            raise ShellSyntaxError("unbalanced parenthesis")
        if token.kind == "op" and token.value == "(":
            depth += 1
        elif token.kind == "op" and token.value == ")":
            if depth == 0:
                return lexer.i - 1
            depth -= 1


# -- unwrapping launchers ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Spec:
    """How a launcher's options look: which take a value, how many positionals
    precede the command, which options carry a shell script."""

    value_opts: frozenset[str] = frozenset()
    positionals: int = 0
    script_opts: frozenset[str] = frozenset()
    assignments: bool = False


def _spec(values: str = "", positionals: int = 0, scripts: str = "", assign: bool = False) -> _Spec:
    return _Spec(frozenset(values.split()), positionals, frozenset(scripts.split()), assign)


_WRAPPERS: dict[str, _Spec] = {
    "sudo": _spec("-u -g -C -D -h -p -r -t -T -U --user --group --chdir --host --prompt"),
    "doas": _spec("-u -C"),
    "pkexec": _spec("--user"),
    "runuser": _spec("-u -g -G -s --user --group --shell", scripts="-c --command"),
    "su": _spec("-s -g -G --shell --group", scripts="-c --command"),
    "env": _spec("-u -C --unset --chdir", scripts="-S --split-string", assign=True),
    "nice": _spec("-n --adjustment"),
    "ionice": _spec("-c -n -p --class --classdata"),
    "timeout": _spec("-s -k --signal --kill-after", positionals=1),
    "stdbuf": _spec("-i -o -e --input --output --error"),
    "time": _spec("-f -o --format --output"),
    "command": _spec(),
    "builtin": _spec(),
    "exec": _spec("-a"),
    "nohup": _spec(),
    "setsid": _spec(),
    "unbuffer": _spec(),
    "chrt": _spec(positionals=1),
    "taskset": _spec("-c --cpu-list", positionals=0),
    "flock": _spec("-w -E --timeout --conflict-exit-code", positionals=1, scripts="-c --command"),
    "chroot": _spec("--userspec --groups", positionals=1),
    "xargs": _spec("-I -n -P -d -L -s -a -E --max-args --max-procs --delimiter --arg-file"),
    "watch": _spec("-n -d --interval --differences"),
    # Launchers found in the wild running what the policy must see.
    "busybox": _spec(),
    "script": _spec(
        "-t -T -I -O -B -E -m --timing --log-in --log-out --log-io --echo", scripts="-c --command"
    ),
    "strace": _spec("-o -e -p -s -u -E -I -b -a -O -S -P -X"),
    "ltrace": _spec("-o -e -p -s -u -E -a -n -l -x -L -A -D"),
    "nsenter": _spec("-t -S -G -r -w --target --setuid --setgid --root --wd"),
    "unshare": _spec(
        "-S -G -R -w --setuid --setgid --root --wd --map-user --map-group --propagation --setgroups"
    ),
    "fakeroot": _spec("-l -s -i --lib --faked"),
    "systemd-run": _spec(
        "-u -p -E -M -H --unit --property --setenv --uid --gid --machine "
        "--host --description --slice --working-directory --on-calendar "
        "--on-active"
    ),
    "sg": _spec(positionals=1, scripts="-c"),
    "parallel": _spec("-j -S -a -d -I --jobs --sshlogin --arg-file --delimiter --colsep"),
    "firejail": _spec(),
    "proot": _spec("-r -b -w -q -R -S"),
    "xvfb-run": _spec("-n -s -f -e --server-num --server-args --auth-file --error-file"),
}
_NO_COMMAND_OK = frozenset({"sudo", "su", "doas", "runuser", "chroot", "xargs", "script"})
#: Launchers whose remaining words are one shell command line, not a program and arguments.
_TAIL_SCRIPTS = frozenset({"watch", "sg", "parallel"})
#: tmux subcommands whose remaining words are a shell command.
_TMUX_RUNS = frozenset(
    {
        "new",
        "new-session",
        "new-window",
        "neww",
        "split-window",
        "splitw",
        "respawn-pane",
        "respawnp",
        "respawn-window",
        "respawnw",
        "run-shell",
        "run",
        "display-popup",
        "popup",
    }
)
#: Programs that run what arrives on standard input (``echo cmd | at now``).
STDIN_RUNNERS = frozenset({"at", "batch"})


def _skip_options(words: Sequence[str], spec: _Spec) -> tuple[int, list[str]]:
    """Index of the wrapped command in ``words`` and any scripts given by option."""
    scripts: list[str] = []
    i = 1
    while i < len(words):
        w = words[i]
        if w == "--":
            i += 1
            break
        if w.startswith("--"):
            name, _, inline = w.partition("=")
            takes = name in spec.value_opts or name in spec.script_opts
            value = inline if inline or not takes else (words[i + 1] if i + 1 < len(words) else "")
            if name in spec.script_opts:
                scripts.append(value)
            i += 2 if takes and not inline else 1
        elif w.startswith("-"):
            i = _short_cluster(words, i, spec, scripts)
        elif spec.assignments and _ASSIGNMENT.match(w):
            i += 1
        else:
            break
    i = min(i + spec.positionals, len(words))
    if i < len(words) and words[i] in spec.script_opts:  # `flock FILE -c SCRIPT`
        scripts.extend(words[i + 1 : i + 2])
        return len(words), scripts
    return i, scripts


def _short_cluster(words: Sequence[str], i: int, spec: _Spec, scripts: list[str]) -> int:
    w = words[i]
    for k, ch in enumerate(w[1:], start=1):
        opt = "-" + ch
        if opt in spec.value_opts or opt in spec.script_opts:
            rest = w[k + 1 :]
            value = rest or (words[i + 1] if i + 1 < len(words) else "")
            if opt in spec.script_opts:
                scripts.append(value)
            return i + 1 if rest else i + 2
    return i + 1


def _shell_script(words: Sequence[str]) -> str | None:
    """The script of ``sh -c SCRIPT`` (options like ``-lc``, ``-e -c`` allowed), else None."""
    command_mode = False
    i = 1
    while i < len(words):
        w = words[i]
        if w in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            i += 2
        elif w.startswith("--"):
            i += 1
        elif w[:1] in ("-", "+") and len(w) > 1:
            command_mode = command_mode or "c" in w[1:]
            i += 1
        else:
            return w if command_mode else None
    return None


def _find_exec(words: Sequence[str]) -> list[list[str]]:
    """Commands given to ``find -exec/-execdir/-ok/-okdir``."""
    found: list[list[str]] = []
    i = 0
    while i < len(words):
        if words[i] in ("-exec", "-execdir", "-ok", "-okdir"):
            j = i + 1
            while j < len(words) and words[j] not in (";", "+"):
                j += 1
            found.append(list(words[i + 1 : j]))
            i = j
        i += 1
    return found


@dataclass(slots=True)
class _Unwrapped:
    argv: tuple[str, ...]
    wrappers: list[str] = field(default_factory=list)
    views: list[tuple[str, ...]] = field(default_factory=list)
    scripts: list[tuple[str, str]] = field(default_factory=list)  # (origin, source)


def unwrap(words: Sequence[str]) -> _Unwrapped:
    """Strip launchers from ``words``; collect the scripts they run (``-c``, eval ...)."""
    current = tuple(words)
    out = _Unwrapped(current, views=[current])
    while current:
        name = os.path.basename(current[0])
        spec = _WRAPPERS.get(name)
        if spec is None:
            break
        start, scripts = _skip_options(current, spec)
        out.scripts.extend(("wrapper script", s) for s in scripts if s)
        out.wrappers.append(current[0])
        # su's positionals are a user name and shell arguments, never a program;
        # script's is the typescript file.
        current = () if name in ("su", "script") else current[start:]
        if name in _TAIL_SCRIPTS and (len(current) > 1 or " " in "".join(current)):
            out.scripts.append((name, _tail_script(name, current)))
            current = ()
        out.views.append(current)
        if not current and name not in _NO_COMMAND_OK:
            break
    out.argv = current
    _collect_scripts(out)
    return out


def _tail_script(name: str, words: Sequence[str]) -> str:
    """The command line a tail launcher runs (``parallel``'s ``:::`` inputs dropped)."""
    if name == "parallel" and ":::" in words:
        words = words[: list(words).index(":::")]
    return " ".join(words)


def _tmux_script(argv: Sequence[str]) -> str | None:
    """The shell command of ``tmux new -d 'cmd'`` (the words after the options)."""
    if len(argv) < 2 or argv[1] not in _TMUX_RUNS:
        return None
    rest = list(argv[2:])
    while rest and rest[0].startswith("-"):
        flag = rest.pop(0)
        if flag in _TMUX_VALUE_OPTS and rest:
            rest.pop(0)
    return " ".join(rest) or None


_TMUX_VALUE_OPTS = frozenset(["-c", "-s", "-n", "-t", "-x", "-y", "-F", "-e", "-f", "-l", "-T"])


def _collect_scripts(out: _Unwrapped) -> None:
    if not out.argv:
        return
    name = os.path.basename(out.argv[0])
    if name == "tmux":
        tmux = _tmux_script(out.argv)
        if tmux is not None:
            out.scripts.append(("tmux", tmux))
        return
    if name in SHELLS:
        script = _shell_script(out.argv)
        if script is not None:
            out.scripts.append(("shell -c", script))
    elif name == "eval":
        out.scripts.append(("eval", " ".join(out.argv[1:])))
    elif name == "find":
        out.scripts.extend(("find -exec", shlex.join(cmd)) for cmd in _find_exec(out.argv) if cmd)


# -- parsing -------------------------------------------------------------------


@dataclass(slots=True)
class _Pending:
    """A simple command being collected from tokens."""

    words: list[_Word] = field(default_factory=list)
    assignments: list[_Word] = field(default_factory=list)
    redirects: list[tuple[Redirect, _Word, _Heredoc | None]] = field(default_factory=list)


class _Builder:
    """Collects segments from a line and, recursively, from everything it runs."""

    def __init__(self) -> None:
        self.segments: list[Segment] = []
        self._pipelines = 0
        self._heredocs: list[tuple[_Heredoc, int]] = []

    def new_pipeline(self) -> int:
        self._pipelines += 1
        return self._pipelines - 1

    def parse(self, source: str, *, depth: int, parent: int | None, origin: str) -> None:
        if depth > MAX_DEPTH:
            raise ShellSyntaxError(f"commands nested more than {MAX_DEPTH} deep")
        lexer = _Lexer(source)
        _LineParser(self, lexer, depth=depth, parent=parent, origin=origin).run()
        for doc in lexer.heredocs:
            if doc.owner:
                self._heredoc_scripts(doc, doc.owner[0], depth)

    def _heredoc_scripts(self, doc: _Heredoc, owner: int, depth: int) -> None:
        """A heredoc fed to an interpreter is code; an unquoted one expands ``$(...)``."""
        body = doc.body or ""
        seg = self.segments[owner]
        later = [s for _, s in self.pipeline_after(seg)]
        if any(s.name in INTERPRETERS for s in (seg, *later)):
            self.parse(body, depth=depth + 1, parent=owner, origin="heredoc script")
        elif not doc.quoted:
            lexer = _Lexer(body)
            word = _Word()
            lexer._double_quoted(word, terminator=None)
            for origin, sub in word.subs:
                self.parse(sub, depth=depth + 1, parent=owner, origin=origin)

    def pipeline_after(self, seg: Segment) -> list[tuple[int, Segment]]:
        return [
            (i, s)
            for i, s in enumerate(self.segments)
            if s.pipeline == seg.pipeline and s.position > seg.position
        ]

    def add(
        self,
        pending: _Pending,
        *,
        pipeline: int,
        position: int,
        depth: int,
        parent: int | None,
        origin: str,
    ) -> None:
        """Turn collected tokens into a :class:`Segment`, then parse what it runs."""
        words = [w.value for w in pending.words]
        unwrapped = unwrap(words)
        head_dynamic = bool(pending.words) and pending.words[0].dynamic
        offset = len(words) - len(unwrapped.argv)
        if unwrapped.argv and offset < len(pending.words):
            head_dynamic = head_dynamic or pending.words[offset].dynamic
        seg = Segment(
            words=tuple(words),
            argv=unwrapped.argv,
            wrappers=tuple(unwrapped.wrappers),
            views=tuple(unwrapped.views),
            assignments=tuple(w.value for w in pending.assignments),
            redirects=tuple(r for r, _, _ in pending.redirects),
            dynamic=head_dynamic,
            pipeline=pipeline,
            position=position,
            depth=depth,
            parent=parent,
            origin=origin,
        )
        index = len(self.segments)
        self.segments.append(seg)
        self._parse_nested(pending, unwrapped, index, depth)
        self._piped_script(index, depth)

    def _piped_script(self, index: int, depth: int) -> None:
        """``echo 'sudo ls' | sh``, ``printf cmd | at now``: the printed text is code."""
        seg = self.segments[index]
        if seg.position == 0 or not executes_stdin(seg):
            return
        for _, earlier in self.pipeline_before(seg):
            if earlier.name in ("echo", "printf") and len(earlier.argv) > 1:
                text = " ".join(a for a in earlier.argv[1:] if not a.startswith("-"))
                self.parse(text, depth=depth + 1, parent=index, origin="piped script")

    def pipeline_before(self, seg: Segment) -> list[tuple[int, Segment]]:
        return [
            (i, s)
            for i, s in enumerate(self.segments)
            if s.pipeline == seg.pipeline and s.position < seg.position and s.parent == seg.parent
        ]

    def _parse_nested(
        self, pending: _Pending, unwrapped: _Unwrapped, index: int, depth: int
    ) -> None:
        for word in [*pending.assignments, *pending.words]:
            for origin, sub in word.subs:
                self.parse(sub, depth=depth + 1, parent=index, origin=origin)
        for redirect, word, heredoc in pending.redirects:
            if heredoc is not None:
                heredoc.owner.append(index)
            for origin, sub in word.subs:
                self.parse(sub, depth=depth + 1, parent=index, origin=origin)
            if redirect.op == "<<<" and self.segments[index].name in INTERPRETERS:
                self.parse(redirect.target, depth=depth + 1, parent=index, origin="here-string")
        for origin, script in unwrapped.scripts:
            self.parse(script, depth=depth + 1, parent=index, origin=origin)

    def add_group(
        self, body: str, *, pipeline: int, position: int, depth: int, parent: int | None
    ) -> None:
        """A ``( ... )`` subshell: a placeholder segment whose children are its body."""
        index = len(self.segments)
        self.segments.append(
            Segment(
                words=(),
                argv=(),
                pipeline=pipeline,
                position=position,
                depth=depth,
                parent=parent,
                origin="subshell",
                group=True,
            )
        )
        self.parse(body, depth=depth + 1, parent=index, origin="subshell")


class _LineParser:
    """Walks the tokens of one source string, cutting them into pipelines and segments."""

    def __init__(
        self, builder: _Builder, lexer: _Lexer, *, depth: int, parent: int | None, origin: str
    ) -> None:
        self.b = builder
        self.lexer = lexer
        self.depth = depth
        self.parent = parent
        self.origin = origin
        self.pipeline = builder.new_pipeline()
        self.position = 0
        self.pending = _Pending()

    def run(self) -> None:
        while True:
            token = self.lexer.next()
            if token.kind == "eof":
                self._flush()
                return
            if token.kind == "word":
                self._word(token)
            elif token.kind == "redir":
                self._redirect(token)
            else:
                self._operator(token.value)

    def _word(self, token: _Token) -> None:
        assert token.word is not None
        word = token.word
        if not self.pending.words and _is_assignment(word):
            self.pending.assignments.append(word)
            return
        if not self.pending.words and not word.quoted:
            if word.value in _LEADING_KEYWORDS or word.value in _TRAILING_KEYWORDS:
                return  # syntax around commands, not a command
            if word.value in ("case", "function", "select"):
                raise ShellSyntaxError(f"'{word.value}' blocks are not analysed")
        self.pending.words.append(word)

    def _redirect(self, token: _Token) -> None:
        assert token.word is not None
        redirect = Redirect(token.value, token.word.value, token.fd)
        self.pending.redirects.append((redirect, token.word, token.heredoc))

    def _operator(self, op: str) -> None:
        if op == "(":
            self._group()
        elif op == ")":
            raise ShellSyntaxError("unbalanced ')'")
        elif op in ("|", "|&"):
            self._flush()
            self.position += 1
        else:  # && || ; ;; & newline
            self._flush()
            self.pipeline = self.b.new_pipeline()
            self.position = 0

    def _group(self) -> None:
        if self.pending.words:
            raise ShellSyntaxError("function definitions are not analysed")
        start = self.lexer.i
        end = matching_paren(self.lexer.s, start)
        self.lexer.i = end + 1
        self.b.add_group(
            self.lexer.s[start:end],
            pipeline=self.pipeline,
            position=self.position,
            depth=self.depth,
            parent=self.parent,
        )

    def _flush(self) -> None:
        pending, self.pending = self.pending, _Pending()
        if not (pending.words or pending.assignments or pending.redirects):
            return
        if (
            pending.words
            and pending.words[0].value in ("for", "[[")
            and not pending.words[0].quoted
        ):
            # A loop header or a test: no program runs, but substitutions in it do.
            pending = _Pending(
                words=[_Word(value="true"), *pending.words[1:]],
                assignments=pending.assignments,
                redirects=pending.redirects,
            )
        self.b.add(
            pending,
            pipeline=self.pipeline,
            position=self.position,
            depth=self.depth,
            parent=self.parent,
            origin=self.origin,
        )


def parse_command(line: str) -> ParsedCommand:
    """Split ``line`` into every simple command it would run. Pure; no I/O.

    Raises :class:`ShellSyntaxError` for what it cannot analyse (unbalanced
    quotes or parentheses, ``case`` blocks, substitutions inside ``${...}``,
    nesting deeper than :data:`MAX_DEPTH`).
    """
    builder = _Builder()
    builder.parse(line, depth=0, parent=None, origin="line")
    return ParsedCommand(line, tuple(builder.segments))


# -- matching rules --------------------------------------------------------------


def _norm(text: str, fold: bool) -> str:
    return text.casefold() if fold else text


@functools.lru_cache(maxsize=1024)
def _rule_words(rule: str, fold: bool) -> tuple[str, ...]:
    """A rule's shell words (split once: every tool call checks every rule)."""
    return tuple(_norm(w, fold) for w in shlex.split(rule))


def rule_matches(rule: str, argv: Sequence[str], *, prefix: bool, fold: bool = False) -> bool:
    """True if command ``rule`` (shell words, each may be a glob) matches ``argv``.

    The first word matches the program (its base name or the full path). With
    ``prefix`` the other words must be the next arguments in order (allowlists:
    ``git status`` never admits ``git push status``); without it they need only
    appear in order (denylists: ``git push --force`` catches
    ``git push origin main --force``). ``fold`` compares case-insensitively.
    """
    if not argv:
        return False
    words = _rule_words(rule, fold)
    head = _norm(argv[0], fold)
    if not (fnmatchcase(os.path.basename(head), words[0]) or fnmatchcase(head, words[0])):
        return False
    rest = words[1:]
    args = [_norm(a, fold) for a in argv[1:]]
    if prefix:
        return len(args) >= len(rest) and all(
            fnmatchcase(a, r) for a, r in zip(args, rest, strict=False)
        )
    remaining = iter(args)
    return all(any(fnmatchcase(a, r) for a in remaining) for r in rest)


@dataclass(frozen=True, slots=True)
class ShellFinding:
    """A reason a command line may not run: ``rule`` id, text, and the segment."""

    rule: str
    reason: str
    segment: str


def _dedupe(findings: list[ShellFinding]) -> list[ShellFinding]:
    return list(dict.fromkeys(findings))


def is_script_runner(seg: Segment) -> bool:
    """True for ``sh -c SCRIPT``: the shell only runs a script whose commands are
    segments of their own (Codex wraps every command this way)."""
    return seg.name in SHELLS and _shell_script(seg.argv) is not None and not seg.wrappers


def check_denied(parsed: ParsedCommand, denied: Sequence[str]) -> list[ShellFinding]:
    """Segments where any launcher stage matches a denied rule (case-insensitive,
    since ``SUDO`` is ``sudo`` on a case-insensitive filesystem)."""
    findings: list[ShellFinding] = []
    for seg in parsed.commands():
        hit = _first_denied(seg, denied)
        if hit is not None:
            reason = f"`{seg.text}` matches the denied command {hit!r}"
            findings.append(ShellFinding("shell.denied_command", reason, seg.text))
    return _dedupe(findings)


def _first_denied(seg: Segment, denied: Sequence[str]) -> str | None:
    for view in seg.views or (seg.argv,):
        for rule in denied:
            if rule_matches(rule, view, prefix=False, fold=True):
                return rule
    return None


def check_allowed(parsed: ParsedCommand, allowed: Sequence[str]) -> list[ShellFinding]:
    """Segments whose program (or privilege launcher) no allowed rule admits."""
    findings: list[ShellFinding] = []
    for seg in parsed.commands():
        problem = _allow_problem(seg, allowed)
        if problem:
            findings.append(ShellFinding("shell.not_allowed", problem, seg.text))
    return _dedupe(findings)


def _allow_problem(seg: Segment, allowed: Sequence[str]) -> str | None:
    if seg.dynamic:
        return f"`{seg.text}`: the program name is computed at run time"
    for view in seg.views[:-1]:
        if (
            view
            and os.path.basename(view[0]) in PRIVILEGE_WRAPPERS
            and not any(rule_matches(r, view, prefix=True) for r in allowed)
        ):
            return f"`{seg.text}`: {view[0]!r} is not an allowed command"
    if seg.name in SYNTAX_WORDS or is_script_runner(seg):
        return None
    if any(rule_matches(r, seg.argv, prefix=True) for r in allowed):
        return None
    return f"`{seg.text}`: {seg.name!r} is not an allowed command"


# -- download and execute ---------------------------------------------------------


def executes_stdin(seg: Segment) -> bool:
    """True if the interpreter runs what arrives on stdin as code (``sh``,
    ``bash -s``, ``python3 -``), not as data (``python3 -m json.tool``, ``sh x.sh``)."""
    if seg.dynamic or seg.name in STDIN_RUNNERS:
        return True  # `curl x | $SHELL`: an unknown program may well be a shell
    if seg.name not in INTERPRETERS:
        return False
    for arg in seg.argv[1:]:
        if arg in ("-", "/dev/stdin"):
            return True
        if not arg.startswith("-"):
            return False  # a script file or inline code: stdin is data
        if seg.name in SHELLS and not arg.startswith("--") and "c" in arg[1:]:
            return False
        if seg.name in SHELLS and not arg.startswith("--") and "s" in arg[1:]:
            return True  # `bash -s -- args`: the script is stdin, the rest its arguments
        if seg.name not in SHELLS and arg in ("-c", "-e", "-E", "-m", "-r", "-p", "--eval"):
            return False
    return True


def _contains(parsed: ParsedCommand, index: int, names: frozenset[str]) -> bool:
    if parsed.segments[index].name in names:
        return True
    return any(d.name in names for d in parsed.descendants(index))


def _runs_stdin(parsed: ParsedCommand, index: int) -> bool:
    if executes_stdin(parsed.segments[index]):
        return True
    return parsed.segments[index].group and any(
        executes_stdin(d) for d in parsed.descendants(index)
    )


def check_download_exec(parsed: ParsedCommand) -> list[ShellFinding]:
    """Downloads that reach an interpreter as code: ``curl x | sh``,
    ``bash <(curl x)``, ``sh -c "$(wget -O- x)"``, ``curl -o f x && sh f``."""
    findings = _piped_downloads(parsed)
    for seg in parsed.commands():
        parent = None if seg.parent is None else parsed.segments[seg.parent]
        if (
            seg.name in FETCHERS
            and seg.origin in ("substitution", "process_substitution")
            and parent is not None
            and parent.name in INTERPRETERS
        ):
            findings.append(_download_finding(seg, parent))
    findings.extend(_download_then_run(parsed))
    return _dedupe(findings)


def _piped_downloads(parsed: ParsedCommand) -> list[ShellFinding]:
    findings: list[ShellFinding] = []
    for pipeline_id in sorted({s.pipeline for s in parsed.segments}):
        members = parsed.pipeline(pipeline_id)
        for k, (i, seg) in enumerate(members):
            if not _contains(parsed, i, FETCHERS):
                continue
            for j, later in members[k + 1 :]:
                if _runs_stdin(parsed, j):
                    findings.append(_download_finding(seg, later))
    return findings


def _download_finding(fetcher: Segment, runner: Segment) -> ShellFinding:
    return ShellFinding(
        "shell.download_exec",
        f"`{fetcher.text}` downloads code that `{runner.text}` executes "
        "(download-and-execute is denied)",
        fetcher.text,
    )


def _download_outputs(seg: Segment) -> set[str]:
    """File names a fetcher writes (``-o F``, ``-O F``, or the URL's base name)."""
    names: set[str] = set()
    args = list(seg.argv[1:])
    for k, arg in enumerate(args):
        if arg in ("-o", "--output", "-O", "--output-document") and k + 1 < len(args):
            names.add(os.path.basename(args[k + 1]))
        elif URL_PATTERN.fullmatch(arg):
            base = os.path.basename(urlsplit(arg).path)
            if base:
                names.add(base)
    names.update(os.path.basename(r.target) for r in seg.redirects if r.writes)
    names.discard("-")
    return names


def _script_of(seg: Segment) -> str | None:
    """The program file a segment runs: ``./x.sh`` itself, or ``sh x.sh``'s script."""
    if not seg.argv:
        return None
    if seg.name in INTERPRETERS:
        return next((a for a in seg.argv[1:] if not a.startswith("-")), None)
    return seg.argv[0] if seg.argv[0].startswith(("./", "/", "../")) else None


def _download_then_run(parsed: ParsedCommand) -> list[ShellFinding]:
    findings: list[ShellFinding] = []
    fetched: dict[str, Segment] = {}
    for seg in parsed.commands():
        if seg.name in FETCHERS:
            fetched.update(dict.fromkeys(_download_outputs(seg), seg))
            continue
        script = _script_of(seg)
        if script is not None and os.path.basename(script) in fetched:
            findings.append(_download_finding(fetched[os.path.basename(script)], seg))
    return findings


URL_PATTERN = re.compile(r"\b(?:https?|ftp|wss?)://[^\s'\"<>`]+", re.IGNORECASE)


def urls_in(parsed: ParsedCommand) -> list[str]:
    """URLs given as arguments anywhere in the command line."""
    found: list[str] = []
    for seg in parsed.commands():
        for word in seg.argv[1:]:
            found.extend(URL_PATTERN.findall(word))
    return found
