#!/usr/bin/env bash
# tools/k8s/build.sh [OUTDIR]: builds the Kubernetes test lab's servers (kube-apiserver, kine,
# kwok) from this module into OUTDIR and prints OUTDIR on its last line. Without OUTDIR the
# binaries go to a cache shared by every checkout on this machine,
# ${XDG_CACHE_HOME:-$HOME/.cache}/gputriage-k8s/KEY, KEY a hash of this module's go.mod, go.sum,
# this script and the Go version; a complete cache entry is reused without building.
# internal/k8stest runs this script when its binaries are missing; .ci/run runs it first.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bins="kube-apiserver kine kwok"

key() {
	{ cat "$here/go.mod" "$here/go.sum" "$here/build.sh"; go version; } | sha256sum | cut -c1-16
}

build() { # build DIR: the three binaries into DIR
	mkdir -p "$1"
	# kine's SQLite driver is cgo; -trimpath and no VCS stamp keep the output independent of the
	# checkout's path and state.
	(cd "$here" && CGO_ENABLED=1 GOFLAGS=-buildvcs=false go build -trimpath -ldflags='-s -w' -o "$1/" tool)
	for b in $bins; do [ -x "$1/$b" ] || { echo "build.sh: $b was not built" >&2; exit 1; }; done
}

if [ $# -gt 0 ]; then
	build "$1"
	echo "$1"
	exit 0
fi
root=${XDG_CACHE_HOME:-$HOME/.cache}/gputriage-k8s
dir=$root/$(key)
mkdir -p "$root"
# One builder at a time per machine; the others wait, then find the entry complete.
exec 9>"$root/.lock"
flock 9
if [ ! -e "$dir/.complete" ]; then
	tmp=$(mktemp -d "$root/.build.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	build "$tmp"
	touch "$tmp/.complete"
	rm -rf "$dir"
	mv "$tmp" "$dir"
	trap - EXIT
fi
echo "$dir"
