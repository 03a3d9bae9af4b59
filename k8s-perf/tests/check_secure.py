"""k8s-perf/tests/check_secure.py - the manifest checks of secrets and TLS
(called by check_manifests.py for every built overlay).

Owns:
  secrets   no Secret object and no literal password, token or key in any
            manifest: password-bearing properties are $(VAR) of an env var
            from a secretKeyRef; every $(VAR) names an env var defined before
            it; every Secret (and key) a pod names is one secure-secrets.sh
            makes; every file an env var (or an envFrom ConfigMap's key)
            points to lies in a mounted volume
  tls       with components/secure: the brokers listen only on SASL_SSL/SSL,
            the inter-broker listener is one of them, the StandardAuthorizer is
            on with the brokers a super user and no allow-everyone; every Kafka
            client uses the brokers' protocol and an enabled mechanism and
            trusts a CA; the ingestors' HTTPS port wants a token, Prometheus
            scrapes the plain port, the load generators post to https://
            trusting the CA and send the token from a file
Must not: build overlays or start anything.
"""

from __future__ import annotations

import re

from checklib import broker_and_controllers, by_kind, check, env_of

# words that make a property, env var or file content secret
SECRET_WORD = re.compile(r"password|passwd|secret|token|jaas|private", re.I)
VAR_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def containers_of(docs):
    """(where, container, pod spec) of every workload's containers."""
    for d in docs:
        if d["kind"] in ("Deployment", "StatefulSet", "Job"):
            spec = d["spec"]["template"]["spec"]
            for c in spec.get("containers", []) + spec.get("initContainers", []):
                yield f"{d['kind']}/{d['metadata']['name']} container {c['name']}", c, spec


def property_secrets(text: str):
    """(key, value) pairs of a key=value list (comma- or line-separated) whose key is secret."""
    for kv in re.split(r"[,\n]", text):
        k, sep, v = kv.partition("=")
        if sep and SECRET_WORD.search(k.strip()):
            yield k.strip(), v.strip()


def check_secrets(overlay, docs, known_secrets):
    check(not by_kind(docs, "Secret"), f"{overlay}: no Secret object in the manifests (secure-secrets.sh makes them)")
    for cm in by_kind(docs, "ConfigMap"):
        bad = [k for key, text in (cm.get("data") or {}).items()
               if not key.endswith((".json", ".sh"))   # plans and scripts: read secrets from env/files, hold none
               and not key.endswith(("_FILE", "_LOCATION"))   # a path (where the secret is), as for env vars
               for k, v in property_secrets(f"{key}={text}") if v and not VAR_REF.fullmatch(v)]
        check(not bad, f"{overlay}: ConfigMap {cm['metadata']['name']} holds no literal secret", str(bad))
    for where, c, spec in containers_of(docs):
        env = c.get("env") or []
        from_secret = {e["name"] for e in env if "secretKeyRef" in (e.get("valueFrom") or {})}
        defined: set[str] = set()
        literal = []
        for e in env:
            value = e.get("value")
            if value is not None:
                for ref in VAR_REF.findall(value):
                    check(ref in defined, f"{overlay}: {where}: env {e['name']} expands $({ref}), defined before it",
                          "Kubernetes leaves $(VAR) of a later or missing variable as it is")
                if SECRET_WORD.search(e["name"]) and not e["name"].endswith(("_FILE", "_LOCATION")) and value:
                    literal.append(e["name"])
                literal += [f"{e['name']}: {k}" for k, v in property_secrets(value)
                            if not (VAR_REF.fullmatch(v) and VAR_REF.fullmatch(v).group(1) in from_secret)]
            defined.add(e["name"])
        args = " ".join(c.get("command", []) + c.get("args", []))
        literal += [f"command: {k}" for k, v in property_secrets(args.replace(" ", ","))
                    if v and not VAR_REF.fullmatch(v) and not v.startswith("$")]
        check(not literal, f"{overlay}: {where}: no literal password or token (only $(VAR) of a secretKeyRef)",
              "; ".join(literal))
        # every Secret (and key) named is one secure-secrets.sh makes; optional ones may be absent
        named = [(e["valueFrom"]["secretKeyRef"]["name"], e["valueFrom"]["secretKeyRef"]["key"])
                 for e in env if "secretKeyRef" in (e.get("valueFrom") or {})]
        mounts = {m["name"]: m["mountPath"] for m in c.get("volumeMounts", [])}
        vols = {v["name"]: v for v in spec.get("volumes") or []}
        for vname in mounts:
            sec = (vols.get(vname) or {}).get("secret")
            if sec and not sec.get("optional"):
                named.append((sec["secretName"], None))
        if known_secrets is not None:
            for name, key in named:
                keys = known_secrets.get(name)
                check(keys is not None and (key is None or key in keys),
                      f"{overlay}: {where}: Secret {name}{'/' + key if key else ''} is made by secure-secrets.sh",
                      f"it makes {sorted(known_secrets)}")
        # a file an env var names lies in a volume the container mounts (with its key, for a Secret)
        cm_data = {cm["metadata"]["name"]: cm.get("data") or {} for cm in by_kind(docs, "ConfigMap")}
        from_cms = [{"name": k, "value": v} for ef in c.get("envFrom") or []
                    for k, v in cm_data.get((ef.get("configMapRef") or {}).get("name"), {}).items()]
        for e in env + from_cms:
            value = e.get("value") or ""
            if re.search(r"_(FILE|LOCATION)$", e["name"]) and value.startswith("/"):
                mount = next((n for n, p in mounts.items() if value.startswith(p.rstrip("/") + "/")), None)
                ok = mount is not None
                sec = (vols.get(mount) or {}).get("secret") if mount else None
                if ok and sec and known_secrets is not None and sec["secretName"] in known_secrets:
                    ok = value[len(mounts[mount].rstrip("/")) + 1:] in known_secrets[sec["secretName"]]
                check(ok, f"{overlay}: {where}: {e['name']}={value} is in a mounted volume")
            for m in re.finditer(r"(?:ssl\.ca\.location|ssl\.certificate\.location|ssl\.key\.location)=([^,]+)", value):
                check(any(m.group(1).startswith(p.rstrip("/") + "/") for p in mounts.values()),
                      f"{overlay}: {where}: {m.group(0)} is in a mounted volume")


