package plane

import (
	"context"
	"crypto/rand"
	"errors"
	"time"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/internal/seskey"
	"github.com/websitebench/mailplane/internal/sigv4"
	"github.com/websitebench/mailplane/internal/webhooks"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// sesRegion is the region a bundle names; the writer accepts any.
const sesRegion = "us-east-1"

// SetSESKey sets the key every trial's SES secret is made with
// (seskey.Ensure: kept in the plane's data directory, never in the
// ledger). Without it a broker makes one for its own lifetime.
func (b *Broker) SetSESKey(key []byte) { b.sesKey = key }

// ephemeralKey is a broker's SES key until SetSESKey.
func ephemeralKey() []byte {
	k := make([]byte, seskey.Size)
	rand.Read(k)
	return k
}

// providers is a trial's part of a bundle for the writer's
// provider-compatible send APIs at writerURL: the token that opens its
// mail API (its profile's apiToken: a candidate's mail-API token,
// another profile's bootstrap token) for SendGrid, Postmark and Mailgun, and for SES the
// trial's key pair, made from that token with the plane's SES key.
func (b *Broker) providers(writerURL string, id rpc.Identity) *rpc.Providers {
	token := id.MailAPIToken
	if profileOf(id.Profile).apiToken == secretBootstrapToken {
		token = id.BootstrapToken
	}
	hk := webhooks.Derive(b.sesKey, ident.Digest(token))
	return &rpc.Providers{
		Resend:   rpc.ResendWebhook{WebhookSecret: hk.ResendSecret},
		SendGrid: rpc.ProviderToken{BaseURL: writerURL, APIKey: token, WebhookPublicKey: hk.SendGridPublicKey()},
		Postmark: rpc.PostmarkToken{BaseURL: writerURL, ServerToken: token},
		Mailgun:  rpc.ProviderToken{BaseURL: writerURL, APIKey: token, WebhookSigningKey: hk.MailgunKey},
		SES: rpc.SESKeys{Endpoint: writerURL, Region: sesRegion, AccessKeyID: id.Namespace,
			SecretAccessKey: sigv4.Secret(b.sesKey, ident.Digest(token), id.Namespace)},
	}
}

// sesSecret is sigv4.Secret, the secret a proof is checked with; a test
// counts the derivations each kind of refusal makes.
var sesSecret = sigv4.Secret

// writeDigest is the digest of the token providers hands out for trial
// tr, which its SES secret is made from.
func writeDigest(tr ledger.Trial) []byte {
	if profileOf(tr.Profile).apiToken == secretBootstrapToken {
		return tr.BootstrapToken
	}
	return tr.MailAPIToken
}

// sigV4Opens reports whether proof is a valid SES signature for trial tr,
// whose current namespace ns is the proof's access key id. The secret is
// made again from what the plane keeps of the trial's write token and its
// SES key; the writer, which only relays the proof, never holds it.
//
// The signature is derived and checked whether or not the namespace is
// the trial's current one, so that a namespace a rotation retired costs
// what a missing one does.
func (b *Broker) sigV4Opens(tr ledger.Trial, ns ledger.Namespace, proof *rpc.SigV4Proof, now time.Time) bool {
	if proof == nil {
		return false
	}
	p := sigv4.Proof{AccessKeyID: proof.AccessKeyID, StringToSign: proof.StringToSign, Signature: proof.Signature}
	verified := sigv4.Verify(p, sesSecret(b.sesKey, writeDigest(tr), ns.Name), now) == nil
	return verified && ns.Name == proof.AccessKeyID && ns.Name == tr.Namespace
}

// bySigV4 binds a shared writer's SigV4 request to the trial whose
// namespace its access key id names. A refusal names no trial, by its
// answer, by a trail or by its time: a missing namespace costs the same
// two store reads and the same derivation and check of the signature
// (with a secret made from a digest no token has) as a real namespace with
// a wrong signature, and neither is written into a trail.
func (b *Broker) bySigV4(ctx context.Context, c caller, sel selector, t target) (target, error) {
	tr, ns, found, err := b.sigV4Trial(ctx, sel)
	if err != nil {
		return t, err
	}
	now := time.Now()
	ok := b.sigV4Opens(tr, ns, sel.proof, now)
	if !found || !ok || tr.Expired(now) || c.accepted(credSigV4) == nil {
		return t, refusal(credSigV4) // t names no namespace: the refusal is only counted
	}
	t.trial, t.ns = tr, ns
	return t, nil
}

// sigV4Trial reads the namespace sel names and its trial: the two store
// reads every SigV4 binding makes, found or not. A missing one (found
// false) is a trial and namespace of that name whose secret is made from
// a digest no token has.
func (b *Broker) sigV4Trial(ctx context.Context, sel selector) (tr ledger.Trial, ns ledger.Namespace, found bool, err error) {
	ns, err = b.ledger.Namespace(ctx, sel.namespace)
	found = err == nil
	if err != nil && !errors.Is(err, ledger.ErrNotFound) {
		return tr, ns, false, b.storeErr("namespace", err)
	}
	tr, err = b.ledger.Trial(ctx, ns.TrialID) // ID 0 when none: read, and found missing
	found = found && err == nil
	if err != nil && !errors.Is(err, ledger.ErrNotFound) {
		return tr, ns, false, b.storeErr("trial", err)
	}
	if !found {
		tr, ns = ledger.Trial{Namespace: sel.namespace, MailAPIToken: nothingOpens}, ledger.Namespace{Name: sel.namespace}
	}
	return tr, ns, found, nil
}
