"""What the Kafka stream captures into the checkpoint: its settings, without credentials."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from streaming_app.settings.rules import DEFAULT_TOKEN_PATTERN
from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.sources.kafka.offsets import (
    cap_for,
)

if TYPE_CHECKING:
    from streaming_app.settings.schema import AppConfig


@dataclass(frozen=True)
class KafkaSettings:
    """What the Kafka stream captures into the checkpoint: no credentials."""

    checkpoint_dir: str
    topics: tuple[str, ...]
    starting_offsets: str
    max_per_partition: int
    group_id: str | None
    on_out_of_range: str
    max_value_bytes: int
    batch_ms: int
    checkpoint_ms: int
    connection: KafkaConnection
    window_ms: int = 0  # a default: checkpoints written before windows lack it
    # The executors hand each poll's values on as one text joined with newlines
    # (reader.joined_text): only for the word count's default pattern, which never
    # matches across a newline. False for checkpoints written before it.
    joined_values: bool = False

    @classmethod
    def from_config(cls, config: AppConfig) -> KafkaSettings:
        """The settings of a new stream."""
        return cls(
            checkpoint_dir=config.checkpoint_dir,
            topics=config.topics,
            starting_offsets=config.starting_offsets,
            max_per_partition=cap_for(config.max_rate_per_partition, config.batch_ms),
            group_id=config.group_id,
            on_out_of_range=config.on_offset_out_of_range,
            max_value_bytes=config.max_value_bytes,
            batch_ms=config.batch_ms,
            checkpoint_ms=config.checkpoint_ms,
            connection=KafkaConnection.from_config(config).without_secrets(),
            window_ms=config.window_ms or 0,
            joined_values=config.job == "wordcount"
            and config.token_pattern == DEFAULT_TOKEN_PATTERN,
        )


class DescribedSource(Protocol):
    """What the start-up line names: either engine's Kafka settings."""

    @property
    def topics(self) -> tuple[str, ...]: ...
    @property
    def starting_offsets(self) -> str: ...
    @property
    def max_per_partition(self) -> int: ...
    @property
    def connection(self) -> KafkaConnection: ...


def source_line(settings: DescribedSource) -> str:
    """The Kafka source's line in the start-up log, the same for both engines."""
    return (
        f"source: kafka topics={','.join(settings.topics)} "
        f"bootstrap_servers={settings.connection.bootstrap_servers} "
        f"starting_offsets={settings.starting_offsets} "
        f"max_records_per_partition_per_batch={settings.max_per_partition or 'unlimited'} "
        "(exactly-once across driver crashes)"
    )
