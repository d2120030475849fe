package mailpit

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// The tests below run the real mail-plane binary with --store mailpit.

func send(c *rpc.Client, subject string) (rpc.SendResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Send(ctx, &rpc.SendRequest{Via: rpc.ViaSMTP, From: rpc.CandidateSender, To: []string{"agent@example.com"},
		Raw: []byte("Subject: " + subject + "\r\n\r\nbody of " + subject + "\r\n")})
}

// listAll reads every message of a namespace through the gateway, paging.
func listAll(t *testing.T, gw *rpc.Client, id rpc.Identity) []rpc.Message {
	t.Helper()
	var all []rpc.Message
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		page, err := gw.List(ctx, &rpc.ReadRequest{Namespace: id.Namespace, Capability: id.ReadCapability, After: int64(len(all))})
		cancel()
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		if len(page) == 0 {
			return all
		}
		all = append(all, page...)
	}
}

func health(t *testing.T, p *itest.Plane) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := p.Admin.Health(ctx)
	if err != nil {
		t.Fatalf("health: %v", err)
	}
	return h.Store
}

// Mailpit killed mid-traffic: while it is down every send is an outage
// (store_unavailable: the surfaces' 503 / 451) and health says so; nothing
// acknowledged is lost; sending resumes when Mailpit is back.
func TestPlaneMailpitKilledMidTraffic(t *testing.T) {
	srv := startServer(t)
	p := itest.StartPlane(t, "--store", "mailpit", "--mailpit-socket", srv.HTTP, "--quota-messages", "0", "--quota-bytes", "0")
	id := p.Trial(t, rpc.ProfileCandidate)
	writer := p.Client(t, id.WriterGrant)
	gw := p.Client(t, p.GatewayGrant(t))

	var (
		mu      sync.Mutex
		acked   = map[int64]string{}
		outages atomic.Int64
		wrong   = make(chan error, 100)
		stop    = make(chan struct{})
		wg      sync.WaitGroup
	)
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				subject := fmt.Sprintf("writer %d message %d", w, i)
				resp, err := send(writer, subject)
				switch {
				case err == nil:
					mu.Lock()
					acked[resp.Seq] = subject
					mu.Unlock()
				case rpc.CodeOf(err) == rpc.CodeStoreUnavailable && rpc.IsOutage(err):
					outages.Add(1)
					time.Sleep(5 * time.Millisecond)
				default:
					wrong <- err
					return
				}
			}
		}()
	}
	itest.Eventually(t, "traffic", 15*time.Second, func() bool { return count() >= 40 })
	srv.kill()
	itest.Eventually(t, "outage answers", 15*time.Second, func() bool { return outages.Load() >= 20 })
	during := count()
	if h := health(t, p); h != "unavailable" {
		t.Fatalf("health during the outage: %q", h)
	}
	// Twenty more sends answered while it is down, all outages.
	seen := outages.Load()
	itest.Eventually(t, "more outage answers", itest.Bound, func() bool { return outages.Load() >= seen+20 })
	if n := count(); n != during {
		t.Fatalf("%d sends acknowledged while Mailpit was down", n-during)
	}
	srv.start()
	itest.Eventually(t, "sends after Mailpit is back", 15*time.Second, func() bool { return count() >= during+40 })
	close(stop)
	wg.Wait()
	close(wrong)
	for err := range wrong {
		t.Errorf("a send failed other than as an outage: %v", err)
	}
	if h := health(t, p); h != "ok" {
		t.Fatalf("health after the outage: %q", h)
	}

	msgs := listAll(t, gw, id)
	if len(msgs) != len(acked) {
		t.Errorf("the namespace lists %d messages, %d were acknowledged", len(msgs), len(acked))
	}
	for _, m := range msgs {
		want, ok := acked[m.ID]
		if !ok || m.Subject != want || m.Text != "body of "+want+"\r\n" {
			t.Errorf("message %d: %q %q; acknowledged as %q (%v)", m.ID, m.Subject, m.Text, want, ok)
		}
		delete(acked, m.ID)
	}
	if len(acked) > 0 {
		t.Errorf("acknowledged but lost: %v", acked)
	}
	t.Logf("%d messages acknowledged, %d outage answers", len(msgs), outages.Load())
}

