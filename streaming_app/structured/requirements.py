"""What `--engine structured` needs before Spark starts: the extra installed, supported settings.

Pure Python, no Spark: a missing package or a setting this slice does not support is a
usage error (exit 2) with one line that says what to do.
"""

from __future__ import annotations

from importlib import metadata

from streaming_app.errors import ConfigError
from streaming_app.settings.schema import AppConfig

INSTALL = "pip install 'streaming-app[structured]'"
# Distributions PySpark's mapInArrow imports: the lowest version it works with and the
# first it does not (None: no bound), as the extra in setup.cfg pins them.
NEEDED: tuple[tuple[str, tuple[int, int], tuple[int, int] | None], ...] = (
    ("pandas", (2, 2), (3, 0)),  # PySpark 4.3 warns that it does not support pandas 3 yet
    ("pyarrow", (18, 0), None),
)


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for part in text.split(".")[:2]:
        digits = "".join(c for c in part if c.isdigit()) or "0"
        parts.append(int(digits))
    return tuple(parts)


def missing_packages(installed: dict[str, str | None] | None = None) -> list[str]:
    """The extra's packages that are absent or too old, as `name` or `name VERSION`.

    installed: name -> version (None: absent), for tests; by default the environment's.
    """
    found = []
    for name, lowest, below in NEEDED:
        version = installed.get(name) if installed is not None else _installed(name)
        if version is None:
            found.append(name)
        elif _version(version) < lowest or (below is not None and _version(version) >= below):
            found.append(f"{name} {version}")
    return found


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def require_extra(installed: dict[str, str | None] | None = None) -> None:
    """Raise ConfigError (exit 2) naming the install command if the extra is not installed."""
    missing = missing_packages(installed)
    if missing:
        raise ConfigError(
            f"--engine structured needs the structured extra ({', '.join(missing)} "
            f"missing or unsupported): {INSTALL}"
        )


def unsupported(config: AppConfig) -> list[str]:
    """The settings this slice of the structured engine does not run yet (docs/structured.md)."""
    found = []
    if config.window is not None and config.source == "socket":
        # Each query reads the source itself, and a socket serves one reader (nc -lk).
        found.append("window with the socket source")
    return found


def check_supported(config: AppConfig) -> None:
    """Raise ConfigError (exit 2) listing every setting the structured engine cannot run yet."""
    found = unsupported(config)
    if found:
        raise ConfigError(
            f"--engine structured does not support {'; '.join(found)} yet; "
            "run them with --engine dstream (docs/structured.md)"
        )
