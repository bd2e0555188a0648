"""The scale-out figures as markdown: gains, every CPU second, the timeline, a projection.

Pure functions of scale_out.json's runs (bench/scale/scale_out.py): medians over the runs
of each kind, the app's gain (2 workers over 1) against plain Python's (2 processes over
1, the same cores), the CPU each process class spent a word, whether the machine's cores
or the app bound the gain, and what more cores would give from the CPU a word.
"""

from __future__ import annotations

import statistics
from typing import Any

CORES = 2
TARGET = 0.85  # the app's gain against plain Python's, at least
# Process classes that run where the executors run (they multiply with workers), and the
# ones that stay one each whatever the workers (bench/harness/proc_cpu.py's CLASSES).
EXECUTOR_SIDE = ("executor JVM", "Python workers")
DRIVER_SIDE = ("driver JVM", "driver Python")
PROJECTED_CORES = (1, 2, 4, 8, 16)
# What runs on a worker host, and so under its quota with --worker-cpu (bench/scale/cpu_caps.py).
WORKER_HOST_SIDE = (*EXECUTOR_SIDE, "worker daemon", "plain Python")


def median(values: list[float]) -> float:
    """The median; NaN for none."""
    return statistics.median(values) if values else float("nan")


def rate(runs: list[dict[str, Any]]) -> float:
    """Median words/s of processing (a run's words over its steady processing time)."""
    return median([r["mean_words_per_s"] for r in runs])


