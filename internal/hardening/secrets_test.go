package hardening

import (
	"bufio"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/serve"
	"github.com/websitebench/mailplane/internal/smtpd"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// The secrets audit, end to end: mailplane run as its users run it (mail-plane
// up, and the drop-in mail-plane sidecar), every process at debug level,
// driven through every door with the right secrets and with every secret
// in every wrong place (as another credential, in paths, queries,
// headers, SMTP commands and as a namespace). Afterwards every minted
// secret and every one-time code is searched for in every log line and
// every error body: there are none. The same audit runs at the end of
// every other test of this package (sys.audit), over the faults and
// floods they cause.

// lineBuffer collects a process's stdout.
type lineBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lineBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lineBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// otpCode is a fresh 8-digit one-time code.
func otpCode() string { return strconv.Itoa(10000000 + rand.IntN(89999999)) }

// door is one place a client can put a credential.
type door struct {
	name string
	try  func(secret string)
}

// abuse presents every secret at every door.
func abuse(s *sys, doors []door) int {
	n := 0
	for v := range s.secretValues() {
		for _, d := range doors {
			d.try(v)
			n++
		}
	}
	return n
}

func (s *sys) secretValues() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]bool{}
	for v := range s.secrets {
		out[v] = true
	}
	return out
}

// rawHTTP sends one raw request and records the answer for the audit.
func (s *sys) rawHTTP(addr, req string) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, req)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	var head strings.Builder
	resp.Header.Write(&head)
	s.saw(req, resp.Status+"\n"+head.String()+"\n"+string(b))
}

// rawSMTP runs an SMTP dialogue line by line and records every reply.
func (s *sys) rawSMTP(addr string, lines ...string) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	sent := strings.Join(lines, "\r\n")
	read := func() {
		for {
			l, err := br.ReadString('\n')
			s.saw(sent, l)
			if err != nil || len(l) < 4 || l[3] != '-' {
				return
			}
		}
	}
	read()
	for _, l := range lines {
		io.WriteString(c, l+"\r\n")
		read()
	}
	// Whatever else the server said (replies to lines of a refused DATA).
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	rest, _ := io.ReadAll(br)
	s.saw(sent, string(rest))
}

// startE2E runs cmd (mail-plane up or sidecar) at debug level and waits
// for its first line on stdout.
func startE2E(t *testing.T, s *sys, env []string, args ...string) (*itest.Proc, string) {
	t.Helper()
	p, line, ok := tryE2E(t, s, env, args...)
	if !ok {
		t.Fatalf("%s exited:\n%s", args[0], p.Output())
	}
	return p, line
}

// startE2EOnFreePorts is startE2E with ports itest.FreePort picks (args
// builds the command line from them), again on new ones if another
// process of the shared machine took one before the command bound it.
func startE2EOnFreePorts(t *testing.T, s *sys, env []string, ports int, args func(ports []int) []string) (*itest.Proc, string, []int) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		ps := make([]int, ports)
		for i := range ps {
			ps[i] = itest.FreePort(t)
		}
		a := args(ps)
		p, line, ok := tryE2E(t, s, env, a...)
		if ok {
			return p, line, ps
		}
		if attempt >= 5 || !strings.Contains(p.Output(), "address already in use") {
			t.Fatalf("%s exited:\n%s", a[0], p.Output())
		}
	}
}

