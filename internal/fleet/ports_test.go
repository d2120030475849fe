package fleet_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/ledger/sqlledger"
	"github.com/websitebench/mailplane/internal/pgtest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// planeID is the identity a plane minted into its data directory.
func planeID(t *testing.T, p *itest.Plane) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(p.Data, "plane.id"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// portTrial opens a candidate trial on p that takes port, offered as
// p's supervisor would offer a port it bound.
func portTrial(t *testing.T, p *itest.Plane, port int) rpc.Identity {
	t.Helper()
	if _, err := p.Admin.PortsSync(ctx(t), &rpc.PortsSyncRequest{Add: []int{port}}); err != nil {
		t.Fatal(err)
	}
	id := p.Trial(t, rpc.ProfileCandidate)
	info, err := p.Admin.TrialInfo(ctx(t), id.Namespace)
	if err != nil || info.SMTPPort != port || info.Plane != planeID(t, p) {
		t.Fatalf("trial info %+v %v; want port %d of plane %s", info, err, port, planeID(t, p))
	}
	return id
}

// TestPortsBelongToTheirPlane: two planes on one database each give a
// trial the same port number, as two hosts would. A plain SMTP message on
// that port (the shared writer's send, keyed by the port it came in by)
// lands in the trial of the plane it reached, never the other's; a port
// only the other plane's trial owns opens nothing; each plane restores
// only its own ports.
func TestPortsBelongToTheirPlane(t *testing.T) {
	pg := pgtest.Start(t)
	dsn := itest.WriteSecret(t, "dsn", pg.DSN())
	var planes [2]*itest.Plane
	for i := range planes {
		planes[i] = itest.StartPlane(t, "--store", "postgres", "--dsn-file", dsn)
	}
	if planeID(t, planes[0]) == planeID(t, planes[1]) {
		t.Fatal("two planes minted one identity")
	}
	const port, onlyB = 42001, 42002
	trials := [2]rpc.Identity{portTrial(t, planes[0], port), portTrial(t, planes[1], port)}
	portTrial(t, planes[1], onlyB)

	for i, p := range planes {
		w := p.Client(t, p.Grant(t, rpc.RoleWriter))
		subject := "by port on plane " + itest.Itoa(i)
		_, err := w.Send(ctx(t), &rpc.SendRequest{Via: rpc.ViaSMTP, Port: port, From: rpc.CandidateSender, To: []string{"agent@example.com"},
			Raw: []byte("Subject: " + subject + "\r\n\r\nhello\r\n")})
		if err != nil {
			t.Fatalf("plain SMTP on port %d of plane %d: %v", port, i, err)
		}
	}
	_, err := planes[0].Client(t, planes[0].Grant(t, rpc.RoleWriter)).Send(ctx(t), &rpc.SendRequest{Via: rpc.ViaSMTP, Port: onlyB,
		From: rpc.CandidateSender, To: []string{"agent@example.com"}, Raw: []byte("Subject: stray\r\n\r\nhello\r\n")})
	if rpc.CodeOf(err) != rpc.CodeUnauthorized {
		t.Fatalf("plane A, on a port only plane B's trial owns: %v; want unauthorized", err)
	}
	for i, id := range trials {
		for j, p := range planes {
			ms, err := p.Client(t, p.GatewayGrant(t)).List(ctx(t), &rpc.ReadRequest{Namespace: id.Namespace, Capability: id.ReadCapability})
			if err != nil || len(ms) != 1 || ms[0].Subject != "by port on plane "+itest.Itoa(i) {
				t.Fatalf("plane %d's trial, read through plane %d: %+v %v; want only the message sent on its own plane", i, j, ms, err)
			}
		}
	}
	for i, want := range [][]int{{port}, {port, onlyB}} {
		r, err := planes[i].Admin.PortsSync(ctx(t), &rpc.PortsSyncRequest{Restore: true})
		if err != nil || !slices.Equal(r.Assigned, want) {
			t.Fatalf("plane %d restores %v (%v); want %v", i, r.Assigned, err, want)
		}
	}
}

// pgProxy forwards connections to PostgreSQL, except, once cut names an
// application, new connections that start as that application: the test's
// way to keep one plane's LISTEN connection from coming back.
type pgProxy struct {
	ln       net.Listener
	upstream string
	cut      atomic.Pointer[string]
	refused  atomic.Int64
}

func startProxy(t *testing.T, upstream string) *pgProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgProxy{ln: ln, upstream: upstream}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
	return p
}

