"""The context reads ``policy.toml`` again only when the file changed."""

from __future__ import annotations

import os
from pathlib import Path

from chorus.context._assemble import current_policy
from chorus.policy import policy_path


def test_the_policy_is_parsed_again_when_its_file_changes(chorus_home: Path) -> None:
    path = policy_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('[filesystem]\ndenied_paths = ["/srv/one"]\n')
    os.chmod(path, 0o600)
    first = current_policy()
    assert first.filesystem.denied_paths == ["/srv/one"]
    assert current_policy() is first  # unchanged: the same parse
    path.write_text('[filesystem]\ndenied_paths = ["/srv/two"]\n')
    os.utime(path, ns=(1, 1))  # a change, whatever the clock's grain
    assert current_policy().filesystem.denied_paths == ["/srv/two"]
