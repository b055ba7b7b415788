// Package scenario builds real GPU-host situations on a machine without a GPU, for tests and
// for recording fixtures: a fake nvidia-smi that serves recorded query output, and real
// processes with realistic command lines that map real /dev/shm files (deleted ones too).
// Only /proc and /dev/shm are real; only nvidia-smi is pretend.
package scenario

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

//go:embed server.py
var serverPy string

// GPU is one row the fake nvidia-smi reports.
type GPU struct {
	Index       int
	UUID        string
	Name        string
	BusID       string
	TotalMiB    int64
	UsedMiB     int64
	FreeMiB     int64 // 0 means TotalMiB - UsedMiB - ReservedMiB
	ReservedMiB int64
	UtilPct     int
	Driver      string
	MIG         string // "Disabled" when empty
	Minor       *int   // minor_number (N of /dev/nvidiaN); the index when nil
}

// App is one process nvidia-smi knows: a compute-app row (--query-compute-apps lists the
// types with a C: C, C+G, M+C), and a block of nvidia-smi -q -d PIDS, which lists every type.
type App struct {
	PID     int
	GPUUUID string
	UsedMiB int64
	Name    string
	// Type is nvidia-smi's type: "C" when empty; "G" graphics, "C+G", "M+C" an MPS client.
	Type string
}

// SMI is what the fake nvidia-smi answers.
type SMI struct {
	GPUs []GPU
	Apps []App
	// Hang makes every call sleep for an hour (a wedged driver).
	Hang bool
	// FailText, when set, is printed instead of any answer, with exit status FailRC.
	FailText string
	FailRC   int
	// OldDriver rejects memory.reserved and mig.mode.current like drivers before they existed.
	OldDriver bool
	// Dynamic makes the answers follow the processes: an app row whose PID no longer exists
	// (in /proc as the caller sees it) is dropped at once, and ReleaseDelay after the fake
	// first noticed it gone (whole seconds, by date +%s) its memory leaves its GPU's used
	// memory and is added to free, as a driver tearing a context down after the process
	// exited. The first-noticed times are kept in gone.tsv beside the fake.
	Dynamic      bool
	ReleaseDelay time.Duration
}

const gpuHeader = "index\tuuid\tname\tpci.bus_id\tmemory.total [MiB]\tmemory.used [MiB]\tmemory.free [MiB]\tutilization.gpu [%]\tcompute_mode\tdriver_version\tmemory.reserved [MiB]\tmig.mode.current\tminor_number"
const appsHeader = "pid\tgpu_uuid\tused_memory [MiB]\tprocess_name\ttype"

