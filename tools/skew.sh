#!/usr/bin/env bash
# Version skew, one version in each direction (issue 36, item 4; seed 001:
# "old control plane with new runner, and the reverse"): make demo's
# one-host flow run twice with the planes from two builds of Slipway,
#   1. the previous version's runtime and runner under this tree's control
#      plane and CLI;
#   2. the previous version's control plane in front of this tree's runtime
#      and runner.
# Each run must end "demo: ok" (every job, rollout, checkpoint and answer of
# the demo, with its checks).
#
# The previous version is the commit in tools/previous-version (the last
# build that was released, or passed CI, before this one). It is built from
# a clone of this repository at that commit: its slipway and slipway-runner
# (make build) and its snapshot release for this platform (its runner), kept
# in $SLIPWAY_SKEW_CACHE (default ~/.cache/slipway/skew/COMMIT) and reused.
#
#   tools/skew.sh              # both directions (make skew)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
prev=$(grep -v '^#' tools/previous-version | head -1 | tr -d '[:space:]')
if ! git cat-file -e "$prev^{commit}" 2>/dev/null; then
  echo "skew: tools/previous-version names $prev, which this clone does not have (a shallow clone? fetch its history)" >&2
  exit 1
fi
cache=${SLIPWAY_SKEW_CACHE:-$HOME/.cache/slipway/skew}/$prev
arch=$(go env GOARCH)
if [ ! -x "$cache/bin/slipway" ] || [ ! -x "$cache/bin/slipway-runner" ] || [ ! -f "$cache/release/checksums.txt" ]; then
  echo "skew: building the previous version ($prev) into $cache"
  rm -rf "$cache"
  mkdir -p "$(dirname "$cache")"
  tmp=$(mktemp -d "$(dirname "$cache")/.build-XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  git clone -q --shared --no-checkout "$here" "$tmp/src"
  git -C "$tmp/src" checkout -q --detach "$prev"
  make -s -C "$tmp/src" build BIN="$tmp/out/bin"
  (cd "$tmp/src" && "$tmp/out/bin/slipway" release --snapshot --platform "linux/$arch" --out "$tmp/out/release" > /dev/null)
  mv "$tmp/out" "$cache"
fi
make -s build
old="$cache/bin/slipway"
echo "skew: this tree $("$here/bin/slipway" version)"
echo "skew: previous  $("$old" version)"

echo
echo "== skew 1/2: the previous runtime and runner, this control plane and CLI"
SLIPWAY_RUNTIME_BIN="$old" SLIPWAY_DEMO_RELEASE="$cache/release" go run ./examples/demo
echo
echo "== skew 2/2: the previous control plane, this runtime, runner and CLI"
SLIPWAY_CONTROL_BIN="$old" go run ./examples/demo
echo
echo "skew: ok (previous $prev with this tree, both directions)"
