"""Compatibility driver for kcat (Debian's, librdkafka builtin) - compat/README.md.

Runs kcat processes for one check and prints the JSON result line(s). kcat
creates no topics, so topics are created with confluent-kafka's AdminClient
(setup only); everything checked goes through kcat:
  produce        kcat -P -K '\\t' -X acks=all (exit status; kcat prints no offsets)
  fetch          kcat -C -o beginning -e, the exact set in per-partition order
  group          3 x kcat -G, assignments parsed from its "rebalanced" lines
  commit-resume  kcat -G -c N/2 (auto-commit of consumed offsets on close),
                 then kcat -G again after the broker restart
  idempotent     kcat -P -X enable.idempotence=true, read back with -C -e
  security       -X security.protocol=SASL_SSL|SSL, sasl.*, ssl.*: kcat -P then
                 kcat -G; kcat -L with a wrong password; kcat -P to the ungranted topic
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
import threading

from pathlib import Path

import compat_common as cc
from confluent_driver import create_topic

KCAT = os.environ.get("KCAT", "kcat")
CLIENT = "kcat"
# eager:       "% Group G rebalanced (memberid M): assigned: t [0], t [1]"  (or "revoked:")
# cooperative: "% Group G rebalanced: incremental assignment of 2 partition(s) (memberid M,
#               COOPERATIVE rebalance protocol): t [0], t [1]"             (or "incremental revoke")
REBALANCED = re.compile(r"rebalanced.*?(assigned:|revoked:|incremental assignment|incremental revoke)")
PARTITION = re.compile(r"\[(\d+)\]")
FORMAT = r"%p\t%o\t%s\n"
# librdkafka's log line when a broker refuses a SASL login (it then retries, forever)
AUTH_FAILED = re.compile(r"SASL authentication error.*")
TOPIC_DENIED = "Topic authorization failed"


def kcat_version() -> tuple[str, str]:
    """(kcat's version with its librdkafka's, the librdkafka version)."""
    out = subprocess.run([KCAT, "-V"], capture_output=True, text=True, timeout=10).stdout
    m = re.search(r"Version (\S+) .*librdkafka (\S+)", out)
    return (f"{m.group(1)} (librdkafka {m.group(2)})", m.group(2)) if m else ("unknown", "unknown")


def stderr_summary(text: str) -> str:
    """kcat's distinct "% ERROR" lines (the last two), else its last line."""
    errors = list(dict.fromkeys(ln.strip() for ln in text.splitlines() if "ERROR" in ln))
    lines = errors[-2:] or text.strip().splitlines()[-1:]
    return " | ".join(ln[:250] for ln in lines)


def parse_records(text: str) -> list[cc.Record]:
    records = []
    for line in text.splitlines():
        p, o, v = line.split("\t", 2)
        records.append((int(p), int(o), v.encode()))
    return records


def kcat_produce(bootstrap: str, topic: str, tag: str, n: int, timeout: float,
                 extra: tuple[str, ...] = ()) -> list[str]:
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
        for i in range(n):
            f.write(f"{cc.message_key(i).decode()}\t{cc.message_value(tag, i).decode()}\n")
        f.flush()
        r = subprocess.run([KCAT, "-b", bootstrap, "-P", "-t", topic, "-K", r"\t",
                            "-X", "acks=all", *extra, "-l", f.name],
                           capture_output=True, text=True, timeout=timeout)
    cc.log(f"kcat -P exit {r.returncode}: {r.stderr.strip()[-500:]}")
    problems = []
    if r.returncode != 0:
        problems.append(f"kcat -P exit status {r.returncode}: {stderr_summary(r.stderr)}")
    elif "ERROR" in r.stderr:
        problems.append(f"kcat -P reported: {stderr_summary(r.stderr)}")
    return problems


def kcat_read_all(bootstrap: str, topic: str, timeout: float) -> tuple[list[cc.Record], list[str]]:
    r = subprocess.run([KCAT, "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e",
                        "-f", FORMAT], capture_output=True, text=True, timeout=timeout)
    problems = []
    if r.returncode != 0:
        problems.append(f"kcat -C exit status {r.returncode}: {stderr_summary(r.stderr)}")
    return parse_records(r.stdout), problems


