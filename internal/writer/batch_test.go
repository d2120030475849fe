package writer_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/resend/resend-go/v3"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/writer/writertest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

func resendClient(t *testing.T, w *writertest.Writer, token string) *resend.Client {
	t.Helper()
	c := resend.NewClient(token)
	base, err := url.Parse(w.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	c.BaseURL = base
	return c
}

// postBatch posts body to POST /emails/batch.
func postBatch(t testing.TB, base, token, body string, headers map[string]string) answer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/emails/batch", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return do(t, req)
}

func sum256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestResendSDKAttachments: the Resend Go SDK sends an email with two
// attachments (one inline, by content id) under an idempotency key; the
// repeat answers the same id and stores nothing; the evaluator's view lists
// exactly the attachments sent (names, types, sizes, SHA-256 of the bytes),
// and the stored size (the quota's measure) includes them. Base64 content
// over plain HTTP works too; path and scheduled_at are refused with 422.
func TestResendSDKAttachments(t *testing.T) {
	p, id, w := writertest.Setup(t, rpc.ProfileCandidate, "fixed", nil)
	client := resendClient(t, w, id.MailAPIToken)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	pdf := append([]byte("%PDF-1.4\n"), make([]byte, 40<<10)...)
	for i := range pdf[9:] {
		pdf[9+i] = byte(i * 7)
	}
	logo := []byte("\x89PNG\r\n\x1a\nnot really a png")
	req := &resend.SendEmailRequest{
		From:    rpc.CandidateSender,
		To:      []string{"agent@example.com"},
		Subject: "Your invoice",
		Html:    `<p>Invoice attached. <img src="cid:logo"></p>`,
		Text:    "Invoice attached.",
		Attachments: []*resend.Attachment{
			{Filename: "invoice.pdf", Content: pdf},
			{Filename: "logo.png", Content: logo, ContentType: "image/png", ContentId: "logo"},
		},
	}
	opts := &resend.SendEmailOptions{IdempotencyKey: "invoice-1"}
	first, err := client.Emails.SendWithOptions(ctx, req, opts)
	if err != nil {
		t.Fatalf("send with attachments: %v", err)
	}
	again, err := client.Emails.SendWithOptions(ctx, req, opts)
	if err != nil || again.Id != first.Id {
		t.Fatalf("repeat: %v, id %q want %q", err, again.Id, first.Id)
	}
	changed := *req
	changed.Attachments = []*resend.Attachment{{Filename: "invoice.pdf", Content: pdf[:100]}}
	if _, err := client.Emails.SendWithOptions(ctx, &changed, opts); err == nil || !strings.Contains(err.Error(), "Same idempotency key") {
		t.Fatalf("other attachment, same key: %v", err)
	}

	// Base64 content, as Resend's REST API and Node SDK send it.
	body := `{"from":"` + rpc.CandidateSender + `","to":"agent@example.com","subject":"b64","text":"t",` +
		`"attachments":[{"filename":"notes.txt","content":"` + base64.StdEncoding.EncodeToString([]byte("hello\r\n")) + `"}]}`
	if a := postJSON(t, w.URL, id.MailAPIToken, body, nil); a.status != 200 {
		t.Fatalf("base64 attachment: %d %v", a.status, a.body)
	}
	// path would make the plane fetch a URL: refused.
	body = `{"from":"` + rpc.CandidateSender + `","to":"agent@example.com","subject":"p","text":"t","attachments":[{"filename":"a.pdf","path":"https://example.com/a.pdf"}]}`
	if a := postJSON(t, w.URL, id.MailAPIToken, body, nil); a.status != 422 || a.code() != "attachment_path_unsupported" {
		t.Fatalf("path: %d %v", a.status, a.body)
	}
	scheduled := &resend.SendEmailRequest{From: rpc.CandidateSender, To: []string{"a@example.com"}, Subject: "later", Text: "t", ScheduledAt: "in 1 min"}
	if _, err := client.Emails.SendWithContext(ctx, scheduled); err == nil || !strings.Contains(err.Error(), "scheduled_at is not supported") {
		t.Fatalf("scheduled_at: %v", err)
	}

	msgs := writertest.Messages(t, p, id)
	if len(msgs) != 2 {
		t.Fatalf("%d messages stored, want 2", len(msgs))
	}
	m := msgs[0]
	if m.UUID != first.Id || m.Text != req.Text || m.HTML != req.Html {
		t.Fatalf("stored %+v", m)
	}
	want := []rpc.Attachment{
		{FileName: "invoice.pdf", ContentType: "application/pdf", Size: len(pdf), Checksums: rpc.Checksums{SHA256: sum256(pdf)}},
		{FileName: "logo.png", ContentType: "image/png", ContentID: "logo", Size: len(logo), Checksums: rpc.Checksums{SHA256: sum256(logo)}},
	}
	if len(m.Attachments) != len(want) {
		t.Fatalf("attachments %+v", m.Attachments)
	}
	for i, a := range m.Attachments {
		if a.FileName != want[i].FileName || a.ContentType != want[i].ContentType || a.ContentID != want[i].ContentID ||
			a.Size != want[i].Size || a.Checksums.SHA256 != want[i].Checksums.SHA256 {
			t.Errorf("attachment %d: %+v, want %+v", i, a, want[i])
		}
	}
	if m.Size < len(pdf) {
		t.Fatalf("stored size %d does not count the attachment's %d bytes", m.Size, len(pdf))
	}
	if a := msgs[1].Attachments; len(a) != 1 || a[0].FileName != "notes.txt" || a[0].Size != 7 {
		t.Fatalf("base64 attachment read back as %+v", a)
	}
}

