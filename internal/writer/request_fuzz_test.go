package writer_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/connlimit"
	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/sendapi/postmark"
	"github.com/websitebench/mailplane/internal/sendapi/sendgrid"
	"github.com/websitebench/mailplane/internal/sendapi/ses"
	"github.com/websitebench/mailplane/internal/writer"
	"github.com/websitebench/mailplane/internal/writer/writertest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// FuzzWriterRequest sends arbitrary bytes as HTTP requests (request line,
// headers, framing, pipelining, bodies) to the writer's real HTTP server,
// in front of a real plane. {TOKEN}, {BOOT} and {OTHER} in the input stand
// for the trial's mail-API token, its bootstrap token and another trial's
// mail-API token. Whatever the bytes: every answer is well-formed HTTP,
// never a 5xx while the plane is up, and every refusal is the writer's
// JSON error whose statusCode is the status or, where the input names a
// provider API's path, that provider's own refusal (providerRefusal); the
// trial stores exactly as
// many messages as POST /emails answered with an id; the other trial
// stores nothing.
func FuzzWriterRequest(f *testing.F) {
	body := `{"from":"` + rpc.CandidateSender + `","to":"u@example.com","subject":"s","text":"t"}`
	post := func(auth, extra, b string) string {
		return "POST /emails HTTP/1.1\r\nHost: x\r\nAuthorization: " + auth + "\r\nContent-Type: application/json\r\n" + extra +
			"Content-Length: " + itest.Itoa(len(b)) + "\r\n\r\n" + b
	}
	for _, seed := range []string{
		post("Bearer {TOKEN}", "", body),
		post("Bearer {TOKEN}", "Idempotency-Key: k1\r\n", body) + post("Bearer {TOKEN}", "Idempotency-Key: k1\r\n", body),
		post("Bearer {OTHER}", "", body),
		post("Bearer {BOOT}", "", body),
		post("bearer {TOKEN}", "", body),
		"POST /emails HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n4c\r\n" + body + "\r\n0\r\n\r\n",
		"GET /internal/bootstrap HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {BOOT}\r\n\r\n",
		"GET /healthz HTTP/1.0\r\n\r\n",
		"DELETE /emails HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /email%73 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
		"POST /emails HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\nContent-Length: 11\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nX: \x00\r\n\r\n",
	} {
		f.Add([]byte(seed))
	}
	p, id, other := writertest.TwoTrials(f, rpc.ProfileCandidate)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	h := writer.NewHandler(writer.Config{SMTPHost: "127.0.0.1", SMTPPort: 25}, p.Client(f, id.WriterGrant), zerolog.Nop())
	srv := writer.NewHTTPServer(h, 2*time.Second, 10*time.Second, zerolog.Nop())
	go srv.Serve(connlimit.Listen(ln, connlimit.Limits{MaxConns: 16, Lifetime: 10 * time.Second}))
	f.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()
	r := strings.NewReplacer("{TOKEN}", id.MailAPIToken, "{BOOT}", id.BootstrapToken, "{OTHER}", other.MailAPIToken)

	f.Fuzz(func(t *testing.T, req []byte) {
		req = []byte(r.Replace(string(req)))
		before, beforeOther := writertest.Count(t, p, id), writertest.Count(t, p, other)
		c := writertest.Exchange(t, addr, req, 20*time.Second)
		accepted := 0
		br := bufio.NewReader(c)
		for {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				break // the server closed the connection: after the last answer, or at once on garbage
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("answer %d: body: %v", resp.StatusCode, err)
			}
			var ans map[string]any
			isJSON := strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json")
			// net/http's own 501 and 505 (an unknown transfer coding or
			// protocol version) are plain text; the writer's 5xx is JSON.
			if resp.StatusCode >= 500 && (isJSON || (resp.StatusCode != 501 && resp.StatusCode != 505)) {
				t.Fatalf("answer %d with the plane up: %s", resp.StatusCode, b)
			}
			if isJSON {
				if err := json.Unmarshal(b, &ans); err != nil {
					t.Fatalf("answer %d: not JSON: %q", resp.StatusCode, b)
				}
			}
			switch {
			case resp.StatusCode == http.StatusOK && ans["id"] != nil:
				accepted++
			case resp.StatusCode >= 400 && providerRefusal(req, resp, ans, b):
			case resp.StatusCode >= 400 && isJSON:
				if code, _ := ans["error"].(string); code == "" || ans["statusCode"] != float64(resp.StatusCode) {
					t.Fatalf("refusal %d is not the writer's error: %s", resp.StatusCode, b)
				}
			case resp.StatusCode >= 400 && !bytes.Contains(b, []byte("Bad Request")) && resp.StatusCode != 431 && resp.StatusCode != 505 && resp.StatusCode != 501:
				t.Fatalf("refusal %d from neither the writer nor net/http: %q", resp.StatusCode, b)
			}
		}
		// Replayed idempotent requests answer an id but store nothing new.
		if got := writertest.Count(t, p, id) - before; got > int64(accepted) {
			t.Fatalf("%d messages stored, %d accepted", got, accepted)
		}
		if accepted > 0 && !bytes.Contains(bytes.ToLower(req), []byte("idempotency")) && writertest.Count(t, p, id)-before != int64(accepted) {
			t.Fatalf("%d accepted without idempotency keys, %d stored", accepted, writertest.Count(t, p, id)-before)
		}
		if n := writertest.Count(t, p, other); n != beforeOther {
			t.Fatalf("the other trial received %d", n-beforeOther)
		}
	})
}

// providerRefusal reports whether an answer is the refusal of a provider
// API (package sendapi) whose path the input names: each answers in its
// own shape, not the writer's (a Postmark-shaped 401 on /email is right).
func providerRefusal(req []byte, resp *http.Response, ans map[string]any, b []byte) bool {
	names := func(path string) bool { return bytes.Contains(req, []byte(path)) }
	_, postmarkCode := ans["ErrorCode"].(float64)
	sendgridErrors, _ := ans["errors"].([]any)
	message, _ := ans["message"].(string)
	switch {
	case names(postmark.PathEmail) && postmarkCode && ans["Message"] != nil:
		return true
	case names(sendgrid.Path) && len(sendgridErrors) > 0:
		return true
	case names(ses.Path) && resp.Header.Get("X-Amzn-ErrorType") != "" && message != "":
		return true
	case names("/v3/") && message != "": // Mailgun's JSON refusal
		return true
	case names("/v3/") && resp.StatusCode == http.StatusUnauthorized && string(b) == "Forbidden": // Mailgun's 401 is plain text
		return true
	}
	return false
}
