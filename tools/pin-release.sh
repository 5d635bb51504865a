#!/bin/sh
# pin-release.sh DIR REPOSITORY VERSION [PROGRAM]: points the kustomization
# in DIR (integrations/argocd, deploy/base, or a copy) at a release of
# PROGRAM (default slipway-cmp) and pins it by digest with slipway pin
# (Slipway pinning its own install):
#   1. kustomization.yaml's images entry "slipway" gets
#      newName: REPOSITORY/PROGRAM and newTag: VERSION (the tag
#      slipway release --push writes last, once the whole release is in);
#   2. slipway pin --write --refresh DIR resolves that tag to the index's
#      digest and writes it as the entry's digest;
#   3. slipway lint DIR must then be clean.
# SLIPWAY names the slipway binary (default: slipway on PATH). Run by
# make pin-argocd (slipway-cmp) and make pin-deploy (slipway); tested by
# TestPinReleased (pkg/release/selfrelease).
set -eu
if [ $# -ne 3 ] && [ $# -ne 4 ]; then
	echo "usage: pin-release.sh DIR REPOSITORY VERSION [PROGRAM]" >&2
	exit 2
fi
dir=$1 repo=${2%/} version=$3 program=${4:-slipway-cmp}
slipway=${SLIPWAY:-slipway}
k=$dir/kustomization.yaml
[ -f "$k" ] || { echo "pin-release.sh: $k: no such file" >&2; exit 1; }
tmp=$k.pin-release.tmp
# Set newName and newTag of the entry "- name: slipway" only: from that line
# to the next list item or the end of the list.
awk -v img="$repo/$program" -v tag="$version" '
	/^  - / { in_entry = ($0 ~ /^  - name: slipway[ \t]*$/) }
	/^[^ #]/ { in_entry = 0 }
	in_entry && /^    newName:/ { print "    newName: " img; n++; next }
	in_entry && /^    newTag:/ { print "    newTag: " tag; t++; next }
	{ print }
	END { if (n != 1 || t != 1) exit 3 }
' "$k" >"$tmp" || {
	rm -f "$tmp"
	echo "pin-release.sh: $k: no images entry \"slipway\" with one newName and one newTag to set" >&2
	exit 1
}
mv "$tmp" "$k"
"$slipway" pin --write --refresh "$dir"
"$slipway" lint "$dir"
if grep -q 'digest: sha256:0\{64\}' "$k"; then
	echo "pin-release.sh: $k: the placeholder digest is still there after slipway pin" >&2
	exit 1
fi