// fakeSMI selects the requested fields from a tab-separated table beside it and prints them
// the way nvidia-smi --format=csv,nounits does: ", " between fields, units kept in the header.
const fakeSMI = `#!/bin/sh
# fake nvidia-smi written by gputriage's tests: serves recorded answers from files beside it.
d=$(dirname "$0")
if [ -f "$d/smi.hang" ]; then exec sleep 3600; fi
if [ -f "$d/smi.fail" ]; then cat "$d/smi.fail"; exit "$(cat "$d/smi.rc")"; fi
# follow writes into $1 the tables as the processes now are (Dynamic): rows of PIDs that are
# gone dropped, and their memory freed once smi.dynamic seconds have passed since first noticed.
follow() {
	now=$(date +%s)
	while IFS='	' read -r pid _; do
		case $pid in ''|*[!0-9]*) continue ;; esac
		if [ ! -d "/proc/$pid" ] && ! grep -q "^$pid	" "$d/gone.tsv" 2>/dev/null; then
			printf '%s\t%s\n' "$pid" "$now" >>"$d/gone.tsv"
		fi
	done <"$d/apps.tsv"
	touch "$d/gone.tsv"
	awk -v now="$now" -v delay="$(cat "$d/smi.dynamic")" -v out="$1" '
	BEGIN { FS = OFS = "\t" }
	FILENAME == ARGV[1] { if (!($1 in gone)) gone[$1] = $2; next }
	FILENAME == ARGV[2] {
		if (FNR > 1 && ($1 in gone)) { if (now - gone[$1] >= delay) freed[$2] += $3; next }
		print > (out "/apps.tsv"); next
	}
	FNR > 1 && ($2 in freed) { $6 -= freed[$2]; $7 += freed[$2] }
	{ print > (out "/gpu.tsv") }
	' "$d/gone.tsv" "$d/apps.tsv" "$d/gpu.tsv"
}
table= fields= q=
for a; do
	case $a in
	--query-gpu=*) table=$d/gpu.tsv fields=${a#*=} ;;
	--query-compute-apps=*) table=$d/apps.tsv fields=${a#*=} ;;
	-q) q=1 ;;
	esac
done
# pids writes nvidia-smi -q -d PIDS from the tables in $1: per GPU, its processes of every type.
pids() {
	printf '\n==============NVSMI LOG==============\n\nDriver Version                            : fake\n\n'
	awk '
	BEGIN { FS = "\t" }
	FILENAME == ARGV[1] { if (FNR > 1) { n[$2]++; row[$2, n[$2]] = $0 } next }
	FNR > 1 {
		printf "GPU %s\n", $4
		if (!n[$2]) { print "    Processes                             : None"; print ""; next }
		print "    Processes"
		for (i = 1; i <= n[$2]; i++) {
			split(row[$2, i], f, "\t")
			printf "        GPU instance ID                   : N/A\n        Compute instance ID               : N/A\n"
			printf "        Process ID                        : %s\n            Type                          : %s\n", f[1], f[5]
			printf "            Name                          : %s\n            Used GPU Memory               : %s MiB\n", f[4], f[3]
		}
		print ""
	}' "$1/apps.tsv" "$1/gpu.tsv"
}
if [ -n "$q" ]; then
	if [ -f "$d/smi.dynamic" ]; then
		tmp=$(mktemp -d) || exit 2
		follow "$tmp"
		pids "$tmp"
		rm -rf "$tmp"
		exit 0
	fi
	pids "$d"
	exit 0
fi
if [ -z "$table" ]; then echo "fake nvidia-smi: unsupported arguments: $*" >&2; exit 2; fi
noheader=
case "$*" in *noheader*) noheader=1 ;; esac
old=
if [ -f "$d/smi.old" ]; then old=1; fi
prog='
BEGIN { FS = "\t"; nf = split(fields, want, ",") }
NR == 1 {
	for (i = 1; i <= NF; i++) { h = $i; sub(/ \[.*\]$/, "", h); col[h] = i; head[i] = $i }
	for (j = 1; j <= nf; j++)
		if (!(want[j] in col) || (old && (want[j] == "memory.reserved" || want[j] == "mig.mode.current"))) {
			printf "Field \"%s\" is not a valid field to query.\n\n", want[j]
			exit 2
		}
	if (!noheader) { for (j = 1; j <= nf; j++) printf "%s%s", (j > 1 ? ", " : ""), head[col[want[j]]]; print "" }
	next
}
# --query-compute-apps lists only the processes with a compute context: not type G.
("type" in col) && $(col["type"]) !~ /C/ { next }
{ for (j = 1; j <= nf; j++) printf "%s%s", (j > 1 ? ", " : ""), $(col[want[j]]); print "" }
'
if [ -f "$d/smi.dynamic" ]; then
	tmp=$(mktemp -d) || exit 2
	follow "$tmp"
	case $table in */gpu.tsv) table=$tmp/gpu.tsv ;; *) table=$tmp/apps.tsv ;; esac
	awk -v fields="$fields" -v noheader="$noheader" -v old="$old" "$prog" "$table"
	rc=$?
	rm -rf "$tmp"
	exit $rc
fi
exec awk -v fields="$fields" -v noheader="$noheader" -v old="$old" "$prog" "$table"
`

