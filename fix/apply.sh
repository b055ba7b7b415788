# gputriage fix: apply one host's targets. POSIX sh, run as `sh -s` (or under sudo -n) with a
# first line `set -- NONCE PLAN BOOT MODE WAIT KILLAFTER` (both in centiseconds) followed by seven words per target:
# KIND PID TICKS UID SHA STOPPED NAME. Every word is checked here again, whatever the client
# checked: digits, lower-case hex, or a name of [A-Za-z0-9@._:-] ("-" for none). No word is
# ever part of shell text: each is a variable, quoted, after "--" where a command takes names.
#
# For each target, immediately before it is signalled: the boot id, the PID's start time
# (field 22 of stat), its real uid and the SHA-256 of its cmdline must be those of the plan,
# and it must not be PID 1, a kernel thread, sshd, this script or one of its ancestors, or in
# this script's session. Anything else is refused and reported. The start time is read again
# with a shell builtin right before kill: what remains is the window between that read and the
# kill(2) of the builtin, in which the PID would have to exit and be reused.
#
# No read of another process waits without bound. stat, status, comm and cgroup are the
# kernel's own records, read with builtins. cmdline is copied out of the process's memory,
# which its owner controls: pointed (prctl PR_SET_MM_MAP, no privilege needed) at a terabyte of
# untouched pages, or behind a lock the owner holds, it reads for hours. Each such read runs in
# the background into a private directory, /tmp/gputriage-fix.NONCE.PID, and is waited for at
# most 2 s: then it is killed, left behind unwaited (a read stuck in the kernel dies when the
# kernel lets it) and the target refused (argv-read-timeout), and the next target checked.
# Without such a directory nothing is read unbounded: the target is refused (no-tempdir).
#
# Output: at once after acting on each target, "NONCE acted INDEX PID signalled|refused
# DETAIL", so that a session cut during the watch still says what was done; then one line per
# target, "NONCE result INDEX PID OUTCOME DETAIL SIGNAL_CS EXIT_CS RELEASE_CS", the times in
# centiseconds since the script started ("-" when none), and one "NONCE done" line at the end. MODE 1 sends SIGTERM (with SIGCONT to a stopped process),
# watches for up to WAIT and, when KILLAFTER is not 0, sends SIGKILL to what is still running
# KILLAFTER after SIGTERM; MODE 2 sends SIGKILL at once, to the PID whatever the kind (the
# operator asked for it after a MODE 1 run left targets running).
LC_ALL=C
export LC_ALL
set -f
nonce=$1 plan=$2 boot=$3 mode=$4 wait=$5 killafter=$6
shift 6
isnum() { case $1 in '' | *[!0-9]*) return 1 ;; esac; [ ${#1} -le 20 ]; }
ishex() { case $1 in '' | *[!0-9a-f]*) return 1 ;; esac; }
isname() { case $1 in '' | *[!A-Za-z0-9@._:-]*) return 1 ;; esac; }
isstep() { case $1 in '' | *[!A-Za-z0-9_]*) return 1 ;; esac; }
bad() { printf '%s bad-input %s\n' "$nonce" "$1"; exit 2; }
ishex "$nonce" || bad nonce
ishex "$plan" || bad plan
ishex "$boot" || bad boot
case $mode in 1 | 2) ;; *) bad mode ;; esac
isnum "$wait" || bad wait
isnum "$killafter" || bad killafter
[ $(($# % 7)) -eq 0 ] || bad count
[ $# -gt 0 ] || bad count

now_cs() {
	read -r _u _rest </proc/uptime
	_s=${_u%.*} _f=${_u#*.}
	now=$((_s * 100 + ${_f#0}))
}
now_cs
t0=$now
since() { now_cs; echo $((now - t0)); }
me=$(id -un 2>/dev/null)

# The private directory of the bounded reads, removed at exit; none when it cannot be made.
tmpd=
for _d in /tmp /var/tmp; do
	if mkdir -m 700 -- "$_d/gputriage-fix.$nonce.$$" 2>/dev/null; then
		tmpd=$_d/gputriage-fix.$nonce.$$
		break
	fi
done
trap '[ -z "$tmpd" ] || rm -rf -- "$tmpd"' EXIT
trap 'exit 1' HUP INT PIPE TERM
tick=0.01
[ -z "$tmpd" ] || sleep $tick 2>/dev/null || tick=1
nread=0

# bounded PID FILE CMD...: run CMD with standard input /proc/PID/FILE and standard output
# $bo, a new file in $tmpd, for at most 2 s. It returns 0 when CMD ended with status 0, 1 when
# it ended otherwise (its status in _rc: 2 when FILE could not be opened, 127 when there is no
# CMD), 2 when it did not end in time (it is then killed and never waited for), 3 without $tmpd.
# CMD runs below a wrapper that waits for it and writes its status to $bo.rc; asked to stop,
# the wrapper kills CMD, its child not yet reaped, so the PID is still CMD's. The wrapper itself
# is told to stop only while it is this script's child of the same start time.
bounded() {
	[ -n "$tmpd" ] || return 3
	nread=$((nread + 1))
	bo=$tmpd/out.$nread _bp=$1 _bf=$2 _rc=
	shift 2
	{
		_c=
		trap '[ -z "$_c" ] || kill -s KILL "$_c" 2>/dev/null; exit 1' TERM
		"$@" <"/proc/$_bp/$_bf" >"$bo" 2>/dev/null &
		_c=$!
		wait "$_c"
		_s=$?
		_c=
		echo "$_s" >"$bo.rc"
	} </dev/null >/dev/null 2>&1 &
	_w=$!
	stat_of "$_w"
	_wt=$st_ticks
	now_cs
	_end=$((now + 200))
	until read -r _rc 2>/dev/null <"$bo.rc"; do
		now_cs
		if [ "$now" -ge "$_end" ]; then
			stat_of "$_w" && [ "$st_ticks" = "$_wt" ] && [ "$st_ppid" = "$$" ] && kill -s TERM "$_w" 2>/dev/null
			return 2
		fi
		sleep $tick 2>/dev/null
	done
	wait "$_w" 2>/dev/null
	[ "$_rc" = 0 ] || return 1
}

# argv_sha PID: _h, the SHA-256 of PID's /proc/PID/cmdline, read within bounded's 2 s; else
# why says why there is none.
argv_sha() {
	_h=
	bounded "$1" cmdline sha256sum
	case $? in
	0) read -r _h _rest <"$bo" ;;
	2) why=argv-read-timeout ;;
	3) why=no-tempdir ;;
	*) if [ "$_rc" = 127 ]; then why=no-sha256sum; elif ! stat_of "$1"; then why=gone; else why=argv-unreadable; fi ;;
	esac
	if [ -z "$why" ] && ! ishex "$_h"; then why=argv-unreadable; fi
}

# stat_of PID: set st_state, st_ppid, st_sid, st_flags, st_ticks from /proc/PID/stat with
# builtins only; return 1 when the process is gone. comm may hold spaces and ")": the fields
# are what follows the last ")".
stat_of() {
	_l=
	read -r _l <"/proc/$1/stat" 2>/dev/null || return 1
	[ -n "$_l" ] || return 1
	stat_fields ${_l##*)}
}
stat_fields() {
	st_state=$1 st_ppid=$2 st_sid=$4 st_flags=$7 st_ticks=${20}
}

# Ancestors of this script and its session: never signalled.
stat_of $$
mysid=$st_sid
anc=" $$ "
_p=$st_ppid
while [ -n "$_p" ] && [ "$_p" -gt 1 ] && stat_of "$_p"; do
	anc="$anc$_p "
	_p=$st_ppid
done

bootnow() {
	_b=
	IFS=- read -r _a _b2 _c _d _e </proc/sys/kernel/random/boot_id 2>/dev/null
	_b=$_a$_b2$_c$_d$_e
}

# check I: the identity of target I, now; sets why to the refusal, or empty.
check() {
	eval "_pid=\$pid_$1 _ticks=\$ticks_$1 _uid=\$uid_$1 _sha=\$sha_$1"
	why=
	bootnow
	if [ "$_b" != "$boot" ]; then why=boot-id-differs; return; fi
	if [ "$_pid" -le 1 ]; then why=pid-1; return; fi
	case $anc in *" $_pid "*) why=own-session; return ;; esac
	if ! stat_of "$_pid"; then why=gone; return; fi
	_state=$st_state
	if [ "$st_ticks" != "$_ticks" ]; then why=start-time-differs; return; fi
	if [ "$st_sid" = "$mysid" ]; then why=own-session; return; fi
	if [ $((st_flags & 2097152)) -ne 0 ]; then why=kernel-thread; return; fi
	_comm=
	read -r _comm <"/proc/$_pid/comm" 2>/dev/null
	case $_comm in sshd*) why=sshd; return ;; esac
	_u=
	while read -r _k _v _rest; do
		if [ "$_k" = Uid: ]; then _u=$_v && break; fi
	done <"/proc/$_pid/status" 2>/dev/null
	if [ "$_u" != "$_uid" ]; then why=uid-differs; return; fi
	argv_sha "$_pid"
	if [ -n "$why" ]; then return; fi
	if [ "$_h" = e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 ]; then why=kernel-thread; return; fi
	if [ "$_h" != "$_sha" ]; then why=argv-differs; return; fi
	if [ "$_state" = Z ]; then why=zombie; return; fi
	if [ "$_state" = D ]; then why=uninterruptible; return; fi
}

# ingroup I: the process's cgroup names target I's unit or container; for a job, injob.
ingroup() {
	eval "_pid=\$pid_$1 _kind=\$kind_$1 _name=\$name_$1"
	if [ "$_kind" = 6 ]; then
		injob "$_pid" "$_name"
		return
	fi
	while IFS= read -r _l; do
		case $_kind in
		2) case $_l in */"$_name" | */"$_name"/*) return 0 ;; esac ;;
		3 | 4 | 5) case $_l in *"$_name"*) return 0 ;; esac ;;
		esac
	done 2>/dev/null <"/proc/$_pid/cgroup"
	return 1
}

# injob PID JOB: PID runs in Slurm job JOB, by the evidence the probe ties it with: a Slurm
# cgroup (v1 .../slurm[_NODE]/uid_U/job_N/..., v2 ...slurmstepd.scope/job_N/...; never one
# below a user's manager, where the user names the cgroups, nor below another unit, whose
# cgroups are that unit's own), or where it has none (process
# tracking without cgroups) its nearest ancestor that is a root-owned slurmstepd whose
# command line is "slurmstepd: [JOB.STEP]", at most 32 up.
injob() {
	_insl=
	while IFS= read -r _l; do
		case $_l in
		*:/user.slice/user-*.slice/user@*.service/*) ;;
		*.service/*slurm* | *.scope/*slurm*) ;;
		*/slurm*/job_"$2" | */slurm*/job_"$2"/* | *slurmstepd.scope/job_"$2" | *slurmstepd.scope/job_"$2"/*) return 0 ;;
		*/slurm*/job_[0-9]* | *slurmstepd.scope/job_[0-9]*) _insl=1 ;;
		esac
	done 2>/dev/null <"/proc/$1/cgroup"
	[ -z "$_insl" ] || return 1
	status_of "$1" || return 1
	_d=0
	while [ "$_d" -lt 32 ]; do
		case $_pp in '' | *[!0-9]* | 0) return 1 ;; esac
		_q=$_pp
		status_of "$_q" || return 1
		if [ "$_u" = 0 ] && [ "$_nm" = slurmstepd ]; then
			# Its command line, bounded as any read of a process's memory: unread, no evidence.
			bounded "$_q" cmdline head -c 64 || return 1
			_c=$(tr '\000' ' ' <"$bo")
			case $_c in "slurmstepd: ["*"]"*)
				_c=${_c#"slurmstepd: ["}
				_c=${_c%%"]"*}
				_j=${_c%%.*} _s=${_c#*.}
				if isnum "$_j" && isstep "$_s"; then
					[ "$_j" = "$2" ]
					return
				fi
				;;
			esac
		fi
		_d=$((_d + 1))
	done
	return 1
}

# status_of PID: set _nm, _pp, _u (name, parent, real uid) from /proc/PID/status.
status_of() {
	_nm= _pp= _u=
	while read -r _k _v _rest; do
		case $_k in Name:) _nm=$_v ;; PPid:) _pp=$_v ;; Uid:) _u=$_v ;; esac
	done 2>/dev/null <"/proc/$1/status"
	[ -n "$_pp" ]
}

