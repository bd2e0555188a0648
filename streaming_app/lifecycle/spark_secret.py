"""The cluster's Spark secret: from a file, held in the JVM's credentials, never in the SparkConf.

Driver side, before the SparkContext exists. Spark serializes the SparkConf into every
DStream checkpoint file, so a `spark.authenticate.secret` in it would be readable by whoever
reads the checkpoint directory. Spark's SecurityManager looks for the secret first in the
current user's Hadoop credentials (key `sparkCookie`), then in `_SPARK_AUTH_SECRET`, then in
the SparkConf; on a standalone master it only requires the SparkConf to *have* the key. So
the secret goes into the credentials, and the SparkConf keeps the key with PLACEHOLDER.
Executors on a standalone cluster get the secret from their worker (`_SPARK_AUTH_SECRET`),
never from the driver's SparkConf.
"""

from __future__ import annotations

import hmac
import logging
import os
import re
import secrets
from typing import Any

from streaming_app.errors import ConfigError
from streaming_app.lifecycle.secret_file import SecretFileError, read_secret

log = logging.getLogger(__name__)

AUTHENTICATE = "spark.authenticate"
# The setting Spark would write into every DStream checkpoint (tools/secret_scrub.py).
SECRET_KEY = "spark.authenticate.secret"
# Where Spark's SecurityManager looks for the secret first: the user's Hadoop credentials,
# under this key (its SECRET_LOOKUP_KEY; verify_resolved checks it is still this one).
COOKIE = "sparkCookie"
# Spark's own route for the secret (SecurityManager.ENV_AUTH_SECRET).
ENV_SECRET = "_SPARK_AUTH_SECRET"
# What the SparkConf (and so every checkpoint) holds instead of the secret: stars, then a
# random part new with each run, so that a Spark that fell back to the SparkConf's value
# would hold a secret no one can guess (and verify_resolved stops the run anyway).
PLACEHOLDER_PREFIX = "********-"
PLACEHOLDER = PLACEHOLDER_PREFIX + secrets.token_urlsafe(24)
# The one switch (spark_secret_file): what it turns on, unless the user's Spark settings
# say otherwise. Spark's security docs: authentication, AES-based RPC encryption with no
# fallback to the older SASL protocol, encrypted local disk (shuffle, spills, cached
# blocks), and no kill link in the web UI.
SECURE_SPARK_CONF = {
    AUTHENTICATE: "true",
    "spark.network.crypto.enabled": "true",
    "spark.network.crypto.saslFallback": "false",
    "spark.io.encryption.enabled": "true",
    "spark.ui.killEnabled": "false",
}
# Masters on which Spark makes a secret of its own for each application
# (SecurityManager.initializeAuth: "yarn", "local", local[N], local[N,F]).
_OWN_SECRET = re.compile(r"^(yarn|local|local\[([0-9]+|\*)\]|local\[([0-9]+|\*)\s*,\s*[0-9]+\])$")
# Spark on Kubernetes reads a secret from a file of its own settings (mounted in the pods).
SECRET_FILE_KEYS = (
    "spark.authenticate.secret.file",
    "spark.authenticate.secret.driver.file",
    "spark.authenticate.secret.executor.file",
)


def read_secret_file(path: str) -> str:
    """The secret in `path` (its first line without the spaces around it), or ConfigError
    naming spark_secret_file: lifecycle/secret_file.py's reading, which Spark's daemons
    run too (conf/secure/spark-env.sh). A regular file of the user the app runs as that
    neither group nor others may read or write, checked on the file opened (an open that
    neither waits for a FIFO nor reads a device); a symbolic link is followed."""
    try:
        return read_secret(path)
    except SecretFileError as exc:
        raise ConfigError(f"spark_secret_file {path}: {exc}") from None


def check_secret_file(path: str | None) -> None:
    """Before anything is written: a secret file that is set reads and is private (exit 2)."""
    if path:
        read_secret_file(path)


def is_placeholder(value: str | None) -> bool:
    """Whether a secret value in a SparkConf is ours, not a real secret (or is absent):
    a run's placeholder, the stars of an earlier one, or what `checkpoint scrub` wrote."""
    return not value or set(value) == {"*"} or value.startswith(PLACEHOLDER_PREFIX)


def secure_conf(conf: Any, secret_file: str | None) -> str | None:
    """Turn on the protections of a secret file, and take the secret out of `conf`.

    `conf` is the pyspark SparkConf the SparkContext will be made with (spark-defaults.conf,
    spark-submit's --conf, the app's own settings already in it). Returns the secret to
    hold (hold_secret), from the file, else from `conf`, else from `_SPARK_AUTH_SECRET`;
    None when there is none. Raises ConfigError when authentication is on, the master needs
    a secret of the operator's and none was given.
    """
    master = str(conf.get("spark.master", "local"))
    if _OWN_SECRET.match(master):
        # Spark makes a secret of its own for each application here and ignores any
        # given: the file's (still refused if unsafe: the next master may use it), the
        # setting's (kept out of the checkpoint all the same), the environment's.
        given = not is_placeholder(conf.get(SECRET_KEY))
        if secret_file:
            _switch_on(conf, secret_file)
        if given:
            conf.set(SECRET_KEY, PLACEHOLDER)
        way = (
            "spark_secret_file" if secret_file
            else SECRET_KEY if given
            else ENV_SECRET if os.environ.get(ENV_SECRET)
            else None
        )  # fmt: skip
        if way:
            log.info(
                "%s is not used with master %s: Spark makes a secret of its own for each "
                "application there; authentication and encryption are on with it",
                way, master,
            )  # fmt: skip
        return None
    if master.startswith("k8s://"):
        _kubernetes(conf, secret_file)
        return None
    secret = _switch_on(conf, secret_file) if secret_file else None
    given = conf.get(SECRET_KEY)
    if not is_placeholder(given):
        secret = secret or given
    secret = secret or os.environ.get(ENV_SECRET) or None
    if secret is not None:
        conf.set(SECRET_KEY, PLACEHOLDER)
        return secret
    on = str(conf.get(AUTHENTICATE, "false")).strip().lower() == "true"
    if on:
        raise ConfigError(
            f"spark.authenticate is on but no secret was given for master {master}: set "
            "spark_secret_file (--spark-secret-file, STREAMING_APP_SPARK_SECRET_FILE) to a "
            "file only the service user can read (docs/security.md)"
        )
    return None


