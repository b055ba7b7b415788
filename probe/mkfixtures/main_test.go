package main

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/gputriage/gputriage/parse"
)

// Aging a capture puts its host clock the fixture's age after its youngest process started,
// and aging it again changes nothing.
func TestAgeCapture(t *testing.T) {
	for _, f := range fixtures {
		if f.age == 0 {
			continue
		}
		raw, err := os.ReadFile("../../fixtures/" + f.name + ".capture")
		if err != nil {
			t.Fatal(err)
		}
		aged, err := ageCapture(raw, f.age)
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		if !bytes.Equal(aged, raw) {
			t.Errorf("%s.capture is not aged (go run ./probe/mkfixtures -age-only)", f.name)
		}
		again, err := ageCapture(aged, f.age)
		if err != nil || !bytes.Equal(again, aged) {
			t.Errorf("%s: aging twice differs from aging once (%v)", f.name, err)
		}
		snap, _ := parse.Parse(aged)
		var youngest time.Time
		for _, p := range snap.Processes {
			if p.StartTime != nil && p.StartTime.After(youngest) {
				youngest = *p.StartTime
			}
		}
		if got := snap.Host.Time.Sub(youngest); got < f.age || got > f.age+time.Second {
			t.Errorf("%s: youngest process is %v old, want %v", f.name, got, f.age)
		}
		boot := snap.Host.Time.Add(-time.Duration(*snap.Host.UptimeSeconds * float64(time.Second)))
		if d := boot.Sub(*snap.Host.BootTime); d > 20*time.Millisecond || d < -time.Second {
			t.Errorf("%s: time - uptime = %v, btime %v: the clock is not consistent", f.name, boot, *snap.Host.BootTime)
		}
	}
}
