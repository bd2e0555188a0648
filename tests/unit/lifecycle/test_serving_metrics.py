"""The run's endpoint serves the intervals its alert rules compare against."""

from __future__ import annotations

from typing import Any

import pytest

from streaming_app.common.prometheus import endpoint
from streaming_app.lifecycle.serving_metrics import serving_metrics
from streaming_app.settings.loading import load_config
from tests.unit.common.test_prometheus import samples


def served_intervals(**cli: Any) -> dict[str, float]:
    given = {"source": "files", "input_dir": "/in", "metrics_port": "0", **cli}
    config = load_config(None, {}, {k: str(v) for k, v in given.items()})
    with serving_metrics(config):
        served = endpoint()
        assert served is not None
        got = samples(served)
    assert endpoint() is None  # stopped with the run
    return {
        name.removeprefix("streaming_app_").removesuffix("_interval_seconds"): value
        for (name, _), value in got.items()
        if name.endswith("_interval_seconds") and name != "streaming_app_batch_interval_seconds"
    }


@pytest.mark.parametrize(
    ("cli", "expected"),
    [
        # DStreams checkpoint the state every checkpoint interval (10 batches by default);
        # snapshots are on by default, at the checkpoint interval.
        ({"batch_interval": 2}, {"checkpoint": 20, "snapshot": 20}),
        ({"checkpoint_interval": 30}, {"checkpoint": 30, "snapshot": 30}),
        # Each micro-batch of the structured engine commits to its checkpoint.
        (
            {"engine": "structured", "batch_interval": 3, "checkpoint_interval": 30},
            {"checkpoint": 3, "snapshot": 30},
        ),
        ({"snapshot_keep": 0}, {"checkpoint": 10}),  # snapshots off: no interval served
    ],
)
def test_the_checkpoint_and_snapshot_intervals_are_served(
    cli: dict[str, Any], expected: dict[str, float]
) -> None:
    assert served_intervals(**cli) == expected
