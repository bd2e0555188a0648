"""The structured engine's SQL settings: the state store's, then the user's."""

from __future__ import annotations

from streaming_app.settings.loading import load_config
from streaming_app.structured.session import ROCKSDB_PROVIDER, SNAPSHOT_CADENCE, session_conf

MIN_DELTAS = "spark.sql.streaming.stateStore.minDeltasForSnapshot"


def test_the_state_store_uploads_a_snapshot_often_enough_for_every_total_to_read_fast() -> None:
    conf = session_conf(load_config(None, env={}, cli={"engine": "structured"}))
    assert conf["spark.sql.streaming.stateStore.providerClass"] == ROCKSDB_PROVIDER
    for key, value in SNAPSHOT_CADENCE.items():
        assert conf[key] == value
    # Spark's defaults are 10 versions and a minute: at most two changelogs to replay.
    assert int(conf[MIN_DELTAS]) <= 2


def test_a_setting_of_the_users_wins() -> None:
    config = load_config(
        None, env={}, cli={"engine": "structured"}, spark_conf=(f"{MIN_DELTAS}=10",)
    )
    assert session_conf(config)[MIN_DELTAS] == "10"
