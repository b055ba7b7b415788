package scenario

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The rest of a host that processes are attributed to: real cgroups, so /proc/PID/cgroup
// names a unit exactly as systemd's would, and a fake systemctl that answers for the system
// manager and for users' managers the way systemctl show does.

// CgroupV2Root is where the tests' cgroup trees live: the unified hierarchy, mounted on its own
// or beside the v1 controllers.
func CgroupV2Root() (string, error) {
	for _, d := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		if _, err := os.Stat(filepath.Join(d, "cgroup.procs")); err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil && strings.Contains(string(b), " "+d+" ") && strings.Contains(string(b), "cgroup2") {
			return d, nil
		}
	}
	return "", errors.New("scenario: no cgroup v2 hierarchy mounted")
}

// MakeCgroup creates the cgroup rel (e.g. "gt-x/system.slice/vllm.service") below root and
// returns its directory. Remove the tree with RemoveCgroups once its processes have exited.
func MakeCgroup(root, rel string) (string, error) {
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("scenario: cgroup %q is not below the root", rel)
	}
	dir := filepath.Join(root, rel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("scenario: cgroup %s: %w", rel, err)
	}
	return dir, nil
}

// MakePodCgroup creates the cgroup of a pod's container where the kubelet's systemd driver
// and containerd put it, at the root of the hierarchy (only there is a pod believed:
// parse's kubeletRooted): kubepods.slice/kubepods-besteffort.slice/
// kubepods-besteffort-pod<uid>.slice/cri-containerd-<id>.scope. It returns the directory and
// a cleanup that removes the pod's slice, and the kubelet's slices above it when empty.
func MakePodCgroup(root, uid, containerID string) (dir string, cleanup func(), err error) {
	qos := filepath.Join(root, "kubepods.slice", "kubepods-besteffort.slice")
	pod := "kubepods-besteffort-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice"
	dir, err = MakeCgroup(root, filepath.Join("kubepods.slice", "kubepods-besteffort.slice", pod, "cri-containerd-"+containerID+".scope"))
	if err != nil {
		return "", func() {}, err
	}
	return dir, func() {
		RemoveCgroups(filepath.Join(qos, pod))
		_ = os.Remove(qos) // only when no other test's pod is there
		_ = os.Remove(filepath.Dir(qos))
	}, nil
}

// RemoveCgroups removes the cgroup tree at dir, deepest first. The kernel refuses while a
// cgroup still has processes, and a signalled process takes a moment to exit, so it retries
// for up to five seconds.
func RemoveCgroups(dir string) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		var dirs []string
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = os.Remove(dirs[i])
		}
		if _, err := os.Stat(dir); os.IsNotExist(err) || time.Now().After(deadline) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Unit is one unit the fake systemctl knows.
type Unit struct {
	Name string
	// UserUID is nil for a unit of the system manager, else the uid whose systemd --user
	// manager runs it (systemctl --user --machine=USER@ show).
	UserUID     *int
	LoadState   string // "loaded" when empty
	ActiveState string
	SubState    string
	MainPID     int
	Result      string // "success" when empty
}

// fakeSystemctl answers `systemctl [--user] [--machine=USER@|-M USER@] show ... -- UNIT...`
// from units.tsv beside it; a unit it does not know gets what real systemctl prints for one:
// LoadState=not-found, ActiveState=inactive.
const fakeSystemctl = `#!/bin/sh
# fake systemctl written by gputriage's tests: serves recorded unit states.
d=$(dirname "$0")
scope=system user= machine= verb=
while [ $# -gt 0 ]; do
	case $1 in
	--user) user=1 ;;
	--machine=*) machine=${1#--machine=} ;;
	-M) shift; machine=$1 ;;
	--) shift; break ;;
	-p | -P | --property) shift ;;
	-*) ;;
	show) verb=show ;;
	*) [ -n "$verb" ] && break ;;
	esac
	shift
done
if [ "$verb" != show ]; then echo "fake systemctl: only show is supported" >&2; exit 1; fi
if [ -n "$user" ]; then
	who=${machine%%@*}
	case $who in
	'') scope=$(id -u) ;;
	*[!0-9]*) scope=$(id -u -- "$who" 2>/dev/null) || { echo "Failed to connect to user scope bus via machine transport: No such user" >&2; exit 1; } ;;
	*) scope=$who ;;
	esac
fi
first=1
for u; do
	[ -n "$first" ] || echo
	first=
	awk -F '\t' -v scope="$scope" -v u="$u" '
	$1 == scope && $2 == u { printf "Id=%s\nLoadState=%s\nActiveState=%s\nSubState=%s\nMainPID=%s\nResult=%s\n", $2, $3, $4, $5, $6, $7; found = 1; exit }
	END { if (!found) printf "Id=%s\nLoadState=not-found\nActiveState=inactive\nSubState=dead\nMainPID=0\nResult=success\n", u }
	' "$d/units.tsv"
done
`

// WriteFakeSystemctl writes an executable systemctl into dir (put dir first on PATH; RunProbe
// does so for the nvidia-smi directory) that knows units.
func WriteFakeSystemctl(dir string, units []Unit) error {
	var tsv strings.Builder
	for _, u := range units {
		scope := "system"
		if u.UserUID != nil {
			scope = strconv.Itoa(*u.UserUID)
		}
		load, result := u.LoadState, u.Result
		if load == "" {
			load = "loaded"
		}
		if result == "" {
			result = "success"
		}
		fmt.Fprintf(&tsv, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", scope, u.Name, load, u.ActiveState, u.SubState, u.MainPID, result)
	}
	if err := os.WriteFile(filepath.Join(dir, "units.tsv"), []byte(tsv.String()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "systemctl"), []byte(fakeSystemctl), 0o755)
}
