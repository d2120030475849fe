package plane_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func msg(subject, body string) []byte {
	return []byte("Subject: " + subject + "\r\n\r\n" + body)
}

func send(t testing.TB, cl *rpc.Client, to string, raw []byte) (rpc.SendResponse, error) {
	return cl.Send(ctx(t), &rpc.SendRequest{Via: rpc.ViaSMTP, From: rpc.CandidateSender, To: []string{to}, Raw: raw})
}

func mustSend(t testing.TB, cl *rpc.Client, to string, raw []byte) rpc.SendResponse {
	t.Helper()
	r, err := send(t, cl, to, raw)
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	return r
}

func code(err error) string { return rpc.CodeOf(err) }

// world is a running plane with two candidate trials and a client per
// grant.
type world struct {
	plane        *itest.Plane
	a, b         rpc.Identity
	writerA      *rpc.Client
	inboxA       *rpc.Client
	gateway      *rpc.Client
	gatewayGrant string
}

func newWorld(t *testing.T, flags ...string) *world {
	p := itest.StartPlane(t, flags...)
	w := &world{plane: p, a: p.Trial(t, rpc.ProfileCandidate), b: p.Trial(t, rpc.ProfileCandidate)}
	w.writerA = p.Client(t, w.a.WriterGrant)
	w.inboxA = p.Client(t, w.a.InboxGrant)
	w.gatewayGrant = p.GatewayGrant(t)
	w.gateway = p.Client(t, w.gatewayGrant)
	return w
}

func (w *world) list(t testing.TB, id rpc.Identity) []rpc.Message {
	t.Helper()
	msgs, err := w.gateway.List(ctx(t), &rpc.ReadRequest{Namespace: id.Namespace, Capability: id.ReadCapability})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	return msgs
}