def client_properties(env: dict) -> dict:
    text = env.get("CHRONIK_INGESTOR_PRODUCER_CONFIG") or env.get("CHRONIK_CONSUMER_PROPERTIES") or ""
    return dict(kv.split("=", 1) for kv in text.split(",") if "=" in kv)


def check_tls(overlay, docs):
    """components/secure: what the brokers require, every client gives."""
    s = broker_and_controllers(docs)[0][0]
    benv = env_of(s)
    listeners = benv.get("CHRONIK_LISTENERS")
    if not listeners:
        return
    protocols = {entry.split("://")[0] for entry in listeners.split(",")}
    check(protocols <= {"SASL_SSL", "SSL"}, f"{overlay}: brokers listen only on SASL_SSL/SSL ({listeners})")
    check(benv.get("CHRONIK_INTER_BROKER_LISTENER_NAME") in protocols,
          f"{overlay}: the inter-broker listener is one of them ({benv.get('CHRONIK_INTER_BROKER_LISTENER_NAME')})")
    mechanisms = set((benv.get("CHRONIK_SASL_ENABLED_MECHANISMS") or "").split(","))
    check(benv.get("CHRONIK_SASL_MECHANISM_INTER_BROKER_PROTOCOL") in mechanisms,
          f"{overlay}: brokers log in to each other with an enabled mechanism")
    check(benv.get("CHRONIK_AUTHORIZER_CLASS_NAME") == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
          and benv.get("CHRONIK_ALLOW_EVERYONE_IF_NO_ACL_FOUND", "false") == "false"
          and "User:broker" in (benv.get("CHRONIK_SUPER_USERS") or "").split(";"),
          f"{overlay}: StandardAuthorizer on, the brokers' user a super user, no allow-everyone")
    for d in by_kind(docs, "Deployment"):
        env = env_of(d)
        if "KAFKA_BOOTSTRAP_SERVERS" not in env:
            continue
        props = client_properties(env)
        check(props.get("security.protocol") in protocols and props.get("sasl.mechanism") in mechanisms
              and props.get("ssl.ca.location", "").startswith("/")
              and props.get("ssl.endpoint.identification.algorithm", "https") == "https",
              f"{overlay}: {d['metadata']['name']} speaks {props.get('security.protocol')} "
              f"{props.get('sasl.mechanism')} to the brokers and verifies them", str(props))
    ing = next(d for d in by_kind(docs, "Deployment") if d["metadata"]["name"] == "chronik-ingestor")
    ienv = env_of(ing)
    if ienv.get("CHRONIK_SSL_KEYSTORE_LOCATION"):
        check(bool(ienv.get("CHRONIK_INGESTOR_AUTH_TOKEN_FILE")) and bool(ienv.get("CHRONIK_INGESTOR_METRICS_LISTEN")),
              f"{overlay}: the HTTPS ingestors want a bearer token and serve /metrics on a plain port")
        for sm in by_kind(docs, "ServiceMonitor"):
            if sm["spec"]["selector"]["matchLabels"].get("app.kubernetes.io/name") == "chronik-ingestor":
                check(all(ep["port"] == "metrics" for ep in sm["spec"]["endpoints"]),
                      f"{overlay}: Prometheus scrapes the ingestors on the plain metrics port")
        load_env = next((cm["data"] for cm in by_kind(docs, "ConfigMap")
                         if cm["metadata"]["name"].startswith("chronik-load-env")), {})
        check(all(u.startswith("https://") for u in load_env.get("TARGETS", "").split(","))
              and bool(load_env.get("CA_FILE")) and bool(load_env.get("TOKEN_FILE")),
              f"{overlay}: the load generators post to https://, trust the CA (--ca-file) and send the token "
              "(--token-file)", str({k: load_env.get(k) for k in ("TARGETS", "CA_FILE", "TOKEN_FILE")}))
