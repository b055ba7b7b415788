package probe

import (
	"regexp"
	"strings"
	"testing"
)

// The script runs exactly the queries the gate runs (GPUQuery, GPUBasicQuery, AppsQuery),
// each placeholder is filled, and no field can be more than a bare word in shell text.
func TestScriptRunsTheQueries(t *testing.T) {
	if left := regexp.MustCompile(`@[A-Za-z]\w*@`).FindAllString(Script, -1); left != nil {
		t.Errorf("placeholders left in the rendered script: %q", left)
	}
	for _, p := range []string{"@GPUBaseFields@", "@gpuExtraFields@", "@AppsFields@", "@SMIFormat@"} {
		if !strings.Contains(script, p) {
			t.Errorf("probe.sh lacks %s", p)
		}
	}
	if !strings.Contains(Script, "\nGPU_BASE="+GPUBaseFields+"\n") {
		t.Errorf("the script's GPU_BASE is not GPUBaseFields")
	}
	for _, args := range [][]string{GPUQuery(), GPUBasicQuery(), AppsQuery()} {
		// The script names the base fields $GPU_BASE.
		want := ` "$SMI" ` + strings.Replace(strings.Join(args, " "), GPUBaseFields, "$GPU_BASE", 1) + "\n"
		if strings.Count(Script, want) != 1 {
			t.Errorf("the script does not run nvidia-smi%s once", strings.TrimSuffix(want, "\n")[7:])
		}
	}
	if n := strings.Count(Script, `"$SMI" --query`); n != 3 {
		t.Errorf("the script runs %d nvidia-smi queries, GPUQuery, GPUBasicQuery and AppsQuery are 3", n)
	}
	word := regexp.MustCompile(`^[a-z_.]+(,[a-z_.]+)*$`)
	for _, f := range []string{GPUFields, AppsFields, SMIFormat} {
		if !word.MatchString(f) {
			t.Errorf("%q is not bare words: it is written into shell text", f)
		}
	}
	if !strings.HasPrefix(AppsFields, "pid,") {
		t.Errorf("AppsFields %q: the script's apps-alive reads the PID first", AppsFields)
	}
}
