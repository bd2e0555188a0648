"""Wiring the configured sinks into the DStream graph, as output operations (driver side).

Runs once, on the driver, when the factory builds the graph. The lambdas registered here
are pickled into the checkpoint and run on the driver every batch; they capture only
plain values, frozen settings and module functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streaming_app.sinks.console import write_console, write_window_console
from streaming_app.sinks.files import FilesSettings, write_totals, write_window_files

if TYPE_CHECKING:
    from pyspark.streaming import DStream

    from streaming_app.settings.schema import AppConfig
    from streaming_app.state.view import StateView


def attach_sinks(
    state: DStream[Any],
    view: StateView,
    counts: DStream[tuple[str, int]],
    config: AppConfig,
    context_id: str,
) -> None:
    """Attach the configured sinks to the state, as output operations.

    view: how each sink reads the state's RDD in its own job (totals, changes, top).
    """
    # The lambdas capture only plain values, frozen settings and module functions, so
    # they pickle into the checkpoint.
    sinks, top_n = config.sinks, config.top_n
    if "files" in sinks:
        files_settings = FilesSettings.from_config(config, context_id)
        state.foreachRDD(lambda t, rdd: write_totals(t, rdd, view, files_settings))
    if "console" in sinks:
        state.foreachRDD(lambda t, rdd: write_console(t, rdd, view, top_n))
    if "postgres" in sinks:
        from streaming_app.sinks.postgres.stream import PostgresTarget, with_changes, write_postgres

        target = PostgresTarget(
            config.postgres_table,
            config.source,
            config.checkpoint_dir,
            config.batch_ms,
            context_id,
            numeric=config.job == "keyed-sum",
        )
        if view.bucketed:
            # The buckets know what the batch changed.
            state.foreachRDD(lambda t, rdd: write_postgres(t, rdd, target, view))
        else:
            changes = state.transformWith(lambda t, rdd, batch: with_changes(t, rdd, batch), counts)
            changes.foreachRDD(lambda t, rdd: write_postgres(t, rdd, target))


def attach_window_sinks(stream: DStream[tuple[str, Any]], config: AppConfig) -> None:
    """Write the window with every configured sink, once per slide."""
    # Plain values only: the lambdas are pickled into the checkpoint.
    top_n, output_dir, keep = config.top_n, config.output_dir, config.output_keep
    if "files" in config.sinks:
        assert output_dir is not None
        stream.foreachRDD(lambda t, rdd: write_window_files(t, rdd, output_dir, keep))
    if "console" in config.sinks:
        stream.foreachRDD(lambda t, rdd: write_window_console(t, rdd, top_n))
    if "postgres" in config.sinks:
        from streaming_app.sinks.postgres.stream import WindowTarget, write_window_postgres

        target = WindowTarget(config.postgres_table, config.job == "keyed-sum")
        stream.foreachRDD(lambda t, rdd: write_window_postgres(t, rdd, target))
