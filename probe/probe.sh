# gputriage probe, capture format v2. Run as `sh -s` with this script on stdin, after a first
# line `set -- NONCE [SMI_SECONDS]` (see probe.Input): the nonce never appears on a command
# line or in an environment, where other processes could read it. SMI_SECONDS bounds each
# nvidia-smi call (default 30), so that a wedged driver still leaves time to report everything
# else before the caller's deadline.
# Read-only: it runs nvidia-smi queries and reads /proc, /dev/shm and systemd state; it writes
# no file, signals no process and changes nothing. Every step is bounded in time (timeout,
# where present) and output size (head -c). The format is documented in docs/capture.md.
# Every value a host's users control (paths, names, comm, argv, cgroup and unit names) is sent
# NUL-terminated, base64-encoded or as the kernel escapes it, never as a bare line: no such
# value can start a record, a field or a section.
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
# The nonce is only ever given to printf: it must be the shell's own, not a program whose command
# line other users could read.
case $(command -v printf) in
printf) ;;
*)
	echo "gputriage probe: printf is not a builtin of this sh: refusing to put the nonce on a command line" >&2
	exit 2
	;;
esac
SMI_T=${2:-30}
case $SMI_T in '' | *[!0-9]*) SMI_T=30 ;; esac
HAVE_TIMEOUT=
command -v timeout >/dev/null 2>&1 && HAVE_TIMEOUT=1
NL='
'

printf 'gputriage-capture v2 nonce=%s\n' "$N"

# t SECONDS CMD [ARG...]: run an external CMD under timeout where the host has it.
t() {
	_s=$1
	shift
	if [ -n "$HAVE_TIMEOUT" ]; then timeout -k 2 "$_s" "$@"; else "$@"; fi
}

# sec NAME LIMIT SECONDS CMD [ARG...]: print CMD's stdout+stderr as section NAME, at most
# LIMIT bytes. SECONDS 0 runs CMD (a shell function that bounds its own steps) directly. The rc
# trailer travels inside the bounded stream, so a missing trailer tells the reader the section
# was cut at LIMIT. The reader bounds each section by its own table, whatever LIMIT says.
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

# capsec64 NAME LIMIT SECONDS CMD [ARG...]: like capsec for a CMD whose output may hold NUL
# and any byte: the bounded stream (output and rc trailer) is sent base64-encoded (in lines of
# 76 characters: no line can be a marker), and kept so in $OUT.
capsec64() {
	_n=$1 _l=$2 _s=$3
	shift 3
	if [ -n "$HAVE_TIMEOUT" ] && [ "$_s" != 0 ]; then set -- timeout -k 2 "$_s" "$@"; fi
	OUT=$({
		"$@" 2>&1
		printf '\n@@gputriage %s rc=%s\n' "$N" "$?"
	} | head -c "$((_l + 64))" | base64)
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

# line1 VAR VALUE: set VAR to the first line of VALUE, so that no value can add a key.
line1() {
	eval "$1=\${2%%\"\$NL\"*}"
}

# Host facts come from /proc and /etc/passwd through builtins where they can: every external
# command costs the host a fork and an exec, many times over in a fleet-wide sweep. Each value
# is one line: what follows a newline in it is dropped. Values are printed with printf '%s',
# never echo, which in some shells (dash) turns a backslash and n into a newline.
hostfacts() {
	printf 'probe_version=2\n'
	_v=
	read -r _v </proc/sys/kernel/hostname 2>/dev/null || line1 _v "$(uname -n 2>/dev/null)"
	printf 'hostname=%s\n' "$_v"
	_v=
	read -r _v </proc/sys/kernel/osrelease 2>/dev/null || line1 _v "$(uname -r 2>/dev/null)"
	printf 'kernel=%s\n' "$_v"
	printf 'time=%s\n' "$(date +%s 2>/dev/null)"
	if read -r _up _idle </proc/uptime 2>/dev/null; then printf 'uptime=%s\n' "$_up"; fi
	while read -r _k _v _rest; do
		if [ "$_k" = btime ]; then printf 'btime=%s\n' "$_v"; fi
	done </proc/stat 2>/dev/null
	printf 'clk_tck=%s\n' "$(getconf CLK_TCK 2>/dev/null)"
	_v=
	read -r _v </proc/sys/kernel/random/boot_id 2>/dev/null
	printf 'boot_id=%s\n' "$_v"
	printf 'uid=%s\n' "$MYUID"
	_user=
	[ -z "$MYUID" ] || name_of "$MYUID"
	# Not in the name service by uid: ask for the name of this process's user.
	[ -n "$_user" ] || line1 _user "$(id -un 2>/dev/null)"
	printf 'user=%s\n' "$_user"
	line1 _v "$SMI"
	printf 'nvidia_smi=%s\n' "$_v"
	printf 'timeout=%s\n' "${HAVE_TIMEOUT:-0}"
	# The device of this /dev/shm (stat's %D, hex): a process's deleted file on another
	# (a container's own /dev/shm) does not fill this one.
	printf 'shm_dev=%s\n' "$(stat -L -c %D /dev/shm 2>/dev/null)"
}

# name_of UID: set _user to UID's name: the first field of the first passwd entry of UID, when
# that entry's uid field is UID (a name holds no ':' or newline; the fields after the uid, which
# users may edit, are never read). Empty when UID has no name.
name_of() {
	_user=
	while IFS= read -r _e; do
		passwd_name "$1" "$_e" && return 0
	done </etc/passwd 2>/dev/null
	# Not in /etc/passwd (LDAP, sssd): ask the name service.
	command -v getent >/dev/null 2>&1 || return 0
	line1 _e "$(t 5 getent passwd "$1" 2>/dev/null)"
	passwd_name "$1" "$_e"
}

# passwd_name UID LINE: set _user to LINE's name field when LINE is a passwd entry of UID.
passwd_name() {
	case $2 in *:*:*) ;; *) return 1 ;; esac
	_r=${2#*:}
	_r=${_r#*:}
	[ "${_r%%:*}" = "$1" ] || return 1
	_user=${2%%:*}
	[ -n "$_user" ]
}

MYUID=
while read -r _k _v _rest; do
	if [ "$_k" = Uid: ]; then MYUID=$_v && break; fi
done </proc/self/status 2>/dev/null
[ -n "$MYUID" ] || line1 MYUID "$(id -u 2>/dev/null)"
case $MYUID in *[!0-9]*) MYUID= ;; esac