def check_produce_fetch(rep: cc.Reporter, args) -> None:
    topic = cc.unique("compat-produce")
    create_topic(args.bootstrap, topic, cc.PRODUCE_PARTITIONS, args.stage_timeout)
    problems = kcat_produce(args.bootstrap, topic, topic, args.messages, args.stage_timeout)
    rep.verdict("produce", problems,
                f"{args.messages} sent with acks=all, kcat exit 0 with no delivery error "
                "(kcat prints no offsets: placement is checked by fetch)")
    records, problems = kcat_read_all(args.bootstrap, topic, args.stage_timeout)
    problems += cc.verify_read_back(topic, args.messages, records, None)
    rep.verdict("fetch", problems,
                f"{len(records)} read back with -C -o beginning -e, per partition "
                f"{cc.partition_counts(records)}, produce order kept")


class KcatProcess:
    """One kcat consumer process; stdout records and stderr lines collected on threads."""

    def __init__(self, argv: list[str]):
        cc.log("start: " + " ".join(argv))
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, text=True)
        self.records: list[cc.Record] = []
        self.stderr: list[str] = []
        self.error = None
        self._threads = [threading.Thread(target=self._read_out, daemon=True),
                         threading.Thread(target=self._read_err, daemon=True)]
        for t in self._threads:
            t.start()

    def _read_out(self) -> None:
        for line in self.proc.stdout:
            self.records.extend(parse_records(line.rstrip("\n")))

    def _read_err(self) -> None:
        for line in self.proc.stderr:
            line = line.rstrip("\n")
            self.stderr.append(line)
            self.on_stderr(line)
            if "ERROR" in line and self.error is None:
                self.error = line[-300:]

    def on_stderr(self, line: str) -> None:
        pass

    def close(self) -> None:
        """SIGTERM: kcat closes its consumer (LeaveGroup, final commit) and exits."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        for t in self._threads:
            t.join(5)


class Member(KcatProcess):
    """A kcat -G member; its assignment is what its "rebalanced" lines say
    (eager: revoke all then assign all; cooperative: incremental, same sum)."""

    def __init__(self, bootstrap: str, group: str, topic: str, assignor: str):
        self._assigned: set[int] = set()
        argv = [KCAT, "-b", bootstrap, "-G", group, "-X", "auto.offset.reset=earliest",
                "-f", FORMAT]
        if assignor != "default":
            argv += ["-X", f"partition.assignment.strategy={assignor}"]
        super().__init__(argv + [topic])

    def on_stderr(self, line: str) -> None:
        m = REBALANCED.search(line)
        if not m:
            return
        parts = {int(p) for p in PARTITION.findall(line[m.end():])}
        if m.group(1) in ("assigned:", "incremental assignment"):
            self._assigned |= parts
        else:
            self._assigned -= parts

    def assigned(self) -> set[int]:
        return set(self._assigned) if self.proc.poll() is None else set()

    def close(self) -> None:
        super().close()
        self._assigned = set()


def check_group(rep: cc.Reporter, args) -> None:
    cc.group_check(rep, args, create_topic,
                   lambda group, topic: Member(args.bootstrap, group, topic, args.assignor))


def consume_group(bootstrap: str, group: str, topic: str, until, timeout: float,
                  extra: tuple[str, ...] = ()) -> KcatProcess:
    """kcat -G until until(records) or it exits or timeout; then SIGTERM (clean close)."""
    # -u: unbuffered, so records reach us while kcat runs (the done() test)
    proc = KcatProcess([KCAT, "-b", bootstrap, "-G", group, "-u", "-X", "auto.offset.reset=earliest",
                        "-f", FORMAT, *extra, topic])
    cc.wait_until(lambda: until(proc.records) or proc.proc.poll() is not None, timeout)
    if proc.proc.poll() is None:
        proc.close()
    else:
        for t in proc._threads:
            t.join(5)
    return proc


def check_commit_resume(rep: cc.Reporter, args) -> None:
    if args.phase == "a":
        topic, group = cc.unique("compat-resume"), cc.unique("compat-resume")
        create_topic(args.bootstrap, topic, cc.PRODUCE_PARTITIONS, args.stage_timeout)
        problems = kcat_produce(args.bootstrap, topic, topic, args.messages, args.stage_timeout)
        records, more = kcat_read_all(args.bootstrap, topic, args.stage_timeout)
        problems += more + cc.verify_read_back(topic, args.messages, records, None)
        if problems:
            rep.emit("commit-resume", "fail", "phase a produce/read-back: " + "; ".join(problems))
            return
        half = args.messages // 2
        # -c: kcat exits after `half` messages; closing commits what it consumed
        proc = consume_group(args.bootstrap, group, topic, lambda rs: len(rs) >= half,
                             args.stage_timeout, ("-c", str(half), "-X", "enable.auto.commit=true"))
        consumed = proc.records
        if len(consumed) != half or proc.proc.returncode != 0:
            rep.emit("commit-resume", "fail",
                     f"phase a: kcat -G -c {half} consumed {len(consumed)}, exit "
                     f"{proc.proc.returncode}: {stderr_summary(chr(10).join(proc.stderr))}")
            return
        committed = cc.next_offsets(consumed)
        cc.save_resume_state(args.state, topic, group, committed, consumed, cc.end_offsets(records))
        cc.log(f"phase a: consumed {len(consumed)}, expect committed {committed}")
        return
    state, committed, done = cc.resume_plan(args.state)
    proc = consume_group(args.bootstrap, state["group"], state["topic"], done, args.stage_timeout)
    problems = cc.verify_resume(state, proc.records)
    if problems and proc.error:
        problems.append(f"kcat: {proc.error}")
    rep.verdict("commit-resume", problems,
                f"kcat -G -c {args.messages // 2} then auto-commit on close; after broker restart "
                f"resumed at {committed}, read the other {len(proc.records)}")


def check_idempotent(rep: cc.Reporter, args) -> None:
    topic = cc.unique("compat-idempotent")
    create_topic(args.bootstrap, topic, cc.PRODUCE_PARTITIONS, args.stage_timeout)
    problems = kcat_produce(args.bootstrap, topic, topic, args.messages, args.stage_timeout,
                            ("-X", "enable.idempotence=true"))
    if not problems:
        records, problems = kcat_read_all(args.bootstrap, topic, args.stage_timeout)
        problems += cc.verify_read_back(topic, args.messages, records, None)
    rep.verdict("idempotent", problems,
                f"-X enable.idempotence=true: {args.messages} read back once, in order")


def x_options(conf: dict[str, str]) -> tuple[str, ...]:
    return tuple(a for k, v in conf.items() for a in ("-X", f"{k}={v}"))


def kcat_until_auth_error(argv: list[str], timeout: float) -> tuple[KcatProcess, str]:
    """Runs kcat until it exits, or until librdkafka logs a SASL authentication
    error (it would retry until the timeout), or the timeout; returns the
    process and that error line ("" if none)."""
    proc = KcatProcess(argv)

    def auth_error() -> str:
        return next((m.group(0) for ln in list(proc.stderr) if (m := AUTH_FAILED.search(ln))), "")

    cc.wait_until(lambda: proc.proc.poll() is not None or bool(auth_error()), timeout)
    proc.close()
    return proc, auth_error()[:300]


def newer_librdkafka(scratch: str) -> str:
    """A directory holding librdkafka.so.1 = the librdkafka the venv's
    confluent-kafka wheel ships (a real, current librdkafka build), for kcat
    to load instead of the system's through LD_LIBRARY_PATH; "" if none."""
    import confluent_kafka  # the .venv's

    libs = sorted(Path(confluent_kafka.__file__).resolve().parent.parent.glob("confluent_kafka.libs/librdkafka*.so*"))
    if not libs:
        return ""
    os.symlink(libs[0], os.path.join(scratch, "librdkafka.so.1"))
    return scratch


