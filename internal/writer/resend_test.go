package writer_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/resend/resend-go/v3"

	"github.com/websitebench/mailplane/internal/writer/writertest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// TestResendSDK: the official Resend Go SDK, pointed at the writer, sends
// (with its chunked bodies, html, cc, tags, headers and idempotency keys)
// and the plane then holds the message; its errors come back as Resend's.
func TestResendSDK(t *testing.T) {
	p, id, w := writertest.Setup(t, rpc.ProfileCandidate, "fixed", nil)
	client := resend.NewClient(id.MailAPIToken)
	base, err := url.Parse(w.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	client.BaseURL = base
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	req := &resend.SendEmailRequest{
		From:    "Website <" + rpc.CandidateSender + ">",
		To:      []string{"agent@example.com"},
		Cc:      []string{"cc@example.com"},
		Subject: "Confirm your account",
		Html:    `<p>Your code is <strong>314159</strong>.</p>`,
		Text:    "Your code is 314159.",
		ReplyTo: "support@example.com",
		Tags:    []resend.Tag{{Name: "category", Value: "confirm_email"}},
		Headers: map[string]string{"X-Entity-Ref-ID": "42"},
	}
	sent, err := client.Emails.SendWithContext(ctx, req)
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	if len(sent.Id) != 36 {
		t.Fatalf("id %q, want a UUID", sent.Id)
	}
	opts := &resend.SendEmailOptions{IdempotencyKey: "confirm-agent"}
	first, err := client.Emails.SendWithOptions(ctx, req, opts)
	if err != nil {
		t.Fatalf("send with a key: %v", err)
	}
	again, err := client.Emails.SendWithOptions(ctx, req, opts)
	if err != nil || again.Id != first.Id {
		t.Fatalf("repeat with the key: %v, id %q want %q", err, again.Id, first.Id)
	}
	other := *req
	other.Text = "another payload"
	if _, err := client.Emails.SendWithOptions(ctx, &other, opts); err == nil || !strings.Contains(err.Error(), "Same idempotency key") {
		t.Fatalf("conflicting repeat: %v", err)
	}

	msgs := writertest.Messages(t, p, id)
	if len(msgs) != 2 {
		t.Fatalf("%d messages held, want 2", len(msgs))
	}
	m := msgs[0]
	if m.Subject != req.Subject || m.Text != req.Text || m.HTML != req.Html || m.EnvelopeFrom != rpc.CandidateSender {
		t.Fatalf("held %+v", m)
	}
	if m.FromName != "Website" { // Resend's "Name <address>": the name is kept, as mail clients show it
		t.Fatalf("display name %q", m.FromName)
	}
	if strings.Join(m.Recipients, ",") != "agent@example.com,cc@example.com" {
		t.Fatalf("recipients %v", m.Recipients)
	}

	// Refusals reach the SDK with Resend's messages.
	bad := resend.NewClient("wrong-key")
	bad.BaseURL = base
	if _, err := bad.Emails.SendWithContext(ctx, req); err == nil || !strings.Contains(err.Error(), "API key is invalid") {
		t.Fatalf("wrong key: %v", err)
	}
	foreign := *req
	foreign.From = "someone@elsewhere.example"
	_, err = client.Emails.SendWithContext(ctx, &foreign)
	// The answer names the field and the pinned sender, which the
	// candidate's environment holds (WEBSITEBENCH_MAIL_FROM).
	if err == nil || !strings.Contains(err.Error(), "from must be "+rpc.CandidateSender+"; a display name is allowed") {
		t.Fatalf("foreign sender: %v", err)
	}
	var rl *resend.RateLimitError
	if errors.As(err, &rl) {
		t.Fatal("a validation error looked like a rate limit")
	}
}
