#!/usr/bin/env bash
# Installs slipway for the setup action (its action.yml says what the inputs
# mean). Environment: SLIPWAY_VERSION, SLIPWAY_URL, SLIPWAY_SHA256,
# SLIPWAY_RELEASE_URL, SLIPWAY_KEY, and SLIPWAY_INSTALL_DIR (default
# $RUNNER_TEMP/slipway/bin). Writes path and
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

# fetch URL FILE: https or file, or plain http to this machine only (a
# release served locally, as the tests do).
fetch() {
	local proto='=https,file'
	[[ $1 =~ ^http://(127\.0\.0\.1|localhost)(:[0-9]+)?/ ]] && proto='=http'
	curl -fsSL --proto "$proto" --retry 3 -o "$2" "$1" || fail "download of $1 failed"
}

if [[ -n ${SLIPWAY_RELEASE_URL:-} ]]; then
	# A release's files: slipway-linux-<arch>, checksums.txt and
	# checksums.txt.sig (what slipway release writes). checksums.txt is
	# trusted only through key (its signature) or sha256 (the binary's,
	# given here): a checksums file fetched beside the binary proves nothing
	# on its own.
	[[ -z ${SLIPWAY_URL:-} ]] || fail "give url or release-url, not both"
	[[ -n $want || -n ${SLIPWAY_KEY:-} ]] ||
		fail "release-url needs key or sha256: a downloaded binary is never run unchecked"
	case $(uname -s)/$(uname -m) in
	Linux/x86_64) file=slipway-linux-amd64 ;;
	Linux/aarch64 | Linux/arm64) file=slipway-linux-arm64 ;;
	*) fail "no release binary for $(uname -s)/$(uname -m): releases are built for linux/amd64 and linux/arm64" ;;
	esac
	base=${SLIPWAY_RELEASE_URL%/}
	fetch "$base/checksums.txt" "$stage/checksums.txt"
	if [[ -n ${SLIPWAY_KEY:-} ]]; then
		fetch "$base/checksums.txt.sig" "$stage/checksums.txt.sig"
		printf '%s\n' "$SLIPWAY_KEY" >"$stage/key.pem"
		openssl pkey -pubin -in "$stage/key.pem" -noout 2>/dev/null ||
			fail "key is not a PEM public key"
		base64 -d "$stage/checksums.txt.sig" >"$stage/checksums.txt.sig.der" 2>/dev/null ||
			fail "$base/checksums.txt.sig is not base64"
		openssl dgst -sha256 -verify "$stage/key.pem" -signature "$stage/checksums.txt.sig.der" "$stage/checksums.txt" >/dev/null 2>&1 ||
			fail "signature mismatch: $base/checksums.txt.sig is not the key's signature over $base/checksums.txt"
	fi
	listed=$(awk -v f="$file" '$2 == f || $2 == "*" f { print $1 }' "$stage/checksums.txt")
	[[ $listed =~ ^[0-9a-f]{64}$ ]] || fail "$base/checksums.txt lists no single sha256 for $file"
	[[ -z $want || $want == "$listed" ]] ||
		fail "checksum mismatch for slipway $version: $base/checksums.txt lists sha256 $listed for $file, want $want"
	want=$listed
	fetch "$base/$file" "$stage/slipway"
elif [[ -n ${SLIPWAY_URL:-} ]]; then
	[[ -n $want ]] || fail "url needs sha256: a downloaded binary is never run unchecked"
	fetch "$SLIPWAY_URL" "$stage/slipway"
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