def check_security(rep: cc.Reporter, args) -> None:
    """The four steps of compat_common.security_check through kcat; each kcat
    gets the security settings as -X options and message.timeout.ms bounded
    by the stage timeout. A librdkafka that cannot log in with SCRAM at all
    (cc.librdkafka_scram_note: Debian bookworm's 2.0.2) is replaced for these
    steps by the confluent-kafka wheel's (newer_librdkafka), and the detail
    says so; without one the SCRAM steps are not possible."""
    n, timeout = args.messages, args.stage_timeout
    bound = ("-X", f"message.timeout.ms={int(timeout * 1000)}")
    _, librdkafka = kcat_version()
    scram_defect = cc.librdkafka_scram_note(librdkafka)
    on_lib = ""
    if scram_defect:
        libdir = newer_librdkafka(tempfile.mkdtemp(prefix="kcat-librdkafka-"))
        if libdir:
            os.environ["LD_LIBRARY_PATH"] = libdir  # every kcat started from here on
            _, replaced = kcat_version()
            if not cc.librdkafka_scram_note(replaced):
                cc.log(f"kcat runs on librdkafka {replaced} (the confluent-kafka wheel's) for the security "
                       f"steps: {scram_defect}")
                on_lib = f" (kcat on librdkafka {replaced}, the confluent-kafka wheel's: Debian's {librdkafka} " \
                         "repeats the SCRAM client nonce, confluentinc/librdkafka#4895)"
                scram_defect = ""
    right_password_refused: list[str] = []

    def login_refused(auth: str) -> list[str]:
        """The problem of a refused login with the right password."""
        right_password_refused.append(auth)
        if scram_defect:
            raise cc.ClientCannot(f"{auth}; {scram_defect}")
        return [auth]

    def produce_one(bootstrap: str, conf: dict[str, str], topic: str) -> tuple[KcatProcess, str]:
        # kcat -P serves librdkafka's log queue while it runs (kcat -L would print
        # the authentication error only when its metadata wait is over)
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
            f.write("one\n")
            f.flush()
            return kcat_until_auth_error([KCAT, "-b", bootstrap, "-P", "-t", topic, "-X", "acks=all",
                                          *x_options(conf), *bound, "-l", f.name], timeout)

    def produce_consume(bootstrap: str, conf: dict, topic: str, group: str) -> cc.StepResult:
        create_topic(bootstrap, topic, cc.PRODUCE_PARTITIONS, timeout, conf)  # setup: kcat creates no topics
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
            f.writelines(f"{cc.message_key(i).decode()}\t{cc.message_value(topic, i).decode()}\n"
                         for i in range(n))
            f.flush()
            proc, auth = kcat_until_auth_error(
                [KCAT, "-b", bootstrap, "-P", "-t", topic, "-K", r"\t", "-X", "acks=all",
                 *x_options(conf), *bound, "-l", f.name], timeout)
        if auth:
            return login_refused(auth), ""
        err = stderr_summary("\n".join(proc.stderr))
        if proc.proc.returncode != 0 or "ERROR" in err:
            return [f"kcat -P exit status {proc.proc.returncode}: {err}"], ""
        reader = consume_group(bootstrap, group, topic, lambda rs: len(rs) >= n, timeout, x_options(conf))
        problems = cc.verify_read_back(topic, n, reader.records, None)
        if problems and reader.error:
            problems.append(f"kcat -G: {reader.error}")
        return problems, f"kcat -P {n} to {topic}, kcat -G {group} read them back{on_lib}"

    def refused_login(bootstrap: str, conf: dict) -> cc.StepResult:
        if right_password_refused and scram_defect:
            raise cc.ClientCannot("the right password is refused too, so a refusal shows nothing")
        proc, auth = produce_one(bootstrap, conf, cc.unique(args.topic_prefix + "login"))
        if not auth:
            return [f"no SASL authentication error within {timeout:.0f}s (kcat -P exit status "
                    f"{proc.proc.returncode}: {stderr_summary(chr(10).join(proc.stderr))})"], ""
        return [], f"kcat -P refused: {auth}"

    def denied_produce(bootstrap: str, conf: dict) -> cc.StepResult:
        proc, auth = produce_one(bootstrap, conf, args.denied_topic)
        if auth:
            return login_refused(auth), ""
        err = stderr_summary("\n".join(proc.stderr))
        if TOPIC_DENIED not in err or proc.proc.returncode == 0:
            return [f"want '{TOPIC_DENIED}', kcat -P exit status {proc.proc.returncode}: {err}"], ""
        return [], f"kcat -P exit status {proc.proc.returncode}, {err}"

    cc.security_check(rep, args, produce_consume, refused_login, denied_produce)


def main() -> int:
    version, _ = kcat_version()
    return cc.driver_main(__doc__, CLIENT, version, cc.checks_in(globals()))


if __name__ == "__main__":
    raise SystemExit(main())
