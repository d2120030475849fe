package inboximap

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap"
	"github.com/emersion/go-message/mail"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// TestReadsBody: which FETCH items read a message's content (an open)
// and which only its header, size, structure or flags.
func TestReadsBody(t *testing.T) {
	for items, want := range map[string]bool{
		"FLAGS UID RFC822.SIZE INTERNALDATE ENVELOPE BODYSTRUCTURE BODY": false,
		"BODY.PEEK[HEADER]":                  false,
		"BODY.PEEK[HEADER.FIELDS (SUBJECT)]": false,
		"BODY[HEADER.FIELDS.NOT (TO)]":       false,
		"RFC822.HEADER":                      false,
		"BODY[]":                             true,
		"BODY.PEEK[]":                        true,
		"BODY.PEEK[TEXT]":                    true,
		"BODY[1]":                            true,
		"BODY[2.MIME]":                       true, // a part's own header: counted, to be safe
		"BODY.PEEK[]<0.10>":                  true,
		"RFC822":                             true,
		"RFC822.TEXT":                        true,
		"FLAGS BODY.PEEK[HEADER] BODY.PEEK[TEXT]": true,
	} {
		var fi []imap.FetchItem
		for _, f := range strings.Fields(strings.ReplaceAll(items, "FIELDS (", "FIELDS(")) {
			fi = append(fi, imap.FetchItem(strings.ReplaceAll(f, "FIELDS(", "FIELDS (")))
		}
		if got := readsBody(fi); got != want {
			t.Errorf("readsBody(%s) = %v, want %v", items, got, want)
		}
	}
}

// TestEntity: the message a client is given says what the plane shows
// (sender, recipients, subject, arrival, text and HTML) and nothing a
// sender's bytes could add: a subject or name with line breaks stays one
// header; the parts decode to the text and HTML as stored.
func TestEntity(t *testing.T) {
	m := rpc.Message{ID: 7, UUID: "3f7f3de6-55ad-4e52-b071-3fa2d797be7e", EnvelopeFrom: "no-reply@site.example",
		FromName: "Site\r\nBcc: victim@example.com", Recipients: []string{"agent@example.com"},
		Subject: "Your code\r\nX-Injected: yes", Text: "Code: 424242\nA line of " + strings.Repeat("long ", 40) + "text.\n",
		HTML: "<p>Code: <b>424242</b></p>", Received: time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)}
	raw := entity(&m)
	if !bytes.Equal(raw, entity(&m)) {
		t.Fatal("the same message is given as different bytes")
	}
	r, err := mail.CreateReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	h := r.Header
	subject, _ := h.Subject()
	from, _ := h.AddressList("From")
	to, _ := h.AddressList("To")
	date, _ := h.Date()
	if subject != "Your code  X-Injected: yes" || len(from) != 1 || from[0].Address != "no-reply@site.example" || from[0].Name != "Site  Bcc: victim@example.com" ||
		len(to) != 1 || to[0].Address != "agent@example.com" || !date.Equal(m.Received) || h.Get("X-Injected") != "" || h.Get("Bcc") != "" {
		t.Fatalf("header: subject %q from %v to %v date %v\n%s", subject, from, to, date, raw)
	}
	var parts []string
	for {
		p, err := r.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(p.Body)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, string(b))
	}
	if len(parts) != 2 || parts[0] != strings.ReplaceAll(m.Text, "\n", "\r\n") || parts[1] != m.HTML {
		t.Fatalf("parts %q", parts)
	}
	for _, line := range strings.Split(string(raw), "\r\n") {
		if len(line) > 998 {
			t.Fatalf("a line of %d bytes", len(line))
		}
	}
}
