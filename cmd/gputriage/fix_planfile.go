package main

import (
	"fmt"
	"os"
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
