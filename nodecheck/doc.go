// Package nodecheck is `gputriage node-check`'s judgement and its look at this node: what
// Slurm's health check, Prolog and Epilog decide about a node.
//
// It owns:
//   - Check and Notes: which of diagnose's findings make a node unfit for work in a scope
//     (the whole node, or a job's GPUs, which must then be free: gpu-not-free,
//     gpu-missing), with the typed facts (code, PID, program, MiB, GPU, job) a drain reason
//     is made of; JobGPUs resolves the GPUs Slurm gave a job; DrainReason writes the
//     80-byte reason scontrol gets.
//   - The idle gate: ReadIdleFacts asks nvidia-smi the probe's own queries and scans /proc
//     and /dev/shm within bounds (Linux only; elsewhere it always doubts), and IdleGate proves
//     from those facts that no finding at warning or worse could fire, or says why not.
//   - Drain and Resume: scontrol, bounded in time and output.
//
// It does not own the findings (diagnose judges a capture; the gate borrows diagnose's
// rules through diagnose/shared.go so both judge alike), the probe or the pipeline that runs
// it (cmd/gputriage runs the probe when the gate doubts), nor node-check's flags, output
// lines and exit codes (cmd/gputriage/node_check.go).
package nodecheck