// TestRefusals: every way to call without the right to is refused with a
// clear code, and nothing changes.
func TestRefusals(t *testing.T) {
	w := newWorld(t)
	mustSend(t, w.writerA, "user@example.com", msg("one", "hello"))
	before := w.list(t, w.a)

	sendReq := &rpc.SendRequest{Via: rpc.ViaSMTP, From: rpc.CandidateSender, To: []string{"user@example.com"}, Raw: msg("x", "y")}
	readB := &rpc.ReadRequest{Namespace: w.b.Namespace, Capability: w.b.ReadCapability}
	cases := []struct {
		name   string
		grant  string
		method string
		req    any
		want   string
	}{
		{"no grant", "", rpc.MethodSend, sendReq, rpc.CodeUnauthenticated},
		{"unknown grant", "mpg_" + strings.Repeat("0", 64), rpc.MethodSend, sendReq, rpc.CodeUnauthenticated},
		{"not a grant", w.a.ReadCapability, rpc.MethodList, readB, rpc.CodeUnauthenticated},
		{"writer lists", w.a.WriterGrant, rpc.MethodList, readB, rpc.CodePermissionDenied},
		{"writer creates trials", w.a.WriterGrant, rpc.MethodTrialCreate, &rpc.TrialCreateRequest{}, rpc.CodePermissionDenied},
		{"inbox sends", w.a.InboxGrant, rpc.MethodSend, sendReq, rpc.CodePermissionDenied},
		{"inbox reads another namespace", w.a.InboxGrant, rpc.MethodList, &rpc.ReadRequest{Namespace: w.b.Namespace}, rpc.CodePermissionDenied},
		{"inbox asks latest", w.a.InboxGrant, rpc.MethodLatest, &rpc.ReadRequest{}, rpc.CodePermissionDenied},
		{"gateway with a wrong capability", w.gatewayGrant, rpc.MethodList, &rpc.ReadRequest{Namespace: w.b.Namespace, Capability: w.a.ReadCapability}, rpc.CodeForbidden},
		{"gateway without a capability", w.gatewayGrant, rpc.MethodList, &rpc.ReadRequest{Namespace: w.b.Namespace}, rpc.CodeForbidden},
		{"gateway with the mail-API token", w.gatewayGrant, rpc.MethodList, &rpc.ReadRequest{Namespace: w.b.Namespace, Capability: w.b.MailAPIToken}, rpc.CodeForbidden},
		{"gateway with the write capability", w.gatewayGrant, rpc.MethodList, &rpc.ReadRequest{Namespace: w.b.Namespace, Capability: w.b.WriteCapability}, rpc.CodeForbidden},
		{"gateway on an unknown namespace", w.gatewayGrant, rpc.MethodList, &rpc.ReadRequest{Namespace: "trial-nope", Capability: w.b.ReadCapability}, rpc.CodeForbidden},
		{"gateway on an invalid namespace", w.gatewayGrant, rpc.MethodList, &rpc.ReadRequest{Namespace: "a/b", Capability: w.b.ReadCapability}, rpc.CodeInvalidNamespace},
		{"gateway sends", w.gatewayGrant, rpc.MethodSend, sendReq, rpc.CodePermissionDenied},
		{"gateway creates trials", w.gatewayGrant, rpc.MethodTrialCreate, &rpc.TrialCreateRequest{}, rpc.CodePermissionDenied},
		{"unknown method", w.gatewayGrant, "drop", &rpc.Empty{}, rpc.CodeUnknownMethod},
		{"http send with a wrong token", w.a.WriterGrant, rpc.MethodSend, &rpc.SendRequest{Via: rpc.ViaHTTP, Credential: w.b.MailAPIToken, From: rpc.CandidateSender, To: []string{"u@example.com"}, Raw: msg("x", "y")}, rpc.CodeUnauthorized},
		{"http send with the bootstrap token", w.a.WriterGrant, rpc.MethodSend, &rpc.SendRequest{Via: rpc.ViaHTTP, Credential: w.a.BootstrapToken, From: rpc.CandidateSender, To: []string{"u@example.com"}, Raw: msg("x", "y")}, rpc.CodeUnauthorized},
		{"select another trial's namespace", w.a.WriterGrant, rpc.MethodSend, &rpc.SendRequest{Via: rpc.ViaSMTPSelect, Namespace: w.b.Namespace, Credential: w.b.WriteCapability, From: rpc.CandidateSender, To: []string{"u@example.com"}, Raw: msg("x", "y")}, rpc.CodeInvalidCapability},
		{"sender not allowed", w.a.WriterGrant, rpc.MethodSend, &rpc.SendRequest{Via: rpc.ViaSMTP, From: "evil@example.com", To: []string{"u@example.com"}, Raw: msg("x", "y")}, rpc.CodeInvalidEnvelope},
		{"recipient with a display name", w.a.WriterGrant, rpc.MethodSend, &rpc.SendRequest{Via: rpc.ViaSMTP, From: rpc.CandidateSender, To: []string{"Alice <a@example.com>"}, Raw: msg("x", "y")}, rpc.CodeInvalidEnvelope},
		{"no recipient", w.a.WriterGrant, rpc.MethodSend, &rpc.SendRequest{Via: rpc.ViaSMTP, From: rpc.CandidateSender, Raw: msg("x", "y")}, rpc.CodeInvalidEnvelope},
		{"17 recipients", w.a.WriterGrant, rpc.MethodSend, &rpc.SendRequest{Via: rpc.ViaSMTP, From: rpc.CandidateSender, To: strings.Split(strings.Repeat("u@example.com,", 17)[:17*14-1], ","), Raw: msg("x", "y")}, rpc.CodeTooManyRecipients},
		{"message over 1 MiB", w.a.WriterGrant, rpc.MethodSend, &rpc.SendRequest{Via: rpc.ViaSMTP, From: rpc.CandidateSender, To: []string{"u@example.com"}, Raw: bytes.Repeat([]byte("a"), 1<<20+1)}, rpc.CodeMessageTooLarge},
		{"unknown field", w.a.WriterGrant, rpc.MethodSend, map[string]any{"via": "smtp", "namespace_override": "x"}, rpc.CodeBadRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := rpc.NewClient(w.plane.Socket, c.grant).Call(ctx(t), c.method, c.req, &map[string]any{})
			if code(err) != c.want {
				t.Fatalf("got %v, want %s", err, c.want)
			}
			if strings.Contains(err.Error(), w.a.ReadCapability) || strings.Contains(err.Error(), w.b.ReadCapability) {
				t.Fatalf("error text carries a capability: %v", err)
			}
		})
	}
	if after := w.list(t, w.a); len(after) != len(before) {
		t.Fatalf("namespace a changed: %d → %d messages", len(before), len(after))
	}
	if got := w.list(t, w.b); len(got) != 0 {
		t.Fatalf("namespace b got %d messages", len(got))
	}

	t.Run("revoked grant", func(t *testing.T) {
		if err := w.plane.Admin.TrialClose(ctx(t), w.a.Namespace); err != nil {
			t.Fatal(err)
		}
		if _, err := send(t, w.writerA, "user@example.com", msg("x", "y")); code(err) != rpc.CodeUnauthenticated {
			t.Fatalf("writer after destroy: %v", err)
		}
		if _, err := w.inboxA.List(ctx(t), &rpc.ReadRequest{}); code(err) != rpc.CodeUnauthenticated {
			t.Fatalf("inbox after destroy: %v", err)
		}
		if _, err := w.gateway.List(ctx(t), &rpc.ReadRequest{Namespace: w.a.Namespace, Capability: w.a.ReadCapability}); code(err) != rpc.CodeForbidden {
			t.Fatalf("gateway after destroy: %v", err)
		}
	})
}

