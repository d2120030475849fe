package writer_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/mailmsg"
	"github.com/websitebench/mailplane/internal/writer/writertest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

const sender = rpc.CandidateSender

// answer is one HTTP answer of the writer.
type answer struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
	closed bool // the server said Connection: close
}

func (a answer) code() string { s, _ := a.body["error"].(string); return s }

// roundTrip writes req as bytes to addr (half-closing the connection when
// halfClose) and reads one answer.
func roundTrip(t testing.TB, addr, req string, halfClose bool) answer {
	t.Helper()
	c := writertest.Dial(t, addr)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	if halfClose {
		c.(*net.TCPConn).CloseWrite()
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to %.60q: %v", req, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, raw: string(b), closed: resp.Close}
	json.Unmarshal(b, &a.body)
	return a
}

// post builds a raw POST with the given headers (a map value "" omits the
// header) and body; Content-Length is the body's unless headers set it.
func post(path string, headers map[string]string, body string) string {
	h := map[string]string{"Host": "writer", "Content-Type": "application/json", "Content-Length": strconv.Itoa(len(body))}
	for k, v := range headers {
		h[k] = v
	}
	var b strings.Builder
	b.WriteString("POST " + path + " HTTP/1.1\r\n")
	for k, v := range h {
		if v != "" {
			b.WriteString(k + ": " + v + "\r\n")
		}
	}
	b.WriteString("Connection: close\r\n\r\n")
	b.WriteString(body)
	return b.String()
}

func bodyOf(v map[string]any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func valid() map[string]any {
	return map[string]any{"from": sender, "to": "user@example.com", "subject": "Sign-up", "text": "Your code is 246810."}
}

func with(kv ...any) map[string]any {
	m := valid()
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(m, kv[i].(string))
		} else {
			m[kv[i].(string)] = kv[i+1]
		}
	}
	return m
}

