package simfleet

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"slices"

	"github.com/gputriage/gputriage/parse"
)

// LimitNonce is the nonce of LimitCapture's output.
const LimitNonce = "11a1711a1711a1711a1711a1711a1711"

// limitGPUs is how many GPUs the records of a LimitCapture refer to when smi-gpu is not full.
const limitGPUs = 8

// A filler writes the i-th record of a section (records share one space of PIDs, GPUs, uids
// and /dev/shm paths, so a capture with several full sections joins them), given how many GPUs
// the capture lists.
type filler struct {
	head   string // written once, first
	record func(b *bytes.Buffer, i, gpus int)
	tail   string // written once, last (counted in the bound)
}

// limitPID is the i-th record's process.
func limitPID(i int) int { return 100000 + i }

// limitUUID is GPU g's UUID.
func limitUUID(g int) string { return fmt.Sprintf("GPU-%08d-0000-0000-0000-000000000000", g) }

// fillers fill each section the client knows with well-formed, distinct records: the most
// records of that kind a host could send within the client's own bound.
var fillers = map[string]filler{
	"host": {head: "probe_version=2\nhostname=limit\nkernel=6.8.0-60-generic\ntime=1796033513\nuptime=864000.00\nbtime=1795169513\nclk_tck=100\nuid=0\nuser=root\nnvidia_smi=/usr/bin/nvidia-smi\ntimeout=1\n",
		record: func(b *bytes.Buffer, i, _ int) { fmt.Fprintf(b, "x%d=%d\n", i, i) }},
	"smi-gpu": {head: "index, uuid, name, pci.bus_id, memory.total [MiB], memory.used [MiB], memory.free [MiB], utilization.gpu [%], compute_mode, driver_version, memory.reserved [MiB], mig.mode.current, minor_number\n",
		record: func(b *bytes.Buffer, i, _ int) {
			fmt.Fprintf(b, "%d, %s, NVIDIA H100 80GB HBM3, 00000000:%02X:00.0, 81559, 80000, 1000, 97, Default, 575.57.08, 559, Disabled, %d\n", i, limitUUID(i), i%256, i)
		}},
	"smi-gpu-basic": {head: "index, uuid, name, pci.bus_id, memory.total [MiB], memory.used [MiB], memory.free [MiB], utilization.gpu [%], compute_mode, driver_version\n",
		record: func(b *bytes.Buffer, i, _ int) {
			fmt.Fprintf(b, "%d, %s, NVIDIA H100 80GB HBM3, 00000000:%02X:00.0, 81559, 80000, 1000, 97, Default, 575.57.08\n", i, limitUUID(i), i%256)
		}},
	"smi-apps": {head: "pid, gpu_uuid, used_memory [MiB]\n",
		record: func(b *bytes.Buffer, i, gpus int) {
			uuid := fmt.Sprintf("MIG-%d", i%7) // short, to list the most apps: not in the GPU list
			if i%8 == 0 {
				uuid = limitUUID((i / 8) % gpus)
			}
			fmt.Fprintf(b, "%d, %s, %d\n", limitPID(i), uuid, 16+i%64)
		}},
	// Every other listed PID gone at once after the listing: each gone one a dead-pid-memory
	// question over every device holder.
	"apps-alive": {record: func(b *bytes.Buffer, i, _ int) {
		state := "alive"
		if i%2 == 0 {
			state = "gone"
		}
		fmt.Fprintf(b, "%s %d\n", state, limitPID(i))
	}},
	"smi-pids": {head: "\n==============NVSMI LOG==============\n\nDriver Version                            : 575.57.08\n\nGPU 00000000:18:00.0\n    Processes\n",
		record: func(b *bytes.Buffer, i, _ int) {
			typ := "C"
			if i%3 == 0 {
				typ = "G"
			}
			fmt.Fprintf(b, "        GPU instance ID                   : N/A\n        Compute instance ID               : N/A\n"+
				"        Process ID                        : %d\n            Type                          : %s\n"+
				"            Name                          : python3\n            Used GPU Memory               : %d MiB\n", limitPID(i), typ, 16+i%64)
		}},
	"shm-dirs": {record: func(b *bytes.Buffer, i, _ int) {
		fmt.Fprintf(b, "file %d /dev/shm/d%d/s%d\x00owner %d\x00dir %d %d 41ff 25 /proc/%d/root/dev/shm/d%d\x00dir 0 0 43ff 25 /proc/%d/root/dev/shm\x00dir 0 0 41ed 2049 /proc/%d/root/dev\x00",
			limitPID(i), i/100, i, 1000+i%20, 1000+i%20, 1000+i%20, limitPID(i), i/100, limitPID(i), limitPID(i))
	}},
	"fds": {tail: "denied 0\n", record: func(b *bytes.Buffer, i, gpus int) {
		if i%2 == 0 {
			fmt.Fprintf(b, "/proc/%d/fd\t%d\t/dev/nvidia%d\x00", limitPID(i/2), 4, (i/2)%gpus)
		} else {
			fmt.Fprintf(b, "/proc/%d/fd\t%d\t/dev/shm/s%d (deleted)\x00", limitPID(i/2), 5, i/2)
		}
	}},
	"maps": {record: func(b *bytes.Buffer, i, _ int) {
		fmt.Fprintf(b, "/proc/%d/maps:7f0000000000-7f0000400000 rw-s 00000000 00:1a %d /dev/shm/s%d (deleted)\n", limitPID(i), 1000+i, i)
	}},
	"fdstat": {record: func(b *bytes.Buffer, i, _ int) {
		fmt.Fprintf(b, "0 4194304 1a %d /proc/%d/fd/5\n", 1000+i, limitPID(i))
	}},
	"procs": {record: func(b *bytes.Buffer, i, _ int) {
		pid := limitPID(i)
		fmt.Fprintf(b, "pid %d\x00stat %d (python3) S 1 %d %d 0 -1 4194304 1711 0 0 0 5 5 0 0 20 0 1 0 %d 17895424 3047 18446744073709551615 4321280 7148169 140721196187360 0 0 0 0 16781312 16386 1 0 0 17 1 0 0 0 0 0 9723336 11027064 770912256 140721196193993 140721196194125 140721196194125 140721196195815 0\n\x00", pid, pid, pid, pid, 185535+i)
		fmt.Fprintf(b, "status Name:\tpython3\x00status PPid:\t1\x00status Uid:\t%d\t%d\t%d\t%d\x00cgroup 0::/system.slice/train-%d.service\x00argv %s\n\x00cwd /home/u%d\n\x00end\x00",
			1000+i%20, 1000+i%20, 1000+i%20, 1000+i%20, i, limitArgv(i), i%20)
	}},
	"users": {record: func(b *bytes.Buffer, i, _ int) { fmt.Fprintf(b, "u%d:x:%d\n", i, 1000+i) }},
	"units": {record: func(b *bytes.Buffer, i, _ int) {
		fmt.Fprintf(b, "Id=train-%d.service\nLoadState=loaded\nActiveState=active\nSubState=running\nMainPID=%d\nResult=success\n\n", i, limitPID(i))
	}},
	"user-units": {record: func(b *bytes.Buffer, i, _ int) {
		fmt.Fprintf(b, "%d 0 %s\n", 1000+i, base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "Id=app-%d.service\nLoadState=loaded\nActiveState=active\nSubState=running\nMainPID=%d\nResult=success\n", i, limitPID(i))))
	}},
	"shm-df": {head: "Filesystem     1024-blocks  Used Available Capacity Mounted on\ntmpfs            1056763660 104857600 951906060  10% /dev/shm\n",
		record: func(b *bytes.Buffer, i, _ int) { fmt.Fprintf(b, "tmpfs%d 100 1 99 1%% /mnt/t%d\n", i, i) }},
	"shm-ls": {head: "d\t40\t1796033513.9017550940\t0\t/dev/shm\x00", record: func(b *bytes.Buffer, i, _ int) {
		if i%100 == 0 {
			fmt.Fprintf(b, "d\t2000\t1796033000.5\t%d\t/dev/shm/d%d\x00", 1000+i%20, i/100)
			return
		}
		fmt.Fprintf(b, "f\t4194304\t1796033000.5\t%d\t/dev/shm/d%d/s%d\x00", 1000+i%20, i/100, i)
	}},
	"ancestors": {record: func(b *bytes.Buffer, i, _ int) {
		fmt.Fprintf(b, "%d %d %d -\n", 50000+i, 50001+i, 1000+i%20)
	}},
	"slurm": {head: "tz +0000\n", tail: "timeouts 30 60\n", record: func(b *bytes.Buffer, i, _ int) {
		rec := fmt.Sprintf("JobId=%d JobName=train%d UserId=u%d(%d) JobState=RUNNING StartTime=2026-11-30T10:00:00 EndTime=Unknown NodeList=limit MinCPUsNode=1\n", 1000+i, i, i%20, 1000+i%20)
		fmt.Fprintf(b, "%d 0 %s\n", 1000+i, base64.StdEncoding.EncodeToString([]byte(rec)))
	}},
}

