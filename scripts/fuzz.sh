#!/usr/bin/env bash
# Run every fuzz target of the module for DURATION each (default 60s), one after another.
# Usage: scripts/fuzz.sh [DURATION]    e.g. scripts/fuzz.sh 5m
# A failure leaves its input under PKG/testdata/fuzz/FuzzX/ (commit it: it becomes a seed).
set -euo pipefail
cd "$(dirname "$0")/.."
d=${1:-60s}
status=0
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
		start=$(date +%s)
		if go test "$pkg" -run='^$' -fuzz="^$f\$" -fuzztime="$d" -fuzzminimizetime=10s -parallel="${FUZZ_PARALLEL:-2}" >"/tmp/fuzz-$f.log" 2>&1; then
			echo "ok   $pkg $f $(($(date +%s) - start))s $(grep -o 'execs: [0-9]*' "/tmp/fuzz-$f.log" | tail -1)"
		else
			echo "FAIL $pkg $f (log: /tmp/fuzz-$f.log)"
			status=1
		fi
	done
done
exit $status
