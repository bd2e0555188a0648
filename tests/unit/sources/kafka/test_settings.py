"""What the Kafka stream checkpoints: validated settings, never a password."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming_app.errors import ConfigError
from streaming_app.settings.loading import load_config
from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.sources.kafka.settings import KafkaSettings


def test_checkpointed_settings_carry_no_password(tmp_path: Path) -> None:
    config = load_config(
        env={"STREAMING_APP_SASL_PLAIN_PASSWORD": "hunter2"},
        cli={
            "source": "kafka",
            "topics": "t",
            "checkpoint_dir": str(tmp_path),
            "security_protocol": "sasl_ssl",
            "sasl_mechanism": "PLAIN",
            "sasl_plain_username": "u",
        },
    )
    assert "hunter2" not in repr(KafkaSettings.from_config(config))
    assert KafkaSettings.from_config(config).connection.sasl_plain_password is None
    live = KafkaConnection.from_config(config)
    assert live.kafka_kwargs()["sasl_plain_password"] == "hunter2"
    assert live.kafka_kwargs()["security_protocol"] == "SASL_SSL"
    assert "hunter2" not in repr(live)
    assert "hunter2" not in repr(config)


def test_kafka_settings_are_validated_together() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(
            env={},
            cli={
                "source": "kafka",
                "starting_offsets": "committed",
                "security_protocol": "sasl_plaintext",
                "max_rate_per_partition": "-1",
            },
        )
    message = str(info.value)
    for part in (
        "topics: required",
        "committed needs a group_id",
        "sasl_mechanism: required",
        "--max-rate-per-partition: must be 0",
    ):
        assert part in message
