// Package readiness answers "will my deployment start on this host?" (--tp, watch --until
// ready): it runs each inference engine's own startup memory check (SGLang's balance check,
// vLLM's gpu_memory_utilization check, --need and the CUDA context's share) on one host's
// snapshot, and sorts a fleet's hosts by what it takes to run the job on them.
//
// It owns:
//   - the judgement (readiness.go): Check and Summarize, into typed facts: the job as checked,
//     each engine's verdict with what it compared (EngineCheck: per-GPU free memory, needs and
//     failing GPUs), the best subset of GPUs and its environment, the GPUs that block every
//     set and who holds them, whether stopping the leftover processes would be enough, why a
//     host could not be checked (Unchecked) and which GPUs were left out;
//   - the words (words.go, lines.go), composed from those facts only: each verdict's Formula,
//     the Notes, the one-sentence Reason, and the lines a report shows.
//
// It does not own the findings (diagnose: Check reads Diagnose's result for the leftover
// processes and borrows its groups of same-size GPUs and thresholds through
// diagnose/shared.go), the rendering (report places, styles and sanitizes the lines and
// writes the JSON, docs/readiness.md), nor the flags (cmd/gputriage/readiness.go).
package readiness
