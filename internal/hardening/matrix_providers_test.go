package hardening

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"go/ast"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/sendapi"
	"github.com/websitebench/mailplane/internal/sendapi/mailgun"
	"github.com/websitebench/mailplane/internal/sendapi/postmark"
	"github.com/websitebench/mailplane/internal/sendapi/sendgrid"
	"github.com/websitebench/mailplane/internal/sendapi/ses"
	"github.com/websitebench/mailplane/internal/seskey"
	"github.com/websitebench/mailplane/internal/sigv4"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// The writer's provider send APIs (internal/writer/providers.go) in the
// isolation matrix: each is a writer route keyed as the table keys its
// plane call. SendGrid, Postmark and Mailgun present a bearer credential
// (the row of send accepts it as "mail_api_token", keyed by the golden table's keys
// as POST /emails is); SES presents a SigV4 signature ("sigv4_signature")
// whose access key id names the namespace, and which only the trial's SES
// secret signs. The matrix signs with every credential as if it were that
// secret, naming each trial's namespace.

// Names the table gives what a provider request presents.
const (
	presentsToken = "mail_api_token"
	presentsSigV4 = "sigv4_signature"
)

// mailgunDomain is the sending domain of the Mailgun route: any domain is
// served, and none selects a trial.
const mailgunDomain = "mg.example.com"

// sesSecretOf is trial id's SES secret access key, as its bundle hands it
// out (rpc.Providers.SES; the plane makes it again from what it keeps and
// its SES key): made from the first secret the table keys the mail API
// by for its profile (the golden table's profiles).
func sesSecretOf(t testing.TB, sesKey []byte, id rpc.Identity) string {
	token := id.MailAPIToken
	if apiTokenOf(t, id.Profile) == "bootstrap_token" {
		token = id.BootstrapToken
	}
	return sigv4.Secret(sesKey, ident.Digest(token), id.Namespace)
}

// planeSESKey is the SES key the plane keeps in its data directory.
func planeSESKey(t testing.TB, data string) []byte {
	t.Helper()
	path := filepath.Join(data, seskey.File)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the plane keeps no SES key: %v", err)
	}
	key, err := seskey.Ensure(path)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// providerRoutes are the writer's provider routes: SES's opened by the
// trial's SES secret, the others by what opens POST /emails.
func (w *world) providerRoutes() []route {
	bearer := func(api sendapi.API, path string) route {
		return route{surface: "writer", kind: api.Name() + " " + path, role: rpc.RoleWriter, method: rpc.MethodSend,
			selects: selCredential, keys: w.keys.emails, api: api, path: path, presents: presentsToken}
	}
	return []route{
		bearer(sendgrid.API{}, sendgrid.Path),
		bearer(postmark.API{}, postmark.PathEmail),
		bearer(postmark.API{}, postmark.PathBatch),
		bearer(mailgun.API{}, "/v3/"+mailgunDomain+"/messages"),
		// The access key id names the namespace, as a path names it.
		{surface: "writer", kind: "ses " + ses.Path, role: rpc.RoleWriter, method: rpc.MethodSend, selects: selCredential,
			keys: []credKind{sesSecret}, ns: true, api: ses.API{}, path: ses.Path, presents: presentsSigV4},
	}
}