SMI=$(command -v nvidia-smi 2>/dev/null)
if [ -z "$SMI" ]; then
	for _c in /usr/bin/nvidia-smi /usr/local/bin/nvidia-smi /usr/local/nvidia/bin/nvidia-smi \
		/opt/nvidia/bin/nvidia-smi /usr/lib/wsl/lib/nvidia-smi; do
		if [ -x "$_c" ]; then SMI=$_c && break; fi
	done
fi

sec host 65536 0 hostfacts

# appsalive: "alive PID" or "gone PID" for each distinct PID of the compute-app listing in
# $APPS (digits only; at most 4096), by whether /proc/PID exists.
appsalive() {
	printf '%s\n' "$APPS" | awk 'NR > 1 { split($0, f, ","); if (f[1] ~ /^ *[0-9]+ *$/ && !((f[1] + 0) in seen) && n < 4096) { seen[f[1] + 0] = 1; n++; print f[1] + 0 } }' |
		while read -r _p; do
			if [ -d "/proc/$_p" ]; then printf 'alive %s\n' "$_p"; else printf 'gone %s\n' "$_p"; fi
		done
}

GPU_BASE=@GPUBaseFields@
APPS=
if [ -n "$SMI" ]; then
	capsec smi-gpu 1048576 "$SMI_T" "$SMI" --query-gpu=$GPU_BASE,@gpuExtraFields@ --format=@SMIFormat@
	# Older drivers refuse fields they do not know and exit non-zero: ask again with the base
	# set. A timeout (rc 124 or 137) means the driver is stuck; asking again would double the wait.
	case $OUT in
	*"not a valid field"*)
		sec smi-gpu-basic 1048576 "$SMI_T" "$SMI" --query-gpu=$GPU_BASE --format=@SMIFormat@
		;;
	esac
	case $OUT in
	*"@@gputriage $N rc=124" | *"@@gputriage $N rc=137") ;;
	*)
		# No process_name: it is the process's own text (a newline in it would start a row).
		capsec smi-apps 1048576 "$SMI_T" "$SMI" --query-compute-apps=@AppsFields@ --format=@SMIFormat@
		APPS=$OUT
		# At once, before anything slow: which listed PIDs have no /proc entry. A PID gone
		# here was gone when nvidia-smi listed it (or a moment later), not while the probe
		# read /proc: the driver charges memory to it that something else keeps alive.
		sec apps-alive 131072 0 appsalive
		# Every process nvidia-smi knows, graphics (type G) and MPS clients included, with its
		# type and memory. Names are in it (a process's own text): the reader never reads them.
		sec smi-pids 262144 "$SMI_T" "$SMI" -q -d PIDS
		;;
	esac
else
	printf '@@gputriage %s begin smi-gpu limit=1048576\n%s\n@@gputriage %s rc=127\n@@gputriage %s end smi-gpu\n' \
		"$N" "nvidia-smi: not found on PATH or in /usr/bin, /usr/local/bin, /usr/local/nvidia/bin, /opt/nvidia/bin, /usr/lib/wsl/lib" "$N" "$N"
fi

# GNU find's -printf lists the fds and /dev/shm with NUL-terminated records.
HAVE_PRINTF=
find /dev/null -maxdepth 0 -printf '' >/dev/null 2>&1 && HAVE_PRINTF=1

# GNU head's -z counts NUL-terminated records: it caps each GPU holder's fds at a record's end.
HAVE_HEADZ=
[ -n "$HAVE_PRINTF" ] && head -z -n 1 </dev/null >/dev/null 2>&1 && HAVE_HEADZ=1