// TestPeerAllowList: a grant used by a uid its role's allow list does not
// name is refused by the kernel check, whatever the grant.
func TestPeerAllowList(t *testing.T) {
	me := os.Getuid()
	p := itest.StartPlane(t, "--allow-uid", fmt.Sprintf("writer=%d", me+4242), "--allow-uid", fmt.Sprintf("admin=%d", me))
	id := p.Trial(t, rpc.ProfileCandidate) // admin: our uid is allowed
	_, err := send(t, p.Client(t, id.WriterGrant), "user@example.com", msg("x", "y"))
	if code(err) != rpc.CodeUnauthenticated {
		t.Fatalf("writer grant from uid %d: %v", me, err)
	}
	if !p.WaitOutput(`"uid":`+fmt.Sprint(me), 5*time.Second) {
		t.Fatalf("refusal not logged with the peer uid:\n%s", p.Output())
	}
	msgs, err := p.Client(t, p.GatewayGrant(t)).List(ctx(t), &rpc.ReadRequest{Namespace: id.Namespace, Capability: id.ReadCapability})
	if err != nil || len(msgs) != 0 {
		t.Fatalf("list: %v %d", err, len(msgs))
	}
}

// TestFrames: an oversized frame is refused before it is read, a request
// for another protocol version is refused, and a caller that stalls
// mid-request is cut off at the read deadline; none changes anything.
func TestFrames(t *testing.T) {
	w := newWorld(t, "--rpc-read-timeout", "500ms")
	dial := func() net.Conn {
		c, err := net.Dial("unix", w.plane.Socket)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	roundTrip := func(c net.Conn, req string) string {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, req); err != nil {
			return "write: " + err.Error()
		}
		b, _ := io.ReadAll(io.LimitReader(c, 4096))
		return string(b)
	}
	t.Run("oversized", func(t *testing.T) {
		c := dial()
		got := roundTrip(c, fmt.Sprintf("POST /v1/send HTTP/1.1\r\nHost: p\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", w.a.WriterGrant, rpc.MaxRequestBytes+1))
		if !strings.Contains(got, "413") || !strings.Contains(got, rpc.CodeFrameTooLarge) {
			t.Fatalf("got %q", got)
		}
	})
	// A body without a length (chunked) is refused before a byte of it
	// is read, whatever its size: the wire's bodies have one.
	t.Run("oversized without length", func(t *testing.T) {
		body := bytes.Repeat([]byte("a"), rpc.MaxRequestBytes+10)
		req, _ := http.NewRequest(http.MethodPost, "http://p/v1/send", bytes.NewReader(body))
		req.ContentLength = -1
		req.Header.Set("Authorization", "Bearer "+w.a.WriterGrant)
		hc := http.Client{Transport: &http.Transport{Dial: func(_, _ string) (net.Conn, error) { return net.Dial("unix", w.plane.Socket) }}}
		resp, err := hc.Do(req)
		if err != nil {
			return // the plane may close the connection mid-upload: refused either way
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusLengthRequired {
			t.Fatalf("got %d %s", resp.StatusCode, b)
		}
	})
	t.Run("other version", func(t *testing.T) {
		got := roundTrip(dial(), "POST /v2/send HTTP/1.1\r\nHost: p\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
		if !strings.Contains(got, rpc.CodeUnsupportedVersion) {
			t.Fatalf("got %q", got)
		}
	})
	// A caller refused on its head (here a wrong grant) that writes its
	// body after reading the answer, as Python's http.client writes it
	// after the head, finds the connection open, and its next call on it
	// answered.
	t.Run("refused before its body", func(t *testing.T) {
		c := dial()
		c.SetDeadline(time.Now().Add(itest.Bound))
		br := bufio.NewReader(c)
		io.WriteString(c, "POST /v1/health HTTP/1.1\r\nHost: p\r\nAuthorization: Bearer wrong\r\nContent-Length: 2\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Close {
			t.Fatalf("a wrong grant: %d, close %v; want 401 on a connection kept open", resp.StatusCode, resp.Close)
		}
		if _, err := io.WriteString(c, "{}"); err != nil {
			t.Fatalf("the body after the refusal: %v", err)
		}
		io.WriteString(c, fmt.Sprintf("POST /v1/health HTTP/1.1\r\nHost: p\r\nAuthorization: Bearer %s\r\nContent-Length: 2\r\n\r\n{}", w.a.WriterGrant))
		if resp, err = http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("the next call on the connection: %v %v", resp, err)
		}
		resp.Body.Close()
	})
	// An HTTP/1.0 caller that asks to keep its connection is told it
	// stays, and its next call on it is answered.
	t.Run("http/1.0 keep-alive", func(t *testing.T) {
		c := dial()
		c.SetDeadline(time.Now().Add(itest.Bound))
		br := bufio.NewReader(c)
		call := fmt.Sprintf("POST /v1/health HTTP/1.0\r\nConnection: keep-alive\r\nAuthorization: Bearer %s\r\nContent-Length: 2\r\n\r\n{}", w.a.WriterGrant)
		for i := range 2 {
			io.WriteString(c, call)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Connection") != "keep-alive" || resp.Close {
				t.Fatalf("call %d: %d, Connection %q, close %v; want 200 and keep-alive", i, resp.StatusCode, resp.Header.Get("Connection"), resp.Close)
			}
		}
	})
	t.Run("slow client", func(t *testing.T) {
		c := dial()
		body := fmt.Sprintf("{\"via\":\"smtp\",\"from\":%q,\"to\":[\"slow@example.com\"]}\nSubject: x\r\n\r\ny", rpc.CandidateSender)
		head := fmt.Sprintf("POST /v1/send HTTP/1.1\r\nHost: p\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n", w.a.WriterGrant, len(body))
		io.WriteString(c, head+body[:10]) // then stall
		// The plane's 500ms read deadline, not this generous one, ends the
		// connection: reading ends without a timeout of its own.
		c.SetReadDeadline(time.Now().Add(itest.Bound))
		b, err := io.ReadAll(c)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("the plane held the stalled connection for %v", itest.Bound)
		}
		if strings.Contains(string(b), `"seq"`) {
			t.Fatalf("a partial request was accepted: %q", b)
		}
	})
	if got := w.list(t, w.a); len(got) != 0 {
		t.Fatalf("%d messages stored", len(got))
	}
}

