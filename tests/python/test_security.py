"""confluent-kafka (librdkafka) against TLS and SASL listeners.

A broker started by the test with its own --listeners: PLAINTEXT (topic
admin), SASL_SSL with SCRAM-SHA-512 users from a bootstrap file, and SSL
with ssl.client.auth=required. Records produced over SASL_SSL and over mTLS
are read back over the same listener; a wrong SCRAM password gets no data.
OAUTHBEARER on the same SASL_SSL listener: librdkafka's oauth_cb hands over
an RS256 JWT signed here with the openssl CLI, verified by the broker with a
JWKS file; a token signed by another key is refused. Certificates come from
scripts/make-certs.sh.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from chronik import (ListenersBroker, admin_client, create_topic, make_certs, producer, read_partitions,
                     unique_topic)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def rsa_key(path):
    """An RSA-2048 key made with openssl; returns its JWK modulus (base64url)."""
    subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
                    "-out", str(path)], check=True, capture_output=True)
    modulus = subprocess.run(["openssl", "rsa", "-in", str(path), "-noout", "-modulus"],
                             check=True, capture_output=True, text=True).stdout
    return b64url(bytes.fromhex(modulus.strip().split("=", 1)[1]))


def rs256_token(key_path, kid: str, sub: str, lifetime: int = 600) -> tuple[str, float]:
    """A JWT signed by the openssl CLI, and its expiry (seconds since the epoch)."""
    exp = int(time.time()) + lifetime
    header = b64url(json.dumps({"alg": "RS256", "kid": kid, "typ": "JWT"}).encode())
    claims = b64url(json.dumps({"sub": sub, "aud": "kafka", "iss": "https://issuer.test",
                                "iat": int(time.time()), "exp": exp}).encode())
    signed = f"{header}.{claims}"
    signature = subprocess.run(["openssl", "dgst", "-sha256", "-sign", str(key_path)],
                               input=signed.encode(), check=True, capture_output=True).stdout
    return f"{signed}.{b64url(signature)}", float(exp)


@pytest.fixture(scope="module")
def secure_broker(server_bin, certs, tmp_path_factory):
    work = tmp_path_factory.mktemp("secure-broker")
    scram = work / "scram.txt"
    scram.write_text("SCRAM-SHA-512=[name=alice,password=alice-secret,iterations=8192]\n")
    modulus = rsa_key(work / "jwt.key")
    jwks = work / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{"kty": "RSA", "kid": "k1", "alg": "RS256",
                                          "n": modulus, "e": "AQAB"}]}))
    broker = ListenersBroker(server_bin, work, [
        "--listeners", "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0",
        "--ssl-keystore-location", certs / "broker.keystore.pem",
        "--ssl-truststore-location", certs / "ca.pem",
        "--ssl-client-auth", "required",
        "--sasl-enabled-mechanisms", "SCRAM-SHA-512,OAUTHBEARER",
        "--sasl-scram-credentials-file", scram,
        "--sasl-oauthbearer-jwks-endpoint-url", f"file://{jwks}",
        "--sasl-oauthbearer-expected-audience", "kafka",
        "--sasl-oauthbearer-expected-issuer", "https://issuer.test",
    ])
    try:
        yield broker.start(), certs, work
    finally:
        broker.stop()


def produce_and_read(bootstrap: str, plaintext: str, security: dict, count: int = 50):
    topic = create_topic(admin_client(plaintext), unique_topic("secure"), partitions=1)
    p = producer(bootstrap, **security)
    values = [f"secure-{i}".encode() for i in range(count)]
    for v in values:
        p.produce(topic, v)
    assert p.flush(30) == 0, "undelivered messages"
    got = read_partitions(bootstrap, topic, {0: count}, **security)
    assert [m.value() for m in got[0]] == values


def tls_conf(certs, protocol: str) -> dict:
    """librdkafka TLS settings with the test client certificate
    (ssl.client.auth=required applies to every TLS listener)."""
    return {
        "security_protocol": protocol,
        "ssl_ca_location": str(certs / "ca.pem"),
        "ssl_certificate_location": str(certs / "client.pem"),
        "ssl_key_location": str(certs / "client.key"),
    }


def scram_conf(certs, password: str) -> dict:
    return {
        **tls_conf(certs, "SASL_SSL"),
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": "alice",
        "sasl_password": password,
    }


def test_sasl_ssl_scram_sha_512_produce_and_consume(secure_broker):
    listeners, certs, _ = secure_broker
    security = scram_conf(certs, "alice-secret")
    produce_and_read(listeners["SASL_SSL"], listeners["PLAINTEXT"], security)


def test_mtls_produce_and_consume(secure_broker):
    listeners, certs, _ = secure_broker
    produce_and_read(listeners["SSL"], listeners["PLAINTEXT"], tls_conf(certs, "SSL"))


def refused_login_errors(bootstrap: str, security: dict) -> list:
    """The errors a producer logging in with `security` reports once the
    broker refuses it: metadata cannot be fetched, and error_cb (served by
    poll()) says why, within 20 s."""
    errors = []
    p = producer(bootstrap, **security, error_cb=errors.append)
    with pytest.raises(KafkaException):
        p.list_topics(timeout=10)
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        p.poll(0.5)
    return errors


def test_wrong_scram_password_is_refused(secure_broker):
    listeners, certs, _ = secure_broker
    errors = refused_login_errors(listeners["SASL_SSL"], scram_conf(certs, "not-her-password"))
    assert any("Authentication failed" in e.str() for e in errors), [e.str() for e in errors]


def test_scram_user_added_through_the_admin_api(secure_broker):
    """AlterUserScramCredentials (what kafka-configs.sh --alter --add-config
    'SCRAM-SHA-512=[password=...]' --entity-type users sends) through the
    metadata quorum; the new user then produces and consumes over SASL_SSL."""
    listeners, certs, _ = secure_broker
    admin = admin_client(listeners["PLAINTEXT"])
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    upsertion = UserScramCredentialUpsertion("dave", info, b"dave-secret")
    futures = admin.alter_user_scram_credentials([upsertion])
    futures["dave"].result(15)
    described = admin.describe_user_scram_credentials(["dave"])["dave"].result(15)
    infos = described.scram_credential_infos
    assert [(i.mechanism, i.iterations) for i in infos] == [(ScramMechanism.SCRAM_SHA_512, 8192)]
    security = {**scram_conf(certs, "dave-secret"), "sasl_username": "dave"}
    produce_and_read(listeners["SASL_SSL"], listeners["PLAINTEXT"], security, count=10)


def oauth_conf(certs, key_path, kid: str = "k1") -> dict:
    def oauth_cb(_config):
        token, expiry = rs256_token(key_path, kid, "carol")
        return token, expiry, "carol", {}
    return {**tls_conf(certs, "SASL_SSL"), "sasl_mechanism": "OAUTHBEARER", "oauth_cb": oauth_cb}


def test_sasl_ssl_oauthbearer_produce_and_consume(secure_broker):
    listeners, certs, work = secure_broker
    produce_and_read(listeners["SASL_SSL"], listeners["PLAINTEXT"], oauth_conf(certs, work / "jwt.key"),
                     count=20)


def test_oauthbearer_token_of_another_key_is_refused(secure_broker, tmp_path):
    listeners, certs, _ = secure_broker
    rsa_key(tmp_path / "other.key")
    errors = refused_login_errors(listeners["SASL_SSL"], oauth_conf(certs, tmp_path / "other.key"))
    assert any("invalid_token" in e.str() for e in errors), [e.str() for e in errors]
