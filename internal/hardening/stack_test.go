package hardening

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// upSys is a sys whose plane is a running `mail-plane up --json`: the
// plane, one mail-writer, one mail-inbox and one mail-gateway shared by
// every trial, and up's supervisor binding each candidate trial's own
// SMTP port and passing it to the writer. Everything runs at debug level,
// and the audit searches up's output (its children's included) as it does
// every other process's.
type upSys struct {
	*sys
	bundle rpc.StackBundle
}

// newUpSys starts mail-plane up with no trial open and extra flags.
func newUpSys(t *testing.T, extra ...string) *upSys {
	t.Helper()
	return newUpSysCmd(t, nil, extra...)
}

// newUpSysCmd starts mail-plane up as newUpSys does, under the command
// prefix (prlimit and its flags, for one).
func newUpSysCmd(t *testing.T, prefix []string, extra ...string) *upSys {
	t.Helper()
	s := newAudit(t)
	args := append(slices.Clone(prefix), itest.Bin(t, "mail-plane"), "--log-level", "debug", "up", "--json", "--trials", "0")
	args = append(args, extra...)
	cmd := exec.Command(args[0], args[1:]...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	proc := itest.StartCmd(t, cmd, "mail-plane up")
	s.addProc(proc)
	// At the end, up's children are killed with it: SIGKILL leaves up no
	// time to stop them, and their graceful stop (on their parent's death)
	// would hold the test's end for seconds.
	t.Cleanup(func() {
		for _, pid := range itest.Descendants(t, proc.Cmd.Process.Pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	u := &upSys{sys: s}
	line := itest.ReadLine(t, stdout, 60*time.Second)
	if err := json.Unmarshal([]byte(line), &u.bundle); err != nil {
		t.Fatalf("up's bundle %q: %v\n%s", line, err, proc.Output())
	}
	admin, err := rpc.ReadSecretFile(u.bundle.AdminGrantFile)
	if err != nil {
		t.Fatal(err)
	}
	gateway, err := rpc.ReadSecretFile(filepath.Join(filepath.Dir(u.bundle.AdminGrantFile), "gateway.grant"))
	if err != nil {
		t.Fatal(err)
	}
	s.plane = &planeProc{Proc: proc, t: t, socket: u.bundle.PlaneSocket, data: u.bundle.DataDir,
		admin: rpc.NewClient(u.bundle.PlaneSocket, admin), adminGrant: admin, gatewayGrant: gateway}
	t.Cleanup(s.plane.admin.Close)
	s.secret("gateway grant", gateway)
	s.secret("admin grant", admin)
	return u
}

// sharedGrant reads the plane's shared grant for role (writer or inbox),
// which serve keeps next to the admin grant, and records it for the audit.
func (s *sys) sharedGrant(grantsDir string, role rpc.Role) string {
	s.t.Helper()
	g, err := rpc.ReadSecretFile(filepath.Join(grantsDir, string(role)+".grant"))
	if err != nil {
		s.t.Fatalf("the shared %s grant: %v", role, err)
	}
	s.secret("shared "+string(role)+" grant", g)
	return g
}

// sharedWriter starts a mail-writer with a shared writer grant in mode,
// as mail-plane sidecar runs its namespace-selecting one.
func (s *sys) sharedWriter(grant, mode string) *surface {
	s.t.Helper()
	return s.writer(rpc.Identity{WriterGrant: grant}, mode)
}
