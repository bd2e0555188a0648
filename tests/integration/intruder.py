"""What a host without the secret tries, run on it: `python -m tests.integration.intruder`.

Each action prints one JSON object on stdout, and never raises for what the cluster refuses:
the refusal is its result, for the test to judge.

- `job MASTER NAME [--secret S]`: a PySpark application on the standalone master (with
  `--secret`: authentication and encryption on, with that secret) runs a small job.
- `fetch DRIVER OUT PATH...`: a local-mode PySpark asks the driver's RPC file server
  (`spark://HOST:PORT`) for each PATH (`files/NAME`, `jars/NAME`, or a whole
  `spark://HOST:PORT/files/NAME`), as an executor would, with no secret; what it is given
  is saved under OUT.
- `serve HOST PORT FILE SECONDS`: the positive control of `fetch`: Spark's RPC file server
  with no secret, on HOST:PORT, serving FILE for that long; prints its URI first.
- `kill-ui UI SECONDS`: for that long, every kill link the driver's web UI shows is
  submitted (with the CSRF token the page holds), and every job and stage it lists, and a
  few ids beyond, is sent the kill request without one (GET and POST).
- `kill-app MASTER_UI APP_ID`: the master UI's kill links for the application, then its
  kill request without a token.
- `http METHOD URL [FORM] [--save FILE]`: one HTTP request (FORM: `k=v&k=v`, sent as a form).
- `connect HOST PORT`: whether a TCP connection is accepted, refused or times out.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

# No proxy, whatever the environment says: every address is one of the test's own.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _first_line(exc: BaseException) -> str:
    java = getattr(exc, "java_exception", None)  # py4j's: the Java exception says what
    text = (str(java.toString()) if java is not None else str(exc)).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text.splitlines()[0]}"


def job(master: str, name: str, secret: str | None, wait: float) -> dict[str, Any]:
    """Start an application on `master` and run a job; what happened."""
    from pyspark import SparkConf, SparkContext

    conf = (
        SparkConf()
        .setMaster(master)
        .setAppName(name)
        .set("spark.ui.enabled", "false")
        .set("spark.executor.memory", "512m")
    )
    if secret is not None:
        conf.set("spark.authenticate", "true").set("spark.authenticate.secret", secret)
        # As conf/secure has it: only the secret differs from an application of the cluster's.
        conf.set("spark.network.crypto.enabled", "true")
        conf.set("spark.network.crypto.saslFallback", "false")
    result: dict[str, Any] = {"ran": False}
    try:
        sc = SparkContext(conf=conf)
    except Exception as exc:  # refused while starting: that is the answer
        result["error"] = _first_line(exc)
        return result
    result["app_id"] = sc.applicationId

    def run() -> None:
        try:
            result["sum"] = sc.parallelize(range(10), 2).sum()
            result["ran"] = True
        except Exception as exc:
            result["error"] = _first_line(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    deadline = time.monotonic() + wait
    # Until the job ends, or Spark gives the application up (the context stopped), or `wait`.
    while worker.is_alive() and time.monotonic() < deadline:
        worker.join(1)
        if worker.is_alive() and sc._jsc is not None and sc._jsc.sc().isStopped():
            result["error"] = "the SparkContext was stopped (Spark gave the application up)"
            break
    else:
        if worker.is_alive():
            result["error"] = f"no result within {wait:.0f} s"
    sc.stop()
    return result


def _rpc_env(name: str, host: str, port: int, client: bool) -> tuple[Any, Any]:
    """A JVM of PySpark's and a Spark RpcEnv in it with no secret (client: no server)."""
    from pyspark.java_gateway import launch_gateway

    gateway = launch_gateway()
    jvm = gateway.jvm
    conf = jvm.org.apache.spark.SparkConf(False)
    config = jvm.java.lang.Class.forName("org.apache.spark.internal.config.package$")
    secret_file_entry = config.getField("MODULE$").get(None).AUTH_SECRET_FILE()
    security = jvm.org.apache.spark.SecurityManager(
        conf, jvm.scala.Option.empty(), secret_file_entry
    )
    rpc_env = jvm.org.apache.spark.rpc.RpcEnv.create(name, host, port, conf, security, client)
    return gateway, rpc_env


