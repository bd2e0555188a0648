"""How `scripts/submit.sh` gets the app's code to the executors: `installed` or `zip`.

On a secured cluster the driver must ship no code (its file server hands any file it
ships to any host) and the executors must fork their Python workers from the app's daemon
(Spark's stock daemon hands them the cluster's secret). Every way of turning
authentication on counts, read as the app reads it: `spark_secret_file` from the flag,
the config file or the environment; `spark.authenticate true` from the app's
`spark_conf`, spark-submit's `--conf` or `--properties-file`, or `spark-defaults.conf` in
the Spark conf directory. Run as `python -m streaming_app.cli.submit_plan [SPARK-SUBMIT
ARGS] -- [RUN ARGS]`: prints `installed` or `zip` on stdout, and why on stderr; a
setting the app would refuse is its one line and exit 2.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from streaming_app.errors import StreamingAppError

AUTHENTICATE = "spark.authenticate"
# A line of a Java properties file: the key ends at the first `=`, `:` or white space.
_PROPERTY = re.compile(r"([^=:\s]+)\s*[=:\s]\s*(.*)")


def _properties(path: Path) -> dict[str, str]:
    """A Spark properties file (spark-defaults.conf): `key value` or `key=value` lines."""
    found: dict[str, str] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return found
    for line in lines:
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        match = _PROPERTY.match(line)
        if match:
            found[match.group(1)] = match.group(2).strip()
    return found


def _submit_conf(submit_args: Sequence[str]) -> tuple[dict[str, str], str | None]:
    """spark-submit's `--conf k=v` settings and its `--properties-file`."""
    conf: dict[str, str] = {}
    properties = None
    args = list(submit_args)
    for i, arg in enumerate(args):
        value = None
        for flag in ("--conf", "-c", "--properties-file"):
            if arg == flag and i + 1 < len(args):
                value = args[i + 1]
            elif arg.startswith(flag + "="):
                value = arg[len(flag) + 1 :]
            if value is not None:
                if flag == "--properties-file":
                    properties = value
                else:
                    key, _, setting = value.partition("=")
                    conf[key.strip()] = setting.strip()
                break
    return conf, properties


def plan(
    submit_args: Sequence[str], run_args: Sequence[str], env: Mapping[str, str]
) -> tuple[str, str]:
    """`installed` or `zip`, and why. ConfigError if the run's settings do not load."""
    from streaming_app.cli.run import run, run_config

    with run.make_context("run", list(run_args), resilient_parsing=True) as ctx:
        params = dict(ctx.params)
    config = run_config(
        params.pop("config_file", None),
        params.pop("sinks", None),
        params.pop("spark_conf", None),
        params,
        env,
    )
    if config.spark_secret_file:
        return "installed", "spark_secret_file is set"
    submit_conf, properties = _submit_conf(submit_args)
    conf_dir = config.spark_conf_dir or env.get("SPARK_CONF_DIR")
    layers = [
        ("the app's spark_conf", dict(config.spark_conf)),
        ("spark-submit's --conf", submit_conf),
    ]
    if properties:
        layers.append((f"--properties-file {properties}", _properties(Path(properties))))
    elif conf_dir:
        defaults = Path(conf_dir) / "spark-defaults.conf"
        layers.append((str(defaults), _properties(defaults)))
    for where, settings in layers:
        if settings.get(AUTHENTICATE, "").lower() == "true":
            return "installed", f"{AUTHENTICATE} is true in {where}"
    return "zip", "authentication is off"


def main(argv: Sequence[str]) -> int:
    args = list(argv)
    split = args.index("--") if "--" in args else len(args)
    submit_args, run_args = args[:split], args[split + 1 :]
    try:
        code, why = plan(submit_args, run_args, os.environ)
    except StreamingAppError as error:  # the settings' one line (ConfigError, exit 2)
        print(f"Error: {error}", file=sys.stderr)
        return error.exit_code
    print(f"==> {why}: STREAMING_APP_CODE={code}", file=sys.stderr)
    print(code)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
