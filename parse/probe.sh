# gputriage probe, capture format v1. Run as `sh -s` with this script on stdin, after a first
# line `set -- NONCE [SMI_SECONDS]` (see parse.ProbeInput): the nonce never appears on a command
# line, where other processes could read it. SMI_SECONDS bounds each nvidia-smi call (default
# 30), so that a wedged driver still leaves time to report everything else before the caller's
# deadline.
# Read-only: it runs nvidia-smi queries and reads /proc, /dev/shm and systemd state; it writes
# no file, signals no process and changes nothing. Every step is bounded in time (timeout,
# where present) and output size (head -c). The format is documented in docs/capture.md.
set -u
LC_ALL=C
export LC_ALL
PATH="$PATH:/usr/bin:/bin:/usr/sbin:/sbin:/usr/local/bin"
export PATH
N=${1:-}
case $N in
'' | *[!0-9a-f]*)
	echo "gputriage probe: usage: set -- NONCE [SMI_SECONDS] before the script (NONCE in lower-case hex)" >&2
	exit 2
	;;
esac
SMI_T=${2:-30}
case $SMI_T in '' | *[!0-9]*) SMI_T=30 ;; esac
HAVE_TIMEOUT=
command -v timeout >/dev/null 2>&1 && HAVE_TIMEOUT=1

printf 'gputriage-capture v1 nonce=%s\n' "$N"

# t SECONDS CMD [ARG...]: run an external CMD under timeout where the host has it.
t() {
	_s=$1
	shift
	if [ -n "$HAVE_TIMEOUT" ]; then timeout -k 2 "$_s" "$@"; else "$@"; fi
}

# sec NAME LIMIT SECONDS CMD [ARG...]: print CMD's stdout+stderr as section NAME, at most
# LIMIT bytes. SECONDS 0 runs CMD (a shell function that bounds its own steps) directly. The rc
# trailer travels inside the bounded stream, so a missing trailer tells the reader the section
# was cut at LIMIT.
sec() {
	_n=$1 _l=$2 _s=$3
	shift 3
	if [ -n "$HAVE_TIMEOUT" ] && [ "$_s" != 0 ]; then set -- timeout -k 2 "$_s" "$@"; fi
	printf '@@gputriage %s begin %s limit=%s\n' "$N" "$_n" "$_l"
	{
		"$@" 2>&1
		printf '\n@@gputriage %s rc=%s\n' "$N" "$?"
	} | head -c "$((_l + 64))"
	printf '\n@@gputriage %s end %s\n' "$N" "$_n"
}

# capsec NAME LIMIT SECONDS CMD [ARG...]: like sec, and keep the section in $OUT for the
# steps that need it (text only: a shell variable cannot hold NUL).
capsec() {
	_n=$1 _l=$2 _s=$3
	shift 3
	if [ -n "$HAVE_TIMEOUT" ] && [ "$_s" != 0 ]; then set -- timeout -k 2 "$_s" "$@"; fi
	OUT=$({
		"$@" 2>&1
		printf '\n@@gputriage %s rc=%s\n' "$N" "$?"
	} | head -c "$((_l + 64))")
	printf '@@gputriage %s begin %s limit=%s\n%s\n@@gputriage %s end %s\n' "$N" "$_n" "$_l" "$OUT" "$N" "$_n"
}

# nosec NAME LIMIT RC [TEXT]: a section whose content is known without running anything.
nosec() {
	if [ -n "${4:-}" ]; then
		printf '@@gputriage %s begin %s limit=%s\n%s\n\n@@gputriage %s rc=%s\n\n@@gputriage %s end %s\n' "$N" "$1" "$2" "$4" "$N" "$3" "$N" "$1"
	else
		printf '@@gputriage %s begin %s limit=%s\n\n@@gputriage %s rc=%s\n\n@@gputriage %s end %s\n' "$N" "$1" "$2" "$N" "$3" "$N" "$1"
	fi
}

# Host facts come from /proc and /etc/passwd through builtins where they can: every external
# command costs the host a fork and an exec, many times over in a fleet-wide sweep.
hostfacts() {
	echo "probe_version=1"
	_v=
	read -r _v </proc/sys/kernel/hostname 2>/dev/null || _v=$(uname -n 2>/dev/null)
	echo "hostname=$_v"
	_v=
	read -r _v </proc/sys/kernel/osrelease 2>/dev/null || _v=$(uname -r 2>/dev/null)
	echo "kernel=$_v"
	echo "time=$(date +%s 2>/dev/null)"
	if read -r _up _idle </proc/uptime 2>/dev/null; then echo "uptime=$_up"; fi
	while read -r _k _v _rest; do
		if [ "$_k" = btime ]; then echo "btime=$_v"; fi
	done </proc/stat 2>/dev/null
	echo "clk_tck=$(getconf CLK_TCK 2>/dev/null)"
	_uid=
	while read -r _k _v _rest; do
		if [ "$_k" = Uid: ]; then _uid=$_v && break; fi
	done </proc/self/status 2>/dev/null
	[ -n "$_uid" ] || _uid=$(id -u 2>/dev/null)
	echo "uid=$_uid"
	_user=
	if [ -n "$_uid" ]; then
		while IFS=: read -r _n _p _u _rest; do
			if [ "$_u" = "$_uid" ]; then _user=$_n && break; fi
		done </etc/passwd 2>/dev/null
	fi
	# Not in /etc/passwd (LDAP, sssd): ask the name service.
	[ -n "$_user" ] || _user=$(id -un 2>/dev/null)
	echo "user=$_user"
	echo "nvidia_smi=$SMI"
	echo "timeout=${HAVE_TIMEOUT:-0}"
}