// TestSendSemantics: ids, scrubbing, recipient learning, sealing,
// rotation, bootstrap.
func TestSendSemantics(t *testing.T) {
	w := newWorld(t)
	raw := []byte("From: spoof@evil.example\r\nTo: x@evil.example\r\nBcc: hidden@evil.example\r\nX-Tags: evil\r\nX-WebsiteBench-Namespace: " + w.b.Namespace + "\r\nSubject: Your code\r\n\r\nYour code is 246810.")
	r1 := mustSend(t, w.writerA, "Zed@Example.com", raw)
	r2 := mustSend(t, w.writerA, "amy@example.com", msg("second", "hi"))
	if r1.Seq != 1 || r2.Seq != 2 || r1.ID == r2.ID || len(r1.ID) != 36 {
		t.Fatalf("ids: %+v %+v", r1, r2)
	}
	msgs := w.list(t, w.a)
	if len(msgs) != 2 || msgs[0].ID != 1 || msgs[1].ID != 2 || msgs[0].Subject != "Your code" {
		t.Fatalf("list: %+v", msgs)
	}
	if msgs[0].Text != "Your code is 246810." {
		t.Fatalf("text not as sent: %q", msgs[0].Text)
	}
	if msgs[0].EnvelopeFrom != rpc.CandidateSender || msgs[0].Recipients[0] != "Zed@Example.com" {
		t.Fatalf("envelope: %+v", msgs[0])
	}
	// Filtered ids are the same ids; filters ignore case.
	got, err := w.gateway.List(ctx(t), &rpc.ReadRequest{Namespace: w.a.Namespace, Capability: w.a.ReadCapability, Recipient: "zed@example.COM"})
	if err != nil || len(got) != 1 || got[0].ID != 1 {
		t.Fatalf("filtered: %v %+v", err, got)
	}
	latest, err := w.gateway.Latest(ctx(t), &rpc.ReadRequest{Namespace: w.a.Namespace, Capability: w.a.ReadCapability})
	if err != nil || latest.ID != 2 {
		t.Fatalf("latest: %v %+v", err, latest)
	}
	if _, err := w.gateway.List(ctx(t), &rpc.ReadRequest{Namespace: w.a.Namespace, Capability: w.a.ReadCapability, Recipient: "hidden@evil.example"}); code(err) != rpc.CodeRecipientForbidden {
		t.Fatalf("unlearned recipient: %v", err)
	}
	if got, err := w.gateway.List(ctx(t), &rpc.ReadRequest{Namespace: w.b.Namespace, Capability: w.b.ReadCapability, Recipient: "any@example.com"}); err != nil || len(got) != 0 {
		t.Fatalf("nothing learned yet: %v %v", err, got)
	}
	if _, err := w.gateway.Get(ctx(t), &rpc.ReadRequest{Namespace: w.a.Namespace, Capability: w.a.ReadCapability, ID: 3}); code(err) != rpc.CodeNotFound {
		t.Fatalf("get 3: %v", err)
	}
	// The inbox sees its own namespace.
	in, err := w.inboxA.List(ctx(t), &rpc.ReadRequest{})
	if err != nil || len(in) != 2 {
		t.Fatalf("inbox: %v %d", err, len(in))
	}
	// The write capability writes (POST /emails) and reads nothing.
	if _, err := w.writerA.Send(ctx(t), &rpc.SendRequest{Via: rpc.ViaHTTP, Credential: w.a.WriteCapability, From: rpc.CandidateSender, To: []string{"amy@example.com"}, Raw: msg("3", "x")}); err != nil {
		t.Fatalf("write capability: %v", err)
	}
	// A credential-only check judges the credential and stores nothing.
	if err := w.writerA.CheckCredential(ctx(t), &rpc.CredentialRequest{Via: rpc.ViaHTTP, Credential: w.a.MailAPIToken}); err != nil {
		t.Fatalf("credential-only check: %v", err)
	}
	if err := w.writerA.CheckCredential(ctx(t), &rpc.CredentialRequest{Via: rpc.ViaHTTP, Credential: w.a.ReadCapability}); code(err) != rpc.CodeUnauthorized {
		t.Fatalf("credential-only check with the read capability: %v", err)
	}
	if got := w.list(t, w.a); len(got) != 3 {
		t.Fatalf("a credential-only check stored something: %d messages", len(got))
	}
	boot, err := w.writerA.Bootstrap(ctx(t), w.a.BootstrapToken)
	if err != nil || boot.Namespace != w.a.Namespace || boot.Capability != w.a.WriteCapability {
		t.Fatalf("bootstrap: %v %+v", err, boot)
	}
	if _, err := w.writerA.Bootstrap(ctx(t), w.a.MailAPIToken); code(err) != rpc.CodeForbidden {
		t.Fatalf("bootstrap with the mail-API token: %v", err)
	}

	// Seal: writes refused, evaluator reads kept.
	if err := w.plane.Admin.TrialSeal(ctx(t), w.a.Namespace); err != nil {
		t.Fatal(err)
	}
	if _, err := send(t, w.writerA, "amy@example.com", msg("late", "x")); code(err) != rpc.CodeSealed {
		t.Fatalf("send after seal: %v", err)
	}
	if got := w.list(t, w.a); len(got) != 3 {
		t.Fatalf("reads after seal: %d", len(got))
	}

	// Rotation (authoring): same tokens, new namespace, old one sealed and
	// still readable with its capability.
	auth := w.plane.Trial(t, rpc.ProfileAuthoring)
	wr := w.plane.Client(t, auth.WriterGrant)
	sel := func(ns, cap string) error {
		_, err := wr.Send(ctx(t), &rpc.SendRequest{Via: rpc.ViaSMTPSelect, Namespace: ns, Credential: cap, From: "site@reference.example", To: []string{"u@example.com"}, Raw: msg("s", "x")})
		return err
	}
	if err := sel(auth.Namespace, auth.ReadCapability); err != nil {
		t.Fatalf("select: %v", err)
	}
	rot, err := w.plane.Admin.TrialRotate(ctx(t), &rpc.TrialRotateRequest{Namespace: auth.Namespace})
	if err != nil || rot.Sealed != auth.Namespace {
		t.Fatalf("rotate: %v %+v", err, rot)
	}
	// From the first rotation on, the authoring SMTP listener is fixed to
	// the current namespace: whatever the headers name lands there.
	if err := sel(rot.Namespace, rot.ReadCapability); err != nil {
		t.Fatalf("select after rotate: %v", err)
	}
	if err := sel(auth.Namespace, auth.ReadCapability); err != nil {
		t.Fatalf("old headers after rotate: %v", err)
	}
	if _, err := wr.Send(ctx(t), &rpc.SendRequest{Via: rpc.ViaHTTP, Credential: auth.BootstrapToken, From: "site@reference.example", To: []string{"u@example.com"}, Raw: msg("h", "x")}); err != nil {
		t.Fatalf("http send after rotate: %v", err)
	}
	boot, err = wr.Bootstrap(ctx(t), auth.BootstrapToken)
	if err != nil || boot.Namespace != rot.Namespace || boot.Capability != rot.ReadCapability {
		t.Fatalf("bootstrap after rotate: %v %+v", err, boot)
	}
	old, _ := w.gateway.List(ctx(t), &rpc.ReadRequest{Namespace: auth.Namespace, Capability: auth.ReadCapability})
	cur, _ := w.gateway.List(ctx(t), &rpc.ReadRequest{Namespace: rot.Namespace, Capability: rot.ReadCapability})
	if len(old) != 1 || len(cur) != 3 {
		t.Fatalf("after rotation: old %d, new %d", len(old), len(cur))
	}
}

