package simfleet

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// SyntheticNonce is the nonce of SyntheticCapture's output.
const SyntheticNonce = "5e1f5e1f5e1f5e1f5e1f5e1f5e1f5e1f"

// SyntheticCapture builds a large, well-formed capture of a busy 8-GPU host: holders
// processes each holding /dev/nvidiactl and one /dev/nvidiaN and listed by nvidia-smi, and
// shmEntries entries under /dev/shm (directories of 100 files). Section limits are raised to
// fit, so the parser sees every record (the probe's own limits would cut such a host short).
// It exists for benchmarks: parse, diagnose and report at the scale of a very crowded host.
func SyntheticCapture(holders, shmEntries int) []byte {
	const n = SyntheticNonce
	var b strings.Builder
	sec := func(name string, body func(*strings.Builder), rc int) {
		var s strings.Builder
		body(&s)
		limit := max(65536, s.Len()+1024)
		fmt.Fprintf(&b, "@@gputriage %s begin %s limit=%d\n%s\n@@gputriage %s rc=%d\n@@gputriage %s end %s\n",
			n, name, limit, s.String(), n, rc, n, name)
	}
	fmt.Fprintf(&b, "gputriage-capture v1 nonce=%s\n", n)
	sec("host", func(s *strings.Builder) {
		s.WriteString("probe_version=1\nhostname=synthetic\nkernel=6.8.0-60-generic\ntime=1796033513\nuptime=864000.00\nbtime=1795169513\nclk_tck=100\nuid=0\nuser=root\nnvidia_smi=/usr/bin/nvidia-smi\ntimeout=1\n")
	}, 0)
	sec("smi-gpu", func(s *strings.Builder) {
		s.WriteString("index, uuid, name, pci.bus_id, memory.total [MiB], memory.used [MiB], memory.free [MiB], utilization.gpu [%], compute_mode, driver_version, memory.reserved [MiB], mig.mode.current\n")
		for g := range 8 {
			fmt.Fprintf(s, "%d, GPU-00000000-0000-0000-0000-%012d, NVIDIA H100 80GB HBM3, 00000000:%02X:00.0, 81559, 80000, 1000, 97, Default, 575.57.08, 559, Disabled\n", g, g, 0x18+g*0x10)
		}
	}, 0)
	sec("smi-apps", func(s *strings.Builder) {
		s.WriteString("pid, gpu_uuid, used_memory [MiB], process_name\n")
		for i := range holders {
			fmt.Fprintf(s, "%d, GPU-00000000-0000-0000-0000-%012d, %d, /usr/bin/python3\n", 10000+i, i%8, 16+i%64)
		}
	}, 0)
	sec("fds", func(s *strings.Builder) {
		for i := range holders {
			fmt.Fprintf(s, "%d 3 /dev/nvidiactl\n%d 4 /dev/nvidia%d\n", 10000+i, 10000+i, i%8)
		}
		s.WriteString("denied 0\n")
	}, 0)
	sec("maps", func(s *strings.Builder) {
		for i := range min(holders, 1000) {
			fmt.Fprintf(s, "/proc/%d/maps:7fb0fd235000-7fb0fd635000 rw-s 00000000 00:1a %d                        /dev/shm/job%d/seg\n", 10000+i, 100+i, i%(max(shmEntries/100, 1)))
		}
	}, 0)
	sec("fdstat", func(s *strings.Builder) {}, 0)
	sec("procs", func(s *strings.Builder) {
		for i := range holders {
			pid := 10000 + i
			argv := base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("python3\x00-m\x00torch.distributed.run\x00--nproc-per-node=8\x00train.py\x00--model-path\x00/data/models/m%d\x00", i%50)))
			fmt.Fprintf(s, "pid %d\nstat %d (python3) S 1 %d %d 0 -1 4194304 1711 0 0 0 5 5 0 0 20 0 1 0 %d 17895424 3047 18446744073709551615 4321280 7148169 140721196187360 0 0 0 0 16781312 16386 1 0 0 17 1 0 0 0 0 0 9723336 11027064 770912256 140721196193993 140721196194125 140721196194125 140721196195815 0\n",
				pid, pid, pid, pid, 185535+i)
			fmt.Fprintf(s, "status Name:\tpython3\nstatus State:\tS (sleeping)\nstatus PPid:\t1\nstatus Uid:\t%d\t%d\t%d\t%d\nstatus NSpid:\t%d\nstatus VmRSS:\t   12584 kB\nstatus RssShmem:\t       0 kB\n", 1000+i%20, 1000+i%20, 1000+i%20, 1000+i%20, pid)
			fmt.Fprintf(s, "cgroup 0::/system.slice/train-%d.service\nargv %s\ncwd /home/u%d\npath exists /data/models/m%d\nend\n", i%20, argv, i%20, i%50)
		}
	}, 0)
	sec("users", func(s *strings.Builder) {
		for u := range 20 {
			fmt.Fprintf(s, "u%d:x:%d:%d::/home/u%d:/bin/bash\n", u, 1000+u, 1000+u, u)
		}
	}, 0)
	sec("units", func(s *strings.Builder) {
		for u := range 20 {
			if u > 0 {
				s.WriteString("\n")
			}
			fmt.Fprintf(s, "Id=train-%d.service\nLoadState=loaded\nActiveState=active\nSubState=running\nMainPID=%d\nResult=success\n", u, 10000+u)
		}
	}, 0)
	sec("shm-df", func(s *strings.Builder) {
		s.WriteString("Filesystem     1024-blocks  Used Available Capacity Mounted on\ntmpfs            1056763660 104857600 951906060  10% /dev/shm\n")
	}, 0)
	sec("shm-ls", func(s *strings.Builder) {
		s.WriteString("d\t40\t1796033513.9017550940\t0\t/dev/shm\x00")
		for i := 1; i < shmEntries; i++ {
			dir := (i - 1) / 100
			if (i-1)%100 == 0 {
				fmt.Fprintf(s, "d\t2000\t1796033000.5\t%d\t/dev/shm/job%d\x00", 1000+dir%20, dir)
				continue
			}
			fmt.Fprintf(s, "f\t%d\t1796033000.5\t%d\t/dev/shm/job%d/seg%d\x00", 4096*(i%97+1), 1000+dir%20, dir, i)
		}
	}, 0)
	fmt.Fprintf(&b, "@@gputriage %s done\n", n)
	return []byte(b.String())
}
