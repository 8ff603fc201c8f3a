"""Regenerate ``src/chorus/bodies/codex/_schema.py`` from the Codex CLI's own schema.

Usage (from the repository root)::

    uv run python scripts/gen_codex_schema.py [--codex PATH] [--check]

Steps:

1. ``codex app-server generate-json-schema --out TMP`` (the pinned CLI unless
   ``--codex`` is given) writes the protocol bundle
   ``codex_app_server_protocol.schemas.json``.
2. The bundle nests the v2 definitions under ``definitions.v2``; they are
   flattened into one ``definitions`` map (``#/definitions/v2/X`` becomes
   ``#/definitions/X``).
3. Only the transitive ``$ref`` closure of :data:`ROOTS` (the messages the Codex
   body sends or parses) is kept. The full bundle is about 1,700 classes and
   takes 2.5 s to import; the subset is under 200 classes.
4. ``datamodel-codegen`` turns the subset into pydantic v2 models.

``--check`` regenerates into memory and exits 1 when the committed file differs
(for CI after a CLI upgrade).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OUTPUT = REPO / "src" / "chorus" / "bodies" / "codex" / "_schema.py"

#: Definitions the body uses; everything they reference is pulled in.
ROOTS: tuple[str, ...] = (
    # client -> server requests and their results
    "InitializeParams",
    "InitializeResponse",
    "ThreadStartParams",
    "ThreadStartResponse",
    "ThreadResumeParams",
    "ThreadResumeResponse",
    "ThreadForkParams",
    "ThreadForkResponse",
    "TurnStartParams",
    "TurnStartResponse",
    "TurnSteerParams",
    "TurnSteerResponse",
    "TurnInterruptParams",
    "TurnInterruptResponse",
    # server -> client notifications the codec maps
    "ErrorNotification",
    "TurnStartedNotification",
    "TurnCompletedNotification",
    "ItemStartedNotification",
    "ItemCompletedNotification",
    "AgentMessageDeltaNotification",
    "ReasoningSummaryTextDeltaNotification",
    "ReasoningTextDeltaNotification",
    "CommandExecutionOutputDeltaNotification",
    "FileChangeOutputDeltaNotification",
    "ThreadTokenUsageUpdatedNotification",
    "AccountRateLimitsUpdatedNotification",
    "ThreadStatusChangedNotification",
    "TurnPlanUpdatedNotification",
    "ConfigWarningNotification",
    "DeprecationNoticeNotification",
    "WarningNotification",
    "ModelReroutedNotification",
    # server -> client requests (approvals) and their answers
    "CommandExecutionRequestApprovalParams",
    "CommandExecutionRequestApprovalResponse",
    "FileChangeRequestApprovalParams",
    "FileChangeRequestApprovalResponse",
    "ExecCommandApprovalParams",
    "ExecCommandApprovalResponse",
    "ApplyPatchApprovalParams",
    "ApplyPatchApprovalResponse",
)

_REF = re.compile(r'"#/definitions/([^"]+)"')

CODEGEN_ARGS: tuple[str, ...] = (
    "--input-file-type",
    "jsonschema",
    "--output-model-type",
    "pydantic_v2.BaseModel",
    "--target-python-version",
    "3.11",
    "--use-annotated",
    "--use-union-operator",
    "--use-standard-collections",
    "--enum-field-as-literal",
    "all",
    "--use-title-as-name",
    "--collapse-root-models",
    "--use-double-quotes",
    "--use-schema-description",
    "--disable-timestamp",
    "--formatters",
    "ruff-format",
)


def find_codex(explicit: str | None) -> Path:
    """The codex executable: ``--codex`` or the pinned project-local install."""
    if explicit:
        return Path(explicit)
    from chorus.agents import find_agent

    return Path(find_agent("codex"))


def codex_version(codex: Path) -> str:
    done = subprocess.run([str(codex), "--version"], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def dump_schema(codex: Path, workdir: Path) -> dict[str, Any]:
    """Run the CLI's schema generator and load its bundle."""
    home = workdir / "codex_home"
    home.mkdir()
    out = workdir / "schema"
    env = {**os.environ, "CODEX_HOME": str(home)}
    subprocess.run(
        [str(codex), "app-server", "generate-json-schema", "--out", str(out)],
        env=env,
        check=True,
        capture_output=True,
    )
    text = (out / "codex_app_server_protocol.schemas.json").read_text()
    bundle: dict[str, Any] = json.loads(text)
    return bundle


def flatten(bundle: dict[str, Any]) -> dict[str, Any]:
    """One flat definitions map; v2 wins on a name clash (``RequestId`` differs only in title)."""
    defs = dict(bundle["definitions"].pop("v2"))
    for name, value in bundle["definitions"].items():
        defs.setdefault(name, value)
    flat: dict[str, Any] = json.loads(
        json.dumps(defs).replace("#/definitions/v2/", "#/definitions/")
    )
    return flat


def closure(defs: dict[str, Any], roots: tuple[str, ...]) -> dict[str, Any]:
    """``roots`` plus every definition they reach through ``$ref``."""
    missing = [r for r in roots if r not in defs]
    if missing:
        raise SystemExit(f"schema lacks definitions: {', '.join(missing)}")
    seen: set[str] = set()
    stack = list(roots)
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        stack.extend(_REF.findall(json.dumps(defs[name])))
    # Per-file "$schema" keys inside definitions confuse the generator.
    return {n: {k: v for k, v in defs[n].items() if k != "$schema"} for n in sorted(seen)}


def generate(subset: dict[str, Any], workdir: Path, version: str) -> str:
    """Run datamodel-codegen on the subset bundle and return the module text."""
    source = workdir / "codex_app_server_protocol.subset.json"
    bundle = {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": subset}
    source.write_text(json.dumps(bundle, indent=1, sort_keys=True))
    target = workdir / "_schema.py"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}  # "uint32 not understood" noise
    subprocess.run(
        [
            sys.executable,
            "-m",
            "datamodel_code_generator",
            "--input",
            str(source),
            "--output",
            str(target),
            *CODEGEN_ARGS,
        ],
        env=env,
        check=True,
        cwd=workdir,
    )
    body = target.read_text()
    header = (
        "# GENERATED FILE: do not edit.\n"
        "# Regenerate with `uv run python scripts/gen_codex_schema.py`.\n"
        f"# Source: `codex app-server generate-json-schema` of {version}; subset = the\n"
        "# $ref closure of ROOTS in that script; models by datamodel-codegen.\n"
    )
    return header + body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--codex", help="codex executable (default: the pinned install)")
    parser.add_argument("--check", action="store_true", help="fail if the file is stale")
    args = parser.parse_args(argv)
    codex = find_codex(args.codex)
    version = codex_version(codex)
    with tempfile.TemporaryDirectory(prefix="codex-schema-") as tmp:
        workdir = Path(tmp)
        subset = closure(flatten(dump_schema(codex, workdir)), ROOTS)
        text = generate(subset, workdir, version)
    if args.check:
        if OUTPUT.read_text() != text:
            print(f"{OUTPUT} is stale; rerun scripts/gen_codex_schema.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT.relative_to(REPO)}: {len(subset)} definitions from {version}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
