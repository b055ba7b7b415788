package parse

import (
	"slices"
	"strconv"
	"strings"
)

// ParseCgroup reads /proc/PID/cgroup (v1, v2 or hybrid) and says who started the process:
// its systemd unit, container, Kubernetes pod and Slurm job and step. Path is the unified
// ("0::") path when it is not "/", else the name=systemd path, else the first path that is
// not "/". Unit comes from Path; the container, pod and Slurm job come from Path or, failing
// that, from any line, since on a hybrid host a container's v1 lines name it while its "0::"
// line names the daemon's service. Lines it cannot read are skipped.
func ParseCgroup(text string) Cgroup {
	var c Cgroup
	var unified, systemd, firstOther string
	for _, l := range splitLines([]byte(text)) {
		idText, rest, ok1 := strings.Cut(l, ":")
		ctl, path, ok2 := strings.Cut(rest, ":")
		id, err := strconv.Atoi(idText)
		if !ok1 || !ok2 || err != nil || id < 0 || !strings.HasPrefix(path, "/") {
			continue
		}
		line := CgroupLine{HierarchyID: id, Path: path}
		if ctl != "" {
			line.Controllers = strings.Split(ctl, ",")
		}
		c.Lines = append(c.Lines, line)
		switch {
		case id == 0 && ctl == "":
			if unified == "" {
				unified = path
			}
		case ctl == "name=systemd" && path != "/":
			if systemd == "" {
				systemd = path
			}
		case path != "/" && firstOther == "":
			firstOther = path
		}
	}
	switch {
	case unified != "" && unified != "/":
		c.Path = unified
	case systemd != "":
		c.Path = systemd
	case firstOther != "":
		c.Path = firstOther
	case len(c.Lines) > 0:
		c.Path = "/"
	}
	c.Unit, c.UserManagerUID = cgroupUnit(fromTop(c.Path))
	// Slurm's cgroup/v1 plugin tracks a job's processes in the freezer hierarchy
	// (proctrack/cgroup signals the job through it), so the freezer line names the job first;
	// the other controllers it uses (memory, cpuset, devices) may lag behind a process moved
	// out of the job.
	var paths []string
	for _, l := range c.Lines {
		if slices.Contains(l.Controllers, "freezer") {
			paths = append(paths, l.Path)
		}
	}
	paths = append(paths, c.Path)
	for _, l := range c.Lines {
		paths = append(paths, l.Path)
	}
	for _, p := range paths {
		// Below a user's manager the user names the cgroups (systemd delegates that subtree):
		// a "docker-<id>.scope", "slurm/job_N" or "kubepods/pod<uid>" there names nothing the
		// user does not own, and must not make a command stop someone else's container or job.
		if _, ok := userSubtree(fromTop(p)); ok {
			continue
		}
		if c.ContainerID == "" {
			c.ContainerID, c.Runtime = cgroupContainer(p)
		}
		if c.PodUID == "" {
			c.PodUID = cgroupPod(p)
		}
		if c.SlurmJob == "" {
			c.SlurmJob, c.SlurmStep, c.SlurmNode = cgroupSlurm(p)
		}
	}
	return c
}

// cgroupUnit returns the unit a cgroup path lies in (its first component below the slices,
// when that is a .service or .scope, as systemd's cg_path_get_unit reads it), and the uid of
// the user manager that runs it when the path lies below the user's delegated subtree (see
// userSubtree; below it the user names the cgroups, so a "user@0.service" deeper down is the
// name of one of the user's own units).
// A process directly in user@UID.service (cgroup v1), or below it in no unit of its own, is in
// the system unit user@UID.service: uid nil.
func cgroupUnit(path string) (unit string, userManager *int) {
	parts := strings.Split(path, "/")
	from := 0
	uid, inUser := userSubtree(path)
	if inUser {
		from, userManager = 4, &uid
	}
	// As systemd's cg_path_get_unit: the unit is the first component below the slices.
	// Everything under a unit's cgroup is that unit's own (a delegated service, a container
	// with its own systemd), so a "sshd.service" created down there names no unit of this
	// host's managers.
	for _, p := range parts[from:] {
		if p == "" || strings.HasSuffix(p, ".slice") {
			continue
		}
		if strings.HasSuffix(p, ".service") || strings.HasSuffix(p, ".scope") {
			return p, userManager
		}
		break
	}
	if userManager != nil {
		return parts[3], nil
	}
	return "", nil
}

