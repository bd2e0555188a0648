"""docker-compose.yml, the Dockerfile and conf/docker.ini agree (no Docker engine needed)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path, PurePosixPath
from typing import Any

import click
import pytest
import yaml  # type: ignore[import-untyped]  # no stubs in the test extra

from streaming_app.cli.main import cli
from streaming_app.lifecycle.worker_daemon import DAEMON_MODULE, PRELOADED
from streaming_app.settings.loading import load_config
from streaming_app.settings.schema import AppConfig

ROOT = Path(__file__).resolve().parents[2]
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text("utf-8"))
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
DOCKERFILE = (ROOT / "Dockerfile").read_text("utf-8")
DOCKER_INI = ROOT / "conf" / "docker.ini"
# Where the Dockerfile puts the project (WORKDIR /app, COPY . /app).
APP_DIR = PurePosixPath("/app")
# The services that `docker compose up` starts; the rest must sit behind a profile.
DEFAULT_SERVICES = {"spark-secret", "kafka", "spark-master", "spark-worker", "app", "producer"}
SECURED = ("spark-master", "spark-worker", "app")
DEMO_SERVICES = {"netcat", "demo"}
PINNED_TAG = re.compile(r"\d+\.\d+\.\d+")
DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|us|µs|ns|h|m|s)")
DURATION_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


# Seconds after stop_timeout that Spark and the JVM need to shut down.
SHUTDOWN_MARGIN = 15


def docker_config() -> AppConfig:
    """conf/docker.ini as the app service loads it (no STREAMING_APP_* from this machine)."""
    return load_config(str(DOCKER_INI), env={})


def compose_seconds(value: object) -> float:
    """A compose duration such as `45s` or `1m30s`, in seconds."""
    text = str(value)
    parts = DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"{text!r} is not a compose duration such as 45s or 1m30s")
    return sum(float(number) * DURATION_UNITS[unit] for number, unit in parts)


def command(service: str) -> list[str]:
    """The service's command as an argument list."""
    raw = SERVICES[service].get("command")
    assert raw, f"service {service} has no command"
    return shlex.split(raw) if isinstance(raw, str) else [str(arg) for arg in raw]


def value_of(args: list[str], flag: str, where: str) -> str:
    """The argument after `flag`, failing clearly if the flag is missing."""
    assert flag in args[:-1], f"{where}: no {flag} VALUE in {args}"
    return args[args.index(flag) + 1]


def image_tag(image: str, repository: str) -> str:
    """The tag of `repository:tag`, failing if the image is another repository."""
    name, _, tag = image.partition(":")
    assert name == repository, f"image {image!r} is not the official {repository}"
    return tag


def dockerfile_resolved() -> str:
    """The Dockerfile with its ARG defaults substituted."""
    defaults = dict(re.findall(r"^ARG (\w+)=(\S+)", DOCKERFILE, re.M))
    return re.sub(
        r"\$\{(\w+)\}|\$(\w+)",
        lambda m: defaults.get(m.group(1) or m.group(2), m.group(0)),
        DOCKERFILE,
    )


def mounts(service: str) -> dict[str, str]:
    """{container path: named volume} of the service's named-volume mounts."""
    found = {}
    for volume in SERVICES[service].get("volumes", []):
        if isinstance(volume, dict):
            source, target = volume.get("source", ""), volume["target"]
        else:
            source, _, rest = str(volume).partition(":")
            target = rest.split(":")[0]
        if source in (COMPOSE.get("volumes") or {}):
            found[target] = source
    return found


def volume_holding(service: str, path: str) -> tuple[str, str]:
    """(volume, mount point) of the named volume under which `path` lies in `service`."""
    for target, source in mounts(service).items():
        if PurePosixPath(path).is_relative_to(target):
            return source, target
    raise AssertionError(f"{path} is on no named volume of service {service}")


def option_names(command_name: str) -> set[str]:
    """Every --flag of a `streaming-app` subcommand."""
    sub = cli.commands[command_name]
    names: set[str] = set()
    for param in sub.params:
        if isinstance(param, click.Option):
            names.update(param.opts + param.secondary_opts)
    return names


