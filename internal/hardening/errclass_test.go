package hardening

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/smtp"
	"net/textproto"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/pgtest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// errclass_test.go: every door answers a plane error by its class (rpc.Class):
// a bug of the plane's, an answer the door cannot decode and a refusal it
// does not know are 500 internal_error (451 at SMTP, -32603 at MCP), never
// 503; an outage is 503 (451 at SMTP). The real doors run as processes.

// fakePlane is a socket that answers as the plane does: health "ok" (so
// the doors start), and every other call with the answer of its mode.
type fakePlane struct {
	*itest.Plane
	mode atomic.Value // string: a key of fakeAnswers
}

var fakeAnswers = map[string]struct {
	status int
	body   string
}{
	// A handler's error or panic, or a corrupt row, as the plane answers
	// it (TestErrorAnswers in package plane shows that it does).
	"bug": {http.StatusInternalServerError, `{"code":"internal_error","class":"bug","message":"the plane failed to answer this call"}`},
	// Wire drift: an answer cut short decodes as nothing.
	"undecodable": {http.StatusOK, `{"namespace":`},
	// A refusal no door knows: the door's own bug.
	"unknown refusal": {http.StatusUnprocessableEntity, `{"code":"a_code_from_the_future","class":"refused","message":"no"}`},
	"outage":          {http.StatusServiceUnavailable, `{"code":"store_unavailable","class":"outage","message":"the plane's store is unavailable"}`},
}

