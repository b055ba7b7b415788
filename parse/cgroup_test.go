package parse

import (
	"strings"
	"testing"
)

func TestCgroupCorpus(t *testing.T) {
	files := corpusFiles(t, "cgroup_*.txt")
	tests := []struct {
		file string
		want Cgroup // Lines compared by count only
		n    int
	}{
		{"cgroup_hybrid_k8s-containerd_freezer-and-unified.txt", Cgroup{
			Path:        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod70565f42_b704_42f2_83fe_1ffb77a67800.slice/cri-containerd-a678b5127d3f1a1bfd029818c628a8cd106d7b873ff64cd6bfaa7022579cbab5.scope",
			Unit:        "cri-containerd-a678b5127d3f1a1bfd029818c628a8cd106d7b873ff64cd6bfaa7022579cbab5.scope",
			ContainerID: "a678b5127d3f1a1bfd029818c628a8cd106d7b873ff64cd6bfaa7022579cbab5", Runtime: "containerd",
			PodUID: "70565f42-b704-42f2-83fe-1ffb77a67800",
		}, 12},
		{"cgroup_v1-hybrid_docker_with-0-line-snap-dockerd.txt", Cgroup{
			Path:        "/system.slice/snap.docker.dockerd.service",
			Unit:        "snap.docker.dockerd.service",
			ContainerID: "b708f3d89365eba0b8a5d112625e230edd7df211a4ce0d5f17fab8ab7273d345", Runtime: "docker",
		}, 13},
		{"cgroup_v2_slurm_job-step-task.txt", Cgroup{
			Path: "/system.slice/slurmstepd.scope/job_840392/step_0/user/task_0", Unit: "slurmstepd.scope", SlurmJob: "840392", SlurmStep: "0",
		}, 1},
		{"cgroup_v2_slurm_step-batch.txt", Cgroup{
			Path: "/system.slice/slurmstepd.scope/job_1076414/step_batch/user/task_0", Unit: "slurmstepd.scope", SlurmJob: "1076414", SlurmStep: "batch",
		}, 1},
		{"cgroup_v2_systemd-service_jupyterhub.txt", Cgroup{Path: "/system.slice/cm-jupyterhub.service", Unit: "cm-jupyterhub.service"}, 1},
	}
	if len(tests) != len(files) {
		t.Errorf("%d cgroup corpus files, %d tested", len(files), len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			b, ok := files[tt.file]
			if !ok {
				t.Skip("not in corpus")
			}
			checkCgroup(t, ParseCgroup(string(b)), tt.want, tt.n)
		})
	}
}

