"""The structured Kafka source's offset planning, JSON form, options and read limit (no JVM)."""

from __future__ import annotations

import json

import pytest
from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from streaming_app.errors import SourceDataLostError
from streaming_app.settings.loading import load_config
from streaming_app.sources.kafka.offsets import BrokerOffsets, OffsetRange
from streaming_app.structured.kafka_offsets import (
    from_json,
    initial_positions,
    next_positions,
    ranges_between,
    to_json,
)
from streaming_app.structured.kafka_options import KafkaReadSettings
from streaming_app.structured.kafka_source import (
    KafkaPartition,
    KafkaStreamReader,
    cap_of,
    read_limit,
)

BROKER = BrokerOffsets(
    earliest={("t", 0): 0, ("t", 1): 5, ("u", 0): 0},
    latest={("t", 0): 100, ("t", 1): 20, ("u", 0): 3},
    committed={("t", 0): 40},
)


def test_offsets_round_trip_through_json_in_sparks_kafka_format() -> None:
    positions = {("t", 1): 7, ("t", 0): 42, ("u-v.w_x", 10): 0}
    offset = to_json(positions)
    assert offset == {"t": {"0": 42, "1": 7}, "u-v.w_x": {"10": 0}}
    assert from_json(json.loads(json.dumps(offset))) == positions
    assert from_json({}) == {} == from_json(None)


@pytest.mark.parametrize(
    "bad", [{"t": 3}, {"t": {"x": 1}}, {"t": {"0": -1}}, {"t": {"0": "5"}}, {"t": {"0": True}}]
)
def test_a_malformed_offset_is_refused(bad: dict) -> None:
    with pytest.raises(ValueError, match="malformed"):
        from_json(bad)


@pytest.mark.parametrize(
    ("starting", "expected"),
    [
        ("earliest", {("t", 0): 0, ("t", 1): 5, ("u", 0): 0}),
        ("latest", {("t", 0): 100, ("t", 1): 20, ("u", 0): 3}),
        ("t:1=9", {("t", 0): 0, ("t", 1): 9, ("u", 0): 0}),
        ("committed", {("t", 0): 40, ("t", 1): 5, ("u", 0): 0}),
    ],
)
def test_initial_positions_follow_starting_offsets(starting: str, expected: dict) -> None:
    assert initial_positions(BROKER, starting, "fail").positions == expected


def test_an_explicit_offset_out_of_range_fails_or_starts_at_earliest() -> None:
    with pytest.raises(SourceDataLostError):
        initial_positions(BROKER, "t:1=2", "fail")
    planned = initial_positions(BROKER, "t:1=2", "earliest")
    assert planned.positions[("t", 1)] == 5 and planned.warnings


def test_latest_goes_to_the_brokers_latest_or_the_cap() -> None:
    start = {("t", 0): 10, ("t", 1): 18, ("u", 0): 3}
    assert next_positions(start, BROKER, "earliest", 0, "fail").positions == {
        ("t", 0): 100,
        ("t", 1): 20,
        ("u", 0): 3,
    }
    assert next_positions(start, BROKER, "earliest", 25, "fail").positions == {
        ("t", 0): 35,
        ("t", 1): 20,
        ("u", 0): 3,
    }


def test_a_new_partition_takes_its_earliest_as_position_first_and_is_read_next() -> None:
    start = {("t", 0): 100, ("t", 1): 20}  # ("u", 0) is new
    planned = next_positions(start, BROKER, "latest", 0, "fail")
    assert planned.positions[("u", 0)] == 0 and planned.notes
    assert ranges_between(start, planned.positions) == []
    nxt = next_positions(planned.positions, BROKER, "latest", 0, "fail").positions
    assert ranges_between(planned.positions, nxt) == [OffsetRange("u", 0, 0, 3)]


def test_a_topic_created_after_the_start_follows_starting_offsets() -> None:
    assert next_positions({}, BROKER, "earliest", 0, "fail").positions[("t", 1)] == 5


def test_positions_out_of_range() -> None:
    behind = {("t", 0): 100, ("t", 1): 2, ("u", 0): 3}  # retention deleted 2..4
    with pytest.raises(SourceDataLostError):
        next_positions(behind, BROKER, "earliest", 0, "fail")
    planned = next_positions(behind, BROKER, "earliest", 0, "earliest")
    # The read of [2, 20) skips the lost records itself and counts them.
    assert planned.positions[("t", 1)] == 20 and planned.warnings
    ahead = {("t", 0): 100, ("t", 1): 50, ("u", 0): 3}  # topic recreated
    planned = next_positions(ahead, BROKER, "earliest", 0, "earliest")
    assert planned.positions[("t", 1)] == 5  # the position only: read from the next batch
    assert ranges_between(ahead, planned.positions) == []


