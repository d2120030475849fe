package inboximap_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// python runs testdata/client.py in mode with acct and decodes its last
// line into out.
func python(t *testing.T, mode string, acct *rpc.InboxIMAP, out any, extra ...string) {
	t.Helper()
	cmd := exec.Command(itest.Require(t, "/usr/bin/python3"), append([]string{"testdata/client.py", mode, account(t, acct)}, extra...)...)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("imaplib %s: %v\n%s", mode, err, b)
	}
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if err := json.Unmarshal(lines[len(lines)-1], out); err != nil {
		t.Fatalf("imaplib %s: %v\n%s", mode, err, b)
	}
}

func account(t *testing.T, acct *rpc.InboxIMAP) string {
	t.Helper()
	if acct == nil || acct.Port == 0 || acct.TLSPort == 0 || acct.Password == "" || acct.CAFile == "" {
		t.Fatalf("the bundle's inbox_imap: %+v", acct)
	}
	b, err := json.Marshal(acct)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// send posts a message to b's trial through the writer's API, as a
// candidate site does.
func send(t *testing.T, b rpc.Bundle, subject, text, html string) {
	t.Helper()
	env := b.CandidateEnvironment
	body, _ := json.Marshal(map[string]any{"from": env["WEBSITEBENCH_MAIL_FROM"], "to": []string{"agent@example.com"},
		"subject": subject, "text": text, "html": html})
	req, err := http.NewRequest(http.MethodPost, env["WEBSITEBENCH_MAIL_API_URL"], bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+env["WEBSITEBENCH_MAIL_API_TOKEN"])
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("send %q: %s", subject, resp.Status)
	}
}

// event is what the tests read of a trail's event.
type event struct {
	Door       string  `json:"door"`
	Action     string  `json:"action"`
	Outcome    string  `json:"outcome"`
	MessageIDs []int64 `json:"message_ids"`
}