# alive I: target I's process still runs (not exited, not reaped and reused).
alive() {
	eval "_pid=\$pid_$1 _ticks=\$ticks_$1"
	stat_of "$_pid" && [ "$st_ticks" = "$_ticks" ] && [ "$st_state" != Z ] && [ "$st_state" != X ]
}

log() {
	command -v logger >/dev/null 2>&1 || return 0
	logger -t gputriage -- "fix plan=$plan pid=$1 kind=$2 name=$3 outcome=$4 detail=$5 user=$me sudo_user=${SUDO_USER:--}" 2>/dev/null
}

# act I: check target I, then signal it or run its stop command at once.
act() {
	check "$1"
	eval "_pid=\$pid_$1 _kind=\$kind_$1 _name=\$name_$1 _stopped=\$stopped_$1"
	if [ -z "$why" ] && [ "$_kind" != 1 ] && ! ingroup "$1"; then why=not-in-$(kindword "$_kind"); fi
	if [ -n "$why" ]; then
		outcome=refused detail=$why
		return
	fi
	outcome=signalled detail=-
	sig=TERM
	[ "$mode" = 2 ] && sig=KILL
	# MODE 2 is SIGKILL to the PID whatever the kind, as at KILLAFTER: the stop command has run.
	case $_kind$mode in
	1? | ?2)
		# The last look, a builtin read, right before kill.
		if stat_of "$_pid" && [ "$st_ticks" = "$_ticks" ]; then
			if kill -s "$sig" "$_pid" 2>/dev/null; then
				[ "$_stopped" = 1 ] && [ $sig = TERM ] && kill -s CONT "$_pid" 2>/dev/null
			elif [ -d "/proc/$_pid" ]; then
				outcome=refused detail=permission
			else
				outcome=refused detail=gone
			fi
		else
			outcome=refused detail=start-time-differs
		fi
		;;
	*) run_stop "$_kind" "$_name" ;;
	esac
}

