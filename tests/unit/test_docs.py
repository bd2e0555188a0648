"""The docs stay true to the code: every setting is documented, commands and links exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from streaming_app.settings.schema import SETTINGS, env_name

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
# A markdown link or image: [text](target) or ![alt](target).
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def test_every_setting_is_in_the_configuration_table() -> None:
    for key, setting in SETTINGS.items():
        row = f"| `{key}` ({setting.metadata['section']}) |"
        assert row in CONFIGURATION, f"docs/configuration.md lacks {row}"


def test_the_table_lists_no_setting_that_does_not_exist() -> None:
    documented = set(re.findall(r"^\| `(\w+)` \(\w+\) \|", CONFIGURATION, re.M))
    assert documented == set(SETTINGS)


def test_env_variables_follow_the_documented_pattern() -> None:
    assert "STREAMING_APP_<KEY>" in CONFIGURATION
    assert "STREAMING_APP_<KEY>" in README.read_text(encoding="utf-8")
    assert env_name("checkpoint_dir") == "STREAMING_APP_CHECKPOINT_DIR"


def test_the_docs_pages_exist() -> None:
    assert DOCS, "docs/ has no pages"
    assert README.is_file()


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_the_commands_named_exist(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    for script in re.findall(r"scripts/[\w-]+\.sh", text):
        assert (ROOT / script).is_file(), f"{_name(page)}: {script}"
    for conf in re.findall(r"conf/[\w.-]+\.(?:ini|conf|properties)", text):
        assert (ROOT / conf).is_file(), f"{_name(page)}: {conf}"


def _anchors(page: Path) -> set[str]:
    """The anchors of a page's headings, as GitHub makes them."""
    headings = re.findall(r"^#+ (.*)$", page.read_text(encoding="utf-8"), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_relative_links_resolve_to_files_and_headings(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # a URL
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.is_file(), f"{_name(page)}: broken link {target}"
        if anchor and linked.suffix == ".md":
            assert anchor in _anchors(linked), f"{_name(page)}: no heading for {target}"


def test_every_docs_page_is_linked_from_the_readme() -> None:
    text = README.read_text(encoding="utf-8")
    for page in DOCS:
        assert f"](docs/{page.name})" in text, f"README does not link docs/{page.name}"


def test_the_docs_pages_named_in_the_code_exist() -> None:
    sources = [*(ROOT / "streaming_app").rglob("*.py"), *(ROOT / "conf").glob("*.ini")]
    named = {m for p in sources for m in re.findall(r"docs/[\w-]+\.md", p.read_text("utf-8"))}
    assert named, "the code names no docs page"
    for name in named:
        assert (ROOT / name).is_file(), name


# A test named in the docs: `tests/<path>.py`, maybe `::test_name[...]`, or a bare
# `test_<name>.py` (a file under tests/).
TEST_PATH = re.compile(r"\b(tests/[\w/]+\.py)(?:::(\w+))?")
TEST_FILE = re.compile(r"(?<![\w/])(test_\w+\.py)\b")


def missing_tests(text: str) -> list[str]:
    """The tests `text` names that are not in the checkout: a file that is not there, a
    test function its file does not define, a bare file name no file under tests/ has."""
    missing = []
    for path, name in TEST_PATH.findall(text):
        file = ROOT / path
        if not file.is_file():
            missing.append(path)
        elif name and not re.search(rf"^\s*(async )?def {name}\(", file.read_text(), re.M):
            missing.append(f"{path}::{name}")
    names = {p.name for p in (ROOT / "tests").rglob("test_*.py")}
    missing += sorted({f for f in TEST_FILE.findall(text) if f not in names})
    return missing


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_test_the_docs_name_exists(page: Path) -> None:
    assert not missing_tests(page.read_text(encoding="utf-8"))


def test_the_test_reference_check_finds_what_is_gone() -> None:
    # The positive control: the references of docs/security.md before issue 57.
    assert missing_tests(
        "`tests/unit/recovery/test_secret_scrub.py`; "
        "`tests/unit/tools/test_secret_scrub.py::test_that_was_renamed`; `test_gone.py`; "
        "`tests/unit/tools/test_secret_scrub.py::test_a_runs_own_placeholder_is_no_secret_and_is_left_alone`"
    ) == [
        "tests/unit/recovery/test_secret_scrub.py",
        "tests/unit/tools/test_secret_scrub.py::test_that_was_renamed",
        "test_gone.py",
    ]


def test_every_variable_the_scripts_read_is_a_setting_or_none_the_app_refuses() -> None:
    """A variable of scripts/ or conf/ with the app's prefix reaches the driver they start
    (`STREAMING_APP_CODE=zip scripts/submit.sh ...`): the app must not take it for an
    unknown setting (exit 2)."""
    from streaming_app.settings.loading import load_config
    from streaming_app.settings.schema import ENV_NOT_SETTINGS, ENV_PREFIX

    files = [*(ROOT / "scripts").iterdir(), *(ROOT / "conf").rglob("*"), ROOT / "Dockerfile"]
    text = " ".join(f.read_text("utf-8") for f in files if f.is_file() and f.suffix != ".jsa")
    names = set(re.findall(rf"\b{ENV_PREFIX}[A-Z_]+[A-Z]\b", text))
    settings = {n for n in names if n[len(ENV_PREFIX) :].lower() in SETTINGS}
    assert names - settings <= ENV_NOT_SETTINGS, names - settings - ENV_NOT_SETTINGS
    # Its positive control: such a variable that is not listed is refused by the app.
    with pytest.raises(Exception, match="STREAMING_APP_NOT_A_SETTING: unknown setting"):
        load_config(env={"STREAMING_APP_NOT_A_SETTING": "1"})
    load_config(env=dict.fromkeys(ENV_NOT_SETTINGS - {"STREAMING_APP_CONFIG"}, "1"))
