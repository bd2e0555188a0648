"""The driver JVM's JIT setting: C1 only, unless the user says otherwise."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from streaming_app.common.jvm_jit import (
    C1_ONLY,
    DRIVER_ONLY,
    ENV,
    JAVA_TOOL_OPTIONS,
    executor_options,
    jit_env,
)


def test_the_driver_jvm_gets_c1_only_after_the_users_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert jit_env({"A": "1"}) == {"A": "1", JAVA_TOOL_OPTIONS: C1_ONLY}
    given = {JAVA_TOOL_OPTIONS: "-Dx=1"}
    assert jit_env(given) == {JAVA_TOOL_OPTIONS: f"-Dx=1 {C1_ONLY}"}


@pytest.mark.parametrize(
    "env",
    [
        {ENV: "0"},
        {JAVA_TOOL_OPTIONS: "-XX:TieredStopAtLevel=4"},
        {JAVA_TOOL_OPTIONS: "-XX:-TieredCompilation"},
    ],
)
def test_the_users_own_choice_leaves_the_jit_alone(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert jit_env(env) == env


@pytest.mark.parametrize(
    ("env", "printed"),
    [
        ({}, C1_ONLY),
        ({JAVA_TOOL_OPTIONS: "-Dx=1"}, f"-Dx=1 {C1_ONLY}"),
        ({ENV: "0"}, ""),
        ({ENV: "0", JAVA_TOOL_OPTIONS: "-Dx=1"}, "-Dx=1"),
    ],
)
def test_submit_sh_is_told_what_to_export(env: dict[str, str], printed: str) -> None:
    """scripts/submit.sh exports what `python -m streaming_app.common.jvm_jit` prints."""
    base = {k: v for k, v in os.environ.items() if k not in (ENV, JAVA_TOOL_OPTIONS)}
    out = subprocess.run(
        [sys.executable, "-m", "streaming_app.common.jvm_jit"],
        env={**base, **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out == printed + "\n"


@pytest.mark.parametrize(
    ("given", "env", "options"),
    [
        (None, {}, C1_ONLY),
        ("-Dx=1", {}, f"-Dx=1 {C1_ONLY}"),
        ("-Dx=1", {ENV: "1"}, f"-Dx=1 {C1_ONLY}"),
        # The user's choice: Java's JIT everywhere, or in the executors only.
        (None, {ENV: "0"}, None),
        ("-Dx=1", {ENV: DRIVER_ONLY}, "-Dx=1"),
        ("-XX:TieredStopAtLevel=4", {}, "-XX:TieredStopAtLevel=4"),
        ("-XX:-TieredCompilation -Dx=1", {}, "-XX:-TieredCompilation -Dx=1"),
    ],
)
def test_a_clusters_executors_get_c1_only_after_the_users_options(
    given: str | None, env: dict[str, str], options: str | None
) -> None:
    assert executor_options(given, env) == options


def test_driver_only_keeps_c1_for_the_driver() -> None:
    assert jit_env({ENV: DRIVER_ONLY}) == {ENV: DRIVER_ONLY, JAVA_TOOL_OPTIONS: C1_ONLY}