func TestCgroup(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Cgroup
		n    int
	}{
		{"v2 docker", "0::/system.slice/docker-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope\n", Cgroup{
			Path: "/system.slice/docker-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope", Unit: "docker-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope",
			ContainerID: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Runtime: "docker"}, 1},
		{"v2 podman", "0::/machine.slice/libpod-0123456789abcdef0123.scope/container\n", Cgroup{
			Path: "/machine.slice/libpod-0123456789abcdef0123.scope/container", Unit: "libpod-0123456789abcdef0123.scope", ContainerID: "0123456789abcdef0123", Runtime: "podman"}, 1},
		// Everything under a unit's cgroup is that unit's own: whoever may write there names
		// no other container or job.
		{"nested runtime scope: the outer container", "0::/system.slice/docker-aaaaaaaaaaaa.scope/docker-bbbbbbbbbbbb.scope\n", Cgroup{
			Path: "/system.slice/docker-aaaaaaaaaaaa.scope/docker-bbbbbbbbbbbb.scope", Unit: "docker-aaaaaaaaaaaa.scope", ContainerID: "aaaaaaaaaaaa", Runtime: "docker"}, 1},
		{"runtime scope below a service", "0::/system.slice/hub.service/docker-bbbbbbbbbbbb.scope\n", Cgroup{
			Path: "/system.slice/hub.service/docker-bbbbbbbbbbbb.scope", Unit: "hub.service"}, 1},
		{"slurm scope below a service", "0::/system.slice/hub.service/slurmstepd.scope/job_5/step_0\n", Cgroup{
			Path: "/system.slice/hub.service/slurmstepd.scope/job_5/step_0", Unit: "hub.service"}, 1},
		{"v2 conmon is not the container", "0::/machine.slice/libpod-conmon-0123456789abcdef0123.scope\n", Cgroup{
			Path: "/machine.slice/libpod-conmon-0123456789abcdef0123.scope", Unit: "libpod-conmon-0123456789abcdef0123.scope"}, 1},
		{"v2 cri-o in pod", "0::/kubepods.slice/kubepods-pod1b2c3d4e_0000_1111_2222_333344445555.slice/crio-abcdefabcdef0011.scope\n", Cgroup{
			Path: "/kubepods.slice/kubepods-pod1b2c3d4e_0000_1111_2222_333344445555.slice/crio-abcdefabcdef0011.scope", Unit: "crio-abcdefabcdef0011.scope",
			ContainerID: "abcdefabcdef0011", Runtime: "cri-o", PodUID: "1b2c3d4e-0000-1111-2222-333344445555"}, 1},
		{"v1 kubepods cgroupfs", "12:memory:/kubepods/burstable/pod1b2c3d4e-0000-1111-2222-333344445555/0123456789abcdef0123456789abcdef\n1:name=systemd:/kubepods/burstable/pod1b2c3d4e-0000-1111-2222-333344445555/0123456789abcdef0123456789abcdef\n", Cgroup{
			Path: "/kubepods/burstable/pod1b2c3d4e-0000-1111-2222-333344445555/0123456789abcdef0123456789abcdef", ContainerID: "0123456789abcdef0123456789abcdef", PodUID: "1b2c3d4e-0000-1111-2222-333344445555"}, 2},
		{"v1 slurm", "4:memory:/slurm/uid_1000/job_77/step_extern/task_0\n1:name=systemd:/user.slice/user-1000.slice/session-3.scope\n", Cgroup{
			Path: "/user.slice/user-1000.slice/session-3.scope", Unit: "session-3.scope", SlurmJob: "77", SlurmStep: "extern"}, 2},
		// Several slurmd on one host (--enable-multiple-slurmd): the node is in the name.
		{"v1 multiple slurmd, job in freezer", "9:name=systemd:/\n8:pids:/\n6:freezer:/slurm_node2/uid_0/job_12/step_0\n4:memory:/process_api/cc8fcd88\n0::/\n", Cgroup{
			Path: "/slurm_node2/uid_0/job_12/step_0", SlurmJob: "12", SlurmStep: "0", SlurmNode: "node2"}, 5},
		{"v2 multiple slurmd", "0::/system.slice/node3_slurmstepd.scope/job_9/step_batch/user/task_0\n", Cgroup{
			Path: "/system.slice/node3_slurmstepd.scope/job_9/step_batch/user/task_0", Unit: "node3_slurmstepd.scope", SlurmJob: "9", SlurmStep: "batch", SlurmNode: "node3"}, 1},
		// proctrack/cgroup signals the job through the freezer hierarchy: it names the job,
		// whatever the other controllers say.
		{"v1 freezer names the job before memory", "12:memory:/slurm/uid_0/job_5/step_0/task_0\n11:freezer:/slurm/uid_0/job_7/step_0\n1:name=systemd:/system.slice/slurmd.service\n", Cgroup{
			Path: "/system.slice/slurmd.service", Unit: "slurmd.service", SlurmJob: "7", SlurmStep: "0"}, 3},
		{"v1 job without a step yet", "6:freezer:/slurm_node1/uid_1000/job_3\n", Cgroup{
			Path: "/slurm_node1/uid_1000/job_3", SlurmJob: "3", SlurmNode: "node1"}, 1},
		// Only Slurm's own shapes name a job.
		{"slurmd's service names no job", "0::/system.slice/slurmd.service/job_5/step_0\n", Cgroup{
			Path: "/system.slice/slurmd.service/job_5/step_0", Unit: "slurmd.service"}, 1},
		{"slurm's system cgroup names no job", "6:freezer:/slurm_node1/system\n", Cgroup{Path: "/slurm_node1/system"}, 1},
		{"v1 slurm without uid names no job", "6:freezer:/slurm/job_5/step_0\n", Cgroup{Path: "/slurm/job_5/step_0"}, 1},
		{"v2 user service", "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-x-1.scope\n", Cgroup{
			Path: "/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-x-1.scope", Unit: "app-gnome-x-1.scope"}, 1},
		// Below a user's manager the user names the cgroups: no container, pod or job there.
		{"user cgroup named like a docker container", "0::/user.slice/user-1000.slice/user@1000.service/app.slice/docker-0123456789abcdef0123.scope\n", Cgroup{
			Path: "/user.slice/user-1000.slice/user@1000.service/app.slice/docker-0123456789abcdef0123.scope", Unit: "docker-0123456789abcdef0123.scope"}, 1},
		{"user cgroup named like a slurm job", "0::/user.slice/user-1000.slice/user@1000.service/slurm/job_77/step_0\n", Cgroup{
			Path: "/user.slice/user-1000.slice/user@1000.service/slurm/job_77/step_0", Unit: "user@1000.service"}, 1},
		{"user cgroup named like a pod", "0::/user.slice/user-1000.slice/user@1000.service/kubepods/pod1b2c3d4e-0000-1111-2222-333344445555/0123456789abcdef0123\n", Cgroup{
			Path: "/user.slice/user-1000.slice/user@1000.service/kubepods/pod1b2c3d4e-0000-1111-2222-333344445555/0123456789abcdef0123", Unit: "user@1000.service"}, 1},
		// The same below a system unit that delegates its subtree (Delegate=yes): the unit's
		// own, whatever the names.
		{"delegated unit's cgroup named like a pod (cgroupfs)", "0::/system.slice/ci-runner.service/kubepods/besteffort/pod1b2c3d4e-0000-1111-2222-333344445555/0123456789abcdef0123\n", Cgroup{
			Path: "/system.slice/ci-runner.service/kubepods/besteffort/pod1b2c3d4e-0000-1111-2222-333344445555/0123456789abcdef0123", Unit: "ci-runner.service"}, 1},
		{"delegated unit's cgroup named like a pod (systemd)", "0::/system.slice/ci-runner.service/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1b2c3d4e_0000_1111_2222_333344445555.slice/cri-containerd-0123456789abcdef0123.scope\n", Cgroup{
			Path: "/system.slice/ci-runner.service/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1b2c3d4e_0000_1111_2222_333344445555.slice/cri-containerd-0123456789abcdef0123.scope", Unit: "ci-runner.service"}, 1},
		{"v1 delegated unit's cgroup named like a pod", "4:memory:/system.slice/ci-runner.service/kubepods/pod1b2c3d4e-0000-1111-2222-333344445555\n1:name=systemd:/system.slice/ci-runner.service\n", Cgroup{
			Path: "/system.slice/ci-runner.service", Unit: "ci-runner.service"}, 2},
		{"v1 user cgroup named like a docker container", "4:memory:/user.slice/user-1000.slice/user@1000.service/docker/0123456789abcdef0123\n1:name=systemd:/user.slice/user-1000.slice/session-3.scope\n", Cgroup{
			Path: "/user.slice/user-1000.slice/session-3.scope", Unit: "session-3.scope"}, 2},
		// A pod is believed only where the kubelet puts pods: kubepods at the root of the
		// hierarchy. A directory a tenant was given outside the units (a chowned cgroupfs
		// directory, a privileged docker container of the cgroupfs driver) names no pod.
		{"tenant's cgroupfs directory named like a pod", "0::/tenants/alice/kubepods/besteffort/pod1b2c3d4e-0000-1111-2222-333344445555/0123456789abcdef0123\n", Cgroup{
			Path: "/tenants/alice/kubepods/besteffort/pod1b2c3d4e-0000-1111-2222-333344445555/0123456789abcdef0123"}, 1},
		{"tenant's directory named like a systemd pod", "0::/tenants/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1b2c3d4e_0000_1111_2222_333344445555.slice/cri-containerd-0123456789abcdef0123.scope\n", Cgroup{
			Path: "/tenants/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1b2c3d4e_0000_1111_2222_333344445555.slice/cri-containerd-0123456789abcdef0123.scope",
		}, 1},
		// A runtime's scope copied into such a directory names no container either: it would
		// make fix stop the running pod's container (crictl stop) whose id it copies.
		{"tenant's directory with a runtime scope named like a pod's container", "0::/tenants/alice/cri-containerd-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope\n", Cgroup{
			Path: "/tenants/alice/cri-containerd-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope"}, 1},
		{"tenant's directory with a docker scope", "0::/tenants/alice/docker-0123456789abcdef0123.scope\n", Cgroup{
			Path: "/tenants/alice/docker-0123456789abcdef0123.scope"}, 1},
		{"tenant's directory with a cgroupfs docker container", "0::/tenants/alice/docker/0123456789abcdef0123\n", Cgroup{
			Path: "/tenants/alice/docker/0123456789abcdef0123"}, 1},
		{"podman's pod slice", "0::/machine.slice/machine-libpod_pod_abcdef.slice/libpod-0123456789abcdef0123.scope\n", Cgroup{
			Path: "/machine.slice/machine-libpod_pod_abcdef.slice/libpod-0123456789abcdef0123.scope", Unit: "libpod-0123456789abcdef0123.scope",
			ContainerID: "0123456789abcdef0123", Runtime: "podman"}, 1},
		{"docker seen from a cgroup namespace", "0::/../docker-0123456789abcdef0123.scope\n", Cgroup{
			Path: "/../docker-0123456789abcdef0123.scope", Unit: "docker-0123456789abcdef0123.scope", ContainerID: "0123456789abcdef0123", Runtime: "docker"}, 1},
		{"docker cgroupfs container's own cgroup named like a pod", "0::/docker/abcdefabcdef0011/kubepods/pod1b2c3d4e-0000-1111-2222-333344445555/0123456789abcdef0123\n", Cgroup{
			Path: "/docker/abcdefabcdef0011/kubepods/pod1b2c3d4e-0000-1111-2222-333344445555/0123456789abcdef0123", ContainerID: "abcdefabcdef0011", Runtime: "docker"}, 1},
		// Seen from the agent's pod, in a cgroup namespace of its own: another pod's path
		// climbs out of the agent's container to the kubelet's slices; a host process's
		// climbs to the root first.
		{"another pod seen from the agent's cgroup namespace", "0::/../../../kubepods-burstable.slice/kubepods-burstable-pod1b2c3d4e_0000_1111_2222_333344445555.slice/cri-containerd-0123456789abcdef0123.scope\n", Cgroup{
			Path: "/../../../kubepods-burstable.slice/kubepods-burstable-pod1b2c3d4e_0000_1111_2222_333344445555.slice/cri-containerd-0123456789abcdef0123.scope", Unit: "cri-containerd-0123456789abcdef0123.scope",
			ContainerID: "0123456789abcdef0123", Runtime: "containerd", PodUID: "1b2c3d4e-0000-1111-2222-333344445555"}, 1},
		{"another pod seen from the agent's cgroup namespace (cgroupfs)", "0::/../../../burstable/pod1b2c3d4e-0000-1111-2222-333344445555/0123456789abcdef0123\n", Cgroup{
			Path:        "/../../../burstable/pod1b2c3d4e-0000-1111-2222-333344445555/0123456789abcdef0123",
			ContainerID: "0123456789abcdef0123", PodUID: "1b2c3d4e-0000-1111-2222-333344445555"}, 1},
		{"a tenant's directory seen from the agent's cgroup namespace", "0::/../../../../tenants/alice/kubepods/besteffort/pod1b2c3d4e-0000-1111-2222-333344445555/0123456789abcdef0123\n", Cgroup{
			Path: "/../../../../tenants/alice/kubepods/besteffort/pod1b2c3d4e-0000-1111-2222-333344445555/0123456789abcdef0123"}, 1},
		// A host's unit and a user's manager seen from the agent's cgroup namespace are what
		// they are from the root: a service's main process is in its unit, not orphaned.
		{"a host service seen from the agent's cgroup namespace", "0::/../../../../system.slice/vllm.service\n", Cgroup{
			Path: "/../../../../system.slice/vllm.service", Unit: "vllm.service"}, 1},
		{"a user's cgroup named like a container seen from the agent's cgroup namespace", "0::/../../user.slice/user-1000.slice/user@1000.service/app.slice/docker-0123456789abcdef0123.scope\n", Cgroup{
			Path: "/../../user.slice/user-1000.slice/user@1000.service/app.slice/docker-0123456789abcdef0123.scope", Unit: "docker-0123456789abcdef0123.scope", UserManagerUID: intp(1000)}, 1},
		{"a directory named ..foo", "0::/..foo/a.service\n", Cgroup{Path: "/..foo/a.service"}, 1},
		{"root only", "0::/\n", Cgroup{Path: "/"}, 1},
		{"garbage and CRLF", "nonsense\r\n0::/system.slice/a.service\r\n", Cgroup{Path: "/system.slice/a.service", Unit: "a.service"}, 1},
		{"empty", "", Cgroup{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkCgroup(t, ParseCgroup(tt.in), tt.want, tt.n)
		})
	}
}

