package hardening

import (
	"bufio"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
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

	_ "modernc.org/sqlite" // to check the ledger's integrity after the disk filled up

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// TestPlaneKilledUnderLoad: SIGKILL of the plane while candidates send
// through the writer, again and again. No acknowledged message is lost; a
// message sent again with its Idempotency-Key is stored once, under the
// id of its first acceptance; while the plane is down every answer is an
// outage (503, 451), never a refusal.
func TestPlaneKilledUnderLoad(t *testing.T) {
	t.Parallel()
	s := newSys(t, "--quota-messages", "0", "--quota-bytes", "0")
	id := s.trial(rpc.ProfileCandidate)
	wr := s.writer(id, "fixed")
	l := startLoad(s, wr, id, 4, 2)
	kills := scale(3, 25)
	for range kills {
		l.waitAcked(t, 20, 60*time.Second)
		time.Sleep(time.Duration(rand.IntN(50)) * time.Millisecond)
		s.plane.Kill()
		time.Sleep(time.Duration(100+rand.IntN(300)) * time.Millisecond)
		if got := healthz(wr.url); got != http.StatusServiceUnavailable {
			t.Errorf("writer /healthz with the plane dead: %d", got)
		}
		s.restartPlane()
	}
	l.waitAcked(t, 20, 60*time.Second)
	l.finish()
	o := l.verify(t, s.messages(id))
	if l.outages.Load() == 0 {
		t.Error("no sender ever saw an outage: the kills did not land under load")
	}
	figure(t, "plane-sigkill kills=%d acked=%d lost=%d duplicates=%d retried=%d outage_answers=%d smtp_resent_after_451=%d smtp_keyed_resent_after_451=%d smtp_keyed_duplicates=%d",
		kills, o.acked, o.lost, o.duplicates, o.retried, l.outages.Load(), o.smtpResent, o.smtpKeyedAmbiguous, o.smtpKeyedDuplicates)
}

// TestStoreDiskFull: the plane's data on a small tmpfs, filled by
// candidates. When the disk is full every send is an outage (503, 451),
// never a refusal, and nothing is half-written: what was acknowledged is
// there and intact, what was refused is not, the ledger passes SQLite's
// integrity check. Evaluator reads go on. When space returns, sending
// resumes without a restart, and everything survives a SIGKILL.
func TestStoreDiskFull(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	disk := filepath.Join(itest.ShortTempDir(t), "disk")
	if err := os.Mkdir(disk, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=3m,mode=0700", "tmpfs", disk).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	// Registered before the plane starts, so it runs after the plane is
	// killed.
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", disk).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", disk, err, out)
		}
	})
	data := filepath.Join(disk, "data")
	s := newSysAt(t, data, "--quota-messages", "0", "--quota-bytes", "0")
	id := s.trial(rpc.ProfileCandidate)
	wr := s.writer(id, "fixed")
	gw := s.gateway()
	hc := httpClient(2)

	// Fill the disk: 16 KiB messages, alternately over HTTP and SMTP, until
	// both doors have answered "outage" several times in a row.
	acked := map[string]string{} // subject → digest of its body
	refused := map[string]bool{}
	outages := map[string]int{}
	sent := 0
	for i := 0; outages["http"] < 5 || outages["smtp"] < 5; i++ {
		if i > 2000 {
			t.Fatalf("the disk never filled: %d acknowledged, outages %v", len(acked), outages)
		}
		body := strings.Repeat(fmt.Sprintf("%08x", rand.Uint32()), 16<<10/8)
		subject := fmt.Sprintf("fill %d", i)
		sent++
		if i%2 == 0 {
			a, err := s.postEmail(hc, wr.url, id.MailAPIToken, subject, emailBody(rpc.CandidateSender, "fill@example.com", subject, body))
			switch {
			case err != nil:
				t.Fatalf("POST /emails: %v", err)
			case a.status == http.StatusOK:
				acked[subject] = digest(body)
				outages["http"] = 0
			case a.status == http.StatusServiceUnavailable:
				refused[subject] = true
				outages["http"]++
			default:
				t.Fatalf("disk full: POST /emails answered %d %s, want 200 or 503", a.status, a.body)
			}
		} else {
			r := s.sendSMTP(wr.smtp, rpc.CandidateSender, []string{"fill@example.com"}, rawMail(subject, body))
			switch r.code {
			case 250:
				acked[subject] = digest(body + "\r\n")
				outages["smtp"] = 0
			case 451:
				refused[subject] = true
				outages["smtp"]++
			default:
				t.Fatalf("disk full: SMTP answered %d %s %v, want 250 or 451", r.code, r.text, r.err)
			}
		}
	}
	full := len(acked)
	// Not asserted: the plane's write probe is a one-row update, which a
	// WAL can still take while a message cannot be stored (see the
	// report), so /healthz may say ok while sends answer 503.
	healthWhileFull := healthz(wr.url)
	check := func(when string) {
		t.Helper()
		msgs := s.messages(id)
		got := map[string]string{}
		for _, m := range msgs {
			got[m.Subject] = digest(m.Text)
		}
		for subject, d := range acked {
			if got[subject] != d {
				t.Errorf("%s: acknowledged %q is missing or damaged", when, subject)
			}
		}
		for subject := range refused {
			if _, ok := got[subject]; ok {
				t.Errorf("%s: %q was answered as an outage but is stored", when, subject)
			}
		}
		if len(got) != len(acked) {
			t.Errorf("%s: %d messages stored, %d acknowledged", when, len(got), len(acked))
		}
	}
	check("disk full")
	// The evaluator reads through the gateway while the disk is full.
	a, err := s.request(hc, http.MethodGet, gw.url+"/api/namespaces/"+id.Namespace+"/messages/latest", "Bearer "+id.ReadCapability, "", nil)
	if err != nil || a.status != http.StatusOK {
		t.Errorf("gateway read with the disk full: %v %d %s", err, a.status, a.body)
	}

	// Space returns: sending resumes without a restart.
	if out, err := exec.Command("mount", "-o", "remount,size=64m", disk).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v %s", err, out)
	}
	itest.Eventually(t, "the writer to be healthy again", itest.Bound, func() bool { return healthz(wr.url) == http.StatusOK })
	for i := range 10 {
		subject := fmt.Sprintf("after %d", i)
		a, err := s.postEmail(hc, wr.url, id.MailAPIToken, subject, emailBody(rpc.CandidateSender, "fill@example.com", subject, "room again"))
		if err != nil || a.status != http.StatusOK {
			t.Fatalf("send after space returned: %v %d %s", err, a.status, a.body)
		}
		acked[subject] = digest("room again")
	}
	check("space returned")

	// And all of it survives SIGKILL; the ledger is intact.
	s.plane.Kill()
	integrity(t, filepath.Join(data, "mailplane.db"))
	s.restartPlane()
	check("after SIGKILL")
	figure(t, "disk-full tmpfs=3MiB sent=%d acked_before_full=%d outage_answers=%d policy_answers=0 lost=0 half_written=0 recovered=yes healthz_while_full=%d",
		sent, full, len(refused), healthWhileFull)
}