kindword() {
	case $1 in 1) echo kill ;; 2) echo unit ;; 3 | 4 | 5) echo container ;; 6) echo job ;; esac
}

# run_stop KIND NAME: the stop command of a unit, container or job, by fixed argv.
run_stop() {
	_rc=0
	case $1 in
	2) systemctl stop --no-block -- "$2" >/dev/null 2>&1 || _rc=$? ;;
	3) docker stop -- "$2" >/dev/null 2>&1 || _rc=$? ;;
	4) podman stop -- "$2" >/dev/null 2>&1 || _rc=$? ;;
	5) crictl stop -- "$2" >/dev/null 2>&1 || _rc=$? ;;
	6) scancel -- "$2" >/dev/null 2>&1 || _rc=$? ;;
	esac
	if [ "$_rc" -ne 0 ]; then outcome=refused detail=command-exit-$_rc; fi
}

# Read and check the targets.
n=0
while [ $# -gt 0 ]; do
	isnum "$1" && isnum "$2" && isnum "$3" && isnum "$4" && ishex "$5" && isnum "$6" && isname "$7" || bad "target-$n"
	case $1 in 1 | 2 | 3 | 4 | 5 | 6) ;; *) bad "target-$n" ;; esac
	eval "kind_$n=\$1 pid_$n=\$2 ticks_$n=\$3 uid_$n=\$4 sha_$n=\$5 stopped_$n=\$6 name_$n=\$7"
	eval "sig_$n=- exit_$n=- rel_$n=- out_$n=- det_$n=-"
	n=$((n + 1))
	shift 7