def test_images_are_the_official_ones_with_pinned_tags() -> None:
    kafka_tag = image_tag(SERVICES["kafka"]["image"], "apache/kafka")
    assert PINNED_TAG.match(kafka_tag), f"apache/kafka:{kafka_tag} is not a pinned version"
    tag = image_tag(COMPOSE["x-spark-image"], "apache/spark")
    assert PINNED_TAG.match(tag), f"x-spark-image: apache/spark:{tag} is not a pinned version"
    assert "python3" in tag, f"x-spark-image: apache/spark:{tag} has no Python for executors"
    # The master and the worker run the app's image, built FROM the cluster's Spark (the
    # test below): the worker's executors import the app, and conf/secure/spark-env.sh
    # reads the secret with the app's reader on both.
    for name in ("spark-master", "spark-worker"):
        image = SERVICES[name]["image"]
        assert image == SERVICES["app"]["image"], f"{name} runs {image}"


def test_the_app_image_is_the_cluster_spark_image_with_the_same_pyspark() -> None:
    resolved = dockerfile_resolved()
    base = re.search(r"^FROM (\S+)", resolved, re.M)
    assert base, "the Dockerfile has no FROM"
    spark_image = COMPOSE["x-spark-image"]
    assert base.group(1) == spark_image, f"Dockerfile FROM {base.group(1)}, cluster {spark_image}"
    pin = re.search(r"pyspark==([\w.]+)", resolved)
    assert pin, "the Dockerfile does not pin pyspark==VERSION"
    version = PINNED_TAG.match(image_tag(spark_image, "apache/spark"))
    assert version and pin.group(1) == version.group(0), (
        f"pyspark=={pin.group(1)} but the cluster runs Spark {spark_image}"
    )


