package console_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// stack is a plane, a shared writer and a console, as up runs them.
type stack struct {
	plane   *itest.Plane
	writer  *itest.Surface
	console *itest.Surface
	admin   string
}

func startStack(t *testing.T) *stack {
	t.Helper()
	p := itest.StartPlane(t)
	return &stack{plane: p, writer: itest.StartWriter(t, p, p.Grant(t, rpc.RoleWriter), "fixed"),
		console: itest.StartConsole(t, p), admin: p.Grant(t, rpc.RoleAdmin)}
}

// email is a Resend-style POST /emails body.
type email struct {
	From    string   `json:"from"`
	To      []string `json:"to"`
	Subject string   `json:"subject"`
	Text    string   `json:"text,omitempty"`
	HTML    string   `json:"html,omitempty"`
}

// send posts e through the writer's mail API with the trial's token and
// returns the status.
func (s *stack) send(t testing.TB, id rpc.Identity, e email) int {
	t.Helper()
	if e.From == "" {
		e.From = rpc.CandidateSender
	}
	body, _ := json.Marshal(e)
	req, _ := http.NewRequest(http.MethodPost, s.writer.URL+"/emails", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+id.MailAPIToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// answer is one HTTP answer, read whole.
type answer struct {
	status int
	header http.Header
	body   string
}

var client = &http.Client{
	Timeout:       30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// get asks the console for path with "Authorization: Bearer cred" (none
// when cred is empty) and more headers.
func (s *stack) get(t testing.TB, path, cred string, header ...string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.console.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cred != "" {
		req.Header.Set("Authorization", "Bearer "+cred)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return do(t, req)
}

func do(t testing.TB, req *http.Request) answer {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	// The console sets no cookie, ever: a browser would send it to every
	// port of the host.
	if ck := resp.Header.Values("Set-Cookie"); len(ck) > 0 {
		t.Fatalf("%s %s sets a cookie: %q", req.Method, req.URL.Path, ck)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// signIn posts the sign-in form with the admin grant and returns the
// session's base path, /s/<capability>.
func (s *stack) signIn(t testing.TB) string {
	t.Helper()
	a := s.login(t, s.admin, s.console.URL)
	base, ok := strings.CutSuffix(a.header.Get("Location"), "/")
	if a.status != http.StatusSeeOther || !ok || !strings.HasPrefix(base, "/s/") || len(base) != len("/s/")+43 {
		t.Fatalf("sign in: %d to %q", a.status, a.header.Get("Location"))
	}
	return base
}

// login posts the sign-in form with grant, from origin, with more headers
// (an empty value is none).
func (s *stack) login(t testing.TB, grant, origin string, header ...string) answer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.console.URL+"/login", strings.NewReader(url.Values{"grant": {grant}, "next": {"/"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", origin)
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] != "" {
			req.Header.Set(header[i], header[i+1])
		}
	}
	return do(t, req)
}

// secrets are every secret of a trial, and the grants of the stack.
func (s *stack) secrets(t testing.TB, ids ...rpc.Identity) map[string]string {
	out := map[string]string{"admin grant": s.admin}
	for _, role := range []rpc.Role{rpc.RoleConsole, rpc.RoleGateway, rpc.RoleWriter, rpc.RoleInbox} {
		out[string(role)+" grant"] = s.plane.Grant(t, role)
	}
	for _, id := range ids {
		for k, v := range map[string]string{"read capability": id.ReadCapability, "inbox token": id.InboxToken,
			"mail-API token": id.MailAPIToken, "bootstrap token": id.BootstrapToken, "write capability": id.WriteCapability,
			"writer grant": id.WriterGrant, "inbox grant": id.InboxGrant} {
			if v != "" {
				out[id.Namespace+" "+k] = v
			}
		}
	}
	return out
}

// noSecret fails if body holds any of secrets.
func noSecret(t testing.TB, where, body string, secrets map[string]string) {
	t.Helper()
	for name, v := range secrets {
		if strings.Contains(body, v) {
			t.Fatalf("%s shows the %s", where, name)
		}
	}
}
