package postmark

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	pm "github.com/mrz1836/postmark"

	"github.com/websitebench/mailplane/internal/complexity"
	"github.com/websitebench/mailplane/internal/sendapi"
)

func post(path string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, path, nil)
	r.Header.Set("Content-Type", "application/json")
	return r
}

func sdkEmail() pm.Email {
	return pm.Email{
		From: "Site <site@example.com>", To: `"Doe, Amy" <amy@example.com>, bob@example.com`, Cc: "cc@example.com", Bcc: "bcc@example.com",
		Subject: "Welcome", Tag: "signup", HTMLBody: "<p>code <b>123456</b></p>", TextBody: "code 123456", ReplyTo: "help@example.com",
		Headers:     []pm.Header{{Name: "X-Entity", Value: "42"}},
		Attachments: []pm.Attachment{{Name: "a.pdf", Content: base64.StdEncoding.EncodeToString([]byte("PDF")), ContentType: "application/pdf"}},
		Metadata:    map[string]string{"user": "7"}, TrackOpens: true, MessageStream: "outbound",
	}
}

// TestSDKBody: what the Postmark Go client sends, single and batch,
// becomes Emails; To is split at the commas between addresses only.
func TestSDKBody(t *testing.T) {
	body, _ := json.Marshal(sdkEmail())
	emails, fail := API{}.Parse(post(PathEmail), body)
	if fail != nil || len(emails) != 1 {
		t.Fatalf("refused: %+v", fail)
	}
	e := emails[0]
	if e.From != "Site <site@example.com>" || e.Subject != "Welcome" || *e.Text != "code 123456" || *e.HTML != "<p>code <b>123456</b></p>" ||
		fmt.Sprint(e.To, e.Cc, e.Bcc, e.ReplyTo) != `["Doe, Amy" <amy@example.com> bob@example.com] [cc@example.com] [bcc@example.com] [help@example.com]` {
		t.Fatalf("email %+v", e)
	}
	if fmt.Sprint(e.Headers) != "[{X-PM-Tag signup} {X-PM-Metadata-user 7} {X-Entity 42}]" {
		t.Fatalf("headers %v", e.Headers)
	}
	if len(e.Attachments) != 1 || string(e.Attachments[0].Content) != "PDF" {
		t.Fatalf("attachments %+v", e.Attachments)
	}
	bad := sdkEmail()
	bad.TextBody, bad.HTMLBody = "", ""
	batch, _ := json.Marshal([]pm.Email{sdkEmail(), bad})
	emails, fail = API{}.Parse(post(PathBatch), batch)
	if fail != nil || len(emails) != 2 || emails[0].Refused != nil || emails[1].Refused == nil || emails[1].Refused.Code != "300" {
		t.Fatalf("batch: %+v %+v", emails, fail)
	}
}

// TestAnswers: Postmark's success shape, its error codes and statuses,
// and a batch's per-email verdicts.
func TestAnswers(t *testing.T) {
	w := httptest.NewRecorder()
	API{}.Accepted(w, post(PathEmail), []sendapi.Result{{ID: "id-1", To: []string{"a@example.com"}}})
	var one pm.EmailResponse
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &one) != nil || one.MessageID != "id-1" || one.ErrorCode != 0 || one.Message != "OK" || one.To != "a@example.com" || one.SubmittedAt.IsZero() {
		t.Fatalf("single: %d %s", w.Code, w.Body)
	}
	w = httptest.NewRecorder()
	API{}.Accepted(w, post(PathBatch), []sendapi.Result{{ID: "id-1"}, {Err: sendapi.Fail(sendapi.Quota)}})
	var many []pm.EmailResponse
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &many) != nil || len(many) != 2 || many[1].ErrorCode != 405 {
		t.Fatalf("batch: %d %s", w.Code, w.Body)
	}
	for _, c := range []struct {
		err          *sendapi.Error
		status, code int
	}{
		{sendapi.Fail(sendapi.Unauthorized), 401, 10},
		{sendapi.Bad("", "x"), 422, 300},
		{&sendapi.Error{Failure: sendapi.Invalid, Code: "402"}, 422, 402},
		{sendapi.Fail(sendapi.Sealed), 422, 406},
		{sendapi.Fail(sendapi.Quota), 422, 405},
		{sendapi.Fail(sendapi.TooLarge), 413, 300},
		{sendapi.Fail(sendapi.Unavailable), 503, 100},
	} {
		w := httptest.NewRecorder()
		API{}.Refuse(w, c.err)
		var e pm.APIError
		if w.Code != c.status || json.Unmarshal(w.Body.Bytes(), &e) != nil || e.ErrorCode != int64(c.code) || e.Message == "" {
			t.Errorf("%+v: %d %s", c.err, w.Code, w.Body)
		}
	}
}

