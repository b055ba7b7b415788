package diagnose

import (
	"path"
	"slices"
	"strconv"

	"github.com/gputriage/gputriage/parse"
)

// Evidence is weighed by who could have made it. A deleted file or a missing model path says
// "someone cleaned up after this process as if it were gone" only when nobody but the
// process's owner and root could have removed or renamed it; a file in a directory every user
// may write says nothing of the process (docs/findings.md, "What counts as strong evidence").

// OthersCode names why a user other than the process's owner and root could have made a clue.
// The codes are stable: JSON carries them.
type OthersCode string

// The ways another user could have removed or renamed a file or directory.
const (
	OthersWorldWritable OthersCode = "world-writable" // Dir is writable by every user, without the sticky bit
	OthersGroupWritable OthersCode = "group-writable" // Dir is writable by its group GID, not the owner's own
	OthersOwnDir        OthersCode = "dir-owner"      // Dir belongs to another user (UID)
	OthersStickyEntry   OthersCode = "sticky-entry"   // Dir is sticky and shared; the entry's owner is another user (UID) or unknown
	OthersDirGone       OthersCode = "dir-gone"       // the file's own directory is gone too: who could write it is unknown
	OthersSymlink       OthersCode = "symlink"        // Dir, on the way up, is a symbolic link
	OthersUnread        OthersCode = "unread"         // the probe did not read the directories (cut, or not root)
)

// OthersMay is why a clue could have been made by a user other than the process's owner and
// root: which directory lets them, and how.
type OthersMay struct {
	Code OthersCode
	// Dir is the directory that lets them ("" for unread); UID its owner (dir-owner) or the
	// entry's owner (sticky-entry, nil when unknown); GID its group (group-writable).
	Dir string
	UID *int
	GID *int
}

// File type and permission bits of st_mode.
const (
	modeType    = 0o170000
	modeSymlink = 0o120000
	modeSticky  = 0o1000
	modeGroupW  = 0o020
	modeOtherW  = 0o002
)

// othersMay says how a user other than uid and root could have removed or renamed an entry
// below dirs[0], the deepest existing directory above it (nil: only uid and root could).
// owner is that entry's owner, nil when unknown. With whole, each directory above up to its
// mount point is weighed too (a directory renamed anywhere above hides a path); without, only
// dirs[0] (deleting a file needs write access to its own directory alone).
func othersMay(uid int, dirs []parse.DirInfo, owner *int, whole bool) *OthersMay {
	if len(dirs) == 0 {
		return &OthersMay{Code: OthersUnread}
	}
	for i, d := range dirs {
		if o := othersMayIn(uid, d, owner); o != nil {
			return o
		}
		if !whole || d.Path == "/" {
			return nil
		}
		if i+1 == len(dirs) || path.Dir(d.Path) != dirs[i+1].Path {
			return &OthersMay{Code: OthersUnread, Dir: path.Dir(d.Path)}
		}
		if dirs[i+1].Dev != d.Dev {
			return nil // d is a mount point: no one can remove or rename it while mounted
		}
		owner = &d.UID
	}
	return nil
}

// othersMayIn says how a user other than uid and root could remove or rename an entry owned
// by owner (nil: unknown) in directory d.
func othersMayIn(uid int, d parse.DirInfo, owner *int) *OthersMay {
	mine := func(u int) bool { return u == uid || u == 0 }
	switch {
	case d.Mode&modeType == modeSymlink:
		return &OthersMay{Code: OthersSymlink, Dir: d.Path}
	case !mine(d.UID):
		return &OthersMay{Code: OthersOwnDir, Dir: d.Path, UID: &d.UID}
	}
	// A group is the owner's own only by the user-private-group convention: named for the
	// owner (same id) and owning the directory. Any other may have members.
	shared := d.Mode&modeOtherW != 0 || d.Mode&modeGroupW != 0 && !(d.GID == uid && d.UID == uid)
	switch {
	case !shared:
		return nil
	case d.Mode&modeSticky == 0 && d.Mode&modeOtherW != 0:
		return &OthersMay{Code: OthersWorldWritable, Dir: d.Path}
	case d.Mode&modeSticky == 0:
		return &OthersMay{Code: OthersGroupWritable, Dir: d.Path, GID: &d.GID}
	case owner == nil || !mine(*owner):
		// Sticky: only the entry's owner, the directory's and root may remove or rename it.
		return &OthersMay{Code: OthersStickyEntry, Dir: d.Path, UID: owner}
	}
	return nil
}

