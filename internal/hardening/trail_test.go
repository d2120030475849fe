package hardening

import (
	"bufio"
	"bytes"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/evidence"
	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/wbenv"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// TestTrailKeepsWhatTheAgentDid is the audit's erasure on mail-plane up
// with --event-budget 40: the agent's 45 refused pings fill the trail's
// budget, then the agent opens the message and follows its link; both
// are events with the message's id, not only counts. Then the trail's
// freshness: `evidence verify --key K` passes an export taken before the
// close (its head is signed), but with --min-seq of the closed trail's last
// seq, or with --closed, it exits 1; the full closed export passes both.
func TestTrailKeepsWhatTheAgentDid(t *testing.T) {
	const budget, pings = 40, 45
	u := newUpSys(t, "--event-budget", strconv.Itoa(budget))
	s := u.sys
	ctx := ctxT(t, 2*time.Minute)
	b, err := s.plane.admin.TrialOpen(ctx, &rpc.TrialOpenRequest{Profile: rpc.ProfileCandidate})
	if err != nil {
		t.Fatal(err)
	}
	token := b.CandidateEnvironment[wbenv.MailAPIToken]
	s.secret("mail-API token", token)
	s.secret("bootstrap token", b.CandidateEnvironment[wbenv.MailboxBootstrapToken])
	s.secret("inbox URL's token", strings.TrimPrefix(b.InboxURL, u.bundle.InboxBaseURL+"/inbox/"))
	s.secret("read capability", b.ReadCapability)
	s.secret("SES secret", b.Providers.SES.SecretAccessKey)
	hc := httpClient(2)
	if a, err := s.postEmail(hc, b.WriterURL, token, "", emailBody(rpc.CandidateSender, "agent@example.com", "Welcome",
		"Confirm at https://candidate.example/confirm")); err != nil || a.status != http.StatusOK {
		t.Fatalf("POST /emails: %v %+v", err, a)
	}
	id := sentID(t, s, b.Namespace)
	message := b.InboxURL + "/messages/" + strconv.FormatInt(id, 10)
	ping := func(link int) answer {
		a, err := s.request(hc, http.MethodPost, message+"/ping/"+strconv.Itoa(link), "", "PING", map[string]string{"Content-Type": "text/ping"})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	for i := 0; i < pings; i++ {
		if a := ping(7); a.status != http.StatusNotFound {
			t.Fatalf("ping of a link the message does not have: %d %s", a.status, a.body)
		}
	}
	open, err := s.request(hc, http.MethodGet, message, "", "", nil)
	if err != nil || open.status != http.StatusOK {
		t.Fatalf("the agent's open: %v %d", err, open.status)
	}
	if a := ping(0); a.status != http.StatusNoContent {
		t.Fatalf("the agent's click: %d %s", a.status, a.body)
	}

	dir := t.TempDir()
	early := exportCLI(t, u, b.Namespace, filepath.Join(dir, "early.jsonl"))
	events := trailEvents(t, early)
	var full, opened, clicked bool
	refused := 0
	for _, e := range events {
		switch {
		case e.Action == evidence.ActionBudget:
			full = true
		case e.Action == evidence.ActionOpen && e.Door == evidence.DoorInbox && e.Outcome == evidence.Accepted:
			opened = opened || slices.Equal(e.MessageIDs, []int64{id})
		case e.Action == evidence.ActionClick && e.Outcome == evidence.Accepted:
			clicked = clicked || (slices.Equal(e.MessageIDs, []int64{id}) && e.Link != nil && *e.Link == 0)
		case e.Action == evidence.ActionClick && e.Outcome == evidence.Refused:
			refused++
		case e.Action == evidence.ActionSummary:
			refused += int(e.Counts["click/refused"])
		}
	}
	if !full || refused != pings {
		t.Fatalf("the %d refused pings did not fill the trail (budget event: %v; refusals written or counted: %d)", pings, full, refused)
	}
	if !opened || !clicked {
		t.Errorf("past the budget, the agent's open of message %d is an event: %v; its click: %v", id, opened, clicked)
	}

	if err := s.plane.admin.TrialClose(ctx, b.Namespace); err != nil {
		t.Fatal(err)
	}
	closed := exportCLI(t, u, b.Namespace, filepath.Join(dir, "closed.jsonl"))
	all := trailEvents(t, closed)
	last := all[len(all)-1].Seq
	if last <= events[len(events)-1].Seq {
		t.Fatalf("the closed trail ends at seq %d, no further than the early one", last)
	}
	key := u.bundle.EvidencePublicKey
	minSeq := strconv.FormatInt(last, 10)
	for _, c := range []struct {
		name string
		args []string
		file string
		exit int
	}{
		{"the early export, its head signed", nil, early, 0},
		{"the early export with --min-seq", []string{"--min-seq", minSeq}, early, 1},
		{"the early export with --closed", []string{"--closed"}, early, 1},
		{"the closed export with both", []string{"--min-seq", minSeq, "--closed"}, closed, 0},
	} {
		out, code := verifyCLI(t, s, append(append([]string{"--key", key}, c.args...), c.file)...)
		if code != c.exit {
			t.Errorf("%s: verify exit %d, want %d: %s", c.name, code, c.exit, out)
		}
	}
}

// sentID is the id of the one message sent into ns, from its trail.
func sentID(t *testing.T, s *sys, ns string) int64 {
	t.Helper()
	page, err := s.plane.admin.Export(ctxT(t, 30*time.Second), &rpc.EventsRequest{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range page.Events {
		e, err := evidence.Parse(l)
		if err != nil {
			t.Fatal(err)
		}
		if e.Action == "send" && e.Outcome == evidence.Accepted && len(e.MessageIDs) == 1 {
			return e.MessageIDs[0]
		}
	}
	t.Fatalf("no accepted send in %s's trail", ns)
	return 0
}

// exportCLI writes ns's trail to path with mail-plane evidence export, as
// the operator keeps it.
func exportCLI(t *testing.T, u *upSys, ns, path string) string {
	t.Helper()
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command(itest.Bin(t, "mail-plane"), "evidence", "export", "--socket", u.bundle.PlaneSocket,
		"--grant-file", u.bundle.AdminGrantFile, ns)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &stderr
	err = cmd.Run()
	u.sys.addLog("mail-plane evidence export", stderr.String())
	if err != nil {
		t.Fatalf("evidence export: %v: %s", err, stderr.String())
	}
	return path
}

// verifyCLI runs mail-plane evidence verify with args and returns its
// output and exit code.
func verifyCLI(t *testing.T, s *sys, args ...string) (string, int) {
	t.Helper()
	out, err := exec.Command(itest.Bin(t, "mail-plane"), append([]string{"evidence", "verify"}, args...)...).CombinedOutput()
	s.addLog("mail-plane evidence verify", string(out))
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	}
	t.Fatalf("evidence verify: %v", err)
	return "", -1
}

// trailEvents reads the events of an exported trail (its head left out).
func trailEvents(t *testing.T, path string) []evidence.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []evidence.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, evidence.MaxLine)
	for sc.Scan() {
		if evidence.IsHead(sc.Bytes()) {
			continue
		}
		e, err := evidence.Parse(sc.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		t.Fatalf("%s holds no event", path)
	}
	return out
}
