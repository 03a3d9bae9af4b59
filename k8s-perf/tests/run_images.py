#!/usr/bin/env python3
"""k8s-perf/tests/run_images.py - the built images run the way the manifests run them.

From the rendered ``cluster`` overlay (stock ``kubectl kustomize``), starts as
podman containers: the broker StatefulSet's three pods, one ingestor pod, one
consumer pod and the load Job's pods (two indexes by default). Each gets what
Kubernetes would give it:

- its own network namespace on a bridge (a pod IP; the manifests' 0.0.0.0
  binds and fixed ports unchanged), and ``/etc/hosts`` entries for the
  Services (``chronik``, ``chronik-ingestor``), the StatefulSet's stable
  names (``chronik-0.chronik-headless.<ns>.svc.cluster.local``) and the load
  Job's (``chronik-load-0.chronik-load``: its subdomain);
- the container's own command (the broker's ``/opt/chronik/entrypoint.sh``
  from its ConfigMap, the consumer's and the generators' ``/bin/sh -c``
  lines) and the manifest's env and envFrom ConfigMaps, downward-API fields
  resolved (pod name, namespace, the Job's completion index);
- its volumes as directories: the entrypoint and plans ConfigMaps, the
  cluster Secret (generated here, as k8s-perf/run.sh does), emptyDirs for
  data, reports and the generators' results.

The load is the Job's: chronik-loadgen from the harness image runs the smoke
plan (--rate/--duration as LOADGEN_ARGS, the small overlay's way) as
``--generators`` indexes, index 0 holding the start barrier the others join
by its stable name; each generator's results are fetched from it as
k8s-perf/lib/collect.sh does (GET :9102/results once complete, then DELETE, which lets it
exit) and pooled on the host (``chronik-loadgen merge``). The run drains
(scripts/runctl.py: in-flight, ledger-total, drained), the consumer gets
SIGTERM and writes its report into its reports volume, and
``chronik-consumer merge`` reconciles it with the ingestor's ledger. Exit 0
when every generator exited 0, the merged thresholds held and that
verification is clean and conclusive; every container, namespace and link
is removed on exit.

  k8s-perf/tests/run_images.py [--tag dev] [--rate 50] [--duration 20s] [--generators 2] [--keep DIR]

Needs: root, podman + runc (scripts/install-system-deps.sh --containers),
the images (scripts/build-images.sh), release chronik-consumer, Go
(scripts/install-loadgen.sh: chronik-loadgen on the host for the merge).
Must not: build images, or touch addresses outside the bridge it creates
(10.213.0.0/24) and 127.0.0.0/8.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
RUNCTL = REPO / "scripts" / "runctl.py"
RESULTS_PY = REPO / "k8s-perf" / "lib" / "results.py"
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
NAMESPACE = "chronik-perf"
DOMAIN = "cluster.local"
BRIDGE, SUBNET = "chkbr0", "10.213.0"
PODMAN = ["podman", "--runtime", "runc", "--cgroup-manager=cgroupfs"]
# runc may not raise limits on this host (setrlimit is refused above them)
LIMITS = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]
PREFIX = "chk-"  # container and namespace names this script owns


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] run_images: {msg}", file=sys.stderr, flush=True)


def sh(*cmd: str, check: bool = True, quiet: bool = False) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip() or r.stdout.strip()}")
    if not quiet and r.returncode != 0:
        log(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r


def render(overlay: str) -> list[dict]:
    text = sh("kubectl", "kustomize", str(REPO / "k8s-perf" / "overlays" / overlay)).stdout
    return [d for d in yaml.safe_load_all(text) if d]


def find(docs: list[dict], kind: str, name: str) -> dict:
    for d in docs:
        if d["kind"] == kind and d["metadata"]["name"] == name:
            return d
    raise RuntimeError(f"no {kind} {name} in the rendered overlay")


class Pods:
    """Network namespaces on one bridge, and the containers in them."""

    def __init__(self, work: Path):
        self.work = work
        self.ips: dict[str, str] = {}
        self.containers: list[str] = []

    def cleanup(self) -> None:
        for c in self.containers:
            sh(*PODMAN, "rm", "-f", "-t", "5", c, check=False, quiet=True)
        for pod in list(self.ips):
            sh("ip", "netns", "del", PREFIX + pod, check=False, quiet=True)
        sh("ip", "link", "del", BRIDGE, check=False, quiet=True)

    def network(self, pods: list[str]) -> None:
        sh("ip", "link", "add", BRIDGE, "type", "bridge")
        sh("ip", "addr", "add", f"{SUBNET}.1/24", "dev", BRIDGE)
        sh("ip", "link", "set", BRIDGE, "up")
        for i, pod in enumerate(pods):
            ns, host_end, ip = PREFIX + pod, f"chkv{i}", f"{SUBNET}.{10 + i}"
            sh("ip", "netns", "add", ns)
            self.ips[pod] = ip
            sh("ip", "link", "add", host_end, "type", "veth", "peer", "name", "eth0", "netns", ns)
            sh("ip", "link", "set", host_end, "master", BRIDGE)
            sh("ip", "link", "set", host_end, "up")
            sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")

    def run(self, pod: str, container: dict, image: str, hosts: dict[str, str], volumes: dict[str, Path],
            config_maps: dict[str, dict] | None = None, annotations: dict[str, str] | None = None) -> None:
        env = []
        for ef in container.get("envFrom", []):
            for k, v in (config_maps or {})[ef["configMapRef"]["name"]].items():
                env += ["--env", f"{k}={v}"]
        for e in container.get("env", []):
            if "value" in e:
                env += ["--env", f"{e['name']}={e['value']}"]
            else:
                field = e["valueFrom"]["fieldRef"]["fieldPath"]
                fields = {"metadata.name": pod, "metadata.namespace": NAMESPACE,
                          **{f"metadata.annotations['{k}']": v for k, v in (annotations or {}).items()}}
                value = fields.get(field)
                if value is None and field.startswith("metadata.labels["):
                    # no node here: the downward API gives a label the pod
                    # lacks (an unlabelled node's zone) as an empty value
                    value = ""
                if value is None:
                    raise KeyError(field)
                env += ["--env", f"{e['name']}={value}"]
        mounts = []
        for m in container.get("volumeMounts", []):
            ro = ",ro" if m.get("readOnly") else ""
            mounts += ["--volume", f"{volumes[m['name']]}:{m['mountPath']}:z{ro}"]
        command = container.get("command") or []
        entry = ["--entrypoint", json.dumps(command[:1])] if command else []
        name = f"{PREFIX}{pod}-{container['name']}"
        self.containers.append(name)
        sh(*PODMAN, "run", "-d", "--name", name, "--hostname", pod, "--network", f"ns:/run/netns/{PREFIX}{pod}",
           *LIMITS, *(a for h, ip in hosts.items() for a in ("--add-host", f"{h}:{ip}")), *env, *mounts, *entry,
           image, *command[1:], *(container.get("args") or []))

    def logs(self) -> None:
        for c in self.containers:
            out = sh(*PODMAN, "logs", "--tail", "15", c, check=False, quiet=True)
            log(f"--- {c} ---\n{out.stdout}{out.stderr}")


def wait_http(url: str, what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} ({url}) not ready within {timeout:.0f} s")
        time.sleep(0.5)


def fetch_results(url: str, dest: Path, index: int, timeout: float) -> bool:
    """GET one generator's /results (503 until complete) as lib/collect.sh does,
    unpacked by lib/results.py into dest/gen-<index>/."""
    deadline = time.monotonic() + timeout
    tgz = dest / f".gen-{index}.tar.gz"
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=60) as r:
                tgz.write_bytes(r.read())
            ok = subprocess.run([sys.executable, str(RESULTS_PY), "unpack", str(tgz), str(dest), str(index)]).returncode == 0
            tgz.unlink()
            if ok:  # collected: the generator may exit
                urllib.request.urlopen(urllib.request.Request(url, method="DELETE"), timeout=60).close()
            return ok
        except OSError:
            time.sleep(1)
    return False


def volume_dir(work: Path, name: str, owner: int = 10001) -> Path:
    d = work / "volumes" / name
    d.mkdir(parents=True, exist_ok=True)
    os.chown(d, owner, owner)
    return d


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tag", default="dev")
    ap.add_argument("--overlay", default="cluster")
    ap.add_argument("--rate", type=int, default=50, help="requests/s of 100 messages (default 50 = 5,000 msg/s)")
    ap.add_argument("--duration", default="20s")
    ap.add_argument("--generators", type=int, default=2, help="indexes of the load Job to run (default 2: the barrier)")
    ap.add_argument("--keep", type=Path, help="keep logs and reports here")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run_images.py needs root (network namespaces, podman with runc)")
    docs = render(args.overlay)
    sts = find(docs, "StatefulSet", "chronik")
    ingestor = find(docs, "Deployment", "chronik-ingestor")
    consumer = find(docs, "Deployment", "chronik-consumer")
    job = find(docs, "Job", "chronik-load")
    entrypoint_cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("chronik-broker-entrypoint"))
    config_maps = {d["metadata"]["name"]: d.get("data") or {} for d in docs if d["kind"] == "ConfigMap"}
    job_spec = job["spec"]["template"]["spec"]
    gen_container = job_spec["containers"][0]
    load_env_name = gen_container["envFrom"][0]["configMapRef"]["name"]
    # the smoke plan at --rate for --duration on --generators indexes (the small overlay's way)
    config_maps[load_env_name] = {**config_maps[load_env_name], "PLAN": "smoke", "GENERATORS": str(args.generators),
                                  "LOADGEN_ARGS": f"--rate {args.rate} --duration {args.duration}",
                                  "RUN_ID": "images-test"}
    generators = [f"chronik-load-{i}" for i in range(args.generators)]
    replicas = sts["spec"]["replicas"]
    headless = sts["spec"]["serviceName"]
    brokers = [f"chronik-{i}" for i in range(replicas)]
    images = {"chronik-server": f"localhost/chronik-server:{args.tag}", "chronik-harness": f"localhost/chronik-harness:{args.tag}"}

    def image_of(container: dict) -> str:
        return images[container["image"].split("/")[-1].split(":")[0]]

    work = Path(tempfile.mkdtemp(prefix="chronik-images-"))
    os.chmod(work, 0o755)
    pods = Pods(work)
    # leftovers of an interrupted run
    for c in sh(*PODMAN, "ps", "-a", "--format", "{{.Names}}", check=False, quiet=True).stdout.split():
        if c.startswith(PREFIX):
            sh(*PODMAN, "rm", "-f", c, check=False, quiet=True)
    all_pods = [*brokers, "chronik-ingestor-0", "chronik-consumer-0", *generators]
    pods.ips = {p: "" for p in all_pods}
    pods.cleanup()
    pods.ips = {}
    rc = 1
    try:
        loadgen_bin = sh("bash", str(REPO / "scripts" / "install-loadgen.sh")).stdout.strip()
        pods.network(all_pods)
        hosts = {f"{b}.{headless}.{NAMESPACE}.svc.{DOMAIN}": pods.ips[b] for b in brokers}
        hosts |= {"chronik": pods.ips[brokers[0]], f"chronik.{NAMESPACE}.svc.{DOMAIN}": pods.ips[brokers[0]],
                  "chronik-ingestor": pods.ips["chronik-ingestor-0"]}
        # the generators' stable names (subdomain = the headless Service), as the barrier peers use them
        sub = job_spec["subdomain"]
        hosts |= {f"{g}.{sub}": pods.ips[g] for g in generators}
        hosts |= {f"{g}.{sub}.{NAMESPACE}.svc.{DOMAIN}": pods.ips[g] for g in generators}
        cm = volume_dir(work, "entrypoint", 0)
        for key, text in entrypoint_cm["data"].items():
            (cm / key).write_text(text)
        secret = volume_dir(work, "cluster-secret", 0)
        (secret / "cluster.secret").write_text(secrets.token_hex(32))
        os.chmod(secret / "cluster.secret", 0o644)
        spec = sts["spec"]["template"]["spec"]
        volumes_of = {v["name"]: v for v in spec.get("volumes", [])}
        for b in brokers:
            volumes: dict[str, Path] = {}
            for name, v in volumes_of.items():
                volumes[name] = cm if "configMap" in v else secret if "secret" in v else volume_dir(work, f"{b}-{name}")
            for claim in sts["spec"].get("volumeClaimTemplates", []):
                volumes[claim["metadata"]["name"]] = volume_dir(work, f"{b}-{claim['metadata']['name']}")
            container = spec["containers"][0]
            pods.run(b, container, image_of(container), hosts, volumes)
        for b in brokers:
            wait_http(f"http://{pods.ips[b]}:9644/ready", f"broker {b}")
        log(f"{replicas} broker containers ready: {', '.join(f'{b}={pods.ips[b]}' for b in brokers)}")

        ing = ingestor["spec"]["template"]["spec"]["containers"][0]
        pods.run("chronik-ingestor-0", ing, image_of(ing), hosts, {})
        ingestor_url = f"http://{pods.ips['chronik-ingestor-0']}:8080"
        wait_http(f"{ingestor_url}/health", "ingestor")
        # the first request creates the topic (broker auto-create, as in the cluster)
        body = json.dumps([{"value": "hello"}]).encode()
        req = urllib.request.Request(f"{ingestor_url}/produce/batch", data=body,
                                     headers={"Content-Type": "application/json"})
        for _ in range(60):
            try:
                with urllib.request.urlopen(req, timeout=10) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(1)
        cspec = consumer["spec"]["template"]["spec"]
        reports = volume_dir(work, "reports")
        con = next(c for c in cspec["containers"] if c["name"] == "consumer")
        pods.run("chronik-consumer-0", con, image_of(con), hosts, {v["name"]: reports for v in cspec["volumes"]})
        consumer_url = f"http://{pods.ips['chronik-consumer-0']}:9645"
        wait_http(f"{consumer_url}/health", "consumer")
        partitions = int(next(e["value"] for e in spec["containers"][0]["env"] if e["name"] == "CHRONIK_DEFAULT_PARTITIONS"))
        py = str(REPO / ".venv" / "bin" / "python")
        sh(py, str(RUNCTL), "settle", "--partitions", str(partitions), "--timeout", "90", consumer_url)

        # the load Job's pods: the generators in the harness image, with the Job's script and env
        log(f"load Job: {args.generators} chronik-loadgen indexes, smoke at {args.rate} requests/s for "
            f"{args.duration} against {ingestor_url} (the Service chronik-ingestor)")
        plans = volume_dir(work, "plans", 0)
        plans_cm = next(config_maps[v["configMap"]["name"]] for v in job_spec["volumes"] if "configMap" in v)
        for key, text in plans_cm.items():
            (plans / key).write_text(text)
        for i, g in enumerate(generators):
            volumes = {v["name"]: plans if "configMap" in v else volume_dir(work, f"{g}-{v['name']}")
                       for v in job_spec["volumes"]}
            pods.run(g, gen_container, image_of(gen_container), hosts, volumes, config_maps, {INDEX_ANNOTATION: str(i)})
        load = work / "load"
        load.mkdir()
        fetched = [fetch_results(f"http://{pods.ips[g]}:9102/results", load, i, timeout=300)
                   for i, g in enumerate(generators)]
        exits = [sh(*PODMAN, "wait", f"{PREFIX}{g}-{gen_container['name']}", check=False).stdout.strip()
                 for g in generators]
        merge_load = subprocess.run([loadgen_bin, "merge", "--results", str(load)], capture_output=True, text=True)
        print(merge_load.stdout[-1500:], merge_load.stderr[-500:], file=sys.stderr)
        log(f"generators' results fetched: {fetched}, their exit statuses {exits}, "
            f"chronik-loadgen merge exit {merge_load.returncode}")
        load_ok = all(fetched) and all(e == "0" for e in exits) and merge_load.returncode == 0
        for _ in range(120):
            if sh(py, str(RUNCTL), "in-flight", ingestor_url).stdout.strip() == "0":
                break
            time.sleep(1)
        ledger = work / "ingestor-ledger.json"
        with urllib.request.urlopen(f"{ingestor_url}/ledger", timeout=10) as r:
            ledger.write_bytes(r.read())
        acked = sh(py, str(RUNCTL), "ledger-total", str(ledger)).stdout.strip()
        for _ in range(120):
            if sh(py, str(RUNCTL), "drained", "--acked", acked, "--partitions", str(partitions), consumer_url,
                  check=False, quiet=True).returncode == 0:
                break
            time.sleep(1)
        log(f"ingestor acknowledged {acked} messages; stopping the consumer (SIGTERM: it writes its report)")
        sh(*PODMAN, "kill", "--signal", "TERM", f"{PREFIX}chronik-consumer-0-consumer")
        sh(*PODMAN, "wait", f"{PREFIX}chronik-consumer-0-consumer", check=False)
        reports_written = sorted(reports.glob("*.json"))
        if not reports_written:
            raise RuntimeError("the consumer wrote no report into its reports volume")
        merged = work / "merged.json"
        merge = subprocess.run([str(REPO / "target" / "release" / "chronik-consumer"), "merge", "--ledger", str(ledger),
                                "--report", str(merged), *map(str, reports_written)], capture_output=True, text=True)
        print(merge.stdout.strip(), file=sys.stderr)
        m = json.loads(merged.read_text())
        c = m["counts"]
        log(f"verification: exit {merge.returncode}; {c['verified']} verified of {acked} acknowledged, "
            f"{c['lost']} lost, {c['duplicates']} duplicated, {c['reordered']} reordered, {c['corrupt']} corrupt; "
            f"load {'ok' if load_ok else 'FAILED'}")
        rc = 0 if merge.returncode == 0 and load_ok and int(acked) > 0 else 1
        print(f"images: {'1 passed, 0 failed' if rc == 0 else '0 passed, 1 failed'}")
    except Exception as e:  # noqa: BLE001 - report, show the containers' logs, clean up
        log(f"failed: {e}")
        pods.logs()
        print("images: 0 passed, 1 failed")
    finally:
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            for c in pods.containers:
                out = sh(*PODMAN, "logs", c, check=False, quiet=True)
                (args.keep / f"{c}.log").write_text(out.stdout + out.stderr)
            shutil.copytree(work, args.keep / "work", dirs_exist_ok=True)
        pods.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
