package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/seskey"
	"github.com/websitebench/mailplane/internal/sigv4"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// The writer's provider APIs (docs/providers.md), each measured against
// POST /emails on the same writer and trial, at 512 B and concurrency 8:
// issue #26's goal is each within 80% of POST /emails.

// providerConc is the concurrency of the provider figures.
const providerConc = 8

// providerNames are the provider paths, as the report names them, in the
// order of providerPaths.
var providerNames = []string{"SendGrid /v3/mail/send", "Postmark /email", "Mailgun /v3/{domain}/messages", "SES /v2/email/outbound-emails"}

// providerPath is one provider API's request, built afresh for each send
// (SES signs each one).
type providerPath struct {
	name   string
	status int
	build  func() *http.Request
}

// providerPaths are the four APIs' requests for trial id on the writer at
// base, carrying the ingest message of n bytes; SES's signed with
// sesSecret, the trial's secret access key.
func providerPaths(base string, id rpc.Identity, sesSecret string, n int) []providerPath {
	text := bodyText(n)
	sendgrid, _ := json.Marshal(map[string]any{"personalizations": []any{map[string]any{"to": []any{map[string]string{"email": recipient}}}},
		"from": map[string]string{"email": sender}, "subject": subject, "content": []any{map[string]string{"type": "text/plain", "value": text}}})
	postmark, _ := json.Marshal(map[string]string{"From": sender, "To": recipient, "Subject": subject, "TextBody": text})
	mailgun := url.Values{"from": {sender}, "to": {recipient}, "subject": {subject}, "text": {text}}.Encode()
	ses, _ := json.Marshal(map[string]any{"FromEmailAddress": sender, "Destination": map[string]any{"ToAddresses": []string{recipient}},
		"Content": map[string]any{"Simple": map[string]any{"Subject": map[string]string{"Data": subject}, "Body": map[string]any{"Text": map[string]string{"Data": text}}}}})
	sesSum := sha256.Sum256(ses)
	creds := aws.Credentials{AccessKeyID: id.Namespace, SecretAccessKey: sesSecret}
	signer := v4.NewSigner()
	req := func(path, contentType string, body []byte) *http.Request {
		r, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(body))
		r.Header.Set("Content-Type", contentType)
		return r
	}
	return []providerPath{
		{providerNames[0], http.StatusAccepted, func() *http.Request {
			r := req("/v3/mail/send", "application/json", sendgrid)
			r.Header.Set("Authorization", "Bearer "+id.MailAPIToken)
			return r
		}},
		{providerNames[1], http.StatusOK, func() *http.Request {
			r := req("/email", "application/json", postmark)
			r.Header.Set("X-Postmark-Server-Token", id.MailAPIToken)
			return r
		}},
		{providerNames[2], http.StatusOK, func() *http.Request {
			r := req("/v3/mg.example.com/messages", "application/x-www-form-urlencoded", []byte(mailgun))
			r.SetBasicAuth("api", id.MailAPIToken)
			return r
		}},
		{providerNames[3], http.StatusOK, func() *http.Request {
			r := req("/v2/email/outbound-emails", "application/json", ses)
			signer.SignHTTP(context.Background(), creds, r, hex.EncodeToString(sesSum[:]), sigv4.Service, "us-east-1", time.Now())
			return r
		}},
	}
}

// requestWorkers make workers that send what build makes, sharing one
// keep-alive client.
func requestWorkers(build func() *http.Request, want, conc int) (workerFactory, func()) {
	hc := httpClient(conc)
	mk := func(int) (worker, error) {
		return worker{do: func() (time.Duration, error) {
			return timed(func() error { return do(hc, build(), want) })
		}}, nil
	}
	return mk, hc.CloseIdleConnections
}

// ingestProviders measures each provider API against POST /emails, 512 B.
// The trial's SES secret is made, as the plane makes it, with the key in
// the plane's data directory.
func (h *harness) ingestProviders(ctx context.Context, store string, pl *plane, w *surface, id rpc.Identity) error {
	key, err := seskey.Ensure(filepath.Join(pl.data, seskey.File))
	if err != nil {
		return err
	}
	size := sizes[0]
	for _, p := range providerPaths(w.url, id, sigv4.Secret(key, ident.Digest(id.MailAPIToken), id.Namespace), size.Bytes) {
		subj, closeS := requestWorkers(p.build, p.status, providerConc)
		base, closeB := postWorkers(w.url+"/emails", id.MailAPIToken, emailJSON(size.Bytes), providerConc)
		err := h.ingestPair(ctx, store, p.name, size.Name, providerConc, subj, "POST /emails", base)
		closeS()
		closeB()
		if err != nil {
			return err
		}
	}
	return nil
}

// providerGoals are issue #26's: each provider path ≥ 80% of POST
// /emails, embedded store, 512 B.
func providerGoals() []ratioGoal {
	var g []ratioGoal
	for _, name := range providerNames {
		g = append(g, ratioGoal{"embedded", name, "512 B", 80})
	}
	return g
}
