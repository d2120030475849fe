package fleet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
	const quota = 100
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
		id := f.planes[0].Trial(t, rpc.ProfileCandidate)
		rd := reader(f.gateways[1], id)
		var worst time.Duration
		var all []time.Duration
		for round := range 5 {
			got := make(chan time.Time, 1)
			go func() {
				ms, err := rd.List(ctx(t), mailclient.Query{After: int64(round), Wait: 20 * time.Second})
				if err != nil || len(ms) != 1 {
					t.Errorf("wait on plane B: %d messages, %v", len(ms), err)
				}
				got <- time.Now()
			}()
			time.Sleep(300 * time.Millisecond) // the wait is held on plane B
			r, err := send(f.writers[0], id, "", fmt.Sprint("wake ", round))
			acked := time.Now()
			if err != nil || r.status != http.StatusOK {
				t.Fatalf("send through plane A: %+v %v", r, err)
			}
			woke := (<-got).Sub(acked)
			worst = max(worst, woke)
			all = append(all, woke)
		}
		t.Logf("a wait on plane B answered %v after plane A acknowledged the send", all)
		if worst > 50*time.Millisecond {
			t.Fatalf("a wait on plane B answered %v after the send through plane A; want under 50 ms", worst)
		}
	})
}