// TestEmailsCheckTable is docs/reference.md §5's check table, row by row, against
// the running writer, with docs/reference.md §13's fixes. Every refusal is a JSON
// answer with Resend's fields, says no-store, and stores nothing.
func TestEmailsCheckTable(t *testing.T) {
	p, id, w := writertest.Setup(t, rpc.ProfileCandidate, "fixed", nil)
	addr := strings.TrimPrefix(w.URL, "http://")
	tok := "Bearer " + id.MailAPIToken
	auth := map[string]string{"Authorization": tok}
	h := func(kv ...string) map[string]string {
		m := map[string]string{"Authorization": tok}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	long := func(n int) string { return strings.Repeat("a", n-len("@example.com")) + "@example.com" }
	recipients := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = fmt.Sprintf("r%d@example.com", i)
		}
		return out
	}
	cases := []struct {
		name      string
		req       string
		halfClose bool
		status    int
		code      string // "" = success
		resend    string // Resend error name, when checked
	}{
		// 1: path exactly /emails, no query; checked before anything else.
		{"1 trailing slash", post("/emails/", auth, bodyOf(valid())), false, 404, "not_found", "not_found"},
		{"1 query", post("/emails?x=1", auth, bodyOf(valid())), false, 404, "not_found", ""},
		{"1 case", post("/Emails", auth, bodyOf(valid())), false, 404, "not_found", ""},
		{"1 escaped", post("/email%73", auth, bodyOf(valid())), false, 404, "not_found", ""},
		{"1 fragment", post("/emails#x", auth, bodyOf(valid())), false, 404, "not_found", ""},
		{"1 before auth", post("/emails/", nil, "x"), false, 404, "not_found", ""},
		// 2: Bearer = mail-API token.
		{"2 missing", post("/emails", nil, bodyOf(valid())), false, 401, "unauthorized", "missing_api_key"},
		{"2 lowercase bearer", post("/emails", h("Authorization", "bearer "+id.MailAPIToken), bodyOf(valid())), false, 401, "unauthorized", ""},
		{"2 bare token", post("/emails", h("Authorization", id.MailAPIToken), bodyOf(valid())), false, 401, "unauthorized", ""},
		{"2 bootstrap token", post("/emails", h("Authorization", "Bearer "+id.BootstrapToken), bodyOf(valid())), false, 401, "unauthorized", "invalid_api_key"},
		{"2 read capability", post("/emails", h("Authorization", "Bearer "+id.ReadCapability), bodyOf(valid())), false, 401, "unauthorized", ""},
		{"2 non-ASCII (quirk 3)", post("/emails", h("Authorization", "Bearer \xc3\xa9t\xc3\xa9"), bodyOf(valid())), false, 401, "unauthorized", ""},
		{"2 before media type", post("/emails", h("Authorization", "Bearer wrong", "Content-Type", "text/plain"), "x"), false, 401, "unauthorized", ""},
		{"2 before JSON", post("/emails", h("Authorization", "Bearer wrong"), "{"), false, 401, "unauthorized", ""},
		{"2 before length", post("/emails", h("Authorization", "Bearer wrong", "Content-Length", "1048577"), ""), false, 401, "unauthorized", ""},
		// 3: media type application/json, parameters and case ignored.
		{"3 text/plain", post("/emails", h("Content-Type", "text/plain"), bodyOf(valid())), false, 415, "application_json_required", "validation_error"},
		{"3 jsonx", post("/emails", h("Content-Type", "application/jsonx"), bodyOf(valid())), false, 415, "application_json_required", ""},
		{"3 missing", post("/emails", h("Content-Type", ""), bodyOf(valid())), false, 415, "application_json_required", ""},
		{"3 params and case", post("/emails", h("Content-Type", " Application/JSON ; charset=utf-8"), bodyOf(valid())), false, 200, "", ""},
		// 4: a length is required; chunked is accepted (Resend's SDKs send it).
		{"4 missing", strings.Replace(post("/emails", auth, ""), "Content-Length: 0\r\n", "", 1), false, 411, "content_length_required", ""},
		{"4 chunked", strings.Replace(post("/emails", auth, ""), "Content-Length: 0\r\n", "Transfer-Encoding: chunked\r\n", 1) +
			fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(bodyOf(valid())), bodyOf(valid())), false, 200, "", ""},
		// 5: at most 1 MiB, refused before the body is read.
		{"5 over 1 MiB", post("/emails", h("Content-Length", "1048577"), ""), false, 413, "message_too_large", ""},
		{"5 chunked over 1 MiB", strings.Replace(post("/emails", auth, ""), "Content-Length: 0\r\n", "Transfer-Encoding: chunked\r\n", 1) +
			fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", 1<<20+1, strings.Repeat(" ", 1<<20+1)), false, 413, "message_too_large", ""},
		// 6: the whole body must arrive.
		{"6 short body", post("/emails", h("Content-Length", "100"), `{"from":`), true, 400, "incomplete_request", ""},
		// 7: UTF-8 JSON.
		{"7 invalid UTF-8", post("/emails", auth, `{"from":"`+sender+`","to":"u@example.com","subject":"\xff","text":"x"}`), false, 400, "invalid_json", ""},
		{"7 BOM", post("/emails", auth, "\ufeff"+bodyOf(valid())), false, 400, "invalid_json", ""},
		{"7 empty", post("/emails", auth, ""), false, 400, "invalid_json", ""},
		{"7 trailing garbage", post("/emails", auth, bodyOf(valid())+"x"), false, 400, "invalid_json", ""},
		{"7 duplicate keys: last wins", post("/emails", auth, `{"from":"x","to":"u@example.com","subject":"s","text":"t","from":"`+sender+`"}`), false, 200, "", ""},
		// 8: an object with the supported keys.
		{"8 array", post("/emails", auth, `[]`), false, 400, "invalid_message_fields", ""},
		{"8 string", post("/emails", auth, `"x"`), false, 400, "invalid_message_fields", ""},
		{"8 extra key", post("/emails", auth, bodyOf(with("foo", 1))), false, 400, "invalid_message_fields", ""},
		{"8 attachments, none", post("/emails", auth, bodyOf(with("attachments", []any{}))), false, 200, "", ""},
		{"8 attachment by path", post("/emails", auth, bodyOf(with("attachments", []any{map[string]any{"filename": "a.pdf", "path": "https://example.com/a.pdf"}}))), false, 422, "attachment_path_unsupported", "validation_error"},
		{"8 scheduled_at", post("/emails", auth, bodyOf(with("scheduled_at", "2030-01-01T00:00:00Z"))), false, 422, "scheduling_unsupported", "validation_error"},
		{"8 scheduled_at null", post("/emails", auth, bodyOf(with("scheduled_at", nil))), false, 200, "", ""},
		{"8 no text nor html", post("/emails", auth, bodyOf(with("text", nil))), false, 400, "invalid_message_fields", ""},
		{"8 no subject", post("/emails", auth, bodyOf(with("subject", nil))), false, 400, "invalid_message_fields", ""},
		// 9, 10: values.
		{"9 other sender", post("/emails", auth, bodyOf(with("from", "site@reference.example"))), false, 400, "invalid_message", "validation_error"},
		{"9 sender case", post("/emails", auth, bodyOf(with("from", "No-Reply@candidate.websitebench.local"))), false, 400, "invalid_message", ""},
		{"9 sender with display name", post("/emails", auth, bodyOf(with("from", "Site <"+sender+">"))), false, 200, "", ""},
		{"9 from not a string", post("/emails", auth, bodyOf(with("from", 7))), false, 400, "invalid_message", ""},
		{"9 subject 998", post("/emails", auth, bodyOf(with("subject", strings.Repeat("é", 998)))), false, 200, "", ""},
		{"9 subject 999", post("/emails", auth, bodyOf(with("subject", strings.Repeat("é", 999)))), false, 400, "invalid_message", ""},
		{"9 subject LF", post("/emails", auth, bodyOf(with("subject", "a\nb"))), false, 400, "invalid_message", ""},
		{"9 subject CR", post("/emails", auth, bodyOf(with("subject", "a\rb"))), false, 400, "invalid_message", ""},
		{"9 empty subject and text", post("/emails", auth, bodyOf(with("subject", "", "text", ""))), false, 200, "", ""},
		{"9 text not a string", post("/emails", auth, bodyOf(with("text", []any{}))), false, 400, "invalid_message", ""},
		{"9 to list of 16, duplicates", post("/emails", auth, bodyOf(with("to", append(recipients(15), "r0@example.com")))), false, 200, "", ""},
		{"9 to 17", post("/emails", auth, bodyOf(with("to", recipients(17)))), false, 400, "invalid_message", ""},
		{"9 to+cc+bcc 17", post("/emails", auth, bodyOf(with("to", recipients(8), "cc", recipients(8), "bcc", "x@example.com"))), false, 400, "invalid_message", ""},
		{"9 to empty list", post("/emails", auth, bodyOf(with("to", []any{}))), false, 400, "invalid_message", ""},
		{"9 to empty string", post("/emails", auth, bodyOf(with("to", ""))), false, 400, "invalid_message", ""},
		{"9 to 320 chars", post("/emails", auth, bodyOf(with("to", long(320)))), false, 200, "", ""},
		{"9 to 321 chars", post("/emails", auth, bodyOf(with("to", long(321)))), false, 400, "invalid_message", ""},
		{"9 to without @", post("/emails", auth, bodyOf(with("to", "user.example.com"))), false, 400, "invalid_message", ""},
		{"9 to with CRLF", post("/emails", auth, bodyOf(with("to", "u@example.com\r\nBcc: x@example.com"))), false, 400, "invalid_message", ""},
		{"9 to a number", post("/emails", auth, bodyOf(with("to", []any{1}))), false, 400, "invalid_message", ""},
		{"9 to mixed case kept", post("/emails", auth, bodyOf(with("to", "Mixed.Case@Example.COM"))), false, 200, "", ""},
		{"9 to display name (quirk 14)", post("/emails", auth, bodyOf(with("to", "Alice <alice2@example.com>"))), false, 200, "", ""},
		{"9 to comma list (quirk 14)", post("/emails", auth, bodyOf(with("to", "c1@example.com,c2@example.com"))), false, 400, "invalid_message", ""},
		{"10 lone surrogate in text", post("/emails", auth, `{"from":"`+sender+`","to":"u@example.com","subject":"s","text":"a\ud800b"}`), false, 400, "invalid_message", ""},
		{"10 lone low surrogate in subject", post("/emails", auth, `{"from":"`+sender+`","to":"u@example.com","subject":"\udc00","text":"t"}`), false, 400, "invalid_message", ""},
		{"10 surrogate pair", post("/emails", auth, `{"from":"`+sender+`","to":"u@example.com","subject":"\ud83d\ude00","text":"t"}`), false, 200, "", ""},
		// 12: Idempotency-Key.
		{"12 key 256", post("/emails", h("Idempotency-Key", strings.Repeat("k", 256)), bodyOf(valid())), false, 200, "", ""},
		{"12 key 257", post("/emails", h("Idempotency-Key", strings.Repeat("k", 257)), bodyOf(valid())), false, 400, "invalid_idempotency_key", "invalid_idempotency_key"},
		{"12 key empty", post("/emails", h("Idempotency-Key", " "), bodyOf(valid())), false, 400, "invalid_idempotency_key", ""},
		{"12 after values", post("/emails", h("Idempotency-Key", " "), bodyOf(with("to", ""))), false, 400, "invalid_message", ""},
		// Resend's superset.
		{"html only", post("/emails", auth, bodyOf(with("text", nil, "html", "<p>Code <b>1234</b></p>"))), false, 200, "", ""},
		{"cc bcc reply_to tags headers", post("/emails", auth, bodyOf(with(
			"cc", "cc@example.com", "bcc", []any{"bcc@example.com"}, "reply_to", "Help <help@example.com>",
			"tags", []any{map[string]any{"name": "category", "value": "signup"}},
			"headers", map[string]any{"X-Entity-Ref-ID": "123", "List-Unsubscribe": "<https://example.com/u>"}))), false, 200, "", ""},
		{"optional null", post("/emails", auth, bodyOf(with("cc", nil, "html", nil))+""), false, 200, "", ""},
		{"unsafe header", post("/emails", auth, bodyOf(with("headers", map[string]any{"From": "evil@example.com"}))), false, 400, "invalid_message", ""},
		{"plane header", post("/emails", auth, bodyOf(with("headers", map[string]any{"X-WebsiteBench-Namespace": "other"}))), false, 400, "invalid_message", ""},
		{"header value CRLF", post("/emails", auth, bodyOf(with("headers", map[string]any{"X-A": "a\r\nBcc: x@example.com"}))), false, 400, "invalid_message", ""},
		{"bad tag", post("/emails", auth, bodyOf(with("tags", []any{map[string]any{"name": "a b"}}))), false, 400, "invalid_message", ""},
	}
	t.Cleanup(func() {
		for _, secret := range []string{id.MailAPIToken, id.BootstrapToken, id.WriteCapability, id.WriterGrant} {
			if strings.Contains(w.Output(), secret) {
				t.Error("a secret reached the writer's log")
			}
		}
	})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := writertest.Count(t, p, id)
			a := roundTrip(t, addr, c.req, c.halfClose)
			if a.status != c.status || a.code() != c.code {
				t.Fatalf("got %d %q, want %d %q; body %s", a.status, a.code(), c.status, c.code, a.raw)
			}
			if a.header.Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control = %q", a.header.Get("Cache-Control"))
			}
			if !strings.HasPrefix(a.header.Get("Content-Type"), "application/json") {
				t.Errorf("Content-Type = %q", a.header.Get("Content-Type"))
			}
			after := writertest.Count(t, p, id)
			if c.code == "" {
				if id, _ := a.body["id"].(string); len(id) != 36 {
					t.Errorf("id = %q, want a UUID", id)
				}
				if after != before+1 {
					t.Errorf("stored %d messages, want 1", after-before)
				}
				return
			}
			if after != before {
				t.Errorf("a refusal stored %d messages", after-before)
			}
			if a.body["statusCode"] != float64(c.status) || a.body["name"] == "" || a.body["message"] == "" {
				t.Errorf("not Resend's error shape: %s", a.raw)
			}
			if c.resend != "" && a.body["name"] != c.resend {
				t.Errorf("name = %v, want %s", a.body["name"], c.resend)
			}
			if strings.Contains(a.raw, id.MailAPIToken) || strings.Contains(a.raw, id.BootstrapToken) {
				t.Errorf("a secret in the answer: %s", a.raw)
			}
		})
	}
}

