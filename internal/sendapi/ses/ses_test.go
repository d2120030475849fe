package ses

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"

	"github.com/websitebench/mailplane/internal/complexity"
	"github.com/websitebench/mailplane/internal/sendapi"
)

// sdkBody captures the body the SES v2 SDK sends for in.
func sdkBody(t *testing.T, in *sesv2.SendEmailInput) []byte {
	t.Helper()
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ = io.ReadAll(r.Body)
		if r.URL.Path != Path {
			t.Errorf("path %s", r.URL.Path)
		}
		w.Write([]byte(`{"MessageId":"m"}`))
	}))
	defer srv.Close()
	client := sesv2.New(sesv2.Options{Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("trial-x", "secret", "")})
	if _, err := client.SendEmail(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	return body
}

func parse(body []byte) ([]sendapi.Email, *sendapi.Error) {
	return API{}.Parse(httptest.NewRequest(http.MethodPost, Path, nil), body)
}

// TestSDKSimple: the SDK's Simple content, with cc, bcc, reply-to,
// headers, an attachment and tags, becomes one Email.
func TestSDKSimple(t *testing.T) {
	body := sdkBody(t, &sesv2.SendEmailInput{
		FromEmailAddress: aws.String("Site <site@example.com>"),
		Destination:      &types.Destination{ToAddresses: []string{"amy@example.com"}, CcAddresses: []string{"cc@example.com"}, BccAddresses: []string{"bcc@example.com"}},
		ReplyToAddresses: []string{"help@example.com"},
		Content: &types.EmailContent{Simple: &types.Message{
			Subject:     &types.Content{Data: aws.String("Welcome")},
			Body:        &types.Body{Text: &types.Content{Data: aws.String("code 123456")}, Html: &types.Content{Data: aws.String("<p>123456</p>")}},
			Headers:     []types.MessageHeader{{Name: aws.String("X-Entity"), Value: aws.String("42")}},
			Attachments: []types.Attachment{{FileName: aws.String("a.pdf"), RawContent: []byte("PDF"), ContentType: aws.String("application/pdf")}},
		}},
		EmailTags:            []types.MessageTag{{Name: aws.String("flow"), Value: aws.String("signup")}},
		ConfigurationSetName: aws.String("cs"),
	})
	emails, fail := parse(body)
	if fail != nil || len(emails) != 1 {
		t.Fatalf("refused %+v", fail)
	}
	e := emails[0]
	if e.From != "Site <site@example.com>" || e.Subject != "Welcome" || *e.Text != "code 123456" || *e.HTML != "<p>123456</p>" ||
		fmt.Sprint(e.To, e.Cc, e.Bcc, e.ReplyTo) != "[amy@example.com] [cc@example.com] [bcc@example.com] [help@example.com]" {
		t.Fatalf("email %+v", e)
	}
	if fmt.Sprint(e.Headers) != "[{X-SES-MESSAGE-TAGS flow=signup} {X-SES-CONFIGURATION-SET cs} {X-Entity 42}]" {
		t.Fatalf("headers %v", e.Headers)
	}
	if len(e.Attachments) != 1 || string(e.Attachments[0].Content) != "PDF" || e.Attachments[0].Filename != "a.pdf" {
		t.Fatalf("attachments %+v", e.Attachments)
	}
}

// TestSDKRaw: Raw content is kept as sent; without Destination and
// FromEmailAddress the envelope comes from the message's headers.
func TestSDKRaw(t *testing.T) {
	raw := "From: Site <site@example.com>\r\nTo: a@example.com, B <b@example.com>\r\nCc: c@example.com\r\nSubject: s\r\n\r\nbody\r\n"
	emails, fail := parse(sdkBody(t, &sesv2.SendEmailInput{Content: &types.EmailContent{Raw: &types.RawMessage{Data: []byte(raw)}}}))
	if fail != nil {
		t.Fatalf("refused %+v", fail)
	}
	e := emails[0]
	if string(e.Raw) != raw || e.From != "site@example.com" || fmt.Sprint(e.To) != "[a@example.com b@example.com c@example.com]" {
		t.Fatalf("email %+v", e)
	}
	emails, fail = parse(sdkBody(t, &sesv2.SendEmailInput{FromEmailAddress: aws.String("o@example.com"), Destination: &types.Destination{ToAddresses: []string{"z@example.com"}},
		Content: &types.EmailContent{Raw: &types.RawMessage{Data: []byte(raw)}}}))
	if fail != nil || emails[0].From != "o@example.com" || fmt.Sprint(emails[0].To) != "[z@example.com]" {
		t.Fatalf("with an envelope: %+v %+v", emails, fail)
	}
}

