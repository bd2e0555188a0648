"""The SCRAM server of the tests' SASL proxy (scram.py), without a broker: RFC 7677's
example exchange byte for byte, kafka-python's own SCRAM client with either mechanism,
and the refusals (a wrong password, an unknown user, a replayed or altered message)."""

from __future__ import annotations

import base64

import pytest
from kafka.net.sasl.scram import ScramClient

from tests.integration.scram import ScramCredential, ScramError, ScramServer, decode_user

pytestmark = pytest.mark.timeout(30)

# RFC 7677, section 3: user "user", password "pencil".
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _rfc_server() -> ScramServer:
    credential = ScramCredential.from_password("SCRAM-SHA-256", "pencil", 4096, RFC_SALT)
    return ScramServer("SCRAM-SHA-256", {"user": credential}, nonce=RFC_SERVER_NONCE)


def test_rfc_7677_example_exchange() -> None:
    server = _rfc_server()
    assert server.first(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert server.final(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.authenticated and server.user == "user"


def test_the_credential_holds_no_password() -> None:
    credential = ScramCredential.from_password("SCRAM-SHA-256", "pencil", 4096, RFC_SALT)
    assert "pencil" not in repr(credential.to_json())
    assert ScramCredential.from_json(credential.to_json()) == credential


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kafka_pythons_client_authenticates_and_checks_the_server(mechanism: str) -> None:
    credential = ScramCredential.from_password(mechanism, "s3cret, with=signs")
    server = ScramServer(mechanism, {"counter": credential})
    client = ScramClient("counter", "s3cret, with=signs", mechanism)
    client.process_server_first_message(server.first(client.first_message()))
    client.process_server_final_message(server.final(client.final_message()))  # checks v=
    assert server.authenticated


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_wrong_password_is_refused(mechanism: str) -> None:
    server = ScramServer(mechanism, {"counter": ScramCredential.from_password(mechanism, "right")})
    client = ScramClient("counter", "wrong", mechanism)
    client.process_server_first_message(server.first(client.first_message()))
    with pytest.raises(ScramError, match="invalid credentials for user 'counter'"):
        server.final(client.final_message())
    assert not server.authenticated


def test_a_credential_of_the_other_mechanism_does_not_verify() -> None:
    """A SHA-512 credential stored for the user, a SHA-256 exchange: refused."""
    sha512 = ScramCredential.from_password("SCRAM-SHA-512", "right")
    server = ScramServer("SCRAM-SHA-256", {"counter": sha512})
    client = ScramClient("counter", "right", "SCRAM-SHA-256")
    client.process_server_first_message(server.first(client.first_message()))
    with pytest.raises(ScramError):
        server.final(client.final_message())


def test_an_unknown_user_is_refused_at_the_first_message() -> None:
    with pytest.raises(ScramError, match="unknown user 'nobody'"):
        _rfc_server().first(b"n,,n=nobody,r=abc")


BROKEN_FINAL = {
    "altered-proof": RFC_CLIENT_FINAL[:-6] + b"AAAAA=",
    "other-nonce": RFC_CLIENT_FINAL.replace(b"k0,", b"k1,"),
    "channel-binding": RFC_CLIENT_FINAL.replace(b"c=biws", b"c=eSws"),
    "no-proof": RFC_CLIENT_FINAL.split(b",p=")[0],
}


@pytest.mark.parametrize("case", sorted(BROKEN_FINAL))
def test_an_altered_final_message_is_refused(case: str) -> None:
    server = _rfc_server()
    server.first(RFC_CLIENT_FIRST)
    with pytest.raises(ScramError):
        server.final(BROKEN_FINAL[case])


@pytest.mark.parametrize(
    "first", [b"p=tls-unique,,n=user,r=x", b"n,a=admin,n=user,r=x", b"n,,r=x,n=user", b"n,,"]
)
def test_a_first_message_the_server_does_not_take_is_refused(first: bytes) -> None:
    with pytest.raises(ScramError):
        _rfc_server().first(first)


def test_final_before_first_is_refused() -> None:
    with pytest.raises(ScramError):
        _rfc_server().final(RFC_CLIENT_FINAL)


def test_sasl_names_are_decoded() -> None:
    assert decode_user("a=2Cb=3Dc") == "a,b=c"
    with pytest.raises(ScramError):
        decode_user("a=b")
