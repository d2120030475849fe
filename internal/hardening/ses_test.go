package hardening

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/pgtest"
	"github.com/websitebench/mailplane/internal/sendapi/ses"
	"github.com/websitebench/mailplane/internal/seskey"
	"github.com/websitebench/mailplane/internal/sigv4"
	"github.com/websitebench/mailplane/internal/wbenv"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// TestSESRefusalsNameNoTrial is the audit's SES attack on mail-plane up:
// SigV4 requests whose access key id is trial B's namespace and whose
// signature is wrong. They are counted, never written into B's trail, and
// they cost what the same requests naming a namespace that does not exist
// cost, so a stranger cannot probe for namespaces by timing. B's own key
// pair, as its bundle hands it out, is made with the plane's SES key
// (0600 in its data directory), not from the ledger alone.
func TestSESRefusalsNameNoTrial(t *testing.T) {
	u := newUpSys(t, "--quota-messages", "0", "--quota-bytes", "0")
	s := u.sys
	ctx := ctxT(t, 5*time.Minute)
	b, err := s.plane.admin.TrialOpen(ctx, &rpc.TrialOpenRequest{Profile: rpc.ProfileCandidate})
	if err != nil {
		t.Fatal(err)
	}
	keys := b.Providers.SES
	token := b.CandidateEnvironment[wbenv.MailAPIToken]
	s.secret("B's mail-API token", token)
	s.secret("B's SES secret", keys.SecretAccessKey)
	s.secret("B's read capability", b.ReadCapability)

	// The bundle's secret is made with the key file, which only the
	// plane's user may read.
	keyFile := filepath.Join(filepath.Dir(u.bundle.AdminGrantFile), seskey.File)
	fi, err := os.Stat(keyFile)
	if err != nil {
		t.Fatalf("the plane keeps no SES key: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s is %v; want 0600", keyFile, fi.Mode().Perm())
	}
	if want := sigv4.Secret(planeSESKey(t, filepath.Dir(keyFile)), ident.Digest(token), b.Namespace); keys.SecretAccessKey != want {
		t.Fatalf("B's bundle hands out an SES secret not made with the plane's key file")
	}

	hc := httpClient(1)
	endpoint := keys.Endpoint + ses.Path
	send := func(ns, secret, subject string) (answer, time.Duration) {
		body := `{"FromEmailAddress":` + strconv.Quote(rpc.CandidateSender) + `,"Destination":{"ToAddresses":["b@example.com"]},` +
			`"Content":{"Simple":{"Subject":{"Data":` + strconv.Quote(subject) + `},"Body":{"Text":{"Data":"x"}}}}}`
		req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		signSES(t, req, body, ns, secret)
		start := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("SES request for %s: %v", ns, err)
		}
		a := answer{status: resp.StatusCode, header: resp.Header}
		buf := new(strings.Builder)
		_, err = io.Copy(buf, resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		a.body = buf.String()
		if a.status >= 400 {
			s.saw("SES "+ns+" "+subject, a.body)
		}
		return a, took
	}
	// B's own key pair opens B, so that B's binding is in the plane's
	// cache when the refusals come (the case a cache would make fastest).
	if a, _ := send(b.Namespace, keys.SecretAccessKey, "B's own"); a.status != http.StatusOK {
		t.Fatalf("B's own SES key pair: %d %s", a.status, a.body)
	}
	before := trailLen(t, s, b.Namespace)
	health, err := s.plane.admin.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	unbound := health.UnboundRefusals

	// A wrong secret of the right shape; a missing namespace of the same
	// length as B's. The two kinds interleave (B, missing, missing, B, …)
	// so that the machine's drift falls on both alike. Medians further
	// apart than the bound are measured once more before the test fails
	// (2 busy cores): a real difference, such as a trail write, shows in
	// both rounds.
	wrong := sigv4.SecretPrefix + strings.Repeat("x", 36)
	missing := ident.Namespace()
	samples := scale(300, 1500)
	sent := 0
	var answerB, answerMissing answer
	round := func() (mB, mMissing time.Duration) {
		var forB, forMissing []time.Duration
		for i := 0; i < 2*samples; i++ {
			ns := b.Namespace
			if i%4 == 1 || i%4 == 2 {
				ns = missing
			}
			a, took := send(ns, wrong, "probe "+strconv.Itoa(sent))
			sent++
			if a.status < 400 || a.status >= 500 {
				t.Fatalf("a wrong signature for %s: %d %s; want a refusal", ns, a.status, a.body)
			}
			if ns == b.Namespace {
				forB, answerB = append(forB, took), a
			} else {
				forMissing, answerMissing = append(forMissing, took), a
			}
		}
		return median(forB), median(forMissing)
	}
	apart := func(a, b time.Duration) bool { r := float64(a) / float64(b); return r > 1.2 || r < 1/1.2 }
	mB, mMissing := round()
	figure(t, "ses-refusal samples=%d median_b=%v median_missing=%v ratio=%.3f", samples, mB, mMissing, float64(mB)/float64(mMissing))
	if apart(mB, mMissing) {
		mB, mMissing = round()
		figure(t, "ses-refusal again samples=%d median_b=%v median_missing=%v ratio=%.3f", samples, mB, mMissing, float64(mB)/float64(mMissing))
		if apart(mB, mMissing) {
			t.Errorf("a refusal naming B takes %v (median), one naming a missing namespace %v: more than 20%% apart, so namespaces can be probed by timing", mB, mMissing)
		}
	}
	if answerB.status != answerMissing.status || answerB.body != answerMissing.body {
		t.Errorf("refusals differ: B's %d %q, a missing namespace's %d %q", answerB.status, answerB.body, answerMissing.status, answerMissing.body)
	}
	if after := trailLen(t, s, b.Namespace); after != before {
		t.Errorf("B's trail grew from %d to %d events under %d refused signatures naming it", before, after, sent/2)
	}
	health, err = s.plane.admin.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := health.UnboundRefusals - unbound; n < int64(sent) {
		t.Errorf("%d refusals counted as naming no trial; want at least %d", n, sent)
	}
}

