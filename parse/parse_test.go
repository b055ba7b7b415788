package parse

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// cutSec builds a section the probe cut at its bound: no rc trailer.
func cutSec(name string, limit int, body string) string {
	return "@@gputriage " + testNonce + " begin " + name + " limit=" + itoa(limit) + "\n" + body + "\n@@gputriage " + testNonce + " end " + name + "\n"
}

func noteCodes(s *Snapshot) []string {
	var c []string
	for _, n := range s.Notes {
		c = append(c, n.Code)
	}
	return c
}

func hasNote(s *Snapshot, code, substr string) bool {
	for _, n := range s.Notes {
		if n.Code == code && strings.Contains(n.Message, substr) {
			return true
		}
	}
	return false
}

const (
	hostNonRoot = "probe_version=1\nhostname=gpu01\nkernel=6.8.0\ntime=1700000100\nuptime=100.5\nbtime=1700000000\nclk_tck=100\nuid=1000\nuser=alice\nnvidia_smi=/usr/bin/nvidia-smi\ntimeout=0\n"
	hostRoot    = "probe_version=1\nhostname=gpu02\ntime=1700000100\nbtime=1700000000\nclk_tck=100\nuid=0\nuser=root\nnvidia_smi=/usr/bin/nvidia-smi\ntimeout=1\n"
	gpuBasic    = "index, uuid, name, pci.bus_id, memory.total [MiB], memory.used [MiB], memory.free [MiB], utilization.gpu [%], compute_mode, driver_version\n0, GPU-a, Tesla K80, 00000000:04:00.0, 11441, 1500, 9941, 0, Default, 470.256.02"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr bool
		check   func(t *testing.T, s *Snapshot)
	}{
		{
			name: "joins and notes",
			in: capture(
				sec("host", 65536, hostNonRoot, 0),
				sec("smi-gpu", 1048576, "Field \"memory.reserved\" is not a valid field to query.\n", 2),
				sec("smi-gpu-basic", 1048576, gpuBasic, 0),
				sec("smi-apps", 1048576, "pid, gpu_uuid, used_gpu_memory [MiB], process_name\n100, GPU-a, 1500, python3", 0),
				sec("fds", 4194304, "100 3 /dev/nvidiactl\n100 5 /dev/nvidia0\n100 9 /dev/shm/torch_1 (deleted)\n200 4 /dev/shm/dir/seg\ndenied 3", 0),
				sec("maps", 4194304, "/proc/100/maps:7f0000000000-7f0000002000 rw-s 00000000 00:1a 5 /dev/shm/torch_1 (deleted)\n/proc/100/maps:7f0000010000-7f0000011000 rw-s 00000000 00:1a 6 /dev/shm/dir/seg", 1),
				sec("fdstat", 1048576, "65536 /proc/100/fd/9\n4096 /proc/200/fd/4", 0),
				sec("procs", 4194304, "pid 100\nstat 100 (python3) S 1 100 100 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1000 0 0\nstatus Uid:\t1000\t1000\t1000\t1000\nargv "+b64("python3\x00\xff\xfe.py\x00")+"\ncgroup 0::/user.slice/user-1000.slice/session-2.scope\nend", 0),
				sec("users", 1048576, "alice:x:1000:1000::/home/alice:/bin/bash", 0),
				sec("units", 1048576, "systemctl: not found", 127),
				sec("shm-df", 65536, "Filesystem     1024-blocks  Used Available Capacity Mounted on\ntmpfs 1000 10 990 1% /dev/shm", 0),
				sec("shm-ls", 4194304, "d\t60\t1700000000.5\t0\t/dev/shm\x00d\t60\t1700000000.5\t1000\t/dev/shm/dir\x00f\t4096\t1700000000.5\t1000\t/dev/shm/dir/seg\x00f\t10\t1700000000.5\t1000\t/dev/shm/torch_1\x00", 0),
			),
			check: func(t *testing.T, s *Snapshot) {
				if s.Truncated || !s.SMI.FieldFallback || s.SMI.Failure != nil || len(s.GPUs) != 1 || s.GPUs[0].Name != "Tesla K80" {
					t.Errorf("smi: truncated %v fallback %v failure %+v GPUs %+v", s.Truncated, s.SMI.FieldFallback, s.SMI.Failure, s.GPUs)
				}
				if want := []DeviceHolder{{100, 3, "/dev/nvidiactl"}, {100, 5, "/dev/nvidia0"}}; !reflect.DeepEqual(s.Holders, want) {
					t.Errorf("holders %+v", s.Holders)
				}
				for _, want := range []struct{ code, msg string }{
					{NoteNotRoot, "uid 1000"}, {NoteToolMissing, "timeout"}, {NoteToolMissing, "systemctl"}, {NoteFDsUnreadable, "3 fd"},
				} {
					if !hasNote(s, want.code, want.msg) {
						t.Errorf("no note %s %q in %+v", want.code, want.msg, s.Notes)
					}
				}
				if len(s.Notes) != 4 {
					t.Errorf("notes %+v", s.Notes)
				}
				if len(s.Processes) != 1 {
					t.Fatalf("processes %+v", s.Processes)
				}
				p := s.Processes[0]
				if p.User != "alice" || p.Cgroup.Unit != "session-2.scope" || p.StartTime == nil || p.StartTime.Unix() != 1700000010 ||
					!reflect.DeepEqual(p.Argv, []string{"python3", "\xff\xfe.py"}) {
					t.Errorf("process %+v", p)
				}
				if want := []ShmUse{{Path: "/dev/shm/dir/seg", Mapped: true, Bytes: i64(4096), File: "0:26:6"}, {Path: "/dev/shm/torch_1", Deleted: true, Mapped: true, Open: true, Bytes: i64(65536), File: "0:26:5"}}; !reflect.DeepEqual(p.Shm, want) {
					t.Errorf("shm uses %+v", p.Shm)
				}
				holders := map[string][]int{}
				for _, e := range s.Shm.Entries {
					holders[e.Path] = e.Holders
				}
				// The deleted torch_1 is not the listed torch_1.
				want := map[string][]int{"/dev/shm": {100, 200}, "/dev/shm/dir": {100, 200}, "/dev/shm/dir/seg": {100, 200}, "/dev/shm/torch_1": nil}
				if !reflect.DeepEqual(holders, want) {
					t.Errorf("holders %v", holders)
				}
				if !s.Shm.Listed || s.Shm.Truncated || !eqPtr(s.Shm.SizeBytes, i64(1000<<10)) || s.Shm.Entries[0].TreeBytes != 4106 {
					t.Errorf("shm %+v", s.Shm)
				}
			},
		},
		{
			name: "cut sections and a cut capture",
			in: "gputriage-capture v1 nonce=" + testNonce + "\n" +
				sec("host", 65536, hostRoot, 0) +
				sec("smi-gpu", 1048576, "", 124) +
				cutSec("procs", 100, "pid 1\nstat 1 (init) S 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0\nend\npid 2\nstat 2 (kthr") +
				cutSec("shm-ls", 100, "d\t60\t1700000000.5\t0\t/dev/shm\x00f\t10\t17000"),
			check: func(t *testing.T, s *Snapshot) {
				if !s.Truncated || !hasNote(s, NoteCaptureTruncated, "") || !hasNote(s, NoteSectionTruncated, "procs") || !hasNote(s, NoteSectionTruncated, "shm-ls") {
					t.Errorf("truncated %v notes %+v", s.Truncated, s.Notes)
				}
				if f := s.SMI.Failure; f == nil || f.Kind != SMITimeout {
					t.Errorf("smi failure %+v", f)
				}
				if len(s.Processes) != 1 || s.Processes[0].Comm != "init" {
					t.Errorf("processes %+v", s.Processes)
				}
				if !s.Shm.Truncated || !s.Shm.Listed || len(s.Shm.Entries) != 1 {
					t.Errorf("shm %+v", s.Shm)
				}
				if len(s.Sections) != 4 || !s.Sections[2].Truncated || s.Sections[2].Limit != SectionLimit("procs") {
					t.Errorf("sections %+v", s.Sections)
				}
			},
		},
		{
			name: "busybox find, failed df, gpu lost on one of two",
			in: capture(
				sec("host", 65536, hostRoot, 0),
				sec("smi-gpu", 1048576, "Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost.  Reboot the system to recover this GPU\nindex, uuid, name\n0, GPU-a, A", 15),
				sec("smi-apps", 1048576, "Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost.  Reboot the system to recover this GPU\npid, gpu_uuid, used_gpu_memory [MiB], process_name", 15),
				sec("shm-df", 65536, "df: /dev/shm: No such file or directory", 1),
				sec("shm-ls", 4194304, "find: unrecognized: -printf\nBusyBox v1.36.1 multi-call binary.", 1),
				sec("maps", 4194304, "", 2),
			),
			check: func(t *testing.T, s *Snapshot) {
				if f := s.SMI.Failure; f == nil || f.Kind != SMIGPULost || f.BusID != "0000:02:00.0" || len(s.GPUs) != 1 {
					t.Errorf("smi %+v GPUs %+v", f, s.GPUs)
				}
				if s.Shm.Listed || !hasNote(s, NoteToolMissing, "-printf") || !hasNote(s, NoteSectionFailed, "shm-df") {
					t.Errorf("listed %v notes %+v", s.Shm.Listed, s.Notes)
				}
				if got := noteCodes(s); len(got) != 2 {
					t.Errorf("notes %v", got)
				}
			},
		},
		{
			name:    "bad lines are errors, the rest is read",
			in:      capture(sec("host", 65536, hostRoot+"uid=zero\n", 0), sec("fds", 4194304, "12 x /dev/nvidia0\n12 3 /dev/nvidia1\ndenied 0", 0)),
			wantErr: true,
			check: func(t *testing.T, s *Snapshot) {
				if len(s.Holders) != 1 || s.Host.Hostname != "gpu02" {
					t.Errorf("holders %+v host %+v", s.Holders, s.Host)
				}
			},
		},
		{
			name:    "not a capture",
			in:      "Last login: yesterday\n",
			wantErr: true,
			check: func(t *testing.T, s *Snapshot) {
				if !s.Truncated || s.Host.ClockTicks != 100 {
					t.Errorf("%+v", s)
				}
			},
		},
		{
			name: "CRLF capture",
			in:   strings.ReplaceAll(capture(sec("host", 65536, hostRoot, 0), sec("shm-df", 65536, "Filesystem 1024-blocks Used Available Capacity Mounted on\ntmpfs 8 0 8 0% /dev/shm", 0)), "\n", "\r\n"),
			check: func(t *testing.T, s *Snapshot) {
				if s.Truncated || s.Host.Hostname != "gpu02" || !eqPtr(s.Shm.SizeBytes, i64(8192)) || len(s.Notes) != 0 {
					t.Errorf("%+v", s)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse([]byte(tt.in))
			if s == nil {
				t.Fatal("nil snapshot")
			}
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrParse) {
				t.Errorf("error does not wrap ErrParse: %v", err)
			}
			tt.check(t, s)
		})
	}
}
