package plane_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// FuzzRPCFrame writes arbitrary bytes to the socket of a running
// mail-plane binary: request lines, headers, framing (lengths, chunks,
// pipelining) and bodies. {WRITER}, {INBOX} and {GATEWAY} stand for
// trial A's writer and inbox grants and the gateway grant; {NS}, {CAP},
// {TOKEN} for A's namespace, read capability and mail-API token; {BNS}
// and {BCAP} for trial B's namespace and read capability. Whatever the
// bytes: every answer is well-formed HTTP; a refusal (a malformed head's
// too) is a JSON error with a known code and never a 500; A stores
// exactly as many messages as sends were answered with a seq; B, whose
// grants the input never holds, stores nothing.
func FuzzRPCFrame(f *testing.F) {
	call := func(method, grant, body string) string {
		return "POST /v1/" + method + " HTTP/1.1\r\nHost: p\r\nAuthorization: Bearer " + grant + "\r\nContent-Type: application/json\r\nContent-Length: " +
			itest.Itoa(len(body)) + "\r\n\r\n" + body
	}
	send := `{"via":"smtp","from":"` + rpc.CandidateSender + `","to":["a@example.com"]}` + "\nSubject: x\r\n\r\ny"
	for _, seed := range []string{
		call("send", "{WRITER}", send),
		call("send", "{WRITER}", send) + call("send", "{WRITER}", send),
		call("send", "{WRITER}", `{"via":"smtp-select","namespace":"{BNS}","credential":"{BCAP}","from":"a@b.c","to":["a@example.com"]}`+"\n"),
		call("send", "{WRITER}", `{"via":"http","credential":"{TOKEN}","from":"`+rpc.CandidateSender+`","to":["a@example.com"]}`+"\nx"),
		call("list", "{GATEWAY}", `{"namespace":"{BNS}","capability":"{CAP}"}`),
		call("list", "{INBOX}", `{"namespace":"{BNS}"}`),
		call("get", "{GATEWAY}", `{"namespace":"{NS}","capability":"{CAP}","id":1}`),
		call("latest", "{GATEWAY}", `{"namespace":"{NS}","capability":"{CAP}","wait_ms":1}`),
		call("trial.close", "{WRITER}", `{"namespace":"{BNS}"}`),
		call("health", "", `{}`),
		"POST /v1/send HTTP/1.1\r\nHost: p\r\nAuthorization: Bearer {WRITER}\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n0\r\n\r\n",
		"POST /v1/send HTTP/1.1\r\nHost: p\r\nAuthorization: Bearer {WRITER}\r\nContent-Length: 99999999\r\n\r\n",
		"GET /v2/send HTTP/1.0\r\n\r\n",
		"POST /v1/../v1/send HTTP/1.1\r\nHost: p\r\nContent-Length: 2\r\n\r\n{}",
	} {
		f.Add([]byte(seed))
	}
	f.Setenv("MAILPLANE_LOG_LEVEL", "warn") // a fuzz run makes millions of calls
	p := itest.StartPlane(f, "--quota-messages", "0", "--quota-bytes", "0", "--rpc-read-timeout", "2s")
	a := p.Trial(f, rpc.ProfileCandidate)
	b := p.Trial(f, rpc.ProfileCandidate)
	r := strings.NewReplacer("{WRITER}", a.WriterGrant, "{INBOX}", a.InboxGrant, "{GATEWAY}", p.GatewayGrant(f),
		"{NS}", a.Namespace, "{CAP}", a.ReadCapability, "{TOKEN}", a.MailAPIToken, "{BNS}", b.Namespace, "{BCAP}", b.ReadCapability)
	known := map[string]bool{}
	for _, c := range []string{rpc.CodeBadRequest, rpc.CodeUnsupportedVersion, rpc.CodeUnknownMethod, rpc.CodeFrameTooLarge,
		rpc.CodeUnauthenticated, rpc.CodePermissionDenied, rpc.CodeDeadlineExceeded, rpc.CodeInvalidNamespace, rpc.CodeForbidden,
		rpc.CodeRecipientForbidden, rpc.CodeNotFound, rpc.CodeUnauthorized, rpc.CodeInvalidCapability, rpc.CodeSealed,
		rpc.CodeInvalidEnvelope, rpc.CodeTooManyRecipients, rpc.CodeMessageTooLarge, rpc.CodeMailboxCapacity,
		rpc.CodeIdempotencyConflict, rpc.CodeConflict} {
		known[c] = true
	}
	count := func(t *testing.T, id rpc.Identity) int64 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ts, err := p.Admin.AllTrials(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range ts {
			if tr.Namespace == id.Namespace {
				return tr.Messages
			}
		}
		t.Fatalf("trial %s not listed", id.Namespace)
		return 0
	}

	f.Fuzz(func(t *testing.T, frame []byte) {
		frame = []byte(r.Replace(string(frame)))
		beforeA, beforeB := count(t, a), count(t, b)
		c, err := net.DialTimeout("unix", p.Socket, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		// The connection stays open for writing: the plane cancels a
		// waiting call whose caller half-closes (see TestCallerHalfCloses
		// in package hardening). The answers to read are those of the requests the
		// frame holds whole.
		go c.Write(frame)
		sent := 0
		br := bufio.NewReader(c)
		for range wholeRequests(frame) {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				break
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("answer %d: body: %v", resp.StatusCode, err)
			}
			if resp.StatusCode == http.StatusInternalServerError {
				t.Fatalf("500: %s", body)
			}
			if resp.StatusCode == http.StatusOK {
				var sr rpc.SendResponse
				if json.Unmarshal(body, &sr) == nil && sr.Seq > 0 && sr.Namespace == a.Namespace && !sr.Replayed {
					sent++
				}
				continue
			}
			if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("answer %d is not JSON: %q", resp.StatusCode, body)
			}
			var e rpc.Error
			if err := json.Unmarshal(body, &e); err != nil || !known[e.Code] {
				t.Fatalf("refusal %d with an unknown code: %q", resp.StatusCode, body)
			}
		}
		if got := count(t, a) - beforeA; got != int64(sent) {
			t.Fatalf("A stored %d messages, %d sends were answered", got, sent)
		}
		if got := count(t, b) - beforeB; got != 0 {
			t.Fatalf("B stored %d messages with no grant of its own", got)
		}
	})
}

// wholeRequests is how many complete requests frame holds, as net/http
// reads them.
func wholeRequests(frame []byte) int {
	br := bufio.NewReader(bytes.NewReader(frame))
	n := 0
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return n
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return n
		}
		n++
	}
}