def gains(found: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """App and plain Python, 1 and 2, their gains, and the app's gain over plain's."""
    app = (rate(found["app-1"]), rate(found["app-2"]))
    plain = (rate(found["plain-1"]), rate(found["plain-2"]))
    app_gain, plain_gain = app[1] / app[0], plain[1] / plain[0]
    return {
        "app": app, "plain": plain, "app_gain": app_gain, "plain_gain": plain_gain,
        "relative": app_gain / plain_gain, "meets": app_gain / plain_gain >= TARGET,
    }  # fmt: skip


def cpu_per_word(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Median µs of CPU a word, per process class, over the runs (0 where a run had none)."""
    classes = sorted({k for r in runs for k in r["cpu_us_per_word"]})
    return {k: median([r["cpu_us_per_word"].get(k, 0.0) for r in runs]) for k in classes}


def quota_use(runs: list[dict[str, Any]], hosts: int, share: float) -> float:
    """Median share of their CPU quota (`share` of a core each, on `hosts` worker hosts)
    that the worker hosts' processes used over the runs' steady windows."""
    return median([
        sum(r["cpu_s"].get(k, 0.0) for k in WORKER_HOST_SIDE)
        / (hosts * share * max(r["window_s"], 1e-9))
        for r in runs
    ])  # fmt: skip


def machine_rate(runs: list[dict[str, Any]]) -> float:
    """Words/s the machine's CORES would give at these runs' CPU a word (every process on
    the hosts), were they all busy: the ceiling of this machine for this work."""
    total = sum(cpu_per_word(runs).values())
    return CORES * 1e6 / total if total else float("nan")


def verdict(found: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Machine-bound or app-bound: how busy the machine was with one worker and with two,
    the app's rate with two against the machine's ceiling at its CPU a word, and the
    signs of the app's own bounds (stages of one task, a stage on one executor only, the
    driver's share of a batch)."""
    two = found["app-2"]
    busy = {n: median([r["machine_busy_share"] for r in found[f"app-{n}"]]) for n in (1, 2)}
    ceiling = machine_rate(two)
    of_ceiling = rate(two) / ceiling
    timeline = two[0]["timeline"]
    one_executor = [s["name"] for s in timeline["stages"]
                    if len(s["executors"]) == 1 and max(s["tasks"]) > 1]  # fmt: skip
    driver_share = median([r["timeline"]["driver_gap_ms"] / max(r["processing_s"] * 1000, 1)
                           for r in two])  # fmt: skip
    machine_bound = busy[2] >= 0.9 and of_ceiling >= 0.85
    return {
        "busy": busy, "ceiling": ceiling, "of_ceiling": of_ceiling,
        "one_task_stages": timeline["one_task_stages"], "one_executor_stages": one_executor,
        "driver_share": driver_share, "machine_bound": machine_bound,
    }  # fmt: skip


def projection(
    found: dict[str, list[dict[str, Any]]], batch_lines: int, partitions: int
) -> list[dict[str, Any]]:
    """Words/s with N executor cores, each a core of its own, the driver, broker and
    database on machines of their own: (a) the executors' CPU a word (2-worker runs) over N
    cores; (b) the 1-worker batch's timeline: what no stage runs in (the driver's) stays,
    the stages that read Kafka divide by min(N, partitions) (one task a partition), the
    others (the state's, partitioned as the cores) by N; the same with as many partitions as
    cores; (c) the driver's Python process on one core at its CPU a word. The projection
    is the least of (a), (b) and (c); `with_partitions` the least with (b) at N partitions."""
    per_word = cpu_per_word(found["app-2"])
    executors = sum(per_word.get(k, 0.0) for k in EXECUTOR_SIDE)
    driver_python = per_word.get("driver Python", 0.0)
    one = found["app-1"]
    batch_s = median([r["processing_s"] for r in one])
    read_s = median([r["timeline"].get("read_ms", 0) for r in one]) / 1000
    stages_s = median([r["timeline"]["stages_ms"] for r in one]) / 1000
    fixed_s = max(batch_s - stages_s, 0.0)
    other_s = max(stages_s - read_s, 0.0)
    words = batch_lines * 10
    rows = []
    for cores in PROJECTED_CORES:
        cpu_bound = cores * 1e6 / executors if executors else float("inf")
        timeline_bound = words / (fixed_s + read_s / min(cores, partitions) + other_s / cores)
        spread = words / (fixed_s + (read_s + other_s) / cores)
        driver_bound = 1e6 / driver_python if driver_python else float("inf")
        rows.append({
            "cores": cores, "cpu_bound": cpu_bound, "timeline_bound": timeline_bound,
            "driver_bound": driver_bound,
            "projected": min(cpu_bound, timeline_bound, driver_bound),
            "with_partitions": min(cpu_bound, spread, driver_bound),
        })  # fmt: skip
    return rows


def _n(value: float) -> str:
    return f"{value:,.0f}"


def sink_report(
    sink: str, found: dict[str, list[dict[str, Any]]], batch_lines: int, partitions: int,
    worker_cpu: float | None = None,
) -> list[str]:  # fmt: skip
    """One sink's tables: rates and gains, CPU a word by class, the timeline, projection."""
    g = gains(found)
    lines = [
        f"### Sink: {sink}",
        "",
        "| run | words/s of processing (median) | each run | gain 2/1 |",
        "|---|---|---|---|",
    ]
    for kind, label in (("app", "app, {} worker(s) of 1 core"),
                        ("plain", "plain Python, {} process(es)")):  # fmt: skip
        for n in (1, 2):
            runs = found[f"{kind}-{n}"]
            each = ", ".join(_n(r["mean_words_per_s"]) for r in runs)
            gain = f"**x{g[f'{kind}_gain']:.2f}**" if n == 2 else ""
            lines.append(f"| {label.format(n)} | {_n(g[kind][n - 1])} | {each} | {gain} |")
    lines += [
        "",
        f"The app's gain against plain Python's: **{g['relative']:.2f}** (target ≥ {TARGET}: "
        f"{'met' if g['meets'] else 'not met'}).",
        "",
        "CPU a word (µs, median over the runs) by process class, over each run's steady "
        "window, and how busy the machine was (all its processes, against "
        f"{CORES} cores × the window):",
        "",
        "| process class | app 1 worker | app 2 workers | plain 1 | plain 2 |",
        "|---|---|---|---|---|",
    ]
    tables = {key: cpu_per_word(runs) for key, runs in found.items()}
    classes = sorted({k for t in tables.values() for k in t},
                     key=lambda k: -tables["app-2"].get(k, 0.0))  # fmt: skip
    keys = ("app-1", "app-2", "plain-1", "plain-2")
    for kind in classes:
        lines.append(f"| {kind} | " + " | ".join(f"{tables[k].get(kind, 0.0):.3f}" for k in keys)
                     + " |")  # fmt: skip
    lines.append("| **all processes on the hosts** | " + " | ".join(
        f"**{sum(tables[k].values()):.3f}**" for k in keys) + " |")  # fmt: skip
    busy = [median([r["machine_busy_share"] for r in found[k]]) for k in keys]
    share = [median([r["hosts_share_of_busy"] for r in found[k]]) for k in keys]
    lines.append("| machine busy (share of 2 cores) | " + " | ".join(f"{b:.0%}" for b in busy)
                 + " |")  # fmt: skip
    lines.append("| hosts' processes / machine busy | " + " | ".join(f"{s:.0%}" for s in share)
                 + " |")  # fmt: skip
    used: list[float] = []
    if worker_cpu:
        used = [quota_use(found[k], int(k[-1]), worker_cpu) for k in keys]
        lines.append(f"| worker hosts' CPU / their quota ({worker_cpu:g} of a core each) | "
                     + " | ".join(f"{u:.0%}" for u in used) + " |")  # fmt: skip
    lines += ["", *trend_report(found), "", *timeline_report(found), ""]
    if worker_cpu:
        return [*lines, quota_verdict(used[0], used[1])]
    return [
        *lines,
        *verdict_report(verdict(found), g),
        "",
        *projection_report(projection(found, batch_lines, partitions), partitions),
    ]


def quota_verdict(one: float, two: float) -> str:
    """Under --worker-cpu: what bound the runs, from the worker hosts' use of their quota."""
    bound = "the workers' quota" if min(one, two) >= 0.9 else "not the quota alone"
    return (
        f"Verdict under the quota: bounded by **{bound}**: the worker hosts used {one:.0%} "
        f"of theirs with one worker and {two:.0%} with two. No projection: a batch's "
        "timeline here is the quota's (the runs without --worker-cpu project)."
    )


def trend_report(found: dict[str, list[dict[str, Any]]]) -> list[str]:
    """CPU seconds of each class a steady batch, first to last (first run of each app kind):
    a class that falls as the run goes on is a young JVM warming up, not work a word."""
    lines = ["CPU seconds a steady batch, by class, first → last steady batch (first run of "
             "each):", "", "| run | class | each steady batch |", "|---|---|---|"]  # fmt: skip
    for n in (1, 2):
        per_batch = found[f"app-{n}"][0].get("cpu_s_by_batch", [])
        classes = sorted({k for b in per_batch for k in b}, key=lambda k: -per_batch[0].get(k, 0))
        for kind in classes[:5]:
            each = ", ".join(f"{b.get(kind, 0.0):.2f}" for b in per_batch)
            lines.append(f"| app, {n} worker(s) | {kind} | {each} |")
    return lines


def timeline_report(found: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Each app run kind's batch: the driver's gap, its stages (tasks, time, executors)."""
    lines = [
        "The batch's timeline (Spark's event log, steady batches, medians; first run of "
        "each): window = first job's start to last job's end; driver gap = the part of it "
        "when no stage ran.",
        "",
        "| run | processing (metrics) | window | stages running | driver gap | jobs | "
        "scheduling delay, first → last steady batch |",
        "|---|---|---|---|---|---|---|",
    ]
    for n in (1, 2):
        r = found[f"app-{n}"][0]
        t = r["timeline"]
        delays = r["scheduling_delay_s"]
        lines.append(
            f"| app, {n} worker(s) | {r['processing_s']} s | {t['window_ms']} ms | "
            f"{t['stages_ms']} ms | {t['driver_gap_ms']} ms | {t['jobs']} | "
            f"{delays[0] if delays else '—'} → {delays[-1] if delays else '—'} s |"
        )
    lines += ["", "| run | stage (call site) | tasks | duration | tasks' run time | "
              "tasks' CPU | executors |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for n in (1, 2):
        for s in found[f"app-{n}"][0]["timeline"]["stages"]:
            lines.append(
                f"| {n} worker(s) | `{s['name']}` | {'/'.join(map(str, s['tasks']))} | "
                f"{s['duration_ms']} ms | {s['task_run_ms']} ms | {s['task_cpu_ms']} ms | "
                f"{', '.join(s['executors'])} |"
            )
    return lines


def verdict_report(v: dict[str, Any], g: dict[str, Any]) -> list[str]:
    """The verdict in words, with its figures."""
    bound = "the machine's cores" if v["machine_bound"] else "not the machine alone"
    return [
        f"Verdict: bounded by **{bound}**. The machine was {v['busy'][1]:.0%} busy with one "
        f"worker and {v['busy'][2]:.0%} with two; at the 2-worker runs' CPU a word its "
        f"{CORES} cores give at most {_n(v['ceiling'])} words/s, and the app made "
        f"{_n(g['app'][1])} ({v['of_ceiling']:.0%} of that). Stages of one task: "
        f"{', '.join(f'`{s}`' for s in v['one_task_stages']) or 'none'}; stages of several "
        "tasks that all ran on one executor with two workers: "
        f"{', '.join(f'`{s}`' for s in v['one_executor_stages']) or 'none'}; the driver's "
        f"gap (no stage running) is {v['driver_share']:.0%} of a 2-worker batch.",
    ]


def projection_report(rows: list[dict[str, Any]], partitions: int) -> list[str]:
    """The projection table."""
    lines = [
        "Projection for N executor cores (each a core of its own; driver, broker and "
        "database on machines of their own): (a) the executors' CPU a word over N cores; "
        "(b) the 1-worker batch with what no stage runs in kept, the Kafka read stage "
        f"divided by min(N, {partitions} partitions) and the other stages by N; (c) the "
        "driver's Python process on one core. Projected: the least of the three; and with "
        "as many Kafka partitions as executor cores.",
        "",
        "| executor cores | (a) CPU-bound words/s | (b) timeline-bound | (c) driver-bound | "
        f"projected, {partitions} partitions | projected, N partitions |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['cores']} | {_n(r['cpu_bound'])} | {_n(r['timeline_bound'])} | "
            f"{_n(r['driver_bound'])} | **{_n(r['projected'])}** | {_n(r['with_partitions'])} |"
        )
    return lines


def report(results: dict[str, Any]) -> list[str]:
    """Every sink's section, after the configuration and the machine."""
    m = results["machine"]
    lines = [
        f"Measured {results['date']} on {m['cpu']}; Python {m['python']}, PySpark "
        f"{m['pyspark']}, {m['java']}. Backlog of {results['lines']:,} lines (10 words, Zipf "
        f"over 100k words) on {results['partitions']} Kafka partitions; batches of "
        f"{results['batch_lines']:,} lines every 2 s; plain Python reads the first "
        f"{results.get('plain_lines', results['lines']):,} lines; {results['runs']} round(s) "
        "a sink, interleaved and rotated.",
    ]
    worker_cpu = results.get("worker_cpu")
    if worker_cpu:
        lines.append(
            f"Each worker host held to {worker_cpu:g} of a core (a cgroup CPU quota, "
            "--worker-cpu): its executor's JVM and Python workers, or its plain Python "
            "process; the driver, broker, master and PostgreSQL share what is left. The "
            "machine's figures (busy, its ceiling in the verdict) count the 2 cores."
        )
    side = results.get("env_side")
    for sink in results["sinks"]:
        found = results[sink]
        lines += ["", *sink_report(sink, found, results["batch_lines"],
                                   results["partitions"], worker_cpu)]  # fmt: skip
        if side:
            label, env = side
            lines += ["", *side_report(sink, found, label, env, results["batch_lines"],
                                       results["partitions"], worker_cpu)]  # fmt: skip
    return lines


def side_key(key: str, label: str) -> str:
    """The key of an --env-side's run in a sink's runs: `app-2@LABEL`."""
    return f"{key}@{label}"


def side_report(
    sink: str, found: dict[str, list[dict[str, Any]]], label: str, env: dict[str, str],
    batch_lines: int, partitions: int, worker_cpu: float | None = None,
) -> list[str]:  # fmt: skip
    """An --env-side's tables (its app runs against the same plain Python runs), after a
    line comparing its rates and gain with the app's own."""
    mine = {**found, **{k: found[side_key(k, label)] for k in ("app-1", "app-2")}}
    base, other = gains(found), gains(mine)
    setting = ", ".join(f"`{k}={v}`" for k, v in env.items())
    return [
        f"**{label}** ({setting} added to the driver's environment), in the same rounds: "
        f"1 worker {_n(other['app'][0])} words/s (x{other['app'][0] / base['app'][0]:.2f} "
        f"the app's), 2 workers {_n(other['app'][1])} "
        f"(x{other['app'][1] / base['app'][1]:.2f}); gain x{other['app_gain']:.2f} against "
        f"x{base['app_gain']:.2f}, {other['relative']:.2f} of plain Python's against "
        f"{base['relative']:.2f}.",
        "",
        *sink_report(f"{sink}, {label}", mine, batch_lines, partitions, worker_cpu),
    ]
