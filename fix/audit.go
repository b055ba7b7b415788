package fix

import (
	"encoding/json"
	"io"
	"time"
)

// Record is one line of the audit log ($XDG_STATE_HOME/gputriage/fix.log, JSON Lines): one
// applied action, who applied it, when, the target as planned and what became of it. The
// host's syslog gets a line with the same plan id (logger -t gputriage).
type Record struct {
	Time time.Time `json:"time"` // when the result came back, UTC
	// Who is the operator on this side (the local user); Login the user on the host, and Sudo
	// whether the action ran under sudo -n.
	Who    string `json:"who"`
	Host   string `json:"host"`
	Login  string `json:"login,omitempty"`
	Sudo   bool   `json:"sudo"`
	PlanID string `json:"plan_id"`
	BootID string `json:"boot_id"`
	// Signal is what was sent: SIGTERM (ModeTerm, SIGKILL after KillAfter when set) or SIGKILL.
	Signal    string `json:"signal"`
	KillAfter string `json:"kill_after,omitempty"`
	Target    Target `json:"target"`
	Result    Result `json:"result"`
}

// WriteRecords appends one JSON line per record to w.
func WriteRecords(w io.Writer, rs []Record) error {
	enc := json.NewEncoder(w)
	for _, r := range rs {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}
