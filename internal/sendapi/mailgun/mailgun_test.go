package mailgun

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	mg "github.com/mailgun/mailgun-go/v4"

	"github.com/websitebench/mailplane/internal/complexity"
	"github.com/websitebench/mailplane/internal/sendapi"
)

// sdkRequest captures what the Mailgun Go SDK sends for one message with
// cc, bcc, html, an attachment, a tag, a header and variables.
func sdkRequest(t *testing.T) (*http.Request, []byte) {
	t.Helper()
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, body = r, must(io.ReadAll(r.Body))
		w.Write([]byte(`{"id":"<x@y>","message":"Queued. Thank you."}`))
	}))
	defer srv.Close()
	client := mg.NewMailgun("mg.example.com", "key-1")
	client.SetAPIBase(srv.URL + "/v3")
	m := mg.NewMessage("Site <site@example.com>", "Welcome", "code 123456", "Amy <amy@example.com>")
	m.AddCC("cc@example.com")
	m.AddBCC("bcc@example.com")
	m.SetHTML("<p>code <b>123456</b></p>")
	m.AddBufferAttachment("a.pdf", []byte("PDF"))
	m.AddTag("signup")
	m.AddHeader("X-Entity", "42")
	if err := m.AddVariable("user", "7"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := client.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	return got, body
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestSDKBody: the SDK's multipart request becomes one Email.
func TestSDKBody(t *testing.T) {
	r, body := sdkRequest(t)
	if key, ok := (API{}).Credential(r); !ok || key != "key-1" || !(API{}).Match(r.URL.EscapedPath()) {
		t.Fatalf("credential %q %v, path %s", key, ok, r.URL.Path)
	}
	emails, fail := API{}.Parse(r, body)
	if fail != nil || len(emails) != 1 {
		t.Fatalf("refused %+v", fail)
	}
	e := emails[0]
	if e.From != "Site <site@example.com>" || e.Subject != "Welcome" || *e.Text != "code 123456" || *e.HTML != "<p>code <b>123456</b></p>" ||
		fmt.Sprint(e.To, e.Cc, e.Bcc) != "[Amy <amy@example.com>] [cc@example.com] [bcc@example.com]" {
		t.Fatalf("email %+v", e)
	}
	if len(e.Attachments) != 1 || e.Attachments[0].Filename != "a.pdf" || string(e.Attachments[0].Content) != "PDF" {
		t.Fatalf("attachments %+v", e.Attachments)
	}
	want := map[string]string{"X-Mailgun-Tag": "signup", "X-Entity": "42", VariablesHeader: `{"user":"7"}`}
	for _, h := range e.Headers {
		if want[h.Name] != h.Value {
			t.Errorf("header %s: %q", h.Name, h.Value)
		}
		delete(want, h.Name)
	}
	if len(want) > 0 {
		t.Errorf("missing headers %v", want)
	}
}

func urlencoded(form url.Values) (*http.Request, []byte) {
	body := []byte(form.Encode())
	r := httptest.NewRequest(http.MethodPost, "/v3/example.com/messages", nil)
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return r, body
}

// TestURLEncoded: the same fields as a urlencoded form, with repeated and
// comma-separated recipients, h:Reply-To and v: variables in non-ASCII.
func TestURLEncoded(t *testing.T) {
	r, body := urlencoded(url.Values{"from": {"s@example.com"}, "to": {"a@example.com, \"B, b\" <b@example.com>", "c@example.com"},
		"subject": {"s"}, "html": {"<p>h</p>"}, "h:Reply-To": {"help@example.com"}, "v:name": {"Zoë 😀"}, "o:tracking": {"yes"}})
	emails, fail := API{}.Parse(r, body)
	if fail != nil {
		t.Fatalf("refused %+v", fail)
	}
	e := emails[0]
	if fmt.Sprint(e.To, e.ReplyTo) != `[a@example.com "B, b" <b@example.com> c@example.com] [help@example.com]` || e.Text != nil || *e.HTML != "<p>h</p>" {
		t.Fatalf("email %+v", e)
	}
	if fmt.Sprint(e.Headers) != `[{X-Mailgun-Track yes} {X-Mailgun-Variables {"name":"Zo\u00eb \ud83d\ude00"}}]` {
		t.Fatalf("headers %v", e.Headers)
	}
}

// TestRefusals: Mailgun's 400 messages, and 401 Forbidden as text.
func TestRefusals(t *testing.T) {
	base := url.Values{"from": {"s@example.com"}, "to": {"a@example.com"}, "subject": {"s"}, "text": {"t"}}
	for _, c := range []struct{ drop, add, field string }{
		{"from", "", "from"},
		{"to", "", "to"},
		{"subject", "", "subject"},
		{"text", "", "text"},
		{"", "template", "template"},
		{"", "recipient-variables", "recipient-variables"},
		{"", "o:deliverytime", "o:deliverytime"},
	} {
		form := url.Values{}
		for k, v := range base {
			if k != c.drop {
				form[k] = v
			}
		}
		if c.add != "" {
			form.Set(c.add, "x")
		}
		_, fail := API{}.Parse(urlencoded(form))
		if fail == nil || fail.Field != c.field {
			t.Errorf("%s/%s: %+v", c.drop, c.add, fail)
		}
	}
	r, _ := urlencoded(base)
	r.Header.Set("Content-Type", "application/json")
	if _, fail := (API{}).Parse(r, []byte("{}")); fail == nil || fail.Failure != sendapi.MediaType {
		t.Errorf("json: %+v", fail)
	}
	w := httptest.NewRecorder()
	API{}.Refuse(w, sendapi.Fail(sendapi.Unauthorized))
	if w.Code != 401 || w.Body.String() != "Forbidden" {
		t.Errorf("401: %d %q", w.Code, w.Body)
	}
	w = httptest.NewRecorder()
	API{}.Accepted(w, httptest.NewRequest(http.MethodPost, "/v3/mg.example.com/messages", nil), []sendapi.Result{{ID: "id-1"}})
	if w.Code != 200 || w.Body.String() != `{"id":"<id-1@mg.example.com>","message":"Queued. Thank you."}` {
		t.Errorf("200: %d %s", w.Code, w.Body)
	}
	for _, p := range []string{"/v3/messages", "/v3//messages", "/v3/a/b/messages", "/v2/a/messages", "/v3/a/events"} {
		if (API{}).Match(p) {
			t.Errorf("matched %s", p)
		}
	}
}

func multipartBody(fields map[string]string, files int, size int) (string, []byte) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for k, v := range fields {
		mw.WriteField(k, v)
	}
	for i := range files {
		fw, _ := mw.CreateFormFile("attachment", fmt.Sprintf("f%d.bin", i))
		fw.Write(bytes.Repeat([]byte("\r\n--x"), size/4))
	}
	mw.Close()
	return mw.FormDataContentType(), b.Bytes()
}

