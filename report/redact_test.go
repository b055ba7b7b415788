package report

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/parse"
)

// secretHosts is a fleet whose hostnames, users, addresses and home directories appear
// everywhere a remote string can: labels, argv, cwd, shm paths, unit names, messages,
// findings, errors and the raw capture.
func secretHosts() []Host {
	a := leftoverHost("gpu03", '3')
	s := a.Snapshot
	s.Host.Hostname = "gpu03.corp.example"
	s.Host.User = "carol"
	s.Processes = []parse.Process{{PID: 20629, User: "alice", Cwd: "/home/alice/work",
		Argv: []string{"python3", "-m", "vllm.entrypoints.openai.api_server"}}}
	p := &a.Result.Processes[0]
	p.User = "alice"
	p.Argv = []string{"python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "/home/alice/models/llama",
		"--download-dir=/Users/bob/cache", "--host", "10.1.2.3", "--peer", "[fe80::1ff:fe23:4567:890a]:5000",
		"--bind", "0.0.0.0", "--name", "GPU03-alice"}
	p.Unit = "vllm-alice.service"
	p.Shm = []parse.ShmUse{{Path: "/dev/shm/alice-gpu03/model.bin", Deleted: true, Mapped: true}}
	f := &a.Result.Findings[0]
	f.Explanation = "PID 20629 of alice on gpu03.corp.example, reached at 10.1.2.3 and fe80::1ff:fe23:4567:890a, " +
		"holds GPU 0; its model is /home/alice/models/llama."
	f.Evidence = append(f.Evidence, "cwd /home/alice/work", "ssh alice@gpu03 works; bastion.corp.example forwards to 172.16.0.9")
	f.Fix = []string{"sudo -u alice kill 20629", "ssh carol@gpu03.corp.example sudo systemctl stop vllm-alice.service"}
	f.Files = []string{"/home/alice/models/llama"}
	a.Capture = []byte("hostname=gpu03.corp.example\nuser=carol\n/home/alice/work 10.1.2.3\n")

	b := Host{Name: "dave@gpu07:2222", Err: &HostError{Phase: "connect", Kind: "timeout",
		Message: "dial tcp 192.168.7.7:2222 as dave via bastion.corp.example: i/o timeout"}}

	c := cleanFleetHost("gpu09")
	c.Snapshot.Host.Hostname = "GPU09"
	c.Snapshot.Host.User = "erin"
	c.Snapshot.Notes = append(c.Snapshot.Notes, parse.Note{Code: "tool-missing", Message: "/home/erin/.local/bin/nvidia-smi is not executable"})
	c.Result.Processes = []diagnose.GPUProcess{{PID: 7, User: "erin", GPUs: []int{0}, Elapsed: dur(time.Minute),
		Argv: []string{"/home/erin/.venv/bin/python", "train.py", "--master_addr=10.1.2.4"}}}
	c.Result.Findings[0].Title = "Ran as erin, not root"
	return []Host{a, b, c}
}

// secrets are the strings that must not survive redaction.
var secrets = []string{"gpu03", "gpu07", "gpu09", "corp.example", "alice", "bob", "carol", "dave", "erin",
	"10.1.2.3", "10.1.2.4", "192.168.7.7", "172.16.0.9", "fe80::1ff:fe23:4567:890a"}

func TestRedactLeavesNoSecret(t *testing.T) {
	for _, verbose := range []bool{false, true} {
		o := Options{Redact: true, Verbose: verbose, Only: OnlyAll}
		for name, f := range map[string]renderFunc{"text": Text, "markdown": Markdown, "json": JSON} {
			out := render(t, f, secretHosts(), o)
			low := strings.ToLower(out)
			for _, s := range secrets {
				if strings.Contains(low, strings.ToLower(s)) {
					t.Errorf("%s verbose=%v: %q survives redaction:\n%s", name, verbose, s, out)
				}
			}
			for _, want := range []string{"host-1", "user-", "ip-1"} {
				// Compact text names the addresses only in details -v shows.
				if want == "ip-1" && name == "text" && !verbose {
					continue
				}
				if !strings.Contains(out, want) {
					t.Errorf("%s: no %q placeholder", name, want)
				}
			}
			// What identifies nobody stays: 0.0.0.0, the GPU model, the codes.
			keep := []string{"leftover-process", "NVIDIA RTX PRO 6000"}
			if name != "text" || verbose { // text cuts the command line short
				keep = append(keep, "0.0.0.0")
			}
			for _, keep := range keep {
				if !strings.Contains(out, keep) {
					t.Errorf("%s: %q was redacted", name, keep)
				}
			}
		}
	}
}