// forward reads the client's startup message (sslmode=disable: it comes
// first), refuses it if it names the cut application, else relays both
// ways.
func (p *pgProxy) forward(c net.Conn) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 8 || n > 1<<16 {
		return
	}
	startup := make([]byte, n-4)
	if _, err := io.ReadFull(c, startup); err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	if app := p.cut.Load(); app != nil && bytes.Contains(startup, []byte("application_name\x00"+*app+"\x00")) {
		p.refused.Add(1)
		return
	}
	up, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return
	}
	defer up.Close()
	if _, err := up.Write(append(size[:], startup...)); err != nil {
		return
	}
	go func() {
		io.Copy(up, c)
		up.(*net.TCPConn).CloseWrite()
	}()
	io.Copy(c, up)
}

// TestListenCut: while plane A's LISTEN connection is down (its backend
// terminated, and kept from coming back), plane A serves nothing from its
// caches: a trial closed through plane B is refused on plane A at once,
// its writer grant and its read capability alike, though both were
// cached on A just before. Once LISTEN is back, A works on.
func TestListenCut(t *testing.T) {
	pg := pgtest.Start(t)
	direct := pg.DSN()
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	a := itest.StartPlane(t, "--store", "postgres", "--dsn-file", itest.WriteSecret(t, "dsn-a", u.String()))
	b := itest.StartPlane(t, "--store", "postgres", "--dsn-file", itest.WriteSecret(t, "dsn-b", direct))
	app := sqlledger.ListenApplication(planeID(t, a))

	id := b.Trial(t, rpc.ProfileCandidate)
	writerOnA := a.Client(t, id.WriterGrant)
	gatewayOnA := a.Client(t, a.GatewayGrant(t))
	read := &rpc.ReadRequest{Namespace: id.Namespace, Capability: id.ReadCapability}
	listening := func() bool {
		c, err := pgx.Connect(ctx(t), direct)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		var n int
		if err := c.QueryRow(ctx(t), `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	itest.Eventually(t, "plane A listens", itest.Bound, listening)
	for range 2 { // the second call is served from A's caches, in the old design
		if _, err := writerOnA.Health(ctx(t)); err != nil {
			t.Fatalf("the trial's writer grant on plane A: %v", err)
		}
		if _, err := gatewayOnA.List(ctx(t), read); err != nil {
			t.Fatalf("the trial's read on plane A: %v", err)
		}
	}

	proxy.cut.Store(&app)
	c, err := pgx.Connect(ctx(t), direct)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var killed int
	if err := c.QueryRow(ctx(t), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminating plane A's LISTEN backend: %d %v", killed, err)
	}
	itest.Eventually(t, "plane A logs its LISTEN connection lost", itest.Bound, func() bool { return strings.Contains(a.Output(), "LISTEN connection to PostgreSQL is lost") })
	itest.Eventually(t, "plane A tries to listen again, and is kept out", itest.Bound, func() bool { return proxy.refused.Load() > 0 })

	if err := b.Admin.TrialClose(ctx(t), id.Namespace); err != nil {
		t.Fatal(err)
	}
	if _, err := writerOnA.Health(ctx(t)); rpc.CodeOf(err) != rpc.CodeUnauthenticated {
		t.Fatalf("plane A, LISTEN down, right after the trial closed through plane B: its writer grant answers %v; want unauthenticated", err)
	}
	if _, err := gatewayOnA.List(ctx(t), read); rpc.CodeOf(err) != rpc.CodeForbidden {
		t.Fatalf("plane A, LISTEN down, right after the trial closed through plane B: its read answers %v; want forbidden", err)
	}
	if listening() || strings.Contains(a.Output(), "LISTEN connection to PostgreSQL is back") {
		t.Fatal("plane A's LISTEN connection came back during the test: the refusals above prove nothing")
	}

	// Without caches plane A still works, from the database.
	other := b.Trial(t, rpc.ProfileCandidate)
	if _, err := a.Client(t, other.WriterGrant).Health(ctx(t)); err != nil {
		t.Fatalf("a new trial's writer grant on plane A, LISTEN down: %v", err)
	}
	proxy.cut.Store(nil)
	itest.Eventually(t, "plane A listens again", itest.Bound, listening)
	itest.Eventually(t, "plane A logs its LISTEN connection back", itest.Bound, func() bool { return strings.Contains(a.Output(), "LISTEN connection to PostgreSQL is back") })
	if _, err := a.Client(t, other.WriterGrant).Health(ctx(t)); err != nil {
		t.Fatalf("a trial's writer grant on plane A, LISTEN back: %v", err)
	}
}
