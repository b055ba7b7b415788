package triage

import (
	"os"
	"runtime"
	"runtime/debug"
)

// diagnoseSlots bounds how many hosts of a sweep are parsed and diagnosed at once. A host at
// every section's bound costs a few tens of MiB while its capture becomes its report view
// (docs/performance.md); the work is CPU-bound, so more of it at once than there are CPUs
// gains no time and only adds memory: with the slots, what a sweep holds in flight is
// --fanout raw captures plus this many diagnoses, not --fanout diagnoses.
var diagnoseSlots = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))

// withDiagnoseSlot runs f holding one of diagnoseSlots.
func withDiagnoseSlot(f func()) {
	diagnoseSlots <- struct{}{}
	defer func() { <-diagnoseSlots }()
	f()
}

// The client's memory budget (issue 17 §3): what one host may hold while in flight (its raw
// capture as it is read, then its parse, diagnosis and report view: simfleet's
// TestLimitCost measures it), what is kept of it once diagnosed (TestHostBudget), and what
// the process needs beside its hosts.
const (
	hostBudget = 64 << 20
	keptBudget = 256 << 10
	baseBudget = 32 << 20
)

// SweepMemoryLimit is what a sweep of hosts probed fanout at a time may hold: fanout hosts in
// flight (sshexec.Run calls Done within a host's slot) and what is kept of every host.
func SweepMemoryLimit(fanout, hosts int) int64 {
	return int64(fanout)*hostBudget + int64(hosts)*keptBudget + baseBudget
}

// limitMemory makes the budget of hosts triaged fanout at a time the Go runtime's soft memory
// limit, unless the user set one (GOMEMLIMIT, which the runtime reads from the process's own
// environment): the collector then runs before garbage of finished stages (a capture's read
// buffers, a parse's records) piles up past what is in flight, rather than only once the
// heap has doubled. It is soft: the runtime never fails for it, and spends at most half the
// CPU collecting. The returned func restores the limit before.
//
// Under that limit the collector runs at sweepGCPercent, unless the user set GOGC: the heap
// may grow to three times what is live before a collection, not twice, and the limit still
// holds a host at its capture's bound within the budget (TestSweepMemoryInFlight).
func limitMemory(fanout, hosts int) (restore func()) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	old := debug.SetMemoryLimit(SweepMemoryLimit(fanout, hosts))
	oldGC := -2 // unchanged
	if os.Getenv("GOGC") == "" {
		oldGC = debug.SetGCPercent(sweepGCPercent)
	}
	return func() {
		debug.SetMemoryLimit(old)
		if oldGC != -2 {
			debug.SetGCPercent(oldGC)
		}
	}
}

// sweepGCPercent is the collector's GOGC during a sweep: a sweep of 1,000 hosts spent
// 0.1 ms of CPU less per host with it than at the default 100 (GOGC=200, bench/fleet
// -gogc 200: 2.27 against 2.39 ms per host, the bare client's ratio 1.21 against 1.34, in
// runs minutes apart) and peaked at 48 to 51 MiB of RSS instead of 37 to 42, under the
// 64 MiB target (docs/performance.md).
const sweepGCPercent = 200
