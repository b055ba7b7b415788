package main

import (
	"context"
	"fmt"
	"os"

	"github.com/gputriage/gputriage/sshconf"
)

// systemKnownHosts are ssh's global known_hosts files (a variable for tests).
var systemKnownHosts = []string{"/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"}

// completeHostsCmd is the hidden `gputriage __complete-hosts` the completion scripts call:
// the host names of ~/.ssh/config, its includes and the known_hosts files (sshconf.HostNames).
func completeHostsCmd(_ context.Context, _ []string, e *env) (int, error) {
	home := userHome(e)
	if home == "" {
		return exitOK, nil
	}
	for _, n := range sshconf.HostNames(home, systemKnownHosts) {
		fmt.Fprintln(e.stdout, n)
	}
	return exitOK, nil
}

// userHome is the user's home directory: $HOME, else the system's idea of it; "" when none.
func userHome(e *env) string {
	if home := e.getenv("HOME"); home != "" {
		return home
	}
	home, _ := os.UserHomeDir()
	return home
}
