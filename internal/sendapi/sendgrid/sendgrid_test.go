package sendgrid

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sendgrid/sendgrid-go/helpers/mail"

	"github.com/websitebench/mailplane/internal/complexity"
	"github.com/websitebench/mailplane/internal/sendapi"
)

func post(body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, Path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

// TestSDKBody: the body SendGrid's own Go helper builds (two
// personalizations, cc, bcc, reply_to, text and html, an attachment,
// dynamic data) becomes one Email per personalization.
func TestSDKBody(t *testing.T) {
	m := mail.NewV3Mail()
	m.SetFrom(mail.NewEmail("Site", "site@example.com"))
	m.Subject = "Welcome"
	m.SetReplyTo(mail.NewEmail("Help", "help@example.com"))
	m.AddContent(mail.NewContent("text/plain", "code 123456"), mail.NewContent("text/html", "<p>code <b>123456</b></p>"))
	a := mail.NewAttachment().SetContent(base64.StdEncoding.EncodeToString([]byte("PDF"))).SetType("application/pdf").SetFilename("a.pdf")
	m.AddAttachment(a)
	p1 := mail.NewPersonalization()
	p1.AddTos(mail.NewEmail("Amy", "amy@example.com"))
	p1.AddCCs(mail.NewEmail("", "cc@example.com"))
	p1.AddBCCs(mail.NewEmail("", "bcc@example.com"))
	p1.SetDynamicTemplateData("code", "123456")
	p2 := mail.NewPersonalization()
	p2.AddTos(mail.NewEmail("", "bob@example.com"))
	p2.Subject = "Hi Bob"
	m.AddPersonalizations(p1, p2)
	emails, fail := API{}.Parse(post(string(mail.GetRequestBody(m))), mail.GetRequestBody(m))
	if fail != nil {
		t.Fatalf("refused: %+v", fail)
	}
	if len(emails) != 2 {
		t.Fatalf("%d emails", len(emails))
	}
	e := emails[0]
	if e.From != `"Site" <site@example.com>` || e.Subject != "Welcome" || *e.Text != "code 123456" || *e.HTML != "<p>code <b>123456</b></p>" ||
		fmt.Sprint(e.To, e.Cc, e.Bcc, e.ReplyTo) != `["Amy" <amy@example.com>] [cc@example.com] [bcc@example.com] ["Help" <help@example.com>]` {
		t.Fatalf("email %+v", e)
	}
	if len(e.Attachments) != 1 || string(e.Attachments[0].Content) != "PDF" || e.Attachments[0].Filename != "a.pdf" || e.Attachments[0].ContentType != "application/pdf" {
		t.Fatalf("attachments %+v", e.Attachments)
	}
	if len(e.Headers) != 1 || e.Headers[0] != (sendapi.Header{Name: DataHeader, Value: `{"code":"123456"}`}) {
		t.Fatalf("headers %+v", e.Headers)
	}
	if emails[1].Subject != "Hi Bob" || fmt.Sprint(emails[1].To) != "[bob@example.com]" || len(emails[1].Headers) != 0 {
		t.Fatalf("second %+v", emails[1])
	}
}

// TestRefusals: each malformed request gets SendGrid's 400 naming the
// field, and nothing is made of it.
func TestRefusals(t *testing.T) {
	ok := `"from":{"email":"s@example.com"},"subject":"s","content":[{"type":"text/plain","value":"t"}]`
	for _, c := range []struct{ body, field string }{
		{`{` + ok + `}`, "personalizations"},
		{`{"personalizations":[{}],` + ok + `}`, "personalizations.0.to"},
		{`{"personalizations":[{"to":[{"email":"a@example.com"}]}],"subject":"s","content":[{"type":"text/plain","value":"t"}]}`, "from.email"},
		{`{"personalizations":[{"to":[{"email":"a@example.com"}]}],"from":{"email":"s@example.com"},"content":[{"type":"text/plain","value":"t"}]}`, "subject"},
		{`{"personalizations":[{"to":[{"email":"a@example.com"}]}],"from":{"email":"s@example.com"},"subject":"s"}`, "content"},
		{`{"personalizations":[{"to":[{"email":"a@example.com"}]}],"from":{"email":"s@example.com"},"subject":"s","content":[{"type":"text/calendar","value":"x"}]}`, "content.0.type"},
		{`{"personalizations":[{"to":[{"email":"a@example.com"}]}],` + ok + `,"attachments":[{"filename":"a","content":"!!"}]}`, "attachments.0.content"},
		{`{"personalizations":[{"to":[{"email":"a@example.com"}]}],` + ok + `,"send_at":1}`, "send_at"},
		{`{"personalizations":{"to":[]},` + ok + `}`, "personalizations"},
		{`{"personalizations":[{"to":[{"email":"a@example.com"}],"dynamic_template_data":{"x":"é"}}],` + ok + `}`, "personalizations.0.dynamic_template_data"},
		{`{"personalizations":[` + strings.Repeat(`{"to":[{"email":"a@example.com"}]},`, 1000) + `{"to":[{"email":"a@example.com"}]}],` + ok + `}`, "personalizations"},
		{`nope`, ""},
	} {
		_, fail := API{}.Parse(post(c.body), []byte(c.body))
		if fail == nil || fail.Failure != sendapi.Invalid || fail.Field != c.field {
			t.Errorf("%.80s: %+v, want field %q", c.body, fail, c.field)
			continue
		}
		w := httptest.NewRecorder()
		API{}.Refuse(w, fail)
		if w.Code != 400 || !strings.HasPrefix(w.Body.String(), `{"errors":[{"message":`) {
			t.Errorf("answer %d %s", w.Code, w.Body)
		}
	}
	r := post("{}")
	r.Header.Set("Content-Type", "text/plain")
	if _, fail := (API{}).Parse(r, []byte("{}")); fail == nil || fail.Failure != sendapi.MediaType {
		t.Errorf("text/plain: %+v", fail)
	}
}

// TestAnswers: success is 202, empty, with X-Message-Id; refusals have
// SendGrid's statuses.
func TestAnswers(t *testing.T) {
	w := httptest.NewRecorder()
	API{}.Accepted(w, post(""), []sendapi.Result{{ID: "id-1"}, {ID: "id-2"}})
	if w.Code != http.StatusAccepted || w.Body.Len() != 0 || w.Header().Get("X-Message-Id") != "id-1" {
		t.Fatalf("accepted: %d %q %v", w.Code, w.Body, w.Header())
	}
	for f, want := range map[sendapi.Failure]int{sendapi.Unauthorized: 401, sendapi.TooLarge: 413, sendapi.Quota: 429, sendapi.Unavailable: 503} {
		w := httptest.NewRecorder()
		API{}.Refuse(w, sendapi.Fail(f))
		if w.Code != want || !strings.Contains(w.Body.String(), `"errors"`) {
			t.Errorf("failure %d: %d %s", f, w.Code, w.Body)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"personalizations":[{"to":[{"email":"a@example.com","name":"A"}],"cc":[{"email":"c@example.com"}],"dynamic_template_data":{"a":[1,{"b":null}]}}],"from":{"email":"s@example.com"},"subject":"s","content":[{"type":"text/plain","value":"t"},{"type":"text/html","value":"<p>"}],"attachments":[{"filename":"a","content":"QQ==","disposition":"inline","content_id":"x"}],"headers":{"X-A":"1"},"template_id":"d-1"}`))
	f.Add([]byte(`{"personalizations":[{"to":[{"email":"a@example.com"}],"subject":"x","headers":{"X-A":"2"}}],"from":{"email":"s@example.com"},"template_id":"d-1"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		emails, fail := API{}.Parse(post(""), body)
		if fail != nil {
			if emails != nil || fail.Message == "" {
				t.Fatalf("refusal %+v with %d emails", fail, len(emails))
			}
			return
		}
		for _, e := range emails {
			if e.From == "" || len(e.To) == 0 || e.Subject == "" || (e.Text == nil && e.HTML == nil) {
				t.Fatalf("accepted an incomplete email %+v", e)
			}
		}
	})
}

// TestParseLinear: the parser is linear in personalizations, content,
// attachments and dynamic data.
func TestParseLinear(t *testing.T) {
	for _, c := range []struct {
		name   string
		body   func(n int) string
		base   int
		repeat int // parses per run, so that the base run takes milliseconds
	}{
		{"personalizations", func(n int) string {
			p := strings.TrimSuffix(strings.Repeat(`{"to":[{"email":"a@example.com"}],"headers":{"X-A":"1"},"dynamic_template_data":{"k":"v"}},`, min(n, 1000)), ",")
			return `{"personalizations":[` + p + `],"from":{"email":"s@example.com"},"subject":"s","content":[{"type":"text/plain","value":"` + strings.Repeat("t", n) + `"}]}`
		}, 500, 12},
		{"long html", func(n int) string {
			return `{"personalizations":[{"to":[{"email":"a@example.com"}]}],"from":{"email":"s@example.com"},"subject":"s","content":[{"type":"text/html","value":"` + strings.Repeat(`<p>\u00e9\"x</p>`, n) + `"}]}`
		}, 5000, 20},
		{"attachment", func(n int) string {
			return `{"personalizations":[{"to":[{"email":"a@example.com"}]}],"from":{"email":"s@example.com"},"subject":"s","content":[{"type":"text/plain","value":"t"}],"attachments":[{"filename":"a","content":"` + base64.StdEncoding.EncodeToString(make([]byte, n*30)) + `"}]}`
		}, 1000, 30},
		{"deep dynamic data", func(n int) string {
			return `{"personalizations":[{"to":[{"email":"a@example.com"}],"dynamic_template_data":{"a":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}}],"from":{"email":"s@example.com"},"subject":"s","content":[{"type":"text/plain","value":"t"}]}`
		}, 2000, 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			complexity.Linear(t, "sendgrid/"+c.name, func(n int) func() {
				body := []byte(c.body(n))
				r := post("")
				return complexity.Repeat(c.repeat, func() { API{}.Parse(r, body) })
			}, c.base)
		})
	}
}