// TestResendSDKBatch: Batch.Send in strict mode stores every email in
// order; one invalid email refuses the whole strict batch with its index
// and stores nothing; permissive stores the valid ones and names the
// invalid ones; an idempotency key replays a batch's ids and refuses
// another batch; a wrong key is 401 whatever the body.
func TestResendSDKBatch(t *testing.T) {
	p, id, w := writertest.Setup(t, rpc.ProfileCandidate, "fixed", []string{"--quota-messages", "0", "--quota-bytes", "0"})
	client := resendClient(t, w, id.MailAPIToken)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mail := func(to, subject string) *resend.SendEmailRequest {
		return &resend.SendEmailRequest{From: "Site <" + rpc.CandidateSender + ">", To: []string{to}, Subject: subject, Text: "Hello " + to}
	}

	strict, err := client.Batch.SendWithOptions(ctx, []*resend.SendEmailRequest{mail("a@example.com", "s1"), mail("b@example.com", "s2"), mail("c@example.com", "s3")},
		&resend.BatchSendEmailOptions{BatchValidation: resend.BatchValidationStrict})
	if err != nil || len(strict.Data) != 3 || len(strict.Errors) != 0 {
		t.Fatalf("strict batch: %v %+v", err, strict)
	}
	_, err = client.Batch.Send([]*resend.SendEmailRequest{mail("d@example.com", "never"), mail("not an address", "bad"), mail("e@example.com", "never")})
	if err == nil || !strings.Contains(err.Error(), "index 1") {
		t.Fatalf("strict batch with an invalid email: %v", err)
	}
	perm, err := client.Batch.SendWithOptions(ctx, []*resend.SendEmailRequest{mail("f@example.com", "p1"), mail("not an address", "bad"), mail("g@example.com", "p3")},
		&resend.BatchSendEmailOptions{BatchValidation: resend.BatchValidationPermissive})
	if err != nil || len(perm.Data) != 2 || len(perm.Errors) != 1 || perm.Errors[0].Index != 1 {
		t.Fatalf("permissive batch: %v %+v", err, perm)
	}

	keyed := []*resend.SendEmailRequest{mail("h@example.com", "k1"), mail("i@example.com", "k2")}
	opts := &resend.BatchSendEmailOptions{IdempotencyKey: "batch-1"}
	k1, err := client.Batch.SendWithOptions(ctx, keyed, opts)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := client.Batch.SendWithOptions(ctx, keyed, opts)
	if err != nil || len(k2.Data) != 2 || k2.Data[0].Id != k1.Data[0].Id || k2.Data[1].Id != k1.Data[1].Id {
		t.Fatalf("repeated keyed batch: %v %+v, first %+v", err, k2, k1)
	}
	if _, err := client.Batch.SendWithOptions(ctx, keyed[:1], opts); err == nil || !strings.Contains(err.Error(), "Same idempotency key") {
		t.Fatalf("another batch under the key: %v", err)
	}

	bad := resendClient(t, w, "wrong-key")
	if _, err := bad.Batch.Send([]*resend.SendEmailRequest{mail("not an address", "x")}); err == nil || !strings.Contains(err.Error(), "API key is invalid") {
		t.Fatalf("wrong key: %v", err)
	}
	for _, body := range []string{`[]`, `{}`, `[` + strings.Repeat(`{"from":"`+rpc.CandidateSender+`","to":"a@example.com","subject":"s","text":"t"},`, 100) + `{}]`} {
		if a := postBatch(t, w.URL, id.MailAPIToken, body, nil); a.status == 200 {
			t.Fatalf("batch %.40q accepted", body)
		}
	}
	if a := postBatch(t, w.URL, id.MailAPIToken, `[{"from":"`+rpc.CandidateSender+`","to":"a@example.com","subject":"s","text":"t"}]`,
		map[string]string{"x-batch-validation": "lenient"}); a.status != 422 || a.code() != "invalid_batch_validation" {
		t.Fatalf("unknown mode: %d %v", a.status, a.body)
	}

	var got []string
	for _, m := range writertest.Messages(t, p, id) {
		got = append(got, m.Subject)
	}
	if strings.Join(got, ",") != "s1,s2,s3,p1,p3,k1,k2" {
		t.Fatalf("stored %v", got)
	}
}

