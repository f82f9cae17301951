#!/usr/bin/env bash
# scripts/make-certs.sh -- a test certificate authority and the certificates
# ordod's TLS is tried with, made with the openssl tool.
#
# Usage: scripts/make-certs.sh DIR [MEMBER...]
#
# Writes into DIR (created if missing), each as NAME.crt and NAME.key (PEM,
# EC P-256 keys, unencrypted):
#
#   ca          the test CA (self-signed, 10 years)
#   server      signed by ca; CN=localhost, SAN DNS:localhost, IP:127.0.0.1
#   client      signed by ca; CN=client (a client certificate)
#   expired     signed by ca; like server, but its validity ended yesterday
#   wronghost   signed by ca; CN and SAN DNS:wrong.example only
#   other-ca    a second, unrelated CA
#   other       signed by other-ca; like server (a certificate from the wrong CA)
#   MEMBER      one per argument, signed by ca; CN=MEMBER, SAN DNS:localhost,
#               IP:127.0.0.1 (the certificates cluster members present)
#
# For a real deployment make the CA once, keep ca.key off the servers, and
# give each member its own certificate whose SAN names the host clients
# reach it by. Existing files in DIR are overwritten.
set -euo pipefail

if [ $# -lt 1 ]; then
    echo "usage: $0 DIR [MEMBER...]" >&2
    exit 2
fi
dir=$1; shift
mkdir -p "$dir"
cd "$dir"

# Days a test certificate is valid; -1 makes the expired one.
days=3650

newkey() {  # newkey NAME: an EC P-256 private key in NAME.key
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null
}

ca() {  # ca NAME CN: a self-signed CA certificate
    newkey "$1"
    openssl req -x509 -new -key "$1.key" -subj "/CN=$2" -days "$days" -out "$1.crt" \
        -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
}

leaf() {  # leaf NAME CA CN SAN DAYS: a certificate for NAME signed by CA
    local name=$1 issuer=$2 cn=$3 san=$4 d=$5
    newkey "$name"
    openssl req -new -key "$name.key" -subj "/CN=$cn" -out "$name.csr" 2>/dev/null
    printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=%s\n' \
        "$san" >"$name.ext"
    openssl x509 -req -in "$name.csr" -CA "$issuer.crt" -CAkey "$issuer.key" -CAcreateserial \
        -days "$d" -extfile "$name.ext" -out "$name.crt" 2>/dev/null
    rm -f "$name.csr" "$name.ext"
}

local_san="DNS:localhost,IP:127.0.0.1"
ca ca "ordo test CA"
leaf server ca localhost "$local_san" "$days"
leaf client ca client "DNS:client" "$days"
leaf expired ca localhost "$local_san" -1
leaf wronghost ca wrong.example "DNS:wrong.example" "$days"
ca other-ca "another CA"
leaf other other-ca localhost "$local_san" "$days"
for m in "$@"; do
    leaf "$m" ca "$m" "$local_san" "$days"
done
rm -f ./*.srl
chmod 600 ./*.key