// limitArgv is the i-th process's command line, base64-encoded.
func limitArgv(i int) string {
	return base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "python3\x00train.py\x00--model-path\x00/data/models/m%d\x00", i))
}

// FilledSections lists the sections LimitCapture can fill, sorted.
func FilledSections() []string {
	var names []string
	for n := range fillers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// LimitCapture builds a well-formed version 2 capture in which each section named in full
// holds as many records as fit the client's own bound for it (parse.SectionLimit), and every
// other section the fillers know holds one record. It exists to show that the client's cost
// is bounded whatever a host sends; it panics on a name it has no filler for.
func LimitCapture(full ...string) []byte { return LimitCaptureAt(1, full...) }

// LimitCaptureAt is LimitCapture with each full section filled to 1/div of its bound: the
// peer a test of linear cost compares with.
func LimitCaptureAt(div int, full ...string) []byte {
	var b bytes.Buffer
	b.WriteString(parse.CaptureHeader(LimitNonce))
	gpus := limitGPUs
	if slices.Contains(full, "smi-gpu") {
		_, gpus = fill(fillers["smi-gpu"], "smi-gpu", -1, limitGPUs, div)
	}
	for _, name := range FilledSections() {
		if name == "smi-gpu-basic" && !slices.Contains(full, name) {
			continue // present only when the driver refused fields: it would take precedence
		}
		f, ok := fillers[name]
		if !ok {
			panic("simfleet: no filler for section " + name)
		}
		n := 1
		if slices.Contains(full, name) {
			n = -1
		}
		if name == "smi-gpu" && n == 1 {
			n = gpus
		}
		body, _ := fill(f, name, n, gpus, div)
		stream := fmt.Appendf(body, "\n@@gputriage %s rc=0\n", LimitNonce)
		fmt.Fprintf(&b, "@@gputriage %s begin %s limit=%d\n", LimitNonce, name, parse.SectionLimit(name))
		if parse.IsBase64Section(name) {
			enc := base64.StdEncoding.EncodeToString(stream)
			for len(enc) > 76 {
				b.WriteString(enc[:76] + "\n")
				enc = enc[76:]
			}
			b.WriteString(enc + "\n")
		} else {
			b.Write(stream)
		}
		fmt.Fprintf(&b, "@@gputriage %s end %s\n", LimitNonce, name)
	}
	fmt.Fprintf(&b, "@@gputriage %s done\n", LimitNonce)
	for _, name := range full {
		if _, ok := fillers[name]; !ok {
			panic("simfleet: no filler for section " + name)
		}
	}
	// As the client holds a host's output: exactly its bytes (sshexec grows its buffer up to
	// its bound, never past it), not a buffer grown by doubling.
	return bytes.Clone(b.Bytes())
}

// fill writes a section's body and says how many records it holds: n records, or (n < 0) as
// many as fit 1/div of its bound.
func fill(f filler, name string, n, gpus, div int) ([]byte, int) {
	limit := parse.SectionLimit(name) / div
	var b, rec bytes.Buffer
	b.WriteString(f.head)
	i := 0
	for ; n < 0 || i < n; i++ {
		rec.Reset()
		f.record(&rec, i, gpus)
		if n < 0 && b.Len()+rec.Len()+len(f.tail) > limit {
			break
		}
		b.Write(rec.Bytes())
	}
	b.WriteString(f.tail)
	return b.Bytes(), i
}
