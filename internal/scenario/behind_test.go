package scenario_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/gputriage/gputriage/probe"
)

// probeBehind runs the probe as scenario.RunProbe does, behind the command prefix enter.
func probeBehind(enter []string, smiDir string) ([]byte, error) {
	argv := append(append([]string{}, enter...), "sh", "-s")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = strings.NewReader("set -- 5ca9ed5ca9ed5ca9ed5ca9ed5ca9ed00\n" + probe.Script)
	cmd.Env = append(os.Environ(), "PATH="+smiDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("probe: %v: %s", err, stderr.String())
	}
	return out, nil
}