func startFakePlane(t *testing.T) *fakePlane {
	dir := itest.ShortTempDir(t)
	p := &fakePlane{Plane: &itest.Plane{Socket: filepath.Join(dir, "plane.sock"), Data: dir}}
	p.mode.Store("bug")
	for _, role := range []rpc.Role{rpc.RoleGateway, rpc.RoleConsole} {
		if err := os.WriteFile(filepath.Join(dir, string(role)+".grant"), []byte(ident.Grant()), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("unix", p.Socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/"+rpc.MethodHealth) {
			w.Write([]byte(`{"role":"gateway","store":"ok"}`))
			return
		}
		a := fakeAnswers[p.mode.Load().(string)]
		w.WriteHeader(a.status)
		w.Write([]byte(a.body))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return p
}

// doorAnswer is what a door answered: its HTTP status (or SMTP code) and
// the body's error code, name or JSON-RPC code, as that door spells it.
type doorAnswer struct {
	status int
	code   string
}

// TestDoorsAnswerByClass: the writer (POST /emails, SendGrid, Postmark,
// SMTP), the gateway, the inbox page, the inbox's MCP and the console, as
// processes, over a socket that answers as a plane with a bug, an
// undecodable answer, a refusal no door knows, and an outage.
func TestDoorsAnswerByClass(t *testing.T) {
	t.Parallel()
	p := startFakePlane(t)
	token := ident.InboxToken()
	wr := itest.StartWriter(t, p.Plane, ident.Grant(), "fixed")
	gw := itest.StartGateway(t, p.Plane)
	in := itest.StartInbox(t, p.Plane, ident.Grant(), token)
	co := itest.StartConsole(t, p.Plane)
	hc := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(hc.CloseIdleConnections)
	secret := ident.Capability()

	do := func(t *testing.T, method, u string, header map[string]string, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, u, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, u, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if strings.Contains(string(b), secret) || strings.Contains(string(b), token) {
			t.Errorf("%s %s: the answer holds the credential: %s", method, u, b)
		}
		return resp.StatusCode, string(b)
	}
	field := func(body, key string) string {
		var m map[string]any
		json.Unmarshal([]byte(body), &m)
		return fmt.Sprint(m[key])
	}
	email := `{"from":"` + rpc.CandidateSender + `","to":"a@example.com","subject":"s","text":"t"}`
	doors := map[string]func(t *testing.T) doorAnswer{
		"writer POST /emails": func(t *testing.T) doorAnswer {
			s, b := do(t, http.MethodPost, wr.URL+"/emails", map[string]string{"Authorization": "Bearer " + secret, "Content-Type": "application/json"}, email)
			return doorAnswer{s, field(b, "name")}
		},
		"writer SendGrid": func(t *testing.T) doorAnswer {
			s, _ := do(t, http.MethodPost, wr.URL+"/v3/mail/send", map[string]string{"Authorization": "Bearer " + secret, "Content-Type": "application/json"},
				`{"from":{"email":"`+rpc.CandidateSender+`"},"personalizations":[{"to":[{"email":"a@example.com"}]}],"subject":"s","content":[{"type":"text/plain","value":"t"}]}`)
			return doorAnswer{s, ""}
		},
		"writer Postmark": func(t *testing.T) doorAnswer {
			s, _ := do(t, http.MethodPost, wr.URL+"/email", map[string]string{"X-Postmark-Server-Token": secret, "Content-Type": "application/json", "Accept": "application/json"},
				`{"From":"`+rpc.CandidateSender+`","To":"a@example.com","Subject":"s","TextBody":"t"}`)
			return doorAnswer{s, ""}
		},
		"writer SMTP": func(t *testing.T) doorAnswer {
			err := smtpSend(wr.SMTPAddr, rpc.CandidateSender, "a@example.com", "Subject: s\r\n\r\nt\r\n")
			var te *textproto.Error
			if !errors.As(err, &te) {
				return doorAnswer{0, fmt.Sprint(err)}
			}
			enhanced, _, _ := strings.Cut(te.Msg, " ")
			return doorAnswer{te.Code, enhanced}
		},
		"gateway": func(t *testing.T) doorAnswer {
			s, b := do(t, http.MethodGet, gw.URL+"/api/namespaces/"+ident.Namespace()+"/messages/1", map[string]string{"Authorization": "Bearer " + secret}, "")
			return doorAnswer{s, field(b, "error")}
		},
		"inbox page": func(t *testing.T) doorAnswer {
			s, _ := do(t, http.MethodGet, in.URL+"/inbox/"+token+"/messages/1", nil, "")
			return doorAnswer{s, ""}
		},
		"inbox MCP": func(t *testing.T) doorAnswer {
			s, b := do(t, http.MethodPost, in.URL+"/mcp/"+token, map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
				`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_messages","arguments":{}}}`)
			var m struct {
				Error *struct{ Code int }
			}
			json.Unmarshal([]byte(mcpJSON(b)), &m)
			if m.Error == nil {
				return doorAnswer{s, "no JSON-RPC error: " + b}
			}
			return doorAnswer{s, fmt.Sprint(m.Error.Code)}
		},
		"console": func(t *testing.T) doorAnswer {
			s, _ := do(t, http.MethodPost, co.URL+"/login", map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
				url.Values{"grant": {ident.Grant()}, "next": {"/"}}.Encode())
			return doorAnswer{s, ""}
		},
	}
	bug := map[string]doorAnswer{
		"writer POST /emails": {500, "internal_server_error"}, "writer SendGrid": {500, ""}, "writer Postmark": {500, ""},
		"writer SMTP": {451, "4.3.0"}, "gateway": {500, "internal_error"}, "inbox page": {500, ""},
		"inbox MCP": {200, "-32603"}, "console": {500, ""},
	}
	outage := map[string]doorAnswer{
		"writer POST /emails": {503, "application_error"}, "writer SendGrid": {503, ""}, "writer Postmark": {503, ""},
		"writer SMTP": {451, "4.3.0"}, "gateway": {503, "mailpit_unavailable"}, "inbox page": {503, ""},
		"inbox MCP": {200, "-32002"}, "console": {503, ""},
	}
	for _, mode := range []string{"bug", "undecodable", "unknown refusal", "outage"} {
		t.Run(mode, func(t *testing.T) {
			p.mode.Store(mode)
			want := bug
			if mode == "outage" {
				want = outage
			}
			for door, ask := range doors {
				if got := ask(t); got != want[door] {
					t.Errorf("%s, the plane answering %s: %+v, want %+v", door, mode, got, want[door])
				}
			}
		})
	}
	for _, s := range []*itest.Surface{wr, gw, in, co} {
		if out := s.Output(); strings.Contains(out, secret) || strings.Contains(out, token) {
			t.Errorf("a credential reached a door's log:\n%s", out)
		}
	}
}

// mcpJSON is the JSON-RPC message of an MCP answer, sent as JSON or as
// one server-sent event.
func mcpJSON(body string) string {
	for _, line := range strings.Split(body, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			return d
		}
	}
	return body
}

// smtpSend delivers one message by SMTP and returns the server's refusal.
func smtpSend(addr, from, to, msg string) error {
	c, err := smtp.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Mail(from); err != nil {
		return err
	}
	if err := c.Rcpt(to); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := io.WriteString(w, msg); err != nil {
		return err
	}
	return w.Close()
}

// TestCorruptIndexIsABug: a stored message whose index row is corrupt is
// read by the real plane as a bug, answered 500 internal_error through
// the gateway and the inbox (and an MCP internal error), never 503; the
// plane logs it with the call's method.
func TestCorruptIndexIsABug(t *testing.T) {
	t.Parallel()
	p := itest.StartPlane(t)
	id := p.Trial(t, rpc.ProfileCandidate)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := p.Client(t, id.WriterGrant).Send(ctx, &rpc.SendRequest{Via: rpc.ViaSMTP, From: rpc.CandidateSender, To: []string{"agent@example.com"},
		Raw: []byte("Subject: corrupt\r\n\r\nbody\r\n")}); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(p.Data, "mailplane.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	// Valid framing, a body that is not the index's JSON: corrupt, not stale.
	res, err := db.Exec(`UPDATE messages SET idx = x'0102' WHERE namespace = ?`, id.Namespace)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("%d index rows corrupted, want 1", n)
	}
	gw := itest.StartGateway(t, p)
	in := itest.StartInbox(t, p, id.InboxGrant, id.InboxToken)
	hc := httpClient(2)
	get := func(u string, header map[string]string, body string) (int, string) {
		t.Helper()
		method := http.MethodGet
		if body != "" {
			method = http.MethodPost
		}
		code, b := request(t, hc, method, u, header, body)
		if strings.Contains(b, id.ReadCapability) || strings.Contains(b, id.InboxToken) {
			t.Errorf("%s: the answer holds the credential: %s", u, b)
		}
		return code, b
	}
	if s, b := get(gw.URL+"/api/namespaces/"+id.Namespace+"/messages/1", map[string]string{"Authorization": "Bearer " + id.ReadCapability}, ""); s != 500 || !strings.Contains(b, `"error":"internal_error"`) {
		t.Errorf("gateway, a corrupt index: %d %s, want 500 internal_error", s, b)
	}
	if s, b := get(gw.URL+"/api/namespaces/"+id.Namespace+"/messages", map[string]string{"Authorization": "Bearer " + id.ReadCapability}, ""); s != 500 {
		t.Errorf("gateway list, a corrupt index: %d %s, want 500", s, b)
	}
	if s, b := get(in.URL+"/inbox/"+id.InboxToken+"/messages/1", nil, ""); s != 500 {
		t.Errorf("inbox page, a corrupt index: %d %s, want 500", s, b)
	}
	s, b := get(in.URL+"/mcp/"+id.InboxToken, map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_message","arguments":{"id":1}}}`)
	if !strings.Contains(mcpJSON(b), `"code":-32603`) {
		t.Errorf("MCP read_message, a corrupt index: %d %s, want JSON-RPC -32603", s, b)
	}
	out := p.Output()
	if !strings.Contains(out, `"method":"get","code":"internal_error"`) || !strings.Contains(out, "a bug or corrupt data") {
		t.Errorf("the plane did not log the corrupt read as a bug with its method:\n%s", out)
	}
	if strings.Contains(out, "store_unavailable") {
		t.Errorf("the plane called a corrupt row an outage:\n%s", out)
	}
}

// TestStoppedStoreIsAnOutage: with the plane's PostgreSQL stopped, a read
// through the gateway and the inbox and a send through the writer (HTTP
// and SMTP) are outages, 503 (451), never 500; once it is back they work.
func TestStoppedStoreIsAnOutage(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	p := itest.StartPlane(t, "--store", "postgres", "--dsn-file", itest.WriteSecret(t, "dsn", pg.DSN()))
	id := p.Trial(t, rpc.ProfileCandidate)
	wr := itest.StartWriter(t, p, id.WriterGrant, "fixed")
	gw := itest.StartGateway(t, p)
	in := itest.StartInbox(t, p, id.InboxGrant, id.InboxToken)
	hc := httpClient(2)
	status := func(method, u string, header map[string]string, body string) int {
		t.Helper()
		code, _ := request(t, hc, method, u, header, body)
		return code
	}
	send := func() int {
		return status(http.MethodPost, wr.URL+"/emails", map[string]string{"Authorization": "Bearer " + id.MailAPIToken, "Content-Type": "application/json"},
			`{"from":"`+rpc.CandidateSender+`","to":"agent@example.com","subject":"s","text":"t"}`)
	}
	read := func() int {
		return status(http.MethodGet, gw.URL+"/api/namespaces/"+id.Namespace+"/messages", map[string]string{"Authorization": "Bearer " + id.ReadCapability}, "")
	}
	page := func() int { return status(http.MethodGet, in.URL+"/inbox/"+id.InboxToken, nil, "") }
	if s := send(); s != http.StatusOK {
		t.Fatalf("a send with the store up: %d", s)
	}
	if r, pg := read(), page(); r != 200 || pg != 200 {
		t.Fatalf("reads with the store up: gateway %d, inbox %d", r, pg)
	}

	pg.Stop()
	for what, ask := range map[string]func() int{"writer POST /emails": send, "gateway list": read, "inbox page": page} {
		if s := ask(); s != http.StatusServiceUnavailable {
			t.Errorf("%s with PostgreSQL stopped: %d, want 503", what, s)
		}
	}
	if err := smtpSend(wr.SMTPAddr, rpc.CandidateSender, "agent@example.com", "Subject: s\r\n\r\nt\r\n"); err == nil || !strings.HasPrefix(err.Error(), "451") {
		t.Errorf("SMTP with PostgreSQL stopped: %v, want 451", err)
	}
	if out := p.Output(); strings.Contains(out, `"code":"internal_error"`) {
		t.Errorf("the plane called a stopped store a bug:\n%s", out)
	}

	pg.Restart()
	itest.Eventually(t, "the writer to send again", itest.Bound, func() bool { return send() == http.StatusOK })
	if r, pg := read(), page(); r != 200 || pg != 200 {
		t.Errorf("reads with the store back: gateway %d, inbox %d", r, pg)
	}
}

// TestHandlerBugAtTheDoors: the real plane, built with a handler that
// panics (get) and one that fails with a plain error (list) — the
// planebughook tag, which no release binary has — answers 500
// internal_error, and the gateway, the inbox page and MCP answer their
// 500 (-32603), never 503; the plane logs each with its method.
func TestHandlerBugAtTheDoors(t *testing.T) {
	t.Parallel()
	dir := itest.ShortTempDir(t)
	build := exec.Command("go", "build", "-tags", "planebughook", "-o", dir+"/", "./cmd/mail-plane")
	build.Dir = repoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags planebughook: %v\n%s", err, out)
	}
	p := &itest.Plane{Socket: filepath.Join(dir, "run", "plane.sock"), Data: filepath.Join(dir, "data")}
	cmd := exec.Command(filepath.Join(dir, "mail-plane"), "--log-level", "debug", "serve", "--socket", p.Socket, "--data", p.Data)
	cmd.Env = append(os.Environ(), "MAILPLANE_TEST_FAIL=get=panic,list=error")
	p.Proc = itest.StartCmd(t, cmd, "mail-plane")
	itest.Eventually(t, "the plane to answer", itest.Bound, func() bool {
		g, err := rpc.ReadSecretFile(filepath.Join(p.Data, "admin.grant"))
		if err != nil {
			return false
		}
		if p.Admin == nil {
			p.Admin = p.Client(t, g)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err = p.Admin.Health(ctx)
		return err == nil
	})
	id := p.Trial(t, rpc.ProfileCandidate)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := p.Client(t, id.WriterGrant).Send(ctx, &rpc.SendRequest{Via: rpc.ViaSMTP, From: rpc.CandidateSender, To: []string{"agent@example.com"},
		Raw: []byte("Subject: bug\r\n\r\nbody\r\n")}); err != nil {
		t.Fatal(err)
	}
	gw := itest.StartGateway(t, p)
	in := itest.StartInbox(t, p, id.InboxGrant, id.InboxToken)
	hc := httpClient(2)
	bearer := map[string]string{"Authorization": "Bearer " + id.ReadCapability}
	for what, path := range map[string]string{"gateway get (a panic)": "/messages/1", "gateway list (an error)": "/messages"} {
		if s, b := request(t, hc, http.MethodGet, gw.URL+"/api/namespaces/"+id.Namespace+path, bearer, ""); s != 500 || !strings.Contains(b, `"error":"internal_error"`) {
			t.Errorf("%s: %d %s, want 500 internal_error", what, s, b)
		}
	}
	if s, b := request(t, hc, http.MethodGet, in.URL+"/inbox/"+id.InboxToken, nil, ""); s != 500 {
		t.Errorf("inbox page (list, an error): %d %s, want 500", s, b)
	}
	s, b := request(t, hc, http.MethodPost, in.URL+"/mcp/"+id.InboxToken, map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_message","arguments":{"id":1}}}`)
	if !strings.Contains(mcpJSON(b), `"code":-32603`) {
		t.Errorf("MCP read_message (get, a panic): %d %s, want JSON-RPC -32603", s, b)
	}
	out := p.Output()
	for _, want := range []string{`"method":"get","panic":"assignment to entry in nil map"`, `"method":"list","error":"a handler's own failure`, `"method":"get","code":"internal_error"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the plane's log does not say %s:\n%s", want, out)
		}
	}
	for _, secret := range []string{id.ReadCapability, id.InboxToken} {
		if strings.Contains(out+gw.Output()+in.Output(), secret) {
			t.Error("a credential reached a log")
		}
	}
}

// request makes one request with hc and answers its status and body.
func request(t *testing.T, hc *http.Client, method, u string, header map[string]string, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