func checkCgroup(t *testing.T, got, want Cgroup, lines int) {
	t.Helper()
	if len(got.Lines) != lines {
		t.Errorf("got %d lines, want %d", len(got.Lines), lines)
	}
	got.Lines = nil
	if got.Path != want.Path || got.Unit != want.Unit || got.ContainerID != want.ContainerID || got.Runtime != want.Runtime ||
		got.PodUID != want.PodUID || got.SlurmJob != want.SlurmJob || got.SlurmStep != want.SlurmStep || got.SlurmNode != want.SlurmNode {
		t.Errorf("got  %s\nwant %s", cgString(got), cgString(want))
	}
}

func cgString(c Cgroup) string {
	return strings.Join([]string{"path=" + c.Path, "unit=" + c.Unit, "ctr=" + c.ContainerID, "rt=" + c.Runtime, "pod=" + c.PodUID, "job=" + c.SlurmJob, "step=" + c.SlurmStep, "node=" + c.SlurmNode}, " ")
}

// A unit below user@UID.service belongs to user UID's manager, not to the system manager: the
// same name can be a system unit too. Only systemd's fixed place counts; below it the user
// names the cgroups.
func TestCgroupUserManagerUnit(t *testing.T) {
	tests := []struct {
		path string
		unit string
		uid  *int
	}{
		{"/user.slice/user-1000.slice/user@1000.service/app.slice/foo.service", "foo.service", intp(1000)},
		{"/user.slice/user-1000.slice/user@1000.service/init.scope", "init.scope", intp(1000)},
		{"/user.slice/user-1000.slice/user@1000.service/app.slice/app-foo@x.service/sub", "app-foo@x.service", intp(1000)},
		// Directly in the system unit user@1000.service (cgroup v1), or below it in no unit.
		{"/user.slice/user-1000.slice/user@1000.service", "user@1000.service", nil},
		{"/user.slice/user-1000.slice/user@1000.service/app.slice", "user@1000.service", nil},
		// A login session's scope is the system manager's.
		{"/user.slice/user-1000.slice/session-3.scope", "session-3.scope", nil},
		{"/system.slice/foo.service", "foo.service", nil},
		// Names a user chose below their own manager do not make another manager: the unit is
		// the first component below the slices, as systemd's cg_path_get_unit has it.
		{"/user.slice/user-1000.slice/user@1000.service/app.slice/user@0.service/x.service", "user@0.service", intp(1000)},
		// Not systemd's place: a uid that differs, a non-canonical number, another slice.
		{"/user.slice/user-1000.slice/user@0.service/app.slice/foo.service", "user@0.service", nil},
		{"/user.slice/user-01000.slice/user@01000.service/app.slice/foo.service", "user@01000.service", nil},
		{"/system.slice/docker-1.scope/user.slice/user-0.slice/user@0.service/a.service", "docker-1.scope", nil},
		// Below a unit, the unit owns the names (a delegated service, a container running
		// its own systemd): a "sshd.service" made there is not the host's sshd.
		{"/system.slice/docker-0123abcd.scope/system.slice/sshd.service", "docker-0123abcd.scope", nil},
		{"/system.slice/vllm.service/worker/sshd.service", "vllm.service", nil},
		{"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/cri-containerd-ab.scope", "cri-containerd-ab.scope", nil},
		{"/machine.slice/machine-c1.scope/payload/system.slice/ssh.service", "machine-c1.scope", nil},
	}
	for _, tt := range tests {
		c := ParseCgroup("0::" + tt.path + "\n")
		if c.Unit != tt.unit || !eqPtr(c.UserManagerUID, tt.uid) {
			t.Errorf("%s: unit %q uid %v, want %q %v", tt.path, c.Unit, showPtr(c.UserManagerUID), tt.unit, showPtr(tt.uid))
		}
	}
}