# Every fd open on /dev/nvidia* or /dev/shm/*: "/proc/PID/fd<TAB>FD<TAB>TARGET<NUL>", then
# "denied N PID...": N fd links (or directories) that could not be read, and the first 16 PIDs
# they belong to (a process that exits mid-scan is "No such file", not counted). The GPU holders come first (nvidia-smi's
# compute apps, then the holders of /dev/nvidia*; at most 64, at most 1024 fds and 2 s each),
# then every other process: any user may open thousands of /dev/shm files with names of 4 KiB
# and fill the section's bound, and a GPU holder's deleted-but-open weights must not be what
# is cut. find's complaints are only counted: they would land inside records. A find stopped
# by its time bound is the section's exit status 124; a GPU holder with more than 1024 such
# fds (the rest of its are not read), 3.
FDFIND='-mindepth 1 -maxdepth 1 ( -lname /dev/nvidia* -o -lname /dev/shm/* ) -printf %h\t%f\t%l\0'
FDCOUNT='-mindepth 1 -maxdepth 1 ( -lname /dev/nvidia* -o -lname /dev/shm/* ) -printf .'
fdscan() {
	{ {
		set -f
		for _p in $FDGPU; do
			# shellcheck disable=SC2086 # FDFIND, FDCOUNT: find's own words, no glob (set -f)
			t 2 find "/proc/$_p/fd" $FDFIND | head -z -n 1024
			_n=$(t 2 find "/proc/$_p/fd" $FDCOUNT 2>/dev/null | head -c 1025 | wc -c)
			[ "${_n:-0}" -le 1024 ] || echo "gputriage-capped" >&2
		done
		# shellcheck disable=SC2046,SC2086 # /proc/PID/fd paths: digits and slashes
		t 20 find $(fdrest) $FDFIND
		echo "gputriage-rc $?" >&2
		set +f
	} 2>&1 >&3 3>&- | awk '/Permission denied/ { d++; if (match($0, /\/proc\/[0-9]+\//)) { p = substr($0, RSTART + 6, RLENGTH - 7); if (!(p in s) && n < 16) { s[p] = 1; n++; l = l " " p } } } /^gputriage-rc (124|137)$/ { late = 1 } /^gputriage-capped$/ { capped = 1 }
	END { printf "denied %d%s\n", d, l; if (late) exit 124; if (capped) exit 3 }' 3>&-; } 3>&1
}
# fdrest: the fd directories of every process but those read first.
fdrest() {
	set +f
	printf '%s\n' /proc/[0-9]*/fd | awk -v skip="$FDGPU" '
	BEGIN { n = split(skip, a, " "); for (i = 1; i <= n; i++) s["/proc/" a[i] "/fd"] = 1 }
	!($0 in s)'
	set -f
}
FDGPU=
if [ -n "$HAVE_HEADZ" ]; then
	FDGPU=$({
		printf '%s\n' "$APPS" | awk 'NR > 1 { split($0, f, ","); if (f[1] ~ /^ *[0-9]+ *$/) print f[1] + 0 }'
		t 10 find /proc/[0-9]*/fd -mindepth 1 -maxdepth 1 -lname '/dev/nvidia*' -printf '%h\n' 2>/dev/null | awk -F/ '{ print $3 }'
	} | awk '/^[0-9]+$/ && !($0 in s) && n < 64 { s[$0] = 1; n++; print }')
fi
FDS=
FDX=
if [ -n "$HAVE_PRINTF" ]; then
	capsec64 fds 4194304 0 fdscan
	# One fd per line for the steps below: the NULs become newlines, a newline in a target \001.
	FDX=$(printf '%s' "$OUT" | base64 -d 2>/dev/null | tr '\000\n' '\n\001')
else
	nosec fds 4194304 127 "find: no -printf (not GNU find)"
fi

# Every /dev/shm mapping of every process we may read: "/proc/PID/maps:START-END PERMS OFF DEV
# INODE PATH". The kernel writes a newline in PATH as \012. The GPU processes' maps come first
# (nvidia-smi's apps, /dev/nvidia* holders; read again in the sweep, which the reader takes
# once), at most 4096 lines each: any user can map one file tens of thousands of times and
# fill the section's bound, and the deleted weights a leftover maps must not be what is cut.
# The GPU holders, in order: nvidia-smi's compute apps, then the holders of /dev/nvidia*; each
# once, at most 2000. They are read first, each within a bound of its own, by the steps below.
GPUP=$(printf '%s\n@@next\n%s\n' "$APPS" "$FDX" | awk '
$0 == "@@next" { part++; line = 0; next }
{ line++; p = "" }
part == 0 && line > 1 { split($0, f, ","); if (f[1] ~ /^ *[0-9]+ *$/) p = f[1] + 0 }
part == 1 && /^\/proc\/[0-9]+\/fd\t/ { split($0, f, "\t"); if (f[3] ~ /^\/dev\/nvidia/) { split(f[1], q, "/"); p = q[3] } }
p != "" && !(p in seen) && n < 2000 { seen[p] = 1; n++; print p }')
GPUMAPS=
for _p in $GPUP; do GPUMAPS="$GPUMAPS /proc/$_p/maps"; done
mapscan() {
	# shellcheck disable=SC2086 # /proc/PID/maps paths: digits and slashes
	if [ -n "$GPUMAPS" ]; then t 10 grep -m 4096 -s -H -F ' /dev/shm/' $GPUMAPS 2>/dev/null; fi
	t 20 grep -s -H -F ' /dev/shm/' /proc/[0-9]*/maps
}
capsec maps 4194304 0 mapscan
MAPS=$OUT

# Links, sizes and names of the /dev/shm files held open (deleted ones included), through
# /proc/PID/fd/FD: "NLINK BYTES DEV INODE /proc/PID/fd/FD" (DEV: st_dev in hex). Device and inode
# tell one file from another of the same name: a deleted name is free to be used again.
SHMFDS=$(printf '%s\n' "$FDX" | awk -F '\t' '$1 ~ /^\/proc\/[0-9]+\/fd$/ && $2 ~ /^[0-9]+$/ && $3 ~ /^\/dev\/shm\// { print $1 "/" $2 }')
# Through xargs when there is one: tens of thousands of fds (DataLoader workers sharing
# tensors, or a user opening one file 60,000 times) would not fit one command line (E2BIG,
# exit 126). xargs's 123 (some stat exited 1: an fd closed after the scan) is stat's 1.
shmfdstat() {
	if command -v xargs >/dev/null 2>&1; then
		printf '%s\n' "$SHMFDS" | t 10 xargs stat -L -c '%h %s %D %i %n' --
		_rc=$?
		[ "$_rc" -eq 123 ] && _rc=1
		return "$_rc"
	fi
	# shellcheck disable=SC2086 # /proc/PID/fd/FD paths: digits and slashes
	t 10 stat -L -c '%h %s %D %i %n' -- $SHMFDS
}
if [ -n "$SHMFDS" ]; then sec fdstat 1048576 0 shmfdstat; else nosec fdstat 1048576 0; fi

# The PIDs worth describing: the GPU holders (GPUP: compute apps, then /dev/nvidia* holders),
# then the holders of deleted shm files; the first MAXPROCS distinct, in that order. The procs
# step adds their parents within the same bound.
MAXPROCS=2000
PIDS=$(
	printf '%s\n@@next\n%s\n@@next\n%s\n' "$GPUP" "$FDX" "$MAPS" | awk -v max="$MAXPROCS" '
	# No line of the three can be "@@next": GPUP is digits, and fd and maps lines start with
	# /proc/.
	$0 == "@@next" { part++; next }
	{ p = "" }
	part == 0 && /^[0-9]+$/ { p = $0 }
	part == 1 && /^\/proc\/[0-9]+\/fd\t/ { split($0, f, "\t"); if (f[3] ~ /^\/dev\/nvidia/ || / \(deleted\)$/) { split(f[1], q, "/"); p = q[3] } }
	part == 2 && /^\/proc\/[0-9]+\/maps:/ && / \(deleted\)$/ { split($1, q, "/"); p = q[3] }
	p != "" && !(p in seen) && n < max { seen[p] = 1; n++; print p }'
)

# One record per PID, each field NUL-terminated: "pid N", then "gone" or "stat ...", "status
# KEY:\tVALUE", "cgroup LINE", "argv BASE64", "cwd PATH\n", "path exists|missing PATH", "end".
# A field holds any byte but NUL, so nothing a process controls (comm in stat, cwd, argv) can
# start a field or a record. Every file a process's user controls (cmdline, cgroup: its
# names are the user's below a delegated cgroup) is bounded in bytes by head -c before any
# line-oriented tool sees it, and nothing is read byte by byte in the shell: a command line of
# 256 MiB in one line costs what 64 KiB costs.
# Paths given to --model, --model-path and friends are checked for existence, since a deleted
# model directory marks a leftover. They are looked up under /proc/PID/root, the process's own
# root (a container's paths are not the host's), and left out when that root cannot be read.
# The script's arguments: MAX PARENTS_AWK ARGPATHS_AWK DONE PPIDS PID...: DONE are the PIDs
# already described, PPIDS their parents' PIDs, PID those to describe. Then their ancestors,
# level by level up to PID 1 (at most 64 levels), each PPid not yet described and not 0 or 1,
# while the records number fewer than MAX, each with the field "parent" after its pid: a
# multiprocessing worker's own command line says only "spawn_main", its parent's says what
# runs, and the chain up to PID 1 tells a dead launcher (a worker re-parented to init or a
# subreaper) from a live one. The PPid values are the kernel's
# digits, checked again by awk, and only ever data.
PROCS_SCRIPT='
max=$1 pick=$2 argpaths=$3 done=$4 pp=$5
shift 5
fields="/^(Name|State|PPid|Uid|NSpid|VmRSS|RssShmem|Threads):/ { print \"status \" \$0 } /^[0-9]+:/ { print \"cgroup \" \$0 }"
# envs: of /proc/PID/environ, one entry a line (tr swaps NUL and newline, and a newline inside a
# value turns into \001), only the names the torchrun elastic agent gives each rank, each once
# (the first, as getenv reads it), its value digits or a run id of a short charset, or nothing.
envs="/^(TORCHELASTIC_RUN_ID|TORCHELASTIC_RESTART_COUNT|LOCAL_RANK|GROUP_RANK)=/ && !(\$1 in s) { s[\$1] = 1; v = substr(\$0, length(\$1) + 2)
	if (\$1 == \"TORCHELASTIC_RUN_ID\" ? v ~ /^[A-Za-z0-9._:-]+\$/ && length(v) <= 128 : v ~ /^[0-9]+\$/ && length(v) <= 6) print \"env \" \$0 }"
# ppid STAT: add the PPid in STAT, the field after the state that follows the comm.
ppid() {
	r=${1##*") "}
	r=${r#* }
	pp="$pp ${r%% *}"
}
desc() {
	d=/proc/$1
	printf "pid %s\000" "$1"
	if [ -n "$2" ]; then printf "parent\000"; fi
	if [ ! -d "$d" ]; then printf "gone\000end\000"; return; fi
	s=$(head -c 4096 "$d/stat")
	printf "stat %s\n\000" "$s"
	ppid "$s"
	# status lines start with a key, cgroup lines with the hierarchy number.
	{ head -c 65536 "$d/status"; head -c 65536 "$d/cgroup"; } | awk "$fields" | tr "\n" "\000"
	# The launcher variables of a GPU holder (holder=1: one described in a shell of its own),
	# never of an ancestor: at most 256 KiB of environ, and a last entry the bound cut ends in
	# \002, so it matches nothing.
	[ -n "$2" ] || [ -z "$holder" ] || { head -c 262144 "$d/environ"; printf "\002"; } | tr "\000\n" "\n\001" | awk -F= "$envs" | tr "\n" "\000"
	printf "argv "
	head -c 65537 "$d/cmdline" | base64
	printf "\000cwd "
	readlink "$d/cwd"
	printf "\000"
	a=$(head -c 65537 "$d/cmdline" | tr "\000" "\n")
	case $a in *--model* | *--tokenizer* | *--weights* | *--checkpoint* | *--ckpt*) ;; *) a= ;; esac
	[ -z "$a" ] || printf "%s\n" "$a" | awk "$argpaths" | while IFS= read -r v; do
		if [ -e "$d/root$v" ]; then printf "path exists %s\000" "$v"; elif [ -d "$d/root/" ]; then gone "$d/root$v" && printf "path missing %s\000" "$v" && chain "$d/root" "$v"; fi
	done
	printf "end\000"
}
# gone PATH: stat says it does not exist (ENOENT, ENOTDIR). Not when it cannot tell: a
# directory root may not enter (NFS with root_squash, a FUSE mount) holds a path that exists
# for the process. The message ends with the errno text, whatever the path holds.
gone() {
	case $(stat -L -c %i -- "$1" 2>&1) in
	*": No such file or directory" | *": Not a directory") return 0 ;;
	esac
	return 1
}
for p in "$@"; do desc "$p" ""; done
seen="$done $*" room=$((max - $# - $(echo $done | wc -w))) lvl=0
while [ -n "$pp" ] && [ "$room" -gt 0 ] && [ "$lvl" -lt 64 ]; do
	up=$(printf "%s\n%s\n" "$seen" "$pp" | awk -v room="$room" "$pick")
	pp=
	for p in $up; do desc "$p" parent; seen="$seen $p" room=$((room - 1)); done
	lvl=$((lvl + 1))
done
'
# chain ROOT PATH: who may change PATH, a path inside the root ROOT (/proc/PID/root): one field
# "dir UID GID MODE DEV ROOT/DIR" (MODE st_mode in hex, the type bits included; DEV st_dev) for
# each directory above PATH that exists, up to /, the deepest first, at most 32. A missing
# directory prints nothing: the reader finds the deepest one that exists. stat reads them all
# at once, and never follows the last link (a directory that is a symbolic link shows as one).
CHAIN_FN='
chain() {
	r=$1 c=$2 n=0
	set --
	while [ "$n" -lt 32 ] && [ -n "$c" ]; do
		c=${c%/*}
		set -- "$@" "$r${c:-/}"
		n=$((n + 1))
	done
	stat --printf "dir %u %g %f %d %n\000" -- "$@" 2>/dev/null
}
'
# The parents to describe at one level, from a first line of the PIDs described so far and a
# second of the last level's parents' PIDs: each once, none of the first line, not 0 or 1, at
# most room of them.
PARENTS_AWK='
NR == 1 { for (i = 1; i <= NF; i++) seen[$i] = 1; next }
{ for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+$/ && $i > 1 && !($i in seen) && n < room) { seen[$i] = 1; n++; print $i } }'
# The absolute paths given to the model flags, one argument a line (a newline inside one
# splits it: parse keeps only whole arguments), at most 32, none longer than PATH_MAX.
ARGPATHS_AWK='
BEGIN { flags = "^--(model|model-path|model_path|model-name-or-path|tokenizer|tokenizer-path|weights|checkpoint|ckpt)" }
want { want = 0; v = $0 }
!want && v == "" && $0 ~ (flags "=") { v = $0; sub(/^[^=]*=/, "", v) }
!want && v == "" && $0 ~ (flags "$") { want = 1; next }
v ~ /^\// && length(v) <= 4096 && n < 32 { n++; print v }
{ v = "" }'
# spent T0 S: S seconds or more have passed since T0, a /proc/uptime reading (a builtin read of
# the kernel's own line); never when either reading fails.
spent() {
	_now=
	read -r _now _rest </proc/uptime 2>/dev/null
	case ${1%.*} in '' | *[!0-9]*) return 1 ;; esac
	case ${_now%.*} in '' | *[!0-9]*) return 1 ;; esac
	[ $((${_now%.*} - ${1%.*})) -ge "$2" ]
}
# procscan: the GPU holders first (GPUP, at most 256), each in a shell of its own within 5 s,
# where alone the launcher variables of its environ are read (holder=1, a constant): a
# process whose description stalls (a model path on a hung mount) costs only its own budget, and
# one cut by it ends in a field "cut". After two such cuts or 30 s, the rest go with the others,
# in one shell within 20 s. Their parents' PIDs are read first, from the kernel's PPid lines, as
# the others' are when each is described. The shell's complaints (a process that exited) are
# dropped: they would land inside fields.
procscan() {
	_first=$(printf '%s\n' $GPUP | head -n 256)
	_pp=
	# shellcheck disable=SC2046 # /proc/PID/status paths: digits and slashes
	[ -z "$_first" ] || _pp=$(grep -s -h '^PPid:' $(printf '/proc/%s/status\n' $_first))
	_done= _late=0 _t0=
	read -r _t0 _rest </proc/uptime 2>/dev/null
	for _p in $_first; do
		[ "$_late" -lt 2 ] && ! spent "$_t0" 30 || break
		t 5 sh -c "holder=1$CHAIN_FN$PROCS_SCRIPT" sh 0 "$PARENTS_AWK" "$ARGPATHS_AWK" "" "" "$_p" 2>/dev/null
		case $? in 124 | 137) printf '\000cut\000' && _late=$((_late + 1)) ;; esac
		_done="$_done $_p"
	done
	# shellcheck disable=SC2046 # PIDS are digits
	t 20 sh -c "holder=$CHAIN_FN$PROCS_SCRIPT" sh "$MAXPROCS" "$PARENTS_AWK" "$ARGPATHS_AWK" "$_done" "$_pp" $(printf '%s\n' $PIDS | awk -v skip="$_done" '
	BEGIN { n = split(skip, a, " "); for (i = 1; i <= n; i++) s[a[i]] = 1 }
	!($0 in s)') 2>/dev/null
}
if [ -n "$PIDS" ]; then sec procs 4194304 0 procscan; else nosec procs 4194304 0; fi
# The cgroup lines of the PIDs, "/proc/PID/cgroup:LINE", read once for the units and the
# jobs below: the kernel bounds each line (it refuses a path longer than PATH_MAX), awk the
# whole at 4 MiB, in whole lines; a shell loop over them splits a variable, reading nothing
# byte by byte.
CGS=
# shellcheck disable=SC2046 # /proc/PID/cgroup paths: digits and slashes
[ -z "$PIDS" ] || CGS=$(t 10 grep -s -H '' $(printf '/proc/%s/cgroup\n' $PIDS) | awk '{ n += length($0) + 1; if (n > 4194304) exit; print }')

# User names for the uids seen: "NAME:x:UID" per uid, the name from name_of.
UIDS=
_nu=0
for _p in $PIDS; do
	while read -r _k _u _rest; do
		if [ "$_k" = "Uid:" ]; then
			case "$UIDS " in *" $_u "*) ;; *) if [ "$_nu" -lt 200 ]; then UIDS="$UIDS $_u" _nu=$((_nu + 1)); fi ;; esac
			break
		fi
	done <"/proc/$_p/status" 2>/dev/null
done
users() {
	for _u in $UIDS; do
		name_of "$_u"
		[ -z "$_user" ] || printf '%s:x:%s\n' "$_user" "$_u"
	done
}
if [ -n "${UIDS# }" ]; then sec users 1048576 0 users; else nosec users 1048576 0; fi

# unitof CGROUP-PATH: set _u to the systemd unit a cgroup path names (its first component below
# the slices, when that is a .service or .scope, as systemd reads it) and _m to the uid of the user manager that runs it when the path lies below
# /user.slice/user-UID.slice/user@UID.service/ (else empty: a system unit). A process directly
# in user@UID.service is in that system unit. Fails when the path names no unit.
unitof() {
	_m= _u= _t=$1
	case $1 in
	/user.slice/user-*.slice/user@*.service/?*)
		_id=${1#/user.slice/user-}
		_id=${_id%%.slice/*}
		case $_id in
		'' | *[!0-9]* | 0?*) ;;
		*) case $1 in "/user.slice/user-$_id.slice/user@$_id.service/"?*) _m=$_id _t=${1#"/user.slice/user-$_id.slice/user@$_id.service"} ;; esac ;;
		esac
		;;
	esac
	_t=${_t#/}
	while [ -n "$_t" ]; do
		_c=${_t%%/*}
		case $_c in
		*.slice) ;;
		*.service | *.scope) _u=$_c && return 0 ;;
		*) break ;;
		esac
		case $_t in */*) _t=${_t#*/} ;; *) _t= ;; esac
	done
	[ -n "$_m" ] || return 1
	_u=user@$_m.service _m=
}

# systemd units named in those PIDs' cgroups: system units as "NAME", user units as
# "UID/NAME". Only names of systemd's unit-name characters are kept: they are passed as
# arguments, after --.
UNITS=
_nu=0
set -f
IFS=$NL
for _l in $CGS; do
	unset IFS
	_l=${_l#*/cgroup:}
	_l=${_l#*:}
	unitof "${_l#*:}" || continue
	case $_u in *[!A-Za-z0-9:_.@\\-]*) continue ;; esac
	[ "${#_u}" -le 255 ] || continue
	_k=$_u
	[ -z "$_m" ] || _k=$_m/$_u
	case "$UNITS " in *" $_k "*) continue ;; esac
	if [ "$_nu" -lt 200 ]; then UNITS="$UNITS $_k" _nu=$((_nu + 1)); fi
done
unset IFS
set +f
SYSUNITS=
USERUIDS=
for _k in $UNITS; do
	case $_k in
	*/*) case " $USERUIDS " in *" ${_k%%/*} "*) ;; *) USERUIDS="$USERUIDS ${_k%%/*}" ;; esac ;;
	*) SYSUNITS="$SYSUNITS $_k" ;;
	esac
done
PROPS=Id,LoadState,ActiveState,SubState,MainPID,Result
units() {
	# shellcheck disable=SC2086 # unit names checked above: no spaces, no globs
	t 15 systemctl show --no-pager -p $PROPS -- $SYSUNITS
}
if ! command -v systemctl >/dev/null 2>&1; then
	nosec units 1048576 127 "systemctl: not found"
elif [ -z "${SYSUNITS# }" ]; then
	nosec units 1048576 0
else
	sec units 1048576 0 units
fi

# The units of users' managers (systemd --user), asked of each user's manager when the probe
# runs as root: "UID RC BASE64" per uid, BASE64 the encoded output of systemctl --user show;
# RC "-" when not asked (not root, no name for the uid, no systemctl, or a manager already
# failed to answer in time: at most one such wait per probe).
userunits() {
	_late=
	for _id in $USERUIDS; do
		set --
		for _k in $UNITS; do
			case $_k in "$_id"/*) set -- "$@" "${_k#*/}" ;; esac
		done
		name_of "$_id"
		case $_user in '' | -* | *[!A-Za-z0-9_.-]*) _user= ;; esac
		if [ "$MYUID" != 0 ] || [ -z "$_user" ] || [ -n "$_late" ] || ! command -v systemctl >/dev/null 2>&1; then
			printf '%s -\n' "$_id"
			continue
		fi
		_o=$(t 10 systemctl --user --machine="$_user@" show --no-pager -p $PROPS -- "$@" 2>&1)
		_rc=$?
		case $_rc in 124 | 137) _late=1 ;; esac
		printf '%s %s ' "$_id" "$_rc"
		printf '%s' "$_o" | base64 | tr -d '\n'
		echo
	done
}
if [ -n "${USERUIDS# }" ]; then sec user-units 1048576 0 userunits; else nosec user-units 1048576 0; fi

sec shm-df 65536 10 df -kP /dev/shm
# Type, bytes, mtime, uid and path of everything under /dev/shm, NUL-terminated. find's
# complaints are dropped: they would land inside records (an unreadable directory still shows
# as find's exit status).
shmls() {
	t 20 find /dev/shm -xdev -maxdepth 8 -printf '%y\t%s\t%T@\t%U\t%p\0' 2>/dev/null
}
if [ -n "$HAVE_PRINTF" ]; then
	sec shm-ls 8388608 0 shmls
else
	nosec shm-ls 8388608 127 "find: no -printf (not GNU find)"
fi

# Who could have deleted each deleted /dev/shm file a process keeps: per file (at most 512, the
# GPU holders' first), "file PID PATH", PATH as the kernel names it through the process
# (readlink of /proc/PID/map_files/START-END or /proc/PID/fd/FD: any byte but NUL, no escapes;
# map_files is root's only), "owner UID" when the file could be read through the process, then
# the chain of its directories (CHAIN_FN). Each field is NUL-terminated. The files are found in
# the maps and fds sections; only their /proc sources travel as lines.
SHMDIRS=$(printf '%s\n@@next\n%s\n@@next\n%s\n' "$GPUP" "$MAPS" "$FDX" | awk '
$0 == "@@next" { part++; next }
part == 0 { gpu[$0] = 1; next }
part == 1 && /^\/proc\/[0-9]+\/maps:[0-9a-f]+-[0-9a-f]+ / && / \(deleted\)$/ {
	split($1, q, "[/:]"); pid = q[3]; src = "/proc/" pid "/map_files/" q[5]; p = substr($0, index($0, " /dev/shm/") + 1) }
part == 2 && /^\/proc\/[0-9]+\/fd\t[0-9]+\t\/dev\/shm\// && / \(deleted\)$/ {
	split($0, f, "\t"); split(f[1], q, "/"); pid = q[3]; src = f[1] "/" f[2]; p = f[3] }
part > 0 && pid != "" {
	if (!((pid, p) in seen)) { seen[pid, p] = 1; line = pid "\t" src; if (pid in gpu) a[na++] = line; else b[nb++] = line }
	pid = "" }
END { for (i = 0; i < na && n < 512; i++) { print a[i]; n++ } for (i = 0; i < nb && n < 512; i++) { print b[i]; n++ } }')
SHMDIRS_SCRIPT='
while IFS="	" read -r pid src; do
	p=$(readlink -- "$src" 2>/dev/null) || continue
	case $p in "/dev/shm/"*" (deleted)") p=${p% (deleted)} ;; *) continue ;; esac
	printf "file %s %s\000" "$pid" "$p"
	u=$(stat -L -c %u -- "$src" 2>/dev/null) && printf "owner %s\000" "$u"
	chain "/proc/$pid/root" "$p"
