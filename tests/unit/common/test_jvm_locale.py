"""The JVM's locale: a UTF-8 one for the JVMs the app launches, a refusal for a JVM without."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from streaming_app.common.jvm_locale import (
    EXECUTOR_LOCALE,
    UTF8_LOCALE,
    check_file_names,
    ctype_of,
    utf8_env,
)
from streaming_app.errors import ConfigError


@pytest.mark.parametrize(
    "env",
    [{}, {"LC_ALL": "C"}, {"LC_ALL": "POSIX", "LANG": "en_US.UTF-8"}, {"LANG": "de_DE.ISO-8859-1"}],
)
def test_a_locale_that_is_not_utf8_gets_c_utf8(env: dict[str, str]) -> None:
    result = utf8_env(env)
    assert result["LC_ALL"] == UTF8_LOCALE
    assert ctype_of(result) == UTF8_LOCALE


@pytest.mark.parametrize(
    "env",
    [{"LANG": "C.UTF-8"}, {"LC_ALL": "en_US.utf8"}, {"LC_CTYPE": "de_DE.UTF-8", "LANG": "C"}],
)
def test_a_utf8_locale_is_kept(env: dict[str, str]) -> None:
    assert utf8_env(env) == env


def test_executors_get_the_utf8_locale() -> None:
    assert EXECUTOR_LOCALE == {"spark.executorEnv.LC_ALL": "C.UTF-8"}


def _jvm(encoding: str) -> Any:
    system = SimpleNamespace(getProperty=lambda key: encoding if key == "sun.jnu.encoding" else "")
    return SimpleNamespace(java=SimpleNamespace(lang=SimpleNamespace(System=system)))


def test_a_jvm_that_decodes_names_as_ascii_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError) as caught:
        check_file_names(_jvm("ANSI_X3.4-1968"))
    message = str(caught.value)
    assert "\n" not in message
    assert "ANSI_X3.4-1968" in message and "LC_ALL=C.UTF-8" in message


def test_a_jvm_that_decodes_names_as_utf8_is_accepted() -> None:
    check_file_names(_jvm("UTF-8"))
