package remote

import (
	"fmt"
	"os"

	"github.com/gputriage/gputriage/fix"
)

// checkPlanFile refuses a plan file that another user could have written. A plan is trusted
// for the hosts to go to and the targets to consider (what is done is decided again by a
// fresh probe of each host), and --plan-out writes it with mode 0600 for the operator alone.
func checkPlanFile(fh *os.File) error {
	fi, err := fh.Stat()
	if err != nil {
		return err
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("writable by group or others (mode %04o): anyone could have edited it; check it, then chmod go-w", perm)
	}
	if uid, ok := fileOwner(fi); ok && uid != os.Getuid() {
		return fmt.Errorf("owned by uid %d, not by you (uid %d): another user could have edited it", uid, os.Getuid())
	}
	return nil
}

// readPlanFile reads the reviewed plan in the file name (written by --plan-out), refusing one
// another user could have written, and includes the PIDs of include (--include).
func readPlanFile(name string, include []int) (fix.Plan, error) {
	fh, err := os.Open(name)
	if err != nil {
		return fix.Plan{}, err
	}
	defer fh.Close()
	if err := checkPlanFile(fh); err != nil {
		return fix.Plan{}, fmt.Errorf("%s: %v", name, err)
	}
	p, err := fix.Read(fh)
	if err != nil {
		return fix.Plan{}, fmt.Errorf("%s: %v", name, err)
	}
	for i := range p.Hosts {
		p.Hosts[i] = p.Hosts[i].Include(include)
	}
	return p, nil
}

// writePlanFile writes p to the file name, for the operator alone (mode 0600).
func writePlanFile(name string, p fix.Plan) error {
	fh, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("--plan-out: %w", err)
	}
	if err := fix.Write(fh, p); err != nil {
		fh.Close()
		return fmt.Errorf("--plan-out: %w", err)
	}
	return fh.Close()
}