// TestMalformedLength: a Content-Length that is not a number is an HTTP
// framing error; net/http answers 400 and closes, as RFC 9112 §6.3
// requires (the reference answered 411 / 413). Nothing is stored.
func TestMalformedLength(t *testing.T) {
	p, id, w := writertest.Setup(t, rpc.ProfileCandidate, "fixed", nil)
	addr := strings.TrimPrefix(w.URL, "http://")
	for _, cl := range []string{"abc", "-1", "+5", "1, 2"} {
		a := roundTrip(t, addr, post("/emails", map[string]string{"Authorization": "Bearer " + id.MailAPIToken, "Content-Length": cl}, "hello"), false)
		if a.status != 400 || !a.closed {
			t.Errorf("Content-Length %q: %d (close %v), want 400 and close", cl, a.status, a.closed)
		}
	}
	if n := writertest.Count(t, p, id); n != 0 {
		t.Errorf("stored %d", n)
	}
}

// TestStoredAsSent: what a reader gets back through the plane is exactly
// what was posted (quirk 16 fixed): text byte for byte with its own line
// endings, the subject with its blanks, the recipients in envelope order.
func TestStoredAsSent(t *testing.T) {
	p, id, w := writertest.Setup(t, rpc.ProfileCandidate, "fixed", nil)
	cases := []map[string]any{
		with("text", "Your code is 123456."),
		with("text", "crlf\r\nlines\r\n"),
		with("text", "lf\nonly\n\nand a lone\rcr"),
		with("text", "", "subject", ""),
		with("text", "Grüße, 你好 — ١٢٣٤ \x00 tab\there", "subject", "  Grüße =?utf-8?q?x?= trailing  "),
		with("text", ".\r\n..\r\n.leading dots\r\n", "subject", strings.Repeat("long subject ", 76)),
		with("text", strings.Repeat("x", 2000), "subject", strings.Repeat("é", 998)),
		with("text", "plain part", "html", "<p>html part</p>"),
		with("text", nil, "html", `<p>Hi,</p><p>your code: <b>778899</b> <a href="https://example.com/v?c=1">verify</a></p>`),
		with("to", []any{"b@example.com", "Alice <a@example.com>"}, "cc", "c@example.com", "bcc", []any{"d@example.com", "b@example.com"}),
	}
	for i, c := range cases {
		resp := postJSON(t, w.URL, id.MailAPIToken, bodyOf(c), nil)
		if resp.status != 200 {
			t.Fatalf("case %d: %d %s", i, resp.status, resp.raw)
		}
	}
	msgs := writertest.Messages(t, p, id)
	if len(msgs) != len(cases) {
		t.Fatalf("%d messages stored, want %d", len(msgs), len(cases))
	}
	for i, c := range cases {
		m := msgs[i]
		if m.Subject != c["subject"] {
			t.Errorf("case %d: subject %q, want %q", i, m.Subject, c["subject"])
		}
		wantText, _ := c["text"].(string)
		if html, ok := c["html"].(string); ok {
			if m.HTML != html {
				t.Errorf("case %d: html %q, want %q", i, m.HTML, html)
			}
			if _, hasText := c["text"]; !hasText {
				wantText = mailmsg.HTMLText(html)
				if !strings.Contains(wantText, "778899") || !strings.Contains(wantText, "https://example.com/v?c=1") {
					t.Errorf("derived text lost the code or link: %q", wantText)
				}
			}
		}
		if m.Text != wantText {
			t.Errorf("case %d: text %q, want %q", i, m.Text, wantText)
		}
		if m.EnvelopeFrom != sender {
			t.Errorf("case %d: envelope_from %q", i, m.EnvelopeFrom)
		}
	}
	if got := strings.Join(msgs[len(msgs)-1].Recipients, " "); got != "b@example.com a@example.com c@example.com d@example.com b@example.com" {
		t.Errorf("recipients %q: want to, cc, bcc in order", got)
	}
}

