#!/usr/bin/env bash
# Installs slipway for the setup action (its action.yml says what the inputs
# mean). Environment: SLIPWAY_VERSION, SLIPWAY_URL, SLIPWAY_SHA256, and
# SLIPWAY_INSTALL_DIR (default $RUNNER_TEMP/slipway/bin). Writes path and
# sha256 to $GITHUB_OUTPUT and the directory to $GITHUB_PATH. Nothing is
# installed unless every check passes.
set -euo pipefail

fail() {
	echo "::error title=slipway setup::$*"
	exit 1
}

version=${SLIPWAY_VERSION:-}
[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] ||
	fail "version must be a release version such as v0.4.0, got '$version'"
want=${SLIPWAY_SHA256:-}
[[ -z $want || $want =~ ^[0-9a-f]{64}$ ]] || fail "sha256 must be 64 lower-case hex digits"
dir=${SLIPWAY_INSTALL_DIR:-${RUNNER_TEMP:?RUNNER_TEMP is not set}/slipway/bin}
mkdir -p "$dir"
stage=$(mktemp -d "$dir/.stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT

if [[ -n ${SLIPWAY_URL:-} ]]; then
	[[ -n $want ]] || fail "url needs sha256: a downloaded binary is never run unchecked"
	curl -fsSL --proto '=https,file' --retry 3 -o "$stage/slipway" "$SLIPWAY_URL" ||
		fail "download of $SLIPWAY_URL failed"
else
	command -v go >/dev/null || fail "no url given and no go on PATH to build slipway $version"
	GOBIN="$stage" GOFLAGS=-trimpath go install "github.com/slipway-dev/slipway/cmd/slipway@$version" ||
		fail "go install github.com/slipway-dev/slipway/cmd/slipway@$version failed"
fi
got=$(sha256sum "$stage/slipway" | cut -d' ' -f1)
[[ -z $want || $got == "$want" ]] || fail "checksum mismatch for slipway $version: got sha256 $got, want $want"
chmod 0755 "$stage/slipway"
reported=$("$stage/slipway" version | cut -d' ' -f1-2)
[[ $reported == "slipway $version" ]] || fail "the binary reports '$reported', not slipway $version"
mv "$stage/slipway" "$dir/slipway"

echo "$dir" >>"${GITHUB_PATH:?GITHUB_PATH is not set}"
{
	echo "path=$dir/slipway"
	echo "sha256=$got"
} >>"${GITHUB_OUTPUT:?GITHUB_OUTPUT is not set}"
echo "installed slipway $version (sha256 $got) in $dir"
