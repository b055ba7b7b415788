package report

// Scheduler is what a cluster's scheduler says of a host it chose for the sweep: Slurm's node
// state and the reason an admin or a health check gave for draining or downing it. The reason
// is free text from the cluster: it is sanitized wherever it is shown.
type Scheduler struct {
	Name       string // "slurm"
	State      string // as the scheduler names it: idle, allocated, draining, drained, down*, ...
	Reason     string // "" when the node has none
	ReasonUser string // who set the reason; "" when unknown
	ReasonTime string // when, as the scheduler writes it; "" when unknown
}

// line is the one line the text and Markdown reports show under a host's header: "slurm:
// drained: gputriage: leftover PID 20629 (root, 2026-12-01T00:54:42)"; "" when the node has no
// reason, so healthy nodes show nothing. It is raw: callers sanitize it for their format.
func (s *Scheduler) line() string {
	if s == nil || s.Reason == "" {
		return ""
	}
	l := s.Name + ": " + s.State + ": " + s.Reason
	switch {
	case s.ReasonUser != "" && s.ReasonTime != "":
		l += " (" + s.ReasonUser + ", " + s.ReasonTime + ")"
	case s.ReasonUser != "" || s.ReasonTime != "":
		l += " (" + s.ReasonUser + s.ReasonTime + ")"
	}
	return l
}

// jsonScheduler is the JSON report's "scheduler" object.
type jsonScheduler struct {
	Name       string  `json:"name"`
	State      string  `json:"state"`
	Reason     *string `json:"reason"`
	ReasonUser *string `json:"reason_user"`
	ReasonTime *string `json:"reason_time"`
}

func jsonSchedulerOf(s *Scheduler) *jsonScheduler {
	if s == nil {
		return nil
	}
	return &jsonScheduler{Name: validUTF8(s.Name), State: validUTF8(s.State), Reason: optStr(s.Reason),
		ReasonUser: optStr(s.ReasonUser), ReasonTime: optStr(s.ReasonTime)}
}
