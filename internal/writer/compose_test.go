package writer

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/apierr"
	"github.com/websitebench/mailplane/internal/mailmsg"
)

func ptr(s string) *string { return &s }

// TestComposeReadsBack: what compose writes, mailmsg.Parse (the plane's
// reader) gives back exactly, whatever the text's line endings or bytes
// and whatever the subject's blanks, length or look-alike encoded-words.
func TestComposeReadsBack(t *testing.T) {
	cases := []struct {
		name          string
		subject, text string
		html          *string
		encoding      string // of the text part
	}{
		{"plain", "Sign-up", "Your code is 123456.", nil, "7bit"},
		{"crlf", "x", "a\r\nb\r\n", nil, "7bit"},
		{"lf only", "x", "a\nb\n", nil, "base64"},
		{"lone cr", "x", "a\rb", nil, "base64"},
		{"nul", "x", "a\x00b", nil, "base64"},
		{"utf-8", "Grüße 你好", "Grüße 你好", nil, "base64"},
		{"empty", "", "", nil, "7bit"},
		{"long line", "x", strings.Repeat("a", 999), nil, "base64"},
		{"998 line", "x", strings.Repeat("a", 998) + "\r\n" + strings.Repeat("b", 998), nil, "7bit"},
		{"dots", "x", ".\r\n..\r\n.x", nil, "7bit"},
		{"subject blanks", "  lead and trail  ", "t", nil, "7bit"},
		{"subject tab", "a\tb", "t", nil, "7bit"},
		{"subject encoded-word look-alike", "=?utf-8?q?x?=", "t", nil, "7bit"},
		{"subject 998 code points", strings.Repeat("é", 998), "t", nil, "7bit"},
		{"subject long ASCII", strings.Repeat("word ", 199), "t", nil, "7bit"},
		{"html", "x", "text part", ptr("<p>html part</p>"), "7bit"},
		{"html utf-8", "x", "texte", ptr("<p>été</p>"), "7bit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := &email{From: "s@example.com", To: []string{"u@example.com"}, Subject: c.subject, Text: &c.text, HTML: c.html}
			raw := compose(e, time.Unix(0, 0))
			p := mailmsg.Parse(raw)
			if p.Subject != c.subject {
				t.Errorf("subject %q, want %q", p.Subject, c.subject)
			}
			if p.Text != c.text && !(c.text == "" && c.html != nil) {
				t.Errorf("text %q, want %q", p.Text, c.text)
			}
			if c.html != nil && p.HTML != *c.html {
				t.Errorf("html %q, want %q", p.HTML, *c.html)
			}
			if !bytes.Contains(raw, []byte("Content-Transfer-Encoding: "+c.encoding+"\r\n\r\n")) {
				t.Errorf("text part not %s:\n%s", c.encoding, raw)
			}
			for i, line := range strings.Split(string(raw), "\r\n") {
				if len(line) > 998 {
					t.Errorf("line %d is %d bytes long", i, len(line))
				}
			}
		})
	}
}

