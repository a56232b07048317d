#!/usr/bin/env bash
# Makes the code generator of proto/rdq/v1/rdq.proto available on this machine,
# at the versions the committed files in proto/rdqv1 were generated with:
#   - protoc from Debian's packages (protobuf-compiler) when it is absent,
#   - protoc-gen-go and protoc-gen-go-grpc, built by go install at their pinned
#     versions into $(go env GOPATH)/bin when absent or of another version.
# Safe to run any number of times. Needs root (or sudo) to install protoc.
# Then: PATH="$(go env GOPATH)/bin:$PATH" go generate ./proto/rdqv1
set -euo pipefail

protoc_gen_go=v1.36.11
protoc_gen_go_grpc=v1.6.1

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
log() { printf 'protoc.sh: %s\n' "$*" >&2; }

if ! command -v protoc >/dev/null 2>&1; then
	log "installing protoc from Debian's packages"
	as_root apt-get update -qq
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq protobuf-compiler >/dev/null
fi

bin=$(go env GOPATH)/bin
if [ "$("$bin/protoc-gen-go" --version 2>/dev/null)" != "protoc-gen-go $protoc_gen_go" ]; then
	log "installing protoc-gen-go $protoc_gen_go"
	go install "google.golang.org/protobuf/cmd/protoc-gen-go@$protoc_gen_go"
fi
if [ "$("$bin/protoc-gen-go-grpc" --version 2>/dev/null)" != "protoc-gen-go-grpc ${protoc_gen_go_grpc#v}" ]; then
	log "installing protoc-gen-go-grpc $protoc_gen_go_grpc"
	go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$protoc_gen_go_grpc"
fi
log "ready: $(protoc --version), $("$bin/protoc-gen-go" --version), $("$bin/protoc-gen-go-grpc" --version)"
