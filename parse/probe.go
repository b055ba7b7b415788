package parse

import _ "embed"

// ProbeScript is the read-only POSIX sh script run on each host as `sh -s -- NONCE`, with the
// script on standard input. Its output format is documented in docs/capture.md.
//
//go:embed probe.sh
var ProbeScript string
