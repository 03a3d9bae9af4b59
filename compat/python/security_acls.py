"""Set up the `security` check's ACLs (compat/run.sh runs this before the drivers).

Owns: what the secured broker grants. Connects over SASL_SSL as a super user
(SCRAM-SHA-512, with the client certificate: ssl.client.auth=required applies
to every TLS listener) through confluent-kafka's AdminClient, creates the
ungranted topic, and grants every --principal (and the RFC 2253 subject DN of
every --cert-principal, as Kafka's ssl.principal.mapping.rules=DEFAULT names
it) ALL on the PREFIXED topic and group patterns, nothing else. Then reads the
ACLs back and fails unless exactly these are there. Checks nothing a driver
checks; its log goes to stderr, nothing to stdout. Exit status 0 when set up.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)

import compat_common as cc


def subject_principal(cert: str) -> str:
    """`User:<subject DN>` of a certificate, RFC 2253 (most specific first), as Kafka prints it."""
    out = subprocess.run(["openssl", "x509", "-in", cert, "-noout", "-subject", "-nameopt", "RFC2253"],
                         check=True, capture_output=True, text=True, timeout=30).stdout
    return "User:" + out.strip().removeprefix("subject=")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", required=True, help="host:port of the SASL_SSL listener")
    p.add_argument("--ssl-ca", required=True)
    p.add_argument("--ssl-cert", required=True)
    p.add_argument("--ssl-key", required=True)
    p.add_argument("--admin-username", required=True, help="a super user (--super-users)")
    p.add_argument("--admin-password", required=True)
    p.add_argument("--principal", action="append", default=[], help="e.g. User:alice (repeatable)")
    p.add_argument("--cert-principal", action="append", default=[],
                   help="a PEM certificate whose subject DN is granted (repeatable)")
    p.add_argument("--topic-prefix", required=True)
    p.add_argument("--group-prefix", required=True)
    p.add_argument("--denied-topic", required=True)
    p.add_argument("--timeout", type=float, default=60.0)
    args = p.parse_args()

    conf = cc.librdkafka_security(args.ssl_ca, args.ssl_cert, args.ssl_key,
                                  (args.admin_username, args.admin_password))
    admin = AdminClient({"bootstrap.servers": args.bootstrap, **conf})
    t = args.timeout
    admin.create_topics([NewTopic(args.denied_topic, 1, 1)],
                        operation_timeout=t)[args.denied_topic].result(t)
    principals = args.principal + [subject_principal(c) for c in args.cert_principal]
    want = [AclBinding(rtype, prefix, ResourcePatternType.PREFIXED, who, "*", AclOperation.ALL,
                       AclPermissionType.ALLOW)
            for who in principals
            for rtype, prefix in ((ResourceType.TOPIC, args.topic_prefix),
                                  (ResourceType.GROUP, args.group_prefix))]
    for f in admin.create_acls(want).values():
        f.result(t)
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    listed = admin.describe_acls(everything).result(t)
    if sorted(map(str, listed)) != sorted(map(str, want)):
        cc.log(f"ACLs read back differ: want {sorted(map(str, want))}, have {sorted(map(str, listed))}")
        return 1
    cc.log(f"created topic {args.denied_topic} (no ACL); ALL on topics {args.topic_prefix}* and groups "
           f"{args.group_prefix}* for {', '.join(principals)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
