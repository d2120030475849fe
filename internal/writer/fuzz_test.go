package writer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/mailmsg"
	"github.com/websitebench/mailplane/internal/writer"
	"github.com/websitebench/mailplane/internal/writer/writertest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// FuzzEmailBody posts arbitrary bodies and idempotency keys to the writer's
// handler, in front of a real plane. Whatever the input: the answer is one
// of the writer's own, a refusal changes nothing in the plane, an accepted
// message is stored once, and what is stored reads back as it was sent.
func FuzzEmailBody(f *testing.F) {
	for _, seed := range []string{
		bodyOf(valid()),
		bodyOf(with("text", nil, "html", "<p>code <b>1234</b></p>")),
		bodyOf(with("to", []any{"a@example.com", "B <b@example.com>"}, "cc", "c@example.com", "bcc", []any{"d@example.com"})),
		bodyOf(with("subject", "  =?utf-8?q?x?= ", "text", "a\r\nb\nc\rd\x00")),
		bodyOf(with("headers", map[string]any{"X-A": "1", "List-Unsubscribe": "<https://x.example/u>"}, "tags", []any{map[string]any{"name": "n", "value": "v"}})),
		bodyOf(with("reply_to", []any{"Help <help@example.com>"})),
		`{"from":"` + sender + `","to":"u@example.com","subject":"\ud800","text":"x"}`,
		`{"from":"x","from":"` + sender + `","to":"u@example.com","subject":"s","text":"t"}`,
		`[]`, `{}`, ``, "\ufeff{}",
	} {
		f.Add([]byte(seed), "")
	}
	f.Add([]byte(bodyOf(valid())), "key-1")

	p := itest.StartPlane(f, "--quota-messages", "0", "--quota-bytes", "0")
	id := p.Trial(f, rpc.ProfileCandidate)
	h := writer.NewHandler(writer.Config{SMTPHost: "127.0.0.1", SMTPPort: 25}, p.Client(f, id.WriterGrant), zerolog.Nop())
	gateway := p.Client(f, p.GatewayGrant(f))
	replies := map[string]string{} // idempotency key → first id
	known := map[string]bool{"": true, "unauthorized": true, "application_json_required": true, "content_length_required": true,
		"message_too_large": true, "incomplete_request": true, "invalid_json": true, "invalid_message_fields": true,
		"invalid_message": true, "invalid_idempotency_key": true, "invalid_idempotent_request": true,
		"attachment_path_unsupported": true, "scheduling_unsupported": true}

	f.Fuzz(func(t *testing.T, body []byte, key string) {
		before := writertest.Count(t, p, id)
		req := httptest.NewRequest(http.MethodPost, "/emails", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+id.MailAPIToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Content-Length", strconv.Itoa(len(body)))
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var ans map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil {
			t.Fatalf("answer is not JSON: %q", rec.Body.String())
		}
		code, _ := ans["error"].(string)
		if !known[code] || (code == "") != (rec.Code == 200) || rec.Header().Get("Cache-Control") != "no-store" {
			t.Fatalf("unexpected answer %d %s", rec.Code, rec.Body.String())
		}
		after := writertest.Count(t, p, id)
		if rec.Code != 200 {
			if after != before {
				t.Fatalf("a refusal (%s) stored %d messages", code, after-before)
			}
			return
		}
		if first, ok := replies[key]; ok && key != "" {
			if ans["id"] != first || after != before {
				t.Fatalf("idempotent repeat: id %v (first %s), stored %d", ans["id"], first, after-before)
			}
			return
		}
		if key != "" {
			replies[key], _ = ans["id"].(string)
		}
		if after != before+1 {
			t.Fatalf("an accepted message stored %d", after-before)
		}
		var sent map[string]any
		json.Unmarshal(body, &sent)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m, err := gateway.Latest(ctx, &rpc.ReadRequest{Namespace: id.Namespace, Capability: id.ReadCapability})
		if err != nil {
			t.Fatal(err)
		}
		text, _ := sent["text"].(string)
		html, hasHTML := sent["html"].(string)
		if text == "" {
			// A reader gets text derived from the html when there is no
			// text to show (mailmsg.Parse).
			text = mailmsg.HTMLText(html)
		}
		if m.Subject != sent["subject"] || m.Text != text || (hasHTML && m.HTML != html) {
			t.Fatalf("stored %q / %q / %q, sent %q / %q / %q", m.Subject, m.Text, m.HTML, sent["subject"], text, html)
		}
	})
}