// TestQuotaAndIdempotencyUnderConcurrency: 100 concurrent sends into room
// for 32 accept exactly 32; 50 concurrent sends with one idempotency key
// store one message and all get its id.
func TestQuotaAndIdempotencyUnderConcurrency(t *testing.T) {
	w := newWorld(t, "--quota-messages", "32", "--quota-bytes", "0")
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[string]int{}
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := send(t, w.writerA, "user@example.com", msg(fmt.Sprint(i), "x"))
			mu.Lock()
			counts[code(err)]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if counts[""] != 32 || counts[rpc.CodeMailboxCapacity] != 68 {
		t.Fatalf("outcomes: %v", counts)
	}
	if got := w.list(t, w.a); len(got) != 32 {
		t.Fatalf("stored %d", len(got))
	}

	ids := make(chan string, 50)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := w.writerA.Send(ctx(t), &rpc.SendRequest{Via: rpc.ViaHTTP, Credential: w.b.MailAPIToken, From: rpc.CandidateSender, To: []string{"u@example.com"},
				Raw: msg("same", "x"), IdempotencyKey: "key-1", Fingerprint: "fp"})
			if err != nil {
				ids <- "error " + err.Error()
				return
			}
			ids <- r.ID
		}()
	}
	_ = w.writerA // trial a is full; use b's writer below
	wg.Wait()
	close(ids)
	// The requests above used a's writer with b's token: all refused.
	for id := range ids {
		if !strings.Contains(id, rpc.CodeUnauthorized) {
			t.Fatalf("cross-trial token: %s", id)
		}
	}

	writerB := w.plane.Client(t, w.b.WriterGrant)
	ids = make(chan string, 50)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := writerB.Send(ctx(t), &rpc.SendRequest{Via: rpc.ViaHTTP, Credential: w.b.MailAPIToken, From: rpc.CandidateSender, To: []string{"u@example.com"},
				Raw: msg("same", "x"), IdempotencyKey: "key-1", Fingerprint: "fp"})
			if err != nil {
				ids <- "error " + err.Error()
				return
			}
			ids <- r.ID
		}()
	}
	wg.Wait()
	close(ids)
	first := ""
	for id := range ids {
		if first == "" {
			first = id
		}
		if id != first || strings.HasPrefix(id, "error") {
			t.Fatalf("ids differ: %q vs %q", id, first)
		}
	}
	if got := w.list(t, w.b); len(got) != 1 {
		t.Fatalf("stored %d for one idempotency key", len(got))
	}
	_, err := writerB.Send(ctx(t), &rpc.SendRequest{Via: rpc.ViaHTTP, Credential: w.b.MailAPIToken, From: rpc.CandidateSender, To: []string{"u@example.com"},
		Raw: msg("other", "x"), IdempotencyKey: "key-1", Fingerprint: "fp2"})
	if code(err) != rpc.CodeIdempotencyConflict {
		t.Fatalf("same key, other payload: %v", err)
	}
}