// userSubtree reports whether a cgroup path lies at or below
// /user.slice/user-UID.slice/user@UID.service (systemd's fixed place for user UID's manager,
// whose subtree is delegated to the user), and UID.
func userSubtree(path string) (uid int, ok bool) {
	parts := strings.SplitN(path, "/", 5)
	if len(parts) < 4 || parts[0] != "" || parts[1] != "user.slice" {
		return 0, false
	}
	id, ok1 := strings.CutPrefix(parts[2], "user-")
	id, ok2 := strings.CutSuffix(id, ".slice")
	n, ok3 := atoiNonNeg(id)
	if !ok1 || !ok2 || !ok3 || parts[3] != "user@"+id+".service" || strconv.Itoa(n) != id {
		return 0, false
	}
	return n, true
}

// scopeRuntimes are the systemd scopes container runtimes create: PREFIX<id>.scope.
var scopeRuntimes = []struct{ prefix, runtime string }{
	{"docker-", "docker"},
	{"cri-containerd-", "containerd"},
	{"crio-", "cri-o"},
	{"libpod-", "podman"},
}

// cgroupContainer finds a container id in a cgroup path: a runtime's systemd scope, a v1
// (cgroupfs driver) /docker/<id> or /kubepods/.../pod<uid>/<id>, or an lxc container. The
// outermost one names it, and none below another unit: as systemd has it, everything under a
// unit's cgroup is that unit's own, so whoever may write there (a privileged container, a
// delegated service) cannot make a "docker-<id>.scope" of theirs name someone else's
// container.
func cgroupContainer(path string) (id, runtime string) {
	parts := strings.Split(path, "/")
	top := topIndex(parts)
	// Only root makes a slice, and systemd makes the runtimes' scopes below slices only: a
	// scope below any other directory (one a tenant was given outside the units) is theirs.
	underSlices := true
	for i, p := range parts {
		if i > 0 && i < top {
			continue // "..": a cgroup namespace's view, climbing to where it starts
		}
		if s, ok := strings.CutSuffix(p, ".scope"); ok && underSlices {
			for _, r := range scopeRuntimes {
				// libpod-conmon-<id> and crio-conmon-<id> hold the monitor, not the container.
				if v, ok := strings.CutPrefix(s, r.prefix); ok && isHexID(v) {
					return v, r.runtime
				}
			}
		}
		if v, ok := strings.CutPrefix(p, "lxc.payload."); ok && v != "" {
			return v, "lxc"
		}
		if i > 0 && isHexID(p) {
			switch parent := parts[i-1]; {
			case parent == "docker" && i-1 == top:
				return p, "docker"
			case strings.HasPrefix(parent, "pod") && isUID(parent[len("pod"):]) && kubeletRooted(parts):
				// /kubepods[/qos]/pod<uid>/<id>: the runtime is not in the path.
				return p, ""
			}
		}
		if i > 0 && parts[i-1] == "lxc" && p != "" {
			return p, "lxc"
		}
		if isUnitName(p) {
			return "", "" // below another unit: its own
		}
		underSlices = underSlices && (p == "" || strings.HasSuffix(p, ".slice"))
	}
	return "", ""
}

// fromTop is a cgroup path without the leading "/.." of a cgroup namespace's view (see
// topIndex): "/../../system.slice/a.service" is a.service's, as seen from the root.
func fromTop(path string) string {
	for {
		rest, ok := strings.CutPrefix(path, "/..")
		if !ok || rest != "" && rest[0] != '/' {
			return path
		}
		if rest == "" {
			return "/"
		}
		path = rest
	}
}

// topIndex is the index in a cgroup path's components of its first one below the root of
// the hierarchy: after the leading ".." of a path seen from a cgroup namespace that starts
// lower (a pod's: the agent's), which climb to the namespace's ancestors.
func topIndex(parts []string) int {
	i := 1
	for i < len(parts) && parts[i] == ".." {
		i++
	}
	return i
}

