package plane

import (
	"time"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/internal/sigv4"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// sesRegion is the region a bundle names; the writer accepts any.
const sesRegion = "us-east-1"

// providers is a trial's part of a bundle for the writer's
// provider-compatible send APIs at writerURL: the token that opens its
// mail API (a candidate's mail-API token, another profile's bootstrap
// token: keys) for SendGrid, Postmark and Mailgun, and for SES the
// trial's key pair, made from that token.
func providers(writerURL string, id rpc.Identity) *rpc.Providers {
	token := id.MailAPIToken
	if keyedByBootstrap(id.Profile) {
		token = id.BootstrapToken
	}
	return &rpc.Providers{
		SendGrid: rpc.ProviderToken{BaseURL: writerURL, APIKey: token},
		Postmark: rpc.PostmarkToken{BaseURL: writerURL, ServerToken: token},
		Mailgun:  rpc.ProviderToken{BaseURL: writerURL, APIKey: token},
		SES: rpc.SESKeys{Endpoint: writerURL, Region: sesRegion, AccessKeyID: id.Namespace,
			SecretAccessKey: sigv4.Secret(ident.Digest(token), id.Namespace)},
	}
}

// writeDigest is the digest of the token providers hands out for trial
// tr, which its SES secret is made from.
func writeDigest(tr ledger.Trial) []byte {
	if keyedByBootstrap(tr.Profile) {
		return tr.BootstrapToken
	}
	return tr.MailAPIToken
}

// keyedByBootstrap reports whether a trial of profile opens its mail API
// with its bootstrap token rather than a mail-API token (keys).
func keyedByBootstrap(profile string) bool {
	ks := keys[credWrite][profile]
	return len(ks) > 0 && ks[0] == secretBootstrapToken
}

// sigV4Opens reports whether proof is a valid SES signature for trial tr,
// whose current namespace ns is the proof's access key id. The secret is
// made again from what the plane keeps of the trial's write token; the
// writer, which only relays the proof, never holds it.
func sigV4Opens(tr ledger.Trial, ns ledger.Namespace, proof *rpc.SigV4Proof, now time.Time) bool {
	if proof == nil || ns.Name != proof.AccessKeyID || ns.Name != tr.Namespace {
		return false
	}
	p := sigv4.Proof{AccessKeyID: proof.AccessKeyID, StringToSign: proof.StringToSign, Signature: proof.Signature}
	return sigv4.Verify(p, sigv4.Secret(writeDigest(tr), ns.Name), now) == nil
}