done
# A directory that is gone (stat exits 1) is left out: the reader treats the gap as unknown.
exit 0
'
shmdirs() {
	printf '%s\n' "$SHMDIRS" | t 10 sh -c "$CHAIN_FN$SHMDIRS_SCRIPT" sh 2>/dev/null
}
if [ -n "$SHMDIRS" ]; then sec shm-dirs 524288 0 shmdirs; else nosec shm-dirs 524288 0; fi

# Slurm: which job runs each described process, and what Slurm says of those jobs. A process
# in a Slurm cgroup names its job there (procs' cgroup lines); one without (proctrack/linuxproc
# or pgid) has a "slurmstepd: [JOB.STEP]" ancestor while its step runs. "ancestors": "PID PPID
# UID TAG" lines for the ancestors of the described processes that have no Slurm cgroup,
# walked through /proc/PID/status up to 32 deep and up to the first slurmstepd; TAG is that
# step, read from the command line of a root-owned process named slurmstepd (only root can
# make one: a user's process can take any name), or "-". Every field is the kernel's number or
# a checked job and step: no line a process controls.
ANC_SCRIPT='
st() {
	pp= u= nm=
	while read -r k v rest; do
		case $k in Name:) nm=$v ;; PPid:) pp=$v ;; Uid:) u=$v ;; esac
	done <"/proc/$1/status"
}
seen=" "
n=0
for p in "$@"; do
	insl=
	set -f
	IFS="