// TestRefusals: SES's error types and statuses.
func TestRefusals(t *testing.T) {
	for _, c := range []struct{ body, field string }{
		{`{"Content":{}}`, "Content"},
		{`{"Content":{"Template":{}}}`, "Content.Template"},
		{`{"Destination":{"ToAddresses":["a@example.com"]},"Content":{"Simple":{"Subject":{"Data":"s"},"Body":{"Text":{"Data":"t"}}}}}`, "FromEmailAddress"},
		{`{"FromEmailAddress":"s@example.com","Content":{"Simple":{"Subject":{"Data":"s"},"Body":{"Text":{"Data":"t"}}}}}`, "Destination"},
		{`{"FromEmailAddress":"s@example.com","Destination":{"ToAddresses":["a@example.com"]},"Content":{"Simple":{"Body":{"Text":{"Data":"t"}}}}}`, "Content.Simple.Subject"},
		{`{"FromEmailAddress":"s@example.com","Destination":{"ToAddresses":["a@example.com"]},"Content":{"Simple":{"Subject":{"Data":"s"},"Body":{}}}}`, "Content.Simple.Body"},
		{`{"Content":{"Raw":{"Data":"` + base64.StdEncoding.EncodeToString([]byte("no headers")) + `"}}}`, "Content.Raw.Data"},
		{`{"Content":{"Raw":{"Data":"!!"}}}`, ""},
	} {
		_, fail := parse([]byte(c.body))
		if fail == nil || fail.Field != c.field {
			t.Errorf("%s: %+v", c.body, fail)
		}
	}
	for _, c := range []struct {
		err    *sendapi.Error
		status int
		typ    string
	}{
		{sendapi.Fail(sendapi.Unauthorized), 403, TypeSignature},
		{&sendapi.Error{Failure: sendapi.Unauthorized, Code: TypeMissingAuth, Message: "Missing Authentication Token"}, 403, TypeMissingAuth},
		{sendapi.Bad("x", "y"), 400, "BadRequestException"},
		{sendapi.Fail(sendapi.TooLarge), 400, "MessageRejected"},
		{sendapi.Fail(sendapi.Quota), 429, "TooManyRequestsException"},
		{sendapi.Fail(sendapi.Sealed), 400, "SendingPausedException"},
		{sendapi.Fail(sendapi.Unavailable), 503, "ServiceUnavailable"},
	} {
		w := httptest.NewRecorder()
		API{}.Refuse(w, c.err)
		var b map[string]string
		if w.Code != c.status || w.Header().Get("X-Amzn-ErrorType") != c.typ || json.Unmarshal(w.Body.Bytes(), &b) != nil || b["message"] == "" {
			t.Errorf("%+v: %d %v %s", c.err, w.Code, w.Header(), w.Body)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"FromEmailAddress":"s@example.com","Destination":{"ToAddresses":["a@example.com"]},"Content":{"Simple":{"Subject":{"Data":"s"},"Body":{"Html":{"Data":"h"}},"Attachments":[{"FileName":"a","RawContent":"QQ==","ContentDisposition":"INLINE","ContentId":"c"}]}},"EmailTags":[{"Name":"a","Value":"b"}]}`))
	f.Add([]byte(`{"Content":{"Raw":{"Data":"` + base64.StdEncoding.EncodeToString([]byte("From: a@b\r\nBcc: c@d\r\n\r\nx")) + `"}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		emails, fail := parse(body)
		if fail != nil {
			return
		}
		e := emails[0]
		if e.From == "" || len(e.To)+len(e.Cc)+len(e.Bcc) == 0 || (e.Raw == nil && e.Subject == "") {
			t.Fatalf("accepted an incomplete email %+v", e)
		}
	})
}

// TestParseLinear: linear in recipients, body and raw message size, and
// raw headers.
func TestParseLinear(t *testing.T) {
	raw := func(s string) string {
		return `{"Content":{"Raw":{"Data":"` + base64.StdEncoding.EncodeToString([]byte(s)) + `"}}}`
	}
	for _, c := range []struct {
		name   string
		body   func(n int) string
		base   int
		repeat int // parses per run, so that the base run takes milliseconds
	}{
		{"html", func(n int) string {
			return `{"FromEmailAddress":"s@example.com","Destination":{"ToAddresses":["a@example.com"]},"Content":{"Simple":{"Subject":{"Data":"s"},"Body":{"Html":{"Data":"` + strings.Repeat(`<p>\u00e9</p>`, n) + `"}}}}}`
		}, 5000, 25},
		{"raw body", func(n int) string {
			return raw("From: a@example.com\r\nTo: b@example.com\r\n\r\n" + strings.Repeat("line\r\n", n))
		}, 5000, 30},
		{"raw folded header", func(n int) string {
			return raw("From: a@example.com\r\nTo: b@example.com" + strings.Repeat(",\r\n c@example.com", min(n, 40)) + "\r\nX: " + strings.Repeat("a\r\n ", n) + "\r\n\r\nx")
		}, 2000, 60},
	} {
		t.Run(c.name, func(t *testing.T) {
			complexity.Linear(t, "ses/"+c.name, func(n int) func() {
				body := []byte(c.body(n))
				return complexity.Repeat(c.repeat, func() { parse(body) })
			}, c.base)
		})
	}
}
