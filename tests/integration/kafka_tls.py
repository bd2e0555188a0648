"""The Kafka TLS tests' broker (streaming_app/tools/tls_broker.py: tansu behind stunnel),
and the check that the tools it needs are installed."""

from __future__ import annotations

import shutil

import pytest

from streaming_app.tools.tls_broker import (
    STUNNEL_NAMES,
    TlsBroker,
    TlsFiles,
    make_tls_files,
    misnamed_tunnel,
    stop_process,
    stunnel,
    stunnel_binary,
    stunnel_service,
    tls_broker,
    wait_listening,
    without_app_settings,
)
from tests.integration.pg_helpers import ci

__all__ = [
    "STUNNEL_NAMES",
    "TlsBroker",
    "TlsFiles",
    "make_tls_files",
    "misnamed_tunnel",
    "require_tools",
    "stop_process",
    "stunnel",
    "stunnel_binary",
    "stunnel_service",
    "tls_broker",
    "wait_listening",
    "without_app_settings",
]


def require_tools(*tools: str) -> None:
    """Skip the test (in CI: fail it) unless these commands are installed; "stunnel" is
    any of STUNNEL_NAMES."""
    missing = [t for t in tools if t != "stunnel" and shutil.which(t) is None]
    if "stunnel" in tools and stunnel_binary() is None:
        missing.append("stunnel (Debian: stunnel4)")
    if missing:
        reason = f"the Kafka TLS tests need {', '.join(missing)}; .ci/run installs them"
        if ci():
            pytest.fail(reason)
        pytest.skip(reason)
