package systemdtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/gputriage/gputriage/internal/scenario"
)

// Server is a service unit whose main process is scenario's stand-in model server, started by
// systemd itself: python3 -m MODULE ARGS, with its files below Dir (visible in the namespace,
// which shares the machine's /tmp).
type Server struct {
	Dir   string // the Python module and the ready file
	Unit  string // the unit file's text
	Ready string // the file the server writes (its PID) once its /dev/shm files are in place
}

// simple is what a word of ExecStart= or Environment= may hold here: no quoting, no
// specifier (%), no variable ($) for systemd to expand.
var simple = regexp.MustCompile(`^[A-Za-z0-9@._:/=,+-]+$`)

// NewServer writes s's module below dir and returns the unit that runs it (Module, Args,
// ShmDir, ShmFiles, ShmBytes, Delete, Children, Zombie, IgnoreTerm are honoured; Orphan,
// WantPID, Cgroup, UID and Enter are the unit's business and refused).
func NewServer(dir string, s scenario.Server) (Server, error) {
	if s.Orphan || s.WantPID != 0 || s.Cgroup != "" || s.UID != 0 || len(s.Enter) > 0 {
		return Server{}, fmt.Errorf("systemdtest: server %s: Orphan, WantPID, Cgroup, UID and Enter do not apply to a unit", s.Module)
	}
	if err := scenario.WriteModule(dir, s.Module); err != nil {
		return Server{}, fmt.Errorf("systemdtest: %w", err)
	}
	python := s.Python
	if python == "" {
		python = "/usr/bin/python3" // not a pyenv shim: the unit's environment is systemd's
		if _, err := os.Stat(python); err != nil {
			if python, err = exec.LookPath("python3"); err != nil {
				return Server{}, fmt.Errorf("systemdtest: %w", err)
			}
		}
	}
	ready := filepath.Join(dir, "ready")
	argv := append([]string{python, "-m", s.Module}, s.Args...)
	env := s.Env(dir, ready)
	for _, w := range append(append([]string{dir}, argv...), env...) {
		if !simple.MatchString(w) {
			return Server{}, fmt.Errorf("systemdtest: %q needs quoting in a unit file", w)
		}
	}
	unit := "[Unit]\nDescription=stand-in " + s.Module + "\nDefaultDependencies=no\n\n[Service]\n" +
		"ExecStart=" + strings.Join(argv, " ") + "\nWorkingDirectory=" + dir + "\n" +
		"Environment=" + strings.Join(env, " ") + "\n"
	return Server{Dir: dir, Unit: unit, Ready: ready}, nil
}
