// Package probe owns what gputriage runs on a host: the read-only POSIX sh script
// (probe.sh, embedded as Script), the input `sh -s` reads (Input: the run's nonce, then the
// script), the nvidia-smi queries (smi.go: the script is rendered with them, node-check's
// gate runs them, parse reads their columns in their order), and the tests that run the
// real script as root against real processes, /dev/shm files and a stand-in nvidia-smi.
// mkfixtures, below it, records fixtures/ with the same script.
//
// The probe decides which sections a capture holds and prints each within a byte bound.
// It does not own how a capture is read: the capture format (docs/capture.md), the client's
// own bound on each section (parse.SectionLimit, whatever the host declares) and every
// parser are parse's. TestProbeLimitsMatchClient ties the two: each section the script
// prints is one parse bounds, at the same limit.
//
// parse imports this package (for the queries' field order), so probe imports nothing of
// gputriage's, and its tests that parse a capture are in package probe_test.
package probe