// kubeletRooted says whether a cgroup path lies where the kubelet puts pods: below
// kubepods.slice or kubepods at the root of the hierarchy. Seen from a cgroup namespace that
// starts in a pod (the agent's: the path climbs out with ".."), another pod's path goes on
// from a kubepods slice or the cgroupfs driver's QoS or pod directory, all the kubelet's;
// a host process's climbs to the root and goes on from elsewhere. Only root makes a
// directory at the root or in the kubelet's tree: a "kubepods/pod<uid>" anywhere else lies in
// a directory someone was given, and names no pod.
func kubeletRooted(parts []string) bool {
	top := topIndex(parts)
	if top >= len(parts) {
		return false
	}
	p := parts[top]
	switch {
	case p == "kubepods" || p == "kubepods.slice" || strings.HasPrefix(p, "kubepods-") && strings.HasSuffix(p, ".slice"):
		return true
	case top == 1:
		return false
	}
	u, pod := strings.CutPrefix(p, "pod")
	return p == "besteffort" || p == "burstable" || pod && isUID(u)
}

// isUnitName says whether a cgroup path component is a systemd service or scope.
func isUnitName(p string) bool {
	return strings.HasSuffix(p, ".service") || strings.HasSuffix(p, ".scope")
}

// cgroupPod finds a Kubernetes pod UID: "pod<uid>" (cgroupfs driver) or
// "kubepods-<qos>-pod<uid_with_underscores>.slice" (systemd driver), in the kubelet's tree
// only (kubeletRooted). As for containers and
// jobs, none below another unit: whoever may write below a unit's cgroup (a Delegate=yes
// service, a privileged container) names what lies there, so a "pod<uid>" of theirs names no
// pod, and must not make a command delete another tenant's.
func cgroupPod(path string) string {
	parts := strings.Split(path, "/")
	if !kubeletRooted(parts) {
		return ""
	}
	for _, p := range parts[topIndex(parts):] {
		if isUnitName(p) {
			return "" // below another unit: its own
		}
		if s, ok := strings.CutSuffix(p, ".slice"); ok {
			if i := strings.LastIndex(s, "-pod"); i >= 0 && strings.HasPrefix(s, "kubepods") {
				if u := strings.ReplaceAll(s[i+len("-pod"):], "_", "-"); isUID(u) {
					return u
				}
			}
			continue
		}
		if u, ok := strings.CutPrefix(p, "pod"); ok && isUID(u) {
			return u
		}
	}
	return ""
}

// cgroupSlurm finds a Slurm job, its step and, on a host that runs several slurmd, the node:
// v1 ".../slurm[_NODE]/uid_U/job_N/step_S/..." (slurmd's cgroup/v1 plugin, at the root of each
// controller it uses), v2 ".../[NODE_]slurmstepd.scope/job_N/step_S/..." (cgroup/v2). Only
// those exact shapes count: a component that merely starts with "slurm" ("slurmd.service")
// names no job.
func cgroupSlurm(path string) (job, step, node string) {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		next := i + 1
		switch n, v1 := strings.CutPrefix(p, "slurm_"); {
		case p == "slurm" || v1 && n != "":
			node = ""
			if v1 {
				node = n
			}
			if next >= len(parts) || !isSlurmID(parts[next], "uid_") {
				continue
			}
			next++
		case p == "slurmstepd.scope":
			node = ""
		default:
			n, ok := strings.CutSuffix(p, "_slurmstepd.scope")
			if isUnitName(p) && (!ok || n == "") {
				return "", "", "" // below another unit: its own, not Slurm's
			}
			if !ok || n == "" {
				continue
			}
			node = n
		}
		if next >= len(parts) || !isSlurmID(parts[next], "job_") {
			continue
		}
		job = parts[next][len("job_"):]
		if next+1 < len(parts) {
			if s, ok := strings.CutPrefix(parts[next+1], "step_"); ok && s != "" {
				step = s
			}
		}
		return job, step, node
	}
	return "", "", ""
}

// isSlurmID says whether s is prefix followed by a decimal number (a uid or a job id).
func isSlurmID(s, prefix string) bool {
	v, ok := strings.CutPrefix(s, prefix)
	_, num := atoiNonNeg(v)
	return ok && num
}

// isHexID says whether s looks like a container id: at least 12 lower-case hex digits.
func isHexID(s string) bool {
	if len(s) < 12 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !('0' <= s[i] && s[i] <= '9' || 'a' <= s[i] && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// isUID says whether s looks like a Kubernetes UID: hex digits and dashes.
func isUID(s string) bool {
	if len(s) < 8 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || c == '-') {
			return false
		}
	}
	return true
}
