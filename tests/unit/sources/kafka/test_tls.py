"""The TLS files check: what it needs no certificate for (the rest: test_kafka_tls.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming_app.errors import ConfigError
from streaming_app.sources.kafka.client import KafkaConnection
from streaming_app.sources.kafka.tls import check_tls_files


def test_nothing_is_checked_without_tls() -> None:
    check_tls_files(KafkaConnection("b:9092", ssl_cafile="/nonexistent/ca.pem"))
    check_tls_files(KafkaConnection("b:9092", "sasl_plaintext", ssl_keyfile="/nonexistent"))


def test_a_key_without_a_certificate_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"^ssl_keyfile /k\.pem: needs ssl_certfile"):
        check_tls_files(KafkaConnection("b:9092", "ssl", ssl_keyfile="/k.pem"))


@pytest.mark.parametrize("protocol", ["ssl", "sasl_ssl"])
def test_a_missing_or_useless_ca_file_names_the_setting(protocol: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^ssl_cafile /nonexistent/ca\.pem: not readable"):
        check_tls_files(KafkaConnection("b:9092", protocol, ssl_cafile="/nonexistent/ca.pem"))
    junk = tmp_path / "ca.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match=rf"^ssl_cafile {junk}: no CA certificate in it"):
        check_tls_files(KafkaConnection("b:9092", protocol, ssl_cafile=str(junk)))
    with pytest.raises(ConfigError, match=rf"^ssl_certfile {junk}: no certificate in it"):
        check_tls_files(KafkaConnection("b:9092", protocol, ssl_certfile=str(junk)))
