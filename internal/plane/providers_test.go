package plane

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/internal/ledger/sqlledger"
	"github.com/websitebench/mailplane/internal/sigv4"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// signed is a proof for namespace ns signed with secret, as an SES client
// would sign a request at now.
func signed(ns, secret string, now time.Time) *rpc.SigV4Proof {
	day := now.UTC().Format("20060102")
	sts := sigv4.Algorithm + "\n" + now.UTC().Format("20060102T150405Z") + "\n" + day + "/eu-west-1/ses/aws4_request\n" + strings.Repeat("ab", 32)
	m := hmac.New(sha256.New, sigv4.Key(secret, day, "eu-west-1", sigv4.Service))
	m.Write([]byte(sts))
	return &rpc.SigV4Proof{AccessKeyID: ns, StringToSign: sts, Signature: hex.EncodeToString(m.Sum(nil))}
}

// TestSigV4Opens: a proof opens the trial whose namespace it names only if
// it is signed with the secret the bundle handed out for that trial; not
// with another trial's, not after the trial moved to another namespace.
func TestSigV4Opens(t *testing.T) {
	now := time.Now()
	idA := rpc.Identity{Namespace: "trial-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", MailAPIToken: ident.Capability()}
	idB := rpc.Identity{Namespace: "trial-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", MailAPIToken: ident.Capability()}
	trA := ledger.Trial{Namespace: idA.Namespace, MailAPIToken: ident.Digest(idA.MailAPIToken)}
	nsA := ledger.Namespace{Name: idA.Namespace}
	b := &Broker{sesKey: ephemeralKey()}
	secretA := b.providers("http://w", idA).SES.SecretAccessKey
	secretB := b.providers("http://w", idB).SES.SecretAccessKey
	if !b.sigV4Opens(trA, nsA, signed(idA.Namespace, secretA, now), now) {
		t.Fatal("the bundle's own key pair does not open its trial")
	}
	rotated := trA
	rotated.Namespace = "trial-cccccccccccccccccccccccccccccccc"
	for name, c := range map[string]struct {
		tr    ledger.Trial
		proof *rpc.SigV4Proof
	}{
		"another trial's secret":    {trA, signed(idA.Namespace, secretB, now)},
		"another trial's key id":    {trA, signed(idB.Namespace, secretA, now)},
		"a namespace moved on":      {rotated, signed(idA.Namespace, secretA, now)},
		"an hour old":               {trA, signed(idA.Namespace, secretA, now.Add(-time.Hour))},
		"no proof":                  {trA, nil},
		"the mail-API token as key": {trA, signed(idA.Namespace, idA.MailAPIToken, now)},
		"another plane's key":       {trA, signed(idA.Namespace, (&Broker{sesKey: ephemeralKey()}).providers("http://w", idA).SES.SecretAccessKey, now)},
	} {
		if b.sigV4Opens(c.tr, nsA, c.proof, now) {
			t.Errorf("%s opened the trial", name)
		}
	}
}

// countingLedger counts the policy reads a SigV4 binding makes, and the
// trail reads of the webhook pump.
type countingLedger struct {
	ledger.Ledger
	namespaces, trials, trails atomic.Int64
}

func (l *countingLedger) Events(ctx context.Context, ns string, after int64, limit int) ([]string, error) {
	l.trails.Add(1)
	return l.Ledger.Events(ctx, ns, after, limit)
}

func (l *countingLedger) Namespace(ctx context.Context, name string) (ledger.Namespace, error) {
	l.namespaces.Add(1)
	return l.Ledger.Namespace(ctx, name)
}

func (l *countingLedger) Trial(ctx context.Context, id int64) (ledger.Trial, error) {
	l.trials.Add(1)
	return l.Ledger.Trial(ctx, id)
}

// TestSigV4RefusalsCostAlike: a shared writer's SigV4 proof with a wrong
// signature gets the same answer, after the same two store reads and one
// derivation of a secret, whether
// its namespace does not exist, is a trial's current one (its binding
// cached by a signature that opened it, or not), or is one a rotation
// retired; and the trial's own key pair still opens it from the cache.
func TestSigV4RefusalsCostAlike(t *testing.T) {
	bg := context.Background()
	l, err := sqlledger.Open(bg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	counted := &countingLedger{Ledger: l}
	var derived atomic.Int64
	secretOf := sesSecret
	sesSecret = func(key, digest []byte, ns string) string { derived.Add(1); return secretOf(key, digest, ns) }
	t.Cleanup(func() { sesSecret = secretOf })
	br := NewBroker(counted, nil, Quotas{}, zerolog.Nop())
	socket := serveBroker(t, br)
	grant, err := br.CreateGrant(bg, &rpc.GrantCreateRequest{Role: rpc.RoleWriter})
	if err != nil {
		t.Fatal(err)
	}
	writer := client(t, socket, grant.Grant)
	open := func() (rpc.Identity, string) {
		id, err := br.CreateTrial(bg, &rpc.TrialCreateRequest{Profile: rpc.ProfileCandidate})
		if err != nil {
			t.Fatal(err)
		}
		return id, br.providers("http://w", id).SES.SecretAccessKey
	}
	current, secret := open()
	retired, _ := open()
	if _, err := br.RotateTrial(bg, &rpc.TrialRotateRequest{Namespace: retired.Namespace}); err != nil {
		t.Fatal(err)
	}
	wrong := sigv4.SecretPrefix + strings.Repeat("x", 36)
	// check answers a proof for ns signed with secret, and counts the
	// namespace reads, trial reads and secrets derived for it.
	check := func(ns, secret string) (work [3]int64, err error) {
		n, tr, d := counted.namespaces.Load(), counted.trials.Load(), derived.Load()
		err = writer.CheckCredential(bg, &rpc.CredentialRequest{Via: rpc.ViaHTTP, API: "ses", SigV4: signed(ns, secret, time.Now())})
		return [3]int64{counted.namespaces.Load() - n, counted.trials.Load() - tr, derived.Load() - d}, err
	}
	missingWork, missingErr := check(ident.Namespace(), wrong)
	if rpc.CodeOf(missingErr) != rpc.CodeUnauthorized {
		t.Fatalf("a missing namespace: %v", missingErr)
	}
	for _, c := range []struct {
		name, ns string
		cache    bool
	}{
		{"a current namespace", current.Namespace, false},
		{"a current namespace whose binding is cached", current.Namespace, true},
		{"a retired namespace", retired.Namespace, false},
	} {
		if c.cache {
			if _, err := check(current.Namespace, secret); err != nil {
				t.Fatalf("the trial's own key pair: %v", err)
			}
			if work, err := check(current.Namespace, secret); err != nil || work != [3]int64{0, 0, 1} {
				t.Fatalf("the trial's own key pair again: %v, reads and derivations %v; want it served from the cache", err, work)
			}
		}
		work, err := check(c.ns, wrong)
		if err == nil || err.Error() != missingErr.Error() {
			t.Errorf("%s: answered %v, a missing namespace %v", c.name, err, missingErr)
		}
		if work != missingWork {
			t.Errorf("%s: %v namespace reads, trial reads and derivations; a missing namespace %v", c.name, work, missingWork)
		}
	}
}
