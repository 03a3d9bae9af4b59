"""pytest fixtures: a real chronik-server on 127.0.0.1 for the client tests.

`broker`        one broker for the whole session (auto-create on, 3 default
                partitions, WAL profile low); tests use unique topic names.
`make_broker`   factory for brokers a test owns (restart, other flags); each
                is stopped when the test ends.
`admin`         AdminClient bound to `broker`.

The binary is $CHRONIK_SERVER_BIN or target/release/chronik-server (build it
with `make build`). Data and logs live in pytest's tmp dirs (kept for the last
3 runs under /tmp/pytest-of-$USER/ for post-mortems).
"""

import pytest

from chronik import DEFAULT_PARTITIONS, BrokerProcess, admin_client, server_binary

SESSION_BROKER_ARGS = [
    "--auto-create-topics", "true",
    "--default-partitions", str(DEFAULT_PARTITIONS),
    "--wal-profile", "low",
    # Tests stamp records in 2023 (fixed timestamps they check); under the
    # 7-day default a retention pass that happens to run mid-test deletes
    # them (seen: a low watermark of 200 in test_round_trip).
    "--retention-ms", "-1",
]


@pytest.fixture(scope="session")
def server_bin():
    path = server_binary()
    if not path.is_file():
        pytest.fail(f"{path} not found: run `make build` or set CHRONIK_SERVER_BIN", pytrace=False)
    return path


@pytest.fixture(scope="session")
def broker(server_bin, tmp_path_factory):
    root = tmp_path_factory.mktemp("session-broker")
    b = BrokerProcess(server_bin, root / "data", root / "logs", SESSION_BROKER_ARGS).start()
    yield b
    rc = b.stop()
    assert rc == 0, f"session broker exit status {rc} after SIGTERM; stderr:\n{b.stderr_tail()}"


@pytest.fixture
def make_broker(server_bin, tmp_path):
    started = []

    def make(*extra_args, name="broker"):
        root = tmp_path / name
        b = BrokerProcess(server_bin, root / "data", root / "logs", extra_args)
        started.append(b)
        return b.start()

    yield make
    for b in started:
        b.kill()


@pytest.fixture
def admin(broker):
    return admin_client(broker.bootstrap)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On a failure, attach the tail of the session broker's stderr to the report."""
    outcome = yield
    rep = outcome.get_result()
    if rep.failed and "broker" in item.fixturenames:
        b = item.funcargs.get("broker")
        if b is not None:
            rep.sections.append(("chronik-server stderr (tail)", b.stderr_tail()))
