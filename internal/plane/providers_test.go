package plane

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/ledger"
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
