package plane

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/ledger/sqlledger"
	"github.com/websitebench/mailplane/internal/peercred"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// socketPlane is a plane served on its Unix socket, as serve runs it.
type socketPlane struct {
	// closeStore closes the ledger (once: the test's cleanup closes it too).
	closeStore func()
	socket     string
	admin      string
	log        *itest.SyncBuffer
	http       *http.Client
}

func startSocketPlane(t *testing.T) *socketPlane {
	t.Helper()
	ctx := context.Background()
	l, err := sqlledger.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	closeStore := sync.OnceFunc(func() { l.Close() })
	t.Cleanup(closeStore)
	logs := &itest.SyncBuffer{}
	log := zerolog.New(logs)
	b := NewBroker(l, nil, Quotas{}, log)
	g, err := b.CreateGrant(ctx, &rpc.GrantCreateRequest{Role: rpc.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(t.TempDir(), "plane.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(b, peercred.Policy{}, 0, log)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}
	t.Cleanup(hc.CloseIdleConnections)
	return &socketPlane{closeStore: closeStore, socket: socket, admin: g.Grant, log: logs, http: hc}
}

// call posts body to method with the admin's grant and returns the status
// and the error code of the answer.
func (p *socketPlane) call(t *testing.T, method, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://plane/"+rpc.Version+"/"+method, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+p.admin)
	resp, err := p.http.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	var e rpc.Error
	if resp.StatusCode != http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || e.Code == "" {
			t.Fatalf("%s: status %d with no coded JSON error (%v)", method, resp.StatusCode, err)
		}
	}
	return resp.StatusCode, e.Code
}

// withMethod adds a row to the authorization table for one test: the
// test-only way to put a buggy handler behind the real server.
func withMethod(t *testing.T, name string, run func(*Broker, context.Context, caller, framing, []byte) (any, error)) {
	t.Helper()
	if _, ok := byMethod[name]; ok {
		t.Fatalf("method %s exists", name)
	}
	byMethod[name] = &row{method: name, who: map[principal]access{admin: {bind: bindPlane}}, call: handler{run: run}}
	t.Cleanup(func() { delete(byMethod, name) })
}

// TestErrorAnswers: over the plane's socket, a bad request is a 4xx
// refusal, a handler's bug (a plain error, a panic, an answer that does
// not encode) is 500 internal_error and logged without the request, and
// a store that is gone is 503 store_unavailable: never one for another.
func TestErrorAnswers(t *testing.T) {
	const secret = "mpc_secret_in_the_request"
	withMethod(t, "test.error", func(*Broker, context.Context, caller, framing, []byte) (any, error) {
		return nil, errors.New("the handler's own failure")
	})
	withMethod(t, "test.panic", func(*Broker, context.Context, caller, framing, []byte) (any, error) {
		var m map[string]int
		m["x"] = 1 // a nil map: a runtime error
		return nil, nil
	})
	withMethod(t, "test.panic-value", func(_ *Broker, _ context.Context, _ caller, _ framing, body []byte) (any, error) {
		panic(string(body)) // a value that holds the request: named by its type only
	})
	withMethod(t, "test.unencodable", func(*Broker, context.Context, caller, framing, []byte) (any, error) {
		return map[string]float64{"x": math.NaN()}, nil
	})
	p := startSocketPlane(t)

	cases := []struct {
		method, body string
		status       int
		code         string
		log          string // in the log line of the call
	}{
		{rpc.MethodTrialList, `{"after":`, http.StatusBadRequest, rpc.CodeBadRequest, ""},
		{rpc.MethodTrialInfo, `{"namespace":"../x"}`, http.StatusUnprocessableEntity, rpc.CodeInvalidNamespace, ""},
		{"test.error", `{"capability":"` + secret + `"}`, http.StatusInternalServerError, rpc.CodeInternal, "handler failed"},
		{"test.panic", `{"capability":"` + secret + `"}`, http.StatusInternalServerError, rpc.CodeInternal, "assignment to entry in nil map"},
		{"test.panic-value", `{"capability":"` + secret + `"}`, http.StatusInternalServerError, rpc.CodeInternal, "handler panicked"},
		{"test.unencodable", `{}`, http.StatusInternalServerError, rpc.CodeInternal, `"code":"internal_error"`},
		{rpc.MethodTrialList, `{}`, http.StatusOK, "", ""},
	}
	for _, c := range cases {
		before := len(p.log.String())
		status, code := p.call(t, c.method, c.body)
		if status != c.status || code != c.code {
			t.Errorf("%s %s: %d %q, want %d %q", c.method, c.body, status, code, c.status, c.code)
		}
		logged := p.log.String()[before:]
		if c.log != "" && !strings.Contains(logged, c.log) {
			t.Errorf("%s: the log does not say %q:\n%s", c.method, c.log, logged)
		}
		if c.status == http.StatusInternalServerError && !strings.Contains(logged, `"level":"error"`) {
			t.Errorf("%s: a bug is not logged as an error:\n%s", c.method, logged)
		}
	}
	if strings.Contains(p.log.String(), secret) || strings.Contains(p.log.String(), p.admin) {
		t.Errorf("a request's secret reached the log:\n%s", p.log.String())
	}

	// The store goes away: the handler's store call fails, an outage.
	p.closeStore()
	for m, body := range map[string]string{rpc.MethodTrialList: `{}`, rpc.MethodTrialCreate: `{"profile":"candidate"}`} {
		status, code := p.call(t, m, body)
		if status != http.StatusServiceUnavailable || code != rpc.CodeStoreUnavailable {
			t.Errorf("%s with the store closed: %d %q, want 503 %s", m, status, code, rpc.CodeStoreUnavailable)
		}
	}
	// A bad request is still a refusal, not an outage.
	if status, code := p.call(t, rpc.MethodTrialList, `[`); status != http.StatusBadRequest || code != rpc.CodeBadRequest {
		t.Errorf("a bad request with the store closed: %d %q, want 400", status, code)
	}
}