def fetch(driver: str, out: Path, paths: list[str]) -> dict[str, Any]:
    """Ask the driver's file server for each path, as an executor would; save what comes
    (its / as _).

    A client-mode RpcEnv of PySpark's JVM, with no secret, does what `SparkEnv.get.rpcEnv`
    would: py4j cannot call SparkEnv itself (its methods name protobuf classes, which
    pyspark's jars do not have).
    """
    gateway, rpc_env = _rpc_env("intruder", "0.0.0.0", 0, client=True)
    jvm = gateway.jvm
    found: dict[str, Any] = {}
    out.mkdir(parents=True, exist_ok=True)
    for name in paths:  # a path, or a whole URI (another file server's)
        try:
            channel = rpc_env.openChannel(name if "://" in name else f"{driver}/{name}")
            stream = jvm.java.nio.channels.Channels.newInputStream(channel)
            data = bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
            stream.close()
        except Exception as exc:
            found[name] = {"error": _first_line(exc)}
            continue
        (out / re.sub(r"[/:]", "_", name)).write_bytes(data)
        found[name] = {"bytes": len(data)}
    rpc_env.shutdown()
    gateway.shutdown()
    return found


def serve(host: str, port: int, path: Path, seconds: float) -> dict[str, Any]:
    """Serve `path` from a file server as the driver's, with no secret, for `seconds`; its
    URI (`spark://HOST:PORT/files/NAME`) is printed as soon as it is served."""
    gateway, rpc_env = _rpc_env("control", host, port, client=False)
    uri = rpc_env.fileServer().addFile(gateway.jvm.java.io.File(str(path)))
    print(json.dumps({"uri": uri}), flush=True)
    time.sleep(seconds)
    rpc_env.shutdown()
    gateway.shutdown()
    return {"uri": uri, "served_s": seconds}


def http(method: str, url: str, form: str | None, save: Path | None) -> dict[str, Any]:
    """One request; its status (or why none came) and the first bytes of the body."""
    data = form.encode() if form is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    try:
        with _OPENER.open(request, timeout=30) as response:
            status, body = response.status, response.read()
            final = response.url
    except urllib.error.HTTPError as exc:
        status, body, final = exc.code, exc.read(), url
    except OSError as exc:
        return {"error": _first_line(exc)}
    if save is not None:
        save.write_bytes(body)
    return {"status": status, "url": final, "body": body[:2000].decode("utf-8", "replace")}


def _get_json(url: str) -> Any:
    with _OPENER.open(url, timeout=30) as response:
        return json.load(response)


def _get_text(url: str) -> str:
    with _OPENER.open(url, timeout=30) as response:
        return str(response.read().decode("utf-8", "replace"))


_FORM = re.compile(r"<form[^>]*action=\"([^\"]*kill[^\"]*)\"[^>]*>(.*?)</form>", re.S)
_INPUT = re.compile(r"<input[^>]*name=\"([^\"]+)\"[^>]*value=\"([^\"]*)\"")


def kill_forms(page_url: str) -> list[tuple[str, str]]:
    """The kill links of a UI page: each form's absolute action and its fields, URL-encoded.

    A kill link is a POST form whose hidden fields carry the id and the UI's CSRF token
    (Spark 4.3), which the page shows to whoever reads it.
    """
    return parse_kill_forms(page_url, _get_text(page_url))


def parse_kill_forms(page_url: str, html: str) -> list[tuple[str, str]]:
    """The kill forms in a page's HTML (kill_forms)."""
    return [
        (urllib.parse.urljoin(page_url, action), urllib.parse.urlencode(_INPUT.findall(body)))
        for action, body in _FORM.findall(html)
    ]


def _tally(counts: dict[str, int], key: str) -> None:
    counts[key] = counts.get(key, 0) + 1


def _post_all(forms: list[tuple[str, str]], label: str, statuses: dict[str, int]) -> None:
    for url, fields in forms:
        got = http("POST", url, fields, None)
        _tally(statuses, f"{label}: {got.get('status', got.get('error'))}")


