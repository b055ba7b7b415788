package diagnose

import "github.com/gputriage/gputriage/internal/snaptest"

// Snapshots built by hand, so these tests do not depend on the parser: internal/snaptest's,
// shared with the tests of readiness and nodecheck.

var refTime = snaptest.RefTime

var (
	i64           = snaptest.I64
	ip            = snaptest.IP
	uuidOf        = snaptest.UUIDOf
	gpu           = snaptest.GPU
	baseHost      = snaptest.BaseHost
	idleRTX       = snaptest.IdleRTX
	app           = snaptest.App
	holders       = snaptest.Holders
	proc          = snaptest.Proc
	sessionCgroup = snaptest.SessionCgroup
	serviceCgroup = snaptest.ServiceCgroup
	okShm         = snaptest.OKShm
	ct200         = snaptest.CT200
	idle          = snaptest.Idle
	busyTP8       = snaptest.BusyTP8
	withLeftover  = snaptest.WithLeftover
)
