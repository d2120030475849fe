package itest

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
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
	hp, sp := FreePort(t), FreePort(t)
	s := &Surface{URL: "http://127.0.0.1:" + strconv.Itoa(hp), SMTPAddr: "127.0.0.1:" + strconv.Itoa(sp), SMTPPort: sp}
	args := append([]string{"--log-level", "debug", "--plane-socket", p.Socket, "--grant-file", WriteSecret(t, "writer.grant", grant),
		"--http-listen", "127.0.0.1:" + strconv.Itoa(hp), "--smtp-listen", s.SMTPAddr, "--smtp-mode", mode,
		// The raw requests of the check tables name these hosts.
		"--allow-host", "writer", "--allow-host", "x"}, extra...)
	s.Proc = Start(t, "mail-writer", args...)
	WaitHTTP(t, s.URL+"/healthz", http.StatusOK, s.Proc)
	return s
}

// StartInbox runs mail-inbox with grant, for the one trial whose token it
// is handed (strict mode), or with token "" for every trial (a shared
// inbox grant), on a listening socket handed down as fd 3 as up does.
func StartInbox(t testing.TB, p *Plane, grant, token string, extra ...string) *Surface {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ln.(*net.TCPListener).File()
	ln.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	args := []string{"--log-level", "debug", "--log-format", "json", "--plane-socket", p.Socket,
		"--grant-file", WriteSecret(t, "inbox.grant", grant), "--listen", "fd:3"}
	if token != "" {
		args = append(args, "--token-file", WriteSecret(t, "inbox.token", token))
	}
	cmd := exec.Command(Bin(t, "mail-inbox"), append(args, extra...)...)
	cmd.ExtraFiles = []*os.File{f}
	s := &Surface{Proc: StartCmd(t, cmd, "mail-inbox"), URL: "http://" + ln.Addr().String(), Token: token}
	WaitHTTP(t, s.URL+"/healthz", http.StatusOK, s.Proc)
	return s
}

// StartGateway runs mail-gateway with the plane's gateway grant, with
// extra flags, and waits until it is healthy.
func StartGateway(t testing.TB, p *Plane, extra ...string) *Surface {
	t.Helper()
	port := Itoa(FreePort(t))
	args := append([]string{"--log-level", "debug", "--log-format", "json", "--plane-socket", p.Socket,
		"--grant-file", WriteSecret(t, "gateway.grant", p.Grant(t, rpc.RoleGateway)), "--listen", "127.0.0.1:" + port}, extra...)
	s := &Surface{Proc: Start(t, "mail-gateway", args...), URL: "http://127.0.0.1:" + port}
	WaitHTTP(t, s.URL+"/healthz", http.StatusOK, s.Proc)
	return s
}