def _kubernetes(conf: Any, secret_file: str | None) -> None:
    """On Kubernetes Spark takes the secret from a file in each pod (its own settings),
    or makes one of its own; the app's secret file becomes that setting, and nothing is
    put in the credentials (Spark does not look there on Kubernetes)."""
    if secret_file:
        _switch_on(conf, secret_file)
        if all(conf.get(key) is None for key in SECRET_FILE_KEYS):
            conf.set(SECRET_FILE_KEYS[0], secret_file)
        log.info(
            "spark_secret_file on Kubernetes: Spark reads the secret from that path in the "
            "driver's and the executors' pods (spark.authenticate.secret.file): mount it "
            "there, as a Kubernetes secret"
        )
    if not is_placeholder(conf.get(SECRET_KEY)):
        raise ConfigError(
            "spark.authenticate.secret: on Kubernetes give the secret as a file mounted in "
            "the pods (spark_secret_file), not as a setting: the setting is written into "
            "every DStream checkpoint"
        )


def _switch_on(conf: Any, secret_file: str) -> str:
    """The file's secret (ConfigError if the file is unsafe), and the protections the
    switch turns on set where the user's settings are silent."""
    secret = read_secret_file(secret_file)
    for key, value in SECURE_SPARK_CONF.items():
        conf.setIfMissing(key, value)
    return secret


def verify_resolved(jvm: Any, secret: str, secret_file: str | None) -> None:
    """Check, once the context has started, that Spark takes the secret held: its first
    place to look is still the credentials key this module writes (Spark's
    `SecurityManager.SECRET_LOOKUP_KEY`), and that key still holds this secret (Spark did
    not put one of its own there). ConfigError (exit 2) if not: the run would otherwise go
    on with `_SPARK_AUTH_SECRET` or the placeholder. Neither secret is logged. (Py4J
    cannot call the SparkContext's or SparkEnv's own methods in this PySpark: their
    reflection loads classes the driver does not have; Hadoop's and this lookup work.)"""
    where = f"spark_secret_file {secret_file}" if secret_file else "the secret given"
    try:
        key = str(jvm.org.apache.spark.SecurityManager.SECRET_LOOKUP_KEY().toString())
        held = jvm.org.apache.hadoop.security.UserGroupInformation.getCurrentUser()
        found = held.getCredentials().getSecretKey(jvm.org.apache.hadoop.io.Text(COOKIE))
    except Exception:  # a Spark without this lookup: say so rather than run unchecked
        raise ConfigError(
            "cannot tell where Spark looks for its secret (SecurityManager.SECRET_LOOKUP_KEY,"
            " docs/internals.md): this Spark is not one the app was checked with"
        ) from None
    if key != COOKIE:
        raise ConfigError(
            f"Spark looks for its secret under {key!r}, not {COOKIE!r}: it would not use "
            f"{where} (docs/internals.md); the run stops rather than use another"
        )
    if found is None or not hmac.compare_digest(bytes(found), secret.encode()):
        raise ConfigError(
            f"the secret Spark holds is not {where}: Spark replaced it with one of its own "
            "(docs/security.md, deploy modes); the run stops rather than use another"
        )


def hold_secret(jvm: Any, secret: str) -> None:
    """Put the secret where Spark's SecurityManager looks first: the user's credentials.

    Also drops it from the JVM's system properties (spark-submit copies spark-defaults.conf
    there), so that no SparkConf made later in this JVM picks it up again.
    """
    credentials = jvm.org.apache.hadoop.security.Credentials()
    credentials.addSecretKey(jvm.org.apache.hadoop.io.Text(COOKIE), secret.encode())
    jvm.org.apache.hadoop.security.UserGroupInformation.getCurrentUser().addCredentials(credentials)
    jvm.java.lang.System.clearProperty(SECRET_KEY)


def warn_secret_in_checkpoint(pairs: dict[str, str], checkpoint_dir: str) -> bool:
    """Say in one line that a recovered checkpoint holds a secret; True if it does."""
    if is_placeholder(pairs.get(SECRET_KEY)):
        return False
    log.warning(
        "checkpoint %s holds the cluster's secret (spark.authenticate.secret), written "
        "before streaming_app kept it out; remove it without losing state: "
        "streaming-app checkpoint scrub %s (docs/security.md)",
        checkpoint_dir,
        checkpoint_dir,
    )
    return True