SMI=$(command -v nvidia-smi 2>/dev/null)
if [ -z "$SMI" ]; then
	for _c in /usr/bin/nvidia-smi /usr/local/bin/nvidia-smi /usr/local/nvidia/bin/nvidia-smi \
		/opt/nvidia/bin/nvidia-smi /usr/lib/wsl/lib/nvidia-smi; do
		if [ -x "$_c" ]; then SMI=$_c && break; fi
	done
fi

sec host 65536 0 hostfacts

GPU_BASE=index,uuid,name,pci.bus_id,memory.total,memory.used,memory.free,utilization.gpu,compute_mode,driver_version
APPS=
if [ -n "$SMI" ]; then
	capsec smi-gpu 1048576 "$SMI_T" "$SMI" --query-gpu=$GPU_BASE,memory.reserved,mig.mode.current,minor_number --format=csv,nounits
	# Older drivers refuse fields they do not know and exit non-zero: ask again with the base
	# set. A timeout (rc 124 or 137) means the driver is stuck; asking again would double the wait.
	case $OUT in
	*"not a valid field"*)
		sec smi-gpu-basic 1048576 "$SMI_T" "$SMI" --query-gpu=$GPU_BASE --format=csv,nounits
		;;
	esac
	case $OUT in
	*"@@gputriage $N rc=124" | *"@@gputriage $N rc=137") ;;
	*)
		capsec smi-apps 1048576 "$SMI_T" "$SMI" --query-compute-apps=pid,gpu_uuid,used_memory,process_name --format=csv,nounits
		APPS=$OUT
		;;
	esac
else
	printf '@@gputriage %s begin smi-gpu limit=1048576\n%s\n@@gputriage %s rc=127\n@@gputriage %s end smi-gpu\n' \
		"$N" "nvidia-smi: not found on PATH or in /usr/bin, /usr/local/bin, /usr/local/nvidia/bin, /opt/nvidia/bin, /usr/lib/wsl/lib" "$N" "$N"
fi

# Every process holding /dev/nvidia* or /dev/shm/* open, from one ls over /proc/*/fd:
# "PID FD TARGET". Directories we may not read are counted, not listed. The time bound is on
# ls (awk ends with its input), so no extra shell is started for the pipeline.
fdscan() {
	t 20 ls -l /proc/[0-9]*/fd/ 2>&1 | awk '
	/^\/proc\/[0-9]+\/fd\/?:$/ { split($0, p, "/"); pid = p[3]; next }
	/Permission denied/ { denied++; next }
	{
		i = index($0, " -> ")
		if (i == 0) next
		t = substr($0, i + 4)
		if (t !~ /^\/dev\/nvidia/ && t !~ /^\/dev\/shm\//) next
		n = split(substr($0, 1, i - 1), a, " ")
		print pid, a[n], t
	}
	END { print "denied", denied + 0 }'
}
capsec fds 4194304 0 fdscan
FDS=$OUT

# Every /dev/shm mapping of every process we may read: "/proc/PID/maps:START-END PERMS OFF DEV INODE PATH".
capsec maps 4194304 20 grep -s -H -F ' /dev/shm/' /proc/[0-9]*/maps
MAPS=$OUT

# Sizes of the /dev/shm files held open (deleted ones included), through /proc/PID/fd/FD.
shmfdstat() {
	set --
	_old=$IFS
	IFS='
'
	for _l in $FDS; do
		IFS=$_old
		case $_l in
		*' /dev/shm/'*)
			_r=${_l#* }
			set -- "$@" "/proc/${_l%% *}/fd/${_r%% *}"
			;;
		esac
	done
	IFS=$_old
	[ $# -gt 0 ] || return 0
	t 10 stat -L -c '%s %n' -- "$@"
}
case $FDS in
*' /dev/shm/'*) sec fdstat 1048576 0 shmfdstat ;;
*) nosec fdstat 1048576 0 ;;
esac

