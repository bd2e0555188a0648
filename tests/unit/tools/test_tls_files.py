"""tools/tls_broker.py's test certificates: the client key's password never on a command line."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path
from typing import Any

import pytest

from streaming_app.tools import tls_broker

PASSWORD = "key-password-1e8a"


def test_the_key_password_goes_to_openssl_on_stdin_and_the_key_takes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argvs: list[list[str]] = []
    run = subprocess.run

    def recorded(argv: list[str], **kwargs: Any) -> Any:
        argvs.append(list(argv))
        return run(argv, **kwargs)

    monkeypatch.setattr(tls_broker.subprocess, "run", recorded)
    files = tls_broker.make_tls_files(tmp_path, PASSWORD)
    assert argvs and not [a for a in argvs if any(PASSWORD in part for part in a)]
    # The key was written encrypted with the password (its positive control: the wrong
    # one is refused).
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_cert_chain(files.certfile, files.keyfile, password=PASSWORD)
    with pytest.raises(ssl.SSLError):
        context.load_cert_chain(files.certfile, files.keyfile, password="wrong")