// TestBatchCannotMixTrials: a batch is sent under one credential and goes
// to the trial that credential opens; an email in it that names another
// trial (the X-WebsiteBench-* headers a selecting listener reads) is
// invalid, so a strict batch is refused as a whole and a permissive one
// sends only the others, into its own trial. Neither trial receives the
// other's mail. A batch under the quota's end answers 429 (strict) or
// names each email the quota refused (permissive).
func TestBatchCannotMixTrials(t *testing.T) {
	p, id, other := writertest.TwoTrials(t, rpc.ProfileCandidate)
	w := writertest.Start(t, p, id, "fixed")
	own := `{"from":"` + rpc.CandidateSender + `","to":"a@example.com","subject":"own","text":"t"}`
	foreign := `{"from":"` + rpc.CandidateSender + `","to":"a@example.com","subject":"foreign","text":"t","headers":{"X-WebsiteBench-Namespace":"` + other.Namespace +
		`","X-WebsiteBench-Capability":"` + other.WriteCapability + `"}}`
	if a := postBatch(t, w.URL, id.MailAPIToken, "["+own+","+foreign+"]", nil); a.status != 400 || a.code() != "invalid_message" {
		t.Fatalf("strict mixed batch: %d %v", a.status, a.body)
	}
	if n := writertest.Count(t, p, id) + writertest.Count(t, p, other); n != 0 {
		t.Fatalf("a refused batch stored %d", n)
	}
	a := postBatch(t, w.URL, id.MailAPIToken, "["+own+","+foreign+"]", map[string]string{"x-batch-validation": "permissive"})
	if a.status != 200 {
		t.Fatalf("permissive mixed batch: %d %v", a.status, a.body)
	}
	if errs, _ := a.body["errors"].([]any); len(errs) != 1 {
		t.Fatalf("permissive errors: %v", a.body)
	}
	if writertest.Count(t, p, id) != 1 || writertest.Count(t, p, other) != 0 {
		t.Fatal("a permissive batch reached another trial")
	}
	// Another trial's token sends the whole batch into that trial only.
	if a := postBatch(t, w.URL, other.MailAPIToken, "["+own+"]", nil); a.status != 401 {
		t.Fatalf("another trial's token at this trial's writer: %d %v", a.status, a.body)
	}

	q := itest.StartPlane(t, "--quota-messages", "2")
	qid := q.Trial(t, rpc.ProfileCandidate)
	qw := writertest.Start(t, q, qid, "fixed")
	three := "[" + own + "," + own + "," + own + "]"
	a = postBatch(t, qw.URL, qid.MailAPIToken, three, map[string]string{"x-batch-validation": "permissive"})
	if errs, _ := a.body["errors"].([]any); a.status != 200 || len(errs) != 1 {
		t.Fatalf("permissive batch over the quota: %d %v", a.status, a.body)
	}
	if a := postBatch(t, qw.URL, qid.MailAPIToken, three, nil); a.status != http.StatusTooManyRequests {
		t.Fatalf("strict batch over the quota: %d %v", a.status, a.body)
	}
}