done

i=0
while [ $i -lt $n ]; do
	act $i
	eval "out_$i=\$outcome det_$i=\$detail _p=\$pid_$i"
	[ "$outcome" = signalled ] && eval "sig_$i=$(since)"
	printf '%s acted %s %s %s %s\n' "$nonce" "$i" "$_p" "$outcome" "$detail"
	i=$((i + 1))
done

SMI=$(command -v nvidia-smi 2>/dev/null)
held() { # held PID: nvidia-smi still lists PID as a compute app
	[ -n "$SMI" ] || return 1
	"$SMI" --query-compute-apps=pid --format=csv,noheader 2>/dev/null | while IFS=' ,' read -r _p _rest; do
		[ "$_p" = "$1" ] && echo y && break
	done | grep -q y
}

# Watch: until every signalled target has exited and nvidia-smi no longer lists it, or WAIT
# centiseconds; SIGKILL at KILLAFTER to what still runs.
deadline=$((t0 + wait))
killed=
while :; do
	pending=0
	i=0
	while [ $i -lt $n ]; do
		eval "_o=\$out_$i _x=\$exit_$i _r=\$rel_$i _pid=\$pid_$i"
		if [ "$_o" = signalled ]; then
			if [ "$_x" = - ] && ! alive $i; then eval "exit_$i=$(since)"; _x=x; fi
			if [ "$_x" != - ] && [ "$_r" = - ] && ! held "$_pid"; then eval "rel_$i=$(since)"; _r=x; fi
			[ "$_r" = - ] && pending=$((pending + 1))
		fi
		i=$((i + 1))
	done
	now_cs
	[ $pending -eq 0 ] && break
	[ $now -ge $deadline ] && break
	if [ -z "$killed" ] && [ "$killafter" -gt 0 ] && [ "$mode" = 1 ] && [ $now -ge $((t0 + killafter)) ]; then
		killed=1
		i=0
		while [ $i -lt $n ]; do
			eval "_o=\$out_$i _x=\$exit_$i _pid=\$pid_$i _kind=\$kind_$i"
			if [ "$_o" = signalled ] && [ "$_x" = - ] && alive $i; then
				kill -s KILL "$_pid" 2>/dev/null && eval "det_$i=sigkill"
			fi
			i=$((i + 1))
		done
	fi
	sleep 0.2 2>/dev/null || sleep 1
done

i=0
while [ $i -lt $n ]; do
	eval "_o=\$out_$i _d=\$det_$i _s=\$sig_$i _x=\$exit_$i _r=\$rel_$i _pid=\$pid_$i _kind=\$kind_$i _name=\$name_$i"
	if [ "$_o" = signalled ]; then
		if [ "$_x" = - ]; then
			_o=still-running
		elif [ "$_r" = - ]; then
			_o=memory-held
		else
			_o=stopped
		fi
	fi
	log "$_pid" "$_kind" "$_name" "$_o" "$_d"
	printf '%s result %s %s %s %s %s %s %s\n' "$nonce" "$i" "$_pid" "$_o" "$_d" "$_s" "$_x" "$_r"
	i=$((i + 1))
done
printf '%s done\n' "$nonce"
