package parse

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestGPUCSVCorpus(t *testing.T) {
	files := corpusFiles(t, "query-gpu_*.csv")
	tests := []struct {
		file                     string
		name, bus, driver, mig   string
		total, used, free, resvd *int64
		util                     *int
	}{
		{"query-gpu_h200_590_allfields_idle.csv", "NVIDIA H200", "00000000:83:00.0", "590.48.01", "Disabled", i64(143771), i64(0), i64(143158), i64(614), intp(0)},
		{"query-gpu_h100-mig_590_allfields_load.csv", "NVIDIA H100 80GB HBM3", "00000000:00:09.0", "590.48.01", "Enabled", i64(81559), i64(11125), i64(69956), i64(479), nil},
		{"query-gpu_l40s_595_allfields_load.csv", "NVIDIA L40S", "00000000:01:00.0", "595.80", "", i64(46068), i64(1235), i64(44225), i64(609), intp(9)},
		{"query-gpu_rtx2080super_610_allfields_load.csv", "NVIDIA GeForce RTX 2080 SUPER", "00000000:0C:00.0", "610.57.04", "", i64(8192), i64(815), i64(6978), i64(400), intp(8)},
		{"query-gpu_windows_rtx2080super_591_allfields.csv", "NVIDIA GeForce RTX 2080 SUPER", "00000000:0C:00.0", "591.86", "", i64(8192), i64(702), i64(7286), i64(205), intp(0)},
		// No index, bus id, total or driver columns: unknown, never zero.
		{"query-gpu_tesla-p100_nounits.csv", "Tesla P100-PCIE-16GB", "", "", "", nil, i64(0), i64(16280), i64(103), intp(0)},
	}
	if len(tests) != len(files) {
		t.Errorf("%d query-gpu corpus files, %d tested", len(files), len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			b, ok := files[tt.file]
			if !ok {
				t.Skip("not in corpus")
			}
			gpus, err := ParseGPUCSV(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("ParseGPUCSV: %v", err)
			}
			if len(gpus) != 1 {
				t.Fatalf("got %d GPUs, want 1", len(gpus))
			}
			g := gpus[0]
			if g.Index != 0 || g.Name != tt.name || g.BusID != tt.bus || g.DriverVersion != tt.driver || g.MIGMode != tt.mig {
				t.Errorf("got index %d name %q bus %q driver %q mig %q", g.Index, g.Name, g.BusID, g.DriverVersion, g.MIGMode)
			}
			if !strings.HasPrefix(g.UUID, "GPU-") {
				t.Errorf("uuid %q", g.UUID)
			}
			for _, c := range []struct {
				field     string
				got, want *int64
			}{{"total", g.MemoryTotalMiB, tt.total}, {"used", g.MemoryUsedMiB, tt.used}, {"free", g.MemoryFreeMiB, tt.free}, {"reserved", g.MemoryReservedMiB, tt.resvd}} {
				if !eqPtr(c.got, c.want) {
					t.Errorf("memory %s = %v, want %v", c.field, showPtr(c.got), showPtr(c.want))
				}
			}
			if !eqPtr(g.UtilizationPct, tt.util) {
				t.Errorf("utilization = %v, want %v", showPtr(g.UtilizationPct), showPtr(tt.util))
			}
		})
	}
}

