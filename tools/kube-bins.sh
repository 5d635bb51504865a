#!/usr/bin/env bash
# Builds the real Kubernetes parts the tests run (testharness/kubetest) once into a
# cache outside the clone, from the Go module proxy:
#
#   $SLIPWAY_KUBE_CACHE/v1.37.2/bin/kube-apiserver, kubelet, kube-scheduler,
#     kube-proxy, kube-controller-manager
#     from a scratch module requiring k8s.io/kubernetes v1.37.2, its staging
#     modules replaced to v0.37.2 (the list is generated from the replace block
#     of k8s.io/kubernetes's own go.mod, never typed by hand); a scratch module
#     made before a command joined the list is completed (tools.go rewritten,
#     go mod tidy) rather than made again;
#   $SLIPWAY_KUBE_CACHE/agent-sandbox-v0.5.6/bin/agent-sandbox-controller
#     from a scratch module requiring sigs.k8s.io/agent-sandbox v0.5.6;
#   $SLIPWAY_KUBE_CACHE/v1.37.2/bin/pause
#     the pod sandbox's process, from build/pause/linux/pause.c in the
#     k8s.io/kubernetes module, with gcc -static (testharness/kubetest makes it an
#     image in the tests' registry).
#
# A binary already present is not built again. Usage: kube-bins.sh [NAME...]
# with NAME among kube-apiserver, agent-sandbox-controller, kubelet,
# kube-scheduler, pause, kube-proxy, kube-controller-manager (default: all
# seven, in that order).
set -euo pipefail

KUBE_VERSION=v1.37.2
STAGING_VERSION=v0.37.2
SANDBOX_VERSION=v0.5.6
GO=${GO:-go}
CACHE=${SLIPWAY_KUBE_CACHE:-$HOME/.cache/slipway-kube}
KUBE_DIR=$CACHE/$KUBE_VERSION
SANDBOX_DIR=$CACHE/agent-sandbox-$SANDBOX_VERSION
export GOFLAGS=-buildvcs=false CGO_ENABLED=0

