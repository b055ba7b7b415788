package k8stest

import (
	_ "embed"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/gputriage/gputriage/internal/scenario"
)

//go:embed kwok-stages.yaml
var kwokStages []byte

// execPath is the PATH an exec gets after the lab's own directories.
const execPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// kwokConfig writes kwok's --config: its stages (kwok-stages.yaml) and one ClusterExec that
// runs every pod's every exec here, locally, as kwok's child: PATH led by ExecBin (and the fake
// nvidia-smi's directory when o.SMI is set), then o.ExecEnv, in o.ExecDir. It returns that
// PATH too: kwok looks an exec's command up in its own PATH (Go's exec.Command, before the
// exec's environment applies), so kwok must run with it for a command in ExecBin to be found.
func (l *Lab) kwokConfig(o Options) (cfg, path string, err error) {
	path = l.ExecBin
	if err := os.MkdirAll(l.ExecBin, 0o755); err != nil {
		return "", "", err
	}
	if o.SMI != nil {
		smiDir := filepath.Join(l.Dir, "smi")
		if err := os.Mkdir(smiDir, 0o755); err != nil {
			return "", "", err
		}
		if err := scenario.WriteFakeSMI(smiDir, *o.SMI); err != nil {
			return "", "", err
		}
		path += ":" + smiDir
	}
	path += ":" + execPath
	type env struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	envs := []env{{"PATH", path}}
	for _, kv := range o.ExecEnv {
		k, v, _ := strings.Cut(kv, "=")
		envs = append(envs, env{k, v})
	}
	dir := o.ExecDir
	if dir == "" {
		dir = "/"
	}
	clusterExec := map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1",
		"kind":       "ClusterExec",
		"metadata":   map[string]any{"name": "gputriage-lab-local"},
		"spec": map[string]any{"execs": []any{map[string]any{
			"local": map[string]any{"workDir": dir, "envs": envs},
		}}},
	}
	b, err := json.Marshal(clusterExec)
	if err != nil {
		return "", "", err
	}
	cfg = filepath.Join(l.Dir, "kwok.yaml")
	body := append(append(append([]byte(nil), kwokStages...), "\n---\n"...), b...)
	return cfg, path, os.WriteFile(cfg, append(body, '\n'), 0o644)
}