def test_kafka_is_a_single_kraft_node() -> None:
    env = SERVICES["kafka"]["environment"]
    roles = {role.strip() for role in str(env.get("KAFKA_PROCESS_ROLES", "")).split(",")}
    assert roles == {"broker", "controller"}, f"KAFKA_PROCESS_ROLES is {roles}"
    assert not [key for key in env if "ZOOKEEPER" in key], "KRaft needs no ZooKeeper"
    assert str(env["KAFKA_CONTROLLER_QUORUM_VOTERS"]) == f"{env['KAFKA_NODE_ID']}@kafka:9093"
    assert env.get("CLUSTER_ID"), "the apache/kafka image needs CLUSTER_ID in KRaft mode"
    assert int(env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"]) == 1


def test_the_servers_have_healthchecks() -> None:
    for service in ("kafka", "spark-master", "spark-worker"):
        check = SERVICES[service].get("healthcheck") or {}
        assert check.get("test") and check["test"] != ["NONE"], f"{service}: no healthcheck"
        assert not check.get("disable"), f"{service}: healthcheck disabled"


def test_dependencies_wait_for_health() -> None:
    for name, service in SERVICES.items():
        for target, rule in (service.get("depends_on") or {}).items():
            assert isinstance(rule, dict), f"{name}: depends_on {target} needs a condition"
            if target == "spark-secret":  # a one-shot service: it exits once made
                assert rule.get("condition") == "service_completed_successfully", name
            elif "healthcheck" in SERVICES[target]:
                assert rule.get("condition") == "service_healthy", (
                    f"{name}: depends_on {target} must wait for service_healthy"
                )
    for target in ("kafka", "spark-master", "spark-worker"):
        assert target in SERVICES["app"]["depends_on"], f"app does not wait for {target}"


def test_app_stops_gracefully() -> None:
    app = SERVICES["app"]
    assert app.get("init") is True, "without init: true, SIGTERM does not reach the app"
    assert re.fullmatch(r"on-failure(:\d+)?|unless-stopped", str(app.get("restart"))), (
        f"app restart policy {app.get('restart')!r}"
    )
    grace = compose_seconds(app.get("stop_grace_period", "10s"))  # Docker's default
    stop_timeout = docker_config().stop_timeout
    assert grace >= stop_timeout + SHUTDOWN_MARGIN, (
        f"app stop_grace_period {grace:g} s must exceed stop_timeout {stop_timeout:g} s"
        f" of conf/docker.ini by {SHUTDOWN_MARGIN} s (Spark's own shutdown), or Docker"
        " kills the graceful stop"
    )
    linger = docker_config().metrics_linger_seconds  # from the stop's start, not after it
    assert grace >= linger + SHUTDOWN_MARGIN, (
        f"app stop_grace_period {grace:g} s must exceed metrics_linger_seconds {linger:g} s"
        f" by {SHUTDOWN_MARGIN} s, or Docker kills the app before every Prometheus read the stop"
    )


def test_the_demo_driver_also_stops_gracefully() -> None:
    demo = SERVICES["demo"]
    assert demo.get("init") is True, "without init: true, SIGTERM does not reach the demo"
    grace = compose_seconds(demo.get("stop_grace_period", "10s"))
    stop_timeout = load_config(env={}).stop_timeout
    assert grace > stop_timeout, f"demo stop_grace_period {grace:g} s <= {stop_timeout:g} s"


def test_app_command_is_supervised() -> None:
    args = command("app")
    assert args[:2] == ["streaming-app", "supervise"], f"app runs {args[:2]}"
    run_args = args[args.index("--") + 1 :]
    config = value_of(run_args, "--config", "app")
    assert PurePosixPath(config) == APP_DIR / "conf" / "docker.ini", f"app reads {config}"


def test_checkpoint_is_on_a_volume_the_worker_shares() -> None:
    config = docker_config()
    assert config.allow_local_checkpoint, "a local checkpoint_dir needs allow_local_checkpoint"
    shared = volume_holding("app", config.checkpoint_dir)
    assert mounts("spark-worker").get(shared[1]) == shared[0], (
        f"spark-worker does not mount volume {shared[0]} at {shared[1]}"
    )
    assert config.output_dir
    volume_holding("app", config.output_dir)  # `totals` reads it after restarts


def test_docker_ini_matches_the_services() -> None:
    config = docker_config()
    assert config.master == "spark://spark-master:7077", f"docker.ini master {config.master}"
    assert config.source == "kafka", f"docker.ini source {config.source}"
    host, _, port = config.bootstrap_servers.partition(":")
    assert host in SERVICES, f"bootstrap_servers {config.bootstrap_servers}: no service {host}"
    advertised = str(SERVICES[host]["environment"]["KAFKA_ADVERTISED_LISTENERS"])
    assert f"://{host}:{port}" in advertised, f"kafka does not advertise {host}:{port}"
    produce = command("producer")
    servers = value_of(produce, "--bootstrap-servers", "producer")
    assert servers == config.bootstrap_servers, f"producer sends to {servers}"
    topic = value_of(produce, "--topic", "producer")
    assert topic in config.topics, f"producer writes {topic}, docker.ini reads {config.topics}"


def test_the_driver_is_launched_for_the_cluster() -> None:
    launch = shlex.split(str(SERVICES["app"]["environment"]["PYSPARK_SUBMIT_ARGS"]))
    where = "app PYSPARK_SUBMIT_ARGS"
    assert launch[-1] == "pyspark-shell", f"{where} must end with pyspark-shell"
    master = value_of(launch, "--master", where)
    assert master == docker_config().master, f"{where} --master {master} differs from docker.ini"
    confs = {launch[i + 1] for i, arg in enumerate(launch) if arg == "--conf"}
    assert "spark.driver.host=app" in confs, "executors reach the driver by its service name"
    # Nothing shipped (the driver's file server, which answers anyone, hands out nothing):
    # the worker's executors import the app installed in the image and start its daemon.
    assert "--py-files" not in launch and "--archives" not in launch, launch
    assert f"{DAEMON_MODULE}={PRELOADED}" in confs, f"{where}: the executors' daemon"
    worker = SERVICES["spark-worker"]
    assert worker.get("image") == SERVICES["app"]["image"] and "build" in worker, (
        "the worker must run the app's image (the app installed in its Python)"
    )
    assert "pip install" in DOCKERFILE and "/app" in DOCKERFILE


def test_the_cluster_is_secured_with_conf_secure_and_one_secret_volume() -> None:
    secret = SERVICES["spark-secret"]
    (made,) = [v for v in secret["volumes"] if str(v).startswith("spark-secret:")]
    folder = PurePosixPath(str(made).split(":")[1])
    assert f"chown spark:spark {folder}" in DOCKERFILE and f"chmod 700 {folder}" in DOCKERFILE
    assert "0o600" in " ".join(command("spark-secret")), "the secret must be made mode 600"
    for name in SECURED:
        service = SERVICES[name]
        env = service["environment"]
        conf = PurePosixPath(env["SPARK_CONF_DIR"])
        secret_file = PurePosixPath(env["STREAMING_APP_SPARK_SECRET_FILE"])
        assert secret_file.parent == folder, f"{name}: the secret is not the spark-secret one"
        mounts = {str(v).split(":")[1]: str(v) for v in service["volumes"]}
        assert mounts[str(folder)].endswith(":ro"), f"{name}: mounts the secret writable"
        # conf/ is mounted whole: conf/secure's log4j2.properties links to ../
        assert mounts[str(conf.parent)] == f"./conf:{conf.parent}:ro", name
        assert conf.name == "secure"
    defaults = (ROOT / "conf" / "secure" / "spark-defaults.conf").read_text("utf-8")
    for setting in (
        "spark.authenticate true",
        "spark.network.crypto.enabled true",
        "spark.io.encryption.enabled true",
        "spark.master.rest.enabled false",
        "spark.ui.killEnabled false",
    ):
        key, value = setting.split()
        assert re.search(rf"^{re.escape(key)}\s+{value}$", defaults, re.M), setting
    assert "spark.authenticate.secret" not in defaults.replace("# ", "")
    for name in ("spark-master", "spark-worker"):
        rule = SERVICES[name]["depends_on"]["spark-secret"]
        assert rule == {"condition": "service_completed_successfully"}, name


def test_ports_are_published_on_loopback_only() -> None:
    for name, service in SERVICES.items():
        assert service.get("network_mode") != "host", f"{name}: host networking"
        for port in service.get("ports", []):
            if isinstance(port, dict):
                assert port.get("host_ip") == "127.0.0.1", f"{name}: port {port} not on loopback"
            else:
                assert re.fullmatch(r"127\.0\.0\.1:\d+:\d+(/\w+)?", str(port)), (
                    f"{name}: port {port!r} is not 127.0.0.1:HOST:CONTAINER"
                )


def test_the_published_uis_listen_where_docker_forwards() -> None:
    """conf/secure/spark-env.sh keeps the UIs on loopback unless SPARK_LOCAL_IP is set; in a
    container that is the container's own, which Docker's published port never reaches."""
    spark_env = (ROOT / "conf" / "secure" / "spark-env.sh").read_text("utf-8")
    assert 'SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"' in spark_env
    for name in SECURED:
        service = SERVICES[name]
        assert service.get("ports"), f"{name}: publishes no UI"
        said = service["environment"].get("SPARK_LOCAL_IP")
        assert said == "0.0.0.0", f"{name}: its UI on the container's loopback ({said})"


def test_the_netcat_demo_is_behind_a_profile() -> None:
    default = {name for name, service in SERVICES.items() if not service.get("profiles")}
    assert default == DEFAULT_SERVICES, f"`docker compose up` would start {sorted(default)}"
    for name in DEMO_SERVICES:
        assert "demo" in SERVICES[name]["profiles"], f"{name} is not in the demo profile"
    assert "nc -lk" in " ".join(command("netcat"))
    demo = command("demo")
    assert value_of(demo, "--source", "demo") == "socket"
    assert value_of(demo, "--host", "demo") == "netcat", "demo must read the netcat service"
    assert value_of(demo, "--master", "demo").startswith("local"), "the demo runs in local mode"


@pytest.mark.parametrize("service", ["app", "producer", "demo"])
def test_compose_commands_exist_in_the_cli(service: str) -> None:
    args = command(service)
    assert args[0] == "streaming-app", f"{service} does not run streaming-app"
    sub = args[1]
    assert sub in cli.commands, f"{service}: `streaming-app {sub}` does not exist"
    own, run_args = args[2:], []
    if "--" in args:
        split = args.index("--")
        own, run_args = args[2:split], args[split + 1 :]
    for flags, name in ((own, sub), (run_args, "run")):
        unknown = {f for f in flags if f.startswith("--") and f not in option_names(name)}
        assert not unknown, f"{service}: `streaming-app {name}` has no {sorted(unknown)}"
