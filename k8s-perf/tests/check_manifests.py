"""k8s-perf/tests/check_manifests.py - what kustomize builds must match what
the binaries (chronik-loadgen included) and kustomize itself really do.

Owns, per built overlay (one YAML file each, named <overlay>.yaml):
  names     every ConfigMap a pod names (volume or envFrom) exists, with
            kustomize's content hash
  loadgen   the load Job: completionMode Indexed, completions = parallelism
            = GENERATORS, no index re-run (backoffLimitPerIndex 0, restartPolicy
            Never), the completion index from its annotation, a headless
            Service named by the pods' subdomain; its script run for indexes
            0, 1 and N-1 with a stand-in chronik-loadgen: `run
            /plans/<PLAN>.json`, --index, --generators N, index 0
            --barrier-listen on the barrier port, every other index
            --barrier-peer http://<job>-0.<subdomain>:<that port>,
            --prometheus-addr on the metrics port, --results an emptyDir,
            --targets the ingestor Service (https when it serves HTTPS),
            --acks / --topology the deployment's; every flag and value
            accepted by `chronik-loadgen run --help`, the overrides by
            `chronik-loadgen describe` on the plan; the plans ConfigMap holds
            every load/plans/*.json byte for byte
  binaries  every env var and flag of a chronik container is in that binary's
            --help (enumerated values among the possible values, numbers where
            the default is a number); other env vars are read by the script
            the container runs; the broker entrypoint's own exports too
  ports     listen ports = named container ports; probes and monitors use
            named ports that serve that endpoint; probe paths answered by the
            real binary (--served, from scrape.sh); Service selectors and
            targetPorts match the pods
  topology  combined nodes: StatefulSet replicas = BROKER_REPLICAS;
            components/controllers: broker-only brokers, controller-only
            controllers, both naming the controller StatefulSet, its Service
            and replicas (odd); RF <= brokers; min.insync <= RF; required
            anti-affinity per host; headless governing Services publishing
            not-ready addresses; a PodDisruptionBudget of 1 over each
  entrypoint  base/broker/entrypoint.sh run with each StatefulSet's env and a
            stand-in chronik-server: node id, advertised name (or listeners) and
            peers (the voters); a broker StatefulSet apart from its
            controllers also for two pods past its replicas (it grows)
  racks     brokers' CHRONIK_BROKER_RACK and the consumers' client.rack from
            the pod's topology.kubernetes.io/zone label (downward API), the
            rack-aware replica selector; the entrypoint drops an empty rack
            and a controller's rack settings
  secrets, tls  check_secure.py (no literal secret; Secrets and files a pod
            names exist; components/secure's protocol, authorizer and clients)
  security  the namespace enforces PodSecurity restricted, every pod template
            (Deployments, StatefulSet, Jobs) satisfies it; the brokers'
            NetworkPolicy
Prints "ok"/"FAIL" lines; exit 1 if anything failed. Must not: build
overlays (test.sh does) or start servers (scrape.sh does).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from check_secure import VAR_REF, check_secrets, check_tls
from checklib import broker_and_controllers, by_kind, check, counts, docs_of, env_of
from helpinfo import Help, go_type, read_help, read_loadgen_help

REPO = Path(__file__).resolve().parents[2]
BASE = REPO / "k8s-perf" / "base"
LOG_ENV = {"CHRONIK_LOG"}          # tracing EnvFilter, read by every binary (not a clap flag)
LOADGEN = "chronik-loadgen"
BINARIES = ("chronik-server", "chronik-ingestor", "chronik-consumer", "chronik-bench", LOADGEN)
IMAGES = {"chronik-server": "chronik-server", "chronik-ingestor": "chronik-harness",
          "chronik-consumer": "chronik-harness", "chronik-bench": "chronik-harness", LOADGEN: "chronik-harness"}
# `chronik-loadgen run` flags that are not plan overrides (`describe` takes the rest)
LOADGEN_RUN_ONLY = {"--targets", "--results", "--generators", "--index", "--barrier-listen", "--barrier-peer",
                    "--barrier-timeout", "--ready-timeout", "--prometheus-addr", "--serve-results-for", "--run-id",
                    "--git-commit", "--token-file", "--ca-file"}
INDEX_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
GO_DURATION = re.compile(r"(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+")
# endpoint each binary serves on which of its listen options
ENDPOINT_FLAG = {("chronik-server", "/metrics"): "--metrics-listen", ("chronik-server", "/health"): "--metrics-listen",
                 ("chronik-server", "/ready"): "--metrics-listen", ("chronik-ingestor", "/metrics"): "--listen",
                 ("chronik-ingestor", "/health"): "--listen", ("chronik-ingestor", "/ready"): "--listen",
                 ("chronik-consumer", "/metrics"): "--listen", ("chronik-consumer", "/health"): "--listen",
                 ("chronik-consumer", "/summary"): "--listen"}
KAFKA_PORT_FLAG = {"chronik-server": {"kafka": "--listen", "raft": "--raft-listen"}}

def pod_templates(docs):
    """(workload, pod spec, labels) of every Deployment, StatefulSet and Job."""
    for d in docs:
        if d["kind"] in ("Deployment", "StatefulSet", "Job"):
            t = d["spec"]["template"]
            yield d, t["spec"], t["metadata"].get("labels", {})


def container_binary(c: dict, configmaps: dict) -> tuple[str | None, str]:
    """The chronik binary a container runs and the script text that runs it."""
    cmd = c.get("command", []) + c.get("args", [])
    text = " ".join(cmd)
    if cmd and cmd[0].split("/")[-1] in BINARIES:
        return cmd[0].split("/")[-1], text
    for b in BINARIES:
        if re.search(rf"\bexec {b}\b", text):
            return b, text
    # a script from a mounted ConfigMap (the broker's entrypoint)
    for vm in c.get("volumeMounts", []):
        for arg in cmd:
            if arg.startswith(vm["mountPath"] + "/"):
                key = arg[len(vm["mountPath"]) + 1:]
                script = configmaps.get(("mount", vm["name"]), {}).get(key)
                if script:
                    for b in BINARIES:
                        if re.search(rf"^exec {b}\b", script, re.M):
                            return b, script
    return None, text


def listen_port(help_: Help, env: dict, flag: str) -> int | None:
    if flag == "--listen" and env.get("CHRONIK_LISTENERS") and "--listeners" in help_.options:
        # --listeners replaces --listen: the Kafka port is that of its listeners (one port here)
        ports = {int(entry.rsplit(":", 1)[1]) for entry in env["CHRONIK_LISTENERS"].split(",")}
        return ports.pop() if len(ports) == 1 else None
    opt = help_.options.get(flag)
    if opt is None:
        return None
    value = env.get(opt.env) if opt.env else None
    value = value if value is not None else opt.default
    return int(value.rsplit(":", 1)[1]) if value and ":" in value else None


def check_binaries(overlay, docs, helps, served):
    cms = {d["metadata"]["name"]: d.get("data", {}) for d in by_kind(docs, "ConfigMap")}
    services = by_kind(docs, "Service")
    for wl, spec, labels in pod_templates(docs):
        vols = {v["name"]: v for v in spec.get("volumes", [])}
        mount_cms = {("mount", n): cms.get(v["configMap"]["name"], {}) for n, v in vols.items() if "configMap" in v}
        for c in spec["containers"]:
            where = f"{overlay}: {wl['kind']}/{wl['metadata']['name']} container {c['name']}"
            binary, script = container_binary(c, mount_cms)
            if binary is None:
                check(not any(e["name"].startswith("CHRONIK_") for e in c.get("env", [])),
                      f"{where}: runs no chronik binary and sets no CHRONIK_* env")
                continue
            repo = c["image"].rsplit(":", 1)[0].rsplit("/", 1)[-1]
            check(repo == IMAGES[binary] and (REPO / "docker" / f"{repo}.Dockerfile").is_file(),
                  f"{where}: image {c['image']} is built by docker/{IMAGES[binary]}.Dockerfile")
            if binary == LOADGEN:
                continue   # Go flags, one script run per index: check_loadgen
            h = helps[binary]
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            referenced = {v for e in c.get("env", []) for v in VAR_REF.findall(e.get("value") or "")}
            for name, value in env.items():
                if name in LOG_ENV:
                    continue
                if name in h.envs:
                    opt = h.envs[name]
                    ok = True
                    detail = ""
                    if value is not None and opt.values:
                        ok, detail = value in opt.values, f"{value!r} not in {opt.values}"
                    elif (value is not None and opt.default is not None and re.fullmatch(r"-?\d+", opt.default)
                          and not re.search(r"\bor\b", opt.doc)):   # "0, 1 or all": words allowed
                        ok, detail = bool(re.fullmatch(r"-?\d+", value)), f"{value!r} is not an integer"
                    check(ok, f"{where}: env {name} is {binary} {opt.flag}", detail)
                elif name.startswith(("CHRONIK_", "KAFKA_")):
                    check(False, f"{where}: env {name} is accepted by {binary}", f"not in `{binary} --help`")
                elif name in referenced:
                    check(True, f"{where}: env {name} is expanded by Kubernetes into another env value ($({name}))")
                else:
                    check(re.search(rf"\${{?{name}\b", script) is not None,
                          f"{where}: env {name} is read by the script the container runs")
            for name in sorted(set(re.findall(r"^\s*export ((?:CHRONIK|KAFKA)_[A-Z0-9_]+(?: (?:CHRONIK|KAFKA)_[A-Z0-9_]+)*)", script, re.M))):
                for n in name.split():
                    check(n in h.envs, f"{where}: the entrypoint's {n} is accepted by {binary}",
                          f"not in `{binary} --help`")
            for flag in sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]+)", " ".join(c.get("command", []) + c.get("args", []))))):
                check(flag in h.options, f"{where}: flag {flag} is accepted by {binary}")
            # ports: every named container port is a listener of the binary
            ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
            flag_of_port = {"metrics": "--metrics-listen" if binary in ("chronik-server", "chronik-ingestor") else "--listen",
                            "http": "--listen", **KAFKA_PORT_FLAG.get(binary, {})}
            for pname, number in ports.items():
                flag = flag_of_port.get(pname)
                got = listen_port(h, env, flag) if flag else None
                check(got == number, f"{where}: port {pname}={number} is {binary} {flag}",
                      f"the binary listens on {got}")
            for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
                probe = c.get(kind)
                if not probe:
                    continue
                g = probe.get("httpGet", {})
                path, port = g.get("path"), g.get("port")
                flag = ENDPOINT_FLAG.get((binary, path))
                if port == "metrics" and binary == "chronik-ingestor":
                    flag = "--metrics-listen"   # the ingestor's plain port for /metrics /health /ready
                number = ports.get(port, port)
                check(flag is not None and listen_port(h, env, flag) == number,
                      f"{where}: {kind} {path} on port {port} is served by {binary} {flag}")
                check(g.get("scheme", "HTTP") == "HTTP" and not (binary == "chronik-ingestor" and flag == "--listen"
                                                               and env.get("CHRONIK_SSL_KEYSTORE_LOCATION")),
                      f"{where}: {kind} speaks plain HTTP to a plain HTTP port (not the ingestor's HTTPS --listen)")
                if served is not None:
                    status = served.get(binary, {}).get(path)
                    check(status is not None and status != 404,
                          f"{where}: {kind} path {path} answered by the real {binary}", f"status {status}")
        # Services that select this workload: targetPorts exist on its containers
        cport_names = {p["name"] for c in spec["containers"] for p in c.get("ports", [])}
        for svc in services:
            sel = svc["spec"].get("selector", {})
            if sel and all(labels.get(k) == v for k, v in sel.items()):
                for p in svc["spec"]["ports"]:
                    tp = p.get("targetPort", p["port"])
                    check(tp in cport_names, f"{overlay}: Service/{svc['metadata']['name']} port {p['name']} -> "
                          f"{wl['metadata']['name']} port {tp}")


def check_monitors(overlay, docs):
    services = by_kind(docs, "Service")
    pods = list(pod_templates(docs))
    for sm in by_kind(docs, "ServiceMonitor"):
        sel = sm["spec"]["selector"]["matchLabels"]
        matched = [s for s in services if all(s["metadata"].get("labels", {}).get(k) == v for k, v in sel.items())]
        check(len(matched) == 1, f"{overlay}: ServiceMonitor/{sm['metadata']['name']} selects one Service",
              f"selects {[s['metadata']['name'] for s in matched]}")
        for svc in matched:
            for ep in sm["spec"]["endpoints"]:
                sp = next((p for p in svc["spec"]["ports"] if p["name"] == ep["port"]), None)
                ok = sp is not None and ep.get("path", "/metrics") == "/metrics"
                target = sp and sp.get("targetPort")
                ok = ok and target in ("metrics", "http")
                check(ok, f"{overlay}: ServiceMonitor/{sm['metadata']['name']} scrapes {svc['metadata']['name']}:{ep['port']} "
                      f"(container port {target}) /metrics")
    for pm in by_kind(docs, "PodMonitor"):
        sel = pm["spec"]["selector"]["matchLabels"]
        matched = [(wl, spec) for wl, spec, labels in pods if all(labels.get(k) == v for k, v in sel.items())]
        check(len(matched) == 1, f"{overlay}: PodMonitor/{pm['metadata']['name']} selects one workload")
        for wl, spec in matched:
            names = {p["name"] for c in spec["containers"] for p in c.get("ports", [])}
            for ep in pm["spec"]["podMetricsEndpoints"]:
                check(ep["port"] in names and ep["port"] == "metrics",
                      f"{overlay}: PodMonitor/{pm['metadata']['name']} scrapes {wl['metadata']['name']} port {ep['port']} /metrics")


def check_names(overlay, docs):
    cms = {d["metadata"]["name"] for d in by_kind(docs, "ConfigMap")}
    refs = []
    for wl, spec, _ in pod_templates(docs):
        for v in spec.get("volumes", []):
            if "configMap" in v:
                refs.append((f"{wl['kind']}/{wl['metadata']['name']} volume {v['name']}", v["configMap"]["name"]))
        for c in spec.get("containers", []) + spec.get("initContainers", []):
            for ef in c.get("envFrom", []):
                if "configMapRef" in ef:
                    refs.append((f"{wl['kind']}/{wl['metadata']['name']} container {c['name']} envFrom",
                                 ef["configMapRef"]["name"]))
    for where, name in refs:
        check(name in cms, f"{overlay}: {where} -> ConfigMap {name} exists")
        check(re.search(r"-[a-z0-9]{10}$", name) is not None,
              f"{overlay}: {where} names the generated ConfigMap with its content hash ({name})")
    dash = [d for d in by_kind(docs, "ConfigMap") if d["metadata"]["name"].startswith("chronik-dashboards")]
    ok = len(dash) == 1 and dash[0]["metadata"].get("labels", {}).get("grafana_dashboard") == "1"
    if ok:
        for key, text in dash[0]["data"].items():
            try:
                ok = ok and bool(json.loads(text).get("panels"))
            except ValueError:
                ok = False
    check(ok, f"{overlay}: dashboards ConfigMap labelled grafana_dashboard=1 with JSON dashboards that have panels")


def script_argv(c: dict, env: dict) -> list[str] | str:
    """The argv a container's command hands to chronik-loadgen, recorded by a
    stand-in on PATH (the real one would start the load); an error text
    when the command fails or never runs it."""
    with tempfile.TemporaryDirectory() as tmp:
        fake = Path(tmp) / LOADGEN
        fake.write_text('#!/bin/sh\nprintf "%s\\0" "$@"\n')
        fake.chmod(0o755)
        cmd = c.get("command", []) + c.get("args", [])
        out = subprocess.run(cmd, env={**env, "PATH": f"{tmp}:/usr/bin:/bin"}, capture_output=True, text=True,
                             timeout=10)
        if out.returncode != 0 or not out.stdout:
            return f"exit {out.returncode}, stdout {out.stdout!r}, stderr {out.stderr.strip()!r}"
        return out.stdout.split("\0")[:-1]


def parse_run_argv(argv: list[str], help_: Help | None) -> tuple[list[str], dict[str, str], list[str]]:
    """(positionals before the flags, {--flag: value}, flags given twice or
    unknown to help_) of `chronik-loadgen run PLAN --flag value ...` (Go's
    flag package: -f or --f, `--f value` or `--f=value`, bools take none)."""
    pos, flags, odd, i = [], {}, [], 0
    while i < len(argv) and not argv[i].startswith("-"):
        pos.append(argv[i])
        i += 1
    while i < len(argv):
        a = argv[i]
        if not a.startswith("-"):
            odd.append(f"stray argument {a!r}")
            i += 1
            continue
        name, eq, value = ("--" + a.lstrip("-")).partition("=")
        opt = help_.options.get(name) if help_ else None
        if help_ is not None and opt is None:
            odd.append(f"{name} unknown")
        takes = opt.takes_value if opt else True
        if takes and not eq:
            i += 1
            value = argv[i] if i < len(argv) else None
        if name in flags:
            odd.append(f"{name} given twice")
        flags[name] = value
        i += 1
    return pos, flags, odd


def value_ok(opt, value) -> bool:
    kind = go_type(opt)
    try:
        if kind == "int":
            int(value)
        elif kind == "float":
            float(value)
        elif kind == "duration":
            return value == "0" or GO_DURATION.fullmatch(value) is not None
        elif kind == "bool":
            return value in (None, "true", "false")
    except (TypeError, ValueError):
        return False
    return value is not None


def check_loadgen(overlay, docs, lg_help: Help | None, lg_bin: Path | None):
    """The load Job (see the module's docstring). Returns the generators' env."""
    jobs = [d for d in by_kind(docs, "Job")
            if d["spec"]["template"]["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "loadgen"]
    if not check(len(jobs) == 1, f"{overlay}: one load Job (pods labelled app.kubernetes.io/component=loadgen)"):
        return {}
    job = jobs[0]
    name, spec = job["metadata"]["name"], job["spec"]
    pod, labels = spec["template"]["spec"], spec["template"]["metadata"].get("labels", {})
    runs = [c for c in pod["containers"] if LOADGEN in " ".join(c.get("command", []) + c.get("args", []))]
    if not check(len(runs) == 1, f"{overlay}: Job {name} has one container running {LOADGEN}"):
        return {}
    c = runs[0]
    cms = {d["metadata"]["name"]: d.get("data") or {} for d in by_kind(docs, "ConfigMap")}
    env: dict[str, str] = {}
    for ef in c.get("envFrom", []):
        env.update(cms.get((ef.get("configMapRef") or {}).get("name"), {}))
    env.update({e["name"]: e["value"] for e in c.get("env", []) if e.get("value") is not None})
    n = env.get("GENERATORS", "")
    where = f"{overlay}: Job {name}"
    check(spec.get("completionMode") == "Indexed", f"{where} is an Indexed Job (completionMode Indexed)",
          f"completionMode {spec.get('completionMode')}")
    check(str(spec.get("completions")) == str(spec.get("parallelism")) == n and n.isdigit() and int(n) >= 1,
          f"{where}: completions = parallelism = GENERATORS ({n}): every index runs at once",
          f"completions {spec.get('completions')}, parallelism {spec.get('parallelism')}, GENERATORS {n!r}")
    check(spec.get("backoffLimitPerIndex") == 0 and pod.get("restartPolicy") == "Never",
          f"{where}: no index is run again (backoffLimitPerIndex 0, restartPolicy Never)",
          f"backoffLimitPerIndex {spec.get('backoffLimitPerIndex')}, restartPolicy {pod.get('restartPolicy')}")
    idx = next((e for e in c.get("env", []) if e["name"] == "JOB_COMPLETION_INDEX"), None)
    check(idx is None or ((idx.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath") == INDEX_FIELD,
          f"{where}: JOB_COMPLETION_INDEX is the pod's completion index")
    sub = pod.get("subdomain")
    svc = next((s for s in by_kind(docs, "Service") if s["metadata"]["name"] == sub), None)
    check(svc is not None and svc["spec"].get("clusterIP") == "None"
          and svc["spec"].get("publishNotReadyAddresses") is True
          and bool(svc["spec"].get("selector")) and svc["spec"]["selector"].items() <= labels.items(),
          f"{where}: subdomain {sub} is a headless Service selecting its pods (stable names {name}-<index>.{sub})",
          f"Service {svc and svc['spec']}")
    ports = {p_["name"]: p_["containerPort"] for p_ in c.get("ports", [])}
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = {m["mountPath"].rstrip("/"): vols.get(m["name"], {}) for m in c.get("volumeMounts", [])}
    check({"barrier", "metrics"} <= ports.keys(), f"{where}: container ports barrier and metrics", str(ports))
    ingestor = next((d for d in by_kind(docs, "Deployment") if d["metadata"]["name"] == "chronik-ingestor"), None)
    ing_labels = ingestor["spec"]["template"]["metadata"]["labels"] if ingestor else {}
    ing_env = env_of(ingestor) if ingestor else {}
    brokers = by_kind(docs, "StatefulSet")[0]["spec"].get("replicas", 1) if by_kind(docs, "StatefulSet") else 1
    count = int(n) if n.isdigit() and int(n) >= 1 else 1
    describe = None
    for i in sorted({0, 1, count - 1} & set(range(count))):
        w = f"{overlay}: generator {i} of {count}"
        argv = script_argv(c, {**env, "JOB_COMPLETION_INDEX": str(i)})
        if not check(isinstance(argv, list), f"{w}: the Job's command runs {LOADGEN}", str(argv)):
            continue
        pos, flags, odd = parse_run_argv(argv, lg_help)
        check(not odd, f"{w}: every flag is one `{LOADGEN} run --help` lists, each given once"
              + ("" if lg_help else f" (no {LOADGEN} binary: names not checked)"), "; ".join(odd))
        if lg_help:
            bad = [f"{f}={v!r} ({go_type(lg_help.options[f])})" for f, v in flags.items()
                   if f in lg_help.options and not value_ok(lg_help.options[f], v)]
            check(not bad, f"{w}: every flag value is of the flag's type", "; ".join(bad))
        plan = env.get("PLAN", "")
        cm = next((cms.get(v["configMap"]["name"]) for path, v in mounts.items()
                   if "configMap" in v and len(pos) > 1 and pos[1] == f"{path}/{plan}.json"), None)
        check(pos[:1] == ["run"] and len(pos) == 2 and cm is not None and f"{plan}.json" in cm,
              f"{w}: runs `{LOADGEN} run /plans/{plan}.json`, the plan from a mounted ConfigMap", str(pos))
        check(flags.get("--index") == str(i) and flags.get("--generators") == n,
              f"{w}: --index {i} --generators {n}", f"--index {flags.get('--index')} --generators {flags.get('--generators')}")
        if i == 0:
            check(flags.get("--barrier-listen") == f":{ports.get('barrier')}" and "--barrier-peer" not in flags,
                  f"{w}: holds the start barrier (--barrier-listen :{ports.get('barrier')}, the barrier port)",
                  f"--barrier-listen {flags.get('--barrier-listen')}, --barrier-peer {flags.get('--barrier-peer')}")
        else:
            want = f"http://{name}-0.{sub}:{ports.get('barrier')}"
            check(flags.get("--barrier-peer") == want and "--barrier-listen" not in flags,
                  f"{w}: joins the barrier at index 0's stable name ({want})",
                  f"--barrier-peer {flags.get('--barrier-peer')}, --barrier-listen {flags.get('--barrier-listen')}")
        check(flags.get("--prometheus-addr") == f":{ports.get('metrics')}",
              f"{w}: --prometheus-addr is the metrics port {ports.get('metrics')}", str(flags.get("--prometheus-addr")))
        results = (flags.get("--results") or "").rstrip("/")
        check("emptyDir" in mounts.get(results, {}), f"{w}: --results {results} is a mounted emptyDir")
        serve = flags.get("--serve-results-for") or "0"
        check(serve != "0" and GO_DURATION.fullmatch(serve) is not None and not re.fullmatch(r"[0.]+[a-zµ]+", serve),
              f"{w}: --serve-results-for {serve}: the results stay reachable until run.sh fetches them")
        for url in (flags.get("--targets") or "").split(","):
            m = re.fullmatch(r"(https?)://([a-z0-9-]+):(\d+)", url)
            s = next((x for x in by_kind(docs, "Service") if m and x["metadata"]["name"] == m.group(2)), None)
            sel = (s or {}).get("spec", {}).get("selector") or {}
            check(m is not None and s is not None and bool(sel) and sel.items() <= ing_labels.items()
                  and any(p_["port"] == int(m.group(3)) for p_ in s["spec"]["ports"])
                  and (m.group(1) == "https") == bool(ing_env.get("CHRONIK_SSL_KEYSTORE_LOCATION")),
                  f"{w}: target {url} is the ingestors' Service, in the scheme they serve")
        for f in ("--ca-file", "--token-file"):
            if flags.get(f):
                check(any(flags[f].startswith(path + "/") for path in mounts), f"{w}: {f} {flags[f]} is in a mounted volume")
        acks = {"all": "all", "-1": "all"}.get(ing_env.get("CHRONIK_INGESTOR_ACKS", "1"), ing_env.get("CHRONIK_INGESTOR_ACKS", "1"))
        check(flags.get("--acks") in (None, acks), f"{w}: --acks tag {flags.get('--acks')} = the ingestors' acks {acks}")
        topo = flags.get("--topology")
        check(topo is None or (topo == "cluster") == (brokers > 1), f"{w}: --topology tag {topo} matches {brokers} broker(s)")
        if i == 0:
            describe = [f for k, v in flags.items() if k not in LOADGEN_RUN_ONLY for f in (k, v) if f is not None]
    # the plans: load/plans/ byte for byte
    plans_cm = next((cms[v["configMap"]["name"]] for path, v in mounts.items() if "configMap" in v
                     and v["configMap"]["name"] in cms and any(k.endswith(".json") for k in cms[v["configMap"]["name"]])), {})
    want = {f.name: f.read_text() for f in sorted((REPO / "load" / "plans").glob("*.json"))}
    check(bool(want), f"{overlay}: load/plans/ holds plans")
    for fname, text in want.items():
        check(plans_cm.get(fname) == text, f"{overlay}: plan {fname} is in the plans ConfigMap as in load/plans/")
    check(set(plans_cm) == set(want), f"{overlay}: no stale plan in the ConfigMap", str(sorted(set(plans_cm) ^ set(want))))
    # the overlay's overrides apply to its plan (chronik-loadgen describe, as `run` resolves it)
    if lg_bin is not None and describe is not None and env.get("PLAN", "") + ".json" in want:
        r = subprocess.run([str(lg_bin), "describe", str(REPO / "load" / "plans" / f"{env['PLAN']}.json"), *describe,
                            "--generators", n], capture_output=True, text=True, timeout=30)
        check(r.returncode == 0, f"{overlay}: `{LOADGEN} describe {env['PLAN']}.json {' '.join(describe)} --generators {n}` "
              "accepts the plan and its overrides", (r.stderr or r.stdout).strip()[:300])
    return env


def check_topology(overlay, docs):
    brokers, controllers = broker_and_controllers(docs)
    if not check(len(brokers) == 1 and len(controllers) <= 1
                 and len(by_kind(docs, "StatefulSet")) == len(brokers) + len(controllers),
                 f"{overlay}: one broker StatefulSet (and at most one of controllers)"):
        return
    s = brokers[0]
    env = env_of(s)
    replicas = s["spec"].get("replicas", 1)
    if controllers:
        c = controllers[0]
        cenv = env_of(c)
        voters = c["spec"].get("replicas", 1)
        check(env.get("CHRONIK_PROCESS_ROLES") == "broker" and cenv.get("CHRONIK_PROCESS_ROLES") == "controller",
              f"{overlay}: brokers are broker-only, controllers controller-only (process.roles)")
        check(all(e.get("CONTROLLER_STATEFULSET") == c["metadata"]["name"]
                  and e.get("CONTROLLER_SERVICE") == c["spec"]["serviceName"]
                  and e.get("CONTROLLER_REPLICAS") == str(voters) for e in (env, cenv)),
              f"{overlay}: brokers and controllers name the {voters} voters of StatefulSet {c['metadata']['name']} "
              "(CONTROLLER_STATEFULSET, CONTROLLER_SERVICE, CONTROLLER_REPLICAS = its replicas)")
        check(voters % 2 == 1, f"{overlay}: an odd number of controllers ({voters})")
    else:
        check(str(replicas) == env.get("BROKER_REPLICAS"), f"{overlay}: BROKER_REPLICAS = StatefulSet replicas ({replicas})")
    rf = int(env.get("CHRONIK_DEFAULT_REPLICATION_FACTOR", "1"))
    isr = int(env.get("CHRONIK_MIN_INSYNC_REPLICAS", "1"))
    check(1 <= isr <= rf <= replicas, f"{overlay}: min.insync {isr} <= RF {rf} <= brokers {replicas}")
    pdb = by_kind(docs, "PodDisruptionBudget")
    for kind, w in [("brokers", s)] + [("controllers", c) for c in controllers]:
        name = w["metadata"]["name"]
        labels = w["spec"]["template"]["metadata"]["labels"]
        terms = w["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        check(any(t["topologyKey"] == "kubernetes.io/hostname"
                  and all(labels.get(k) == v for k, v in t["labelSelector"]["matchLabels"].items()) for t in terms),
              f"{overlay}: {kind} require different nodes (anti-affinity on kubernetes.io/hostname)")
        headless = [v for v in by_kind(docs, "Service") if v["metadata"]["name"] == w["spec"]["serviceName"]]
        check(len(headless) == 1 and headless[0]["spec"].get("clusterIP") == "None"
              and headless[0]["spec"].get("publishNotReadyAddresses") is True
              and env_of(w).get("HEADLESS_SERVICE") == w["spec"]["serviceName"],
              f"{overlay}: governing Service {w['spec']['serviceName']} of {name} is headless, publishes not-ready "
              "peers, = HEADLESS_SERVICE")
        covering = [b for b in pdb if b["spec"]["selector"]["matchLabels"].items() <= labels.items()]
        check(len(covering) == 1 and covering[0]["spec"].get("maxUnavailable") == 1,
              f"{overlay}: one PodDisruptionBudget (maxUnavailable 1) covers the {kind}")


# PodSecurity "restricted" volume types (Kubernetes' Pod Security Standards)
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                      "projected", "secret"}


def restricted_violations(pod: dict, containers: list[dict]) -> list[str]:
    """Why a pod (its PodSecurityContext, volumes, host flags, and each
    container's securityContext) fails the "restricted" profile."""
    bad = []
    psc = pod.get("securityContext") or {}
    for flag in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(flag):
            bad.append(flag)
    for v in pod.get("volumes") or []:
        kinds = set(v) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            bad.append(f"volume {v.get('name')}: {sorted(kinds - RESTRICTED_VOLUMES)}")
    for c in containers:
        sc = c.get("securityContext") or {}
        name = c.get("name", "?")
        if sc.get("privileged"):
            bad.append(f"{name}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            bad.append(f"{name}: allowPrivilegeEscalation is not false")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            bad.append(f"{name}: capabilities do not drop ALL")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            bad.append(f"{name}: adds capabilities {caps.get('add')}")
        if not (sc.get("runAsNonRoot", psc.get("runAsNonRoot")) is True):
            bad.append(f"{name}: runAsNonRoot is not true")
        if sc.get("runAsUser", psc.get("runAsUser")) == 0:
            bad.append(f"{name}: runAsUser 0")
        seccomp = (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            bad.append(f"{name}: seccompProfile is {seccomp or 'unset'}")
    return bad


def check_security(overlay, docs):
    ns = by_kind(docs, "Namespace")
    labels = (ns[0]["metadata"].get("labels") or {}) if ns else {}
    check(labels.get("pod-security.kubernetes.io/enforce") == "restricted",
          f"{overlay}: the namespace enforces PodSecurity restricted")
    for wl, spec, _ in pod_templates(docs):
        bad = restricted_violations(spec, spec.get("containers", []) + spec.get("initContainers", []))
        check(not bad, f"{overlay}: {wl['kind']} {wl['metadata']['name']} satisfies PodSecurity restricted", "; ".join(bad))
    brokers, controllers = broker_and_controllers(docs)
    broker_labels = brokers[0]["spec"]["template"]["metadata"]["labels"]
    node_labels = [w["spec"]["template"]["metadata"]["labels"] for w in brokers + controllers]

    def policy_rules(labels: dict) -> list:
        policies = [n for n in by_kind(docs, "NetworkPolicy")
                    if (n["spec"]["podSelector"].get("matchLabels") or {}).items() <= labels.items()
                    and "Ingress" in n["spec"].get("policyTypes", [])]
        return [r for n in policies for r in n["spec"].get("ingress", [])]

    rules = policy_rules(broker_labels)
    check(bool(rules), f"{overlay}: a NetworkPolicy selects every broker pod")

    def sources(port: int, of: list = rules) -> list:
        return [r.get("from") for r in of if any(p.get("port") == port for p in r.get("ports", []))]

    def from_nodes(frm, allowed: list) -> bool:   # every peer named is a pod of one of `allowed`
        return bool(frm) and all(set(f) == {"podSelector"} and (f["podSelector"] or {}).get("matchLabels")
                                 and any(f["podSelector"]["matchLabels"].items() <= a.items() for a in allowed)
                                 for f in frm)

    def harness_only(frm) -> bool:
        def ok(f):
            sel = f.get("podSelector") or {}
            exprs = sel.get("matchExpressions") or []
            return set(f) == {"podSelector"} and (
                sel.get("matchLabels", {}).items() <= broker_labels.items() and sel.get("matchLabels")
                or any(e["key"] == "app.kubernetes.io/component" and e["operator"] == "In"
                       and set(e["values"]) <= {"ingestor", "consumer", "bench", "acls"} for e in exprs))
        return bool(frm) and all(ok(f) for f in frm)

    raft, kafka = sources(9093), sources(9092)
    check(bool(raft) and all(from_nodes(f, node_labels) for f in raft),
          f"{overlay}: raft (9093) admitted only from broker{' and controller' if controllers else ''} pods")
    for c in controllers:
        labels = c["spec"]["template"]["metadata"]["labels"]
        crules = policy_rules(labels)
        check(bool(crules) and all(from_nodes(f, node_labels) for f in sources(9093, crules)) and sources(9093, crules)
              and {p.get("port") for r in crules for p in r.get("ports", [])} == {9093, 9644},
              f"{overlay}: a NetworkPolicy admits raft (9093) to the controllers only from brokers and controllers, "
              "and 9644; nothing else")
    check(bool(kafka) and all(harness_only(f) for f in kafka),
          f"{overlay}: Kafka (9092) admitted only from brokers and the harness's pods")
    covered = {p.get("port") for r in rules for p in r.get("ports", [])}
    check(covered >= {9092, 9093, 9644}, f"{overlay}: the broker policy names every broker port (9092, 9093, 9644)")


def check_entrypoint(overlay, docs):
    brokers, controllers = broker_and_controllers(docs)
    cm = next(d for d in by_kind(docs, "ConfigMap") if d["metadata"]["name"].startswith("chronik-broker-entrypoint"))
    voters = ""
    if controllers:
        c = controllers[0]
        cname, cdns = c["metadata"]["name"], f"{c['spec']['serviceName']}.{c['metadata'].get('namespace', 'default')}.svc.cluster.local"
        voters = ",".join(f"{1001 + i}@{cname}-{i}.{cdns}" for i in range(c["spec"].get("replicas", 1)))
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "entrypoint.sh").write_text(cm["data"]["entrypoint.sh"])
        fake = Path(tmp) / "chronik-server"
        fake.write_text("#!/bin/sh\necho \"NODE=$CHRONIK_NODE_ID ADV=${CHRONIK_ADVERTISE:-}${CHRONIK_ADVERTISED_LISTENERS:-} "
                        "PEERS=${CHRONIK_PEERS:-} ARGS=$*\"\n")
        fake.chmod(0o755)
        for s in brokers + controllers:
            name = s["metadata"]["name"]
            env = {k: v for k, v in env_of(s).items() if v is not None}
            ns = s["metadata"].get("namespace", "default")
            replicas = s["spec"].get("replicas", 1)
            controller = env.get("CHRONIK_PROCESS_ROLES") == "controller"
            # a broker StatefulSet apart from its controllers grows: try two more pods than it has
            ordinals = range(replicas + (2 if controllers and not controller else 0))
            for ordinal in ordinals:
                run_env = {**env, "PATH": f"{tmp}:/usr/bin:/bin", "POD_NAME": f"{name}-{ordinal}", "POD_NAMESPACE": ns}
                out = subprocess.run(["sh", f"{tmp}/entrypoint.sh"], env=run_env, capture_output=True, text=True, timeout=10)
                dns = f"{s['spec']['serviceName']}.{ns}.svc.cluster.local"
                peers = voters or (",".join(f"{i + 1}@{name}-{i}.{dns}" for i in range(replicas)) if replicas > 1 else "")
                adv = "" if controller else f"{name}-{ordinal}.{dns}:9092"
                if env.get("CHRONIK_LISTENERS") and not controller:
                    adv = ",".join(f"{entry.split('://')[0]}://{adv.rsplit(':', 1)[0]}:{entry.rsplit(':', 1)[1]}"
                                   for entry in env["CHRONIK_LISTENERS"].split(","))
                node = ordinal + (1001 if controller else 1)
                want = f"NODE={node} ADV={adv} PEERS={peers} ARGS="
                check(out.returncode == 0 and out.stdout.strip() == want,
                      f"{overlay}: entrypoint in {name}-{ordinal} -> node {node}, "
                      f"{'no Kafka address' if controller else 'own DNS name'}, {peers.count('@')} voter(s)",
                      f"got {out.stdout.strip()!r} {out.stderr.strip()!r}, want {want!r}")


ZONE_FIELD = "metadata.labels['topology.kubernetes.io/zone']"
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def check_racks(overlay, docs):
    """Brokers take their node's zone as broker.rack (the label Kubernetes
    copies from the node onto the pod, read through the downward API) with the
    rack-aware replica selector; consumers send it as client.rack; the
    entrypoint drops an empty rack (a node without the label) and every rack
    setting on a controller-only pod."""
    brokers, controllers = broker_and_controllers(docs)

    def field_of(wl, name):
        for e in wl["spec"]["template"]["spec"]["containers"][0].get("env", []):
            if e["name"] == name:
                return ((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        return None

    for s in brokers:
        name = s["metadata"]["name"]
        check(field_of(s, "CHRONIK_BROKER_RACK") == ZONE_FIELD, f"{overlay}: {name}'s CHRONIK_BROKER_RACK is its zone label")
        check(env_of(s).get("CHRONIK_REPLICA_SELECTOR_CLASS") == RACK_AWARE_SELECTOR,
              f"{overlay}: {name} selects replicas by rack (KIP-392)")
    for d in by_kind(docs, "Deployment"):
        if d["spec"]["template"]["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "consumer":
            check(field_of(d, "CHRONIK_CONSUMER_CLIENT_RACK") == ZONE_FIELD,
                  f"{overlay}: {d['metadata']['name']}'s client.rack is its zone label")
    cm = next(d for d in by_kind(docs, "ConfigMap") if d["metadata"]["name"].startswith("chronik-broker-entrypoint"))
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "entrypoint.sh").write_text(cm["data"]["entrypoint.sh"])
        fake = Path(tmp) / "chronik-server"
        fake.write_text("#!/bin/sh\necho \"RACK=${CHRONIK_BROKER_RACK-unset} SELECTOR=${CHRONIK_REPLICA_SELECTOR_CLASS-unset}\"\n")
        fake.chmod(0o755)
        for s in brokers + controllers:
            name = s["metadata"]["name"]
            env = {k: v for k, v in env_of(s).items() if v is not None}
            controller = env.get("CHRONIK_PROCESS_ROLES") == "controller"
            for zone in ("", "zone-b"):
                run_env = {**env, "PATH": f"{tmp}:/usr/bin:/bin", "POD_NAME": f"{name}-0",
                           "POD_NAMESPACE": s["metadata"].get("namespace", "default"), "CHRONIK_BROKER_RACK": zone,
                           "CHRONIK_REPLICA_SELECTOR_CLASS": RACK_AWARE_SELECTOR}
                out = subprocess.run(["sh", f"{tmp}/entrypoint.sh"], env=run_env, capture_output=True, text=True, timeout=10)
                rack = "unset" if controller or not zone else zone
                want = f"RACK={rack} SELECTOR={'unset' if controller else RACK_AWARE_SELECTOR}"
                check(out.returncode == 0 and out.stdout.strip() == want,
                      f"{overlay}: entrypoint in {name}-0 with zone {zone!r} -> rack {rack}",
                      f"got {out.stdout.strip()!r} {out.stderr.strip()!r}, want {want!r}")


class LazyHelps(dict):
    """`BIN --help` of a binary the first time a manifest runs it."""

    def __init__(self, bin_dir: Path):
        super().__init__()
        self.bin_dir = bin_dir

    def __missing__(self, binary: str) -> Help:
        self[binary] = read_help(str(self.bin_dir / binary))
        return self[binary]


def write_env(docs, out: Path):
    """KEY=VALUE files of the literal env of each chronik container (for scrape.sh)."""
    out.mkdir(parents=True, exist_ok=True)
    for wl, spec, _ in pod_templates(docs):
        c = spec["containers"][0]
        lines = [f"{e['name']}={shlex.quote(e['value'])}" for e in c.get("env", []) if e.get("value") is not None]
        (out / f"{wl['metadata']['name']}.env").write_text("\n".join(lines) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin-dir", type=Path, default=REPO / "target" / "release")
    ap.add_argument("--loadgen-bin", type=Path, help=f"{LOADGEN} (its `run --help`); without it flag names "
                    "are not checked and the overrides not tried")
    ap.add_argument("--served", type=Path, help="JSON {binary: {path: status}} from scrape.sh")
    ap.add_argument("--env-out", type=Path, help="only write <workload>.env of the first manifest here")
    ap.add_argument("--only", choices=["names", "loadgen", "security"], help="run only these checks")
    ap.add_argument("--secrets", type=Path, help="lines `SECRET KEY...` secure-secrets.sh makes (tests/test.sh)")
    ap.add_argument("built", nargs="+", type=Path, help="<overlay>.yaml files (kustomize build output)")
    a = ap.parse_args()
    helps = LazyHelps(a.bin_dir)
    served = json.loads(a.served.read_text()) if a.served else None
    lg_help = read_loadgen_help(str(a.loadgen_bin)) if a.loadgen_bin else None
    known_secrets = None
    if a.secrets:
        known_secrets = {line.split()[0]: set(line.split()[1:]) for line in a.secrets.read_text().splitlines() if line.strip()}
    for path in a.built:
        overlay = path.stem
        docs = docs_of(path)
        if a.env_out:
            write_env(docs, a.env_out)
            return 0
        if a.only in (None, "names"):
            check_names(overlay, docs)
        if a.only in (None, "loadgen"):
            check_loadgen(overlay, docs, lg_help, a.loadgen_bin)
        if a.only in (None, "security"):
            check_security(overlay, docs)
        if a.only is not None:
            continue
        check_binaries(overlay, docs, helps, served)
        check_monitors(overlay, docs)
        check_topology(overlay, docs)
        check_entrypoint(overlay, docs)
        check_racks(overlay, docs)
        check_secrets(overlay, docs, known_secrets)
        check_tls(overlay, docs)
    passed, failed = counts()
    print(f"manifests: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
