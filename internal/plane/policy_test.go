package plane

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/peercred"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// goldenPolicy is the table as pinned: what the isolation matrix expects.
const goldenPolicy = "testdata/policy.json"

// TestPolicyGolden: the live table is the golden one. A row changes with
// its golden file, in the same commit (make policy rewrites it).
func TestPolicyGolden(t *testing.T) {
	want, err := os.ReadFile(goldenPolicy)
	if err != nil {
		t.Fatal(err)
	}
	if got := Policy().JSON(); !bytes.Equal(got, want) {
		t.Fatalf("the policy table differs from %s: review the change and regenerate it\n--- live:\n%s", goldenPolicy, got)
	}
	var p PolicyTable
	if err := json.Unmarshal(want, &p); err != nil || len(p.Methods) != len(table) {
		t.Fatalf("%s does not decode into %d rows: %v", goldenPolicy, len(table), err)
	}
}

// TestClientWaitBounds: the client's wait bound of each method (pkg/rpc,
// which cannot import the plane) is the table's.
func TestClientWaitBounds(t *testing.T) {
	for _, r := range table {
		if got := rpc.WaitBound(r.method); got != r.waits {
			t.Errorf("rpc.WaitBound(%s) = %v, the table's waits column says %v", r.method, got, r.waits)
		}
	}
}

// TestProfilesKeyTheirAPI: the token a profile's providers are handed
// (its apiToken) is the first secret its write credentials are keyed by
// for it, so the SES secret is made from the token that opens its API.
func TestProfilesKeyTheirAPI(t *testing.T) {
	for _, p := range profiles {
		for _, cr := range []*credential{writeCred, authCred} {
			if ks := cr.keys[p.name]; len(ks) == 0 || ks[0] != p.apiToken {
				t.Errorf("profile %s: its API token is %s, but %s is keyed first by %v", p.name, p.apiToken, cr.name, ks)
			}
		}
	}
}

// TestReadersHaveViews: every principal of a row whose handler reads mail
// or a trail reads it through a view of its row, and no other row gives
// one (a view is what load, stillOpen and the read's event apply).
func TestReadersHaveViews(t *testing.T) {
	reading := map[string]bool{rpc.MethodList: true, rpc.MethodGet: true, rpc.MethodLatest: true,
		rpc.MethodClick: true, rpc.MethodFlag: true, rpc.MethodEvents: true}
	for _, r := range table {
		for p, a := range r.who {
			if (a.view != nil) != reading[r.method] {
				t.Errorf("%s: %s reads through %v", r.method, p, a.view)
			}
		}
	}
}

// TestCallDeadlines: a call that does not wait has callLimit (15 s), a
// waiting one callLimit plus its row's wait, as docs/rpc.md says; a
// caller's earlier deadline is kept, a later one is cut.
func TestCallDeadlines(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, r := range table {
		want := now.Add(15 * time.Second)
		if r.waits > 0 {
			want = want.Add(rpc.MaxWait)
		}
		if got := callDeadline(now, nil, r.waits); !got.Equal(want) {
			t.Errorf("%s: deadline %v after its start, want %v", r.method, got.Sub(now), want.Sub(now))
		}
		sooner := now.Add(2 * time.Second)
		if got := callDeadline(now, []byte(sooner.Format(time.RFC3339Nano)), r.waits); !got.Equal(sooner) {
			t.Errorf("%s: the caller's deadline 2 s on became %v", r.method, got.Sub(now))
		}
		if got := callDeadline(now, []byte(now.Add(time.Hour).Format(time.RFC3339Nano)), r.waits); !got.Equal(want) {
			t.Errorf("%s: the caller's deadline an hour on became %v", r.method, got.Sub(now))
		}
	}
}

// TestPeerBeforeMethod: over the socket, a peer that no role admits is
// refused as unauthenticated whatever it calls, a method that does not
// exist included: nothing it sent is looked at first.
func TestPeerBeforeMethod(t *testing.T) {
	ctx := context.Background()
	l := openLedger(t)
	b := NewBroker(l, nil, Quotas{}, zerolog.Nop())
	g, err := b.CreateGrant(ctx, &rpc.GrantCreateRequest{Role: rpc.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	nobody := peercred.Policy{}
	for _, role := range rpc.RoleNames {
		nobody[role] = peercred.Rule{UIDs: []uint32{uint32(os.Getuid()) + 4242}}
	}
	socket := filepath.Join(t.TempDir(), "plane.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(b, nobody, 0, zerolog.Nop())
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
	t.Cleanup(hc.CloseIdleConnections)
	for _, path := range []string{"/v1/no.such.method", "/v1/" + rpc.MethodTrialList, "/v0/" + rpc.MethodHealth} {
		req, err := http.NewRequest(http.MethodPost, "http://plane"+path, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+g.Grant)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e rpc.Error
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || e.Code != rpc.CodeUnauthenticated {
			t.Errorf("%s from a peer no role admits: %d %q, want 401 %s", path, resp.StatusCode, e.Code, rpc.CodeUnauthenticated)
		}
	}
	// Not even its head is read: a head the plane would refuse as
	// malformed gets the same answer.
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(c, "NOT A HEAD\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
		t.Errorf("a malformed head from a peer no role admits: %d, close %v; want 401 and the connection closed", resp.StatusCode, resp.Close)
	}
}

// TestEveryKindIsRefused: every kind of credential a selector can name
// has its row in credentials, with a refusal (refusal would otherwise
// answer a bug), and every credential a row accepts is that row.
func TestEveryKindIsRefused(t *testing.T) {
	for k := credNone; k <= credOperator; k++ {
		if cr := credentials[k]; cr == nil || cr.refused == nil || cr.kind != k {
			t.Errorf("credential kind %d has no refusal: %+v", k, cr)
		}
	}
	for _, r := range table {
		for _, cr := range r.accepts {
			if credentials[cr.kind] != cr {
				t.Errorf("%s accepts a credential of kind %d that credentials does not hold", r.method, cr.kind)
			}
		}
	}
}