func FuzzParse(f *testing.F) {
	ct, body := multipartBody(map[string]string{"from": "s@example.com", "to": "a@example.com", "subject": "s", "text": "t", "v:a": "1", "h:X-Mailgun-Variables": `{"b":2}`}, 1, 8)
	f.Add(ct, body)
	f.Add("application/x-www-form-urlencoded", []byte("from=s%40example.com&to=a%40example.com&subject=s&html=h&o:tag=a&o:tag=b"))
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/v3/d/messages", nil)
		r.Header.Set("Content-Type", contentType)
		emails, fail := API{}.Parse(r, body)
		if fail != nil {
			return
		}
		e := emails[0]
		if e.From == "" || len(e.To) == 0 || e.Subject == "" || (e.Text == nil && e.HTML == nil) {
			t.Fatalf("accepted an incomplete email %+v", e)
		}
	})
}

// TestParseLinear: linear in the number of fields, of files, the size of
// a file, and of comma-separated recipients.
func TestParseLinear(t *testing.T) {
	fields := map[string]string{"from": "s@example.com", "to": "a@example.com", "subject": "s", "text": "t"}
	for _, c := range []struct {
		name   string
		body   func(n int) (string, []byte)
		base   int
		repeat int // parses per run, so that the base run takes milliseconds
	}{
		{"file size", func(n int) (string, []byte) { return multipartBody(fields, 1, n) }, 20_000, 160},
		{"files", func(n int) (string, []byte) { return multipartBody(fields, min(n, 200), 64) }, 25, 160},
		{"urlencoded fields", func(n int) (string, []byte) {
			v := url.Values{"from": {"s@example.com"}, "subject": {"s"}, "text": {"t"}}
			for i := range n {
				v.Add(fmt.Sprintf("v:k%d", i), "é")
				v.Add("to", "a@example.com,b@example.com")
			}
			return "application/x-www-form-urlencoded", []byte(v.Encode())
		}, 1000, 10},
		{"quoted recipients", func(n int) (string, []byte) {
			return "application/x-www-form-urlencoded", []byte(url.Values{"from": {"s"}, "subject": {"s"}, "text": {"t"}, "to": {strings.Repeat(`"a,\"<`, n)}}.Encode())
		}, 5000, 40},
	} {
		t.Run(c.name, func(t *testing.T) {
			complexity.Linear(t, "mailgun/"+c.name, func(n int) func() {
				ct, body := c.body(n)
				r := httptest.NewRequest(http.MethodPost, "/v3/d/messages", nil)
				r.Header.Set("Content-Type", ct)
				return complexity.Repeat(c.repeat, func() { API{}.Parse(r, body) })
			}, c.base)
		})
	}
}