"
	for l in $(head -c 65536 "/proc/$p/cgroup"); do
		case $l in
		*:/user.slice/user-*.slice/user@*.service/*) ;;
		*/slurm*/job_[0-9]* | *slurmstepd.scope/job_[0-9]*) insl=1 ;;
		esac
	done
	unset IFS
	set +f
	[ -z "$insl" ] || continue
	st "$p"
	d=0
	while [ "$d" -lt 32 ] && [ "$n" -lt 4000 ]; do
		case $pp in "" | *[!0-9]* | 0) break ;; esac
		q=$pp
		case $seen in *" $q "*) break ;; esac
		st "$q"
		case $pp$u in "" | *[!0-9]*) break ;; esac
		seen="$seen$q "
		n=$((n + 1))
		d=$((d + 1))
		tag=-
		if [ "$u" = 0 ] && [ "$nm" = slurmstepd ]; then
			c=$(head -c 64 "/proc/$q/cmdline" | tr "\000" " ")
			case $c in "slurmstepd: ["*"]"*)
				c=${c#"slurmstepd: ["}
				c=${c%%"]"*}
				j=${c%%.*} s=${c#*.}
				case $j in "" | *[!0-9]*) ;; *) case $s in "" | *[!A-Za-z0-9_]*) ;; *) tag=$j.$s ;; esac ;; esac
				;;
			esac
		fi
		printf "%s %s %s %s\n" "$q" "$pp" "$u" "$tag"
		[ "$tag" = - ] || break
	done
