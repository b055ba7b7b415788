package report

import (
	"strings"
	"testing"

	"github.com/gputriage/gputriage/diagnose"
)

// A process's pod in the process table: only a pod the evidence says is gone reads "deleted";
// a static pod's (its mirror under another UID) and one that started while the probe ran do not.
func TestOwnerK8sPod(t *testing.T) {
	for _, tc := range []struct {
		pod     diagnose.PodFacts
		want    string
		deleted bool
	}{
		{diagnose.PodFacts{UID: "u1", Gone: true}, "k8s pod u1 (deleted)", true},
		{diagnose.PodFacts{UID: "5f0c3ad2b1e94f7a8c6d2e1b0a9f8e7d", Gone: true, Static: true}, "k8s static pod 5f0c3ad2b1e94f7a8c6d2e1b0a9f8e7d", false},
		{diagnose.PodFacts{UID: "u2", Gone: true, StartedDuringProbe: true}, "k8s pod u2 (not in the API; started during the probe)", false},
		{diagnose.PodFacts{UID: "u3", Namespace: "ml", Name: "a", GoneDuringProbe: true}, "pod ml/a (deleted during the probe)", true},
	} {
		got := owner(diagnose.GPUProcess{Pod: &tc.pod})
		if got != tc.want || strings.Contains(got, "(deleted)") && !tc.deleted {
			t.Errorf("owner(%+v) = %q, want %q", tc.pod, got, tc.want)
		}
	}
}
