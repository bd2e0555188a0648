"""The driver JVM's JIT setting: C1 only on a local master, unless the user says otherwise."""

from __future__ import annotations

import pytest

from streaming_app.common.jvm_jit import C1_ONLY, ENV, JAVA_TOOL_OPTIONS, jit_env, launch_master

LOCAL = ["spark-submit", "--master", "local[2]", "pyspark-shell"]


def test_the_master_is_read_from_the_launch_command() -> None:
    assert launch_master(LOCAL) == "local[2]"
    assert launch_master(["spark-submit", "--master=spark://h:7077", "pyspark-shell"]) == (
        "spark://h:7077"
    )
    assert launch_master(["spark-submit", "pyspark-shell"]) is None


def test_a_local_master_gets_c1_only_after_the_users_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert jit_env(LOCAL, {"A": "1"}) == {"A": "1", JAVA_TOOL_OPTIONS: C1_ONLY}
    given = {JAVA_TOOL_OPTIONS: "-Dx=1"}
    assert jit_env(LOCAL, given) == {JAVA_TOOL_OPTIONS: f"-Dx=1 {C1_ONLY}"}


@pytest.mark.parametrize(
    ("command", "env"),
    [
        (["spark-submit", "--master", "spark://h:7077", "pyspark-shell"], {}),
        (["spark-submit", "pyspark-shell"], {}),
        (LOCAL, {ENV: "0"}),
        (LOCAL, {JAVA_TOOL_OPTIONS: "-XX:TieredStopAtLevel=4"}),
        (LOCAL, {JAVA_TOOL_OPTIONS: "-XX:-TieredCompilation"}),
    ],
)
def test_a_cluster_master_or_the_users_own_choice_leaves_the_jit_alone(
    command: list[str], env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert jit_env(command, env) == env
