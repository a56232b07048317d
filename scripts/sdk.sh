#!/usr/bin/env bash
# Installs what the TypeScript and Python SDKs' tests need when it is absent,
# from Debian's packages (as root): Node.js 20+ with npm, and Python 3.11+
# with venv. The SDKs' own dependencies come from the npm registry and PyPI
# (make sdk-test installs them from the lock files).
set -euo pipefail

apt_install() {
	echo "installing $* from Debian's packages" >&2
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	apt_install nodejs npm
fi
node -e 'const [major] = process.versions.node.split(".").map(Number); if (major < 20) { console.error(`Node.js ${process.versions.node} is too old: the TypeScript SDK needs 20 or newer`); process.exit(1); }'

if ! command -v python3 >/dev/null 2>&1; then
	apt_install python3 python3-venv
fi
python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python %d.%d is too old: the Python SDK needs 3.11 or newer" % sys.version_info[:2])'
if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
	apt_install python3-venv
fi