def kill_ui(ui: str, seconds: float) -> dict[str, Any]:
    """For `seconds` (one round at least), in rounds: submit every kill link the driver's UI
    shows on its jobs and stages pages, as a click would; and send the kill request with no
    token (GET and POST) for the running jobs and stages, every one listed in the first
    round, and the next few ids, which the next batch will have."""
    statuses: dict[str, int] = {}
    listing: dict[str, int] = {}  # why the UI could not be read, when it could not
    rounds = aimed_at_active = links = 0
    deadline = time.monotonic() + seconds
    while (rounds == 0 and time.monotonic() < deadline + 120) or time.monotonic() < deadline:
        try:
            (app,) = _get_json(f"{ui}/api/v1/applications")
            api = f"{ui}/api/v1/applications/{app['id']}"
            jobs = {job["jobId"]: job["status"] for job in _get_json(f"{api}/jobs")}
            stages = {s["stageId"]: s["status"] for s in _get_json(f"{api}/stages")}
            forms = kill_forms(f"{ui}/jobs/") + kill_forms(f"{ui}/stages/")
        except (OSError, ValueError) as exc:
            _tally(listing, _first_line(exc))
            time.sleep(0.5)
            continue
        links += len(forms)
        _post_all(forms, "kill link", statuses)
        for page, listed in (("jobs/job", jobs), ("stages/stage", stages)):
            active = {n for n, status in listed.items() if status in ("RUNNING", "ACTIVE")}
            upcoming = range(max(listed, default=-1) + 1, max(listed, default=-1) + 4)
            aimed_at_active += len(active)
            for number in sorted((active if rounds else set(listed)) | set(upcoming)):
                for method in ("GET", "POST"):
                    url = f"{ui}/{page}/kill/?id={number}&terminate=true"
                    got = http(method, url, f"id={number}&terminate=true", None)
                    _tally(statuses, f"{method} {page}/kill: {got.get('status', got.get('error'))}")
        rounds += 1
    return {
        "statuses": statuses,
        "kill_links": links,
        "rounds": rounds,
        "aimed_at_active": aimed_at_active,
        "listing_errors": listing,
    }


def kill_app(master_ui: str, app_id: str) -> dict[str, Any]:
    """Submit the kill links the master's UI shows for the application, then its kill
    request with no token, as `POST /app/kill/` with `id` and `terminate=true`."""
    statuses: dict[str, int] = {}
    forms = kill_forms(f"{master_ui}/") + kill_forms(f"{master_ui}/app/?appId={app_id}")
    _post_all(forms, "kill link", statuses)
    fields = urllib.parse.urlencode({"id": app_id, "terminate": "true"})
    _post_all([(f"{master_ui}/app/kill/", fields)], "POST app/kill", statuses)
    return {"statuses": statuses, "kill_links": len(forms)}


def connect(host: str, port: int) -> dict[str, Any]:
    """Whether a TCP connection to host:port is accepted."""
    try:
        socket.create_connection((host, port), timeout=5).close()
    except ConnectionRefusedError:
        return {"connect": "refused"}
    except OSError as exc:
        return {"connect": _first_line(exc)}
    return {"connect": "accepted"}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="intruder")
    actions = parser.add_subparsers(dest="action", required=True)
    p_job = actions.add_parser("job")
    p_job.add_argument("master")
    p_job.add_argument("name")
    p_job.add_argument("--secret")
    p_job.add_argument("--wait", type=float, default=100)
    p_fetch = actions.add_parser("fetch")
    p_fetch.add_argument("driver")
    p_fetch.add_argument("out", type=Path)
    p_fetch.add_argument("paths", nargs="+")
    p_serve = actions.add_parser("serve")
    p_serve.add_argument("host")
    p_serve.add_argument("port", type=int)
    p_serve.add_argument("path", type=Path)
    p_serve.add_argument("seconds", type=float)
    p_kill = actions.add_parser("kill-ui")
    p_kill.add_argument("ui")
    p_kill.add_argument("seconds", type=float)
    p_kill_app = actions.add_parser("kill-app")
    p_kill_app.add_argument("master_ui")
    p_kill_app.add_argument("app_id")
    p_http = actions.add_parser("http")
    p_http.add_argument("method")
    p_http.add_argument("url")
    p_http.add_argument("form", nargs="?")
    p_http.add_argument("--save", type=Path)
    p_connect = actions.add_parser("connect")
    p_connect.add_argument("host")
    p_connect.add_argument("port", type=int)
    args = parser.parse_args(argv)
    if args.action == "job":
        result = job(args.master, args.name, args.secret, args.wait)
    elif args.action == "fetch":
        result = fetch(args.driver, args.out, args.paths)
    elif args.action == "serve":
        result = serve(args.host, args.port, args.path, args.seconds)
    elif args.action == "kill-ui":
        result = kill_ui(args.ui, args.seconds)
    elif args.action == "kill-app":
        result = kill_app(args.master_ui, args.app_id)
    elif args.action == "http":
        result = http(args.method, args.url, args.form, args.save)
    else:
        result = connect(args.host, args.port)
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
