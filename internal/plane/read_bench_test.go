package plane

import (
	"context"
	"net"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/ledger/sqlledger"
	"github.com/websitebench/mailplane/internal/peercred"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// indexedMail is a message with all a reader is shown: a display name, a
// text part with a code and a link, an HTML part with another link and an
// inline image, and an attachment.
const indexedMail = "From: Site Team <" + rpc.CandidateSender + ">\r\n" +
	"To: user@example.com\r\n" +
	"Subject: Your code is 482913\r\n" +
	"MIME-Version: 1.0\r\n" +
	"Content-Type: multipart/mixed; boundary=outer\r\n\r\n" +
	"--outer\r\n" +
	"Content-Type: multipart/alternative; boundary=alt\r\n\r\n" +
	"--alt\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n\r\n" +
	"Your verification code is 482913.\r\nOr open https://site.example/verify?t=abc to sign in.\r\n" +
	"--alt\r\n" +
	"Content-Type: multipart/related; boundary=rel\r\n\r\n" +
	"--rel\r\n" +
	"Content-Type: text/html; charset=utf-8\r\n\r\n" +
	"<p>Your verification code is <b>482913</b>.</p><p><a href=\"https://site.example/verify?t=abc\">Verify</a> " +
	"<a href=\"https://help.example/faq\">Help</a></p><img src=\"cid:logo@site\">\r\n" +
	"--rel\r\n" +
	"Content-Type: image/png\r\nContent-ID: <logo@site>\r\nContent-Transfer-Encoding: base64\r\n\r\n" +
	"iVBORw0KGgo=\r\n" +
	"--rel--\r\n" +
	"--alt--\r\n" +
	"--outer\r\n" +
	"Content-Type: application/pdf\r\nContent-Disposition: attachment; filename=\"invoice.pdf\"\r\n\r\n" +
	"%PDF-1.4\r\n" +
	"--outer--\r\n"

// BenchmarkRead is the plane's read path over its socket, as the
// gateway calls it, for 32 stored copies of indexedMail: "list32-cold"
// and "get-cold" with the plane's message cache emptied first (a first
// read of new mail: the store's round trip and, before the index, the
// parse), "list32-warm" from the cache; and "send", one more copy sent
// (the accept, with its index made and stored, and an fsync).
func BenchmarkRead(b *testing.B) {
	ctx := context.Background()
	l := openLedger(b)
	br := NewBroker(l, nil, Quotas{}, zerolog.Nop())
	socket := serveBroker(b, br)
	id, g := trialAndGateway(b, br)
	gateway, writer := client(b, socket, g), client(b, socket, id.WriterGrant)
	send := &rpc.SendRequest{Via: rpc.ViaSMTP, From: rpc.CandidateSender, To: []string{"user@example.com"}, Raw: []byte(indexedMail)}
	for range 32 {
		if _, err := writer.Send(ctx, send); err != nil {
			b.Fatal(err)
		}
	}
	list := &rpc.ReadRequest{Namespace: id.Namespace, Capability: id.ReadCapability}
	get := &rpc.ReadRequest{Namespace: id.Namespace, Capability: id.ReadCapability, ID: 7}
	for _, c := range []struct {
		name string
		cold bool
		call func() error
	}{
		{"list32-cold", true, func() error { _, err := gateway.List(ctx, list); return err }},
		{"list32-warm", false, func() error { _, err := gateway.List(ctx, list); return err }},
		{"get-cold", true, func() error { _, err := gateway.Get(ctx, get); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if c.cold {
					br.messages.clear()
				}
				if err := c.call(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("send", func(b *testing.B) {
		for b.Loop() {
			if _, err := writer.Send(ctx, send); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// clear empties the cache.
func (c *messageCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m, c.bytes = nil, 0
	c.order.Init()
}

func client(t testing.TB, socket, grant string) *rpc.Client {
	c := rpc.NewClient(socket, grant)
	t.Cleanup(c.Close)
	return c
}

// serveBroker serves b on a Unix socket, as serve does, and returns its
// path.
// openLedger opens an embedded ledger in a temporary directory, closed
// when the test ends.
func openLedger(t testing.TB) *sqlledger.DB {
	t.Helper()
	l, err := sqlledger.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func serveBroker(t testing.TB, b *Broker) string {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "plane.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(b, peercred.Policy{}, 0, zerolog.Nop())
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return socket
}

// servedTrial is a broker on an embedded ledger, served on a Unix socket,
// with one candidate trial and a gateway client.
func servedTrial(t *testing.T) (*sqlledger.DB, *Broker, string, rpc.Identity, *rpc.Client) {
	t.Helper()
	l := openLedger(t)
	b := NewBroker(l, nil, Quotas{}, zerolog.Nop())
	socket := serveBroker(t, b)
	id, gateway := trialAndGateway(t, b)
	return l, b, socket, id, client(t, socket, gateway)
}

// trialAndGateway opens a candidate trial in b and mints a gateway grant.
func trialAndGateway(tb testing.TB, b *Broker) (rpc.Identity, string) {
	tb.Helper()
	ctx := context.Background()
	id, err := b.CreateTrial(ctx, &rpc.TrialCreateRequest{Profile: rpc.ProfileCandidate})
	if err != nil {
		tb.Fatal(err)
	}
	g, err := b.CreateGrant(ctx, &rpc.GrantCreateRequest{Role: rpc.RoleGateway})
	if err != nil {
		tb.Fatal(err)
	}
	return id, g.Grant
}