// TestRefusals: malformed requests get code 300 (402 for bad JSON, 410
// for a batch too big, 409 without JSON).
func TestRefusals(t *testing.T) {
	for _, c := range []struct{ path, body, code string }{
		{PathEmail, `{"To":"a@example.com","Subject":"s","TextBody":"t"}`, "300"},
		{PathEmail, `{"From":"s@example.com","Subject":"s","TextBody":"t"}`, "300"},
		{PathEmail, `{"From":"s@example.com","To":"a@example.com","Subject":"s"}`, "300"},
		{PathEmail, `{"From":"s@example.com","To":"a@example.com","TextBody":"t","Attachments":[{"Name":"a","Content":"%%"}]}`, "300"},
		{PathEmail, `{"From":"s@example.com","To":"` + strings.Repeat("a@example.com,", 51) + `","TextBody":"t"}`, "300"},
		{PathEmail, `{"From":1}`, "402"},
		{PathEmail, `[]`, "402"},
		{PathBatch, `[]`, "410"},
		{PathBatch, `{}`, "402"},
	} {
		_, fail := API{}.Parse(post(c.path), []byte(c.body))
		if fail == nil || fail.Code != c.code {
			t.Errorf("%s %.60s: %+v, want %s", c.path, c.body, fail, c.code)
		}
	}
	r := post(PathEmail)
	r.Header.Set("Content-Type", "text/plain")
	if _, fail := (API{}).Parse(r, []byte("{}")); fail == nil || fail.Code != "409" {
		t.Errorf("text/plain: %+v", fail)
	}
}

func FuzzParse(f *testing.F) {
	b, _ := json.Marshal(sdkEmail())
	f.Add(b, false)
	b, _ = json.Marshal([]pm.Email{sdkEmail(), {}})
	f.Add(b, true)
	f.Add([]byte(`{"From":"a","To":"\"x,\\\"y\" <a@b>, <c,d@e>","HtmlBody":"h"}`), false)
	f.Fuzz(func(t *testing.T, body []byte, batch bool) {
		path := PathEmail
		if batch {
			path = PathBatch
		}
		emails, fail := API{}.Parse(post(path), body)
		if fail != nil {
			if emails != nil {
				t.Fatal("a refusal with emails")
			}
			return
		}
		for _, e := range emails {
			if e.Refused == nil && (e.From == "" || len(e.To)+len(e.Cc)+len(e.Bcc) == 0 || (e.Text == nil && e.HTML == nil)) {
				t.Fatalf("accepted an incomplete email %+v", e)
			}
		}
	})
}

// TestParseLinear: linear in the batch, the address lists (quotes and
// escapes included), metadata and attachments.
func TestParseLinear(t *testing.T) {
	one := func(to string) string {
		return `{"From":"s@example.com","To":"` + to + `","Subject":"s","TextBody":"t"}`
	}
	for _, c := range []struct {
		name, path string
		body       func(n int) string
		base       int
		repeat     int // parses per run, so that the base run takes milliseconds
	}{
		{"batch", PathBatch, func(n int) string {
			return "[" + strings.TrimSuffix(strings.Repeat(one("a@example.com")+",", min(n, 500)), ",") + "]" + strings.Repeat(" ", n*60)
		}, 60, 130},
		{"quoted list", PathEmail, func(n int) string {
			return one(`\"` + strings.Repeat(`a,\\\"<`, n) + `\" <a@example.com>`)
		}, 5000, 40},
		{"open angle", PathEmail, func(n int) string { return one(strings.Repeat("<a,", n)) }, 5000, 100},
		{"attachment", PathEmail, func(n int) string {
			return `{"From":"s@example.com","To":"a@example.com","TextBody":"t","Attachments":[{"Name":"a","Content":"` + base64.StdEncoding.EncodeToString(make([]byte, 30*n)) + `"}]}`
		}, 1000, 30},
	} {
		t.Run(c.name, func(t *testing.T) {
			complexity.Linear(t, "postmark/"+c.name, func(n int) func() {
				body, r := []byte(c.body(n)), post(c.path)
				return complexity.Repeat(c.repeat, func() { API{}.Parse(r, body) })
			}, c.base)
		})
	}
}
