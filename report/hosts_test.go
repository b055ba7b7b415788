package report

import (
	"time"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/parse"
)

// The hosts the tests render are built here directly, so report's tests do not depend on the
// parser or the diagnosis.

func ptr[T any](v T) *T { return &v }

var probeTime = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func dur(d time.Duration) *time.Duration { return &d }

// incidentHost is ct200 from the incident: GPU 0 held by a leftover SGLang server whose model
// files in /dev/shm were deleted but are still mapped.
func incidentHost() Host {
	s := &parse.Snapshot{
		Host: parse.HostFacts{ProbeVersion: "1", Hostname: "ct200", Kernel: "6.8.0-60-generic",
			Time: ptr(probeTime), UptimeSeconds: ptr(864000.5), ClockTicks: 100, UID: ptr(0), User: "root",
			NvidiaSMIPath: "/usr/bin/nvidia-smi", HasTimeout: true},
		Shm: parse.Shm{SizeBytes: ptr(int64(270582939648)), UsedBytes: ptr(int64(55834574848)),
			AvailBytes: ptr(int64(214748364800)), Listed: true},
	}
	for i := range 8 {
		used, free := int64(0), int64(97252)
		if i == 0 {
			used, free = 55295, 41958
		}
		s.GPUs = append(s.GPUs, parse.GPU{Index: i, UUID: "GPU-6793b112-91ac-b02e-b2b2-a7e4143a878" + string(rune('b'+i)),
			Name: "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", BusID: "00000000:0" + string(rune('1'+i)) + ":00.0",
			MemoryTotalMiB: ptr(int64(97887)), MemoryUsedMiB: ptr(used), MemoryFreeMiB: ptr(free),
			MemoryReservedMiB: ptr(int64(635)), UtilizationPct: ptr(0), ComputeMode: "Default",
			DriverVersion: "575.57.08", MIGMode: "Disabled"})
	}
	shm := []parse.ShmUse{
		{Path: "/dev/shm/Qwen3.6-27B/model-00001-of-00011.safetensors", Deleted: true, Mapped: true, Bytes: ptr(int64(5368709120))},
		{Path: "/dev/shm/Qwen3.6-27B/model-00002-of-00011.safetensors", Deleted: true, Mapped: true, Bytes: ptr(int64(5368709120))},
	}
	p := diagnose.GPUProcess{
		PID: 20629, User: "ubuntu", UID: ptr(1000), Name: "python3", State: "S", PPID: ptr(1),
		Argv: []string{"python3", "-m", "sglang.launch_server", "--model-path", "/dev/shm/Qwen3.6-27B",
			"--served-model-name", "qwen3.6-27b", "--host", "0.0.0.0", "--port", "30000", "--mem-fraction-static", "0.85"},
		Elapsed: dur(2*time.Hour + 13*time.Minute), GPUMemoryMiB: map[int]int64{0: 55286}, GPUs: []int{0},
		Listed: true, Unit: "sglang-qwen.service", Shm: shm, Program: "sglang.launch_server", Engine: "SGLang",
	}
	return Host{
		Name:     "ct200",
		Snapshot: s,
		Result: diagnose.Result{
			Processes: []diagnose.GPUProcess{p},
			Findings: []diagnose.Finding{
				{
					Code: diagnose.CodeLeftoverProcess, Severity: diagnose.Error,
					Title: "GPU 0 held by PID 20629, a leftover SGLang server (55,286 MiB)",
					Explanation: "PID 20629 holds 55,286 MiB on GPU 0 but looks abandoned: its systemd unit " +
						"sglang-qwen.service is inactive and the model files it was started with have been deleted " +
						"from /dev/shm. Until it exits, GPU 0 has 41,958 MiB free while GPUs 1-7 have 97,252 MiB.",
					GPUs: []int{0}, PIDs: []int{20629}, Files: []string{"/dev/shm/Qwen3.6-27B"},
					Evidence: []string{
						"unit sglang-qwen.service: ActiveState=inactive SubState=dead, but PID 20629 still runs in its cgroup",
						"--model-path /dev/shm/Qwen3.6-27B no longer exists",
						"parent is PID 1 (orphaned), running for 2h13m",
					},
					Fix: []string{"sudo systemctl stop sglang-qwen.service", "sudo kill 20629"},
				},
				{
					Code: diagnose.CodeShmDeletedMapped, Severity: diagnose.Warning,
					Title:       "10.0 GiB of deleted /dev/shm files still mapped by PID 20629",
					Explanation: "Deleting a file only removes its name; the RAM comes back when the last process that maps it exits.",
					PIDs:        []int{20629}, Files: []string{"/dev/shm/Qwen3.6-27B"},
					Evidence: []string{"/dev/shm/Qwen3.6-27B/model-00001-of-00011.safetensors (deleted), 5.0 GiB, mapped by PID 20629",
						"/dev/shm/Qwen3.6-27B/model-00002-of-00011.safetensors (deleted), 5.0 GiB, mapped by PID 20629"},
					Fix: []string{"sudo kill 20629"},
				},
				{
					Code: diagnose.CodeProbeLimited, Severity: diagnose.Info,
					Title: "nvidia-smi fell back to the base query fields",
				},
			},
		},
		Capture: []byte("gputriage-capture v1 nonce=0123456789abcdef0123456789abcdef\n" +
			"@@gputriage 0123456789abcdef0123456789abcdef begin host limit=65536\n" +
			"hostname=ct200\nkernel=6.8.0-60-generic\n" +
			"@@gputriage 0123456789abcdef0123456789abcdef rc=0\n" +
			"@@gputriage 0123456789abcdef0123456789abcdef end host\n" +
			"@@gputriage 0123456789abcdef0123456789abcdef done\n"),
	}
}

