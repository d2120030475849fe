package writer

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/apierr"
	"github.com/websitebench/mailplane/internal/mailmsg"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// TestAttachmentsReadBack: attachments composed into the message come back
// from mailmsg.Parse (the plane's reader) with their names, types, content
// ids and exact bytes, and the body is unchanged, with and without html.
func TestAttachmentsReadBack(t *testing.T) {
	pdf := []byte("%PDF-1.4\n\x00\x01\x02 binary \xff\xfe")
	png := []byte("\x89PNG\r\n\x1a\n....")
	list := []attachment{
		{Filename: "invoice.pdf", ContentType: "application/pdf", Content: pdf},
		{Filename: "Grüße résumé.txt", ContentType: "text/plain", Content: []byte("line\r\n")},
		{Filename: "logo.png", ContentType: "image/png", ContentID: "logo@site", Content: png},
		{Filename: "empty.bin", ContentType: "application/octet-stream", Content: nil},
	}
	for _, html := range []*string{nil, ptr(`<p>see <img src="cid:logo@site"></p>`)} {
		text := "Your invoice is attached.\r\n"
		e := &email{From: "s@example.com", To: []string{"u@example.com"}, Subject: "Invoice", Text: &text, HTML: html, Attachments: list}
		p := mailmsg.Parse(compose(e, time.Unix(0, 0)))
		if p.Text != text || (html != nil && p.HTML != *html) {
			t.Fatalf("body: text %q html %q", p.Text, p.HTML)
		}
		if len(p.Attachments) != len(list) {
			t.Fatalf("%d attachments read back, want %d: %+v", len(p.Attachments), len(list), p.Attachments)
		}
		// Parse lists attachments first, then inline parts.
		want := []attachment{list[0], list[1], list[3], list[2]}
		for i, a := range p.Attachments {
			w := want[i]
			sum := sha256.Sum256(w.Content)
			if a.FileName != w.Filename || a.ContentType != w.ContentType || a.ContentID != w.ContentID ||
				a.Size != len(w.Content) || a.SHA256 != hex.EncodeToString(sum[:]) {
				t.Errorf("attachment %d: %+v, want %s %s %q (%d bytes)", i, a, w.Filename, w.ContentType, w.ContentID, len(w.Content))
			}
		}
	}
}

// TestParseAttachments: the accepted shapes (base64 padded or not and
// wrapped, a list of byte values, a type derived from the name, either
// content id key) and the refused ones, path with 422.
func TestParseAttachments(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString([]byte("hello!!"))
	ok := []struct {
		name string
		v    any
		want attachment
	}{
		{"base64", []any{map[string]any{"filename": "a.txt", "content": b64}}, attachment{Filename: "a.txt", ContentType: "text/plain", Content: []byte("hello!!")}},
		{"unpadded, wrapped", []any{map[string]any{"filename": "a.bin", "content": strings.TrimRight(b64[:4]+"\r\n"+b64[4:], "=")}}, attachment{Filename: "a.bin", ContentType: attachmentDefaultType, Content: []byte("hello!!")}},
		{"byte list", []any{map[string]any{"filename": "x.pdf", "content": []any{1.0, 255.0, 0.0}}}, attachment{Filename: "x.pdf", ContentType: "application/pdf", Content: []byte{1, 255, 0}}},
		{"explicit type with params", []any{map[string]any{"filename": "x", "content": "", "content_type": "text/csv; charset=utf-8"}}, attachment{Filename: "x", ContentType: "text/csv", Content: []byte{}}},
		{"content_id", []any{map[string]any{"filename": "l.png", "content": b64, "content_id": "logo"}}, attachment{Filename: "l.png", ContentType: "image/png", ContentID: "logo", Content: []byte("hello!!")}},
		{"inline_content_id", []any{map[string]any{"filename": "l.png", "content": b64, "inline_content_id": "logo", "path": ""}}, attachment{Filename: "l.png", ContentType: "image/png", ContentID: "logo", Content: []byte("hello!!")}},
	}
	for _, c := range ok {
		got, fail := parseAttachments(c.v)
		if fail != nil || len(got) != 1 || got[0].Filename != c.want.Filename || got[0].ContentType != c.want.ContentType ||
			got[0].ContentID != c.want.ContentID || string(got[0].Content) != string(c.want.Content) {
			t.Errorf("%s: %+v %v, want %+v", c.name, got, fail, c.want)
		}
	}
	bad := []struct {
		name string
		v    any
		want *apierr.Error
	}{
		{"path", []any{map[string]any{"filename": "a.pdf", "path": "https://example.com/a.pdf"}}, errAttachmentPath},
		{"path and content", []any{map[string]any{"filename": "a.pdf", "path": "https://x/a", "content": b64}}, errAttachmentPath},
		{"not a list", map[string]any{"filename": "a", "content": b64}, errAttachments},
		{"no content", []any{map[string]any{"filename": "a"}}, errAttachments},
		{"no filename", []any{map[string]any{"content": b64}}, errAttachments},
		{"bad base64", []any{map[string]any{"filename": "a", "content": "!!!"}}, errAttachments},
		{"byte out of range", []any{map[string]any{"filename": "a", "content": []any{256.0}}}, errAttachments},
		{"fraction", []any{map[string]any{"filename": "a", "content": []any{1.5}}}, errAttachments},
		{"filename with a path", []any{map[string]any{"filename": "../etc/passwd", "content": b64}}, errAttachments},
		{"filename with a newline", []any{map[string]any{"filename": "a\r\nX-Evil: 1", "content": b64}}, errAttachments},
		{"multipart type", []any{map[string]any{"filename": "a", "content": b64, "content_type": "multipart/mixed; boundary=x"}}, errAttachments},
		{"bad type", []any{map[string]any{"filename": "a", "content": b64, "content_type": "nonsense"}}, errAttachments},
		{"content id with brackets", []any{map[string]any{"filename": "a", "content": b64, "content_id": "<x>"}}, errAttachments},
		{"two different content ids", []any{map[string]any{"filename": "a", "content": b64, "content_id": "x", "inline_content_id": "y"}}, errAttachments},
		{"unknown key", []any{map[string]any{"filename": "a", "content": b64, "disposition": "inline"}}, errAttachments},
		{"too many", make([]any, maxAttachments+1), errAttachments},
	}
	for _, c := range bad {
		if got, fail := parseAttachments(c.v); fail != c.want {
			t.Errorf("%s: %+v %v, want %v", c.name, got, fail, c.want.Code)
		}
	}
}

