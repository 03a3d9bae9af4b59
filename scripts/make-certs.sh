#!/usr/bin/env bash
# Makes the certificates the TLS tests use (openssl, EC P-256 keys, PEM):
#   ca.pem                  the test CA (the broker's trust store)
#   broker.keystore.pem     broker key + certificate (SAN 127.0.0.1-3, localhost; server and
#                           client auth: brokers present it to each other) + CA
#   broker2.keystore.pem    a second broker certificate (CN=broker-reloaded), for reload tests
#   client.pem/.key         a client certificate of the CA (CN=client,O=Chronik,C=US)
#   foreign-ca.pem          a CA the broker does not trust
#   foreign-client.pem/.key a client certificate of that foreign CA
#   expired-client.pem/.key a client certificate of the CA that expired in 2020
#   NAME.keystore.pem       for each --server NAME=SANS: key + certificate (CN=NAME, the
#                           subjectAltName SANS in openssl's syntax, e.g.
#                           'DNS:*.svc.example,DNS:broker,IP:10.0.0.1'; server and client
#                           auth) + CA, signed by the same CA (k8s-perf/secure-secrets.sh
#                           makes its pods' certificates this way)
# Usage: scripts/make-certs.sh OUTPUT_DIR [--server NAME=SANS]...
set -euo pipefail

usage() {
    echo "usage: $0 OUTPUT_DIR [--server NAME=SANS]..." >&2
    exit 2
}
[[ $# -ge 1 && $1 != -* ]] || usage
out=$1
shift
servers=()
while (($#)); do
    [[ $1 == --server && $# -ge 2 && $2 =~ ^[A-Za-z0-9][-A-Za-z0-9_.]*=[A-Z] ]] || usage
    servers+=("$2")
    shift 2
done
mkdir -p "$out"
cd "$out"

key() {
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null
}

ca() { # name subject
    key "$1.key"
    openssl req -x509 -new -key "$1.key" -sha256 -days 3650 -subj "$2" \
        -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" -out "$1.pem"
}

leaf() { # name subject ca extensions
    key "$1.key"
    openssl req -new -key "$1.key" -subj "$2" -out "$1.csr"
    printf '%s\n' "$4" >"$1.ext"
    openssl x509 -req -in "$1.csr" -CA "$3.pem" -CAkey "$3.key" -CAcreateserial \
        -sha256 -days 825 -extfile "$1.ext" -out "$1.pem" 2>/dev/null
    rm -f "$1.csr" "$1.ext"
}

server_ext="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=IP:127.0.0.1,IP:127.0.0.2,IP:127.0.0.3,DNS:localhost"
client_ext="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"

ca ca "/CN=Chronik Test CA"
ca foreign-ca "/CN=Foreign Test CA"
leaf broker "/CN=broker" ca "$server_ext"
leaf broker2 "/CN=broker-reloaded" ca "$server_ext"
leaf client "/C=US/O=Chronik/CN=client" ca "$client_ext"
leaf foreign-client "/CN=foreign-client" foreign-ca "$client_ext"

# A certificate valid only on 1 January 2020: `openssl ca` sets explicit dates.
key expired-client.key
openssl req -new -key expired-client.key -subj "/CN=expired-client" -out expired-client.csr
mkdir -p expired-db
: >expired-db/index.txt
echo 1000 >expired-db/serial
cat >expired-db/ca.cnf <<CNF
[ ca ]
default_ca = expired
[ expired ]
database = expired-db/index.txt
new_certs_dir = expired-db
serial = expired-db/serial
default_md = sha256
policy = any
x509_extensions = client
[ any ]
commonName = supplied
[ client ]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = clientAuth
CNF
openssl ca -batch -config expired-db/ca.cnf -cert ca.pem -keyfile ca.key \
    -in expired-client.csr -out expired-client.pem -notext \
    -startdate 20200101000000Z -enddate 20200102000000Z 2>/dev/null
rm -rf expired-db expired-client.csr

cat broker.key broker.pem ca.pem >broker.keystore.pem
cat broker2.key broker2.pem ca.pem >broker2.keystore.pem
for server in "${servers[@]}"; do
    name=${server%%=*}
    leaf "$name" "/CN=$name" ca "${server_ext%subjectAltName=*}subjectAltName=${server#*=}"
    cat "$name.key" "$name.pem" ca.pem >"$name.keystore.pem"
done
rm -f ./*.srl
echo "certificates written to $out"