// TestComposeHeaders: the writer's own headers, reply_to, tags and the
// sender's safe headers are there once each, and Bcc never is.
func TestComposeHeaders(t *testing.T) {
	e := &email{
		From: "s@example.com", To: []string{"a@example.com"}, Cc: []string{"c@example.com"}, Bcc: []string{"hidden@example.com"},
		ReplyTo: []string{`"Help Desk" <help@example.com>`}, Subject: "s", Text: ptr("t"),
		Tags:    []tag{{"category", "signup"}},
		Headers: []header{{"List-Unsubscribe", "<https://example.com/u>"}, {"X-Entity-Ref-ID", "42"}},
	}
	raw := compose(e, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	for name, want := range map[string]string{
		"Reply-To": `"Help Desk" <help@example.com>`, "X-Resend-Tag": "category=signup", "List-Unsubscribe": "<https://example.com/u>",
		"X-Entity-Ref-ID": "42", "Date": "Fri, 02 Jan 2026 03:04:05 +0000", "MIME-Version": "1.0",
	} {
		if got, _ := mailmsg.HeaderValue(raw, name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if id, _ := mailmsg.HeaderValue(raw, "Message-ID"); !strings.HasSuffix(id, "@websitebench.local>") {
		t.Errorf("Message-ID %q", id)
	}
	for _, name := range []string{"Bcc", "Cc"} {
		if _, ok := mailmsg.HeaderValue(raw, name); ok {
			t.Errorf("%s written", name)
		}
	}
	if bytes.Contains(raw, []byte("hidden@example.com")) {
		t.Error("a bcc address is in the message")
	}
}

// TestParseEmailValues covers the value rules that the table test against
// the binary does not: names, tags, headers, null.
func TestParseEmailValues(t *testing.T) {
	ok := `"from":"s@example.com","subject":"s","text":"t"`
	for _, c := range []struct {
		body string
		want *apierr.Error
	}{
		{`{` + ok + `,"to":"u@example.com"}`, nil},
		{`{` + ok + `,"to":"U <u@example.com>"}`, nil},
		{`{` + ok + `,"to":"\"Q, R\" <u@example.com>"}`, nil},
		{`{` + ok + `,"to":"<u@example.com>"}`, nil},
		{`{` + ok + `,"to":"a@example.com, b@example.com"}`, errTo},
		{`{` + ok + `,"to":"group: a@example.com;"}`, errTo},
		{`{` + ok + `,"to":"a@example.com (comment)"}`, errTo},
		{`{` + ok + `,"to":"u@example.com","cc":null,"bcc":null,"reply_to":null,"tags":null,"headers":null,"html":null}`, nil},
		{`{"from":null,"to":"u@example.com","subject":"s","text":"t"}`, errFrom},
		{`{"from":"s@example.com","to":"u@example.com","subject":"s","text":null}`, errBody}, // the reference: its key set, a wrong value
		{`{` + ok + `,"to":"u@example.com","reply_to":["a@example.com","B <b@example.com>"]}`, nil},
		{`{` + ok + `,"to":"u@example.com","reply_to":"not an address"}`, errReplyTo},
		{`{` + ok + `,"to":"u@example.com","tags":[{"name":"a_b-1","value":""}]}`, nil},
		{`{` + ok + `,"to":"u@example.com","tags":[{"value":"v"}]}`, errTags},
		{`{` + ok + `,"to":"u@example.com","tags":[{"name":"a","other":"v"}]}`, errTags},
		{`{` + ok + `,"to":"u@example.com","tags":[{"name":"` + strings.Repeat("a", 257) + `"}]}`, errTags},
		{`{` + ok + `,"to":"u@example.com","headers":{"X-Custom":"v","In-Reply-To":"<m@x>"}}`, nil},
		{`{` + ok + `,"to":"u@example.com","headers":{"x-a":"1","X-A":"2"}}`, errHeaders},
		{`{` + ok + `,"to":"u@example.com","headers":{"Subject":"v"}}`, errHeaders},
		{`{` + ok + `,"to":"u@example.com","headers":{"Content-Type":"text/html"}}`, errHeaders},
		{`{` + ok + `,"to":"u@example.com","headers":{"X-Tags":"v"}}`, errHeaders},
		{`{` + ok + `,"to":"u@example.com","headers":{"X-Resend-Tag":"v"}}`, errHeaders},
		{`{` + ok + `,"to":"u@example.com","headers":{"X-A":"é"}}`, errHeaders},
		{`{` + ok + `,"to":"u@example.com","headers":{"X A":"v"}}`, errHeaders},
		{`{` + ok + `,"to":"u@example.com","headers":{"X-A":1}}`, errHeaders},
		{`{` + ok + `,"to":"u@example.com","cc":"nope"}`, errCc},
		{`{` + ok + `,"to":"u@example.com","bcc":["nope"]}`, errBcc},
		{`{` + ok + `,"to":[]}`, errTo},
		{`{"from":"s@example.com","to":"u@example.com","subject":"a\nb","text":"t"}`, errSubject},
		{`{"from":"s@example.com","to":"u@example.com","subject":"s","text":1}`, errBody},
		{`{"from":"s@example.com","to":"u@example.com","subject":"\ud800","text":"t"}`, errSurrogate},
		{`{` + ok + `,"to":"u@example.com","attachments":{}}`, errAttachments},
	} {
		_, got := parseEmail([]byte(c.body), 16)
		if got != c.want {
			t.Errorf("%s: got %v, want %v", c.body, got, c.want)
		}
		if got != nil && (got.Code != "invalid_message" || got.Status != 400 || !strings.Contains(got.Message, " must be ")) {
			t.Errorf("%s: %+v: not invalid_message naming its field", c.body, got)
		}
	}
}

func TestLoneSurrogate(t *testing.T) {
	for body, want := range map[string]bool{
		`"\ud800"`:             true,
		`"\udfff"`:             true,
		`"a\ud83dx"`:           true,
		`"\ud83d\ude00"`:       false,
		`"\\ud800"`:            false, // an escaped backslash, then text
		`"\ud83d\u0041"`:       true,
		`{"\ud800":1}`:         true,
		`"\u00e9\\\ud800"`:     true,
		`["\ud83d\ude00","x"]`: false,
	} {
		if _, got, ok := decodeJSON([]byte(body)); !ok || got != want {
			t.Errorf("%s: %v (valid JSON %v), want %v", body, got, ok, want)
		}
	}
}
