package hardening

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/smtp"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// long reports whether the long form was asked for (make hardening-long).
func long() bool { return os.Getenv("MAILPLANE_HARDENING") == "long" }

// scale is short in the short form and long in the long one.
func scale[T any](short, lng T) T {
	if long() {
		return lng
	}
	return short
}

// figure logs one figure of docs/reliability.md's table, in a form scripts grep for.
func figure(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Logf("FIGURE "+format, args...)
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// repoRoot is the root of the repository, for tests that read its source.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// planeProc is a running mail-plane serve on a socket and data directory of
// the test's choosing (itest.StartPlane picks its own; the disk-full test
// needs the data on a file system it controls).
type planeProc struct {
	*itest.Proc
	t            testing.TB
	socket, data string
	args         []string
	admin        *rpc.Client
	gatewayGrant string
	adminGrant   string
}

// startPlane runs mail-plane serve at debug level with its data in data
// ("": a new temporary directory) and extra flags, and waits until it
// answers.
func startPlane(t testing.TB, data string, extra ...string) *planeProc {
	t.Helper()
	dir := itest.ShortTempDir(t)
	if data == "" {
		data = filepath.Join(dir, "data")
	}
	p := &planeProc{t: t, socket: filepath.Join(dir, "run", "plane.sock"), data: data}
	p.args = append([]string{"--log-level", "debug", "serve", "--socket", p.socket, "--data", p.data}, extra...)
	p.start()
	return p
}

// start runs the plane (again, on the same data) and waits until it
// answers a health call with its admin grant.
func (p *planeProc) start() {
	p.t.Helper()
	p.Proc = itest.StartCmd(p.t, exec.Command(itest.Bin(p.t, "mail-plane"), p.args...), "mail-plane")
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if g, err := rpc.ReadSecretFile(filepath.Join(p.data, "admin.grant")); err == nil {
			if p.admin == nil {
				p.admin = rpc.NewClient(p.socket, g)
				p.adminGrant = g
				p.t.Cleanup(p.admin.Close)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := p.admin.Health(ctx)
			cancel()
			if err == nil {
				if p.gatewayGrant == "" {
					gg, err := rpc.ReadSecretFile(filepath.Join(p.data, "gateway.grant"))
					if err != nil {
						p.t.Fatal(err)
					}
					p.gatewayGrant = gg
				}
				return
			}
		}
		select {
		case <-p.Done():
			p.t.Fatalf("mail-plane exited while starting:\n%s", p.Output())
		case <-time.After(20 * time.Millisecond):
		}
	}
	p.t.Fatalf("mail-plane did not answer within 30s:\n%s", p.Output())
}

// waitParked waits until n long polls are asleep at the plane on "mail"
// or "trail" (itest.Plane.WaitParked), in a subtest, whose end closes the
// console client that reads the plane's metrics: a test may count the
// plane's sockets after.
func (p *planeProc) waitParked(t *testing.T, on string, n int) {
	t.Helper()
	if !t.Run("parked", func(t *testing.T) { (&itest.Plane{Socket: p.socket, Data: p.data}).WaitParked(t, on, n) }) {
		t.FailNow()
	}
}

// client returns a plane client presenting grant, closed at cleanup.
func (p *planeProc) client(grant string) *rpc.Client {
	c := rpc.NewClient(p.socket, grant)
	p.t.Cleanup(c.Close)
	return c
}

// sys is a plane with surfaces in front of it, every process logging at
// debug level, and everything it minted. When the test ends, after every
// process has been killed, the audit searches all their output and every
// answer a client got for every secret and one-time code: there must be
// none.
type sys struct {
	t     *testing.T
	plane *planeProc

	mu      sync.Mutex
	procs   []*itest.Proc
	secrets map[string]string // value → what it is
	codes   map[string]bool   // one-time codes sent in messages
	// answers are what clients were answered, each with what the client
	// sent (see saw).
	answers map[exchange]bool
	// extraLogs are the stderr of short-lived commands (the CLI).
	extraLogs []namedLog
}

type exchange struct{ sent, answer string }

type namedLog struct{ name, text string }

// maxAnswers bounds what the audit keeps (identical answers to identical
// requests are kept once).
const maxAnswers = 50000

func newAudit(t *testing.T) *sys {
	s := &sys{t: t, secrets: map[string]string{}, codes: map[string]bool{}, answers: map[exchange]bool{}}
	t.Cleanup(s.audit)
	return s
}

// newSys starts a plane with flags.
func newSys(t *testing.T, planeFlags ...string) *sys { return newSysAt(t, "", planeFlags...) }

// newSysAt starts a plane with its data in data. The audit is registered
// first, so that it runs after every process of the test is dead and its
// output complete.
func newSysAt(t *testing.T, data string, planeFlags ...string) *sys {
	t.Helper()
	s := newAudit(t)
	s.plane = startPlane(t, data, planeFlags...)
	s.addProc(s.plane.Proc)
	s.secret("gateway grant", s.plane.gatewayGrant)
	s.secret("admin grant", s.plane.adminGrant)
	return s
}

func (s *sys) addProc(p *itest.Proc) {
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
}

// addLog adds the output of a process that is not an itest.Proc.
func (s *sys) addLog(name, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.extraLogs = append(s.extraLogs, namedLog{name, text})
}

// secret records a minted secret for the audit.
func (s *sys) secret(what, value string) {
	if value == "" {
		return
	}
	s.mu.Lock()
	s.secrets[value] = what
	s.mu.Unlock()
}

// code records a one-time code sent in a message.
func (s *sys) code(c string) {
	s.mu.Lock()
	s.codes[c] = true
	s.mu.Unlock()
}

// identity records every secret of a trial.
func (s *sys) identity(id rpc.Identity) {
	for what, v := range map[string]string{
		"read capability": id.ReadCapability, "inbox token": id.InboxToken, "mail-API token": id.MailAPIToken,
		"bootstrap token": id.BootstrapToken, "write capability": id.WriteCapability,
		"writer grant": id.WriterGrant, "inbox grant": id.InboxGrant,
	} {
		s.secret(id.Namespace+" "+what, v)
	}
}

// trial creates a trial and records its secrets.
func (s *sys) trial(profile string) rpc.Identity {
	s.t.Helper()
	id, err := s.plane.admin.TrialCreate(ctxT(s.t, 10*time.Second), &rpc.TrialCreateRequest{Profile: profile})
	if err != nil {
		s.t.Fatal(err)
	}
	s.identity(id)
	return id
}

// restartPlane starts the plane again on its data after Kill or Stop.
func (s *sys) restartPlane() {
	s.t.Helper()
	s.plane.start()
	s.addProc(s.plane.Proc)
}

// saw records an answer that is not a success, with everything the client
// sent to get it. A secret in an answer is a leak unless the client sent
// that very secret in that very request: an SMTP server that greets the
// name a client gave, or repeats the address it was given, echoes; the
// audit counts echoes apart.
func (s *sys) saw(sent, answer string) {
	s.mu.Lock()
	if len(s.answers) < maxAnswers {
		s.answers[exchange{sent, answer}] = true
	}
	s.mu.Unlock()
}

// audit searches every log and every answer for every secret and code.
func (s *sys) audit() {
	s.mu.Lock()
	defer s.mu.Unlock()
	logs := map[string]string{}
	logBytes := 0
	for i, p := range s.procs {
		logs[fmt.Sprintf("log of %s (run %d)", p.Name, i)] = p.Output()
	}
	for _, l := range s.extraLogs {
		logs["log of "+l.name] = l.text
	}
	codeRE := map[string]*regexp.Regexp{}
	for c := range s.codes {
		codeRE[c] = regexp.MustCompile(`(^|[^0-9])` + c + `([^0-9]|$)`)
	}
	found, redacted, echoes := 0, 0, 0
	for where, text := range logs {
		logBytes += len(text)
		// The logs' redaction is a backstop: a value it had to hide is one
		// the code tried to log, and a secret of another shape (a
		// sidecar's own bootstrap token) would not have been hidden.
		if n := strings.Count(text, "[REDACTED]"); n > 0 {
			redacted += n
			i := strings.Index(text, "[REDACTED]")
			s.t.Errorf("the %s tried to log %d secret-shaped values (the backstop hid them): …%s…", where, n, text[max(0, i-200):min(len(text), i+60)])
		}
		for v, what := range s.secrets {
			if strings.Contains(text, v) {
				found++
				i := strings.Index(text, v)
				s.t.Errorf("secret leak: the %s is in the %s: …%s…", what, where, redactedContext(text, i, len(v)))
			}
		}
		for c, re := range codeRE {
			if re.MatchString(text) {
				found++
				s.t.Errorf("secret leak: one-time code %s is in the %s", c, where)
			}
		}
	}
	for ex := range s.answers {
		for v, what := range s.secrets {
			if !strings.Contains(ex.answer, v) {
				continue
			}
			if strings.Contains(ex.sent, v) {
				echoes++
				continue
			}
			found++
			i := strings.Index(ex.answer, v)
			s.t.Errorf("secret leak: the %s is in an answer to a request that did not carry it: …%q…", what, redactedContext(ex.answer, i, len(v)))
		}
		for c, re := range codeRE {
			if re.MatchString(ex.answer) && !strings.Contains(ex.sent, c) {
				found++
				s.t.Errorf("secret leak: one-time code %s is in an answer to a request that did not carry it", c)
			}
		}
	}
	figure(s.t, "secrets-audit secrets=%d codes=%d logs=%d log_bytes=%d answers=%d found=%d redacted_by_log_backstop=%d echoes_of_own_input=%d",
		len(s.secrets), len(s.codes), len(logs), logBytes, len(s.answers), found, redacted, echoes)
}

// redactedContext shows where a secret stands in a text without showing
// the secret.
func redactedContext(text string, i, n int) string {
	return text[max(0, i-200):i] + "<SECRET>" + text[i+n:min(len(text), i+n+60)]
}

// surface is a running mail-writer, mail-inbox or mail-gateway. It
// listens on sockets the test bound and handed it (fd:3, fd:4): no other
// process of the shared machine can take a port between the test's
// choosing it and the surface's binding it.
type surface struct {
	*itest.Proc
	s     *sys
	args  []string
	ports []int  // of its listeners, handed down as fd:3, fd:4, ...
	url   string // http://127.0.0.1:PORT of its HTTP listener
	smtp  string // the writer's SMTP address
}

// listenFDs are the flag values of n handed-down listeners.
func listenFDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "fd:" + strconv.Itoa(3+i)
	}
	return out
}

