package webhooks

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mailgun/mailgun-go/v4"
	"github.com/sendgrid/sendgrid-go/helpers/eventwebhook"
	svix "github.com/svix/svix-webhooks/go"
)

// received is one request a real endpoint on 127.0.0.1 took.
type received struct {
	header http.Header
	body   []byte
	user   string
	pass   string
	basic  bool
}

// endpoint is a real HTTP server that keeps what it receives.
func endpoint(t *testing.T) (*httptest.Server, chan received) {
	got := make(chan received, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u, p, ok := r.BasicAuth()
		got <- received{header: r.Header.Clone(), body: b, user: u, pass: p, basic: ok}
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

// post sends r as the hooks process does.
func post(t *testing.T, r Request) {
	req, err := http.NewRequest(http.MethodPost, r.URL, bytes.NewReader(r.Body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range r.Header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

func fact(kind string) Fact {
	return Fact{Kind: kind, EmailID: "2f1c6a0e-3c1b-4d5e-9f00-0123456789ab", From: "noreply@site.example", To: []string{"agent@example.com"},
		URL: "https://site.example/verify?x=1", Time: time.Now(), Namespace: "ns1", TrailSeq: 4}
}

var testKeys = Derive([]byte("0123456789abcdef0123456789abcdef"), []byte("a trial's token digest"))

// TestOfficialVerifiersAccept: Svix's library (Resend), SendGrid's
// eventwebhook helper and mailgun-go each accept what we sign, as it
// arrives at a real endpoint, keyed by what the trial's bundle hands the
// candidate; Postmark's endpoint gets the URL's Basic credentials.
func TestOfficialVerifiersAccept(t *testing.T) {
	srv, got := endpoint(t)
	for _, kind := range []string{Sent, Delivered, Opened, Clicked, Bounced, Complained} {
		f := fact(kind)
		if kind == Bounced || kind == Complained {
			f.Recipient = "bounced@resend.dev"
		}
		id := EventID(f, 0)

		r, err := Build(Hook{Provider: Resend, URL: srv.URL + "/resend"}, testKeys, id, f, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		post(t, r)
		in := <-got
		wh, err := svix.NewWebhook(testKeys.ResendSecret)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(in.body, in.header); err != nil {
			t.Errorf("%s: svix refuses our signature: %v", kind, err)
		}
		if err := wh.Verify(append(in.body, ' '), in.header); err == nil {
			t.Errorf("%s: svix accepts a changed body", kind)
		}
		var re struct {
			Type string `json:"type"`
			Data struct {
				EmailID string `json:"email_id"`
			} `json:"data"`
		}
		if err := json.Unmarshal(in.body, &re); err != nil || re.Type != "email."+kind || re.Data.EmailID != f.EmailID {
			t.Errorf("resend body %s: %v", in.body, err)
		}

		r, err = Build(Hook{Provider: SendGrid, URL: srv.URL + "/sg"}, testKeys, id, f, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		post(t, r)
		in = <-got
		pub, err := eventwebhook.ConvertPublicKeyBase64ToECDSA(testKeys.SendGridPublicKey())
		if err != nil {
			t.Fatal(err)
		}
		sig, ts := in.header.Get(eventwebhook.VerificationHTTPHeader), in.header.Get(eventwebhook.TimestampHTTPHeader)
		if ok, err := eventwebhook.VerifySignature(pub, in.body, sig, ts); !ok || err != nil {
			t.Errorf("%s: sendgrid's helper refuses our signature: %v", kind, err)
		}
		if ok, _ := eventwebhook.VerifySignature(pub, append(in.body, ' '), sig, ts); ok {
			t.Errorf("%s: sendgrid's helper accepts a changed body", kind)
		}
		var sg []map[string]any
		if err := json.Unmarshal(in.body, &sg); err != nil || len(sg) != 1 || sg[0]["sg_message_id"] != f.EmailID || sg[0]["event"] != sendgridEvents[kind] {
			t.Errorf("sendgrid body %s: %v", in.body, err)
		}

		r, err = Build(Hook{Provider: Mailgun, URL: srv.URL + "/mg"}, testKeys, id, f, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		post(t, r)
		in = <-got
		var mg struct {
			Signature mailgun.Signature `json:"signature"`
			EventData struct {
				Event   string `json:"event"`
				ID      string `json:"id"`
				Message struct {
					Headers map[string]string `json:"headers"`
				} `json:"message"`
			} `json:"event-data"`
		}
		if err := json.Unmarshal(in.body, &mg); err != nil {
			t.Fatal(err)
		}
		verifier := mailgun.NewMailgun("site.example", "unused api key")
		verifier.SetWebhookSigningKey(testKeys.MailgunKey)
		if ok, err := verifier.VerifyWebhookSignature(mg.Signature); !ok || err != nil {
			t.Errorf("%s: mailgun-go refuses our signature: %v", kind, err)
		}
		other := mailgun.NewMailgun("site.example", "unused api key")
		other.SetWebhookSigningKey(Derive([]byte("0123456789abcdef0123456789abcdef"), []byte("another trial")).MailgunKey)
		if ok, _ := other.VerifyWebhookSignature(mg.Signature); ok {
			t.Errorf("%s: another trial's key verifies", kind)
		}
		if mg.EventData.Event != mailgunEvents[kind] || mg.EventData.ID != id || mg.EventData.Message.Headers["message-id"] != f.EmailID+"@site.example" {
			t.Errorf("mailgun body %s", in.body)
		}

		r, err = Build(Hook{Provider: Postmark, URL: strings.Replace(srv.URL, "http://", "http://hook:s3cret@", 1) + "/pm"}, testKeys, id, f, time.Now())
		if kind == Sent {
			if err != ErrNoEvent {
				t.Errorf("postmark sent: %v, want ErrNoEvent", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		post(t, r)
		in = <-got
		if !in.basic || in.user != "hook" || in.pass != "s3cret" {
			t.Errorf("%s: postmark's endpoint got no Basic credentials", kind)
		}
		var pm map[string]any
		if err := json.Unmarshal(in.body, &pm); err != nil || pm["RecordType"] != postmarkRecords[kind] || pm["MessageID"] != f.EmailID {
			t.Errorf("postmark body %s: %v", in.body, err)
		}
	}
}
