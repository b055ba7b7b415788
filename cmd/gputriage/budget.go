package main

import "runtime"

// diagnoseSlots bounds how many hosts of a sweep are parsed and diagnosed at once. A host at
// every section's bound costs a few hundred MiB while its capture becomes its report view
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