func trail(t *testing.T, admin *rpc.Client, ns string) []event {
	t.Helper()
	page, err := admin.Export(context.Background(), &rpc.EventsRequest{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	var out []event
	for _, raw := range page.Events {
		var e event
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func opens(events []event, door string) (ids []int64) {
	for _, e := range events {
		if e.Door == door && e.Action == "open" && e.Outcome == "accepted" {
			ids = append(ids, e.MessageIDs...)
		}
	}
	return ids
}

type read struct {
	Status   []any    `json:"status"`
	UIDs     []any    `json:"uids"`
	Login    []any    `json:"login"`
	Select   []any    `json:"select"`
	IDs      []string `json:"ids"`
	Messages []struct {
		Before string `json:"before"`
		Raw    string `json:"raw"`
		After  string `json:"after"`
	} `json:"messages"`
}

// TestIMAP drives the agent's mailbox over IMAP on a real stack (mail-plane
// up and its children) with Python's imaplib and mbsync: reading over
// STARTTLS and implicit TLS, both verified against the bundle's CA; each
// trial's token opening its own mail only; a body fetch on the record as
// an open at door imap; refusals of everything that would change the
// mail; three wrong passwords; no LOGIN before TLS; IDLE woken by a send;
// a closed trial's connection ended; \Seen kept across a restart.
func TestIMAP(t *testing.T) {
	data := t.TempDir()
	// localhost for mbsync, which matches a certificate's DNS names only.
	s := itest.StartUp(t, "--data", data, "--trials", "2", "--tls-name", "localhost")
	a, b := s.Bundle.Trials[0], s.Bundle.Trials[1]
	admin := s.Admin(t)
	send(t, a, "Welcome to A", "Your code is 424242.\nhttps://a.example/confirm", "<p>Your code is <b>424242</b>.</p>")
	send(t, b, "Welcome to B", "Only for B.", "")
	planted, err := admin.TrialPlant(context.Background(), &rpc.PlantRequest{Namespace: a.Namespace, Subject: "Planted note",
		Text: "Planted by the evaluator.", Label: "label-of-the-plant"})
	if err != nil {
		t.Fatal(err)
	}

	// A trial's connections and IDLEs are capped (A has none open yet).
	var caps struct {
		Logins [][]any  `json:"logins"`
		Idles  []string `json:"idles"`
	}
	python(t, "caps", a.InboxIMAP, &caps, fmt.Sprintf(`{"conns": %d, "idles": %d}`, limits.IMAPTrialConns, limits.IMAPTrialIdles))
	for i, l := range caps.Logins {
		if ok := l[0] == "OK"; ok != (i < limits.IMAPTrialConns) {
			t.Errorf("login %d of %d: %v", i+1, len(caps.Logins), l)
		}
	}
	for i, first := range caps.Idles {
		if ok := strings.HasPrefix(first, "+"); ok != (i < limits.IMAPTrialIdles) {
			t.Errorf("IDLE %d of %d: %q", i+1, len(caps.Idles), first)
		}
	}
	if len(caps.Idles) != limits.IMAPTrialIdles+1 || !strings.Contains(caps.Idles[len(caps.Idles)-1], "NO") {
		t.Errorf("IDLEs: %q", caps.Idles)
	}
	preauth(t, a.InboxIMAP)

	for _, mode := range []string{"starttls", "implicit"} { // LOGIN, then AUTHENTICATE PLAIN
		var r read
		python(t, mode, a.InboxIMAP, &r)
		if r.Login[0] != "OK" || r.Select[0] != "OK" || !slices.Equal(r.IDs, []string{"1", "2"}) || len(r.Messages) != 2 {
			t.Fatalf("%s: A's mailbox: %+v", mode, r)
		}
		if want := map[string]string{"starttls": "LOGIN", "implicit": "AUTHENTICATE"}[mode]; !strings.Contains(fmt.Sprint(r.Login[1]), want+" completed") {
			t.Errorf("%s: logged in by %v, want %s", mode, r.Login, want)
		}
		// STATUS's items come in any order; the first mode read both.
		unseen := map[string]string{"starttls": "UNSEEN 2", "implicit": "UNSEEN 0"}[mode]
		status := fmt.Sprint(r.Status)
		if fmt.Sprint(r.UIDs) != "[OK [1 2]]" || !strings.Contains(status, "MESSAGES 2") || !strings.Contains(status, "UIDNEXT 3") ||
			!strings.Contains(status, "UIDVALIDITY ") || !strings.Contains(status, unseen) {
			t.Errorf("%s: UID SEARCH %v, STATUS %v", mode, r.UIDs, r.Status)
		}
		m, p := r.Messages[0], r.Messages[1]
		if !strings.Contains(m.Raw, "Subject: Welcome to A") || !strings.Contains(m.Raw, "Your code is 424242.") ||
			!strings.Contains(m.Raw, "<b>424242</b>") || !strings.Contains(p.Raw, "Subject: Planted note") {
			t.Errorf("%s: the messages read:\n%s\n%s", mode, m.Raw, p.Raw)
		}
		if strings.Contains(m.Raw+p.Raw, "Only for B") || strings.Contains(p.Raw, "label-of-the-plant") {
			t.Errorf("%s: A's mailbox shows B's mail or the plant's label", mode)
		}
		if !strings.Contains(m.After, `\Seen`) {
			t.Errorf("%s: a message read is not \\Seen: %q", mode, m.After)
		}
		if mode == "starttls" && strings.Contains(m.Before, `\Seen`) {
			t.Errorf("a message not yet read is \\Seen: %q", m.Before)
		}
	}
	if got := opens(trail(t, admin, a.Namespace), "imap"); !slices.Contains(got, 1) || !slices.Contains(got, planted.ID) {
		t.Errorf("A's trail's opens at door imap: %v, want messages 1 and %d", got, planted.ID)
	}
	var rb read
	python(t, "implicit", b.InboxIMAP, &rb)
	if len(rb.Messages) != 1 || !strings.Contains(rb.Messages[0].Raw, "Welcome to B") {
		t.Errorf("B's mailbox: %+v", rb)
	}

	var refused map[string]any
	python(t, "refused", a.InboxIMAP, &refused)
	if st, _ := refused["store_flagged"].([]any); len(st) != 2 || st[0] != "OK" || !strings.Contains(fmt.Sprint(st[1]), `\Flagged`) {
		t.Errorf("STORE +FLAGS (\\Flagged): %v", refused["store_flagged"])
	}
	for _, k := range []string{"store_deleted", "store_answered", "expunge", "append", "copy", "create", "examine_other"} {
		st, _ := refused[k].([]any)
		if len(st) != 2 || st[0] != "NO" {
			t.Errorf("%s: %v, want NO with a reason", k, refused[k])
		}
	}
	if ids, _ := refused["ids"].([]any); len(ids) != 2 {
		t.Errorf("the mail after the refusals: %v", refused["ids"])
	}

	var wrong struct {
		Tries [][]any `json:"tries"`
		After []any   `json:"after"`
	}
	before := unbound(t, admin)
	python(t, "wrong", a.InboxIMAP, &wrong)
	if got := unbound(t, admin) - before; got != 3 {
		t.Errorf("three wrong passwords: the plane counted %d refusals, want 3 (as every credential that opens nothing)", got)
	}
	for i, try := range wrong.Tries {
		if try[0] != "error" || !strings.Contains(try[1].([]any)[0].(string), "Invalid credentials") {
			t.Errorf("wrong password %d: %v", i+1, try)
		}
	}
	if wrong.After[0] != "abort" {
		t.Errorf("after three wrong passwords the connection is still open: %v", wrong.After)
	}

	var plain struct {
		Capabilities []string `json:"capabilities"`
		Login        []any    `json:"login"`
	}
	python(t, "plain-login", a.InboxIMAP, &plain)
	if !slices.Contains(plain.Capabilities, "LOGINDISABLED") || !slices.Contains(plain.Capabilities, "STARTTLS") || plain.Login[0] == "OK" {
		t.Errorf("LOGIN before TLS: %+v", plain)
	}

	t.Run("mbsync", func(t *testing.T) { mbsync(t, b) })

	// IDLE on A sees a send; IDLE on B ends when B closes.
	idleA := startIdle(t, a.InboxIMAP)
	idleB := startIdle(t, b.InboxIMAP)
	send(t, a, "While idling", "New mail.", "")
	if seen := idleA.result(t); !slices.Contains(seen, "* 3 EXISTS") || !strings.HasSuffix(seen[len(seen)-1], "OK IDLE completed") {
		t.Errorf("A's IDLE saw %q, want * 3 EXISTS", seen)
	}
	var marked struct {
		Flags       []string `json:"flags"`
		UIDValidity string   `json:"uidvalidity"`
	}
	python(t, "mark", a.InboxIMAP, &marked)
	if len(marked.Flags) != 3 || !strings.Contains(marked.Flags[2], `\Seen`) {
		t.Errorf("A's flags after STORE +FLAGS (\\Seen) on message 3: %q", marked.Flags)
	}
	events := trail(t, admin, a.Namespace)
	if got := opens(events, "imap"); slices.Contains(got, 3) {
		t.Errorf("a STORE of \\Seen is an open: %v", got)
	}
	var flagged [][]int64
	for _, e := range events {
		if e.Door == "imap" && e.Action == "flag" && e.Outcome == "accepted" {
			flagged = append(flagged, e.MessageIDs)
		}
	}
	if len(flagged) != 2 || !slices.Equal(flagged[0], []int64{1}) || !slices.Equal(flagged[1], []int64{3}) {
		t.Errorf("A's trail's flag events: %v, want [1] then [3]", flagged)
	}
	if err := admin.TrialClose(context.Background(), b.Namespace); err != nil {
		t.Fatal(err)
	}
	if seen := idleB.result(t); len(seen) == 0 || (seen[len(seen)-1] != "closed" && !strings.HasPrefix(seen[len(seen)-1], "error")) {
		t.Errorf("B's IDLE after B closed: %q, want the connection ended", seen)
	}
	var login struct {
		Login []any `json:"login"`
	}
	python(t, "login", b.InboxIMAP, &login)
	if login.Login[0] != "error" || !strings.Contains(login.Login[1].([]any)[0].(string), "Invalid credentials") {
		t.Errorf("a closed trial's token at LOGIN: %v", login.Login)
	}

	// \Seen is the plane's record: it survives a restart of the stack.
	if code := s.Stop(t); code != 0 {
		t.Fatalf("up exited %d", code)
	}
	s = itest.StartUp(t, "--data", data)
	var flags struct {
		Flags       []string `json:"flags"`
		UIDValidity string   `json:"uidvalidity"`
	}
	python(t, "flags", s.Bundle.Trials[0].InboxIMAP, &flags)
	if len(flags.Flags) != 3 || !strings.Contains(flags.Flags[0], `\Seen`) || !strings.Contains(flags.Flags[0], `\Flagged`) ||
		!strings.Contains(flags.Flags[1], `\Seen`) || strings.Contains(flags.Flags[1], `\Flagged`) || !strings.Contains(flags.Flags[2], `\Seen`) {
		t.Errorf("A's flags after a restart: %q, want 1 \\Seen \\Flagged, 2 and 3 \\Seen", flags.Flags)
	}
	if flags.UIDValidity == "" || flags.UIDValidity != marked.UIDValidity {
		t.Errorf("UIDVALIDITY %q after a restart, %q before", flags.UIDValidity, marked.UIDValidity)
	}
}

// preauth sends short commands before any login, over TLS verified
// against the CA, until the connection's bound ends it: well before four
// times the bound's bytes are sent.
func preauth(t *testing.T, acct *rpc.InboxIMAP) {
	t.Helper()
	pem, err := os.ReadFile(acct.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	c, err := tls.Dial("tcp", net.JoinHostPort(acct.Host, strconv.Itoa(acct.TLSPort)), &tls.Config{RootCAs: roots, ServerName: acct.Host})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(itest.Bound))
	// One command answered first: the connection works.
	r := bufio.NewReader(c)
	if _, err := io.WriteString(c, "a NOOP\r\n"); err != nil {
		t.Fatal(err)
	}
	for line := ""; !strings.HasPrefix(line, "a OK"); {
		if line, err = r.ReadString('\n'); err != nil {
			t.Fatalf("before login, NOOP: %v", err)
		}
	}
	go func() {
		line := []byte("a NOOP\r\n")
		for range 4 * limits.IMAPPreauthBytes / len(line) {
			if _, err := c.Write(line); err != nil {
				return
			}
		}
	}()
	// The server closes with our commands unread: the end is an EOF or a
	// reset, either way before every command was answered.
	answers, err := io.ReadAll(r)
	if n := bytes.Count(answers, []byte("a OK")); err != nil && !errors.Is(err, syscall.ECONNRESET) || n >= limits.IMAPPreauthBytes/len("a NOOP\r\n") {
		t.Errorf("before login: %d commands answered (bound: %d bytes), then %v", n, limits.IMAPPreauthBytes, err)
	}
}

// unbound is the plane's count of refusals whose credential opened no
// trial.
func unbound(t *testing.T, admin *rpc.Client) int64 {
	t.Helper()
	h, err := admin.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return h.UnboundRefusals
}

// idler is a Python client in IDLE.
type idler struct {
	out  *bufio.Reader
	cmd  *exec.Cmd
	done chan []string
}

func startIdle(t *testing.T, acct *rpc.InboxIMAP) *idler {
	t.Helper()
	cmd := exec.Command(itest.Require(t, "/usr/bin/python3"), "testdata/client.py", "idle", account(t, acct))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line := itest.ReadLine(t, stdout, itest.Bound)
	if !strings.Contains(line, "idling") {
		t.Fatalf("IDLE: %s", line)
	}
	i := &idler{cmd: cmd, done: make(chan []string, 1)}
	go func() {
		var r struct {
			Seen []string `json:"seen"`
		}
		b, _ := bufio.NewReader(stdout).ReadBytes('\n')
		json.Unmarshal(b, &r)
		i.done <- r.Seen
	}()
	return i
}

func (i *idler) result(t *testing.T) []string {
	t.Helper()
	select {
	case seen := <-i.done:
		return seen
	case <-time.After(itest.Bound):
		t.Fatalf("IDLE: nothing within %v", itest.Bound)
		return nil
	}
}

// mbsync, a real mail client from Debian (isync), pulls b's mailbox into
// a Maildir over implicit TLS, verifying the server against the CA. It
// matches the certificate's DNS names only, not its IP addresses: it
// connects to localhost, which up's --tls-name adds to the certificate.
func mbsync(t *testing.T, b rpc.Bundle) {
	bin := itest.Require(t, "mbsync")
	dir := t.TempDir()
	acct := b.InboxIMAP
	if err := os.MkdirAll(filepath.Join(dir, "mail"), 0o700); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "mbsyncrc")
	rc := "IMAPAccount trial\nHost localhost\nPort " + strconv.Itoa(acct.TLSPort) + "\nUser " + acct.Username +
		"\nPass " + acct.Password + "\nSSLType IMAPS\nCertificateFile " + acct.CAFile + "\n\n" +
		"IMAPStore remote\nAccount trial\n\nMaildirStore local\nPath " + dir + "/mail/\nInbox " + dir + "/mail/INBOX\n\n" +
		"Channel inbox\nFar :remote:\nNear :local:\nPatterns INBOX\nSync Pull\nCreate Near\nSyncState *\n"
	if err := os.WriteFile(conf, []byte(rc), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-c", conf, "-a").CombinedOutput()
	if err != nil {
		t.Fatalf("mbsync: %v\n%s", err, out)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "mail", "INBOX", "cur", "*"))
	fresh, _ := filepath.Glob(filepath.Join(dir, "mail", "INBOX", "new", "*"))
	files = append(files, fresh...)
	if len(files) != 1 {
		t.Fatalf("mbsync synced %d messages, want 1\n%s", len(files), out)
	}
	msg, err := os.ReadFile(files[0])
	if err != nil || !bytes.Contains(msg, []byte("Subject: Welcome to B")) || !bytes.Contains(msg, []byte("Only for B.")) {
		t.Errorf("mbsync's copy: %v\n%s", err, msg)
	}
}