def test_a_partition_gone_from_the_broker_keeps_its_position() -> None:
    start = {("t", 0): 100, ("t", 1): 20, ("u", 0): 3, ("gone", 0): 9}
    planned = next_positions(start, BROKER, "earliest", 0, "fail")
    assert planned.positions[("gone", 0)] == 9 and planned.warnings


def test_partitions_between_start_and_end() -> None:
    start = {("t", 0): 10, ("t", 1): 20, ("u", 0): 1}
    end = {("u", 0): 3, ("t", 1): 20, ("t", 0): 35, ("v", 0): 4}
    assert ranges_between(start, end) == [OffsetRange("t", 0, 10, 35), OffsetRange("u", 0, 1, 3)]
    assert ranges_between(end, end) == []
    reader = KafkaStreamReader(settings())
    parts = reader.partitions(to_json(start), to_json(end))
    assert [p.offset_range for p in parts if isinstance(p, KafkaPartition)] == ranges_between(
        start, end
    )


def test_the_cap_is_the_default_read_limit() -> None:
    assert read_limit(80) == ReadMaxRows(80) and cap_of(ReadMaxRows(80)) == 80
    assert read_limit(0) == ReadAllAvailable() and cap_of(ReadAllAvailable()) == 0
    # 40 records per second per partition, 2 s micro-batches: 80 per partition.
    reader = KafkaStreamReader(settings(max_rate_per_partition="40"))
    assert reader.getDefaultReadLimit() == ReadMaxRows(80)


def settings(**cli: str) -> KafkaReadSettings:
    config = load_config(
        None, cli={"source": "kafka", "topics": "t,u", "batch_interval": "2", **cli}
    )
    return KafkaReadSettings.from_config(config)


def test_options_carry_every_setting_and_credentials_of_todays_config() -> None:
    config = load_config(
        None,
        cli={"source": "kafka", "topics": "t,u", "group_id": "g", "ssl_check_hostname": "false"},
        env={"STREAMING_APP_SASL_PLAIN_PASSWORD": "pw-1", "STREAMING_APP_SSL_PASSWORD": "pw-2"},
    )
    read = KafkaReadSettings.from_config(config)
    options = read.to_options()
    assert all(isinstance(v, str) for v in options.values())
    # Spark hands options back in a case-insensitive dict.
    assert KafkaReadSettings.from_options(CaseInsensitiveDict(options)) == read
    assert read.connection.sasl_plain_password == "pw-1"
    # Spark redacts option values whose names match spark.redaction.regex (password).
    assert {k for k, v in options.items() if v.startswith("pw-")} == {
        "sasl_plain_password",
        "ssl_password",
    }
    assert "pw-1" not in repr(read) and "pw-2" not in repr(read)


def test_kafka_give_up_after_reaches_the_planner_and_readers_through_the_options() -> None:
    for given, expected in (("15", 15.0), ("", None)):
        config = load_config(
            None,
            cli={"source": "kafka", "topics": "t"},
            env={"STREAMING_APP_KAFKA_GIVE_UP_AFTER": given},
        )
        options = KafkaReadSettings.from_config(config).to_options()
        assert KafkaReadSettings.from_options(options).give_up_after == expected
    assert "kafka_give_up_after" not in options  # no limit: no option


def test_the_reader_pickles_without_a_client() -> None:
    import pickle

    reader = KafkaStreamReader(settings())
    reader._broker = object()  # type: ignore[assignment]
    copy = pickle.loads(pickle.dumps(reader))
    assert copy.settings == reader.settings and copy._broker is None


def test_both_engines_describe_the_kafka_source_in_the_same_line() -> None:
    from streaming_app.sources.kafka.settings import KafkaSettings, source_line

    config = load_config(
        None,
        cli={"source": "kafka", "topics": "t,u", "batch_interval": "2"},
        env={"STREAMING_APP_MAX_RATE_PER_PARTITION": "40"},
    )
    line = source_line(KafkaReadSettings.from_config(config))
    assert line == source_line(KafkaSettings.from_config(config))
    assert "topics=t,u " in line and "max_records_per_partition_per_batch=80 " in line
