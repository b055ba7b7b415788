package parse

import (
	"bytes"
	"strings"
	"testing"
)

func TestAppsCSVCorpus(t *testing.T) {
	files := corpusFiles(t, "*-apps_*.csv")
	tests := []struct {
		file  string
		n     int
		first ComputeApp
	}{
		{"compute-apps_h100-mig_590_load.csv", 3, ComputeApp{PID: 21180, GPUUUID: "GPU-00000000-0000-0000-0000-000000000000", UsedMiB: i64(2296), ProcessName: "/root/tools/memhog"}},
		{"compute-apps_rtx4080super_serial-na_kwin.csv", 3, ComputeApp{PID: 2165, GPUUUID: "GPU-00000000-0000-0000-0000-000000000000", UsedMiB: i64(25), ProcessName: "/usr/bin/kwin_wayland"}},
		{"compute-apps_windows_na-used-memory_paths-with-spaces.csv", 21, ComputeApp{PID: 2140, GPUUUID: "GPU-00000000-0000-0000-0000-000000000000", ProcessName: `C:\Windows\System32\dwm.exe`}},
		{"compute-apps_empty_header-only_h100.csv", 0, ComputeApp{}},
		{"accounted-apps_header-only_h100-mig.csv", 0, ComputeApp{}},
	}
	if len(tests) != len(files) {
		t.Errorf("%d apps corpus files, %d tested", len(files), len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			b, ok := files[tt.file]
			if !ok {
				t.Skip("not in corpus")
			}
			apps, err := ParseAppsCSV(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("ParseAppsCSV: %v", err)
			}
			if len(apps) != tt.n {
				t.Fatalf("got %d apps, want %d", len(apps), tt.n)
			}
			if tt.n == 0 {
				return
			}
			if d := diffApp(apps[0], tt.first); d != "" {
				t.Errorf("first app: %s", d)
			}
			if strings.HasPrefix(tt.file, "compute-apps_windows") {
				for _, a := range apps {
					if a.UsedMiB != nil {
						t.Errorf("pid %d: used memory %d, want nil ([N/A])", a.PID, *a.UsedMiB)
					}
				}
				want := map[string]bool{
					`C:\Program Files\NVIDIA Corporation\NVIDIA App\CEF\NVIDIA Overlay.exe`:                     true,
					`C:\Program Files (x86)\Microsoft\EdgeWebView\Application\149.0.4022.80\msedgewebview2.exe`: true,
				}
				for _, a := range apps {
					delete(want, a.ProcessName)
				}
				if len(want) > 0 {
					t.Errorf("names not found intact: %v", want)
				}
			}
		})
	}
}

func TestAppsCSV(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []ComputeApp
		wantErr bool
	}{
		{
			name: "probe header",
			in:   "pid, gpu_uuid, used_gpu_memory [MiB], process_name\n1234, GPU-a, 500, python3\n",
			want: []ComputeApp{{PID: 1234, GPUUUID: "GPU-a", UsedMiB: i64(500), ProcessName: "python3"}},
		},
		{
			name: "used_memory, other order, unquoted commas and spaces in the name",
			in:   "process_name, used_memory [MiB], pid, gpu_uuid\n/opt/my app/run, fast, 10 MiB, 77, GPU-b\n",
			want: []ComputeApp{{PID: 77, GPUUUID: "GPU-b", UsedMiB: i64(10), ProcessName: "/opt/my app/run, fast"}},
		},
		{
			name: "name last, commas kept exactly, parentheses, backslashes",
			in:   "pid, gpu_uuid, used_gpu_memory [MiB], process_name\n9, GPU-c, 1 MiB, C:\\Program Files (x86)\\a,b, c.exe\n",
			want: []ComputeApp{{PID: 9, GPUUUID: "GPU-c", UsedMiB: i64(1), ProcessName: `C:\Program Files (x86)\a,b, c.exe`}},
		},
		{
			name: "quoted name",
			in:   "pid, gpu_uuid, used_gpu_memory [MiB], process_name\n9, GPU-c, 1, \"a, b\"\n",
			want: []ComputeApp{{PID: 9, GPUUUID: "GPU-c", UsedMiB: i64(1), ProcessName: "a, b"}},
		},
		{
			name: "no header",
			in:   "42, GPU-d, [N/A], /usr/bin/x\n",
			want: []ComputeApp{{PID: 42, GPUUUID: "GPU-d", ProcessName: "/usr/bin/x"}},
		},
		{name: "old driver text", in: "No running processes found\n"},
		{
			name:    "bad pid",
			in:      "pid, gpu_uuid, used_gpu_memory [MiB], process_name\nx, GPU-a, 1, p\n",
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseAppsCSV(strings.NewReader(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if d := diffApp(got[i], tt.want[i]); d != "" {
					t.Errorf("app %d: %s", i, d)
				}
			}
		})
	}
}

func diffApp(a, b ComputeApp) string {
	if a.PID == b.PID && a.GPUUUID == b.GPUUUID && a.ProcessName == b.ProcessName && eqPtr(a.UsedMiB, b.UsedMiB) {
		return ""
	}
	return "got " + appString(a) + " want " + appString(b)
}

func appString(a ComputeApp) string {
	return strings.Join([]string{itoa(a.PID), a.GPUUUID, anyString(showPtr(a.UsedMiB)), a.ProcessName}, " | ")
}
