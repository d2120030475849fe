package supervisor_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/evidence"
	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/redact"
	"github.com/websitebench/mailplane/pkg/mailclient"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// step is what one event of the scripted trial must say.
type step struct {
	door, action, outcome, code, credential string
	ids                                     []int64
}

func (s step) String() string {
	return fmt.Sprintf("%s %s %s code=%q credential=%q ids=%v", s.door, s.action, s.outcome, s.code, s.credential, s.ids)
}

// TestEvidenceScriptedTrial drives one trial on a mail-plane up stack
// through every kind of event — sends over HTTP and SMTP accepted and
// refused (by the plane and by the writer), bootstrap, the agent's inbox
// pages, the evaluator's list, latest, get and wait, a wrong capability
// (counted, not in the trail: it opens nothing), SMTP sessions over the connection cap, an outage (the plane's disk
// full), the quota, rotate, seal, close and expiry — and wants the
// exported trail to be exactly that sequence, to verify, to hold no
// secret and no code, and to break at the line where it is edited,
// dropped or reordered.
func TestEvidenceScriptedTrial(t *testing.T) {
	data := filepath.Join(itest.ShortTempDir(t), "data")
	outage := mountTmpfs(t, data, "32m")
	s := itest.StartUp(t, "--trials", "0", "--quota-messages", "3", "--data", data)
	admin := s.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, err := admin.TrialOpen(ctx, &rpc.TrialOpenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	e := episode{b}
	env := b.CandidateEnvironment
	token := env["WEBSITEBENCH_MAIL_API_TOKEN"]
	gw := mailclient.New(b.APIURL, b.Namespace, b.ReadCapability)
	bodyFrom := func(from string) string {
		return fmt.Sprintf(`{"from":%q,"to":"agent@example.com","subject":"Sign up","text":"Your code is 424242"}`, from)
	}
	want := func(code, status int, what string) {
		t.Helper()
		if code != status {
			t.Fatalf("%s: status %d, want %d", what, code, status)
		}
	}

	// The candidate.
	req, _ := http.NewRequest(http.MethodGet, b.WriterURL+"/internal/bootstrap", nil)
	req.Header.Set("Authorization", "Bearer "+env["WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN"])
	want(do(t, req).code, 200, "bootstrap")
	want(e.postWith(t, token, bodyFrom(env["WEBSITEBENCH_MAIL_FROM"])), 200, "send")
	if err := smtpTo(b, b.SMTPPort, "Second"); err != nil {
		t.Fatalf("smtp: %v", err)
	}
	want(e.postWith(t, token, bodyFrom("evil@example.com")), 400, "wrong sender")
	want(e.postWith(t, token, `{"from":"x@example.com","to":"agent@example.com","subject":"s","text":"t","bogus":1}`), 400, "unknown field")
	// The agent.
	want(must(e.inbox(t, b.InboxURL)), 200, "inbox")
	want(must(e.inbox(t, b.InboxURL+"/messages/1")), 200, "inbox message")
	// The evaluator.
	if ms, err := gw.List(ctx, mailclient.Query{}); err != nil || len(ms) != 2 {
		t.Fatalf("list: %v %v", len(ms), err)
	}
	if _, err := gw.Latest(ctx, mailclient.Query{}); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Get(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if ms, err := gw.List(ctx, mailclient.Query{After: 2, Wait: 200 * time.Millisecond}); err != nil || len(ms) != 0 {
		t.Fatalf("wait: %v %v", ms, err)
	}
	wrong := mailclient.New(b.APIURL, b.Namespace, strings.Repeat("0", 64))
	if _, err := wrong.List(ctx, mailclient.Query{}); !strings.Contains(fmt.Sprint(err), "forbidden") {
		t.Fatalf("wrong capability: %v", err)
	}
	last := func() int64 {
		es, err := gw.Events(ctx, 0, 0)
		if err != nil || len(es) == 0 {
			t.Fatalf("events: %v", err)
		}
		return es[len(es)-1].Seq
	}
	// up's shared writer has no 16-session cap on a trial's port any more
	// (fair shares: one cap per process, the quietest connection closed to
	// make room); a door's cap in the trail is TestNetnsDoors'.
	mark := last()
	// The outage: the plane's disk fills up; a send fails (503); once there
	// is room again, the trail records the failure.
	if outage {
		filler := fill(t, data)
		want(e.postWith(t, token, bodyFrom(env["WEBSITEBENCH_MAIL_FROM"])), 503, "send with the disk full")
		os.Remove(filler)
		if _, err := gw.WaitEvent(waitCtx(ctx, 20*time.Second), mark, func(e mailclient.Event) bool { return e.Outcome == "failed" }); err != nil {
			t.Fatalf("no failed event after the outage: %v", err)
		}
	}
	if err := smtpTo(b, b.SMTPPort, "Third"); err != nil {
		t.Fatalf("smtp after the outage: %v", err)
	}
	want(e.postWith(t, token, bodyFrom(env["WEBSITEBENCH_MAIL_FROM"])), 429, "over quota")
	// The trial's life.
	rot, err := admin.TrialRotate(ctx, &rpc.TrialRotateRequest{Namespace: b.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.TrialSeal(ctx, rot.Namespace); err != nil {
		t.Fatal(err)
	}
	if err := admin.TrialClose(ctx, b.Namespace); err != nil {
		t.Fatal(err)
	}
	expiring, err := admin.TrialOpen(ctx, &rpc.TrialOpenRequest{TTLMillis: 300})
	if err != nil {
		t.Fatal(err)
	}

	steps := []step{
		{"plane", "open", "accepted", "", "", nil},
		{"writer-http", "bootstrap", "accepted", "", "bootstrap_token", nil},
		{"writer-http", "send", "accepted", "", "mail_api_token", []int64{1}},
		{"writer-smtp", "send", "accepted", "", "mail_api_token", []int64{2}},
		{"writer-http", "send", "refused", "invalid_envelope", "mail_api_token", nil},
		{"writer-http", "send", "refused", "invalid_message_fields", "mail_api_token", nil},
		{"inbox", "list", "accepted", "", "inbox_token", []int64{1, 2}},
		{"inbox", "open", "accepted", "", "inbox_token", []int64{1}}, // the agent opened message 1
		{"gateway", "list", "accepted", "", "read_capability", []int64{1, 2}},
		{"gateway", "latest", "accepted", "", "read_capability", []int64{2}},
		{"gateway", "get", "accepted", "", "read_capability", []int64{1}},
		{"gateway", "wait", "accepted", "", "read_capability", nil},
	}
	if outage {
		steps = append(steps, step{"writer-http", "send", "failed", "store_unavailable", "mail_api_token", nil})
	}
	steps = append(steps,
		step{"writer-smtp", "send", "accepted", "", "mail_api_token", []int64{3}},
		step{"writer-http", "send", "refused", "mailbox_capacity", "mail_api_token", nil},
		step{"plane", "rotate", "accepted", "", "", nil},
		step{"plane", "close", "accepted", "", "", nil},
	)
	file := export(t, s, b.Namespace)
	got := check(t, file, steps)
	if got[len(steps)-2].Detail != rot.Namespace {
		t.Errorf("rotate names %q, want the new namespace %s", got[len(steps)-2].Detail, rot.Namespace)
	}
	if got[2].Size == 0 || got[2].EmailID == "" || !equal(got[2].To, []string{"agent@example.com"}) || got[2].From != env["WEBSITEBENCH_MAIL_FROM"] {
		t.Errorf("the accepted send's event lacks its size, email id or addresses: %+v", got[2])
	}
	check(t, export(t, s, rot.Namespace), []step{
		{"plane", "open", "accepted", "", "", nil},
		{"plane", "seal", "accepted", "", "", nil},
		{"plane", "close", "accepted", "", "", nil},
	})
	deadline := time.Now().Add(itest.Bound)
	for {
		page, err := admin.Export(ctx, &rpc.EventsRequest{Namespace: expiring.Namespace})
		if err == nil && page.Closed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the trial with a TTL did not expire: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	check(t, export(t, s, expiring.Namespace), []step{
		{"plane", "open", "accepted", "", "", nil},
		{"plane", "expire", "accepted", "", "", nil},
	})

	// No secret, no code: the secrets of the trial, searched in the file,
	// and the redaction point leaves the file as it is (so a redacted
	// trail still verifies).
	for name, secret := range map[string]string{"read capability": b.ReadCapability, "mail-API token": token,
		"bootstrap token": env["WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN"], "inbox URL's token": b.InboxURL[strings.LastIndex(b.InboxURL, "/")+1:],
		"new read capability": rot.ReadCapability, "code": "424242"} {
		if bytes.Contains(file, []byte(secret)) {
			t.Errorf("the trail holds the %s", name)
		}
	}
	if redact.Text(string(file)) != string(file) {
		t.Error("redaction changes the trail: a redacted trail would not verify")
	}
	if out := os.Getenv("MAILPLANE_EVIDENCE_EXAMPLE"); out != "" {
		if err := os.WriteFile(out, file, 0o644); err != nil {
			t.Fatal(err)
		}
		// Its key beside it, so that the example verifies with --key.
		if err := os.WriteFile(strings.TrimSuffix(out, ".jsonl")+".pub", []byte(b.EvidencePublicKey+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Verify, by the CLI: intact, then edited, dropped or reordered.
	verify := func(content []byte) (int, string) {
		f := filepath.Join(t.TempDir(), "trail.jsonl")
		os.WriteFile(f, content, 0o600)
		out, err := exec.Command(itest.Bin(t, "mail-plane"), "evidence", "verify", f).CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if code, out := verify(file); code != 0 || !strings.Contains(out, "chain intact") {
		t.Fatalf("verify of the export: exit %d: %s", code, out)
	}
	lines := bytes.SplitAfter(file, []byte("\n"))
	lines = lines[:len(lines)-1] // the empty piece after the last newline
	for _, k := range []int{1, 3, 7, len(lines) - 1} {
		i := k - 1
		tamper := map[string][][]byte{
			"edited":  replace(lines, i, bytes.Replace(lines[i], []byte(`"outcome":"`), []byte(`"outcome":"x`), 1)),
			"dropped": append(append([][]byte{}, lines[:i]...), lines[i+1:]...),
			"moved":   replace(replace(lines, i, lines[i+1]), i+1, lines[i]),
		}
		for how, ls := range tamper {
			code, out := verify(bytes.Join(ls, nil))
			if code != 1 || !strings.Contains(out, fmt.Sprintf("line %d:", k)) {
				t.Errorf("line %d %s: verify exit %d, %q; want exit 1 naming line %d", k, how, code, out, k)
			}
		}
	}
	if code, out := verify(nil); code != 1 {
		t.Errorf("verify of an empty file: exit %d %s", code, out)
	}
	out, err := exec.Command(itest.Bin(t, "mail-plane"), "evidence", "verify").CombinedOutput()
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("verify without a file: %v %s; want exit 2", err, out)
	}
}

func must(code int, _ string) int { return code }

func equal(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

func replace(ls [][]byte, i int, l []byte) [][]byte {
	out := append([][]byte{}, ls...)
	out[i] = l
	return out
}

func waitCtx(ctx context.Context, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(ctx, d)
	_ = cancel // ends with ctx
	return c
}

// export runs mail-plane evidence export for ns and returns its output.
func export(t *testing.T, s *itest.Stack, ns string) []byte {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(itest.Bin(t, "mail-plane"), "evidence", "export", "--socket", s.Bundle.PlaneSocket,
		"--grant-file", s.Bundle.AdminGrantFile, ns)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("evidence export %s: %v %s", ns, err, stderr.String())
	}
	return out
}

// check verifies a trail and compares it with steps, exactly.
func check(t *testing.T, file []byte, steps []step) []evidence.Event {
	t.Helper()
	if _, err := evidence.Verify(bytes.NewReader(file)); err != nil {
		t.Fatalf("the export does not verify: %v\n%s", err, file)
	}
	var got []evidence.Event
	sc := bufio.NewScanner(bytes.NewReader(file))
	for sc.Scan() {
		if evidence.IsHead(sc.Bytes()) {
			continue
		}
		var e evidence.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	var have []string
	for _, e := range got {
		have = append(have, step{e.Door, e.Action, e.Outcome, e.Code, e.Credential, e.MessageIDs}.String())
	}
	var wantS []string
	for _, s := range steps {
		wantS = append(wantS, s.String())
	}
	if strings.Join(have, "\n") != strings.Join(wantS, "\n") {
		t.Fatalf("trail:\n%s\n\nwant:\n%s\n\nfile:\n%s", strings.Join(have, "\n"), strings.Join(wantS, "\n"), file)
	}
	return got
}

// holdSMTP opens n SMTP sessions to port and reads each greeting.
func holdSMTP(t *testing.T, port, n int) []net.Conn {
	t.Helper()
	var cs []net.Conn
	for range n {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || !strings.HasPrefix(line, "220") {
			t.Fatalf("greeting: %q %v", line, err)
		}
		cs = append(cs, c)
	}
	return cs
}

// mountTmpfs mounts a tmpfs of size at dir, if it can (root): false when
// it cannot, and the test then leaves out the outage.
func mountTmpfs(t *testing.T, dir, size string) bool {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		t.Log("not root: no tmpfs, no outage in the trail")
		return false
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Logf("no tmpfs (%v %s): no outage in the trail", err, out)
		return false
	}
	// Registered before the stack starts, so it runs after the stack stops.
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return true
}

// fill fills dir's file system with one file and returns its path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for chunk := 1 << 20; chunk >= 512; chunk /= 2 {
		buf := make([]byte, chunk)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatal(err)
				}
				break
			}
		}
	}
	return path
}
