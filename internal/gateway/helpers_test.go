package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// gateway is a running mail-gateway in front of a running plane.
type gateway = itest.Surface

// startGateway runs mail-gateway with the plane's gateway grant, exactly
// with the flags mail-plane up passes (plus a port of its own).
func startGateway(t testing.TB, plane *itest.Plane) *gateway {
	t.Helper()
	return itest.StartGateway(t, plane)
}

// sender delivers test mail straight into the plane with a trial's writer
// grant, as mail-writer would after accepting it.
type sender struct {
	c  *rpc.Client
	id rpc.Identity
}

func newSender(t testing.TB, plane *itest.Plane, id rpc.Identity) *sender {
	return &sender{c: plane.Client(t, id.WriterGrant), id: id}
}

// send stores a text/plain message and returns the plane's answer.
func (s *sender) send(t testing.TB, to []string, subject, body string) rpc.SendResponse {
	t.Helper()
	return s.sendRaw(t, to, "Subject: "+subject+"\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"+body)
}

func (s *sender) sendRaw(t testing.TB, to []string, raw string) rpc.SendResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := s.c.Send(ctx, &rpc.SendRequest{Via: rpc.ViaSMTP, From: rpc.CandidateSender, To: to, Raw: []byte(raw)})
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	return r
}

// answer is one HTTP answer, read whole.
type answer struct {
	status int
	header http.Header
	body   string
}

// json decodes the body into a generic value, failing the test if it is
// not JSON.
func (a answer) json(t testing.TB) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(a.body), &v); err != nil {
		t.Fatalf("answer %d is not a JSON object: %v\n%s", a.status, err, a.body)
	}
	return v
}

var client = &http.Client{
	Timeout:       90 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// do sends method url with an optional Authorization header value.
func do(t testing.TB, method, url, auth string) answer {
	t.Helper()
	ans, err := try(method, url, auth)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return ans
}

// try is do for goroutines other than the test's.
func try(method, url, auth string) (answer, error) {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return answer{}, err
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}, nil
}

func get(t testing.TB, url, capability string) answer {
	t.Helper()
	return do(t, http.MethodGet, url, "Bearer "+capability)
}
