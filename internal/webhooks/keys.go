package webhooks

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
)

// Keys is a trial's own webhook material: what its webhooks are signed
// with, and what its candidate verifies them with. It is made, never
// stored: an HMAC keyed by the plane's secret key (the one its SES
// secrets are made with, kept outside the ledger) of what the ledger
// keeps of the trial's write token (a digest), so the plane makes the
// same keys again for every event, and whoever reads the ledger signs for
// no trial.
type Keys struct {
	// ResendSecret is Svix's whsec_ and base64 of the HMAC key.
	ResendSecret string
	// MailgunKey is Mailgun's webhook signing key (64 hex).
	MailgunKey string
	// SendGrid is the ECDSA P-256 key SendGrid's events are signed with;
	// its public half goes to the candidate.
	SendGrid *ecdsa.PrivateKey
}

// SecretPrefix starts a Resend (Svix) webhook secret.
const SecretPrefix = "whsec_"

// Derive makes trial material from the plane's key and the digest of the
// trial's write token.
func Derive(planeKey, tokenDigest []byte) Keys {
	k := Keys{
		ResendSecret: SecretPrefix + base64.StdEncoding.EncodeToString(derive(planeKey, tokenDigest, "resend", 0)),
		MailgunKey:   hex.EncodeToString(derive(planeKey, tokenDigest, "mailgun", 0)),
	}
	// A scalar of P-256 is valid unless it is 0 or not below the order:
	// one try in 2^32 fails, and the next counter is taken.
	for i := byte(0); ; i++ {
		if p, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), derive(planeKey, tokenDigest, "sendgrid", i)); err == nil {
			k.SendGrid = p
			break
		}
	}
	return k
}

func derive(planeKey, digest []byte, purpose string, counter byte) []byte {
	m := hmac.New(sha256.New, planeKey)
	m.Write([]byte("mailplane webhook key\x00" + purpose + "\x00"))
	m.Write([]byte{counter})
	m.Write(digest)
	return m.Sum(nil)
}

// SendGridPublicKey is the base64 DER (PKIX) of k's SendGrid public key,
// as SendGrid's console shows its verification key.
func (k Keys) SendGridPublicKey() string {
	der, err := x509.MarshalPKIXPublicKey(&k.SendGrid.PublicKey)
	if err != nil {
		panic(err) // a P-256 key always marshals
	}
	return base64.StdEncoding.EncodeToString(der)
}

// resendKey is the HMAC key a Resend secret names.
func resendKey(secret string) ([]byte, error) {
	return base64.StdEncoding.DecodeString(secret[len(SecretPrefix):])
}