// shmOthersMay says how a user other than the owner of process p and root could have deleted
// its /dev/shm file at path; nil when none could, or when the capture is an older probe's that
// did not read the directories (judged as before).
func (h *host) shmOthersMay(p *parse.Process, file string) *OthersMay {
	if !h.s.ShmDirsProbed {
		return nil
	}
	if p.UID == nil {
		return &OthersMay{Code: OthersUnread}
	}
	if h.shmDirs == nil {
		h.shmDirs = map[shmDirKey]*parse.ShmDirs{}
		for i := range h.s.ShmDirs {
			d := &h.s.ShmDirs[i]
			if k := (shmDirKey{d.PID, d.Path}); h.shmDirs[k] == nil {
				h.shmDirs[k] = d
			}
		}
	}
	d := h.shmDirs[shmDirKey{p.PID, file}]
	switch {
	case d == nil:
		return &OthersMay{Code: OthersUnread}
	case len(d.Dirs) > 0 && d.Dirs[0].Path != path.Dir(file):
		return &OthersMay{Code: OthersDirGone, Dir: path.Dir(file)}
	}
	return othersMay(*p.UID, d.Dirs, d.Owner, false)
}

// shmDirKey finds a deleted /dev/shm file's shm-dirs record: the process and the path.
type shmDirKey struct {
	pid  int
	path string
}

// modelOthersMay says how a user other than the owner of process p and root could have
// removed or renamed its missing model path m; nil as for shmOthersMay.
func (h *host) modelOthersMay(p *parse.Process, m parse.PathCheck) *OthersMay {
	if !h.s.ShmDirsProbed {
		return nil
	}
	if p.UID == nil {
		return &OthersMay{Code: OthersUnread}
	}
	return othersMay(*p.UID, m.Dirs, nil, true)
}

// shmPathsOthersMay says how a user other than p's owner and root could have deleted every one
// of p's /dev/shm files at paths (the first one's way); nil when one of them none could have.
func (h *host) shmPathsOthersMay(p *parse.Process, paths []string) *OthersMay {
	var first *OthersMay
	for _, f := range paths {
		o := h.shmOthersMay(p, f)
		if o == nil {
			return nil
		}
		if first == nil {
			first = o
		}
	}
	return first
}

// unconfirmedFindings reports each process that would look abandoned but for evidence another
// user could have made (leftover-unconfirmed): Info, for the operator to judge. Its stop is in
// IfAbandoned, never in Actions: no report suggests it, and fix applies it only when named.
func (h *host) unconfirmedFindings() []Finding {
	return h.verdictFindings(h.unconfirmed, h.unconfirmedFinding, CodeLeftoverUnconfirmed, Info,
		"would look abandoned on evidence another user could have made")
}

// unconfirmedFinding is the leftover-unconfirmed finding of one process.
func (h *host) unconfirmedFinding(gp *GPUProcess, v leftoverVerdict) Finding {
	f := Finding{Code: CodeLeftoverUnconfirmed, Severity: Info, GPUs: slices.Clone(gp.GPUs), PIDs: []int{gp.PID},
		Reasons: v.reasons(), Files: h.cleanedFiles(gp), IfAbandoned: []Action{h.stopAction(gp)}}
	look := Action{Kind: ActionInspect, Target: strconv.Itoa(gp.PID),
		Steps: []Command{{Line: "ps -o pid,user,etime,stat,args -p " + strconv.Itoa(gp.PID)}}}
	seen := map[string]bool{}
	for _, r := range f.Reasons {
		if o := r.OthersMay; o != nil && o.Dir != "" && !seen[o.Dir] {
			seen[o.Dir] = true
			look.Steps = append(look.Steps, Command{Line: "ls -la -- " + shellQuote(o.Dir)})
		}
	}
	f.Actions = []Action{look}
	h.name(&f, gp.PID)
	unconfirmedWords(&f)
	return f
}
