#!/usr/bin/env bash
# Tags every published module of rdq with one version, as the modules are
# developed together: the core as vX.Y.Z, each nested module as <dir>/vX.Y.Z.
#
#   scripts/release.sh v0.4.0
#
# It first sets every requirement of one rdq module on another to that
# version (the replace directives that point at sibling directories stay:
# they serve development and are ignored by the go command in a user's
# build), commits, and tags the commit. Push with: git push origin main --tags
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:?usage: scripts/release.sh vX.Y.Z}
[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "release.sh: $version is not a version like v0.4.0" >&2; exit 2; }
[ -z "$(git status --porcelain)" ] || { echo "release.sh: the working tree has changes; commit or stash them first" >&2; exit 1; }

# The published modules: everything a user may require.
published=(sqlitestore storetest rdqtest storeurl proto callback console server cmd/rdq)

for mod in $(git ls-files '*go.mod'); do
	# Every requirement on github.com/srjn45/rdq or one of its modules.
	sed -E -i "s#^(\t|require )(github\.com/srjn45/rdq(/[a-z/]+)?) v[^ ]+( // indirect)?\$#\1\2 ${version}\4#" "$mod"
done
git commit -q -am "Release ${version}"
git tag "$version"
for dir in "${published[@]}"; do
	git tag "${dir}/${version}"
done
echo "tagged ${version} and ${published[*]/%//${version}}; push with: git push origin main --tags"