# The PIDs worth describing: compute apps, /dev/nvidia* holders, holders of deleted shm files.
# One awk reads all three (separated by lines no section can hold) and keeps 2000 distinct PIDs.
PIDS=$(
	printf '%s\n@@gputriage %s next\n%s\n@@gputriage %s next\n%s\n' "$APPS" "$N" "$FDS" "$N" "$MAPS" | awk -v sep="@@gputriage $N next" '
	$0 == sep { part++; line = 0; next }
	{ line++; p = "" }
	part == 0 && line > 1 { split($0, f, ","); if (f[1] ~ /^ *[0-9]+ *$/) p = f[1] + 0 }
	part == 1 && $1 ~ /^[0-9]+$/ && ($3 ~ /^\/dev\/nvidia/ || / \(deleted\)$/) { p = $1 }
	part == 2 && / \(deleted\)$/ { split($1, q, "/"); p = q[3] }
	p != "" && !(p in seen) && n < 2000 { seen[p] = 1; n++; print p }' | sort -n
)

# One block per PID; all reads but argv and cwd are shell builtins. Paths given to --model,
# --model-path and friends are checked for existence, since a deleted model directory marks a
# leftover. They are looked up under /proc/PID/root, the process's own root (a container's
# paths are not the host's), and left out when that root cannot be read.
PROCS_SCRIPT='
for p in "$@"; do
	d=/proc/$p
	echo "pid $p"
	if [ ! -d "$d" ]; then echo gone; echo end; continue; fi
	if IFS= read -r l <"$d/stat"; then echo "stat $l"; fi
	while IFS= read -r l; do
		case $l in Name:* | State:* | PPid:* | Uid:* | NSpid:* | VmRSS:* | RssShmem:*) echo "status $l" ;; esac
	done <"$d/status"
	while IFS= read -r l; do echo "cgroup $l"; done <"$d/cgroup"
	printf "argv "
	head -c 65537 "$d/cmdline" | base64 | tr -d "\n"
	echo
	echo "cwd $(readlink "$d/cwd" 2>/dev/null)"
	want=
	tr "\000" "\n" <"$d/cmdline" | head -n 4096 | while IFS= read -r a; do
		if [ -n "$want" ]; then v=$a; want=; else
			case $a in
			--model=* | --model-path=* | --model_path=* | --model-name-or-path=* | --tokenizer=* | --tokenizer-path=* | --weights=* | --checkpoint=* | --ckpt=*) v=${a#*=} ;;
			--model | --model-path | --model_path | --model-name-or-path | --tokenizer | --tokenizer-path | --weights | --checkpoint | --ckpt) want=1; continue ;;
			*) continue ;;
			esac
		fi
		case $v in /*) if [ -e "$d/root$v" ]; then echo "path exists $v"; elif [ -d "$d/root/" ]; then echo "path missing $v"; fi ;; esac
	done
	echo end
done
'
if [ -n "$PIDS" ]; then
	# shellcheck disable=SC2086 # PIDS are digits
	sec procs 4194304 20 sh -c "$PROCS_SCRIPT" sh $PIDS
else
	nosec procs 4194304 0
fi

# User names for the uids seen, one getent (falls back to /etc/passwd lines).
UIDS=
for _p in $PIDS; do
	while read -r _k _u _rest; do
		if [ "$_k" = "Uid:" ]; then
			case "$UIDS " in *" $_u "*) ;; *) UIDS="$UIDS $_u" ;; esac
		fi
	done <"/proc/$_p/status" 2>/dev/null
done
users() {
	[ -n "${UIDS# }" ] || return 0
	# shellcheck disable=SC2086 # uids are digits
	if command -v getent >/dev/null 2>&1; then t 10 getent passwd $UIDS; else cat /etc/passwd; fi
}
if [ -n "${UIDS# }" ]; then sec users 1048576 0 users; else nosec users 1048576 0; fi

# systemd units named in those PIDs' cgroups.
UNITS=
_nu=0
for _p in $PIDS; do
	while IFS= read -r _l; do
		_u=${_l##*/}
		case $_u in
		*.service | *.scope)
			case "$UNITS " in
			*" $_u "*) ;;
			*) if [ "$_nu" -lt 200 ]; then UNITS="$UNITS $_u" _nu=$((_nu + 1)); fi ;;
			esac
			;;
		esac
	done <"/proc/$_p/cgroup" 2>/dev/null
done
units() {
	command -v systemctl >/dev/null 2>&1 || {
		echo "systemctl: not found"
		return 127
	}
	[ -n "${UNITS# }" ] || return 0
	# shellcheck disable=SC2086 # unit names come from cgroup paths: no spaces, no globs used
	t 15 systemctl show --no-pager -p Id,LoadState,ActiveState,SubState,MainPID,Result -- $UNITS
}
if ! command -v systemctl >/dev/null 2>&1; then
	nosec units 1048576 127 "systemctl: not found"
elif [ -z "${UNITS# }" ]; then
	nosec units 1048576 0
else
	sec units 1048576 0 units
fi

sec shm-df 65536 10 df -kP /dev/shm
# Type, bytes, mtime, uid and path of everything under /dev/shm, NUL-terminated.
sec shm-ls 4194304 20 find /dev/shm -xdev -maxdepth 8 -printf '%y\t%s\t%T@\t%U\t%p\0'

printf '@@gputriage %s done\n' "$N"
