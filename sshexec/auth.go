package sshexec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// AgentFromEnv connects to the agent named by SSH_AUTH_SOCK, read through getenv. It returns a
// nil agent and no error when the variable is unset. The caller closes the Closer after the
// sweep; the one connection is shared by every host (agent.NewClient serializes requests).
func AgentFromEnv(getenv func(string) string) (agent.ExtendedAgent, io.Closer, error) {
	sock := getenv("SSH_AUTH_SOCK")
	if sock == "" {
		return nil, nil, nil
	}
	conn, err := net.Dial("unix", sock)
	if err != nil {
		return nil, nil, fmt.Errorf("ssh agent: SSH_AUTH_SOCK=%s: %w", sock, err)
	}
	return agent.NewClient(conn), conn, nil
}

// identities holds the sweep's keys, loaded once before any host is dialled so that a
// passphrase prompt never races a host's deadline.
type identities struct {
	agentKeys []ssh.Signer
	agentNote string // set when the agent could not list its keys
	files     map[string]*identityFile
}

type identityFile struct {
	path   string
	signer ssh.Signer    // nil when skipped
	pub    ssh.PublicKey // known even for an encrypted key when its format (or file.pub) says
	note   string        // why it was skipped; "" when missing (OpenSSH is silent too) or loaded
}

func loadIdentities(ag agent.Agent, passphrase func(string) ([]byte, error), targets []Target) *identities {
	ids := &identities{files: map[string]*identityFile{}}
	if ag != nil {
		signers, err := ag.Signers()
		if err != nil {
			ids.agentNote = fmt.Sprintf("ssh agent: listing keys failed: %v", err)
		}
		ids.agentKeys = signers
	}
	var walk func(t Target)
	walk = func(t Target) {
		for _, j := range t.Jump {
			walk(j)
		}
		for _, p := range t.IdentityFiles {
			if _, ok := ids.files[p]; !ok {
				ids.files[p] = ids.loadFile(p, passphrase)
			}
		}
	}
	for _, t := range targets {
		walk(t)
	}
	return ids
}

func (ids *identities) agentHolds(pub ssh.PublicKey) bool {
	if pub == nil {
		return false
	}
	for _, s := range ids.agentKeys {
		if bytes.Equal(s.PublicKey().Marshal(), pub.Marshal()) {
			return true
		}
	}
	return false
}

func (ids *identities) loadFile(path string, passphrase func(string) ([]byte, error)) *identityFile {
	f := &identityFile{path: path}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return f
	}
	if err != nil {
		f.note = fmt.Sprintf("identity file %s unreadable: %v: skipped", path, err)
		return f
	}
	signer, err := ssh.ParsePrivateKey(data)
	if err == nil {
		f.signer, f.pub = signer, signer.PublicKey()
		return f
	}
	var missing *ssh.PassphraseMissingError
	if !errors.As(err, &missing) {
		f.note = fmt.Sprintf("identity file %s: %v: skipped", path, err)
		return f
	}
	f.pub = missing.PublicKey
	if f.pub == nil { // legacy PEM encryption hides the public key; OpenSSH reads file.pub
		if pubData, err := os.ReadFile(path + ".pub"); err == nil {
			if pub, _, _, _, err := ssh.ParseAuthorizedKey(pubData); err == nil {
				f.pub = pub
			}
		}
	}
	if ids.agentHolds(f.pub) {
		return f // the agent signs for it
	}
	if passphrase == nil {
		f.note = fmt.Sprintf("identity file %s is encrypted and no agent holds it: skipped", path)
		return f
	}
	pass, err := passphrase(path)
	if err != nil {
		f.note = fmt.Sprintf("identity file %s is encrypted and no passphrase was given (%v): skipped", path, err)
		return f
	}
	signer, err = ssh.ParsePrivateKeyWithPassphrase(data, pass)
	clear(pass)
	if err != nil {
		f.note = fmt.Sprintf("identity file %s: %v: skipped", path, err)
		return f
	}
	f.signer, f.pub = signer, signer.PublicKey()
	return f
}

// keyOffer is what one hop offers in publickey authentication, in OpenSSH's order: agent keys
// (those matching an identity file first), then identity file keys the agent does not hold.
// With IdentitiesOnly, only agent keys matching an identity file are offered.
type keyOffer struct {
	signers []ssh.Signer
	tried   string // "publickey (agent: 2 keys; /home/u/.ssh/id_ed25519)"
	notes   []string
}

func (ids *identities) offer(t Target) keyOffer {
	var o keyOffer
	if ids.agentNote != "" {
		o.notes = append(o.notes, ids.agentNote)
	}
	var filePubs []ssh.PublicKey
	for _, p := range t.IdentityFiles {
		if f := ids.files[p]; f != nil && f.pub != nil {
			filePubs = append(filePubs, f.pub)
		}
	}
	has := func(list []ssh.PublicKey, k ssh.PublicKey) bool {
		for _, x := range list {
			if bytes.Equal(x.Marshal(), k.Marshal()) {
				return true
			}
		}
		return false
	}
	var offered []ssh.PublicKey
	var nAgent int
	for _, pass := range []bool{true, false} { // matching identity files first
		for _, s := range ids.agentKeys {
			matches := has(filePubs, s.PublicKey())
			if matches != pass || (!matches && t.IdentitiesOnly) {
				continue
			}
			o.signers = append(o.signers, s)
			offered = append(offered, s.PublicKey())
			nAgent++
		}
	}
	var parts []string
	if nAgent > 0 {
		parts = append(parts, fmt.Sprintf("agent: %d %s", nAgent, plural(nAgent, "key", "keys")))
	}
	for _, p := range t.IdentityFiles {
		f := ids.files[p]
		if f == nil {
			continue
		}
		if f.note != "" {
			o.notes = append(o.notes, f.note)
		}
		if f.signer == nil || has(offered, f.pub) {
			continue
		}
		o.signers = append(o.signers, f.signer)
		offered = append(offered, f.pub)
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		o.tried = "publickey (no key to offer: no agent key and no usable identity file)"
	} else {
		o.tried = "publickey (" + strings.Join(parts, "; ") + ")"
	}
	return o
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
