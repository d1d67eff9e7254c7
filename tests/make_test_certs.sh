#!/usr/bin/env bash
# Writes a throwaway TLS set-up for tests into DIR with the openssl CLI:
#   ca.pem              a self-signed certificate authority
#   server.pem/.key     a server certificate it signed, for 127.0.0.1 and
#                       localhost (subjectAltName), and its key
#   other_ca.pem        an authority that signed nothing here
# EC P-256 keys, valid for two days. Usage: make_test_certs.sh DIR
set -euo pipefail
dir=${1:?usage: make_test_certs.sh DIR}
mkdir -p "$dir"
cd "$dir"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
key ca.key
openssl req -x509 -new -key ca.key -out ca.pem -days 2 -subj "/CN=psgd test CA" 2>/dev/null
key other_ca.key
openssl req -x509 -new -key other_ca.key -out other_ca.pem -days 2 -subj "/CN=psgd other CA" 2>/dev/null
key server.key
openssl req -new -key server.key -out server.csr -subj "/CN=psgd test server" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > server.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
  -out server.pem -days 2 -extfile server.ext 2>/dev/null
rm -f server.csr server.ext ca.srl
