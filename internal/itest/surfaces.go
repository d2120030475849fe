package itest

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// Surface is a running mail-writer, mail-inbox or mail-gateway in front of
// a running plane, each started with the flags mail-plane up passes.
type Surface struct {
	*Proc
	URL      string // http://127.0.0.1:PORT, the HTTP door
	SMTPAddr string // the writer's SMTP listener, 127.0.0.1:PORT
	SMTPPort int
	Token    string // a trial-bound inbox's token
}

// StartWriter runs mail-writer with grant (a trial's, or the plane's
// shared writer grant) in mode (fixed or select), with extra flags, on
// free ports, and waits until it is healthy.
func StartWriter(t testing.TB, p *Plane, grant, mode string, extra ...string) *Surface {
	t.Helper()
	files, addrs := listen(t, 2)
	s := &Surface{URL: "http://" + addrs[0], SMTPAddr: addrs[1]}
	_, port, _ := net.SplitHostPort(addrs[1])
	s.SMTPPort, _ = strconv.Atoi(port)
	args := append([]string{"--log-level", "debug", "--plane-socket", p.Socket, "--grant-file", WriteSecret(t, "writer.grant", grant),
		"--http-listen", "fd:3", "--smtp-listen", "fd:4", "--smtp-mode", mode,
		// The raw requests of the check tables name these hosts.
		"--allow-host", "writer", "--allow-host", "x"}, extra...)
	cmd := exec.Command(Bin(t, "mail-writer"), args...)
	cmd.ExtraFiles = files
	s.Proc = StartCmd(t, cmd, "mail-writer")
	for _, f := range files {
		f.Close()
	}
	WaitHTTP(t, s.URL+"/healthz", http.StatusOK, s.Proc)
	return s
}

// listen binds n listeners on 127.0.0.1 and returns them as files, to be
// handed to a child as fd 3, 4, ... (as mail-plane up hands them): a port
// picked free and bound later by the child could be taken in between on a
// busy machine.
func listen(t testing.TB, n int) ([]*os.File, []string) {
	t.Helper()
	var files []*os.File
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		f, err := ln.(*net.TCPListener).File()
		ln.Close()
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		addrs = append(addrs, ln.Addr().String())
	}
	return files, addrs
}

// StartInbox runs mail-inbox with grant, for the one trial whose token it
// is handed (strict mode), or with token "" for every trial (a shared
// inbox grant), on a listening socket handed down as fd 3 as up does.
func StartInbox(t testing.TB, p *Plane, grant, token string, extra ...string) *Surface {
	t.Helper()
	if token != "" {
		extra = append([]string{"--token-file", WriteSecret(t, "inbox.token", token)}, extra...)
	}
	s := startHTTPSurface(t, p, "mail-inbox", grant, extra)
	s.Token = token
	return s
}

// StartGateway runs mail-gateway with the plane's gateway grant, with
// extra flags, and waits until it is healthy.
func StartGateway(t testing.TB, p *Plane, extra ...string) *Surface {
	t.Helper()
	return startHTTPSurface(t, p, "mail-gateway", p.Grant(t, rpc.RoleGateway), extra)
}

// StartConsole runs mail-console with a console grant minted by the
// plane, and waits until it is healthy.
func StartConsole(t testing.TB, p *Plane, extra ...string) *Surface {
	t.Helper()
	return startHTTPSurface(t, p, "mail-console", p.Grant(t, rpc.RoleConsole), extra)
}

// startHTTPSurface runs the surface binary name with grant, on a listening
// socket handed down as fd 3 as up does, with extra flags, and waits until
// it is healthy.
func startHTTPSurface(t testing.TB, p *Plane, name, grant string, extra []string) *Surface {
	t.Helper()
	files, addrs := listen(t, 1)
	defer files[0].Close()
	args := append([]string{"--log-level", "debug", "--log-format", "json", "--plane-socket", p.Socket,
		"--grant-file", WriteSecret(t, strings.TrimPrefix(name, "mail-")+".grant", grant), "--listen", "fd:3"}, extra...)
	cmd := exec.Command(Bin(t, name), args...)
	cmd.ExtraFiles = files
	s := &Surface{Proc: StartCmd(t, cmd, name), URL: "http://" + addrs[0]}
	WaitHTTP(t, s.URL+"/healthz", http.StatusOK, s.Proc)
	return s
}