names=("$@")
[ ${#names[@]} -gt 0 ] || names=(kube-apiserver agent-sandbox-controller kubelet kube-scheduler pause kube-proxy kube-controller-manager)

# KUBE_COMMANDS are the commands of k8s.io/kubernetes the scratch module pins.
KUBE_COMMANDS=(kube-apiserver kube-controller-manager kube-proxy kube-scheduler kubelet)

log() { printf 'kube-bins: %s\n' "$*" >&2; }

# tools_go prints the scratch module's tools.go, naming every KUBE_COMMANDS.
tools_go() {
	printf '%s\n' '//go:build tools' '' '// Package kubebins only pins the commands kube-bins.sh builds.' 'package kubebins' '' 'import ('
	local c
	for c in "${KUBE_COMMANDS[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
	printf ')\n'
}

# scratch writes the scratch module that builds k8s.io/kubernetes commands;
# one made before a command joined KUBE_COMMANDS gets the new tools.go and
# go mod tidy (which adds what the new commands import).
scratch() {
	local src=$KUBE_DIR/src
	if [ -f "$src/go.sum" ]; then
		tools_go | cmp -s - "$src/tools.go" && return 0
		log "completing the scratch module $src with ${KUBE_COMMANDS[*]}"
		tools_go >"$src/tools.go.tmp" && mv "$src/tools.go.tmp" "$src/tools.go"
		(cd "$src" && $GO mod tidy)
		return 0
	fi
	local kdir
	kdir=$($GO mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	[ -n "$kdir" ] && [ -f "$kdir/go.mod" ] || { log "no go.mod for k8s.io/kubernetes@$KUBE_VERSION"; return 1; }
	mkdir -p "$src"
	local replaces
	# "k8s.io/api => ./staging/src/k8s.io/api" becomes "k8s.io/api => k8s.io/api v0.37.2".
	replaces=$(sed -n '/^replace (/,/^)/p' "$kdir/go.mod" |
		awk -v v="$STAGING_VERSION" '$2 == "=>" && $3 ~ /^\.\/staging\// { printf "\t%s => %s %s\n", $1, $1, v }')
	[ -n "$replaces" ] || { log "no staging replaces in $kdir/go.mod"; return 1; }
	log "$(printf '%s\n' "$replaces" | wc -l) staging modules replaced to $STAGING_VERSION"
	cat >"$src/go.mod" <<EOF2
module slipway.local/kubebins

go 1.26.0

godebug default=go1.26

require k8s.io/kubernetes $KUBE_VERSION

replace (
$replaces
)
EOF2
	tools_go >"$src/tools.go"
	(cd "$src" && $GO mod tidy)
}

build_kube() {
	local name=$1 out=$KUBE_DIR/bin/$1
	[ -x "$out" ] && { log "$out present"; return 0; }
	scratch
	mkdir -p "$KUBE_DIR/bin"
	local pkgv=k8s.io/component-base/version
	local ldflags="-s -w -X $pkgv.gitVersion=$KUBE_VERSION -X $pkgv.gitMajor=1 -X $pkgv.gitMinor=37 -X $pkgv.gitTreeState=clean"
	log "building $name $KUBE_VERSION"
	local start=$SECONDS
	(cd "$KUBE_DIR/src" && $GO build -trimpath -ldflags "$ldflags" -o "$out.tmp" "k8s.io/kubernetes/cmd/$name")
	mv "$out.tmp" "$out"
	log "built $out in $((SECONDS - start))s"
}

# build_sandbox builds agent-sandbox's controller in a scratch module of its
# own: `go install pkg@version` asks the proxy for the module's version list
# (for deprecations), which the proxy here refuses.
build_sandbox() {
	local out=$SANDBOX_DIR/bin/agent-sandbox-controller src=$SANDBOX_DIR/src
	[ -x "$out" ] && { log "$out present"; return 0; }
	mkdir -p "$SANDBOX_DIR/bin" "$src"
	if [ ! -f "$src/go.sum" ]; then
		cat >"$src/go.mod" <<EOF2
module slipway.local/sandboxbins

go 1.26.0

require sigs.k8s.io/agent-sandbox $SANDBOX_VERSION
EOF2
		cat >"$src/tools.go" <<'EOF2'
//go:build tools

// Package sandboxbins only pins the command kube-bins.sh builds.
package sandboxbins

import _ "sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller"
EOF2
		(cd "$src" && $GO mod tidy)
	fi
	log "building agent-sandbox-controller $SANDBOX_VERSION"
	local start=$SECONDS
	(cd "$src" && $GO build -trimpath -ldflags '-s -w' -o "$out.tmp" sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller)
	mv "$out.tmp" "$out"
	log "built $out in $((SECONDS - start))s"
}

# build_pause compiles Kubernetes's pause.c as a static binary.
build_pause() {
	local out=$KUBE_DIR/bin/pause
	[ -x "$out" ] && { log "$out present"; return 0; }
	local kdir
	kdir=$($GO mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
	[ -f "$kdir/build/pause/linux/pause.c" ] || { log "no build/pause/linux/pause.c in k8s.io/kubernetes@$KUBE_VERSION"; return 1; }
	command -v gcc >/dev/null || { log "gcc missing: apt-get install gcc libc6-dev (make deps)"; return 1; }
	mkdir -p "$KUBE_DIR/bin"
	gcc -Os -Wall -Werror -static -DVERSION="$KUBE_VERSION" -o "$out.tmp" "$kdir/build/pause/linux/pause.c"
	mv "$out.tmp" "$out"
	log "built $out"
}

for n in "${names[@]}"; do
	case $n in
	kube-apiserver | kubelet | kube-scheduler | kube-proxy | kube-controller-manager) build_kube "$n" ;;
	agent-sandbox-controller) build_sandbox ;;
	pause) build_pause ;;
	*) log "unknown binary $n (want kube-apiserver, kubelet, kube-scheduler, kube-proxy, kube-controller-manager, agent-sandbox-controller or pause)"; exit 2 ;;
	esac
done
