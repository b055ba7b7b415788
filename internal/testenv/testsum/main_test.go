package main

import (
	"bytes"
	"encoding/json"
	"testing"
)

// The summary of a run: a passing package says only its "ok" line, a failed test its "---
// FAIL" line and log (a subtest under its parent), and the suites skipped for a missing
// prerequisite are named on one last line, with what provides them, each once.
func TestSummary(t *testing.T) {
	var in bytes.Buffer
	ev := func(action, pkg, test, output string) {
		b, _ := json.Marshal(event{Action: action, Package: pkg, Test: test, Output: output})
		in.Write(append(b, '\n'))
	}
	const skip = "    x_test.go:9: SKIPPING the Slurm suite: needs slurmd [install: apt-get install slurmd munge]\n"
	ev("start", "a", "", "")
	for _, test := range []string{"TestS1", "TestS2"} {
		ev("run", "a", test, "")
		ev("output", "a", test, "=== RUN   "+test+"\n")
		ev("output", "a", test, skip)
		ev("output", "a", test, "--- SKIP: "+test+" (0.00s)\n")
		ev("skip", "a", test, "")
	}
	ev("run", "a", "TestQuiet", "")
	ev("output", "a", "TestQuiet", "    x_test.go:1: passing tests' logs are not shown\n")
	ev("pass", "a", "TestQuiet", "")
	ev("output", "a", "", "PASS\n")
	ev("output", "a", "", "ok  \ta\t0.1s\n")
	ev("pass", "a", "", "")
	ev("start", "b", "", "")
	ev("run", "b", "TestBad", "")
	ev("run", "b", "TestBad/sub", "")
	ev("output", "b", "TestBad", "    b_test.go:4: loud\n")
	ev("output", "b", "TestBad/sub", "    b_test.go:5: sub broke\n")
	ev("output", "b", "TestBad/sub", "    --- FAIL: TestBad/sub (0.00s)\n")
	ev("fail", "b", "TestBad/sub", "")
	ev("output", "b", "TestBad", "--- FAIL: TestBad (0.00s)\n")
	ev("fail", "b", "TestBad", "")
	ev("output", "b", "", "FAIL\n")
	ev("output", "b", "", "FAIL\tb\t0.2s\n")
	ev("fail", "b", "", "")
	var out bytes.Buffer
	run(&in, &out)
	want := "ok  \ta\t0.1s\n" +
		"--- FAIL: TestBad (0.00s)\n    b_test.go:4: loud\n" +
		"    --- FAIL: TestBad/sub (0.00s)\n        b_test.go:5: sub broke\n" +
		"FAIL\nFAIL\tb\t0.2s\n" +
		"skipped, prerequisite missing: the Slurm suite (apt-get install slurmd munge; 2 tests)\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}
