package writer_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/writer"
	"github.com/websitebench/mailplane/internal/writer/writertest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// FuzzProviderBody posts arbitrary bodies to each provider route of the
// writer's handler, with the trial's credential, in front of a real plane.
// Whatever the input: the answer is the provider's (a status it uses, a
// JSON body but for Mailgun's 401 and SendGrid's 202), a refusal stores
// nothing, and an acceptance stores what the answer says.
func FuzzProviderBody(f *testing.F) {
	from := rpc.CandidateSender
	seeds := []struct {
		route int
		body  string
	}{
		{0, `{"personalizations":[{"to":[{"email":"a@example.com"}],"cc":[{"email":"c@example.com"}]}],"from":{"email":"` + from + `"},"subject":"s","content":[{"type":"text/html","value":"<p>h</p>"}]}`},
		{0, `{"personalizations":[{"to":[{"email":"a@example.com"}]},{"to":[{"email":"b@example.com"}],"subject":"2"}],"from":{"email":"` + from + `"},"subject":"s","template_id":"d-1"}`},
		{1, `{"From":"` + from + `","To":"a@example.com, \"B, b\" <b@example.com>","Subject":"s","TextBody":"t","Headers":[{"Name":"X-A","Value":"1"}]}`},
		{2, `[{"From":"` + from + `","To":"a@example.com","Subject":"s","HtmlBody":"h"},{"From":"x"}]`},
		{3, "from=" + from + "&to=a%40example.com&subject=s&text=t&o:tag=a&v:k=%C3%A9"},
	}
	for _, s := range seeds {
		f.Add(s.route, []byte(s.body))
	}
	p := itest.StartPlane(f, "--quota-messages", "0", "--quota-bytes", "0")
	id := p.Trial(f, rpc.ProfileCandidate)
	h := writer.NewHandler(writer.Config{SMTPHost: "127.0.0.1", SMTPPort: 25}, p.Client(f, id.WriterGrant), zerolog.Nop())
	type route struct {
		path, contentType string
		auth              func(*http.Request)
		statuses          map[int]bool
	}
	bearer := func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+id.MailAPIToken) }
	server := func(r *http.Request) { r.Header.Set("X-Postmark-Server-Token", id.MailAPIToken) }
	basic := func(r *http.Request) { r.SetBasicAuth("api", id.MailAPIToken) }
	routes := []route{
		{"/v3/mail/send", "application/json", bearer, map[int]bool{202: true, 400: true, 413: true, 415: true}},
		{"/email", "application/json", server, map[int]bool{200: true, 413: true, 422: true}},
		{"/email/batch", "application/json", server, map[int]bool{200: true, 413: true, 422: true}},
		{"/v3/mg.example.com/messages", "application/x-www-form-urlencoded", basic, map[int]bool{200: true, 400: true, 413: true}},
	}
	f.Fuzz(func(t *testing.T, which int, body []byte) {
		rt := routes[(which%len(routes)+len(routes))%len(routes)]
		before := writertest.Count(t, p, id)
		req := httptest.NewRequest(http.MethodPost, rt.path, bytes.NewReader(body))
		req.Header.Set("Content-Type", rt.contentType)
		req.Header.Set("Content-Length", strconv.Itoa(len(body)))
		rt.auth(req)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if !rt.statuses[rec.Code] || rec.Header().Get("Cache-Control") != "no-store" {
			t.Fatalf("%s: unexpected answer %d %s", rt.path, rec.Code, rec.Body)
		}
		stored := writertest.Count(t, p, id) - before
		switch {
		case rec.Code >= 400 && stored != 0:
			t.Fatalf("%s: a refusal (%d %s) stored %d messages", rt.path, rec.Code, rec.Body, stored)
		case rec.Code < 400 && rt.path != "/email/batch" && stored < 1:
			t.Fatalf("%s: an acceptance (%d %s) stored nothing", rt.path, rec.Code, rec.Body)
		}
	})
}