// TestDurability: SIGKILL right after a batch of acknowledged sends loses
// none of them, nor any policy.
func TestDurability(t *testing.T) {
	w := newWorld(t, "--quota-messages", "0", "--quota-bytes", "0")
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[int64]string{}
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				subject := fmt.Sprintf("g%d-%d", g, i)
				r, err := send(t, w.writerA, "user@example.com", msg(subject, "body "+subject))
				if err != nil {
					t.Errorf("send: %v", err)
					return
				}
				mu.Lock()
				acked[r.Seq] = subject
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	w.plane.Kill()
	w.plane.Restart(t)

	msgs := w.list(t, w.a)
	if len(msgs) != len(acked) || len(acked) != 200 {
		t.Fatalf("after kill -9: %d stored, %d acknowledged", len(msgs), len(acked))
	}
	for _, m := range msgs {
		if acked[m.ID] != m.Subject || m.Text != "body "+m.Subject {
			t.Fatalf("message %d: %q/%q, acknowledged as %q", m.ID, m.Subject, m.Text, acked[m.ID])
		}
	}
	// Policy survived: grants, capabilities, learned recipients, trials.
	if _, err := send(t, w.writerA, "user@example.com", msg("after", "x")); err != nil {
		t.Fatalf("writer grant after restart: %v", err)
	}
	if _, err := w.gateway.List(ctx(t), &rpc.ReadRequest{Namespace: w.a.Namespace, Capability: w.a.ReadCapability, Recipient: "nobody@example.com"}); code(err) != rpc.CodeRecipientForbidden {
		t.Fatalf("learned recipients lost: %v", err)
	}
	ts, err := w.plane.Admin.AllTrials(ctx(t))
	if err != nil || len(ts) != 2 || ts[0].Messages != 201 {
		t.Fatalf("trials after restart: %v %+v", err, ts)
	}
}

