// Package triage owns gputriage's pipeline, once: given hosts and a Config, it resolves them
// (ssh_config, through sshconf), runs the probe on each (sshexec, at most Fanout at once),
// checks the output's head (this run's capture header and nonce, after at most a login
// banner's worth of preamble, which is dropped and named), parses and diagnoses each capture
// as soon as it is in, saves it (Save) and keeps of each host what the report reads, handing
// each host to Config.Each as it arrives. Replay does the same from saved captures, Local from
// this machine's probe, and a Pool round by round over kept connections (watch, fix's watch
// for released memory); Exec runs another script over the same reach (fix's apply, Slurm's
// queries on a login node).
//
// Every command that looks at a host goes through here: the default triage, collect,
// --replay, --local, explain, watch, fix and node-check (ProbeLocal); no command assembles the
// pipeline by hand.
//
// It does not read flags, own the terminal or render reports: cmd/gputriage maps its flags
// onto a Config and draws the progress line (Config.Progress); report renders; diagnose
// judges; parse reads a capture; the probe script and its input come from parse. What it
// prints is notes about hosts and ssh_config lines on Config.Stderr, and --debug-ssh's lines.
package triage