func TestGPUCSV(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []GPU
		wantErr bool
	}{
		{
			name: "probe header nounits",
			in: "index, uuid, name, pci.bus_id, memory.total [MiB], memory.used [MiB], memory.free [MiB], utilization.gpu [%], compute_mode, driver_version, memory.reserved [MiB], mig.mode.current\n" +
				"0, GPU-a, NVIDIA A100-SXM4-80GB, 00000000:07:00.0, 81920, 100, 81000, 45, Default, 550.54.15, 500, Disabled\n" +
				"1, GPU-b, NVIDIA A100-SXM4-80GB, 00000000:0B:00.0, [Insufficient Permissions], [Unknown Error], N/A, [Not Supported], Exclusive_Process, 550.54.15, , [N/A]\n",
			want: []GPU{
				{Index: 0, UUID: "GPU-a", Name: "NVIDIA A100-SXM4-80GB", BusID: "00000000:07:00.0", MemoryTotalMiB: i64(81920), MemoryUsedMiB: i64(100), MemoryFreeMiB: i64(81000), MemoryReservedMiB: i64(500), UtilizationPct: intp(45), ComputeMode: "Default", DriverVersion: "550.54.15", MIGMode: "Disabled"},
				{Index: 1, UUID: "GPU-b", Name: "NVIDIA A100-SXM4-80GB", BusID: "00000000:0B:00.0", ComputeMode: "Exclusive_Process", DriverVersion: "550.54.15"},
			},
		},
		{
			name: "no header, units, basic field set",
			in:   "3, GPU-c, Tesla V100, 00000000:3B:00.0, 16384 MiB, 12 MiB, 16000 MiB, 7 %, Default, 470.1\r\n",
			want: []GPU{{Index: 3, UUID: "GPU-c", Name: "Tesla V100", BusID: "00000000:3B:00.0", MemoryTotalMiB: i64(16384), MemoryUsedMiB: i64(12), MemoryFreeMiB: i64(16000), UtilizationPct: intp(7), ComputeMode: "Default", DriverVersion: "470.1"}},
		},
		{
			name: "any column order, extra columns, no index",
			in:   "memory.used [MiB], fan.speed [%], name, uuid\n5 MiB, [N/A], GPU X, GPU-x\n6 MiB, 30 %, GPU Y, GPU-y\n",
			want: []GPU{{Index: 0, UUID: "GPU-x", Name: "GPU X", MemoryUsedMiB: i64(5)}, {Index: 1, UUID: "GPU-y", Name: "GPU Y", MemoryUsedMiB: i64(6)}},
		},
		{
			name: "a GPU name with a comma",
			in:   "index, name, uuid\n0, Weird, Inc. GPU, GPU-w\n",
			want: []GPU{{Index: 0, Name: "Weird, Inc. GPU", UUID: "GPU-w"}},
		},
		{
			name: "one GPU lost among good ones",
			in: "Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost.  Reboot the system to recover this GPU\n" +
				"index, uuid, name, memory.total [MiB]\n0, GPU-a, A, 100\n",
			want:    []GPU{{Index: 0, UUID: "GPU-a", Name: "A", MemoryTotalMiB: i64(100)}},
			wantErr: true,
		},
		{name: "header only", in: "index, uuid, name\n"},
		{name: "empty", in: ""},
		{name: "an error, not CSV", in: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", wantErr: true},
		{
			name:    "bad number",
			in:      "index, memory.total [MiB]\n0, lots\n",
			want:    []GPU{{Index: 0}},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseGPUCSV(strings.NewReader(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrParse) {
				t.Errorf("error does not wrap ErrParse: %v", err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d GPUs %+v, want %d", len(got), got, len(tt.want))
			}
			for i := range got {
				if d := diffGPU(got[i], tt.want[i]); d != "" {
					t.Errorf("GPU %d: %s", i, d)
				}
			}
		})
	}
}

func diffGPU(a, b GPU) string {
	var d []string
	if a.Index != b.Index || a.UUID != b.UUID || a.Name != b.Name || a.BusID != b.BusID || a.ComputeMode != b.ComputeMode || a.DriverVersion != b.DriverVersion || a.MIGMode != b.MIGMode {
		d = append(d, "strings/index differ")
	}
	if !eqPtr(a.MemoryTotalMiB, b.MemoryTotalMiB) || !eqPtr(a.MemoryUsedMiB, b.MemoryUsedMiB) || !eqPtr(a.MemoryFreeMiB, b.MemoryFreeMiB) || !eqPtr(a.MemoryReservedMiB, b.MemoryReservedMiB) || !eqPtr(a.UtilizationPct, b.UtilizationPct) {
		d = append(d, "numbers differ")
	}
	if d == nil {
		return ""
	}
	return strings.Join(d, ", ") + ": got " + gpuString(a) + " want " + gpuString(b)
}

func gpuString(g GPU) string {
	return fmt.Sprintf("{%d %q %q %q total=%v used=%v free=%v resv=%v util=%v %q %q %q}", g.Index, g.UUID, g.Name, g.BusID,
		showPtr(g.MemoryTotalMiB), showPtr(g.MemoryUsedMiB), showPtr(g.MemoryFreeMiB), showPtr(g.MemoryReservedMiB), showPtr(g.UtilizationPct),
		g.ComputeMode, g.DriverVersion, g.MIGMode)
}
