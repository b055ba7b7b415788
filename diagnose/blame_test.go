package diagnose

import "testing"

func TestBlamedGPUs(t *testing.T) {
	r := Result{Findings: []Finding{
		{Code: CodeGPUBusy, Severity: Info, GPUs: []int{0, 1, 2, 3}},
		{Code: CodeMemoryImbalance, Severity: Error, GPUs: []int{0, 1, 2, 3}, PIDs: []int{7, 8},
			Imbalance: &Imbalance{Short: []ShortGPU{{Index: 2}}, Leftover: []int{7}, Healthy: []int{8}}},
		{Code: CodeShmDeletedMapped, Severity: Warning, GPUs: []int{2, 3}, PIDs: []int{7, 9}},
		{Code: CodeGhostMemory, Severity: Critical, GPUs: []int{5}},
	}}
	got := r.BlamedGPUs()
	want := map[int]Severity{2: Error, 3: Warning, 5: Critical}
	if len(got) != len(want) {
		t.Fatalf("BlamedGPUs = %v, want %v", got, want)
	}
	for g, s := range want {
		if got[g] != s {
			t.Errorf("BlamedGPUs = %v, want %v", got, want)
		}
	}
	gotPIDs, wantPIDs := r.BlamedPIDs(), map[int]Severity{7: Error, 9: Warning}
	if len(gotPIDs) != len(wantPIDs) || gotPIDs[7] != Error || gotPIDs[9] != Warning {
		t.Errorf("BlamedPIDs = %v, want %v", gotPIDs, wantPIDs)
	}
}
