"""Human-readable text of `checkpoint inspect` on a Structured Streaming checkpoint."""

from __future__ import annotations

import json
from typing import Any

from streaming_app.tools.checkpoint_text import human_size, sizes_lines, snapshots_lines, table

# Partitions listed one by one up to this many; beyond, a summary line per operator.
PARTITION_ROWS = 16
# The SQL settings Spark keeps in the checkpoint that matter to this app's state.
_CONF_SHOWN = {
    "spark.sql.shuffle.partitions": "shuffle (state) partitions",
    "spark.sql.streaming.stateStore.providerClass": "state store provider",
}


def render_structured(report: dict[str, Any]) -> str:
    """The Structured Streaming inspect report for people: aligned sections to scan."""
    lines = [f"Checkpoint {report['checkpoint_dir']}", _engine(report["query"])]
    lines += _record(report.get("record") or {})
    for section in (_batches, _sources, _state, snapshots_lines, sizes_lines):
        lines += ["", *section(report)]
    if report["notes"]:
        lines += ["", "Notes", *(f"  - {note}" for note in report["notes"])]
    return "\n".join(lines)


def _engine(query: dict[str, Any]) -> str:
    if query["status"] == "ok":
        return f"Engine: structured (Structured Streaming query id {query['id']})"
    if query["status"] == "none":
        return "Engine: structured (no metadata file: query id unknown)"
    return f"Engine: structured (metadata unreadable: {query['error']})"


def _record(record: dict[str, Any]) -> list[str]:
    """The guard's record: who wrote the checkpoint and the settings it must keep."""
    if record.get("status") != "ok":
        return []
    settings = " ".join(
        f"{k}={','.join(map(str, v)) if isinstance(v, list) else v}"
        for k, v in record["settings"].items()
    )
    return [
        f"Written by streaming_app {record['app_version']} on Spark {record['spark_version']}"
        f" (engine {record['engine']}); guarded settings: {settings}"
    ]


def _batch_id(value: int | None) -> str:
    return "none" if value is None else str(value)


def _batches(report: dict[str, Any]) -> list[str]:
    section = report["batches"]
    lines = [
        f"Micro-batches: offsets log {section['offsets_entries']} entries, commits log "
        f"{section['commits_entries']} entries",
        f"  last planned: {_batch_id(section['last_planned'])}; last committed: "
        f"{_batch_id(section['last_committed'])}"
        + (
            f" ({section['last_committed_time_utc']} UTC)"
            if section["last_committed_time_utc"]
            else ""
        ),
    ]
    conf = section["conf"] or {}
    lines += [f"  {label}: {conf[key]}" for key, label in _CONF_SHOWN.items() if key in conf]
    pending = section["pending"]
    if not pending:
        return [*lines, "  planned but not committed: none"]
    lines.append(f"  planned but not committed: {len(pending)}")
    rows = [
        [
            str(p["batch_id"]),
            str(p["batch_time_utc"] or "-"),
            "-" if p["watermark_ms"] is None else str(p["watermark_ms"]),
            _offsets(p["source_offsets"]),
            _files(p["files"]),
        ]
        for p in pending
    ]
    lines += table(["BATCH", "UTC", "WATERMARK MS", "SOURCE OFFSETS", "FILES"], rows)
    return lines + [f"  {p['batch_id']}: {p['error']}" for p in pending if p["error"]]


def _offsets(offsets: list[Any] | None) -> str:
    if offsets is None:
        return "-"
    return " ".join(
        f"{n}:{'-' if o is None else json.dumps(o, separators=(',', ':'))}"
        for n, o in enumerate(offsets)
    )


def _files(files: list[list[str] | None] | None) -> str:
    """`0: a.txt b.txt`: the file names each source's log assigns the batch."""
    if not files or all(f is None for f in files):
        return "-"
    return "; ".join(
        f"{n}: " + (" ".join(p.rpartition("/")[2] for p in f) or "none")
        for n, f in enumerate(files)
        if f is not None
    )


def _sources(report: dict[str, Any]) -> list[str]:
    sources = report["sources"]
    if not sources:
        return ["Source logs: none (sources/ lists the files a files source read)"]
    rows = [[str(s["source"]), str(s["entries"]), _batch_id(s["last_batch_id"])] for s in sources]
    return [f"Source logs: {len(sources)}", *table(["SOURCE", "ENTRIES", "LAST BATCH"], rows)]


def _state(report: dict[str, Any]) -> list[str]:
    section = report["state"]
    if section is None:
        return ["State: none (no state/ folder)"]
    operators = section["operators"]
    lines = [
        f"State: {len(operators)} operator(s), {human_size(section['total_bytes'])} "
        "(state version N is micro-batch N-1's)"
    ]
    rows = [
        [
            str(op["operator_id"]),
            (op["name"] or "?")
            + (f" ({', '.join(op['state_variables'])})" if op["state_variables"] else ""),
            str(op["partitions"]),
            human_size(op["size_bytes"]),
            _versions(op["oldest_latest_version"], op["latest_version"]),
        ]
        for op in operators
    ]
    lines += table(["OPERATOR", "NAME (STATE VARIABLES)", "PARTITIONS", "SIZE", "LATEST VERSION"],
                   rows)  # fmt: skip
    for op in operators:
        details = op["partition_details"]
        if not details or len(details) > PARTITION_ROWS:
            continue
        lines.append(f"  operator {op['operator_id']} partitions:")
        rows = [
            [str(p["partition"]), human_size(p["size_bytes"]), _batch_id(p["latest_version"])]
            for p in details
        ]
        lines += table(["PARTITION", "SIZE", "LATEST VERSION"], rows, indent="    ")
    return lines


def _versions(oldest: int | None, newest: int | None) -> str:
    """`5`, or `3..5` when the partitions' latest versions differ."""
    if newest is None:
        return "none"
    return str(newest) if oldest == newest else f"{oldest}..{newest}"