// Through the real plane: what a sender put in From/To/Cc/Bcc/X-Tags/
// X-WebsiteBench-* is gone or replaced in what Mailpit holds.
func TestPlaneScrubsWhatMailpitHolds(t *testing.T) {
	srv := startServer(t)
	p := itest.StartPlane(t, "--store", "mailpit", "--mailpit-socket", srv.HTTP)
	id := p.Trial(t, rpc.ProfileCandidate)
	writer := p.Client(t, id.WriterGrant)
	raw := "From: Boss <boss@bank.example>\r\nTo: victim@example.net\r\nCc: cc@evil.example\r\nBcc: bcc@evil.example\r\n" +
		"X-Tags: evil-tag\r\nX-WebsiteBench-Namespace: " + id.Namespace + "\r\nX-Websitebench-Capability: c\r\nSubject: scrub check\r\n" +
		"Reply-To: reply@elsewhere.example\r\nX-Other: kept\r\n\r\nhello\r\n"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := writer.Send(ctx, &rpc.SendRequest{Via: rpc.ViaSMTP, From: rpc.CandidateSender, To: []string{"smtp-user@example.com", "second@example.com"}, Raw: []byte(raw)}); err != nil {
		t.Fatal(err)
	}
	var list struct {
		Messages []struct{ ID string }
	}
	srv.api(http.MethodGet, "/api/v1/messages", "", &list)
	if len(list.Messages) != 1 {
		t.Fatalf("Mailpit holds %d messages", len(list.Messages))
	}
	var rec struct {
		From        struct{ Address string }
		To, Cc, Bcc []struct{ Address string }
		Tags        []string
		ReplyTo     []struct{ Address string }
	}
	srv.api(http.MethodGet, "/api/v1/message/"+list.Messages[0].ID, "", &rec)
	if rec.From.Address != rpc.CandidateSender || len(rec.To) != 2 || rec.To[0].Address != "smtp-user@example.com" || rec.To[1].Address != "second@example.com" ||
		len(rec.Cc) != 0 || len(rec.Bcc) != 0 || len(rec.ReplyTo) != 1 {
		t.Fatalf("Mailpit's record: %+v", rec)
	}
	if len(rec.Tags) != 1 || !regexp.MustCompile(`^wb-[0-9a-f]{48}$`).MatchString(rec.Tags[0]) {
		t.Fatalf("tags %v: want exactly the namespace's private tag", rec.Tags)
	}
	var headers map[string][]string
	srv.api(http.MethodGet, "/api/v1/message/"+list.Messages[0].ID+"/headers", "", &headers)
	for name := range headers {
		if strings.HasPrefix(strings.ToLower(name), "x-websitebench-") {
			t.Errorf("Mailpit holds %s", name)
		}
	}
	if len(headers["X-Tags"]) != 1 || headers["X-Tags"][0] != rec.Tags[0] || headers["X-Other"][0] != "kept" {
		t.Errorf("headers: %v", headers)
	}
}

