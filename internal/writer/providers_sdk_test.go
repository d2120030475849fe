package writer_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	sestypes "github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/smithy-go"
	mailgun "github.com/mailgun/mailgun-go/v4"
	"github.com/mrz1836/postmark"
	"github.com/sendgrid/rest"
	"github.com/sendgrid/sendgrid-go"
	sgmail "github.com/sendgrid/sendgrid-go/helpers/mail"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/writer/writertest"
	"github.com/websitebench/mailplane/pkg/mailclient"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// The provider SDKs, each pointed at the shared writer of a real `up`
// stack with a trial's bundle, as a candidate would configure them.

const (
	providerQuota = 3 // messages per trial on the stack below
	sdkText       = "Your code is 314159."
	sdkHTML       = `<p>Your code is <b>314159</b>. <a href="https://site.example/verify?t=1">Verify</a></p>`
	sdkSubject    = "Confirm your account"
)

var (
	sdkAttachment = []byte("%PDF-1.4 not really a pdf\x00\x01\x02")
	// sdkName is the display name every SDK sends with the pinned
	// sender: the stored From, the gateway and the inbox keep it.
	sdkName = "Acme Sign-up"
	sdkFrom = sdkName + " <" + rpc.CandidateSender + ">"
)

// sent is what a provider's SDK answered, reduced to what the tests
// compare: the HTTP status and the provider's error code or type.
type sent struct {
	status int
	code   string
	err    error
}

// sdk drives one provider's SDK against a trial's bundle.
type sdk struct {
	name string
	// send sends the full message (to, cc, bcc, subject, text, html, an
	// attachment) or, with small, a text-only one of about extra bytes
	// more; wrong spoils the credential.
	send func(t *testing.T, b rpc.Bundle, small bool, extra int, wrong bool) sent
	// ok, quota, size and bad are the answers each case must get.
	ok, quota, size, bad sent
}

