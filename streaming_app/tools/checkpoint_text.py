"""Human-readable text of `checkpoint inspect` and `checkpoint clean` reports."""

from __future__ import annotations

import json
from typing import Any

from streaming_app.tools.checkpoint_clean import CleanPlan, Removal
from streaming_app.tools.checkpoint_inspect import utc


def human_size(size: int | None) -> str:
    """Bytes as B, KiB, MiB or GiB."""
    if size is None:
        return "-"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def table(header: list[str], rows: list[list[str]], indent: str = "  ") -> list[str]:
    """Rows as left-aligned columns under a header."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return [
        (indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))).rstrip()
        for row in [header, *rows]
    ]


def render_clean(plan: CleanPlan, dry_run: bool) -> str:
    """The clean plan for people: what goes (or went), with sizes and reasons, and what stays."""
    base = plan.checkpoint_dir.rstrip("/") + "/"
    lines = []
    if not plan.removals:
        lines.append(f"Nothing to remove in {plan.checkpoint_dir}.")
    else:
        verb = "Would remove" if dry_run else "Removed"
        lines.append(
            f"{verb} {len(plan.removals)} item(s), {human_size(plan.total_bytes)}, "
            f"from {plan.checkpoint_dir}"
            + (" (dry run; --apply removes them):" if dry_run else ":")
        )
        rows = _clean_rows(plan, base)
        lines += table(["KIND", "PATH", "SIZE", "WHY"], rows)
    if plan.kept:
        lines += ["Kept:", *(f"  - {note}" for note in plan.kept)]
    return "\n".join(lines)


_LOG_KINDS = ("offsets", "commits", "input-files")


def _clean_rows(plan: CleanPlan, base: str) -> list[list[str]]:
    """One row per removal, except log entries: one row per log (first .. last, count)."""
    rows: list[list[str]] = []
    logs: dict[str, list[Removal]] = {}
    for removal in plan.removals:
        if removal.kind in _LOG_KINDS:
            logs.setdefault(removal.kind, []).append(removal)
            continue
        path = removal.paths[0].removeprefix(base)
        rows.append([removal.kind, path, human_size(removal.size_bytes), removal.reason])
    for kind, entries in logs.items():
        span = entries[0].paths[0].removeprefix(base)
        if len(entries) > 1:
            last = entries[-1].paths[0].rpartition("/")[2]
            span += f" .. {last} ({len(entries)} entries)"
        size = sum(r.size_bytes for r in entries)
        rows.append([kind, span, human_size(size), entries[0].reason])
    return rows


def render_inspect(report: dict[str, Any]) -> str:
    """The inspect report for people: aligned sections to scan."""
    lines = [f"Checkpoint {report['checkpoint_dir']}", "Engine: dstream"]
    for section in (_spark_files, _metadata, _offsets, _input_files, snapshots_lines, _rdds,
                    sizes_lines, _lag):  # fmt: skip
        lines += ["", *section(report)]
    if report["notes"]:
        lines += ["", "Notes", *(f"  - {note}" for note in report["notes"])]
    return "\n".join(lines)


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _yes_no(value: bool | None) -> str:
    return "unknown" if value is None else ("yes" if value else "NO")


def _spark_files(report: dict[str, Any]) -> list[str]:
    files = report["spark_files"]
    lines = [f"Spark checkpoint files: {len(files)} (newest first; Spark keeps the last 10)"]
    rows = [
        [
            f["name"],
            str(utc(f["batch_time_ms"])),
            human_size(f["size_bytes"]),
            _yes_no(f["readable"]),
            str(utc(f["checkpoint_time_ms"]) or "-"),
            _refs(f["rdd_refs"], f["missing_rdds"]),
        ]
        for f in files
    ]
    header = ["FILE", "BATCH TIME (UTC)", "SIZE", "READABLE", "TIME INSIDE (UTC)", "RDD REFERENCES"]
    lines += table(header, rows) if files else []
    lines += [f"  {f['name']}: {f['error']}" for f in files if f["error"]]
    latest = report["latest_checkpoint"]
    if latest["batch_time_ms"] is not None:
        recovers = latest["recovers_from"] or ("none" if report["verified"] else "not verified")
        lines.append(
            f"  latest: {latest['batch_time_ms']} ({latest['batch_time_utc']} UTC); "
            f"Spark recovers from: {recovers}"
        )
    return lines


def _refs(refs: list[str] | None, missing: list[str] | None) -> str:
    """`39dc0ae5…/rdd-249 rdd-290`: folders shortened, RDDs gone from disk marked."""
    if refs is None:
        return "-"
    by_folder: dict[str, list[str]] = {}
    for ref in refs:
        folder, _, rdd = ref.partition("/")
        by_folder.setdefault(folder, []).append(rdd + (" (gone)" if ref in (missing or []) else ""))
    return "; ".join(f"{f[:8]}…/{' '.join(rdds)}" for f, rdds in by_folder.items()) or "none"


def _metadata(report: dict[str, Any]) -> list[str]:
    section = report["metadata"]
    if section["status"] == "none":
        return ["Metadata: none (written before streaming_app 0.2 or by other code)"]
    if section["status"] == "unreadable":
        return [f"Metadata: unreadable: {section['error']}"]
    record = section["record"]
    lines = ["Metadata"]
    rows = [[key, json.dumps(record[key])] for key in record if key != "settings"]
    rows.append(["created_at", f"{utc(record.get('created_at_ms'))} UTC"])
    rows += [[f"settings.{k}", json.dumps(v)] for k, v in sorted(record["settings"].items())]
    return lines + table(["FIELD", "VALUE"], rows)[1:]


def _offsets(report: dict[str, Any]) -> list[str]:
    section = report["offsets"]
    if section is None:
        return ["Offset log: none"]
    entries, commits = (
        _count(section["entries"], "entry", "entries"),
        _count(section["commits"], "commit"),
    )
    lines = [f"Offset log: {entries}, {commits}"]
    rows = [
        [
            str(e["batch_time_ms"]),
            str(e["batch_time_utc"]),
            "-" if e["records"] is None else str(e["records"]),
            "yes" if e["committed"] else "no",
            " ".join(f"{t}:{p}=[{a},{b})" for t, p, a, b in e["ranges"] or []) or "-",
        ]
        for e in section["tail"]
    ]
    lines += table(["BATCH", "UTC", "RECORDS", "COMMITTED", "RANGES"], rows) if rows else []
    planned = ", ".join(map(str, section["uncommitted"])) or "none"
    return [*lines, f"  planned but not committed: {planned}"]


def _input_files(report: dict[str, Any]) -> list[str]:
    section = report["input_files"]
    if section is None:
        return ["Input-files log: none"]
    rows = [
        [str(e["batch_time_ms"]), str(e["batch_time_utc"]), ", ".join(e["files"] or []) or "-"]
        for e in section["tail"]
    ]
    lines = [f"Input-files log: {_count(section['entries'], 'entry', 'entries')}"]
    return lines + (table(["BATCH", "UTC", "FILES"], rows) if rows else [])


def snapshots_lines(report: dict[str, Any]) -> list[str]:
    """The report's `snapshots` section as text."""
    section = report["snapshots"]
    if section["directory"] is None:
        return ["Snapshots: none"]
    lines = [f"Snapshots: {section['count']} in {section['directory']}"]
    latest = section["latest"]
    if latest:
        lines += [
            f"  latest: {latest['path']}",
            f"    batch {latest['batch_time_ms']} ({latest['batch_time_utc']} UTC), "
            f"{latest['words']} words, total {latest['total']}",
            f"    position: {latest['position']}",
        ]
    return lines