// The plane's own Mailpit: started with the plane, stopped when it stops
// (cleanly, or killed), and the namespace's mail is readable after every
// restart of the plane on the same data.
func TestPlaneRestartKeepsMail(t *testing.T) {
	p := itest.StartPlane(t, "--store", "mailpit", "--mailpit-binary", itest.Mailpit(t))
	db := filepath.Join(p.Data, "mailpit", "mailpit.db")
	id := p.Trial(t, rpc.ProfileCandidate)
	writer := p.Client(t, id.WriterGrant)
	for i := range 3 {
		if _, err := send(writer, fmt.Sprintf("before restart %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	first := mailpitPIDs(db)
	if len(first) != 1 {
		t.Fatalf("%d Mailpits on %s", len(first), db)
	}
	if code := p.Stop(t); code != 0 {
		t.Fatalf("plane exited %d", code)
	}
	itest.Eventually(t, "Mailpit to stop with the plane", 10*time.Second, func() bool { return len(mailpitPIDs(db)) == 0 })

	p.Restart(t)
	gw := p.Client(t, p.GatewayGrant(t))
	check := func(n int) {
		t.Helper()
		msgs := listAll(t, gw, id)
		if len(msgs) != n {
			t.Fatalf("%d messages after restart, want %d", len(msgs), n)
		}
		for i, m := range msgs[:3] {
			if m.Subject != fmt.Sprintf("before restart %d", i) || m.ID != int64(i+1) {
				t.Fatalf("message %d: %d %q", i, m.ID, m.Subject)
			}
		}
	}
	check(3)
	writer = p.Client(t, id.WriterGrant)
	if r, err := send(writer, "after restart"); err != nil || r.Seq != 4 {
		t.Fatalf("send after restart: %v %+v", err, r)
	}

	// Killed with SIGKILL, the plane takes its Mailpit with it.
	p.Kill()
	itest.Eventually(t, "Mailpit to die with the plane", 10*time.Second, func() bool { return len(mailpitPIDs(db)) == 0 })
	p.Restart(t)
	gw = p.Client(t, p.GatewayGrant(t))
	check(4)
}

// mailpitPIDs are the live processes running a Mailpit on database db.
func mailpitPIDs(db string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !strings.Contains(string(env), "MP_DATABASE="+db+"\x00") {
			continue
		}
		if stat, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil {
			if f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(f) > 0 && f[0] == "Z" {
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

// How serve finds its Mailpit: the flag, else WEBSITEBENCH_MAILPIT_HTTP_SOCKET
// (as the reference reads it), else its own; with the reference's texts
// when the named one is not ready or none can be had.
func TestServeSelectsMailpit(t *testing.T) {
	srv := startServer(t)
	t.Run("variable", func(t *testing.T) {
		t.Setenv(SocketEnv, " "+srv.HTTP+" ")
		p := itest.StartPlane(t, "--store", "mailpit")
		id := p.Trial(t, rpc.ProfileCandidate)
		before := srv.total()
		if _, err := send(p.Client(t, id.WriterGrant), "via the variable"); err != nil {
			t.Fatal(err)
		}
		if srv.total() != before+1 {
			t.Fatal("the message did not reach the Mailpit the variable names")
		}
	})

	run := func(t *testing.T, env []string, args ...string) (int, string) {
		dir := itest.ShortTempDir(t)
		cmd := exec.Command(itest.Bin(t, "mail-plane"), append([]string{"serve", "--socket", filepath.Join(dir, "p.sock"), "--data", filepath.Join(dir, "data"), "--store", "mailpit"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		done := make(chan struct{})
		var out []byte
		go func() { out, _ = cmd.CombinedOutput(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatal("mail-plane serve did not exit")
		}
		return cmd.ProcessState.ExitCode(), string(out)
	}
	t.Run("not ready", func(t *testing.T) {
		start := time.Now()
		code, out := run(t, []string{SocketEnv + "=/nonexistent/http.sock"})
		if code != 1 || !strings.Contains(out, "mail-plane: Mailpit is not ready on its configured HTTP socket\n") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		if took := time.Since(start); took > readyWait+itest.Bound {
			t.Fatalf("took %v", took)
		}
	})
	t.Run("not configured", func(t *testing.T) {
		code, out := run(t, []string{SocketEnv + "=  ", "MAILPLANE_MAILPIT=", "PATH=" + t.TempDir()})
		if code != 2 || !strings.Contains(out, "WEBSITEBENCH_MAILPIT_HTTP_SOCKET is not configured") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})
	t.Run("bad runtime", func(t *testing.T) {
		code, out := run(t, nil, "--mailpit-runtime", "podman")
		if code != 2 || !strings.Contains(out, "--mailpit-runtime") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})
}

// An address Mailpit refuses is the plane's policy refusal
// (invalid_envelope: the surfaces' 400 / SMTP 550), never an outage, and
// nothing is stored or counted.
func TestPlaneMailpitRefusalIsPolicy(t *testing.T) {
	srv := startServer(t, "MP_SMTP_ALLOWED_RECIPIENTS=@example\\.com$")
	p := itest.StartPlane(t, "--store", "mailpit", "--mailpit-socket", srv.HTTP)
	id := p.Trial(t, rpc.ProfileCandidate)
	writer := p.Client(t, id.WriterGrant)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := writer.Send(ctx, &rpc.SendRequest{Via: rpc.ViaSMTP, From: rpc.CandidateSender, To: []string{"a@example.com", "b@example.org"}, Raw: []byte("Subject: x\r\n\r\nx\r\n")})
	if rpc.CodeOf(err) != rpc.CodeInvalidEnvelope || rpc.IsOutage(err) {
		t.Fatalf("send to an address Mailpit refuses: %v", err)
	}
	if srv.total() != 0 {
		t.Fatal("Mailpit stored a refused message")
	}
	r, err := send(writer, "accepted")
	if err != nil || r.Seq != 1 {
		t.Fatalf("next send: %v %+v (a refusal must not use a message id)", err, r)
	}
	if h := health(t, p); h != "ok" {
		t.Fatalf("health after a refusal: %q", h)
	}
}

// Planted mail on the Mailpit store: written beside the ledger's
// transaction like a send, read back with its label by the gateway and
// without it by the inbox, outside the quota.
func TestPlaneMailpitPlant(t *testing.T) {
	srv := startServer(t)
	p := itest.StartPlane(t, "--store", "mailpit", "--mailpit-socket", srv.HTTP, "--quota-messages", "1")
	id := p.Trial(t, rpc.ProfileCandidate)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := send(p.Client(t, id.WriterGrant), "candidate"); err != nil {
		t.Fatal(err)
	}
	r, err := p.Admin.TrialPlant(ctx, &rpc.PlantRequest{Namespace: id.Namespace, Label: "stale", Subject: "planted", Text: "Your code is 111111."})
	if err != nil || r.ID != 2 {
		t.Fatalf("plant over a full quota: %+v %v", r, err)
	}
	m, err := p.Client(t, p.GatewayGrant(t)).Get(ctx, &rpc.ReadRequest{Namespace: id.Namespace, Capability: id.ReadCapability, ID: 2})
	if err != nil || m.Label != "stale" || m.Subject != "planted" {
		t.Fatalf("gateway read %+v %v", m, err)
	}
	m, err = p.Client(t, id.InboxGrant).Get(ctx, &rpc.ReadRequest{ID: 2})
	if err != nil || m.Label != "" || m.Subject != "planted" {
		t.Fatalf("inbox read %+v %v", m, err)
	}
}