done
'
ancestors() {
	# shellcheck disable=SC2086 # PIDS are digits
	t 10 sh -c "$ANC_SCRIPT" sh $PIDS 2>/dev/null
}
if [ -n "$PIDS" ]; then capsec ancestors 1048576 0 ancestors; else
	nosec ancestors 1048576 0
	OUT=
fi
ANC=$OUT

# The jobs to ask Slurm about: those the described processes' cgroups name (v1
# ".../slurm[_NODE]/uid_U/job_N/...", v2 "...slurmstepd.scope/job_N/...") and the ancestors'
# steps; digits only, at most 16. Below a user's manager the user names the cgroups: names
# there would only crowd out the real jobs.
JOBS=
_nj=0
addjob() {
	case $1 in '' | *[!0-9]*) return ;; esac
	[ "${#1}" -le 10 ] || return 0
	case " $JOBS " in *" $1 "*) return ;; esac
	if [ "$_nj" -lt 16 ]; then JOBS="$JOBS $1" _nj=$((_nj + 1)); fi
}
# The nodes whose generic resources (GRES) to ask Slurm about: those the same cgroups name (a
# host running several slurmd: v1 ".../slurm_NODE/...", v2 ".../NODE_slurmstepd.scope/..."),
# plain names (letters, digits, ".", "_", "-") of at most 64 bytes, at most 16.
NODES=
_nn=0
addnode() {
	case $1 in '' | -* | *[!A-Za-z0-9._-]*) return ;; esac
	[ "${#1}" -le 64 ] || return 0
	case " $NODES " in *" $1 "*) return ;; esac
	if [ "$_nn" -lt 16 ]; then NODES="$NODES $1" _nn=$((_nn + 1)); fi
}
set -f
IFS=$NL
for _l in $CGS; do
	unset IFS
	case $_l in
	*:/user.slice/user-*.slice/user@*.service/*) ;;
	*/slurm*/job_[0-9]* | *slurmstepd.scope/job_[0-9]*)
		_j=${_l##*/job_}
		addjob "${_j%%/*}"
		case $_l in
		*/slurm_*/uid_*/job_[0-9]*) _n=${_l#*/slurm_} && addnode "${_n%%/*}" ;;
		*_slurmstepd.scope/job_[0-9]*) _n=${_l%%_slurmstepd.scope/job_*} && addnode "${_n##*/}" ;;
		esac
		;;
	esac