// httpAnswer is a parsed answer of a normal client request.
func postJSON(t testing.TB, base, token, body string, headers map[string]string) answer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/emails", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return do(t, req)
}

func do(t testing.TB, req *http.Request) answer {
	t.Helper()
	resp, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, raw: string(b)}
	json.Unmarshal(b, &a.body)
	return a
}

func get(t testing.TB, url, token string) answer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return do(t, req)
}

// TestIdempotency: Resend's rules. The same key and payload answer the
// first id and store nothing, even after the quota is full; the same key
// with another payload is 409; the quota itself is 429.
func TestIdempotency(t *testing.T) {
	p, id, w := writertest.Setup(t, rpc.ProfileCandidate, "fixed", []string{"--quota-messages", "2"})
	key := map[string]string{"Idempotency-Key": "signup-42"}
	first := postJSON(t, w.URL, id.MailAPIToken, bodyOf(valid()), key)
	if first.status != 200 {
		t.Fatalf("first: %d %s", first.status, first.raw)
	}
	// The same payload spelled differently is the same request.
	again := postJSON(t, w.URL, id.MailAPIToken, `{"text":"Your code is 246810.","subject":"Sign-up","to":["user@example.com"],"from":"`+sender+`"}`, key)
	if again.status != 200 || again.body["id"] != first.body["id"] {
		t.Fatalf("repeat: %d %s, want the first id %v", again.status, again.raw, first.body["id"])
	}
	conflict := postJSON(t, w.URL, id.MailAPIToken, bodyOf(with("text", "another")), key)
	if conflict.status != 409 || conflict.code() != "invalid_idempotent_request" || conflict.body["name"] != "invalid_idempotent_request" {
		t.Fatalf("conflict: %d %s", conflict.status, conflict.raw)
	}
	if postJSON(t, w.URL, id.MailAPIToken, bodyOf(valid()), nil).status != 200 {
		t.Fatal("second message refused")
	}
	full := postJSON(t, w.URL, id.MailAPIToken, bodyOf(valid()), nil)
	if full.status != 429 || full.code() != "mailbox_capacity" {
		t.Fatalf("over quota: %d %s", full.status, full.raw)
	}
	late := postJSON(t, w.URL, id.MailAPIToken, bodyOf(valid()), key)
	if late.status != 200 || late.body["id"] != first.body["id"] {
		t.Fatalf("repeat after the quota: %d %s", late.status, late.raw)
	}
	if n := writertest.Count(t, p, id); n != 2 {
		t.Fatalf("%d stored, want 2", n)
	}
}