// providerCell sends one email through a provider route of instance in
// with c (SES: signed with c as the secret, for target's namespace), and
// judges the answer as request does: a success in the provider's shape,
// whose mail checkDestinations finds in trial dest; a refusal a 4xx.
func (w *world) providerCell(r route, in instance, target, dest int, c cred, subject string) (bool, string) {
	t := w.t
	from, to := senderOf(w.profile), "cell@example.com"
	q := strconv.Quote
	var body, contentType string
	header := map[string]string{}
	switch r.api.Name() {
	case "sendgrid":
		body = `{"personalizations":[{"to":[{"email":` + q(to) + `}]}],"from":{"email":` + q(from) + `},"subject":` + q(subject) +
			`,"content":[{"type":"text/plain","value":"x"}]}`
		contentType = "application/json"
		if c.value != "" {
			header["Authorization"] = "Bearer " + c.value
		}
	case "postmark":
		body = `{"From":` + q(from) + `,"To":` + q(to) + `,"Subject":` + q(subject) + `,"TextBody":"x"}`
		if r.api.Batch(r.path) {
			body = "[" + body + "]"
		}
		contentType = "application/json"
		if c.value != "" {
			header["X-Postmark-Server-Token"] = c.value
		}
	case "mailgun":
		body = url.Values{"from": {from}, "to": {to}, "subject": {subject}, "text": {"x"}}.Encode()
		contentType = "application/x-www-form-urlencoded"
	case "ses":
		body = `{"FromEmailAddress":` + q(from) + `,"Destination":{"ToAddresses":[` + q(to) + `]},` +
			`"Content":{"Simple":{"Subject":{"Data":` + q(subject) + `},"Body":{"Text":{"Data":"x"}}}}}`
		contentType = "application/json"
	default:
		t.Fatalf("no request for provider %s", r.api.Name())
	}
	req, err := http.NewRequest(http.MethodPost, in.url+r.path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if r.api.Name() == "mailgun" && c.value != "" {
		req.SetBasicAuth("api", c.value)
	}
	if r.api.Name() == "ses" && c.value != "" {
		signSES(t, req, body, w.ids[target].Namespace, c.value)
	}
	a, err := w.do(req)
	if err != nil {
		t.Fatalf("POST %s of the %s: %v", r.path, in.name, err)
	}
	if ok, known := providerAccepted(r, a); known {
		return ok && dest >= 0, a.body // where it went, checkDestinations judges
	}
	// What was sent, for the audit: an answer may echo it. SES's secret
	// is never sent (only a signature made with it), so an answer that
	// shows it leaks it.
	sent := fmt.Sprintf("%s %v %s", r.kind, req.Header, body)
	if r.api.Name() != "ses" {
		sent += " " + c.value
	}
	w.sys.saw(sent, a.body)
	what := fmt.Sprintf("writer %s of the %s", r.kind, in.name)
	if a.status < 400 || a.status >= 500 {
		t.Errorf("%s: refused with %d, want a 4xx: %s", what, a.status, a.body)
	}
	for _, id := range w.ids {
		if strings.Contains(a.body, id.InboxToken) {
			t.Errorf("%s: a refusal reveals an inbox token", what)
		}
	}
	return false, fmt.Sprintf("%d %s", a.status, a.body)
}

// providerAccepted reads a provider's answer: known is false for a
// refusal, ok whether an accepted answer is the provider's success.
func providerAccepted(r route, a answer) (ok, known bool) {
	switch r.api.Name() {
	case "sendgrid":
		return a.status == http.StatusAccepted && a.header.Get("X-Message-Id") != "", a.status == http.StatusAccepted
	case "postmark":
		if a.status != http.StatusOK {
			return false, false
		}
		// Each email's verdict: ErrorCode 0 is sent.
		var one struct{ ErrorCode int }
		var list []struct{ ErrorCode int }
		if r.api.Batch(r.path) {
			if json.Unmarshal([]byte(a.body), &list) != nil || len(list) != 1 {
				return false, true
			}
			one = list[0]
		} else if json.Unmarshal([]byte(a.body), &one) != nil {
			return false, true
		}
		return one.ErrorCode == 0, one.ErrorCode == 0
	case "mailgun", "ses":
		var m struct {
			ID        string `json:"id"`
			MessageID string `json:"MessageId"`
		}
		json.Unmarshal([]byte(a.body), &m)
		return a.status == http.StatusOK && m.ID+m.MessageID != "", a.status == http.StatusOK
	}
	return false, false
}

// signSES signs req as an AWS SDK signs a SESv2 SendEmail: access key id
// ns, secret secret, over body.
func signSES(t interface{ Fatalf(string, ...any) }, req *http.Request, body, ns, secret string) {
	sum := sha256.Sum256([]byte(body))
	payload := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", payload)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	creds := aws.Credentials{AccessKeyID: ns, SecretAccessKey: secret}
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, payload, sigv4.Service, "us-east-1", time.Now()); err != nil {
		t.Fatalf("sigv4: %v", err)
	}
}

// do sends req with the matrix's client and reads its answer.
func (w *world) do(req *http.Request) (answer, error) {
	resp, err := w.hc.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}, nil
}

// checkProviderTable: every provider API the writer serves (its variable
// sendAPIs, read from its source) has a route in the matrix, each route
// is its API's (Match), and each is keyed by a kind of credential the
// row of its method names.
func (w *world) checkProviderTable(routes []route) {
	t := w.t
	names := sendAPIPackages(t, filepath.Join(repoRoot(), "internal/writer"), "sendAPIs")
	if len(names) == 0 {
		t.Fatalf("no provider APIs in internal/writer's sendAPIs")
	}
	for _, n := range names {
		covered := false
		for _, r := range routes {
			covered = covered || (r.api != nil && r.api.Name() == n)
		}
		if !covered {
			t.Errorf("the writer serves provider API %q, which the isolation matrix does not cover", n)
		}
	}
	for _, r := range routes {
		if r.api == nil {
			continue
		}
		if !r.api.Match(r.path) {
			t.Errorf("route %s is not a path of provider API %s", r.kind, r.api.Name())
		}
		if !strings.Contains(strings.Join(names, " "), r.api.Name()) {
			t.Errorf("the matrix covers provider API %s, which the writer does not serve", r.api.Name())
		}
	}
}

// sendAPIPackages reads the package names of the elements of the
// package-level variable name in dir (sendgrid.API{}, …: "sendgrid").
func sendAPIPackages(t interface {
	Fatal(...any)
	Helper()
}, dir, name string) []string {
	t.Helper()
	var out []string
	for _, f := range sourceFiles(t, dir) {
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, id := range vs.Names {
				lit, ok := valueAt(vs, i).(*ast.CompositeLit)
				if id.Name != name || !ok {
					continue
				}
				for _, e := range lit.Elts {
					if el, ok := e.(*ast.CompositeLit); ok {
						if sel, ok := el.Type.(*ast.SelectorExpr); ok {
							if pkg, ok := sel.X.(*ast.Ident); ok {
								out = append(out, pkg.Name)
							}
						}
					}
				}
			}
			return false
		})
	}
	return out
}

func valueAt(vs *ast.ValueSpec, i int) ast.Expr {
	if i < len(vs.Values) {
		return vs.Values[i]
	}
	return nil
}