// TestWait: a waiting read held at the plane is woken by the commit of a
// matching message, not by another's, and answers it long before its own
// 25 s wait could end; a wait with nothing to find times out empty, not
// before its time. How fast a wake-up is, is measured by make bench
// ("wait wake-up" in bench/reads.go), not asserted here.
func TestWait(t *testing.T) {
	w := newWorld(t)
	req := &rpc.ReadRequest{Namespace: w.a.Namespace, Capability: w.a.ReadCapability, Recipient: "late@example.com", WaitMillis: 25000}
	got := make(chan rpc.Message, 1)
	go func() {
		m, err := w.gateway.Latest(ctx(t), req)
		if err != nil {
			t.Errorf("wait: %v", err)
		}
		got <- m
	}()
	w.plane.WaitParked(t, "mail", 1)
	mustSend(t, w.writerA, "other@example.com", msg("not this", "x"))
	mustSend(t, w.writerA, "late@example.com", msg("this", "x"))
	select {
	case m := <-got:
		if m.Subject != "this" {
			t.Fatalf("woke with %+v", m)
		}
	case <-time.After(itest.Bound):
		t.Fatalf("waiter not woken within %v", itest.Bound)
	}
	if n := w.plane.Metric(t, "mailplane_wait_wakeup_seconds_count"); n != 1 {
		t.Fatalf("the plane counts %v reads woken by a commit, want 1", n)
	}
	start := time.Now()
	_, err := w.gateway.Latest(ctx(t), &rpc.ReadRequest{Namespace: w.a.Namespace, Capability: w.a.ReadCapability, After: 2, WaitMillis: 300})
	if code(err) != rpc.CodeNotFound || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("timeout: %v after %v", err, time.Since(start))
	}
}

// TestSecretsNeverLogged: a plane at debug level, driven through every
// method, never writes a minted secret.
func TestSecretsNeverLogged(t *testing.T) {
	w := newWorld(t)
	mustSend(t, w.writerA, "user@example.com", msg("code", "Your code is 123456"))
	w.writerA.Bootstrap(ctx(t), w.a.BootstrapToken)
	w.writerA.Bootstrap(ctx(t), "wrong")
	w.list(t, w.a)
	w.gateway.List(ctx(t), &rpc.ReadRequest{Namespace: w.a.Namespace, Capability: w.b.ReadCapability})
	rot, _ := w.plane.Admin.TrialRotate(ctx(t), &rpc.TrialRotateRequest{Namespace: w.b.Namespace})
	g, _ := w.plane.Admin.GrantCreate(ctx(t), rpc.RoleGateway)
	w.writerA.Send(ctx(t), &rpc.SendRequest{Via: rpc.ViaSMTP, From: w.a.MailAPIToken + "@example.com", To: []string{w.a.ReadCapability + "@example.com"}, Raw: msg("x", "y")})
	w.plane.Admin.TrialClose(ctx(t), w.a.Namespace)
	// The trails of both trials (a's closed, kept for export) are searched
	// as the log is.
	out := w.plane.Output()
	for _, ns := range []string{w.a.Namespace, w.b.Namespace, rot.Namespace} {
		page, err := w.plane.Admin.Export(ctx(t), &rpc.EventsRequest{Namespace: ns})
		if err != nil || len(page.Events) == 0 {
			t.Fatalf("export %s: %v", ns, err)
		}
		for _, l := range page.Events {
			out += string(l) + "\n"
		}
	}
	if !strings.Contains(out, `"method":"send"`) {
		t.Fatalf("debug log missing calls:\n%s", out)
	}
	for _, id := range []rpc.Identity{w.a, w.b} {
		for _, s := range []string{id.ReadCapability, id.InboxToken, id.MailAPIToken, id.BootstrapToken, id.WriteCapability, id.WriterGrant, id.InboxGrant} {
			if strings.Contains(out, s) {
				t.Fatalf("secret %.6s… in the log", s)
			}
		}
	}
	for _, s := range []string{rot.ReadCapability, g, w.gatewayGrant, "123456"} {
		if s != "" && strings.Contains(out, s) {
			t.Fatalf("secret %.6s… in the log", s)
		}
	}
}

