package probe

import (
	_ "embed"
	"fmt"

	"github.com/gputriage/gputriage/internal/shmin"
)

// Script is the read-only POSIX sh script run on each host: probe.sh with its nvidia-smi
// queries filled in (smi.go), without its comments and indentation (shmin.Minify: the same
// lines, the same behaviour; 40% fewer bytes to send to every host). Its output format is
// documented in docs/capture.md. Run it with Input on the standard input of `sh -s`.
var Script = string(shmin.Minify([]byte(render(script))))

//go:embed probe.sh
var script string

// Input is what `sh -s` reads on a host: a first line that sets the run's nonce and
// nvidia-smi time bound as positional parameters, then the probe. The nonce travels on stdin,
// never on a command line, so no other process on the host can read it from /proc/PID/cmdline
// while the probe runs and forge section markers with it.
func Input(nonce string, smiSeconds int) []byte {
	return []byte(fmt.Sprintf("set -- %s %d\n%s", nonce, smiSeconds, Script))
}
