package writerproc

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/connlimit"
	"github.com/websitebench/mailplane/internal/fdpass"
	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/smtpd"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// reports records the plane calls of shedReports (Reporter is the
// writer's seam to the plane; *rpc.Client is the other one).
type reports struct {
	mu  sync.Mutex
	got []rpc.ReportRequest
}

func (r *reports) Report(_ context.Context, req *rpc.ReportRequest) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, *req)
	return nil
}

func (r *reports) all() []rpc.ReportRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]rpc.ReportRequest(nil), r.got...)
}

// listener is a bound TCP listener to hand over, and its port.
func listener(t *testing.T) (*net.TCPListener, int) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	return ln, ln.Addr().(*net.TCPAddr).Port
}

// session opens an SMTP session on port and reads its greeting.
func session(t *testing.T, port int) *textproto.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	c := textproto.NewConn(nc)
	t.Cleanup(func() { c.Close() })
	if _, _, err := c.ReadResponse(220); err != nil {
		t.Fatalf("greeting on port %d: %v", port, err)
	}
	return c
}

// refused reports whether nothing listens on port any more.
func refused(port int) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 5*time.Second)
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// control starts the writer's side of the port control socket, with a
// cap of one connection per listener, and returns the supervisor's side,
// the reports to the plane, and what servePorts returns.
func control(t *testing.T) (*net.UnixConn, *reports, <-chan error) {
	t.Helper()
	ctl, childFile, err := fdpass.Pair()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctl.Close() })
	fc, err := net.FileConn(childFile)
	childFile.Close()
	if err != nil {
		t.Fatal(err)
	}
	child := fc.(*net.UnixConn)
	log := zerolog.Nop()
	rec := &reports{}
	sheds := newShedReports(rec, log)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go sheds.run(ctx)
	limits := connlimit.Limits{MaxConns: 1}
	doors := newDoorServers(smtpd.Config{}, nil, http.NotFoundHandler(), limits, sheds, log)
	done := make(chan error, 1)
	go func() {
		done <- servePorts(child, trialServers(smtpd.Config{}, false, nil, log), limits, sheds, doors, log)
	}()
	return ctl, rec, done
}

// The port control socket: a listener handed over is served by its own
// SMTP server, which requires AUTH before MAIL; sessions over its
// connection cap are counted for it and reported to the plane; a listener
// taken back is closed; and when the supervisor closes the socket, every
// one is.
func TestPortControl(t *testing.T) {
	ctl, rec, done := control(t)

	authLn, authPort := listener(t)
	if err := fdpass.Add(ctl, authPort, authLn); err != nil {
		t.Fatal(err)
	}
	authLn.Close() // the writer serves its own copy
	c := session(t, authPort)
	if _, err := c.Cmd("EHLO client.example"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.ReadResponse(250); err != nil {
		t.Fatalf("EHLO: %v", err)
	}
	c.Cmd("MAIL FROM:<site@sender.example>")
	if code, msg, _ := c.ReadResponse(530); code != 530 {
		t.Fatalf("MAIL before AUTH on a trial's port: %d %s; want 530", code, msg)
	}

	// The first session holds the port's one connection: the next is shed,
	// and reported once, for this port.
	nc, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(authPort)))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	itest.Eventually(t, "the shed session reported", 30*time.Second, func() bool { return len(rec.all()) > 0 })
	if got := rec.all(); len(got) != 1 || got[0].Port != authPort || got[0].Count != 1 || got[0].Code != "connection_limit" {
		t.Fatalf("reports: %+v; want one of 1 session on port %d", got, authPort)
	}

	if err := fdpass.Remove(ctl, authPort); err != nil {
		t.Fatal(err)
	}
	itest.Eventually(t, "the port taken back is closed", 30*time.Second, func() bool { return refused(authPort) })

	lastLn, lastPort := listener(t)
	if err := fdpass.Add(ctl, lastPort, lastLn); err != nil {
		t.Fatal(err)
	}
	lastLn.Close()
	session(t, lastPort)
	ctl.Close() // the supervisor stops
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("port control ended without saying why")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("port control did not end with its socket")
	}
	itest.Eventually(t, "every port closed with the control socket", 30*time.Second, func() bool { return refused(lastPort) })
}

// A trial's doors inside its network namespace: its SMTP door takes mail
// without AUTH (only the namespace reaches it), its HTTP door serves the
// mail API, an implicit-TLS door of a writer without TLS is not served,
// and taking the door back closes all of its listeners.
func TestDoors(t *testing.T) {
	ctl, _, _ := control(t)
	const key = "door-1"
	smtpLn, smtpPort := listener(t)
	if err := fdpass.AddDoor(ctl, key, fdpass.KindSMTP, smtpPort, smtpLn); err != nil {
		t.Fatal(err)
	}
	smtpLn.Close()
	httpLn, httpPort := listener(t)
	if err := fdpass.AddDoor(ctl, key, fdpass.KindHTTP, httpPort, httpLn); err != nil {
		t.Fatal(err)
	}
	httpLn.Close()
	tlsLn, tlsPort := listener(t)
	if err := fdpass.AddDoor(ctl, key, fdpass.KindSMTPTLS, tlsPort, tlsLn); err != nil {
		t.Fatal(err)
	}
	tlsLn.Close()

	c := session(t, smtpPort)
	c.Cmd("EHLO client.example")
	if _, _, err := c.ReadResponse(250); err != nil {
		t.Fatalf("EHLO: %v", err)
	}
	c.Cmd("MAIL FROM:<site@sender.example>")
	if code, msg, err := c.ReadResponse(250); err != nil {
		t.Fatalf("MAIL on a door's SMTP: %d %s; want 250 without AUTH", code, msg)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get("http://127.0.0.1:" + strconv.Itoa(httpPort) + "/nothing-here")
	if err != nil {
		t.Fatalf("the door's HTTP: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the door's HTTP answered %d; want the API's 404", resp.StatusCode)
	}
	itest.Eventually(t, "the implicit-TLS door of a writer without TLS closed", 30*time.Second, func() bool { return refused(tlsPort) })

	if err := fdpass.RemoveDoor(ctl, key); err != nil {
		t.Fatal(err)
	}
	itest.Eventually(t, "the door's listeners closed", 30*time.Second, func() bool { return refused(smtpPort) && refused(httpPort) })
}