done
unset IFS
set +f
for _l in $(printf '%s\n' "$ANC" | awk 'NF == 4 && $4 ~ /^[0-9]+\./ { split($4, f, "."); print f[1] }'); do addjob "$_l"; done

# slurmdnodes: without a node named by a cgroup, the nodes this host's slurmd serve: the
# "-N NAME" of each process of uid 0 named slurmd (its command line read NUL-separated, at
# most 256 bytes, a name cut there dropped), and the short host name, as slurmd takes it when
# it has no -N. Any user can name a process slurmd, and make it look root's (a non-dumpable
# process's /proc entry is root's, not its status): such a name only adds a question, never
# hides the host's own. The scan has 5 s: a command line is read under the process's memory
# lock, which its owner can hold.
SLURMD_SCRIPT='
for d in /proc/[0-9]*; do
	c= u=
	read -r c <"$d/comm" 2>/dev/null || continue
	[ "$c" = slurmd ] || continue
	while read -r k v rest; do case $k in Uid:) u=$v ;; esac; done <"$d/status" 2>/dev/null
	[ "$u" = 0 ] || continue
	head -c 256 "$d/cmdline" 2>/dev/null | tr "\000" "\n" | {
		p=
		while IFS= read -r a; do
			[ -z "$p" ] || echo "$a"
			p=
			case $a in -N) p=1 ;; -N?*) echo "${a#-N}" ;; esac
		done
	}