func TestRedactConsistent(t *testing.T) {
	hosts := redact(secretHosts())
	a, b, c := hosts[0], hosts[1], hosts[2]
	if a.Name != "host-1" || a.Snapshot.Host.Hostname != "host-1" || c.Name != "host-3" || c.Snapshot.Host.Hostname != "host-3" {
		t.Errorf("hosts: %q (%q), %q (%q)", a.Name, a.Snapshot.Host.Hostname, c.Name, c.Snapshot.Host.Hostname)
	}
	if !regexp.MustCompile(`^user-\d+@host-2:2222$`).MatchString(b.Name) {
		t.Errorf("label %q", b.Name)
	}
	alice := a.Result.Processes[0].User
	if !strings.HasPrefix(alice, "user-") || a.Snapshot.Processes[0].User != alice {
		t.Errorf("alice is %q and %q", alice, a.Snapshot.Processes[0].User)
	}
	p := a.Result.Processes[0]
	for i, want := range map[int]string{
		4:  "/home/" + alice + "/models/llama",
		7:  "10.1.2.3",
		9:  "[fe80::1ff:fe23:4567:890a]:5000",
		11: "0.0.0.0",
		13: "host-1-" + alice,
	} {
		if i == 7 || i == 9 {
			if !regexp.MustCompile(`^\[?ip-\d+(\]:5000)?$`).MatchString(p.Argv[i]) {
				t.Errorf("argv[%d] = %q", i, p.Argv[i])
			}
			continue
		}
		if p.Argv[i] != want {
			t.Errorf("argv[%d] = %q, want %q", i, p.Argv[i], want)
		}
	}
	// The same address is the same placeholder in argv and in the explanation.
	ip := p.Argv[7]
	if !strings.Contains(a.Result.Findings[0].Explanation, "reached at "+ip+" and ") {
		t.Errorf("explanation %q does not use %s", a.Result.Findings[0].Explanation, ip)
	}
	if got := a.Snapshot.Processes[0].Cwd; got != "/home/"+alice+"/work" {
		t.Errorf("cwd %q", got)
	}
	if got := p.Shm[0].Path; got != "/dev/shm/"+alice+"-host-1/model.bin" {
		t.Errorf("shm path %q", got)
	}
	if got := a.Result.Findings[0].Evidence[4]; !strings.HasPrefix(got, "ssh "+alice+"@host-1 works; bastion.domain-1 forwards to ip-") {
		t.Errorf("evidence %q", got)
	}
	if a.Capture != nil {
		t.Error("the raw capture is kept")
	}
	// Codes and kinds are ours, not remote text.
	if a.Result.Findings[0].Code != "leftover-process" || b.Err.Phase != "connect" || b.Err.Kind != "timeout" {
		t.Error("a stable identifier was redacted")
	}
	// The same input gives the same placeholders.
	if !reflect.DeepEqual(redact(secretHosts()), hosts) {
		t.Error("redaction is not deterministic")
	}
}

func TestRedactDoesNotMutate(t *testing.T) {
	hosts := secretHosts()
	for _, f := range []renderFunc{Text, Markdown, JSON} {
		render(t, f, hosts, Options{Redact: true, Verbose: true})
	}
	if !reflect.DeepEqual(hosts, secretHosts()) {
		t.Error("redaction changed the caller's hosts")
	}
	// Nothing is shared: changing a copy leaves the original alone.
	c := redact(hosts)
	c[0].Result.Processes[0].Argv[0] = "changed"
	c[0].Snapshot.GPUs[0].Name = "changed"
	*c[0].Snapshot.GPUs[0].MemoryUsedMiB = 1
	c[0].Result.Processes[0].GPUMemoryMiB[0] = 1
	if !reflect.DeepEqual(hosts, secretHosts()) {
		t.Error("a redacted copy shares memory with the original")
	}
}

func TestRedactMarkdownDropsCapture(t *testing.T) {
	md := render(t, Markdown, secretHosts(), Options{Redact: true})
	if strings.Contains(md, "<summary>raw capture") || !strings.Contains(md, "raw captures are left out") {
		t.Errorf("redacted markdown:\n%s", md)
	}
	var doc struct{ Redacted bool }
	if err := json.Unmarshal([]byte(render(t, JSON, secretHosts(), Options{Redact: true})), &doc); err != nil || !doc.Redacted {
		t.Errorf("JSON redacted = %v (%v)", doc.Redacted, err)
	}
}

func TestRedactString(t *testing.T) {
	r := &redactor{names: map[string]string{}, ips: map[netip.Addr]string{}}
	r.addHost("gpu03.corp.example")
	r.addUser("ops")
	r.addUser("root")
	r.addUser("j$doe")
	for _, tt := range [][2]string{ // in order: addresses are numbered as they are met
		{"gpu03", "host-1"},
		{"GPU03.corp.example:22", "host-1:22"},
		{"other.corp.example", "other.domain-1"},
		{"gpu030 xgpu03 gpu03_x", "gpu030 xgpu03 gpu03_x"},
		{"stops ops, /home/ops/x", "stops user-1, /home/user-1/x"},
		{"root /root/x", "root /root/x"},
		{"home of j$doe", "home of user-2"},
		{"v1.2.3.4.5 575.57.08 1.2.3.4", "v1.2.3.4.5 575.57.08 ip-1"},
		{"010.000.000.001, 1.2.3.4:80", "ip-2, ip-1:80"},
		{"127.0.0.1 ::1 :: 0.0.0.0", "127.0.0.1 ::1 :: 0.0.0.0"},
		{"std::vector 12:00:03 00:1b:21", "std::vector 12:00:03 00:1b:21"},
		{"00000000:01:00.0", "00000000:01:00.0"},
		{"::ffff:1.2.3.4 2001:db8::7.", "ip-1 ip-3."},
		{"fe80::1%eth0", "ip-4%eth0"},
		{"999.1.1.1", "999.1.1.1"},
	} {
		if got := r.str(tt[0]); got != tt[1] {
			t.Errorf("str(%q) = %q, want %q", tt[0], got, tt[1])
		}
	}
}