// TestCloseRace races a trial's close against its sends and reads, by a
// trial-bound writer and inbox, a shared writer and inbox, and the
// gateway: every call that starts once the close has returned is
// refused (never answered with the trial's mail, never as an outage),
// and a read in flight across the close answers either before it or
// refused.
func TestCloseRace(t *testing.T) {
	w := newWorld(t)
	sharedWriter := w.plane.Client(t, w.plane.Grant(t, rpc.RoleWriter))
	sharedInbox := w.plane.Client(t, w.plane.Grant(t, rpc.RoleInbox))
	for i := range 5 {
		mustSend(t, w.writerA, "user@example.com", msg(fmt.Sprint("seed ", i), "x"))
	}
	a := w.a
	calls := []func() error{
		func() error { _, err := send(t, w.writerA, "user@example.com", msg("race", "x")); return err },
		func() error {
			_, err := sharedWriter.Send(ctx(t), &rpc.SendRequest{Via: rpc.ViaHTTP, Credential: a.MailAPIToken, From: rpc.CandidateSender, To: []string{"u@example.com"}, Raw: msg("race", "x")})
			return err
		},
		func() error { _, err := w.inboxA.List(ctx(t), &rpc.ReadRequest{}); return err },
		func() error {
			_, err := sharedInbox.List(ctx(t), &rpc.ReadRequest{InboxToken: a.InboxToken})
			return err
		},
		func() error {
			_, err := sharedInbox.Get(ctx(t), &rpc.ReadRequest{InboxToken: a.InboxToken, ID: 1})
			return err
		},
		func() error {
			_, err := w.gateway.List(ctx(t), &rpc.ReadRequest{Namespace: a.Namespace, Capability: a.ReadCapability})
			return err
		},
		func() error {
			_, err := w.gateway.Latest(ctx(t), &rpc.ReadRequest{Namespace: a.Namespace, Capability: a.ReadCapability, After: 1000, WaitMillis: 5000})
			return err
		},
	}
	var closedAt time.Time
	var mu sync.Mutex
	type result struct {
		started, ended time.Time
		err            error
		call           int
	}
	var results []result
	lastStart := make([]time.Time, len(calls)) // by call: when its last answered call started
	stop := make(chan struct{})
	var running sync.WaitGroup
	for i, call := range calls {
		running.Add(1)
		go func() {
			defer running.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				err := call()
				mu.Lock()
				results = append(results, result{start, time.Now(), err, i})
				lastStart[i] = start
				mu.Unlock()
			}
		}()
	}
	// Each side of the close lasts until every call has been answered once
	// more, having started on that side, however slow the machine.
	everyCallSince := func(since time.Time) {
		itest.Eventually(t, "every call answered", itest.Bound, func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, at := range lastStart {
				if !at.After(since) {
					return false
				}
			}
			return true
		})
	}
	everyCallSince(time.Time{})
	if err := w.plane.Admin.TrialClose(ctx(t), a.Namespace); err != nil {
		t.Fatal(err)
	}
	closedAt = time.Now()
	everyCallSince(closedAt)
	close(stop)
	running.Wait()
	after := 0
	for _, r := range results {
		if rpc.IsOutage(r.err) {
			t.Fatalf("call %d answered an outage across the close: %v", r.call, r.err)
		}
		if r.started.After(closedAt) {
			after++
			if r.err == nil {
				t.Fatalf("call %d started %v after the close and succeeded", r.call, r.started.Sub(closedAt))
			}
		}
	}
	if after < len(calls) {
		t.Fatalf("only %d calls started after the close", after)
	}
	// The trial is gone whole: a new send with its credentials is refused.
	if _, err := send(t, w.writerA, "user@example.com", msg("x", "y")); code(err) != rpc.CodeUnauthenticated {
		t.Fatalf("trial-bound writer after close: %v", err)
	}
	slowest := map[int]time.Duration{}
	for _, r := range results {
		slowest[r.call] = max(slowest[r.call], r.ended.Sub(r.started))
	}
	t.Logf("%d calls, %d of them after the close; slowest by call: %v", len(results), after, slowest)
}

// TestReadIsNotInflated: a message read over the RPC costs about its own
// size on the wire. <, > and & are not escaped, and the inbox's list, which
// shows no body, is not sent the HTML part (it once cost 12 times the message).
func TestReadIsNotInflated(t *testing.T) {
	w := newWorld(t, "--quota-bytes", "0")
	part := strings.Repeat("<a href=\"x\">&amp;</a>\r\n", 20000) // 480 KB of markup
	raw := []byte("Subject: big\r\nMIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=b\r\n\r\n" +
		"--b\r\nContent-Type: text/plain\r\n\r\n" + part + "\r\n--b\r\nContent-Type: text/html\r\n\r\n" + part + "\r\n--b--\r\n")
	mustSend(t, w.writerA, "user@example.com", raw)
	for _, c := range []struct {
		name   string
		cl     *rpc.Client
		req    *rpc.ReadRequest
		within float64 // of the raw message
	}{
		{"gateway", w.gateway, &rpc.ReadRequest{Namespace: w.a.Namespace, Capability: w.a.ReadCapability}, 1.25}, // JSON still escapes quotes and CR LF
		{"inbox", w.inboxA, &rpc.ReadRequest{}, 0.6},
	} {
		var answer json.RawMessage
		if err := c.cl.Call(ctx(t), rpc.MethodList, c.req, &answer); err != nil {
			t.Fatal(err)
		}
		if ratio := float64(len(answer)) / float64(len(raw)); ratio > c.within {
			t.Errorf("%s: a %d-byte message is %d bytes on the wire (%.2f×, want at most %.1f×)", c.name, len(raw), len(answer), ratio, c.within)
		}
	}
}
