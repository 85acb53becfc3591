#!/usr/bin/env bash
# Installs schemathesis (PyPI, pinned in bench/fuzz/SCHEMATHESIS_VERSION) into a venv under .tools/,
# as temporal-config/install-cli.sh does for the Temporal binaries. A venv cannot be moved, so it is
# built in place and marked complete last; a half-built one is rebuilt.
set -euo pipefail
cd "$(dirname "$0")/../.."
version="$(cat bench/fuzz/SCHEMATHESIS_VERSION)"
target=".tools/schemathesis-$version"
if [ -f "$target/.complete" ]; then
  echo "schemathesis $version already in $target"
  exit 0
fi
rm -rf "$target"
python3 -m venv "$target"
PIP_ROOT_USER_ACTION=ignore "$target/bin/python" -m pip install --quiet --disable-pip-version-check "schemathesis==$version"
touch "$target/.complete"
echo "schemathesis $version installed in $target"
