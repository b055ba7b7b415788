#!/usr/bin/env bash
# Build the binaries to hand around: static (CGO_ENABLED=0), one per laptop and server gputriage
# runs on, each stamped with its version and revision (`gputriage version` prints them), the
# Kubernetes node agent's (gputriage-agent-linux-ARCH) for each Linux target, and a
# SHA256SUMS file beside them. Nothing else is needed on the machine that runs them.
#
# Usage: scripts/release.sh [DIR [OS/ARCH ...]]
#   DIR      where the binaries go (default dist); made if absent, its old binaries replaced
#   OS/ARCH  the targets (default: linux/amd64 linux/arm64 darwin/amd64 darwin/arm64)
# VERSION overrides the version (default: `git describe --tags --always --dirty`).
# Check a download with: cd DIR && sha256sum -c SHA256SUMS   (macOS: shasum -a 256 -c SHA256SUMS)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
dir=${1:-dist}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64)

revision=$(git rev-parse HEAD)
modified=false
[ -z "$(git status --porcelain --untracked-files=no)" ] || modified=true
version=${VERSION:-$(git describe --tags --always --dirty)}
case $version in
v*) ;;
*) version=v0.0.0-$version ;; # no tag yet: a pseudo-version, as go names untagged builds
esac

mkdir -p "$dir"
rm -f "$dir"/gputriage-* "$dir"/SHA256SUMS
# -buildvcs=false: the revision is stamped from git here, so a checkout owned by another user
# (where go's own VCS stamping fails) builds too; -trimpath: no build paths in the binary.
ldflags="-s -w -X main.version=$version -X main.revision=$revision -X main.modified=$modified"
for t in "${targets[@]}"; do
	out="$dir/gputriage-${t%/*}-${t#*/}"
	CGO_ENABLED=0 GOOS=${t%/*} GOARCH=${t#*/} go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$out" ./cmd/gputriage
	echo "== built $out ($version, $revision)"
	# The Kubernetes node agent's binary (contrib/k8s/Dockerfile), for Linux targets only.
	[ "${t%/*}" = linux ] || continue
	out="$dir/gputriage-agent-${t%/*}-${t#*/}"
	CGO_ENABLED=0 GOOS=${t%/*} GOARCH=${t#*/} go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$out" ./cmd/gputriage-agent
	echo "== built $out"
done
(cd "$dir" && sha256sum gputriage-* >SHA256SUMS)
echo "== $dir/SHA256SUMS"