// cleanHost is a healthy host with two idle GPUs and only informational findings.
func cleanHost() Host {
	s := &parse.Snapshot{
		Host: parse.HostFacts{ProbeVersion: "1", Hostname: "gpu-clean01.lab.example", Kernel: "6.1.0-21-amd64",
			Time: ptr(probeTime), ClockTicks: 100, UID: ptr(1000), User: "ops"},
		Notes: []parse.Note{{Code: "not-root", Message: "not root: other users' open files on /dev/nvidia* are not visible"}},
	}
	for i := range 2 {
		s.GPUs = append(s.GPUs, parse.GPU{Index: i, UUID: "GPU-0000000" + string(rune('0'+i)), Name: "NVIDIA H100 80GB HBM3",
			BusID: "00000000:1" + string(rune('8'+i)) + ":00.0", MemoryTotalMiB: ptr(int64(81559)),
			MemoryUsedMiB: ptr(int64(1)), MemoryFreeMiB: ptr(int64(81023)), UtilizationPct: ptr(0),
			DriverVersion: "550.90.07"})
	}
	return Host{
		Name:     "gpu-clean01",
		Snapshot: s,
		Result: diagnose.Result{Findings: []diagnose.Finding{{
			Code: diagnose.CodeProbeLimited, Severity: diagnose.Info, Kind: "not-root",
			Title:       "Ran as ops, not root: other users' GPU processes may be hidden",
			Explanation: "Without root the probe cannot read other users' open files.",
			Fix:         []string{"gputriage --sudo gpu-clean01"},
		}}},
	}
}