func digest(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

// integrity runs SQLite's integrity check on a ledger file whose plane is
// dead.
func integrity(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var res string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&res); err != nil || res != "ok" {
		t.Errorf("integrity check of %s: %q %v", path, res, err)
	}
}

// TestMailpitKilled: with the Mailpit store, Mailpit is SIGKILLed under
// load, more than once. While it is down the surfaces answer 503 / 451
// and /healthz says so; the plane starts it again; no acknowledged message
// is lost or stored twice.
func TestMailpitKilled(t *testing.T) {
	t.Parallel()
	bin := mailpitBinary(t)
	s := newSys(t, "--store", "mailpit", "--mailpit-binary", bin, "--quota-messages", "0", "--quota-bytes", "0")
	id := s.trial(rpc.ProfileCandidate)
	wr := s.writer(id, "fixed")
	gw := s.gateway()
	l := startLoad(s, wr, id, 3, 2)
	kills := scale(2, 10)
	unhealthy := 0
	for range kills {
		l.waitAcked(t, 20, 60*time.Second)
		pids := mailpitPIDs(s.plane.Cmd.Process.Pid)
		if len(pids) != 1 {
			t.Fatalf("the plane runs %d Mailpits: %v", len(pids), pids)
		}
		syscall.Kill(pids[0], syscall.SIGKILL)
		// The plane starts it again after a second; until then the
		// surfaces' health says unavailable. Watched until it is back (a
		// Mailpit of another pid), not for a time the test guessed.
		itest.Eventually(t, "the gateway's health unavailable, or Mailpit started again", itest.Bound, func() bool {
			if healthz(gw.url) == http.StatusServiceUnavailable {
				unhealthy++
				return true
			}
			now := mailpitPIDs(s.plane.Cmd.Process.Pid)
			return len(now) == 1 && now[0] != pids[0]
		})
		itest.Eventually(t, "Mailpit to be back", 60*time.Second, func() bool { return healthz(wr.url) == http.StatusOK })
	}
	l.waitAcked(t, 20, 60*time.Second)
	l.finish()
	if unhealthy == 0 {
		t.Error("/healthz never said unavailable while Mailpit was dead")
	}
	if l.outages.Load() == 0 {
		t.Error("no sender ever saw an outage while Mailpit was dead")
	}
	o := l.verify(t, s.messages(id))
	figure(t, "mailpit-sigkill kills=%d acked=%d lost=%d duplicates=%d retried=%d outage_answers=%d smtp_resent_after_451=%d",
		kills, o.acked, o.lost, o.duplicates, o.retried, l.outages.Load(), o.smtpResent)
}