// TestBootstrap: GET /internal/bootstrap hands the write coordinates to
// the bootstrap token only, with the bound SMTP port, and its capability
// writes (and only writes).
func TestBootstrap(t *testing.T) {
	p, id, w := writertest.Setup(t, rpc.ProfileCandidate, "fixed", nil)
	a := get(t, w.URL+"/internal/bootstrap?ignored=1", id.BootstrapToken)
	if a.status != 200 || a.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("bootstrap: %d %s", a.status, a.raw)
	}
	want := map[string]any{"capability": id.WriteCapability, "namespace": id.Namespace, "smtp_host": "127.0.0.1", "smtp_port": float64(w.SMTPPort)}
	for k, v := range want {
		if a.body[k] != v {
			t.Errorf("%s = %v, want %v", k, a.body[k], v)
		}
	}
	if len(a.body) != 4 {
		t.Errorf("keys: %v", a.body)
	}
	for name, tok := range map[string]string{"mail-API token": id.MailAPIToken, "read capability": id.ReadCapability, "none": "", "wrong": "x"} {
		if a := get(t, w.URL+"/internal/bootstrap", tok); a.status != 403 || a.code() != "forbidden" {
			t.Errorf("%s: %d %s", name, a.status, a.raw)
		}
	}
	// The capability writes...
	if a := postJSON(t, w.URL, id.WriteCapability, bodyOf(valid()), nil); a.status != 200 {
		t.Fatalf("POST with the bootstrap capability: %d %s", a.status, a.raw)
	}
	// ...and reads nothing: the plane refuses it as a read capability.
	gw := p.Client(t, p.GatewayGrant(t))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := gw.List(ctx, &rpc.ReadRequest{Namespace: id.Namespace, Capability: id.WriteCapability}); rpc.CodeOf(err) != rpc.CodeForbidden {
		t.Fatalf("reading with the write capability: %v, want forbidden", err)
	}
	for _, path := range []string{"/", "/emails", "/api/namespaces/" + id.Namespace + "/messages"} {
		if a := get(t, w.URL+path, id.MailAPIToken); a.status != 404 || a.code() != "not_found" {
			t.Errorf("GET %s: %d %s", path, a.status, a.raw)
		}
	}
}

