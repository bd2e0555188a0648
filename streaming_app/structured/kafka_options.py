"""The structured Kafka source's settings, carried as the data source's options.

Driver side builds the options from today's config (`to_options`); the data source's
workers (planner and executors) rebuild the settings from them (`from_options`). Spark
keeps options in memory (the query plan, the pickled data source), not in the
checkpoint: credentials come from today's config or environment on every start, and the
option names that hold them contain "password", which Spark redacts in plans and logs
(`spark.redaction.regex`). tests/integration/test_structured_kafka.py greps the
checkpoint for a password set through the environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.sources.kafka.offsets import cap_for

if TYPE_CHECKING:
    from streaming_app.settings.schema import AppConfig

_CONNECTION_FIELDS = tuple(f.name for f in fields(KafkaConnection))


@dataclass(frozen=True)
class KafkaReadSettings:
    """What the structured Kafka source needs to plan and read (credentials included)."""

    topics: tuple[str, ...]
    starting_offsets: str
    max_per_partition: int  # offsets per partition per micro-batch (0 = no cap)
    group_id: str | None
    on_out_of_range: str
    max_value_bytes: int
    connection: KafkaConnection  # its repr masks the passwords
    give_up_after: float | None = None  # kafka_give_up_after (None: retried until stopped)

    @classmethod
    def from_config(cls, config: AppConfig) -> KafkaReadSettings:
        """Today's settings: connection and credentials from the running config."""
        return cls(
            topics=tuple(config.topics),
            starting_offsets=config.starting_offsets,
            max_per_partition=cap_for(config.max_rate_per_partition, config.batch_ms),
            group_id=config.group_id,
            on_out_of_range=config.on_offset_out_of_range,
            max_value_bytes=config.max_value_bytes,
            connection=KafkaConnection.from_config(config),
            give_up_after=config.kafka_give_up_after,
        )

    def to_options(self) -> dict[str, str]:
        """The data source's options (strings; a None setting is left out)."""
        options = {
            "topics": ",".join(self.topics),
            "starting_offsets": self.starting_offsets,
            "max_per_partition": str(self.max_per_partition),
            "on_offset_out_of_range": self.on_out_of_range,
            "max_value_bytes": str(self.max_value_bytes),
        }
        if self.group_id is not None:
            options["group_id"] = self.group_id
        if self.give_up_after is not None:
            options["kafka_give_up_after"] = repr(self.give_up_after)
        for name in _CONNECTION_FIELDS:
            value = getattr(self.connection, name)
            if value is not None:
                options[name] = str(value).lower() if isinstance(value, bool) else str(value)
        return options

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> KafkaReadSettings:
        """Inverse of `to_options` (Spark lower-cases option names; ours are lower case)."""
        given: dict[str, Any] = {n: options[n] for n in _CONNECTION_FIELDS if n in options}
        if "ssl_check_hostname" in given:
            given["ssl_check_hostname"] = given["ssl_check_hostname"] == "true"
        connection = KafkaConnection(**given)
        return cls(
            topics=tuple(t for t in options["topics"].split(",") if t),
            starting_offsets=options["starting_offsets"],
            max_per_partition=int(options["max_per_partition"]),
            group_id=options.get("group_id"),
            on_out_of_range=options["on_offset_out_of_range"],
            max_value_bytes=int(options["max_value_bytes"]),
            connection=connection,
            give_up_after=(
                float(options["kafka_give_up_after"]) if "kafka_give_up_after" in options else None
            ),
        )
