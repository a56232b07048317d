#!/bin/sh
# Puts the googleapis protos that rdq/v1/rdq.proto imports
# (google/api/annotations.proto and google/api/http.proto) into
# .googleapis/, a buf module of buf.yaml that is never committed. They come
# from the googleapis-common-protos wheel on PyPI, pinned by version and
# SHA-256 below, through pip. Nothing is fetched when they are there.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dest="$here/.googleapis"
version=1.76.0
sha256=59e13344a9f3651aa201a03e2bee815a3bf43a4baf1f9ff8a9b62a840ce25fac
stamp="$dest/.version"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$version $sha256" ]; then
	exit 0
fi
python=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'googleapis-common-protos==%s --hash=sha256:%s\n' "$version" "$sha256" >"$tmp/requirements.txt"
"$python" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
	--require-hashes -r "$tmp/requirements.txt" -d "$tmp"
"$python" - "$tmp"/googleapis_common_protos-"$version"-*.whl "$tmp/out" <<'PY'
import sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for name in ("google/api/annotations.proto", "google/api/http.proto"):
        z.extract(name, dest)
PY
echo "$version $sha256" >"$tmp/out/.version"
# Whole or not at all: a generator running beside this one never sees a
# half-written directory.
rm -rf "$dest"
[ -d "$dest" ] || mv "$tmp/out" "$dest"
[ "$(cat "$stamp")" = "$version $sha256" ]