// tryE2E is startE2E, but reports (false) a command that exited before
// printing its line.
func tryE2E(t *testing.T, s *sys, env []string, args ...string) (*itest.Proc, string, bool) {
	t.Helper()
	cmd := exec.Command(itest.Bin(t, "mail-plane"), append([]string{"--log-level", "debug"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out := &lineBuffer{}
	cmd.Stdout = out
	p := itest.StartCmd(t, cmd, "mail-plane "+args[0])
	s.addProc(p)
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(out.String(), "\n") {
		if time.Now().After(deadline) {
			t.Fatalf("%s printed nothing:\n%s", args[0], p.Output())
		}
		select {
		case <-p.Done():
			return p, "", false
		case <-time.After(20 * time.Millisecond):
		}
	}
	line, _, _ := strings.Cut(out.String(), "\n")
	return p, line, true
}

// readSecrets records every file of dir as a secret (they are the
// parties' credential files), except the namespace and the plane's
// identity (not a secret: the log and trial info name it).
func (s *sys) readSecrets(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() || e.Name() == "namespace" || e.Name() == serve.PlaneIDFile {
			continue
		}
		v, err := rpc.ReadSecretFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		s.secret(e.Name(), v)
	}
}

func TestSecretsEndToEnd(t *testing.T) {
	t.Run("up", secretsUp)
	t.Run("sidecar", secretsSidecar)
}

// secretsUp drives mail-plane up: a candidate through the writer, the
// agent through the inbox, the evaluator through the gateway, the
// operator through the CLI.
func secretsUp(t *testing.T) {
	s := newAudit(t)
	data := itest.ShortTempDir(t)
	p, line := startE2E(t, s, nil, "up", "--json", "--data", data, "--quota-messages", "0", "--quota-bytes", "0")
	var b struct {
		Namespace      string            `json:"namespace"`
		Env            map[string]string `json:"candidate_environment"`
		InboxURL       string            `json:"inbox_url"`
		APIURL         string            `json:"api_url"`
		ReadCapability string            `json:"read_capability"`
		Socket         string            `json:"plane_socket"`
		SMTPPort       int               `json:"smtp_port"`
		WriterURL      string            `json:"writer_url"`
		ConsoleURL     string            `json:"console_url"`
	}
	if err := json.Unmarshal([]byte(line), &b); err != nil {
		t.Fatalf("up's line %q: %v", line, err)
	}
	// The plane's own grants (admin, gateway, shared writer and inbox) are
	// files; the trial's secrets are only in the bundle.
	s.readSecrets(t, filepath.Join(data, "plane"))
	mailToken, bootToken := b.Env["WEBSITEBENCH_MAIL_API_TOKEN"], b.Env["WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN"]
	inboxBase, inboxToken, ok := strings.Cut(b.InboxURL, "/inbox/")
	if !ok || inboxToken == "" {
		t.Fatalf("inbox_url %q names no inbox token", b.InboxURL)
	}
	for what, v := range map[string]string{"mail-API token": mailToken, "bootstrap token": bootToken,
		"inbox token": inboxToken, "read capability": b.ReadCapability} {
		s.secret(what, v)
	}
	adminGrant := filepath.Join(data, "plane", "admin.grant")
	smtpAddr := "127.0.0.1:" + strconv.Itoa(b.SMTPPort)
	hc := httpClient(4)
	must := func(a answer, err error) answer {
		t.Helper()
		if err != nil || a.status >= 400 {
			t.Fatalf("%v %d %s", err, a.status, a.body)
		}
		return a
	}

	// The candidate: bootstrap, POST /emails with both write credentials,
	// an idempotent repeat, SMTP; every message carries a code and a
	// magic link.
	a := must(s.request(hc, http.MethodGet, b.WriterURL+"/internal/bootstrap", "Bearer "+bootToken, "", nil))
	var boot struct{ Capability string }
	json.Unmarshal([]byte(a.body), &boot)
	s.secret("write capability", boot.Capability)
	mail := func(i int) (string, string) {
		code, link := otpCode(), "https://site.example/verify?token="+randomHex(20)
		s.code(code)
		s.secret("magic link", link)
		return code, fmt.Sprintf("Your verification code is %s. Or open %s (message %d).", code, link, i)
	}
	for i, cred := range []string{mailToken, boot.Capability} {
		_, text := mail(i)
		must(s.postEmail(hc, b.WriterURL, cred, "key-"+strconv.Itoa(i), emailBody(rpc.CandidateSender, "agent@example.com", "Sign in", text)))
		must(s.postEmail(hc, b.WriterURL, cred, "key-"+strconv.Itoa(i), emailBody(rpc.CandidateSender, "agent@example.com", "Sign in", text)))
	}
	code, text := mail(2)
	html := `{"from":"` + rpc.CandidateSender + `","to":"agent@example.com","subject":"Welcome","html":"<p>Your code: <b>` + code + `</b></p>"}`
	must(s.postEmail(hc, b.WriterURL, mailToken, "", html))
	// The trial's own port requires AUTH with the bundle's credential.
	if r := sendSMTPAuth(smtpAddr, b.Env["WEBSITEBENCH_SMTP_PASSWORD"], rpc.CandidateSender, "agent@example.com", rawMail("SMTP sign-in", text)); r.code != 250 {
		t.Fatalf("SMTP: %d %v", r.code, r.err)
	}

	// The evaluator: list, latest, one message, a filtered wait that a
	// message ends, the HTML view.
	api := b.APIURL + "/api/namespaces/" + b.Namespace
	auth := "Bearer " + b.ReadCapability
	for _, path := range []string{"/messages", "/messages/latest", "/messages/1", "/messages?recipient=agent@example.com&after=1"} {
		a := must(s.request(hc, http.MethodGet, api+path, auth, "", nil))
		if path == "/messages/1" && !strings.Contains(a.body, `"otp":"`) {
			t.Fatalf("no otp in %s", a.body)
		}
	}
	waited := make(chan answer, 1)
	go func() {
		a, _ := s.request(hc, http.MethodGet, api+"/messages/latest?recipient=late@example.com&wait=10s", auth, "", nil)
		waited <- a
	}()
	time.Sleep(300 * time.Millisecond)
	_, text = mail(3)
	must(s.postEmail(hc, b.WriterURL, mailToken, "", emailBody(rpc.CandidateSender, "late@example.com", "Late", text)))
	if a := <-waited; a.status != 200 {
		t.Fatalf("wait: %d %s", a.status, a.body)
	}
	must(s.request(hc, http.MethodGet, b.APIURL+"/inbox/"+b.Namespace, auth, "", nil))
	must(s.request(hc, http.MethodGet, b.APIURL+"/inbox/"+b.Namespace+"/messages/1", auth, "", nil))

	// The agent: the inbox's root (shared by every trial) is not found and
	// names no token; the token URL is the inbox.
	if a, err := s.request(hc, http.MethodGet, inboxBase+"/", "", "", nil); err != nil || a.status != http.StatusNotFound || a.header.Get("Location") != "" {
		t.Fatalf("the shared inbox's root: %v %d %q", err, a.status, a.header.Get("Location"))
	}
	must(s.request(hc, http.MethodGet, b.InboxURL, "", "", nil))
	must(s.request(hc, http.MethodGet, b.InboxURL+"/messages/1", "", "", nil))

	// The operator: trials made, rotated, sealed, listed and destroyed
	// with the CLI, whose stdout is its product (the secrets it mints) and
	// whose stderr is log.
	cli := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(itest.Bin(t, "mail-plane"), append([]string{"--log-level", "debug"}, args...)...)
		cmd.Env = append(os.Environ(), "MAILPLANE_SOCKET="+b.Socket, "MAILPLANE_ADMIN_GRANT_FILE="+adminGrant)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("mail-plane %v: %v\n%s", args, err, stderr.String())
		}
		s.addLog("mail-plane "+args[0]+" "+args[1], stderr.String())
		return stdout.String()
	}
	var other rpc.Identity
	if err := json.Unmarshal([]byte(cli("trial", "create", "--json", "--profile", "sidecar")), &other); err != nil || other.Namespace == "" {
		t.Fatalf("trial create: %v", err)
	}
	s.identity(other)
	var rot rpc.RotateResponse
	json.Unmarshal([]byte(cli("trial", "rotate", "--json", other.Namespace)), &rot)
	s.secret("rotated read capability", rot.ReadCapability)
	cli("trial", "list")
	cli("trial", "seal", rot.Namespace)

	// The operator's console: its pages show every trial, its mail and its
	// trail, and no minted secret (the mail's own codes and links are
	// what it is there to show).
	adminValue, err := rpc.ReadSecretFile(adminGrant)
	if err != nil {
		t.Fatal(err)
	}
	if b.ConsoleURL == "" {
		t.Fatal("up --json has no console_url")
	}
	for _, path := range []string{"/", "/?rcpt=agent@example.com", "/trials/" + b.Namespace, "/trials/" + b.Namespace + "/messages/3/html",
		"/trials/" + other.Namespace, "/metrics"} {
		a := must(s.request(hc, http.MethodGet, b.ConsoleURL+path, "Bearer "+adminValue, "", nil))
		if path == "/trials/"+b.Namespace && !strings.Contains(a.body, "Welcome") {
			t.Fatalf("the console's trial page shows no mail:\n%s", a.body)
		}
		var head strings.Builder
		a.header.Write(&head)
		s.page("console "+path, head.String()+a.body, "admin.grant", "magic link")
	}
	caddr := strings.TrimPrefix(b.ConsoleURL, "http://")

	// Every secret in every wrong place.
	waddr, iaddr, gaddr := strings.TrimPrefix(b.WriterURL, "http://"), strings.TrimPrefix(inboxBase, "http://"), strings.TrimPrefix(b.APIURL, "http://")
	doors := []door{
		{"POST /emails Bearer", func(v string) {
			s.postEmail(hc, b.WriterURL, v, "", emailBody(rpc.CandidateSender, "x@example.com", "s", "t"))
		}},
		{"POST /emails sender", func(v string) {
			s.postEmail(hc, b.WriterURL, mailToken, "", emailBody(v+"@example.com", "x@example.com", "s", "t"))
		}},
		{"POST /emails malformed", func(v string) {
			s.postEmail(hc, b.WriterURL, mailToken, "", `{"from":"`+v+`","to":[`+v+`]}`)
		}},
		{"Idempotency-Key too long", func(v string) {
			s.postEmail(hc, b.WriterURL, mailToken, strings.Repeat(v, 10), emailBody(rpc.CandidateSender, "x@example.com", "s", "t"))
		}},
		{"bootstrap Bearer", func(v string) { s.request(hc, http.MethodGet, b.WriterURL+"/internal/bootstrap", "Bearer "+v, "", nil) }},
		{"writer path", func(v string) { s.request(hc, http.MethodGet, b.WriterURL+"/emails/"+v, "Bearer "+v, "", nil) }},
		{"writer bad request line", func(v string) { s.rawHTTP(waddr, "GET /"+v+" HTTP/9."+v+"\r\nHost: localhost\r\n\r\n") }},
		{"writer bad header", func(v string) {
			s.rawHTTP(waddr, "POST /emails HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer "+v+"\r\n"+v+"\r\n\r\n")
		}},
		{"SMTP envelope and headers", func(v string) {
			s.rawSMTP(smtpAddr, "EHLO "+v, "AUTH PLAIN "+v, "MAIL FROM:<"+v+"@example.com>", "RCPT TO:<"+v+"@example.com>", "RCPT TO:<agent@example.com>",
				"DATA", smtpd.NamespaceHeader+": "+v+"\r\n"+smtpd.CapabilityHeader+": "+v+"\r\nSubject: x\r\n\r\nx\r\n.", "QUIT")
		}},
		{"SMTP bad command", func(v string) { s.rawSMTP(smtpAddr, v, "VRFY "+v, "MAIL FROM:"+v, "QUIT") }},
		{"gateway Bearer", func(v string) { s.request(hc, http.MethodGet, api+"/messages", "Bearer "+v, "", nil) }},
		{"gateway namespace", func(v string) {
			s.request(hc, http.MethodGet, b.APIURL+"/api/namespaces/"+url.PathEscape(v)+"/messages", auth, "", nil)
		}},
		{"gateway query", func(v string) {
			s.request(hc, http.MethodGet, api+"/messages?recipient="+url.QueryEscape(v)+"&after="+url.QueryEscape(v), auth, "", nil)
			s.request(hc, http.MethodGet, api+"/messages?wait="+url.QueryEscape(v), auth, "", nil)
		}},
		{"gateway message id", func(v string) { s.request(hc, http.MethodGet, api+"/messages/"+v, auth, "", nil) }},
		{"gateway HTML view", func(v string) {
			s.request(hc, http.MethodGet, b.APIURL+"/inbox/"+url.PathEscape(v), "Bearer "+v, "", nil)
		}},
		{"gateway bad header", func(v string) {
			s.rawHTTP(gaddr, "GET /api/namespaces/"+v+"/messages HTTP/1.1\r\nHost: "+v+"\r\n"+v+"\r\n\r\n")
		}},
		{"inbox path", func(v string) {
			s.request(hc, http.MethodGet, inboxBase+"/inbox/"+url.PathEscape(v), "Bearer "+v, "", map[string]string{"Cookie": "token=" + v, "Referer": "http://x/?token=" + v})
			s.request(hc, http.MethodGet, inboxBase+"/inbox/"+url.PathEscape(v)+"/messages/1", "", "", nil)
			s.request(hc, http.MethodPost, inboxBase+"/inbox/"+inboxToken+"?t="+url.QueryEscape(v), "", v, nil)
		}},
		{"inbox bad request", func(v string) { s.rawHTTP(iaddr, "GET /inbox/"+v+"%zz HTTP/1.1\r\nHost: localhost\r\n"+v+"\r\n\r\n") }},
		{"console Bearer", func(v string) {
			s.request(hc, http.MethodGet, b.ConsoleURL+"/", "Bearer "+v, "", nil)
			s.request(hc, http.MethodGet, b.ConsoleURL+"/metrics", "Bearer "+v, "", nil)
			s.request(hc, http.MethodGet, b.ConsoleURL+"/s/"+url.PathEscape(v)+"/trials/"+b.Namespace, "", "", nil)
			s.request(hc, http.MethodGet, b.ConsoleURL+"/frames/"+url.PathEscape(v)+"/"+b.Namespace+"/1/"+url.PathEscape(v), "", "", nil)
		}},
		{"console sign-in", func(v string) {
			s.request(hc, http.MethodPost, b.ConsoleURL+"/login", "", "grant="+url.QueryEscape(v)+"&next=/"+url.QueryEscape(v),
				map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": b.ConsoleURL})
		}},
		{"console paths", func(v string) {
			s.request(hc, http.MethodGet, b.ConsoleURL+"/trials/"+url.PathEscape(v), "Bearer "+adminValue, "", nil)
			s.request(hc, http.MethodGet, b.ConsoleURL+"/live?trial="+url.QueryEscape(v)+"&v="+url.QueryEscape(v), "Bearer "+adminValue, "", nil)
			s.request(hc, http.MethodGet, b.ConsoleURL+"/?ns="+url.QueryEscape(v)+"&rcpt="+url.QueryEscape(v)+"&subject="+url.QueryEscape(v), "Bearer "+adminValue, "", nil)
		}},
		{"console bad request", func(v string) { s.rawHTTP(caddr, "GET /trials/"+v+"%zz HTTP/1.1\r\nHost: localhost\r\n"+v+"\r\n\r\n") }},
	}
	presented := abuse(s, doors)
	cli("trial", "destroy", other.Namespace)
	// Every trail, the closed trial's too, exported and searched as a log.
	for _, ns := range []string{b.Namespace, other.Namespace, rot.Namespace} {
		trail := cli("evidence", "export", ns)
		if !strings.Contains(trail, `"action":"send"`) && ns == b.Namespace {
			t.Fatalf("the trail of %s records no send:\n%s", ns, trail)
		}
		s.addLog("evidence export "+ns, trail)
	}

	if code := p.Stop(t); code != 0 {
		t.Errorf("up exited %d", code)
	}
	figure(t, "secrets-e2e run=up doors=%d wrong_presentations=%d", len(doors), presented)
}

// page checks a page a party is shown for every secret but those it may
// show (by what they are).
func (s *sys) page(where, text string, may ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for v, what := range s.secrets {
		if strings.Contains(text, v) && !slices.Contains(may, what) {
			s.t.Errorf("secret leak: the %s is in the %s: …%s…", what, where, redactedContext(text, strings.Index(text, v), len(v)))
		}
	}
}

// secretsSidecar drives the drop-in sidecar with an operator-chosen
// bootstrap token that looks like no minted secret, so that redaction by
// shape cannot hide a leak of it.
func secretsSidecar(t *testing.T) {
	s := newAudit(t)
	token := "site.bootstrap-token." + randomHex(12) // 45 characters
	s.secret("sidecar bootstrap token", token)
	data := itest.ShortTempDir(t)
	p, line, ports := startE2EOnFreePorts(t, s, []string{"WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN=" + token}, 3, func(ps []int) []string {
		return []string{"sidecar", "--data", data, "--http-port", strconv.Itoa(ps[0]), "--smtp-port", strconv.Itoa(ps[1]), "--inbox-port", strconv.Itoa(ps[2])}
	})
	api, smtpPort, inboxPort := ports[0], ports[1], ports[2]
	if !strings.HasPrefix(line, "inbox listening on ") {
		t.Fatalf("sidecar's line: %q", line)
	}
	s.readSecrets(t, filepath.Join(data, "trial"))
	s.readSecrets(t, filepath.Join(data, "plane"))
	base := "http://127.0.0.1:" + strconv.Itoa(api)
	inboxBase := "http://127.0.0.1:" + strconv.Itoa(inboxPort)
	smtpAddr := "127.0.0.1:" + strconv.Itoa(smtpPort)
	hc := httpClient(4)
	must := func(a answer, err error) answer {
		t.Helper()
		if err != nil || a.status >= 400 {
			t.Fatalf("%v %d %s", err, a.status, a.body)
		}
		return a
	}
	a := must(s.request(hc, http.MethodGet, base+"/internal/bootstrap", "Bearer "+token, "", nil))
	var boot struct{ Capability, Namespace string }
	json.Unmarshal([]byte(a.body), &boot)
	s.secret("read capability", boot.Capability)
	code := otpCode()
	s.code(code)
	must(s.postEmail(hc, base, token, "", emailBody("site@reference.example", "agent@example.com", "Code", "Your code is "+code)))
	code = otpCode()
	s.code(code)
	if r := s.sendSMTP(smtpAddr, "site@reference.example", []string{"agent@example.com"}, rawMail("SMTP code", "Your code is "+code,
		smtpd.NamespaceHeader+": "+boot.Namespace, smtpd.CapabilityHeader+": "+boot.Capability)); r.code != 250 {
		t.Fatalf("SMTP: %d %v", r.code, r.err)
	}
	apiNS := base + "/api/namespaces/" + boot.Namespace
	must(s.request(hc, http.MethodGet, apiNS+"/messages", "Bearer "+boot.Capability, "", nil))
	must(s.request(hc, http.MethodGet, apiNS+"/messages/latest", "Bearer "+boot.Capability, "", nil))
	a = must(s.request(hc, http.MethodGet, inboxBase+"/", "", "", nil))
	must(s.request(hc, http.MethodGet, inboxBase+a.header.Get("Location")+"/messages/2", "", "", nil))

	doors := []door{
		{"POST /emails Bearer", func(v string) {
			s.postEmail(hc, base, v, "", emailBody("site@reference.example", "x@example.com", "s", "t"))
		}},
		{"bootstrap Bearer", func(v string) { s.request(hc, http.MethodGet, base+"/internal/bootstrap", "Bearer "+v, "", nil) }},
		{"API namespace", func(v string) {
			s.request(hc, http.MethodGet, base+"/api/namespaces/"+url.PathEscape(v)+"/messages", "Bearer "+boot.Capability, "", nil)
		}},
		{"API Bearer", func(v string) { s.request(hc, http.MethodGet, apiNS+"/messages", "Bearer "+v, "", nil) }},
		{"API query", func(v string) {
			s.request(hc, http.MethodGet, apiNS+"/messages?recipient="+url.QueryEscape(v)+"&wait="+url.QueryEscape(v), "Bearer "+boot.Capability, "", nil)
		}},
		{"API bad request", func(v string) {
			s.rawHTTP(strings.TrimPrefix(base, "http://"), "GET /api/namespaces/"+v+" HTTP/1.1\r\nHost: "+v+"\r\n"+v+"\r\n\r\n")
		}},
		{"SMTP selection", func(v string) {
			s.sendSMTP(smtpAddr, "site@reference.example", []string{"x@example.com"}, rawMail("s", "t", smtpd.NamespaceHeader+": "+v, smtpd.CapabilityHeader+": "+v))
			s.sendSMTP(smtpAddr, "site@reference.example", []string{"x@example.com"}, rawMail("s", "t", smtpd.NamespaceHeader+": "+boot.Namespace, smtpd.CapabilityHeader+": "+v))
		}},
		{"inbox path", func(v string) {
			s.request(hc, http.MethodGet, inboxBase+"/inbox/"+url.PathEscape(v), "Bearer "+v, "", nil)
		}},
	}
	presented := abuse(s, doors)
	if code := p.Stop(t); code != 0 {
		t.Errorf("sidecar exited %d", code)
	}
	figure(t, "secrets-e2e run=sidecar doors=%d wrong_presentations=%d", len(doors), presented)
}

// TestConstantTimeComparisons reads every non-test Go file of the module
// and finds every comparison whose operands name a secret (a token, a
// capability, a grant, a credential, a digest): with == or !=, a switch,
// bytes.Equal, strings.EqualFold or strings.Compare. A secret is compared
// only by ident.Equal, which hashes and uses crypto/subtle; ident.Equal
// itself must use subtle.ConstantTimeCompare.
func TestConstantTimeComparisons(t *testing.T) {
	secretName := regexp.MustCompile(`(?i)token|capab|grant|credential|\bcred\b|secret|digest|bearer|password`)
	literal := regexp.MustCompile(`"(?:[^"\\]|\\.)*"|` + "`[^`]*`")
	// Names that look secret but are not; each with its reason.
	notSecret := map[string]string{
		"internal/msgstore/mailpit/wire.go: digest(raw) != r.sum":                             "an MD5 of stored message bytes, checked for integrity",
		"internal/plane/bind.go: bind == bindCredential":                                      "a kind of binding (an enum), not a credential",
		"internal/plane/providers.go: profileOf(id.Profile).apiToken == secretBootstrapToken": "a kind of secret (the policy table's name of a key), not a secret",
		"internal/plane/providers.go: profileOf(tr.Profile).apiToken == secretBootstrapToken": "a kind of secret (the policy table's name of a key), not a secret",
		"internal/plane/bind.go: principalOf(g) != *cr.grantOf":                               "who holds a grant (a role and whether it is shared), not the grant",
		"internal/console/auth.go: len(s) == len(ident.GrantPrefix)+64":                       "a grant's length, which its format fixes for every grant, not its value",
		"internal/console/auth.go: len(capability) != capLen":                                 "a capability's length, which its format fixes for every capability, not its value",
	}
	root := repoRoot()
	var files []string
	for _, dir := range []string{"internal", "pkg", "cmd"} {
		filepath.Walk(filepath.Join(root, dir), func(path string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
				files = append(files, path)
			}
			return nil
		})
	}
	fset := token.NewFileSet()
	checked, bad, usesSubtle := 0, 0, false
	src := func(n ast.Node) string {
		p, e := fset.Position(n.Pos()), fset.Position(n.End())
		b, _ := os.ReadFile(p.Filename)
		return string(b[p.Offset:e.Offset])
	}
	// secretOperand: an operand that names a secret and is not a constant.
	secretOperand := func(e ast.Expr) bool {
		switch e.(type) {
		case *ast.BasicLit:
			return false
		}
		return secretName.MatchString(literal.ReplaceAllString(src(e), `""`))
	}
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		report := func(n ast.Node, what string) {
			if _, ok := notSecret[rel+": "+src(n)]; ok {
				return
			}
			bad++
			t.Errorf("%s:%d: %s %s; compare secrets with ident.Equal", rel, fset.Position(n.Pos()).Line, src(n), what)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.FuncDecl:
				if rel == filepath.Join("internal", "ident", "ident.go") && x.Name.Name == "Equal" {
					usesSubtle = strings.Contains(src(x.Body), "subtle.ConstantTimeCompare(")
					return false // the one place that compares secrets
				}
			case *ast.BinaryExpr:
				if x.Op != token.EQL && x.Op != token.NEQ {
					return true
				}
				checked++
				if _, isLit := x.X.(*ast.BasicLit); isLit {
					return true
				}
				if _, isLit := x.Y.(*ast.BasicLit); isLit {
					return true
				}
				if src(x.X) == "nil" || src(x.Y) == "nil" {
					return true
				}
				if secretOperand(x.X) || secretOperand(x.Y) {
					report(x, "compares with "+x.Op.String())
				}
			case *ast.SwitchStmt:
				if x.Tag != nil {
					checked++
					if secretOperand(x.Tag) {
						report(x.Tag, "is switched on")
					}
				}
			case *ast.CallExpr:
				switch src(x.Fun) {
				case "bytes.Equal", "strings.EqualFold", "strings.Compare", "reflect.DeepEqual", "slices.Equal":
					checked++
					for _, a := range x.Args {
						if secretOperand(a) {
							report(x, "compares in variable time")
							break
						}
					}
				}
			}
			return true
		})
	}
	if !usesSubtle {
		t.Error("ident.Equal does not use subtle.ConstantTimeCompare")
	}
	figure(t, "constant-time files=%d comparisons_checked=%d secret_comparisons_not_constant_time=%d", len(files), checked, bad)
}
