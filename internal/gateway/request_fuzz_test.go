package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	gatewaypkg "github.com/websitebench/mailplane/internal/gateway"
	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/mailclient"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// FuzzGatewayRequest sends arbitrary paths, queries and Authorization
// values to the gateway's handler, in front of a real plane holding two
// trials. {NSA}, {CAPA}, {NSB} and {CAPB} in the input stand for their
// namespaces and read capabilities. Whatever the request: the answer is
// never a 500; a refusal is the gateway's JSON error; and a 200 with mail
// in it was asked with exactly "Bearer " and the read capability of the
// namespace whose mail it shows, and shows no other namespace's mail.
func FuzzGatewayRequest(f *testing.F) {
	for _, s := range [][3]string{
		{"/api/namespaces/{NSA}/messages", "", "Bearer {CAPA}"},
		{"/api/namespaces/{NSA}/messages", "", "Bearer {CAPB}"},
		{"/api/namespaces/{NSB}/messages/latest", "recipient=seed@example.com&after=0", "Bearer {CAPB}"},
		{"/api/namespaces/{NSA}/messages/1", "", "bearer {CAPA}"},
		{"/api/namespaces/%7BNSA%7D/messages", "wait=1ms", "Bearer {CAPA} "},
		{"//api//namespaces/{NSB}/messages//", "recipient=&recipient=SEED@example.com", "Bearer {CAPB}"},
		{"/inbox/{NSA}", "", "Bearer {CAPA}"},
		{"/inbox/{NSB}/messages/0001", "", "Bearer {CAPA}"},
		{"/healthz", "", ""},
		{"/api/namespaces/{NSA}{NSB}/messages", "", "Bearer {CAPA}{CAPB}"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	p := itest.StartPlane(f, "--quota-messages", "0", "--quota-bytes", "0")
	a, b := p.Trial(f, rpc.ProfileCandidate), p.Trial(f, rpc.ProfileCandidate)
	seed := map[string]string{}
	for _, id := range []rpc.Identity{a, b} {
		seed[id.Namespace] = "seed of " + id.Namespace
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := p.Client(f, id.WriterGrant).Send(ctx, &rpc.SendRequest{Via: rpc.ViaSMTP, From: rpc.CandidateSender,
			To: []string{"seed@example.com"}, Raw: []byte("Subject: " + seed[id.Namespace] + "\r\n\r\nx")})
		cancel()
		if err != nil {
			f.Fatal(err)
		}
	}
	g := gatewaypkg.New(p.Client(f, p.GatewayGrant(f)), zerolog.Nop())
	r := strings.NewReplacer("{NSA}", a.Namespace, "{CAPA}", a.ReadCapability, "{NSB}", b.Namespace, "{CAPB}", b.ReadCapability)
	opens := map[string]string{"Bearer " + a.ReadCapability: a.Namespace, "Bearer " + b.ReadCapability: b.Namespace}

	f.Fuzz(func(t *testing.T, path, query, auth string) {
		path, query, auth = r.Replace(path), r.Replace(query), r.Replace(auth)
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		u, err := url.Parse("http://gateway" + path)
		if err != nil || u.Host != "gateway" {
			return
		}
		u.RawQuery = query
		// A wait holds a request for up to a minute: the fuzzer's patience
		// is shorter, and an ended wait answers 503.
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		req := (&http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}, Host: "gateway"}).WithContext(ctx)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, req)
		body := rec.Body.String()
		switch status := rec.Code; {
		case status >= 500 && status != http.StatusServiceUnavailable:
			t.Fatalf("%d for %q ? %q: %s", status, path, query, body)
		case status >= 400:
			var e mailclient.Error
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Code == "" || e.StatusCode != status {
				t.Fatalf("refusal %d is not the gateway's error: %q", status, body)
			}
		case u.Path == "/healthz":
		default:
			ns, ok := opens[auth]
			if !ok {
				t.Fatalf("200 for %q with Authorization %q, which opens nothing", path, auth)
			}
			for other, subject := range seed {
				if other != ns && strings.Contains(body, subject) {
					t.Fatalf("asked with %s's capability, shown mail of %s", ns, other)
				}
			}
		}
	})
}