// noDriverHost is a host whose nvidia-smi cannot talk to the driver.
func noDriverHost() Host {
	s := &parse.Snapshot{
		Host: parse.HostFacts{Hostname: "gpu07", Kernel: "6.8.0-61-generic", Time: ptr(probeTime), User: "root", UID: ptr(0)},
		SMI: parse.SMIResult{Failure: &parse.SMIFailure{Kind: parse.SMINoDriver, ExitCode: ptr(9),
			Message: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."}},
	}
	return Host{
		Name:     "gpu07",
		Snapshot: s,
		Result: diagnose.Result{Findings: []diagnose.Finding{{
			Code: diagnose.CodeSMIFailed, Severity: diagnose.Critical, Kind: string(parse.SMINoDriver),
			Title:       "nvidia-smi cannot communicate with the NVIDIA driver",
			Explanation: "The kernel module is not loaded, usually after a kernel upgrade without a matching driver build. No GPU on this host can be used until the driver loads.",
			Evidence:    []string{"nvidia-smi exited with status 9"},
			Fix:         []string{"lsmod | grep nvidia", "sudo dmesg | grep -i nvrm | tail -n 20", "sudo modprobe nvidia"},
		}}},
	}
}

// failedHost could not be reached at all.
func failedHost() Host {
	return Host{Name: "gpu12", Err: &HostError{Phase: "connect", Kind: "refused",
		Message: "dial tcp 10.0.0.12:22: connect: connection refused"}}
}

// Remote strings that try to attack the terminal or the ticket.
const (
	osc     = "\x1b]0;pwned\x07"
	csiRed  = "\x1b[31m"
	rlo     = "\u202e"
	fences  = "````"
	invalid = "\xff\xfe"
)

// hostileHost carries escape sequences, bidi overrides, pipes, backticks, HTML and invalid
// UTF-8 in every remote string, and a GPU whose memory is unknown.
func hostileHost() Host {
	s := &parse.Snapshot{
		Host: parse.HostFacts{Hostname: "evil" + csiRed + "host", Kernel: "6.8" + osc, Time: ptr(probeTime), User: "mallory" + rlo},
		GPUs: []parse.GPU{
			{Index: 0, UUID: "GPU-" + osc, Name: "NVIDIA A100|SXM4 `x`" + rlo, BusID: "00000000:07:00.0",
				MemoryTotalMiB: ptr(int64(40960)), MemoryUsedMiB: ptr(int64(40000)), MemoryFreeMiB: ptr(int64(960)),
				DriverVersion: "535.183.01"},
			{Index: 1, Name: "NVIDIA A100-SXM4-40GB", DriverVersion: "535.183.01"}, // memory unknown
		},
		Notes:     []parse.Note{{Code: "section-truncated", Message: "section shm-ls cut at 1048576 bytes"}},
		Truncated: true,
	}
	p := diagnose.GPUProcess{
		PID: 4242, User: "mallory" + rlo, Name: "python" + csiRed,
		Argv: []string{"python3", "-c", "print('" + osc + csiRed + "x')", "--tag=a|b", "```; rm -rf ~ ```",
			"<script>alert(1)</script>", "# heading", "line1\nline2\ttab", invalid, "\u200b\u2066\u2069"},
		Elapsed: dur(26*time.Hour + 5*time.Minute), GPUMemoryMiB: map[int]int64{0: 39990, 1: 10}, GPUs: []int{0, 1},
		Listed: true, Container: "docker:" + osc + "b708f3d89365", SlurmJob: "77|" + rlo,
		Shm:     []parse.ShmUse{{Path: "/dev/shm/" + csiRed + "x|y", Deleted: true, Open: true}},
		Program: "ray::" + csiRed + "w|`x`" + rlo, Engine: "Ray", PPID: ptr(4241),
		ParentArgv: []string{"python3", "-c", osc + "parent|`y`" + csiRed},
	}
	return Host{
		Name:     "evil" + csiRed + "|host" + rlo,
		Snapshot: s,
		Result: diagnose.Result{
			Processes: []diagnose.GPUProcess{p},
			Findings: []diagnose.Finding{{
				Code: diagnose.CodeLeftoverProcess, Severity: diagnose.Error,
				Title:       "PID 4242 (python" + csiRed + ") | `holds` <b>GPU 0</b>" + rlo,
				Explanation: "# not a heading " + osc + "\n1. not a list\n---\n> not a quote",
				GPUs:        []int{0}, PIDs: []int{4242}, Files: []string{"/dev/shm/" + csiRed + "x|y"},
				Evidence: []string{"- not a nested list " + rlo, "argv[2] = " + osc, "line1\nline2"},
				Fix: []string{"docker stop " + osc + "b708f3d89365", "kill 4242 " + fences + " echo pwned",
					"scancel '77|x'"},
			}},
		},
		Capture: []byte("gputriage-capture v1 nonce=abc\nNUL:\x00 ESC:" + csiRed + osc + " bidi:" + rlo +
			"\n" + fences + "`\n</details>\n<script>alert(1)</script>\n\ttabbed\r\n" + invalid + "\n"),
	}
}

// hostKeyChangedHost failed with a finding about the failure itself.
func hostKeyChangedHost() Host {
	return Host{
		Name: "gpu13",
		Err: &HostError{Phase: "hostkey", Kind: "host-key-changed",
			Message: "host key for gpu13 changed: got SHA256:Xr3XyEfo9D3sQ0bJ2m0yq5Jc4yq3iQ6p7a8b9c0d1e2, known_hosts has ssh-ed25519 at /home/ops/.ssh/known_hosts:12"},
		Result: diagnose.Result{Findings: []diagnose.Finding{{
			Code: "host-key-changed", Severity: diagnose.Critical,
			Title:       "The host key of gpu13 changed",
			Explanation: "Either the host was reinstalled or someone is intercepting the connection. gputriage never connects to a host whose key changed.",
			Files:       []string{"/home/ops/.ssh/known_hosts"},
			Evidence:    []string{"/home/ops/.ssh/known_hosts:12 has ssh-ed25519 SHA256:Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3Ab4"},
			Fix:         []string{"ssh-keygen -R gpu13 -f /home/ops/.ssh/known_hosts"},
		}}},
	}
}

func standardHosts() []Host {
	return []Host{incidentHost(), cleanHost(), noDriverHost(), failedHost(), hostKeyChangedHost()}
}

// busyHost is a healthy vLLM deployment: four GPUs 90% full, with nothing wrong.
func busyHost() Host {
	s := &parse.Snapshot{
		Host: parse.HostFacts{ProbeVersion: "2", Hostname: "h100-02", Time: ptr(probeTime), User: "root", UID: ptr(0)},
	}
	var ps []diagnose.GPUProcess
	for i := range 4 {
		s.GPUs = append(s.GPUs, parse.GPU{Index: i, Name: "NVIDIA H100 80GB HBM3", MemoryTotalMiB: ptr(int64(81559)),
			MemoryUsedMiB: ptr(int64(73404)), MemoryFreeMiB: ptr(int64(8155)), DriverVersion: "550.90.07"})
		ps = append(ps, diagnose.GPUProcess{PID: 3001 + i, User: "svc", PPID: ptr(3000), Name: "python3",
			Argv:         []string{"python3", "-c", "from multiprocessing.spawn import spawn_main", "--multiprocessing-fork"},
			Program:      "vllm serve worker",
			Engine:       "vLLM",
			ParentArgv:   []string{"/usr/bin/python3", "/usr/local/bin/vllm", "serve", "/models/llama"},
			GPUMemoryMiB: map[int]int64{i: 73394}, GPUs: []int{i}, Listed: true, Elapsed: dur(5 * time.Hour)})
	}
	return Host{
		Name:     "h100-02",
		Snapshot: s,
		Result: diagnose.Result{Processes: ps, Findings: []diagnose.Finding{{
			Code: diagnose.CodeGPUBusy, Severity: diagnose.Info, GPUs: []int{0, 1, 2, 3}, PIDs: []int{3001, 3002, 3003, 3004},
			Title: "GPUs 0-3 in use by vllm serve: 293,576 MiB in 4 processes",
		}}},
	}
}
