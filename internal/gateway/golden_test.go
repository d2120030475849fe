package gateway_test

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

var update = flag.Bool("update", false, "rewrite testdata/wire/*.json from the gateway's answers")

// varying are the members whose values differ from run to run (minted
// ids, clocks, hashes over them); the golden files hold a fixed word in
// their place, and everything else byte for byte.
var varying = regexp.MustCompile(`"(received_at|time|prev|hash|email_id|visible_at)":"[^"]*"`)

// The gateway's JSON for messages and for a page of events is pinned byte
// for byte: the Python client, mailclient and docs/evaluator.md read it,
// and its types are joined by hand from the plane's (gateway.go's wire),
// so a change to either side must show here as a changed golden file.
// The messages cover every member: a planted label, a fault, an
// attachment, a display name, HTML, a code and an action link.
func TestWireGolden(t *testing.T) {
	plane := itest.StartPlane(t)
	id := plane.Trial(t, rpc.ProfileCandidate)
	gw := startGateway(t, plane)
	s := newSender(t, plane, id)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := plane.Admin.TrialFaults(ctx, id.Namespace, json.RawMessage(`[{"door": "smtp", "sends": [2], "do": "duplicate", "copies": 2}]`)); err != nil {
		t.Fatal(err)
	}
	s.sendRaw(t, []string{"user@example.com"}, "From: Acme <"+rpc.CandidateSender+">\r\nSubject: Welcome <&>\r\nMIME-Version: 1.0\r\n"+
		"Content-Type: multipart/mixed; boundary=m\r\n\r\n--m\r\nContent-Type: multipart/alternative; boundary=b\r\n\r\n"+
		"--b\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nYour code is 770011. Büro\r\nhttps://site.example/a?b=1&c=2\r\n"+
		"--b\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>Your code is <b>770011</b></p><a href=\"https://site.example/verify?t=1&amp;u=2\">Verify your email</a>\r\n--b--\r\n"+
		"--m\r\nContent-Type: text/plain; name=\"note.txt\"\r\nContent-Disposition: attachment; filename=\"note.txt\"\r\n\r\nhello\r\n--m--\r\n")
	s.send(t, []string{"second@example.com"}, "Twice", "No code here.")
	if _, err := plane.Admin.TrialPlant(ctx, &rpc.PlantRequest{Namespace: id.Namespace, Label: "phish", Subject: "Planted", Text: "Your code is 111111."}); err != nil {
		t.Fatal(err)
	}

	base := gw.URL + "/api/namespaces/" + id.Namespace
	for _, c := range []struct{ file, path string }{
		{"messages.json", "/messages"},
		{"latest.json", "/messages/latest"},
		{"message.json", "/messages/1"},
		{"events.json", "/events"},
	} {
		ans := get(t, base+c.path, id.ReadCapability)
		if ans.status != 200 {
			t.Fatalf("%s: status %d: %s", c.path, ans.status, ans.body)
		}
		got := varying.ReplaceAllString(strings.ReplaceAll(ans.body, id.Namespace, "NAMESPACE"), `"$1":"VARIES"`)
		path := filepath.Join("testdata", "wire", c.file)
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to write it)", err)
		}
		if got != string(want) {
			t.Errorf("%s differs from %s:\n got %s\nwant %s", c.path, path, got, want)
		}
	}
}
