#!/usr/bin/env bash
# Writes the test-only certificates the SDKs' TLS tests use: a CA, a server
# certificate for 127.0.0.1 and a client certificate, valid for 100 years.
# Not secret: they protect nothing but the tests.
set -euo pipefail
cd "$(dirname "$0")"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 36500 -subj "/CN=rdq test CA" -keyout ca.key -out ca.pem 2>/dev/null
for who in server client; do
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=rdq test $who" -keyout "$who.key" -out "$who.csr" 2>/dev/null
	if [ "$who" = server ]; then ext="subjectAltName=IP:127.0.0.1,DNS:localhost"; else ext="extendedKeyUsage=clientAuth"; fi
	openssl x509 -req -in "$who.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 36500 -extfile <(echo "$ext") -out "$who.pem" 2>/dev/null
	rm "$who.csr"
done
rm -f ca.key ca.srl