// trailLen is the number of events in ns's trail, as the operator exports
// it.
func trailLen(t *testing.T, s *sys, ns string) int {
	t.Helper()
	n := 0
	req := &rpc.EventsRequest{Namespace: ns}
	for {
		page, err := s.plane.admin.Export(ctxT(t, 30*time.Second), req)
		if err != nil {
			t.Fatalf("export %s: %v", ns, err)
		}
		n += len(page.Events)
		if len(page.Events) < rpc.MaxEventPage {
			return n
		}
		req.After = int64(n)
	}
}

// median is the middle of ds.
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestSESKeyOfAFleet: two planes on one PostgreSQL, each with the key
// file it minted, make different SES secrets for the same trial of the
// same ledger from the same token: the ledger and the token make none
// without the key. The second plane's log says its key is not the
// database's; a third plane given a copy of the first's key file says
// nothing and makes the first's secrets.
func TestSESKeyOfAFleet(t *testing.T) {
	pg := pgtest.Start(t)
	dsn := itest.WriteSecret(t, "dsn", pg.DSN())
	advertise := []string{"--store", "postgres", "--dsn-file", dsn, "--advertise-writer", "http://127.0.0.1:9",
		"--advertise-inbox", "http://127.0.0.1:9", "--advertise-gateway", "http://127.0.0.1:9", "--advertise-smtp", "127.0.0.1:9"}
	a := startPlane(t, "", advertise...)
	b := startPlane(t, "", advertise...)
	copied := filepath.Join(itest.ShortTempDir(t), "data")
	if err := os.MkdirAll(copied, 0o700); err != nil {
		t.Fatal(err)
	}
	keyA, err := os.ReadFile(filepath.Join(a.data, seskey.File))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(copied, seskey.File), keyA, 0o600); err != nil {
		t.Fatal(err)
	}
	c := startPlane(t, copied, advertise...)

	bundle, err := a.admin.TrialOpen(ctxT(t, 30*time.Second), &rpc.TrialOpenRequest{Profile: rpc.ProfileCandidate})
	if err != nil {
		t.Fatal(err)
	}
	digest := ident.Digest(bundle.CandidateEnvironment[wbenv.MailAPIToken])
	secret := bundle.Providers.SES.SecretAccessKey
	for _, p := range []*planeProc{a, b, c} {
		fi, err := os.Stat(filepath.Join(p.data, seskey.File))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v; want a 0600 key file", p.data, fi, err)
		}
	}
	if sigv4.Secret(planeSESKey(t, a.data), digest, bundle.Namespace) != secret ||
		sigv4.Secret(planeSESKey(t, c.data), digest, bundle.Namespace) != secret {
		t.Fatal("the first plane's key, or its copy, does not make the secret the bundle hands out")
	}
	if sigv4.Secret(planeSESKey(t, b.data), digest, bundle.Namespace) == secret {
		t.Fatal("a plane with another key makes the same SES secret from the same ledger and token")
	}
	const warning = "this plane's SES key is not the one the database's trials were opened with"
	itest.Eventually(t, "the second plane's warning", 10*time.Second, func() bool { return strings.Contains(b.Output(), warning) })
	for _, p := range []*planeProc{a, c} {
		if strings.Contains(p.Output(), warning) {
			t.Errorf("a plane with the database's key warns that it is not:\n%s", p.Output())
		}
	}
}