// WriteFakeSMI writes an executable nvidia-smi into dir (put dir first on PATH) serving s.
func WriteFakeSMI(dir string, s SMI) error {
	var gpu, apps strings.Builder
	gpu.WriteString(gpuHeader + "\n")
	for _, g := range s.GPUs {
		free := g.FreeMiB
		if free == 0 {
			free = g.TotalMiB - g.UsedMiB - g.ReservedMiB
		}
		mig := g.MIG
		if mig == "" {
			mig = "Disabled"
		}
		minor := g.Index
		if g.Minor != nil {
			minor = *g.Minor
		}
		fmt.Fprintf(&gpu, "%d\t%s\t%s\t%s\t%d\t%d\t%d\t%d\tDefault\t%s\t%d\t%s\t%d\n",
			g.Index, g.UUID, g.Name, g.BusID, g.TotalMiB, g.UsedMiB, free, g.UtilPct, g.Driver, g.ReservedMiB, mig, minor)
	}
	apps.WriteString(appsHeader + "\n")
	for _, a := range s.Apps {
		typ := a.Type
		if typ == "" {
			typ = "C"
		}
		fmt.Fprintf(&apps, "%d\t%s\t%d\t%s\t%s\n", a.PID, a.GPUUUID, a.UsedMiB, a.Name, typ)
	}
	files := map[string]string{"nvidia-smi": fakeSMI, "gpu.tsv": gpu.String(), "apps.tsv": apps.String()}
	if s.Hang {
		files["smi.hang"] = ""
	}
	if s.FailText != "" {
		files["smi.fail"] = s.FailText
		files["smi.rc"] = strconv.Itoa(s.FailRC) + "\n"
	}
	if s.OldDriver {
		files["smi.old"] = ""
	}
	if s.Dynamic {
		files["smi.dynamic"] = strconv.FormatInt(int64(s.ReleaseDelay.Round(time.Second)/time.Second), 10) + "\n"
	}
	for name, body := range files {
		mode := os.FileMode(0o644)
		if name == "nvidia-smi" {
			mode = 0o755
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), mode); err != nil {
			return err
		}
	}
	return nil
}

// Server is a model-server-like process to start.
type Server struct {
	// Module is run as python3 -m Module, e.g. "sglang.launch_server"; a stand-in package of
	// that name is written to a temporary PYTHONPATH, so the command line is the real one.
	Module string
	Args   []string
	// ShmDir, if set, is created under /dev/shm with ShmFiles weight files of ShmBytes each,
	// all mapped; Delete removes the files afterwards (still mapped), as the server's own user,
	// and leaves the directory, which is the server's own.
	ShmDir   string
	ShmFiles int
	ShmBytes int64
	Delete   bool
	// Children spawns worker processes (multiprocessing spawn, like tensor-parallel ranks).
	Children int
	// Orphan detaches the server so that it is re-parented away from its starter, like a
	// leftover whose launcher exited.
	Orphan bool
	// WantPID asks the kernel for this PID (root only, with Orphan; best effort through
	// /proc/sys/kernel/ns_last_pid).
	WantPID int
	// Zombie makes the server fork a child that exits at once and is never reaped: Proc.Zombie
	// is its PID, a zombie (state Z) until the server exits.
	Zombie bool
	// IgnoreTerm makes the server ignore SIGTERM (signal.SIG_IGN), as a server stuck in its
	// shutdown does: only SIGKILL ends it.
	IgnoreTerm bool
	// Cgroup, when set, is a cgroup v2 directory (see MakeCgroup) the server starts in, so
	// /proc/PID/cgroup names the unit that directory's path ends in.
	Cgroup string
	// WorkerTitle is the process title each of the Children sets, %d its rank
	// ("VLLM::Worker_TP%d", "ray::RayWorkerWrapper"), as setproctitle does: the title alone
	// in /proc/PID/cmdline (NUL-padded) and as its name.
	WorkerTitle string
	// RankModule, when set, makes the server start Ranks children (one when 0) running
	// "python3 -m RankModule RankArgs..." with its interpreter: stand-in servers of their own,
	// like the ranks torchrun -m starts. Children lists them.
	RankModule string
	RankArgs   []string
	Ranks      int
	// ZombieLeader makes the server's main thread exit once it is ready while another thread
	// runs on: state Z, an empty command line, two threads (a zombie leader).
	ZombieLeader bool
	// Python is the interpreter; python3 on PATH when empty.
	Python string
	// Script, when set (e.g. "vllm"), runs the server as a console script of that name, as
	// pip's entry points are run: "PYTHON TMP/bin/SCRIPT ARGS..." (e.g. "vllm serve MODEL"), a
	// script in the server's temporary directory that runs Module.
	Script string
	// UID, when positive, runs the server as that uid and gid (root only), as an unprivileged
	// user's process: it joins Cgroup first, as a user's own delegated cgroup would have it.
	UID int
	// Enter, when set, is a command prefix that runs the server elsewhere, e.g.
	// nsenter -t PID -p -m -- to start it inside a test host's PID and mount namespaces.
	// Proc.PID is then the PID as that namespace sees it, and Stop does not signal it:
	// the namespace's end takes it down.
	Enter []string
}

