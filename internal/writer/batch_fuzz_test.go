package writer

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/mailmsg"
)

// FuzzBatchBody: any POST /emails/batch body, in either mode, is either
// refused with one of the writer's own answers or split into 1 to 100
// emails each of which is valid or named in the errors, never both; every
// valid email composes to a message whose text reads back as sent.
func FuzzBatchBody(f *testing.F) {
	one := `{"from":"s@example.com","to":"u@example.com","subject":"s","text":"t"}`
	for _, seed := range []string{
		"[" + one + "]",
		"[" + one + "," + one + "]",
		`[{"from":"s@example.com","to":["a@example.com","B <b@example.com>"],"subject":"x","html":"<b>1234</b>"},{"to":"bad"}]`,
		`[{"from":"s@example.com","to":"u@example.com","subject":"s","text":"t","attachments":[{"filename":"a","content":"aGk="}]}]`,
		`[{"from":"s@example.com","to":"u@example.com","subject":"s","text":"t","scheduled_at":"tomorrow"}]`,
		`[]`, `{}`, `[1,"x",null]`, `[[]]`, ``, `[` + one,
	} {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	known := map[string]bool{"invalid_json": true, "invalid_message_fields": true, "invalid_batch": true}
	f.Fuzz(func(t *testing.T, body []byte, permissive bool) {
		items, fail := splitBatch(body)
		if fail != nil {
			if !known[fail.Code] || fail.Status/100 != 4 {
				t.Fatalf("split: unexpected refusal %+v", fail)
			}
			return
		}
		if len(items) == 0 || len(items) > maxBatch {
			t.Fatalf("split into %d emails", len(items))
		}
		emails, errs, fail := parseBatchEmails(items, permissive, 16)
		if fail != nil {
			if permissive || fail.Status/100 != 4 || !bytes.Contains([]byte(fail.Message), []byte("index")) {
				t.Fatalf("parse: %+v (permissive %t)", fail, permissive)
			}
			return
		}
		if len(emails) != len(items) {
			t.Fatalf("%d emails for %d items", len(emails), len(items))
		}
		named := map[int]bool{}
		for _, e := range errs {
			if e.Index < 0 || e.Index >= len(items) || named[e.Index] || emails[e.Index] != nil || e.Message == "" {
				t.Fatalf("error %+v", e)
			}
			named[e.Index] = true
		}
		for i, e := range emails {
			if e == nil {
				if !named[i] {
					t.Fatalf("email %d neither valid nor named", i)
				}
				continue
			}
			if len(e.Attachments) > 0 {
				t.Fatalf("email %d kept attachments in a batch", i)
			}
			p := mailmsg.Parse(compose(e, time.Unix(0, 0)))
			if e.Text != nil && p.Text != *e.Text {
				t.Fatalf("email %d: text %q read back as %q", i, *e.Text, p.Text)
			}
		}
		if batchFingerprint(permissive, emails) == batchFingerprint(!permissive, emails) {
			t.Fatal("the mode is not part of a batch's fingerprint")
		}
	})
}

// FuzzAttachments: any attachments value is refused or decoded into parts
// that compose into a message from which mailmsg.Parse reads back every
// attachment with its name, type and exact size; a refusal is always one of
// the two attachment answers.
func FuzzAttachments(f *testing.F) {
	for _, seed := range []string{
		`[{"filename":"a.txt","content":"aGVsbG8="}]`,
		`[{"filename":"a.bin","content":"aGVsbG8"}]`,
		`[{"filename":"x.pdf","content":[1,2,255]}]`,
		`[{"filename":"Grüße.txt","content":"","content_type":"text/plain; charset=utf-8"}]`,
		`[{"filename":"l.png","content":"aGk=","content_id":"logo"},{"filename":"b","content":"aGk=","inline_content_id":"logo2"}]`,
		`[{"filename":"a.pdf","path":"https://example.com/a.pdf"}]`,
		`[{"filename":"a\"b;c=d","content":"aGk=","content_type":"application/x-a+b"}]`,
		`[{"filename":"=?utf-8?b?eA==?=","content":"aGk="}]`,
		`[{}]`, `{}`, `null`, `"x"`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var v any
		if json.Unmarshal(raw, &v) != nil {
			return
		}
		list, fail := parseAttachments(v)
		if fail != nil {
			if fail != errAttachments && fail != errAttachmentPath {
				t.Fatalf("unexpected refusal %+v", fail)
			}
			return
		}
		text := "body"
		e := &email{From: "s@example.com", To: []string{"u@example.com"}, Subject: "s", Text: &text, Attachments: list}
		p := mailmsg.Parse(compose(e, time.Unix(0, 0)))
		if p.Text != text {
			t.Fatalf("text read back as %q", p.Text)
		}
		if len(p.Attachments) != len(list) {
			t.Fatalf("%d attachments read back, want %d", len(p.Attachments), len(list))
		}
		sizes := map[string]int{}
		for _, a := range list {
			sizes[a.Filename+"\x00"+a.ContentType] += len(a.Content)
		}
		for _, a := range p.Attachments {
			sizes[a.FileName+"\x00"+a.ContentType] -= a.Size
		}
		for k, n := range sizes {
			if n != 0 {
				t.Fatalf("attachment %q: size off by %d", k, n)
			}
		}
	})
}