// TestMethods: anything but GET and POST is 405 with Allow, as JSON.
func TestMethods(t *testing.T) {
	_, id, w := writertest.Setup(t, rpc.ProfileCandidate, "fixed", nil)
	for _, c := range []struct{ method, path, allow string }{
		{"PUT", "/emails", "POST"}, {"DELETE", "/emails", "POST"}, {"HEAD", "/healthz", "GET"},
		{"PATCH", "/internal/bootstrap", "GET"}, {"OPTIONS", "/other", "GET, POST"},
	} {
		req, _ := http.NewRequest(c.method, w.URL+c.path, nil)
		req.Header.Set("Authorization", "Bearer "+id.MailAPIToken)
		a := do(t, req)
		if a.status != 405 || a.header.Get("Allow") != c.allow || a.header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s %s: %d Allow %q", c.method, c.path, a.status, a.header.Get("Allow"))
		}
		if c.method != "HEAD" && a.code() != "method_not_allowed" {
			t.Errorf("%s %s: %s", c.method, c.path, a.raw)
		}
	}
	// POST elsewhere is the reference's 404.
	if a := roundTrip(t, strings.TrimPrefix(w.URL, "http://"), post("/healthz", nil, "{}"), false); a.status != 404 {
		t.Errorf("POST /healthz: %d", a.status)
	}
}

// TestSiteMode is docs/reference.md §4.4: on a sidecar trial the bootstrap token
// writes, any valid sender is accepted, and bootstrap hands out the read
// capability (the reference's contract for that profile).
func TestSiteMode(t *testing.T) {
	p, id, w := writertest.Setup(t, rpc.ProfileSidecar, "select", nil)
	if a := postJSON(t, w.URL, id.BootstrapToken, bodyOf(with("from", "site@reference.example")), nil); a.status != 200 {
		t.Fatalf("bootstrap token: %d %s", a.status, a.raw)
	}
	if a := postJSON(t, w.URL, id.MailAPIToken, bodyOf(valid()), nil); a.status != 401 {
		t.Fatalf("mail-API token on a sidecar trial: %d %s", a.status, a.raw)
	}
	if a := postJSON(t, w.URL, id.BootstrapToken, bodyOf(with("from", "not an address")), nil); a.status != 400 || a.code() != "invalid_message" {
		t.Fatalf("bad sender: %d %s", a.status, a.raw)
	}
	b := get(t, w.URL+"/internal/bootstrap", id.BootstrapToken)
	if b.status != 200 || b.body["capability"] != id.ReadCapability || b.body["namespace"] != id.Namespace {
		t.Fatalf("sidecar bootstrap: %d %s", b.status, b.raw)
	}
	if msgs := writertest.Messages(t, p, id); len(msgs) != 1 || msgs[0].EnvelopeFrom != "site@reference.example" {
		t.Fatalf("stored: %+v", msgs)
	}

	// The sender policy is the trial's: a site trial created with one
	// allowed sender refuses the others, by policy.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pinned, err := p.Admin.TrialCreate(ctx, &rpc.TrialCreateRequest{Profile: rpc.ProfileAuthoring, AllowedSenders: []string{"site@reference.example"}})
	if err != nil {
		t.Fatal(err)
	}
	pw := writertest.Start(t, p, pinned, "select")
	if a := postJSON(t, pw.URL, pinned.BootstrapToken, bodyOf(with("from", "site@reference.example")), nil); a.status != 200 {
		t.Fatalf("allowed sender: %d %s", a.status, a.raw)
	}
	if a := postJSON(t, pw.URL, pinned.BootstrapToken, bodyOf(with("from", "other@reference.example")), nil); a.status != 400 || a.code() != "invalid_message" {
		t.Fatalf("other sender: %d %s", a.status, a.raw)
	}
}

