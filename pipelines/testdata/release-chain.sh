#!/usr/bin/env bash
# release-chain.sh SLIPWAY REGISTRY WORK: what the CI systems' release steps
# run against in the end-to-end tests (pipelines/*_e2e_test.go and
# tekton/validate), made with the slipway CLI as an operator would, in WORK:
#
#   project/     a git repository: templates/ (minimal and agent-tools, their
#                base pinned by digest), policies/verification.yaml and
#                release.pub; the CI steps build agent-tools from it
#   keys/        release.key (cosign, password $COSIGN_PASSWORD) and .pub
#   config.git   the config repository: pool agents, generation g1 active
#                (the minimal template, a signed runner and control plane)
#   g1.yaml      g1's Generation document
#   runtime.*    `slipway runtime serve` on config.git, started in the
#                background with warm sandboxes; its pid in runtime.pid
#
# and WORK/chain.env, KEY=value lines naming all of it. REGISTRY is
# host:port of a running registry. The provenance builder the policy wants
# is https://slipway.dev/builders/ci.
#
# release-chain.sh --stop WORK stops that runtime (SIGINT, SIGKILL after 10s).
set -euo pipefail

# alive PID: the runtime is running (not gone, not a zombie nobody reaps).
alive() {
	local st
	st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	st=${st##*) }
	[[ ${st%% *} != Z ]] && grep -qa 'runtime' "/proc/$1/cmdline" 2>/dev/null
}
if [[ ${1:-} == --stop ]]; then
	pid=$(cat "${2:?usage: release-chain.sh --stop WORK}/runtime.pid" 2>/dev/null) || exit 0
	alive "$pid" || exit 0
	kill -INT "$pid"
	for _ in $(seq 100); do
		alive "$pid" || exit 0
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	exit 0
fi
slipway=${1:?usage: release-chain.sh SLIPWAY REGISTRY WORK}
reg=${2:?registry host:port}
work=${3:?work directory}
: "${COSIGN_PASSWORD:?COSIGN_PASSWORD is not set}"
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
builder=https://slipway.dev/builders/ci
project=$work/project
sw() { "$slipway" "$@"; }

# Templates run as uid 1000: the runtime's state must be reachable by it.
d=$work
while [[ $d != / && $d != "${TMPDIR:-/tmp}" ]]; do
	chmod 0711 "$d"
	d=$(dirname "$d")
done

bash "$root/fixtures/base/busybox-rootfs.sh" "$work/base-rootfs"
base=$(sw image from-dir "$work/base-rootfs" --push "$reg/slipway/base:busybox")
mkdir -p "$project/policies" "$work/keys"
cp -r "$root/templates" "$project/templates"
sed -i "s|^  base: .*|  base: $base|" "$project"/templates/*/template.yaml
sw keys generate --output-key-prefix "$work/keys/release" >/dev/null
cp "$work/keys/release.pub" "$project/policies/release.pub"
cat >"$project/policies/verification.yaml" <<EOF
apiVersion: slipway.dev/v1alpha1
kind: VerificationPolicy
metadata: {name: chain}
spec:
  transparencyLog: none
  keys: [{name: release, publicKeyFile: release.pub}]
  rules:
    - name: templates
      match: {kinds: [workspace-template]}
      signatures: {keys: [release]}
      attestations:
        - {type: slsaprovenance, builderID: "$builder", buildType: "https://slipway.dev/template-build/v1"}
        - {type: sbom}
    - name: platform
      match: {kinds: [control-plane, runner]}
      signatures: {keys: [release]}
EOF
policy=$project/policies/verification.yaml

# The pool's first generation, made and activated outside CI.
minimal=$(sw template build "$project/templates/minimal/template.yaml" --push "$reg/templates/minimal" \
	--sign-key "$work/keys/release.key" --offline-no-tlog --builder-id "$builder" | sed -n 's/^  "ref": "\(.*\)",$/\1/p')
[[ $minimal == "$reg/templates/minimal@sha256:"* ]] || {
	echo "release-chain.sh: template build printed '$minimal', not a reference by digest" >&2
	exit 1
}
sw image runner "$(dirname "$slipway")/slipway-runner" --push "$reg/platform/runner:v1" >/dev/null
mkdir -p "$work/control-plane"
echo "control plane v1" >"$work/control-plane/control-plane"
sw image from-dir "$work/control-plane" --push "$reg/platform/control-plane:v1" >/dev/null
runner=$(sw resolve "$reg/platform/runner:v1")
cp=$(sw resolve "$reg/platform/control-plane:v1")
sw sign "$runner" --key "$work/keys/release.key" --offline-no-tlog >/dev/null
sw sign "$cp" --key "$work/keys/release.key" --offline-no-tlog >/dev/null
sw config init "$work/config.git" --pool agents --policy "$policy" >/dev/null
g1=$(sw generation create --pool agents --policy "$policy" --out-file "$work/g1.yaml" \
	--pin "controlPlane=$cp" --pin "runner=$runner" --pin "workspaceTemplate=$minimal" \
	--pin "secretVersion=vault://kv/agents/api-token#1" --control-plane-protocol 1-2 --runner-protocol 1)
sw promote --repo "$work/config.git" --pool agents --generation "$work/g1.yaml" --activate >/dev/null

git -C "$project" init -q
git -C "$project" add -A
git -C "$project" -c user.name=t -c user.email=t@example.com commit -qm project

# The runtime, in the background (its output in runtime.log), until it
# serves and has warm sandboxes.
umask 077
echo chain-runtime-token-0123456789 >"$work/runtime.token"
umask 022
"$slipway" runtime serve --repo "$work/config.git" --state "$work/state" --listen 127.0.0.1:0 \
	--token-file "$work/runtime.token" --sync-interval 500ms </dev/null >"$work/runtime.log" 2>&1 &
pid=$!
echo "$pid" >"$work/runtime.pid"
for _ in $(seq 900); do
	if ! alive "$pid"; then
		echo "release-chain.sh: runtime serve exited:" >&2
		cat "$work/runtime.log" >&2
		exit 1
	fi
	if grep -q 'warm pools: ' "$work/runtime.log" && grep -q '^serving on ' "$work/runtime.log"; then
		break
	fi
	sleep 0.1
done
addr=$(sed -n 's/^serving on //p' "$work/runtime.log" | head -1)
grep -q 'warm pools: ' "$work/runtime.log" || {
	echo "release-chain.sh: no warm sandbox within 90s:" >&2
	cat "$work/runtime.log" >&2
	exit 1
}

cat >"$work/chain.env" <<EOF
PROJECT=$project
KEY=$work/keys/release.key
CONFIG_REPO=$work/config.git
G1_FILE=$work/g1.yaml
G1=$g1
RUNNER=$runner
SERVER=http://$addr
TOKEN_FILE=$work/runtime.token
RUNTIME_PID=$pid
EOF