// blockingPlane accepts every send, holding each until release is closed.
type blockingPlane struct {
	entered chan struct{}
	release chan struct{}
	mu      sync.Mutex
	sends   int
}

func (p *blockingPlane) Health(context.Context) (rpc.HealthResponse, error) {
	return rpc.HealthResponse{Store: "ok"}, nil
}
func (p *blockingPlane) Bootstrap(context.Context, string) (rpc.BootstrapResponse, error) {
	return rpc.BootstrapResponse{}, nil
}
func (p *blockingPlane) Send(_ context.Context, req *rpc.SendRequest) (rpc.SendResponse, error) {
	p.mu.Lock()
	p.sends++
	p.mu.Unlock()
	p.entered <- struct{}{}
	<-p.release
	return rpc.SendResponse{ID: "id-1", Seq: 1, Namespace: "trial-x"}, nil
}
func (p *blockingPlane) ResolveCredential(context.Context, *rpc.CredentialRequest) (rpc.CredentialResponse, error) {
	return rpc.CredentialResponse{Namespace: "trial-x"}, nil
}
func (p *blockingPlane) Refused(context.Context, *rpc.RefusalRequest) error { return nil }

// TestConcurrentIdempotentRequests: while the first request with a key is
// still being answered, another with the same key (on the same route and
// credential) is 409 concurrent_idempotent_requests and is not sent; the
// same key on the batch route, or under another credential, is not held
// up; after the first ends, the key is free again.
func TestConcurrentIdempotentRequests(t *testing.T) {
	plane := &blockingPlane{entered: make(chan struct{}, 8), release: make(chan struct{})}
	h := NewHandler(Config{}, plane, zerolog.Nop())
	body := `{"from":"s@example.com","to":"u@example.com","subject":"s","text":"t"}`
	post := func(path, cred, payload string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(payload))
		req.Header.Set("Authorization", "Bearer "+cred)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "k1")
		req.Header.Set("Content-Length", strconv.Itoa(len(payload)))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	done := make(chan *httptest.ResponseRecorder, 3)
	go func() { done <- post("/emails", "tok", body) }()
	<-plane.entered
	if rec := post("/emails", "tok", body); rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), `"concurrent_idempotent_requests"`) {
		t.Fatalf("second request: %d %s", rec.Code, rec.Body)
	}
	go func() { done <- post("/emails", "other-token", body) }()
	go func() { done <- post("/emails/batch", "tok", "["+body+"]") }()
	<-plane.entered
	<-plane.entered
	close(plane.release)
	for range 3 {
		if rec := <-done; rec.Code != http.StatusOK {
			t.Fatalf("held request: %d %s", rec.Code, rec.Body)
		}
	}
	if rec := post("/emails", "tok", body); rec.Code != http.StatusOK {
		t.Fatalf("after the first ended: %d %s", rec.Code, rec.Body)
	}
	if plane.sends != 4 {
		t.Fatalf("%d sends reached the plane, want 4", plane.sends)
	}
}
