package plane

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/redact"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// FuzzMayHoldSecret: whatever mayHoldSecret passes, redaction leaves as it
// is, so skipping it never lets a secret into a trail.
func FuzzMayHoldSecret(f *testing.F) {
	for _, s := range []string{"agent@example.com", strings.Repeat("a", 64) + "@example.com", "mpg_" + strings.Repeat("0", 64),
		"token=abc@example.com", "bearer x", strings.Repeat("A", 43), "password:x",
		"mps_" + strings.Repeat("a", 36) + "@example.com", "mpd_" + strings.Repeat("A", 26)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !mayHoldSecret(s) && redact.Text(s) != s {
			t.Fatalf("%q: redaction changes it, but it was judged safe", s)
		}
	})
}

// TestRedactionKnowsEveryMintedSecret mints one of each secret the plane
// mints, through a real plane where it can (ident's formats: the mail-API
// and bootstrap tokens, the write and read capabilities, the inbox token,
// every grant; the SES secret access key of a bundle; a netns door's key),
// and checks that none passes any redaction point, in the places a secret
// turns up: a log line (redact.Writer), an error or evidence text
// (redact.Text), a mail shown in the console (redact.Minted), an address
// in a trail (address). Not among them: the SES access key id (the
// namespace, which names and opens nothing), the storage tag (no
// credential), and the evidence and SES keys, which never leave their files.
func TestRedactionKnowsEveryMintedSecret(t *testing.T) {
	p := itest.StartPlane(t, "--advertise-writer", "http://127.0.0.1:9", "--advertise-inbox", "http://127.0.0.1:9",
		"--advertise-gateway", "http://127.0.0.1:9", "--advertise-smtp", "127.0.0.1:9")
	id := p.Trial(t, rpc.ProfileCandidate)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bundle, err := p.Admin.TrialOpen(ctx, &rpc.TrialOpenRequest{Profile: rpc.ProfileCandidate})
	if err != nil {
		t.Fatal(err)
	}
	shared, err := p.Admin.GrantCreate(ctx, rpc.RoleWriter)
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{
		"mail-API token": id.MailAPIToken, "bootstrap token": id.BootstrapToken, "write capability": id.WriteCapability,
		"read capability": id.ReadCapability, "inbox token": id.InboxToken, "writer grant": id.WriterGrant,
		"inbox grant": id.InboxGrant, "minted shared grant": shared,
		"SES secret access key": bundle.Providers.SES.SecretAccessKey, "netns door key": doorKey(),
	}
	for _, role := range []rpc.Role{rpc.RoleAdmin, rpc.RoleGateway, rpc.RoleWriter, rpc.RoleInbox, rpc.RoleConsole} {
		secrets[string(role)+" grant file"] = p.Grant(t, role)
	}
	for what, s := range secrets {
		if s == "" {
			t.Fatalf("no %s minted", what)
		}
		for _, in := range []string{s, "the secret " + s + " here", `{"value":"` + s + `"}`, "GET /inbox/" + s + "/messages/1",
			"key=" + s, `<a href="https://x.example/?k=` + s + `">go</a>`, "aws_secret_access_key " + s} {
			var log bytes.Buffer
			redact.Writer{W: &log}.Write([]byte(`{"level":"info","message":` + strconv.Quote(in) + "}\n"))
			for point, out := range map[string]string{"redact.Text": redact.Text(in), "redact.Minted": redact.Minted(in), "the log": log.String()} {
				if strings.Contains(out, s) {
					t.Errorf("the %s passes %s in %q", what, point, strings.ReplaceAll(in, s, "<SECRET>"))
				}
			}
		}
		if a := address(s + "@example.com"); strings.Contains(a, s) {
			t.Errorf("the %s passes a trail's address", what)
		}
	}
}