// TestSealedAndDestroyed: a sealed trial's writer refuses by policy (403,
// never 503); a destroyed trial's credentials are dead (401).
func TestSealedAndDestroyed(t *testing.T) {
	p, id, w := writertest.Setup(t, rpc.ProfileCandidate, "fixed", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Admin.TrialSeal(ctx, id.Namespace); err != nil {
		t.Fatal(err)
	}
	if a := postJSON(t, w.URL, id.MailAPIToken, bodyOf(valid()), nil); a.status != 403 || a.code() != "mailbox_sealed" {
		t.Fatalf("sealed: %d %s", a.status, a.raw)
	}
	// A bad body on a sealed trial is still judged as a bad body.
	if a := postJSON(t, w.URL, id.MailAPIToken, "{", nil); a.status != 400 || a.code() != "invalid_json" {
		t.Fatalf("sealed, bad body: %d %s", a.status, a.raw)
	}
	if err := p.Admin.TrialClose(ctx, id.Namespace); err != nil {
		t.Fatal(err)
	}
	if a := postJSON(t, w.URL, id.MailAPIToken, bodyOf(valid()), nil); a.status != 401 {
		t.Fatalf("destroyed: %d %s", a.status, a.raw)
	}
	if a := get(t, w.URL+"/internal/bootstrap", id.BootstrapToken); a.status != 403 {
		t.Fatalf("destroyed bootstrap: %d %s", a.status, a.raw)
	}
	if a := get(t, w.URL+"/healthz", ""); a.status != 503 {
		t.Fatalf("healthz with a revoked grant: %d", a.status)
	}
}

// TestTooLargeAfterEncoding: a body under the limit whose message is over
// it (quirk 2: 800 000 "=" need base64) is a 413 answer, not a dropped
// connection.
func TestTooLargeAfterEncoding(t *testing.T) {
	p, id, w := writertest.Setup(t, rpc.ProfileCandidate, "fixed", nil)
	a := postJSON(t, w.URL, id.MailAPIToken, bodyOf(with("text", strings.Repeat("=", 800000)+"\n")), nil)
	if a.status != 413 || a.code() != "message_too_large" {
		t.Fatalf("%d %s", a.status, a.raw)
	}
	if n := writertest.Count(t, p, id); n != 0 {
		t.Fatalf("stored %d", n)
	}
}

// TestConnectionLimits: a 17th connection is closed at once, an idle one
// after --idle-timeout, a trickling one after --connection-lifetime.
func TestConnectionLimits(t *testing.T) {
	_, id, w := writertest.Setup(t, rpc.ProfileCandidate, "fixed", nil, "--idle-timeout", "1s", "--connection-lifetime", "3s")
	addr := strings.TrimPrefix(w.URL, "http://")
	// The writer accepts in order, so the 17th connection is accepted
	// after the 16 held ones, whatever its load. It sends a request: a
	// connection closed over the cap answers nothing, one served answers
	// at once, so the read waits for either, never for a timer. A held
	// connection reaches the idle bound (1s) if the writer stalls that
	// long before it accepts the 17th, which is then served within the
	// cap: that round shows nothing and is tried again.
	for round := 1; ; round++ {
		var held []net.Conn
		for range 16 {
			held = append(held, writertest.Dial(t, addr))
		}
		extra := writertest.Dial(t, addr)
		io.WriteString(extra, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		extra.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := extra.Read(make([]byte, 1))
		heldClosed := anyClosed(held)
		closeAndWait(append(held, extra))
		if n != 0 || err == nil || isTimeout(err) {
			if heldClosed && round < 3 {
				continue
			}
			t.Fatalf("17th connection: read %d, %v; want closed at once", n, err)
		}
		break
	}

	idle := writertest.Dial(t, addr)
	start := time.Now()
	idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	idle.Read(make([]byte, 1))
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("idle connection lived %v, want about 1s", d)
	}

	// A body trickled a byte at a time never goes idle; the lifetime ends
	// it. (A wrong credential's body is not read at all: TestCredentialBeforeBody.)
	trickle := writertest.Dial(t, addr)
	start = time.Now()
	io.WriteString(trickle, "POST /emails HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+id.MailAPIToken+"\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
	done := make(chan struct{})
	go func() {
		defer close(done)
		trickle.SetReadDeadline(time.Now().Add(10 * time.Second))
		io.Copy(io.Discard, trickle)
	}()
	for {
		select {
		case <-done:
		case <-time.After(300 * time.Millisecond):
			io.WriteString(trickle, "a")
			continue
		}
		break
	}
	if d := time.Since(start); d < 2*time.Second || d > 8*time.Second {
		t.Fatalf("trickling connection lived %v, want about 3s", d)
	}
	// The writer still serves.
	itest.WaitHTTP(t, w.URL+"/healthz", 200, w.Proc)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// anyClosed reports whether the writer has closed any of conns.
func anyClosed(conns []net.Conn) bool {
	closed := false
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
			closed = true
		}
	}
	return closed
}

// closeAndWait ends conns and waits until the writer has closed each,
// so that their places under the cap are free again.
func closeAndWait(conns []net.Conn) {
	for _, c := range conns {
		c.(*net.TCPConn).CloseWrite()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		io.Copy(io.Discard, c)
		c.Close()
	}
}

// TestCommandLine: configuration errors exit 2 (a service manager must not
// restart-loop on them); SIGTERM stops the writer with 0.
func TestCommandLine(t *testing.T) {
	p := itest.StartPlane(t)
	id := p.Trial(t, rpc.ProfileCandidate)
	grant := itest.WriteSecret(t, "writer.grant", id.WriterGrant)
	listen := func() []string {
		return []string{"--http-listen", "127.0.0.1:" + itest.Itoa(itest.FreePort(t)), "--smtp-listen", "127.0.0.1:" + itest.Itoa(itest.FreePort(t))}
	}
	base := []string{"--plane-socket", p.Socket, "--grant-file", grant}
	for name, args := range map[string][]string{
		"bad mode":      append(append(append([]string{}, base...), listen()...), "--smtp-mode", "nope"),
		"no listen":     base,
		"no grant":      append([]string{"--plane-socket", p.Socket, "--grant-file", "/nonexistent/writer.grant"}, listen()...),
		"bad listen":    append(append([]string{}, base...), "--http-listen", "fd:1", "--smtp-listen", "127.0.0.1:0"),
		"zero limit":    append(append(append([]string{}, base...), listen()...), "--idle-timeout", "0s"),
		"negative cap":  append(append(append([]string{}, base...), listen()...), "--max-connections", "-1"),
		"unknown flag":  append(append(append([]string{}, base...), listen()...), "--nope"),
		"bad log level": append(append([]string{"--log-level", "loud"}, base...), listen()...),
	} {
		proc := itest.Start(t, "mail-writer", args...)
		select {
		case <-proc.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: still running", name)
		}
		if code := proc.Cmd.ProcessState.ExitCode(); code != 2 {
			t.Errorf("%s: exit %d, want 2\n%s", name, code, proc.Output())
		}
	}
	w := writertest.Start(t, p, id, "fixed")
	if code := w.Stop(t); code != 0 {
		t.Fatalf("SIGTERM: exit %d\n%s", code, w.Output())
	}
}

// TestCredentialBeforeBody: a wrong credential, on every API whose
// credential is in the headers, is answered at once with its 401 and
// Connection: close while its declared body never comes, and with
// Expect: 100-continue gets no 100; the trial's own credential is told
// 100 Continue, and its body is read.
func TestCredentialBeforeBody(t *testing.T) {
	_, id, w := writertest.Setup(t, rpc.ProfileCandidate, "fixed", nil)
	addr := strings.TrimPrefix(w.URL, "http://")
	basic := func(tok string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte("api:"+tok)) }
	for _, c := range []struct{ path, header, value string }{
		{"/emails", "Authorization", "Bearer "},
		{"/emails/batch", "Authorization", "Bearer "},
		{"/v3/mail/send", "Authorization", "Bearer "},
		{"/email", "X-Postmark-Server-Token", ""},
		{"/v3/example.com/messages", "Authorization", "basic"},
	} {
		for _, good := range []bool{false, true} {
			tok := "re_wrong" + strings.Repeat("x", 20)
			if good {
				tok = id.MailAPIToken
			}
			value := c.value + tok
			if c.value == "basic" {
				value = basic(tok)
			}
			conn := writertest.Dial(t, addr)
			start := time.Now()
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\n%s: %s\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n",
				c.path, c.header, value, 1000)
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("%s good=%v: %v", c.path, good, err)
			}
			resp.Body.Close()
			if good {
				if resp.StatusCode != http.StatusContinue {
					t.Errorf("%s with the trial's credential: %d before the body, want 100 Continue", c.path, resp.StatusCode)
				}
				continue
			}
			if d := time.Since(start); resp.StatusCode != http.StatusUnauthorized || !resp.Close || d > 2*time.Second {
				t.Errorf("%s with a wrong credential: %d, close %v, after %v; want 401 and close, at once", c.path, resp.StatusCode, resp.Close, d)
			}
		}
	}
}