done
'
slurmdnodes() {
	for _n in $(t 5 sh -c "$SLURMD_SCRIPT" 2>/dev/null | head -c 4096); do addnode "$_n"; done
	_h=
	read -r _h </proc/sys/kernel/hostname 2>/dev/null
	addnode "${_h%%.*}"
}

# askslurm HEAD LIMIT ARG...: "HEAD RC BASE64", BASE64 the encoded output of scontrol ARG...
# (5 s, at most LIMIT bytes); "HEAD -" when Slurm already failed to answer in time or the
# section's 15 s are spent.
askslurm() {
	_h=$1 _lim=$2
	shift 2
	_now=$(date +%s 2>/dev/null)
	if [ -n "$_late" ] || [ $((${_now:-0} - ${_t0:-0})) -ge 15 ]; then
		printf '%s -\n' "$_h"
		return
	fi
	_o=$(t 5 scontrol "$@" 2>&1)
	_rc=$?
	case $_rc in 124 | 137) _late=1 ;; esac
	printf '%s %s ' "$_h" "$_rc"
	printf '%s' "$_o" | head -c "$_lim" | base64 | tr -d '\n'
	echo
}
# "tz +HHMM" (the zone scontrol writes its times in), then "JOB RC BASE64" per job: the output
# of `scontrol show job -d -o JOB` (at most 32 KiB: a job's name, comment and paths are its
# user's text, any bytes). Then "node NODE RC BASE64" per node this host serves (NODES, else
# slurmdnodes): `scontrol show node -o NODE` (at most 16 KiB), whose Gres says whether Slurm
# allocates GPUs there at all. Last, "timeouts KILLWAIT UNKILLABLE": Slurm's KillWait and
# UnkillableStepTimeout in seconds (scontrol show config, 5 s), each digits (at most 9) or "-"
# when unknown; how long a job may stay COMPLETING before its processes are leftovers; and
# "gres GRESTYPES CONSTRAINDEVICES TASKPLUGIN" from the same output: GresTypes and TaskPlugin
# (letters, digits and "_,/:()" only, at most 256 bytes), ConstrainDevices yes or no, each "-"
# when unknown: whether Slurm keeps a job's processes off the GPUs it was not allocated.
slurmjobs() {
	printf 'tz %s\n' "$(date +%z 2>/dev/null)"
	_late= _t0=$(date +%s 2>/dev/null)
	for _j in $JOBS; do askslurm "$_j" 32768 show job -d -o "$_j"; done
	[ -n "${NODES# }" ] || slurmdnodes
	for _n in $NODES; do askslurm "node $_n" 16384 show node -o "$_n"; done
	_kw= _us= _gt= _cd= _tp=
	_now=$(date +%s 2>/dev/null)
	if [ -z "$_late" ] && [ $((${_now:-0} - ${_t0:-0})) -lt 15 ]; then
		_o=$(t 5 scontrol show config 2>/dev/null | head -c 262144 |
			awk '$2 == "=" { v[$1] = $3 } function c(s) { gsub(/[^A-Za-z0-9_,\/:()]/, "?", s); return s }
			END { print c(v["KillWait"]) "|" c(v["UnkillableStepTimeout"]) "|" c(v["GresTypes"]) "|" c(v["ConstrainDevices"]) "|" c(v["TaskPlugin"]) }')
		_kw=${_o%%|*} _o=${_o#*|}
		_us=${_o%%|*} _o=${_o#*|}
		_gt=${_o%%|*} _o=${_o#*|}
		_cd=${_o%%|*} _tp=${_o#*|}
	fi
	case $_kw in '' | *[!0-9]* | ??????????*) _kw=- ;; esac
	case $_us in '' | *[!0-9]* | ??????????*) _us=- ;; esac
	printf 'timeouts %s %s\n' "$_kw" "$_us"
	case $_gt in '' | *[!A-Za-z0-9_,/:\(\)]*) _gt=- ;; esac
	case $_cd in yes | no) ;; *) _cd=- ;; esac
	case $_tp in '' | *[!A-Za-z0-9_,/:\(\)]*) _tp=- ;; esac
	[ "${#_gt}" -le 256 ] || _gt=-
	[ "${#_tp}" -le 256 ] || _tp=-
	printf 'gres %s %s %s\n' "$_gt" "$_cd" "$_tp"
}
if [ -z "${JOBS# }" ]; then
	nosec slurm 1048576 0
elif ! command -v scontrol >/dev/null 2>&1; then
	nosec slurm 1048576 127 "scontrol: not found"
else
	sec slurm 1048576 0 slurmjobs
fi

printf '@@gputriage %s done\n' "$N"
