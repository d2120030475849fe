package fleet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/smtp"
	"net/textproto"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/pgtest"
	"github.com/websitebench/mailplane/pkg/mailclient"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// fleet is two planes on one database, each with its own shared writer
// and gateway, as two machines would run them.
type fleet struct {
	pg       *pgtest.Server
	planes   [2]*itest.Plane
	writers  [2]*itest.Surface
	gateways [2]*itest.Surface
}

func start(t *testing.T, flags ...string) *fleet {
	t.Helper()
	f := &fleet{pg: pgtest.Start(t)}
	dsn := itest.WriteSecret(t, "dsn", f.pg.DSN())
	for i := range f.planes {
		p := itest.StartPlane(t, append([]string{"--store", "postgres", "--dsn-file", dsn}, flags...)...)
		f.planes[i] = p
		// Room for the tests' 50 senders at once.
		f.writers[i] = itest.StartWriter(t, p, p.Grant(t, rpc.RoleWriter), "select", "--max-connections", "100")
		f.gateways[i] = itest.StartGateway(t, p)
	}
	return f
}

var hc = &http.Client{Timeout: 30 * time.Second}

// sent is a POST /emails's answer.
type sent struct {
	status int
	id     string
	code   string
}

// send posts one message through a writer with the trial's mail-API token.
func send(w *itest.Surface, id rpc.Identity, key, subject string) (sent, error) {
	body, _ := json.Marshal(map[string]any{"from": rpc.CandidateSender, "to": []string{"user@example.com"}, "subject": subject, "text": "hello " + subject})
	req, _ := http.NewRequest(http.MethodPost, w.URL+"/emails", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+id.MailAPIToken)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return sent{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out struct {
		ID   string `json:"id"`
		Code string `json:"error"`
	}
	json.Unmarshal(b, &out)
	if resp.StatusCode != http.StatusOK && out.Code == "" {
		out.Code = string(b)
	}
	return sent{status: resp.StatusCode, id: out.ID, code: out.Code}, nil
}

func reader(g *itest.Surface, id rpc.Identity) *mailclient.Client {
	return mailclient.New(g.URL, id.Namespace, id.ReadCapability)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// TestTwoPlanes: a trial opened on plane A is used through plane B; one
// quota holds over 1,000 sends split across both; 50 sends at once with
// one Idempotency-Key make one message; a wait held on plane B's gateway
// wakes within 50 ms of a send through plane A.
func TestTwoPlanes(t *testing.T) {
	const quota = 300
	f := start(t, "--quota-messages", strconv.Itoa(quota))

	t.Run("Quota", func(t *testing.T) {
		id := f.planes[0].Trial(t, rpc.ProfileCandidate)
		const sends, workers = 1000, 16
		var mu sync.Mutex
		counts := map[int]int{}
		var wg sync.WaitGroup
		next := make(chan int)
		for range workers {
			wg.Go(func() {
				for i := range next {
					r, err := send(f.writers[i%2], id, "", fmt.Sprint("quota ", i))
					mu.Lock()
					if err != nil {
						t.Errorf("send %d: %v", i, err)
					} else if r.status != http.StatusOK && r.code != "mailbox_capacity" {
						t.Errorf("send %d: %d %s; want 200 or the quota's refusal", i, r.status, r.code)
					}
					counts[r.status]++
					mu.Unlock()
				}
			})
		}
		for i := range sends {
			next <- i
		}
		close(next)
		wg.Wait()
		if counts[http.StatusOK] != quota {
			t.Fatalf("%d sends through two planes, quota %d: answers %v", sends, quota, counts)
		}
		for i, g := range f.gateways {
			ms, err := reader(g, id).List(ctx(t), mailclient.Query{})
			if err != nil || len(ms) != quota {
				t.Fatalf("gateway of plane %d lists %d messages (%v); want %d", i, len(ms), err, quota)
			}
		}
	})

	t.Run("IdempotencyKey", func(t *testing.T) {
		id := f.planes[1].Trial(t, rpc.ProfileCandidate)
		var wg sync.WaitGroup
		results := make([]sent, 50)
		for i := range results {
			wg.Go(func() {
				r, err := send(f.writers[i%2], id, "one-key", "keyed")
				if err != nil {
					t.Errorf("send %d: %v", i, err)
				}
				results[i] = r
			})
		}
		wg.Wait()
		ids := map[string]bool{}
		for i, r := range results {
			switch {
			case r.status == http.StatusOK:
				ids[r.id] = true
			case r.status == http.StatusConflict && r.code == "concurrent_idempotent_requests":
			default:
				t.Fatalf("send %d: %d %s", i, r.status, r.code)
			}
		}
		ms, err := reader(f.gateways[0], id).List(ctx(t), mailclient.Query{})
		if len(ids) != 1 || err != nil || len(ms) != 1 {
			t.Fatalf("50 sends with one key through two planes: ids %v, %d messages stored (%v); want one", ids, len(ms), err)
		}
	})

	t.Run("WaitWakesAcrossPlanes", func(t *testing.T) {
		wakes(t, f)
	})

	// A trial closed through plane A: its grant, cached by plane B, is
	// refused there at once (plane B forgets it on A's announcement).
	t.Run("CloseForgottenAcrossPlanes", func(t *testing.T) {
		id := f.planes[0].Trial(t, rpc.ProfileCandidate)
		onB := f.planes[1].Client(t, id.WriterGrant)
		if _, err := onB.Health(ctx(t)); err != nil {
			t.Fatalf("the trial's writer grant on plane B: %v", err)
		}
		if err := f.planes[0].Admin.TrialClose(ctx(t), id.Namespace); err != nil {
			t.Fatal(err)
		}
		// Plane B keeps a grant until an announcement ends its cache's
		// generation (no expiry), so any bound tells the announcement from
		// none: a generous one.
		itest.Eventually(t, "the closed trial's grant refused on plane B", itest.Bound, func() bool {
			_, err := onB.Health(ctx(t))
			return rpc.CodeOf(err) == rpc.CodeUnauthenticated
		})
	})

	// The database stopped and started again under load: only outages
	// while it is down, the planes recover on their own, and nothing
	// acknowledged is lost.
	t.Run("PostgresOutage", func(t *testing.T) {
		id := f.planes[0].Trial(t, rpc.ProfileCandidate)
		l := startLoad(t, f.writers[:], id, http.StatusOK, http.StatusServiceUnavailable)
		l.await(t, 10)
		f.pg.Stop()
		down := l.tally()
		for i, g := range f.gateways {
			itest.Eventually(t, fmt.Sprintf("gateway of plane %d answering 503 while the database is down", i), itest.Bound, func() bool {
				_, err := reader(g, id).List(ctx(t), mailclient.Query{})
				return isStatus(err, http.StatusServiceUnavailable)
			})
		}
		// 454 if AUTH meets the outage (RFC 4954's temporary
		// authentication failure), 451 after it.
		if code := sendSMTP(t, f.writers[1], id); code != 451 && code != 454 {
			t.Errorf("SMTP while the database is down: %d; want 451 or 454", code)
		}
		f.pg.Restart()
		l.await(t, down[http.StatusOK]+10)
		l.stop()
		// Plane B listens again: a send through A wakes a wait on B
		// (right after the restart, its pools are still reconnecting:
		// only the wake itself is asserted here).
		wakes(t, f)
		if got := l.tally(); got[http.StatusServiceUnavailable] == 0 {
			t.Errorf("no send was answered 503 while the database was down: %v", got)
		}
		l.check(t, f.writers[1], f.gateways[1])
	})

	// kill -9 of plane A under load: every message it acknowledged is
	// readable through plane B, and a retry through B with the same key
	// stores nothing twice.
	t.Run("KillPlane", func(t *testing.T) {
		id := f.planes[1].Trial(t, rpc.ProfileCandidate)
		l := startLoad(t, f.writers[:], id, http.StatusOK, http.StatusServiceUnavailable)
		l.await(t, 10)
		f.planes[0].Kill()
		killed := l.tally()
		l.await(t, killed[http.StatusOK]+10)
		l.stop()
		l.check(t, f.writers[1], f.gateways[1])
	})
}

// wakes: a wait held on plane B's gateway answers a send through plane A,
// five times, and logs how long after each send's acknowledgement (a
// figure, not asserted). Nothing polls:
// without the announcement the wait would hold for its 40 s, far past the
// generous bound.
func wakes(t *testing.T, f *fleet) {
	t.Helper()
	id := f.planes[0].Trial(t, rpc.ProfileCandidate)
	rd := reader(f.gateways[1], id)
	var all []time.Duration
	for round := range 5 {
		got := make(chan time.Time, 1)
		go func() {
			ms, err := rd.List(ctx(t), mailclient.Query{After: int64(round), Wait: 40 * time.Second})
			if err != nil || len(ms) != 1 {
				t.Errorf("wait on plane B: %d messages, %v", len(ms), err)
			}
			got <- time.Now()
		}()
		f.planes[1].WaitParked(t, "mail", 1)
		r, err := send(f.writers[0], id, "", fmt.Sprint("wake ", round))
		acked := time.Now()
		if err != nil || r.status != http.StatusOK {
			t.Fatalf("send through plane A: %+v %v", r, err)
		}
		select {
		case at := <-got:
			all = append(all, at.Sub(acked))
		case <-time.After(itest.Bound):
			t.Fatalf("round %d: a wait on plane B not woken within %v of the send through plane A", round, itest.Bound)
		}
	}
	slices.Sort(all)
	t.Logf("a wait on plane B answered %v after plane A acknowledged the send", all)
}

// sendSMTP sends one message through w's SMTP listener, authenticated
// with the trial's mail-API token, and returns the reply code (250: sent).
func sendSMTP(t *testing.T, w *itest.Surface, id rpc.Identity) int {
	t.Helper()
	c, err := smtp.Dial(w.SMTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	code := func(err error) int {
		var te *textproto.Error
		if errors.As(err, &te) {
			return te.Code
		}
		t.Fatalf("SMTP: %v", err)
		return 0
	}
	if err := c.Auth(smtp.PlainAuth("", "resend", id.MailAPIToken, "127.0.0.1")); err != nil {
		return code(err)
	}
	if err := c.Mail(rpc.CandidateSender); err != nil {
		return code(err)
	}
	if err := c.Rcpt("user@example.com"); err != nil {
		return code(err)
	}
	wc, err := c.Data()
	if err != nil {
		return code(err)
	}
	fmt.Fprintf(wc, "Subject: smtp\r\n\r\nhello\r\n")
	if err := wc.Close(); err != nil {
		return code(err)
	}
	c.Quit()
	return 250
}

func isStatus(err error, status int) bool {
	var e *mailclient.Error
	return errors.As(err, &e) && e.StatusCode == status
}

// load sends through writers by turns, each send with its own
// Idempotency-Key, until stopped, and keeps every answer.
type load struct {
	id      rpc.Identity
	allowed []int
	quit    chan struct{}
	wg      sync.WaitGroup

	mu    sync.Mutex
	keys  []string          // every key sent
	acked map[string]string // key → id, of sends answered 200
	count map[int]int       // answers by status
	bad   []string
}

// maxLoad keeps a load, and the keys it sends again, under the fleet's
// quota.
const maxLoad = 80

func startLoad(t *testing.T, writers []*itest.Surface, id rpc.Identity, allowed ...int) *load {
	l := &load{id: id, allowed: allowed, quit: make(chan struct{}), acked: map[string]string{}, count: map[int]int{}}
	for w := range 4 {
		l.wg.Go(func() {
			pause := time.Duration(0)
			for i := 0; ; i++ {
				select {
				case <-l.quit:
					return
				case <-time.After(pause):
				}
				l.mu.Lock()
				if len(l.acked) >= maxLoad {
					l.mu.Unlock()
					return
				}
				key := fmt.Sprintf("load-%d-%d", w, i)
				l.keys = append(l.keys, key)
				l.mu.Unlock()
				r, err := send(writers[(w+i)%len(writers)], id, key, key)
				l.mu.Lock()
				switch {
				case err != nil:
					l.bad = append(l.bad, fmt.Sprintf("%s: %v", key, err))
				case !slices.Contains(l.allowed, r.status):
					l.bad = append(l.bad, fmt.Sprintf("%s: %d %s", key, r.status, r.code))
				case r.status == http.StatusOK:
					l.acked[key] = r.id
				}
				// A client backs off after an outage.
				pause = 10 * time.Millisecond
				if err != nil || r.status != http.StatusOK {
					pause = 100 * time.Millisecond
				}
				l.count[r.status]++
				l.mu.Unlock()
			}
		})
	}
	t.Cleanup(l.stop)
	return l
}

func (l *load) tally() map[int]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.count)
}

// await waits until n sends in all have been acknowledged.
func (l *load) await(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for l.tally()[http.StatusOK] < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d sends acknowledged in 30s, want %d: answers %v", l.tally()[http.StatusOK], n, l.tally())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (l *load) stop() {
	select {
	case <-l.quit:
	default:
		close(l.quit)
	}
	l.wg.Wait()
}

// check: no answer was other than allowed; every key sent, sent again
// through w, is stored once (an acknowledged one under its first id); and
// g lists exactly one message a key.
func (l *load) check(t *testing.T, w, g *itest.Surface) {
	t.Helper()
	if len(l.bad) > 0 {
		t.Fatalf("answers other than %v: %v", l.allowed, l.bad)
	}
	for _, key := range l.keys {
		r, err := send(w, l.id, key, key)
		if err != nil || r.status != http.StatusOK {
			t.Fatalf("%s sent again: %+v %v", key, r, err)
		}
		if first, ok := l.acked[key]; ok && first != r.id {
			t.Fatalf("%s: acknowledged as %s, sent again as %s: stored twice", key, first, r.id)
		}
	}
	ms, err := reader(g, l.id).List(ctx(t), mailclient.Query{})
	if err != nil {
		t.Fatal(err)
	}
	subjects := map[string]int{}
	for _, m := range ms {
		subjects[m.Subject]++
	}
	for _, key := range l.keys {
		if subjects[key] != 1 {
			t.Fatalf("%s is stored %d times; want once", key, subjects[key])
		}
	}
	if len(ms) != len(l.keys) {
		t.Fatalf("%d messages for %d keys", len(ms), len(l.keys))
	}
	t.Logf("%d keys, %d acknowledged, answers %v", len(l.keys), len(l.acked), l.tally())
}
