"""The locale Spark's JVMs run under: file names decoded as UTF-8, whatever the caller's locale.

Java decodes file names with `sun.jnu.encoding`, which follows the process locale (JDK 17
ignores `-Dsun.jnu.encoding=UTF-8`, checked here). Under the POSIX locale (`LC_ALL=C`, as
in containers and under service managers) it is ASCII: a file named `ünïcode-1.txt` is
listed as `??n??code-1.txt`, which does not exist, and the files source never reads it.
So the JVM the app launches gets a UTF-8 locale when the caller's is not one
(`launching_jvm`), executors get one through `spark.executorEnv.LC_ALL` (their worker's
locale is the worker host's), and a driver JVM that still decodes names otherwise (one
that spark-submit launched under `LC_ALL=C`) makes the files source refuse to start.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from streaming_app.errors import ConfigError

log = logging.getLogger(__name__)

# Built into glibc since 2.35 (Debian and Ubuntu shipped it long before).
UTF8_LOCALE = "C.UTF-8"
# What a standalone worker adds to the environment of the executors it launches.
EXECUTOR_LOCALE = {"spark.executorEnv.LC_ALL": UTF8_LOCALE}
_UTF8 = ("utf-8", "utf8")


def ctype_of(env: Mapping[str, str]) -> str:
    """The locale that decides character encoding in `env` (LC_ALL, then LC_CTYPE, then LANG)."""
    for key in ("LC_ALL", "LC_CTYPE", "LANG"):
        if env.get(key):
            return env[key]
    return "POSIX"


def is_utf8(encoding_or_locale: str) -> bool:
    """Whether a locale name (`en_US.UTF-8`) or an encoding (`UTF-8`) means UTF-8."""
    return encoding_or_locale.lower().endswith(_UTF8)


def utf8_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` for a JVM: unchanged under a UTF-8 locale, else with LC_ALL set to C.UTF-8."""
    result = dict(env)
    if not is_utf8(ctype_of(env)):
        result["LC_ALL"] = UTF8_LOCALE
    return result


def check_file_names(jvm: Any) -> None:
    """Refuse (ConfigError, exit 2) when the driver JVM decodes file names as anything but UTF-8.

    The files source would silently skip every file whose name is not ASCII.
    """
    encoding = str(jvm.java.lang.System.getProperty("sun.jnu.encoding"))
    if not is_utf8(encoding):
        raise ConfigError(
            f"the driver JVM decodes file names as {encoding} (its locale is not UTF-8), so "
            "the files source would never read a file whose name is not ASCII: run it under "
            f"a UTF-8 locale, e.g. LC_ALL={UTF8_LOCALE}"
        )
    log.debug("the driver JVM decodes file names as %s", encoding)
