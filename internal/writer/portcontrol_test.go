package writer_test

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// A --port-control that is not a socket is a usage error (exit 2) that
// names the flag, and leaves nothing listening. (writerproc's run checks
// it before it binds its main listeners; before #24 it was found only
// after HTTP and SMTP were being served.)
func TestBadPortControlIsAUsageError(t *testing.T) {
	p := itest.StartPlane(t)
	id := p.Trial(t, rpc.ProfileCandidate)
	httpPort := itest.FreePort(t)
	cmd := exec.Command(itest.Bin(t, "mail-writer"), "--plane-socket", p.Socket,
		"--grant-file", itest.WriteSecret(t, "writer.grant", id.WriterGrant),
		"--http-listen", "127.0.0.1:"+strconv.Itoa(httpPort), "--smtp-listen", "127.0.0.1:0",
		"--port-control", "3")
	f, err := os.CreateTemp(t.TempDir(), "not-a-socket")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd.ExtraFiles = []*os.File{f} // fd 3: a descriptor, but no Unix socket
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 {
		t.Fatalf("exit %v, want 2 (usage): %s", err, out)
	}
	if !strings.Contains(string(out), "--port-control") || strings.Contains(string(out), "writer listening") {
		t.Fatalf("want a --port-control usage error and no listening, got: %s", out)
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(httpPort), time.Second); err == nil {
		c.Close()
		t.Fatalf("the HTTP port still answers after the writer refused its --port-control")
	}
}