// bind listens on 127.0.0.1 at each of ports (0: any free port) and
// returns the listeners' files, for a child's ExtraFiles, and their ports.
func bind(t testing.TB, ports []int) ([]*os.File, []int) {
	t.Helper()
	files := make([]*os.File, len(ports))
	bound := make([]int, len(ports))
	for i, port := range ports {
		var ln net.Listener
		var err error
		// A port just freed by a killed surface may take a moment.
		for try := 0; try < 50; try++ {
			if ln, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		f, err := ln.(*net.TCPListener).File()
		ln.Close() // the file is a duplicate: the socket stays open
		if err != nil {
			t.Fatal(err)
		}
		files[i], bound[i] = f, ln.Addr().(*net.TCPAddr).Port
	}
	return files, bound
}

// start runs a surface on listeners bound at ports (0: any) with args,
// which name them fd:3, fd:4, ...
func (s *sys) start(name string, ports []int, args ...string) *surface {
	s.t.Helper()
	files, bound := bind(s.t, ports)
	cmd := exec.Command(itest.Bin(s.t, name), args...)
	cmd.ExtraFiles = files
	u := &surface{s: s, args: args, ports: bound}
	u.Proc = itest.StartCmd(s.t, cmd, name)
	for _, f := range files {
		f.Close() // the child has its own
	}
	s.addProc(u.Proc)
	return u
}

// writer starts mail-writer for id in mode (fixed or select) with the
// flags mail-plane up passes, plus extra.
func (s *sys) writer(id rpc.Identity, mode string, extra ...string) *surface {
	s.t.Helper()
	fd := listenFDs(2)
	u := s.start("mail-writer", []int{0, 0}, append([]string{"--log-level", "debug", "--plane-socket", s.plane.socket,
		"--grant-file", itest.WriteSecret(s.t, "writer.grant", id.WriterGrant),
		"--http-listen", fd[0], "--smtp-listen", fd[1], "--smtp-mode", mode}, extra...)...)
	u.url, u.smtp = "http://127.0.0.1:"+strconv.Itoa(u.ports[0]), "127.0.0.1:"+strconv.Itoa(u.ports[1])
	itest.WaitHTTP(s.t, u.url+"/healthz", http.StatusOK, u.Proc)
	return u
}

// inbox starts mail-inbox for id (strict mode: bound to its trial), with
// extra flags.
func (s *sys) inbox(id rpc.Identity, extra ...string) *surface {
	s.t.Helper()
	u := s.start("mail-inbox", []int{0}, append([]string{"--log-level", "debug", "--plane-socket", s.plane.socket,
		"--grant-file", itest.WriteSecret(s.t, "inbox.grant", id.InboxGrant),
		"--token-file", itest.WriteSecret(s.t, "inbox.token", id.InboxToken),
		"--listen", listenFDs(1)[0]}, extra...)...)
	u.url = "http://127.0.0.1:" + strconv.Itoa(u.ports[0])
	itest.WaitHTTP(s.t, u.url+"/healthz", http.StatusOK, u.Proc)
	return u
}

// gateway starts mail-gateway with the plane's gateway grant.
func (s *sys) gateway() *surface {
	s.t.Helper()
	u := s.start("mail-gateway", []int{0}, "--log-level", "debug", "--plane-socket", s.plane.socket,
		"--grant-file", itest.WriteSecret(s.t, "gateway.grant", s.plane.gatewayGrant),
		"--listen", listenFDs(1)[0])
	u.url = "http://127.0.0.1:" + strconv.Itoa(u.ports[0])
	itest.WaitHTTP(s.t, u.url+"/healthz", http.StatusOK, u.Proc)
	return u
}

// restart runs the surface again with the same flags on the same ports,
// after it was killed, and waits until it is healthy.
func (u *surface) restart() {
	u.s.t.Helper()
	v := u.s.start(u.Name, u.ports, u.args...)
	u.Proc = v.Proc
	itest.WaitHTTP(u.s.t, u.url+"/healthz", http.StatusOK, u.Proc)
}

// pid is the surface's process id.
func (u *surface) pid() int { return u.Cmd.Process.Pid }

// httpClient returns a client with at most conns connections per host, so
// that tests stay inside the surfaces' connection caps.
func httpClient(conns int) *http.Client {
	return &http.Client{
		Timeout:       90 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{
			MaxConnsPerHost: conns, MaxIdleConnsPerHost: conns, DisableCompression: true,
			IdleConnTimeout: 5 * time.Second,
		},
	}
}

// answer is one HTTP answer, read whole.
type answer struct {
	status int
	header http.Header
	body   string
}

// request sends one HTTP request; auth is the whole Authorization value
// ("" for none). The answer is recorded for the audit.
func (s *sys) request(hc *http.Client, method, url, auth, body string, header map[string]string) (answer, error) {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		return answer{}, err
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	if resp.StatusCode >= 400 {
		var sent strings.Builder
		fmt.Fprintf(&sent, "%s %s %s %s %v", method, url, auth, body, header)
		s.saw(sent.String(), string(b))
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}, nil
}

// emailBody is a POST /emails body.
func emailBody(from, to, subject, text string) string {
	q := strconv.Quote
	return `{"from":` + q(from) + `,"to":` + q(to) + `,"subject":` + q(subject) + `,"text":` + q(text) + `}`
}

// postEmail sends POST /emails with a Bearer credential and an optional
// Idempotency-Key.
func (s *sys) postEmail(hc *http.Client, base, cred, key, body string) (answer, error) {
	h := map[string]string{"Content-Type": "application/json"}
	if key != "" {
		h["Idempotency-Key"] = key
	}
	auth := ""
	if cred != "" {
		auth = "Bearer " + cred
	}
	return s.request(hc, http.MethodPost, base+"/emails", auth, body, h)
}

// postOp is one of a trial's POST /emails with token through the writer
// at base, on hc, as a probe or a round makes it (the subject ends with
// i): "" when answered 200, else the status (0: no answer) and error.
func (s *sys) postOp(hc *http.Client, base, token, subject string) func(i int) string {
	return func(i int) string {
		a, err := s.postEmail(hc, base, token, "", emailBody(rpc.CandidateSender, "b@example.com", subject+" "+strconv.Itoa(i), "x"))
		if err != nil || a.status != 200 {
			return fmt.Sprintf("%d %v", a.status, err)
		}
		return ""
	}
}

// smtpOp is postOp's SMTP send, authenticated with token on addr: "" when
// delivered, else the reply code (0: none) and error.
func smtpOp(addr, token, subject string) func(i int) string {
	return func(i int) string {
		if r := sendSMTPAuth(addr, token, rpc.CandidateSender, "b@example.com", rawMail(subject+" "+strconv.Itoa(i), "x")); r.code != 250 {
			return fmt.Sprintf("%d %v", r.code, r.err)
		}
		return ""
	}
}

// smtpResult is the outcome of one SMTP transaction: the final reply code
// (250 when the message was accepted, 0 when the connection failed).
type smtpResult struct {
	code int
	text string
	err  error
}

// sendSMTP runs one SMTP transaction with data as the message.
func (s *sys) sendSMTP(addr, from string, to []string, data []byte) smtpResult {
	r := sendSMTP(addr, from, to, data)
	if r.code != 250 {
		s.saw(fmt.Sprint(from, to, string(data)), strconv.Itoa(r.code)+" "+r.text+" "+fmt.Sprint(r.err))
	}
	return r
}

func sendSMTP(addr, from string, to []string, data []byte) smtpResult {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return smtpResult{err: err}
	}
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	c, err := smtp.NewClient(conn, "127.0.0.1")
	if err != nil {
		conn.Close()
		return result(err)
	}
	defer c.Close()
	if err := c.Mail(from); err != nil {
		return result(err)
	}
	for _, r := range to {
		if err := c.Rcpt(r); err != nil {
			return result(err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return result(err)
	}
	if _, err := w.Write(data); err != nil {
		return result(err)
	}
	if err := w.Close(); err != nil {
		return result(err)
	}
	c.Quit()
	return smtpResult{code: 250}
}

func result(err error) smtpResult {
	var te *textproto.Error
	if errors.As(err, &te) {
		return smtpResult{code: te.Code, text: te.Msg, err: err}
	}
	return smtpResult{err: err}
}

// rawMail is a minimal message.
func rawMail(subject, body string, headers ...string) []byte {
	var b strings.Builder
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("Subject: " + subject + "\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + body + "\r\n")
	return []byte(b.String())
}

// messages reads every message of a namespace through the plane, as the
// gateway does, a page at a time.
func (s *sys) messages(id rpc.Identity) []rpc.Message {
	s.t.Helper()
	return s.messagesOf(id.Namespace, id.ReadCapability)
}

func (s *sys) messagesOf(ns, capability string) []rpc.Message {
	s.t.Helper()
	gw := rpc.NewClient(s.plane.socket, s.plane.gatewayGrant)
	defer gw.Close()
	var all []rpc.Message
	for {
		req := &rpc.ReadRequest{Namespace: ns, Capability: capability}
		if len(all) > 0 {
			req.After = all[len(all)-1].ID
		}
		page, err := gw.List(ctxT(s.t, 30*time.Second), req)
		if err != nil {
			s.t.Fatalf("list %s: %v", ns, err)
		}
		if len(page) == 0 {
			return all
		}
		all = append(all, page...)
	}
}

// subjects counts the subjects of msgs.
func subjects(msgs []rpc.Message) map[string]int {
	out := map[string]int{}
	for _, m := range msgs {
		out[m.Subject]++
	}
	return out
}

// rss is a process's resident memory in KiB, from /proc.
func rss(pid int) int { return procStatusKiB(pid, "VmRSS:") }

// procStatusKiB is one field of a process's /proc status, in KiB (0 if
// there is none).
func procStatusKiB(pid int, field string) int {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return 0
}

// rssPeak measures how far a process's memory rises from a base: by the
// kernel's own high-water mark (VmHWM), which holds the most the process
// was resident at any instant, where a sampler polling VmRSS misses a
// peak that falls between two of its samples (and a loaded host runs it
// late). What the growth still depends on is the process's own doing
// (when its garbage collector ran), not when the test looked.
type rssPeak struct{ pid, base int }

// watchRSS resets pid's high-water mark to what it holds now
// (/proc/PID/clear_refs, Linux 4.0) and takes that as the base. Where the
// kernel refuses the reset, the mark is the peak since the process
// started, which can only overstate the growth.
func watchRSS(t testing.TB, pid int) rssPeak {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Logf("process %d's peak memory counts from its start (no reset: %v)", pid, err)
	}
	return rssPeak{pid: pid, base: rss(pid)}
}

// peak is the most the process was resident since watchRSS, in KiB.
func (p rssPeak) peak() int { return max(p.base, procStatusKiB(p.pid, "VmHWM:")) }

// tcpSocket is one TCP socket of the host's network namespace, from
// /proc/net/tcp (IPv4: the stacks listen on 127.0.0.1).
type tcpSocket struct {
	local, remote int    // ports
	state         string // as the kernel writes it: 01 established, 08 close-wait, 0A listen
	tx, rx        int    // queued to send and not yet read; a listener's rx counts connections
}

func tcpSockets(t testing.TB) []tcpSocket {
	t.Helper()
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	hex := func(s string) int {
		n, _ := strconv.ParseInt(s, 16, 64)
		return int(n)
	}
	port := func(addr string) int { // 0100007F:1F90
		_, p, _ := strings.Cut(addr, ":")
		return hex(p)
	}
	var out []tcpSocket
	for line := range strings.Lines(string(b)) {
		// sl local_address rem_address st tx_queue:rx_queue ...
		f := strings.Fields(line)
		if len(f) < 5 || f[0] == "sl" {
			continue
		}
		tx, rx, _ := strings.Cut(f[4], ":")
		out = append(out, tcpSocket{local: port(f[1]), remote: port(f[2]), state: f[3], tx: hex(tx), rx: hex(rx)})
	}
	return out
}

// unreadOn is the most bytes any TCP connection to one of ports holds that
// its server has not read yet: in the server's receive queue, or still in
// the client's send queue.
func unreadOn(t testing.TB, ports ...int) int {
	t.Helper()
	most := 0
	for _, s := range tcpSockets(t) {
		switch {
		case s.state == "0A":
		case slices.Contains(ports, s.local): // the server's end
			most = max(most, s.rx)
		case slices.Contains(ports, s.remote): // a client's
			most = max(most, s.tx)
		}
	}
	return most
}

// connectedOn is how many connections the servers on ports hold open:
// their end of each, established or closed by the client only (once the
// server closes its end, what the kernel keeps of it is no one's).
func connectedOn(t testing.TB, ports ...int) int {
	t.Helper()
	n := 0
	for _, s := range tcpSockets(t) {
		if (s.state == "01" || s.state == "08") && slices.Contains(ports, s.local) {
			n++
		}
	}
	return n
}

// openSockets is how many sockets a process holds (its listeners and its
// connections), from /proc.
func openSockets(pid int) int {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, _ := os.ReadDir(dir)
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

// childPIDs lists the processes whose parent is pid.
func childPIDs(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n))
		if err != nil {
			continue
		}
		// The command name is in parentheses and may hold spaces.
		rest := string(b)
		if i := strings.LastIndexByte(rest, ')'); i >= 0 {
			rest = rest[i+1:]
		}
		f := strings.Fields(rest)
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// raiseTo makes m at least v, whichever goroutines raise it at once.
func raiseTo(m *atomic.Int64, v int64) {
	for old := m.Load(); v > old && !m.CompareAndSwap(old, v); old = m.Load() {
	}
}

// healthz is the status of GET /healthz on a surface (0 if unreachable).
func healthz(url string) int {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get(url + "/healthz")
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