// mailpitBinary finds the Mailpit `make deps` builds ($MAILPLANE_MAILPIT,
// which make sets, else on PATH): required under CI.
func mailpitBinary(t testing.TB) string {
	if p := os.Getenv("MAILPLANE_MAILPIT"); p != "" {
		return itest.Require(t, p)
	}
	return itest.Require(t, "mailpit")
}

// mailpitPIDs are the Mailpit processes the plane runs.
func mailpitPIDs(plane int) []int {
	var out []int
	for _, pid := range childPIDs(plane) {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.TrimSpace(string(b)) == "mailpit" {
			out = append(out, pid)
		}
	}
	return out
}

// TestSurfaceKilled: each surface SIGKILLed and started again. The
// writer's clients retry through it and lose nothing; an evaluator waiting
// on the gateway sees its connection end, and the plane ends the dead
// gateway's waiting call at once; the evaluator waits again on the new
// gateway and gets the message; the inbox serves again; and once every
// surface is dead the plane holds no socket more than before any
// surface started.
func TestSurfaceKilled(t *testing.T) {
	t.Parallel()
	s := newSys(t, "--quota-messages", "0", "--quota-bytes", "0")
	id := s.trial(rpc.ProfileCandidate)
	planePID := s.plane.Cmd.Process.Pid
	s.plane.admin.Close()
	bare := openSockets(planePID)
	wr := s.writer(id, "fixed")
	in := s.inbox(id)
	gw := s.gateway()
	hc := httpClient(4)

	l := startLoad(s, wr, id, 3, 2)
	kills := scale(3, 20)
	for range kills {
		l.waitAcked(t, 20, 60*time.Second)
		time.Sleep(time.Duration(rand.IntN(50)) * time.Millisecond)
		wr.Kill()
		time.Sleep(time.Duration(50+rand.IntN(200)) * time.Millisecond)
		wr.restart()
	}
	l.waitAcked(t, 20, 60*time.Second)
	l.finish()
	o := l.verify(t, s.messages(id))

	// The gateway dies while an evaluator waits on it.
	waits := func() int { return strings.Count(s.plane.Output(), `"method":"latest"`) }
	url := gw.url + "/api/namespaces/" + id.Namespace + "/messages/latest?recipient=late@example.com&wait=30s"
	waited := make(chan error, 1)
	go func() {
		a, err := s.request(hc, http.MethodGet, url, "Bearer "+id.ReadCapability, "", nil)
		if err == nil {
			err = fmt.Errorf("answered %d %s", a.status, a.body)
		}
		waited <- err
	}()
	s.plane.waitParked(t, "mail", 1)
	before := waits()
	gw.Kill()
	select {
	case err := <-waited:
		t.Logf("the waiting evaluator saw: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting evaluator was not released when the gateway died")
	}
	itest.Eventually(t, "the plane to end the dead gateway's waiting call", itest.Bound, func() bool { return waits() > before })
	gw.restart()
	got := make(chan answer, 1)
	go func() {
		a, err := s.request(hc, http.MethodGet, url, "Bearer "+id.ReadCapability, "", nil)
		if err != nil {
			a.body = err.Error()
		}
		got <- a
	}()
	s.plane.waitParked(t, "mail", 1) // the send wakes it
	if a, err := s.postEmail(hc, wr.url, id.MailAPIToken, "", emailBody(rpc.CandidateSender, "late@example.com", "late", "arrived")); err != nil || a.status != 200 {
		t.Fatalf("send: %v %d", err, a.status)
	}
	select {
	case a := <-got:
		if a.status != http.StatusOK || !strings.Contains(a.body, `"subject":"late"`) {
			t.Fatalf("wait on the restarted gateway: %d %s", a.status, a.body)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the wait on the restarted gateway never returned")
	}

	// The inbox dies and comes back.
	in.Kill()
	if _, err := s.request(hc, http.MethodGet, in.url+"/inbox/"+id.InboxToken, "", "", nil); err == nil {
		t.Error("a dead inbox answered")
	}
	in.restart()
	var late int64
	for _, m := range s.messages(id) {
		if m.Subject == "late" {
			late = m.ID
		}
	}
	if a, err := s.request(hc, http.MethodGet, in.url+"/inbox/"+id.InboxToken, "", "", nil); err != nil || a.status != 200 {
		t.Errorf("inbox after restart: %v %d", err, a.status)
	}
	if a, err := s.request(hc, http.MethodGet, in.url+"/inbox/"+id.InboxToken+"/messages/"+strconv.FormatInt(late, 10), "", "", nil); err != nil || a.status != 200 || !strings.Contains(a.body, "arrived") {
		t.Errorf("the late message in the inbox after restart: %v %d", err, a.status)
	}

	// With every surface dead, the plane holds what it held before them.
	for _, u := range []*surface{wr, in, gw} {
		u.Kill()
	}
	s.plane.admin.Close()
	held := 0
	deadline := time.Now().Add(10 * time.Second)
	for held = openSockets(planePID); held > bare && time.Now().Before(deadline); held = openSockets(planePID) {
		time.Sleep(50 * time.Millisecond)
	}
	if held > bare {
		t.Errorf("the plane holds %d sockets with every surface dead, %d before any started", held, bare)
	}
	figure(t, "surface-sigkill writer_kills=%d gateway_kills=1 inbox_kills=1 acked=%d lost=%d duplicates=%d retried=%d outage_answers=%d plane_sockets_before=%d plane_sockets_after=%d",
		kills, o.acked, o.lost, o.duplicates, o.retried, l.outages.Load(), bare, held)
}

// TestCallerHalfCloses: a caller that half-closes its connection after
// writing a whole call (as HTTP/1.0 clients and `nc -N` do) is still a
// caller with a healthy store behind the plane. Whatever becomes of the
// call, it is never answered as a store outage, and the plane's log shows
// no store failure.
func TestCallerHalfCloses(t *testing.T) {
	t.Parallel()
	s := newSys(t, "--quota-messages", "0", "--quota-bytes", "0")
	id := s.trial(rpc.ProfileCandidate)
	body := `{"via":"smtp","from":"` + rpc.CandidateSender + `","to":["a@example.com"]}` + "\nSubject: x\r\n\r\ny"
	req := "POST /v1/send HTTP/1.1\r\nHost: p\r\nAuthorization: Bearer " + id.WriterGrant +
		"\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	answers := map[string]int{}
	for range scale(100, 1000) {
		c, err := net.Dial("unix", s.plane.socket)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, req)
		c.(*net.UnixConn).CloseWrite()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			answers["none"]++
		} else {
			var e rpc.Error
			b, _ := io.ReadAll(resp.Body)
			json.Unmarshal(b, &e)
			answers[strconv.Itoa(resp.StatusCode)+" "+e.Code]++
		}
		c.Close()
	}
	stored := len(s.messages(id))
	failures := strings.Count(s.plane.Output(), "store failure")
	if n := answers["503 "+rpc.CodeStoreUnavailable]; n > 0 || failures > 0 {
		t.Errorf("%d of the calls were answered store_unavailable and %d store failures logged, with a healthy store (answers %v)", n, failures, answers)
	}
	if ok := answers["200 "]; ok != stored {
		t.Errorf("%d calls answered 200, %d messages stored", ok, stored)
	}
	figure(t, "half-closed-callers answers=%v stored=%d store_failures_logged=%d", answers, stored, failures)
}
