#!/bin/bash
# bench/fanout.sh K [RUNS]: gputriage against pdsh on K real OpenSSH sshd hosts.
#
# Starts K sshd hosts (bench/sshdlab: 127.0.3.1.., private PID/mount/UTS namespaces, a fake
# nvidia-smi serving an idle 8-GPU host), then alternates RUNS (default 5) runs of
#   (a) gputriage: the full triage of all K hosts (--fanout 64, --format json), and
#   (b) pdsh -R ssh -f 64: only the two nvidia-smi queries the probe makes,
# and prints, for each, the median wall time, the client's CPU seconds per host (user+sys of
# the client and every process it waited for: pdsh's ssh children included, from
# /usr/bin/time), and the sshd side's CPU seconds per host (the sshd listeners' own and reaped
# children's CPU, from /proc/PID/stat); then the ratios. Needs root, sshd, pdsh, /usr/bin/time.
# Every run is bounded by timeout(1); the hosts are stopped on exit.
set -eu
K=${1:?usage: bench/fanout.sh K [RUNS]}
RUNS=${2:-5}
cd "$(dirname "$0")/.."
for t in pdsh /usr/bin/time /usr/sbin/sshd; do
	command -v "$t" >/dev/null || { echo "fanout.sh: $t is missing (apt-get install -y pdsh time openssh-server)" >&2; exit 2; }
done
W=$(mktemp -d /tmp/gputriage-fanout.XXXXXX)
LAB_PID=
cleanup() {
	if [ -n "$LAB_PID" ]; then
		exec 9>&- || true
		kill "$LAB_PID" 2>/dev/null || true
		wait "$LAB_PID" 2>/dev/null || true
	fi
	rm -rf "$W"
}
trap cleanup EXIT INT TERM
go build -o "$W/" ./cmd/gputriage ./bench/sshdlab

mkfifo "$W/lab.in"
"$W/sshdlab" -hosts "$K" -dir "$W/lab" -lifetime 20m <"$W/lab.in" >"$W/lab.out" &
LAB_PID=$!
exec 9>"$W/lab.in" # sshdlab runs until this closes
for _ in $(seq 300); do grep -q ready "$W/lab.out" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$W/lab.out" || { echo "fanout.sh: the sshd hosts did not start" >&2; exit 1; }
L=$W/lab

srvcpu() { # CPU seconds of every sshd so far, reaped sessions included
	for p in $(cat "$L/pids"); do cat "/proc/$p/stat"; done |
		awk '{ s += $14 + $15 + $16 + $17 } END { printf "%.2f\n", s / 100 }'
}
SMI_GPU='--query-gpu=index,uuid,name,pci.bus_id,memory.total,memory.used,memory.free,utilization.gpu,compute_mode,driver_version,memory.reserved,mig.mode.current --format=csv,nounits'
SMI_APPS='--query-compute-apps=pid,gpu_uuid,used_memory,process_name --format=csv,nounits'
run_a() {
	env -i PATH="$PATH" HOME="$W" USER=root \
		timeout 120 "$W/gputriage" -f "$L/hosts" -F "$L/ssh_config" --fanout 64 --timeout 60s --format json >"$W/a.json" 2>"$W/a.err" || true
	n=$(grep -c '"ok": true' "$W/a.json" || true)
	[ "$n" = "$K" ] || { echo "fanout.sh: gputriage triaged $n of $K hosts:" >&2; head -20 "$W/a.err" >&2; exit 1; }
}
run_b() {
	env -i PATH="$PATH" HOME="$W" PDSH_RCMD_TYPE=ssh PDSH_SSH_ARGS="-F $L/ssh_config -x -a -l%u %h" \
		timeout 120 pdsh -f 64 -w "^$L/hosts" "nvidia-smi $SMI_GPU; nvidia-smi $SMI_APPS" >"$W/b.out" 2>"$W/b.err" || true
	n=$(grep -c ': 0, GPU-' "$W/b.out" || true)
	[ "$n" = "$K" ] || { echo "fanout.sh: pdsh reached $n of $K hosts:" >&2; head -20 "$W/b.err" >&2; exit 1; }
}
# one warm-up run each (page cache, sshd's first fork), not counted
run_a
run_b
: >"$W/a.times"
: >"$W/b.times"
for i in $(seq "$RUNS"); do
	for x in a b; do
		s0=$(srvcpu)
		/usr/bin/time -f "%e %U %S" -o "$W/t" bash -c "$(declare -f run_$x); W='$W' L='$L' K='$K' SMI_GPU='$SMI_GPU' SMI_APPS='$SMI_APPS' run_$x"
		s1=$(srvcpu)
		echo "$(tail -1 "$W/t") $s0 $s1" >>"$W/$x.times"
	done
done
# median of wall, client CPU and server CPU over the runs
med() { # FILE -> "wall clientcpu servercpu"
	awk '{ print $1, $2 + $3, $5 - $4 }' "$1" >"$1.v"
	for c in 1 2 3; do cut -d' ' -f$c "$1.v" | sort -g | awk '{ v[NR] = $1 } END { printf "%s ", v[int((NR + 1) / 2)] }'; done
	echo
}
read -r AW AC AS <<<"$(med "$W/a.times")"
read -r BW BC BS <<<"$(med "$W/b.times")"
echo "K=$K hosts, $RUNS alternating runs each, medians; client CPU includes every child process"
echo
echo "| K=$K | wall s | client CPU s/host | sshd CPU s/host |"
echo "|---|---:|---:|---:|"
awk -v k="$K" -v w="$AW" -v c="$AC" -v s="$AS" 'BEGIN { printf "| (a) gputriage, full triage | %.3f | %.4f | %.4f |\n", w, c / k, s / k }'
awk -v k="$K" -v w="$BW" -v c="$BC" -v s="$BS" 'BEGIN { printf "| (b) pdsh -R ssh -f 64, 2 nvidia-smi queries | %.3f | %.4f | %.4f |\n", w, c / k, s / k }'
echo
awk -v aw="$AW" -v bw="$BW" -v ac="$AC" -v bc="$BC" 'BEGIN {
	r = aw / bw; c = (bc > 0) ? ac / bc : 0
	printf "wall ratio a/b = %.2f (target <= 0.50: %s)\n", r, (r <= 0.5 ? "met" : "MISSED")
	printf "client CPU ratio a/b = %.3f (target <= 0.25: %s)\n", c, (c <= 0.25 ? "met" : "MISSED")
}'
echo
echo "raw runs (wall user sys sshd-cpu-before sshd-cpu-after):"
sed 's/^/  a: /' "$W/a.times"
sed 's/^/  b: /' "$W/b.times"
