package sshexec

import (
	"os"
	"strings"
)

// KnownHostsName reports whether one of files has a line, not @revoked, that names host on
// port 22 as ssh would match it: plainly, by a pattern, or hashed (HashKnownHosts yes, which
// a list of the plain names cannot show). Each file is read up to the bound host-key checks
// read; a file that cannot be read names nothing.
func KnownHostsName(files []string, host string) bool {
	name := strings.ToLower(host)
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			continue
		}
		kf := parseKnownHosts(f, file, maxKnownHostsBytes)
		f.Close()
		found := false
		kf.candidates(name, func(e knownHost) {
			found = found || (e.marker != markerRevoked && e.matches(name))
		})
		if found {
			return true
		}
	}
	return false
}
