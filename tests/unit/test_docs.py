"""The README stays true to the code: every setting is documented, the commands exist."""

from __future__ import annotations

import re
from pathlib import Path

from streaming_app.settings.schema import SETTINGS, env_name

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_every_setting_is_in_the_configuration_table() -> None:
    for key, setting in SETTINGS.items():
        row = f"| `{key}` ({setting.metadata['section']}) |"
        assert row in README, f"README configuration table lacks {row}"


def test_the_table_lists_no_setting_that_does_not_exist() -> None:
    documented = set(re.findall(r"^\| `(\w+)` \(\w+\) \|", README, re.M))
    assert documented == set(SETTINGS)


def test_env_variables_follow_the_documented_pattern() -> None:
    assert "STREAMING_APP_<KEY>" in README
    assert env_name("checkpoint_dir") == "STREAMING_APP_CHECKPOINT_DIR"


def test_the_readme_commands_exist() -> None:
    for script in re.findall(r"scripts/[\w-]+\.sh", README):
        assert (ROOT / script).is_file(), script
    for conf in re.findall(r"conf/[\w.-]+\.(?:ini|conf|properties)", README):
        assert (ROOT / conf).is_file(), conf
