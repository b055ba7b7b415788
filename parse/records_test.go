package parse

import (
	"encoding/base64"
	"reflect"
	"strings"
	"testing"
	"time"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestProcs(t *testing.T) {
	boot := time.Unix(1_700_000_000, 0).UTC()
	long := strings.Repeat("x", maxArgvBytes+1)
	in := strings.Join([]string{
		"pid 10",
		"stat 10 (my (weird) proc) R 1 10 10 0 -1 4194304 1 0 0 0 0 0 0 0 20 0 1 0 250 1000 10 18446744073709551615",
		"status Name:\tmy (weird) proc",
		"status State:\tR (running)",
		"status PPid:\t1",
		"status Uid:\t1000\t1000\t1000\t1000",
		"status NSpid:\t10\t1",
		"status VmRSS:\t   2048 kB",
		"status RssShmem:\t  512 kB",
		"cgroup 0::/system.slice/vllm.service",
		"argv " + b64("python3\x00-m\x00vllm serve\x00--model\x00/models/llama\x00"),
		"cwd /srv/my dir",
		"path missing /models/llama",
		"end",
		"pid 11",
		"gone",
		"pid 12",
		"sh: 1: cannot open /proc/12/status: No such file",
		"stat 12 (x) Z 1",
		"argv " + b64(long),
		"argv_future_key whatever",
		"end",
		"pid 13",
		"argv ",
		"cwd ",
		"end",
	}, "\n") + "\n"
	got, _, err := ParseProcs(strings.NewReader(in), &boot, 100)
	// pid 12's stat line is short: an error, and the rest still read.
	if err == nil || !strings.Contains(err.Error(), "pid 12") {
		t.Errorf("err = %v, want one about pid 12", err)
	}
	if len(got) != 4 {
		t.Fatalf("got %d processes", len(got))
	}
	p := got[0]
	start := boot.Add(2500 * time.Millisecond)
	want := Process{
		PID: 10, PPID: intp(1), State: "R", Comm: "my (weird) proc", UID: intp(1000), StartTime: &start,
		Argv: []string{"python3", "-m", "vllm serve", "--model", "/models/llama"}, Cwd: "/srv/my dir",
		NSPIDs: []int{10, 1}, RSSKiB: i64(2048), RssShmemKiB: i64(512),
		ModelPaths: []PathCheck{{Path: "/models/llama"}},
	}
	if !eqPtr(p.PPID, want.PPID) || p.State != want.State || p.Comm != want.Comm || !eqPtr(p.UID, want.UID) ||
		p.StartTime == nil || !p.StartTime.Equal(start) || !reflect.DeepEqual(p.Argv, want.Argv) || p.Cwd != want.Cwd ||
		!reflect.DeepEqual(p.NSPIDs, want.NSPIDs) || !eqPtr(p.RSSKiB, want.RSSKiB) || !eqPtr(p.RssShmemKiB, want.RssShmemKiB) ||
		!reflect.DeepEqual(p.ModelPaths, want.ModelPaths) || p.Cgroup.Unit != "vllm.service" {
		t.Errorf("got  %+v\nwant %+v", p, want)
	}
	if !got[1].Gone || got[1].PID != 11 {
		t.Errorf("gone process: %+v", got[1])
	}
	if p := got[2]; p.PID != 12 || p.State != "Z" || p.Comm != "x" || !p.ArgvTruncated || len(p.Argv) != 1 || len(p.Argv[0]) != maxArgvBytes {
		t.Errorf("pid 12: state %q comm %q truncated %v argv %d", p.State, p.Comm, p.ArgvTruncated, len(p.Argv))
	}
	if p := got[3]; p.PID != 13 || p.Argv != nil || p.Cwd != "" {
		t.Errorf("pid 13 (kernel thread): %+v", p)
	}
}

func TestProcsStartTimeNeedsBoot(t *testing.T) {
	got, _, err := ParseProcs(strings.NewReader("pid 1\nstat 1 (init) S 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0\nend\n"), nil, 0)
	if err != nil || len(got) != 1 || got[0].StartTime != nil || got[0].Comm != "init" {
		t.Fatalf("got %+v, %v", got, err)
	}
}

// TestFDsV2Denied reads the denied line with the PIDs the probe names since it names them,
// and without, and refuses what is not that line.
func TestFDsV2Denied(t *testing.T) {
	for in, want := range map[string]*FDsDenied{
		"denied 0\n":          {Links: 0},
		"denied 293 1\n":      {Links: 293, PIDs: []int{1}},
		"denied 4 12 7 900\n": {Links: 4, PIDs: []int{12, 7, 900}},
		"denied 4 x\n":        nil,
		"denied 4 0\n":        nil,
		"denied 17 " + strings.Repeat("5 ", 17) + "\n": nil,
	} {
		_, got, _, err := ParseFDsV2(strings.NewReader("/proc/1/fd\t3\t/dev/nvidia0\x00" + in))
		if !reflect.DeepEqual(got, want) || (want == nil) != (err != nil) {
			t.Errorf("%q: got %+v, %v; want %+v", in, got, err, want)
		}
	}
}

func TestFDs(t *testing.T) {
	in := "12 3 /dev/nvidia0\n12 4 /dev/nvidiactl\n13 7 /dev/shm/a b (deleted)\n13 8 /dev/shm/c\ndenied 5\n"
	fds, denied, _, err := ParseFDs(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []OpenFD{{12, 3, "/dev/nvidia0", false}, {12, 4, "/dev/nvidiactl", false}, {13, 7, "/dev/shm/a b", true}, {13, 8, "/dev/shm/c", false}}
	if !reflect.DeepEqual(fds, want) || !reflect.DeepEqual(denied, &FDsDenied{Links: 5}) {
		t.Errorf("got %+v denied %v", fds, showPtr(denied))
	}
	if _, _, _, err := ParseFDs(strings.NewReader(" 3 /dev/nvidia0\n")); err == nil {
		t.Error("want an error for a line without PID")
	}
}

func TestMaps(t *testing.T) {
	in := "/proc/7/maps:7f0000000000-7f0000100000 rw-s 00000000 00:1a 115                        /dev/shm/x y (deleted)\n" +
		"/proc/7/maps:7f0000100000-7f0000300000 rw-s 00100000 00:1a 115                        /dev/shm/x y (deleted)\n" +
		"/proc/7/maps:7f0000100000-7f0000300000 rw-s 00100000 00:1a 115                        /dev/shm/x y (deleted)\n" +
		"/proc/7/maps:7f0000400000-7f0000401000 r--s 00000000 00:1a 116                        /dev/shm/x y\n" +
		"/proc/3/maps:7f0000400000-7f0000401000 r--s 00000000 00:1a 116                        /dev/shm/x y\n" +
		"/proc/3/maps:7f0000500000-7f0000501000 r--p 00000000 08:01 9                          /home/u/a /dev/shm/b\n"
	got, err := ParseMaps(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []ShmMapping{{3, "/dev/shm/x y", false, 4096, "0:26:116"}, {7, "/dev/shm/x y", false, 4096, "0:26:116"}, {7, "/dev/shm/x y", true, 3 << 20, "0:26:115"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	if _, err := ParseMaps(strings.NewReader("/proc/7/maps:zz-1 rw-s 0 0 0 /dev/shm/x\n")); err == nil {
		t.Error("want an error for a bad range")
	}
}

func TestFDStat(t *testing.T) {
	in := "4096 /proc/5/fd/3\nstat: cannot statx '/proc/6/fd/4': No such file or directory\n10 /proc/6/fd/5\n"
	got, _, err := ParseFDStat(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if want := []FDSize{{PID: 5, FD: 3, Bytes: 4096}, {PID: 6, FD: 5, Bytes: 10}}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v", got)
	}
}

// TestFDStatFileID: since the probe asks stat for st_dev (%D, glibc's encoding in hex) and the
// inode, each fd's file has the identity its maps lines give it; lines without them (older
// probes) still read, with no identity.
func TestFDStatFileID(t *testing.T) {
	in := "0 4096 1a 115 /proc/5/fd/3\n1 10 /proc/6/fd/5\n2 7 10301 9 /proc/6/fd/6\n"
	got, _, err := ParseFDStatV2(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	zero, one, two := 0, 1, 2
	want := []FDSize{{PID: 5, FD: 3, Bytes: 4096, Links: &zero, File: "0:26:115"}, {PID: 6, FD: 5, Bytes: 10, Links: &one},
		{PID: 6, FD: 6, Bytes: 7, Links: &two, File: "259:1:9"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	maps, err := ParseMapsV2(strings.NewReader("/proc/5/maps:7f0000000000-7f0000001000 rw-s 00000000 00:1a 115 /dev/shm/x (deleted)\n"))
	if err != nil || len(maps) != 1 || maps[0].File != got[0].File {
		t.Errorf("maps %+v (%v): the file's identity differs from its fd's, %q", maps, err, got[0].File)
	}
	for _, bad := range []string{"0 1 zz 115 /proc/5/fd/3\n", "0 1 1a /proc/5/fd/3\n", "0 1 1a x /proc/5/fd/3\n"} {
		if _, _, err := ParseFDStatV2(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

func TestShmListing(t *testing.T) {
	in := "d\t80\t1700000000.5\t0\t/dev/shm\x00" +
		"d\t60\t1700000001.0000000000\t1000\t/dev/shm/dir\x00" +
		"f\t100\t1700000002\t1000\t/dev/shm/dir/a\x00" +
		"find: '/dev/shm/private': Permission denied\n" +
		"f\t50\t1700000003.25\t1000\t/dev/shm/dir/tab\there\nnewline\x00" +
		"l\t7\t1700000004.0\t0\t/dev/shm/link\x00" +
		"f\t1\t1700000005.0\t0\t/dev/shm/top\x00" +
		"find: '/dev/shm/other': Permission denied\n"
	got, _, err := ParseShmListing(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		path        string
		typ         byte
		bytes, tree int64
		uid         int
	}
	var rows []row
	for _, e := range got {
		rows = append(rows, row{e.Path, e.Type, e.Bytes, e.TreeBytes, e.UID})
	}
	want := []row{
		{"/dev/shm", 'd', 80, 151, 0},
		{"/dev/shm/dir", 'd', 60, 150, 1000},
		{"/dev/shm/dir/a", 'f', 100, 100, 1000},
		{"/dev/shm/dir/tab\there\nnewline", 'f', 50, 50, 1000},
		{"/dev/shm/link", 'l', 7, 0, 0},
		{"/dev/shm/top", 'f', 1, 1, 0},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("got  %+v\nwant %+v", rows, want)
	}
	if !got[0].MTime.Equal(time.Unix(1700000000, 5e8)) || !got[3].MTime.Equal(time.Unix(1700000003, 25e7)) {
		t.Errorf("mtimes %v %v", got[0].MTime, got[3].MTime)
	}
	if _, _, err := ParseShmListing(strings.NewReader("f\tx\t1\t0\t/dev/shm/a\x00")); err == nil {
		t.Error("want an error for a bad size")
	}
}

func TestDF(t *testing.T) {
	tests := []struct {
		name              string
		in                string
		size, used, avail *int64
		wantErr           bool
	}{
		{"GNU", "Filesystem     1024-blocks  Used Available Capacity Mounted on\ntmpfs             24683620     4  24683616       1% /dev/shm\n", i64(24683620 << 10), i64(4 << 10), i64(24683616 << 10), false},
		{"spaces and 512-blocks", "Filesystem 512-blocks Used Available Capacity Mounted on\nmy fs 100 50 50 50% /dev/my shm\n", i64(51200), i64(25600), i64(25600), false},
		{"error", "df: /dev/shm: No such file or directory\n", nil, nil, nil, true},
		{"garbage", "hello\n", nil, nil, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDF(strings.NewReader(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v", err)
			}
			if !eqPtr(got.SizeBytes, tt.size) || !eqPtr(got.UsedBytes, tt.used) || !eqPtr(got.AvailBytes, tt.avail) {
				t.Errorf("got %v %v %v", showPtr(got.SizeBytes), showPtr(got.UsedBytes), showPtr(got.AvailBytes))
			}
		})
	}
}

func TestUnits(t *testing.T) {
	in := "Id=vllm.service\nLoadState=loaded\nActiveState=active\nSubState=running\nMainPID=1234\nResult=success\n\n" +
		"MainPID=0\nId=run-u5.scope\nLoadState=not-found\nActiveState=inactive\nSubState=dead\nResult=success\n\n" +
		"System has not been booted with systemd as init system (PID 1). Can't operate.\n"
	got, _, err := ParseUnits(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Unit{
		{Name: "vllm.service", LoadState: "loaded", ActiveState: "active", SubState: "running", Result: "success", MainPID: intp(1234)},
		{Name: "run-u5.scope", LoadState: "not-found", ActiveState: "inactive", SubState: "dead", Result: "success", MainPID: intp(0)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestPasswdAndHost(t *testing.T) {
	names, err := ParsePasswd(strings.NewReader("root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/sh\nalias:x:1000:1000::/:/bin/sh\n"))
	if err != nil || !reflect.DeepEqual(names, map[int]string{0: "root", 1000: "alice"}) {
		t.Errorf("passwd: %v %v", names, err)
	}
	h, err := ParseHost(strings.NewReader("probe_version=1\nhostname=gpu01\nkernel=6.8.0\ntime=1700000100\nuptime=100.5\nbtime=1700000000\nclk_tck=\nuid=1000\nuser=alice\nnvidia_smi=/usr/bin/nvidia-smi\ntimeout=1\nfuture=x\n"))
	if err != nil {
		t.Fatal(err)
	}
	if h.Hostname != "gpu01" || h.ClockTicks != 100 || !eqPtr(h.UID, intp(1000)) || h.Time == nil || h.Time.Unix() != 1700000100 ||
		h.BootTime == nil || h.BootTime.Unix() != 1700000000 || !eqPtr(h.UptimeSeconds, ptr(100.5)) || !h.HasTimeout || h.NvidiaSMIPath != "/usr/bin/nvidia-smi" {
		t.Errorf("host: %+v", h)
	}
	if _, err := ParseHost(strings.NewReader("uid=root\n")); err == nil {
		t.Error("want an error for a bad uid")
	}
}

// shm_dev is stat's %D of /dev/shm, kept as the device part of a FileID, so that a deleted
// file's identity tells whether it is on this /dev/shm.
func TestHostShmDev(t *testing.T) {
	h, err := ParseHost(strings.NewReader("shm_dev=1a\n"))
	if err != nil || h.ShmDev != "0:26:" {
		t.Errorf("shm_dev=1a: %q, %v", h.ShmDev, err)
	}
	file, _, _ := fdstatFileID("1a 115 /proc/5/fd/3")
	if !strings.HasPrefix(file, h.ShmDev) {
		t.Errorf("the file %q is not on the device %q", file, h.ShmDev)
	}
	for _, bad := range []string{"shm_dev=zz\n", "shm_dev=1a2b3c4d5e6f7a8b9\n"} {
		if h, err := ParseHost(strings.NewReader(bad)); err == nil || h.ShmDev != "" {
			t.Errorf("%q: %q, %v", bad, h.ShmDev, err)
		}
	}
	if h, err := ParseHost(strings.NewReader("shm_dev=\n")); err != nil || h.ShmDev != "" {
		t.Errorf("empty shm_dev: %q, %v", h.ShmDev, err)
	}
}