def _rdds(report: dict[str, Any]) -> list[str]:
    folders = report["rdd_folders"]
    rows = []
    for folder in folders:
        rdds = folder["rdds"]
        referenced = [r["name"] for r in rdds if r["referenced"]]
        if rdds and all(r["referenced"] is None for r in rdds):
            refs = "references unknown"
        else:
            refs = f"{len(referenced)} referenced" + (
                f": {' '.join(referenced)}" if referenced else ""
            )
        rows.append(
            [
                folder["name"] + ("/ (newest)" if folder["newest"] else "/"),
                human_size(folder["size_bytes"]),
                f"{len(rdds)} RDD checkpoint(s), {refs}" if rdds else "empty",
            ]
        )
    lines = [f"RDD checkpoint folders: {len(folders)}"]
    return lines + (table(["FOLDER", "SIZE", "CONTENT"], rows)[1:] if rows else [])


def sizes_lines(report: dict[str, Any]) -> list[str]:
    """The report's `sizes` section as text (checkpoint-* files and hidden files grouped)."""
    entries = report["sizes"]["entries"]
    grouped: dict[str, list[int]] = {}
    for name, size in entries.items():
        key = "checkpoint-* files" if name.startswith("checkpoint-") else name
        key = "hidden files (.crc, temp)" if name.startswith(".") else key
        grouped.setdefault(key, []).append(size)
    rows = [
        [name + (f" ({len(sizes)})" if len(sizes) > 1 else ""), human_size(sum(sizes))]
        for name, sizes in sorted(grouped.items(), key=lambda item: -sum(item[1]))
    ]
    rows.append(["total", human_size(report["sizes"]["total_bytes"])])
    return ["Sizes", *table(["ENTRY", "SIZE"], rows)[1:]]


def _lag(report: dict[str, Any]) -> list[str]:
    section = report["kafka_lag"]
    if section["status"] == "not_kafka":
        return ["Kafka lag: not a Kafka checkpoint"]
    if section["status"] != "ok":
        return [f"Kafka lag: {section['status']}: {section['note']}"]
    lines = [
        f"Kafka lag against {section['bootstrap_servers']} after committed batch "
        f"{section['batch_time_ms']}: total {section['total_lag']}"
    ]
    rows = [
        [f"{p['topic']}:{p['partition']}", str(p["end_offset"]), str(p["latest_offset"]),
         str(p["lag"])]
        for p in section["partitions"]
    ]  # fmt: skip
    return lines + table(["PARTITION", "COMMITTED END", "LATEST", "LAG"], rows)