// TestProviderSDKs: each SDK sends through the shared writer of `up`; the
// message reads back through the gateway field by field; a bad credential
// gets the provider's error and stores nothing; a trial's credential
// never writes into another trial; the quota and the size limit answer in
// the provider's shape; the trail names the API.
func TestProviderSDKs(t *testing.T) {
	stack := itest.StartUp(t, "--trials", "0", "--quota-messages", itest.Itoa(providerQuota), "--quota-bytes", "0")
	admin := stack.Admin(t)
	for _, p := range []sdk{sendGridSDK(), postmarkSDK(), mailgunSDK(), sesSDK()} {
		t.Run(p.name, func(t *testing.T) {
			open := func() rpc.Bundle {
				b, err := admin.TrialOpen(context.Background(), &rpc.TrialOpenRequest{})
				if err != nil || b.Providers == nil {
					t.Fatalf("trial open: %v, providers %v", err, b.Providers)
				}
				return b
			}
			a, other := open(), open()
			expect(t, "send", p.send(t, a, false, 0, false), p.ok)
			msgs := readBack(t, a)
			if len(msgs) != 1 {
				t.Fatalf("%d messages held, want 1", len(msgs))
			}
			checkFull(t, msgs[0])
			checkName(t, a)
			checkTrail(t, a, p.name)

			expect(t, "bad credential", p.send(t, a, true, 0, true), p.bad)
			expect(t, "over the size limit", p.send(t, a, true, 1<<20+1, false), p.size)
			if n := len(readBack(t, a)); n != 1 {
				t.Fatalf("%d messages held after refusals, want 1", n)
			}
			if n := len(readBack(t, other)); n != 0 {
				t.Fatalf("trial B holds %d messages that A's credential sent", n)
			}
			expect(t, "B's send", p.send(t, other, true, 0, false), p.ok)
			if got := readBack(t, other); len(got) != 1 || got[0].Subject != "small" {
				t.Fatalf("B holds %v", got)
			}
			checkName(t, other) // SES: Content.Raw; Postmark: the batch API
			for range providerQuota - 1 {
				expect(t, "within the quota", p.send(t, a, true, 0, false), p.ok)
			}
			expect(t, "over the quota", p.send(t, a, true, 0, false), p.quota)
			if n := len(readBack(t, a)); n != providerQuota {
				t.Fatalf("%d messages held, want %d", n, providerQuota)
			}
		})
	}
	t.Run("faults in each provider's shape", func(t *testing.T) {
		// A refusal on purpose ([faults]): a 429 with Retry-After, as
		// each provider answers a rate limit; nothing is stored.
		rules := json.RawMessage(`[{"door":"http","first":8,"do":"refuse","status":429,"retry_after":2}]`)
		b, err := admin.TrialOpen(context.Background(), &rpc.TrialOpenRequest{Faults: rules})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []struct {
			sdk  sdk
			want sent
		}{
			{sendGridSDK(), sent{status: 429}}, {postmarkSDK(), sent{status: 429, code: "429"}},
			{mailgunSDK(), sent{status: 429}}, {sesSDK(), sent{status: 429, code: "TooManyRequestsException"}},
		} {
			expect(t, p.sdk.name+" faulted", p.sdk.send(t, b, true, 0, false), p.want)
		}
		if n := len(readBack(t, b)); n != 0 {
			t.Fatalf("faulted sends stored %d messages", n)
		}
	})
	t.Run("ses keys open one trial", func(t *testing.T) {
		a, err := admin.TrialOpen(context.Background(), &rpc.TrialOpenRequest{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := admin.TrialOpen(context.Background(), &rpc.TrialOpenRequest{})
		if err != nil {
			t.Fatal(err)
		}
		mixed := a
		keys := *a.Providers
		keys.SES.SecretAccessKey = b.Providers.SES.SecretAccessKey // A's key id, B's secret
		mixed.Providers = &keys
		expect(t, "A's key id with B's secret", sesSDK().send(t, mixed, true, 0, false), sent{status: 403, code: "SignatureDoesNotMatch"})
		keys.SES.AccessKeyID = b.Namespace // B's key pair, sent with A's bundle: lands in B
		expect(t, "B's keys", sesSDK().send(t, mixed, true, 0, false), sent{status: 200})
		if na, nb := len(readBack(t, a)), len(readBack(t, b)); na != 0 || nb != 1 {
			t.Fatalf("A holds %d, B %d; want 0 and 1", na, nb)
		}
	})
}

func expect(t *testing.T, what string, got, want sent) {
	t.Helper()
	if got.status != want.status || got.code != want.code {
		t.Fatalf("%s: status %d code %q (%v), want %d %q", what, got.status, got.code, got.err, want.status, want.code)
	}
}

func readBack(t *testing.T, b rpc.Bundle) []mailclient.Message {
	t.Helper()
	msgs, err := mailclient.New(b.APIURL, b.Namespace, b.ReadCapability).List(context.Background(), mailclient.Query{})
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// checkFull compares the full message, field by field, as the gateway
// reads it back: html shows in the links and code it alone carries.
func checkFull(t *testing.T, m mailclient.Message) {
	t.Helper()
	if m.EnvelopeFrom != rpc.CandidateSender {
		t.Errorf("from %q", m.EnvelopeFrom)
	}
	if got := strings.Join(m.Recipients, ","); got != "agent@example.com,cc@example.com,bcc@example.com" {
		t.Errorf("to, cc, bcc: %q", got)
	}
	if m.Subject != sdkSubject || m.Text != sdkText {
		t.Errorf("subject %q text %q", m.Subject, m.Text)
	}
	if !slices.Contains(m.Links, "https://site.example/verify?t=1") || m.OTP == nil || *m.OTP != "314159" {
		t.Errorf("html: links %v otp %v", m.Links, m.OTP)
	}
	sum := sha256.Sum256(sdkAttachment)
	if len(m.Attachments) != 1 || m.Attachments[0].FileName != "terms.pdf" || m.Attachments[0].ContentType != "application/pdf" ||
		m.Attachments[0].Size != len(sdkAttachment) || m.Attachments[0].Checksums.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("attachments %+v", m.Attachments)
	}
}

// checkName: every message of b shows the sender's display name with
// the pinned address where the gateway and the agent's inbox show a
// sender: the gateway's inbox page (and its message JSON's from, where
// it has one) and the agent's own inbox page.
func checkName(t *testing.T, b rpc.Bundle) {
	t.Helper()
	get := func(url string, bearer bool) string {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if bearer {
			req.Header.Set("Authorization", "Bearer "+b.ReadCapability)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
		}
		return string(body)
	}
	shown := html.EscapeString(sdkName + " <" + rpc.CandidateSender + ">")
	if page := get(b.APIURL+"/inbox/"+b.Namespace, true); !strings.Contains(page, shown) {
		t.Errorf("the gateway's inbox page does not show %q:\n%s", shown, page)
	}
	if page := get(b.InboxURL, false); !strings.Contains(page, html.EscapeString(sdkName)) {
		t.Errorf("the agent's inbox page does not show %q:\n%s", sdkName, page)
	}
	var list struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal([]byte(get(b.APIURL+"/api/namespaces/"+b.Namespace+"/messages", true)), &list); err != nil || len(list.Messages) == 0 {
		t.Fatalf("messages: %v %v", err, list)
	}
	for _, m := range list.Messages {
		if from, ok := m["from"]; ok && !strings.Contains(fmt.Sprint(from), sdkName) {
			t.Errorf("message JSON from %v, want the name %q", from, sdkName)
		}
	}
}

// checkTrail: the send's event names the API it came through.
func checkTrail(t *testing.T, b rpc.Bundle, api string) {
	t.Helper()
	events, err := mailclient.New(b.APIURL, b.Namespace, b.ReadCapability).Events(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.Action == "send" && e.Outcome == "accepted" {
			if e.API != api || e.Door != "writer-http" || (api == "ses") != (e.Credential == "sigv4_signature") {
				t.Errorf("send event: api %q door %q credential %q", e.API, e.Door, e.Credential)
			}
			return
		}
	}
	t.Errorf("no accepted send in the trail")
}

func smallText(extra int) string { return "small " + strings.Repeat("x", extra) }

func sendGridSDK() sdk {
	return sdk{name: "sendgrid",
		ok: sent{status: 202}, bad: sent{status: 401}, size: sent{status: 413}, quota: sent{status: 429},
		send: func(t *testing.T, b rpc.Bundle, small bool, extra int, wrong bool) sent {
			key := b.Providers.SendGrid.APIKey
			if wrong {
				key = strings.ToUpper(key)
			}
			m := sgmail.NewV3Mail()
			m.SetFrom(sgmail.NewEmail(sdkName, rpc.CandidateSender))
			p := sgmail.NewPersonalization()
			p.AddTos(sgmail.NewEmail("Agent", "agent@example.com"))
			if small {
				m.Subject = "small"
				m.AddContent(sgmail.NewContent("text/plain", smallText(extra)))
			} else {
				m.Subject = sdkSubject
				p.AddCCs(sgmail.NewEmail("", "cc@example.com"))
				p.AddBCCs(sgmail.NewEmail("", "bcc@example.com"))
				m.AddContent(sgmail.NewContent("text/plain", sdkText), sgmail.NewContent("text/html", sdkHTML))
				m.AddAttachment(sgmail.NewAttachment().SetFilename("terms.pdf").SetType("application/pdf").SetContent(base64.StdEncoding.EncodeToString(sdkAttachment)))
			}
			m.AddPersonalizations(p)
			req := sendgrid.GetRequest(key, "/v3/mail/send", b.Providers.SendGrid.BaseURL)
			req.Method = rest.Post
			req.Body = sgmail.GetRequestBody(m)
			resp, err := sendgrid.API(req)
			if err != nil {
				t.Fatalf("sendgrid: %v", err)
			}
			if resp.StatusCode == 202 && (resp.Body != "" || len(resp.Headers["X-Message-Id"]) != 1) {
				t.Errorf("202 with body %q, headers %v", resp.Body, resp.Headers)
			}
			if resp.StatusCode >= 400 && !strings.HasPrefix(resp.Body, `{"errors":[{"message":`) {
				t.Errorf("error body %q", resp.Body)
			}
			return sent{status: resp.StatusCode}
		},
	}
}

func postmarkSDK() sdk {
	return sdk{name: "postmark",
		ok: sent{status: 200, code: "0"}, bad: sent{status: 401, code: "10"}, size: sent{status: 413, code: "300"},
		// The quota is met by a batch, whose answer is 200 with each
		// email's verdict, as Postmark answers.
		quota: sent{status: 200, code: "405"},
		send: func(t *testing.T, b rpc.Bundle, small bool, extra int, wrong bool) sent {
			token := b.Providers.Postmark.ServerToken
			if wrong {
				token = "0" + token[1:]
				if token == b.Providers.Postmark.ServerToken {
					token = "1" + token[1:]
				}
			}
			client := postmark.NewClient(token, "")
			client.BaseURL = b.Providers.Postmark.BaseURL
			rec := &statusRecorder{}
			client.HTTPClient = &http.Client{Transport: rec}
			e := postmark.Email{From: sdkFrom, To: "Agent <agent@example.com>", Subject: "small", TextBody: smallText(extra)}
			if !small {
				e = postmark.Email{From: sdkFrom, To: "Agent <agent@example.com>", Cc: "cc@example.com", Bcc: "bcc@example.com",
					Subject: sdkSubject, TextBody: sdkText, HTMLBody: sdkHTML, Tag: "signup",
					Attachments: []postmark.Attachment{{Name: "terms.pdf", Content: base64.StdEncoding.EncodeToString(sdkAttachment), ContentType: "application/pdf"}}}
			}
			ctx := context.Background()
			var res postmark.EmailResponse
			var err error
			if small && !wrong && extra == 0 {
				// The batch API: one email per call here, so that the
				// quota is reached at the same count as with single sends.
				var list []postmark.EmailResponse
				if list, err = client.SendEmailBatch(ctx, []postmark.Email{e}); err == nil {
					if len(list) != 1 {
						t.Fatalf("batch answered %d results", len(list))
					}
					res = list[0]
				}
			} else {
				res, err = client.SendEmail(ctx, e)
			}
			var api postmark.APIError
			if errors.As(err, &api) {
				return sent{status: rec.status, code: itest.Itoa(int(api.ErrorCode)), err: err}
			}
			if err != nil && res.ErrorCode == 0 {
				t.Fatalf("postmark: %v", err)
			}
			if res.ErrorCode == 0 && (res.MessageID == "" || res.Message != "OK" || res.SubmittedAt.IsZero() || res.To == "") {
				t.Errorf("answer %+v", res)
			}
			return sent{status: rec.status, code: itest.Itoa(int(res.ErrorCode))}
		},
	}
}

// statusRecorder keeps the status of the last answer, which the Postmark
// client does not return.
type statusRecorder struct{ status int }

func (s *statusRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		s.status = resp.StatusCode
	}
	return resp, err
}

func mailgunSDK() sdk {
	return sdk{name: "mailgun",
		ok: sent{status: 200}, bad: sent{status: 401}, size: sent{status: 413}, quota: sent{status: 429},
		send: func(t *testing.T, b rpc.Bundle, small bool, extra int, wrong bool) sent {
			key := b.Providers.Mailgun.APIKey
			if wrong {
				key += "0"
			}
			mg := mailgun.NewMailgun("mg.example.com", key)
			mg.SetAPIBase(b.Providers.Mailgun.BaseURL + "/v3")
			m := mailgun.NewMessage(sdkFrom, "small", smallText(extra), "Agent <agent@example.com>")
			if !small {
				m = mailgun.NewMessage(sdkFrom, sdkSubject, sdkText, "Agent <agent@example.com>")
				m.AddCC("cc@example.com")
				m.AddBCC("bcc@example.com")
				m.SetHTML(sdkHTML)
				m.AddReaderAttachment("terms.pdf", readCloser(sdkAttachment))
				m.AddTag("signup")
			}
			msg, id, err := mg.Send(context.Background(), m)
			var unexpected *mailgun.UnexpectedResponseError
			if errors.As(err, &unexpected) {
				if unexpected.Actual == 401 && string(unexpected.Data) != "Forbidden" {
					t.Errorf("401 body %q", unexpected.Data)
				}
				return sent{status: unexpected.Actual, err: err}
			}
			if err != nil {
				t.Fatalf("mailgun: %v", err)
			}
			if msg != "Queued. Thank you." || !strings.HasPrefix(id, "<") || !strings.HasSuffix(id, "@mg.example.com>") {
				t.Errorf("answer %q %q", msg, id)
			}
			return sent{status: 200}
		},
	}
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

func readCloser(b []byte) nopCloser { return nopCloser{bytes.NewReader(b)} }

func sesSDK() sdk {
	return sdk{name: "ses",
		ok: sent{status: 200}, bad: sent{status: 403, code: "SignatureDoesNotMatch"}, size: sent{status: 400, code: "MessageRejected"},
		quota: sent{status: 429, code: "TooManyRequestsException"},
		send: func(t *testing.T, b rpc.Bundle, small bool, extra int, wrong bool) sent {
			keys := b.Providers.SES
			secret := keys.SecretAccessKey
			if wrong {
				secret = "A" + secret[1:]
				if secret == keys.SecretAccessKey {
					secret = "B" + secret[1:]
				}
			}
			client := sesv2.New(sesv2.Options{Region: "eu-central-1", BaseEndpoint: aws.String(keys.Endpoint), RetryMaxAttempts: 1,
				Credentials: credentials.NewStaticCredentialsProvider(keys.AccessKeyID, secret, "")})
			in := &sesv2.SendEmailInput{FromEmailAddress: aws.String(sdkFrom),
				Destination: &sestypes.Destination{ToAddresses: []string{"Agent <agent@example.com>"}}}
			if small {
				raw := "From: " + sdkFrom + "\r\nTo: agent@example.com\r\nSubject: small\r\n\r\n" + smallText(extra)
				in.Content = &sestypes.EmailContent{Raw: &sestypes.RawMessage{Data: []byte(raw)}}
			} else {
				in.Destination.CcAddresses = []string{"cc@example.com"}
				in.Destination.BccAddresses = []string{"bcc@example.com"}
				in.Content = &sestypes.EmailContent{Simple: &sestypes.Message{
					Subject:     &sestypes.Content{Data: aws.String(sdkSubject)},
					Body:        &sestypes.Body{Text: &sestypes.Content{Data: aws.String(sdkText)}, Html: &sestypes.Content{Data: aws.String(sdkHTML)}},
					Attachments: []sestypes.Attachment{{FileName: aws.String("terms.pdf"), ContentType: aws.String("application/pdf"), RawContent: sdkAttachment}},
				}}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := client.SendEmail(ctx, in)
			var api smithy.APIError
			var resp *awshttp.ResponseError
			if errors.As(err, &api) && errors.As(err, &resp) {
				return sent{status: resp.HTTPStatusCode(), code: api.ErrorCode(), err: err}
			}
			if err != nil {
				t.Fatalf("ses: %v", err)
			}
			if out.MessageId == nil || *out.MessageId == "" {
				t.Errorf("no MessageId")
			}
			return sent{status: http.StatusOK}
		},
	}
}

// TestProviderRouteRefusals: requests that never reach a provider's
// parser are still answered in its shape: no credential (SES: no
// signature, or a malformed one), a wrong method, a body of another type.
func TestProviderRouteRefusals(t *testing.T) {
	_, id, w := writertest.Setup(t, rpc.ProfileCandidate, "fixed", nil)
	for _, c := range []struct {
		method, path, contentType, body string
		auth                            func(*http.Request)
		status                          int
		want                            string
	}{
		{"POST", "/v3/mail/send", "application/json", "{}", nil, 401, `{"errors":[{"message":"The provided authorization grant is invalid, expired, or revoked","field":null,"help":null}]}`},
		{"POST", "/email", "application/json", "{}", nil, 401, `"ErrorCode":10`},
		{"POST", "/email/batch", "application/json", "[]", nil, 401, `"ErrorCode":10`},
		{"POST", "/v3/any.example/messages", "application/x-www-form-urlencoded", "", nil, 401, "Forbidden"},
		{"POST", "/v3/any.example/messages", "application/x-www-form-urlencoded", "", func(r *http.Request) { r.SetBasicAuth("user", id.MailAPIToken) }, 401, "Forbidden"},
		{"POST", "/v2/email/outbound-emails", "application/json", "{}", nil, 403, `{"message":"Missing Authentication Token"}`},
		{"POST", "/v2/email/outbound-emails", "application/json", "{}", func(r *http.Request) { r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=x") }, 403, "incomplete or malformed"},
		{"GET", "/v3/mail/send", "", "", nil, 405, "method_not_allowed"},
		{"POST", "/email", "text/plain", "{}", func(r *http.Request) { r.Header.Set("X-Postmark-Server-Token", id.MailAPIToken) }, 422, `"ErrorCode":409`},
		{"POST", "/v3/mail/send", "text/plain", "{}", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+id.MailAPIToken) }, 415, `"errors"`},
		{"POST", "/v3/mail/send", "text/plain", "{}", func(r *http.Request) { r.Header.Set("Authorization", "Bearer nope") }, 401, `"errors"`},
		// A batch whose emails are all invalid: a wrong token is still
		// the answer; with the right one each email has its verdict.
		{"POST", "/email/batch", "application/json", `[{"From":"x"}]`, func(r *http.Request) { r.Header.Set("X-Postmark-Server-Token", "nope") }, 401, `"ErrorCode":10`},
		{"POST", "/email/batch", "application/json", `[{"From":"x"}]`, func(r *http.Request) { r.Header.Set("X-Postmark-Server-Token", id.MailAPIToken) }, 200, `[{"ErrorCode":300`},
	} {
		req, _ := http.NewRequest(c.method, w.URL+c.path, strings.NewReader(c.body))
		if c.contentType != "" {
			req.Header.Set("Content-Type", c.contentType)
		}
		if c.auth != nil {
			c.auth(req)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(body), c.want) {
			t.Errorf("%s %s: %d %s, want %d with %s", c.method, c.path, resp.StatusCode, body, c.status, c.want)
		}
		if c.path == "/v2/email/outbound-emails" && resp.Header.Get("X-Amzn-ErrorType") == "" {
			t.Errorf("%s: no X-Amzn-ErrorType", c.path)
		}
	}
}
