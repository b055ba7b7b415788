package scenario

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// WriteModule writes the stand-in server below dir (a PYTHONPATH entry) as the Python module
// module, e.g. "sglang.launch_server", so that python3 -m module runs it: for Start, and for a
// real manager that starts the server itself (a systemd unit's ExecStart, a container, a
// Slurm job), with Server.Env as its environment.
func WriteModule(dir, module string) error {
	parts := strings.Split(module, ".")
	pkg := filepath.Join(append([]string{dir}, parts[:len(parts)-1]...)...)
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		return err
	}
	for d := pkg; d != dir; d = filepath.Dir(d) {
		if err := os.WriteFile(filepath.Join(d, "__init__.py"), nil, 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(pkg, parts[len(parts)-1]+".py"), []byte(serverPy), 0o644)
}

// writeScript writes dir/bin/name, a console script that runs module as __main__, and returns
// its path.
func writeScript(dir, name, module string) (string, error) {
	if name != filepath.Base(name) || strings.ContainsAny(name, "\x00\n") {
		return "", fmt.Errorf("scenario: script name %q is not a file name", name)
	}
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(bin, name)
	text := fmt.Sprintf("import runpy\nrunpy.run_module(%q, run_name=\"__main__\", alter_sys=True)\n", module)
	return path, os.WriteFile(path, []byte(text), 0o755)
}

// python is the interpreter the server runs under, and its ranks.
func (s Server) python() string {
	if s.Python == "" {
		return "python3"
	}
	return s.Python
}

// Env is the environment that makes the server written below dir (WriteModule) behave as s
// says: the variables server.py reads, with ready the file it creates once its files are in
// place (its PID in it).
func (s Server) Env(dir, ready string) []string {
	env := []string{
		"PYTHONPATH=" + dir,
		"GT_SHM_DIR=" + s.ShmDir,
		"GT_SHM_FILES=" + strconv.Itoa(max(s.ShmFiles, 1)),
		"GT_SHM_BYTES=" + strconv.FormatInt(max(s.ShmBytes, 1<<20), 10),
		"GT_CHILDREN=" + strconv.Itoa(s.Children),
		"GT_READY=" + ready,
	}
	if s.WorkerTitle != "" {
		env = append(env, "GT_WORKER_TITLE="+s.WorkerTitle)
	}
	if s.RankModule != "" {
		argv, _ := json.Marshal(append([]string{s.python(), "-m", s.RankModule}, s.RankArgs...))
		env = append(env, "GT_RANK_ARGV="+string(argv), "GT_RANKS="+strconv.Itoa(max(s.Ranks, 1)))
	}
	for _, v := range []struct {
		on   bool
		name string
	}{{s.Delete, "GT_DELETE=1"}, {s.Zombie, "GT_ZOMBIE=1"}, {s.IgnoreTerm, "GT_IGNORE_TERM=1"}, {s.ZombieLeader, "GT_ZOMBIE_LEADER=1"}} {
		if v.on {
			env = append(env, v.name)
		}
	}
	return env
}