// Proc is a started server.
type Proc struct {
	PID     int
	Zombie  int // the unreaped child's PID, with Server.Zombie
	cmd     *exec.Cmd
	exited  chan error // cmd's Wait
	tmp     string
	shmDir  string
	foreign bool // PID is in another PID namespace
}

// Start starts s and waits until its files are in place.
func Start(s Server) (*Proc, error) {
	if s.WantPID > 0 && !s.Orphan {
		return nil, errors.New("scenario: WantPID needs Orphan")
	}
	return start(s)
}

func start(s Server) (*Proc, error) {
	if s.Module == "" {
		return nil, errors.New("scenario: Server.Module is required")
	}
	tmp, err := os.MkdirTemp("", "gputriage-scenario-")
	if err != nil {
		return nil, err
	}
	p := &Proc{tmp: tmp, shmDir: s.ShmDir, foreign: len(s.Enter) > 0}
	if p.foreign {
		p.shmDir = "" // it lives in the other mount namespace's /dev/shm
	}
	for _, m := range []string{s.Module, s.RankModule} {
		if m == "" {
			continue
		}
		if err := WriteModule(tmp, m); err != nil {
			return nil, p.cleanup(err)
		}
	}
	python := s.python()
	ready := filepath.Join(tmp, "ready")
	argv := append([]string{python, "-m", s.Module}, s.Args...)
	if s.Script != "" {
		script, err := writeScript(tmp, s.Script, s.Module)
		if err != nil {
			return nil, p.cleanup(err)
		}
		argv = append([]string{python, script}, s.Args...)
	}
	if s.UID > 0 {
		if err := os.Chown(tmp, s.UID, s.UID); err != nil {
			return nil, p.cleanup(err)
		}
		id := strconv.Itoa(s.UID)
		argv = append([]string{"setpriv", "--reuid=" + id, "--regid=" + id, "--clear-groups", "--"}, argv...)
	}
	if s.Orphan {
		argv = append([]string{"setsid", "-f"}, argv...)
		if s.WantPID > 0 {
			// No thread or process may start between the write and setsid's fork, so the
			// write is done by the shell that then becomes setsid.
			argv = append([]string{"sh", "-c", `echo "$0" >/proc/sys/kernel/ns_last_pid; exec "$@"`,
				strconv.Itoa(s.WantPID - 1)}, argv...)
		}
	}
	if s.Cgroup != "" {
		// The shell joins the cgroup and then becomes the server (or setsid), so the server
		// and everything it starts run there.
		argv = append([]string{"sh", "-c", `echo $$ >"$0/cgroup.procs" && exec "$@"`, s.Cgroup}, argv...)
	}
	argv = append(append([]string(nil), s.Enter...), argv...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), s.Env(tmp, ready)...)
	if err := cmd.Start(); err != nil {
		return nil, p.cleanup(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if !s.Orphan && !p.foreign {
		p.cmd, p.exited = cmd, exited
	}
	if err := p.waitReady(s, ready, exited); err != nil {
		return nil, err
	}
	return p, nil
}

// readyGuard bounds the wait for a server's ready file. It asserts nothing of speed: it only
// keeps a broken start from hanging. A loaded machine takes seconds to start a Python that a
// quiet one starts at once.
const readyGuard = 2 * time.Minute

// waitReady waits until the server has written its ready file, or until what was started
// has failed: the server exited (or, with Orphan, setsid or Enter's command failed).
func (p *Proc) waitReady(s Server, ready string, exited chan error) error {
	var failed error // what was started has exited: one more look at the file, then this
	for deadline := time.Now().Add(readyGuard); ; {
		b, err := os.ReadFile(ready)
		if err == nil {
			pids := append(strings.Fields(string(b)), "")
			p.PID, err = strconv.Atoi(pids[0])
			if err == nil && len(pids) > 2 {
				p.Zombie, err = strconv.Atoi(pids[1])
			}
			if err != nil {
				return p.cleanup(err)
			}
			return nil
		}
		if failed != nil {
			return p.cleanup(failed)
		}
		if time.Now().After(deadline) {
			return p.cleanup(fmt.Errorf("scenario: %s did not become ready in %s", s.Module, readyGuard))
		}
		select {
		case err := <-exited:
			failed = fmt.Errorf("scenario: %s exited early (%v)", s.Module, err)
			if s.Orphan && err == nil {
				failed, exited = nil, nil // setsid -f exits once it has forked the server: wait on its file
			}
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Pause stops the server with SIGSTOP (state T), as Ctrl-Z or a debugger would; Stop still
// ends it.
func (p *Proc) Pause() error { return syscall.Kill(p.PID, syscall.SIGSTOP) }

// Stop kills the server and its workers and removes its files.
func (p *Proc) Stop() {
	if p.PID > 0 && !p.foreign {
		_ = syscall.Kill(p.PID, syscall.SIGTERM)
		_ = syscall.Kill(p.PID, syscall.SIGCONT) // a paused server acts on SIGTERM once continued
		for i := 0; i < 100 && alive(p.PID); i++ {
			time.Sleep(20 * time.Millisecond)
		}
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
	}
	if p.cmd != nil {
		<-p.exited
		p.cmd = nil
	}
	_ = p.cleanup(nil)
}

// Exited reports whether pid has exited (a zombie nobody reaped counts as exited), allowing
// the kernel up to within to finish a kill that was sent.
func Exited(pid int, within time.Duration) bool {
	for deadline := time.Now().Add(within); alive(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && !strings.HasPrefix(string(b[i:]), ") Z")
}

func (p *Proc) cleanup(err error) error {
	if p.shmDir != "" && strings.HasPrefix(p.shmDir, "/dev/shm/") {
		_ = os.RemoveAll(p.shmDir)
	}
	_ = os.RemoveAll(p.tmp)
	return err
}

// WorkerPIDs lists the spawned worker processes of pid (multiprocessing spawn children, not
// its resource tracker), in PID order.
func WorkerPIDs(pid int) []int {
	return children(pid, func(cmdline string) bool { return strings.Contains(cmdline, "spawn_main") })
}

// Children lists pid's child processes whose command line starts with prefix, in PID order.
func Children(pid int, prefix string) []int {
	return children(pid, func(cmdline string) bool { return strings.HasPrefix(cmdline, prefix) })
}

// children lists pid's child processes whose command line matches, in PID order.
func children(pid int, match func(cmdline string) bool) []int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", n))
		if match(string(cmdline)) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// WaitChildren is Children once pid has n of them (a worker shows its title only once it has
// set it), or what it has after readyGuard.
func WaitChildren(pid, n int, prefix string) []int {
	deadline := time.Now().Add(readyGuard)
	for {
		cs := Children(pid, prefix)
		if len(cs) >= n || time.Now().After(deadline) {
			return cs
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitWorkers is WorkerPIDs once pid has n workers (a spawned worker shows its spawn_main
// command line only once it has exec'd), or what it has after readyGuard.
func WaitWorkers(pid, n int) []int {
	deadline := time.Now().Add(readyGuard)
	for {
		ws := WorkerPIDs(pid)
		if len(ws) >= n || time.Now().After(deadline) {
			return ws
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// RunProbe runs the probe script as gputriage --local would (sh -s, the nonce on stdin), with smiDir
// first on PATH. A non-empty hostname runs it in a new UTS namespace with that host name
// (root only), so a fixture carries the name of the host it stands for.
func RunProbe(script, smiDir, hostname, nonce string) ([]byte, error) {
	argv := []string{"sh", "-s"}
	if hostname != "" {
		argv = append([]string{"unshare", "-u", "sh", "-c", `hostname "$1" && shift && exec "$@"`, "sh", hostname}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = strings.NewReader("set -- " + nonce + "\n" + script)
	cmd.Env = append(os.Environ(), "PATH="+smiDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("probe: %v: %s", err, stderr.String())
	}
	return out, nil
}
