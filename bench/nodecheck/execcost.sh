#!/bin/bash
# execcost.sh [N] [CPU]: what process creation costs on this machine, the part of node-check's
# cost that is not gputriage's own (docs/performance.md). It times, from dash as the probe
# runs, N (default 1000) of each: a subshell that only exits (fork alone), /bin/true (fork and
# exec), awk (a dynamically linked program the probe runs), and /bin/true pinned to CPU
# (default 1) with taskset. CPU is user+sys of the loop and all it waited for (bash's time).
# Run it when the machine is quiet (see uptime).
set -eu
n=${1:-1000} cpu=${2:-1}
TIMEFORMAT='%R %U %S'
per() { # LABEL CMD...: wall and CPU per iteration, in ms
	local t
	t=$({ time "${@:2}" >/dev/null 2>&1; } 2>&1)
	read -r r u s <<<"$t"
	awk -v l="$1" -v n="$n" -v r="$r" -v u="$u" -v s="$s" \
		'BEGIN { printf "%-28s wall %.2f ms  CPU %.2f ms (user %.2f, sys %.2f) per iteration\n", l, r*1000/n, (u+s)*1000/n, u*1000/n, s*1000/n }'
}
loop='i=0; while [ $i -lt '"$n"' ]; do CMD; i=$((i+1)); done'
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs; N=$n"
per "fork only: ( : )" dash -c "${loop/CMD/( : )}"
per "fork+exec /bin/true" dash -c "${loop/CMD//bin/true}"
per "fork+exec awk 'BEGIN {}'" dash -c "${loop/CMD/awk 'BEGIN {}'}"
per "fork+exec, taskset -c $cpu" taskset -c "$cpu" dash -c "${loop/CMD//bin/true}"
per "loop alone (no process)" dash -c "${loop/CMD/:}"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
