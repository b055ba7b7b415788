package probe

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
)

var (
	probeVersionRE  = regexp.MustCompile(`probe_version=([0-9A-Za-z._-]+)`)
	captureFormatRE = regexp.MustCompile(`gputriage-capture (v[0-9]+) nonce=`)
)

// Describe names the embedded probe: the version it reports, the capture format it
// writes (both read from the script itself: what it prints, not its comments, which
// Script has none of) and the script's hash, which tells apart two
// builds whose probes differ without a version bump.
func Describe(script string) string {
	ver, format := "unknown", "unknown"
	if m := probeVersionRE.FindStringSubmatch(script); m != nil {
		ver = m[1]
	}
	if m := captureFormatRE.FindStringSubmatch(script); m != nil {
		format = m[1]
	}
	sum := sha256.Sum256([]byte(script))
	return fmt.Sprintf("version %s, capture format %s, sha256 %s", ver, format, hex.EncodeToString(sum[:6]))
}
