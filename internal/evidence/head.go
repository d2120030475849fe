package evidence

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// KeyFile is the name of the plane's signing key in its data directory:
// base64 of the Ed25519 seed, 0600, minted at first start and never sent
// anywhere; only its public half leaves the plane.
const KeyFile = "evidence.key"

// A hash chain alone shows an edit, but not a trail cut short or rewritten
// and re-hashed from the line it was changed at: anyone can compute
// SHA-256. So an export ends with the trail's head, signed by the plane
// with a key kept in its data directory (Key): the namespace, the last
// seq and hash, whether the trial was closed, and when the head was
// signed. Verified with the plane's public key (a bundle's
// evidence_public_key), the head pins the whole chain: a cut drops the
// head or leaves it naming a seq the trail no longer ends at, and a
// rewrite ends at another hash.

// Head is the last line of an export. The field order is the canonical
// order; its first member, "head", tells it from an event ("seq").
type Head struct {
	Head      int    `json:"head"` // the format's version: HeadVersion
	Namespace string `json:"namespace"`
	Seq       int64  `json:"seq"`
	Hash      string `json:"hash"`
	// Closed says the trial was closed when the head was signed: its
	// trail then ends with its close or expiry.
	Closed    bool   `json:"closed"`
	Time      string `json:"time"`
	Signature string `json:"signature,omitempty"` // SignaturePrefix and the Ed25519 signature in hex
}

// SignaturePrefix begins a head's signature. Like HashPrefix, it keeps the
// signature from looking like a secret to the redaction point (a base64
// signature holds a run of exactly 43 token characters now and then), so
// that a redacted trail still verifies.
const SignaturePrefix = "ed25519_"

// HeadVersion is the version of Head and of what is signed.
const HeadVersion = 1

// headDomain separates what a head's signature covers from anything else
// an Ed25519 key might sign: the domain, then the head's canonical JSON
// without its signature.
const headDomain = "mailplane evidence head v1\x00"

var headPrefix = []byte(`{"head":`)

// IsHead reports whether a line of an export is a head rather than an
// event.
func IsHead(line []byte) bool { return bytes.HasPrefix(line, headPrefix) }

func (h Head) signed() ([]byte, error) {
	h.Signature = ""
	body, err := canonicalJSON(h)
	if err != nil {
		return nil, err
	}
	return append([]byte(headDomain), body...), nil
}

// SignHead signs h with key and returns its canonical line.
func SignHead(h Head, key ed25519.PrivateKey) ([]byte, error) {
	h.Head = HeadVersion
	msg, err := h.signed()
	if err != nil {
		return nil, err
	}
	h.Signature = SignaturePrefix + hex.EncodeToString(ed25519.Sign(key, msg))
	return canonicalJSON(h)
}

// ParseHead reads one canonical head line; it does not check the
// signature (CheckSignature does).
func ParseHead(line []byte) (Head, error) {
	var h Head
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil || dec.More() {
		return h, errors.New("not a head")
	}
	if again, err := canonicalJSON(h); err != nil || !bytes.Equal(again, line) {
		return h, errors.New("head not in canonical form")
	}
	if h.Head != HeadVersion {
		return h, fmt.Errorf("head version %d, want %d", h.Head, HeadVersion)
	}
	return h, nil
}

// CheckSignature reports whether h was signed by the key pub.
func (h Head) CheckSignature(pub ed25519.PublicKey) bool {
	hexSig, ok := strings.CutPrefix(h.Signature, SignaturePrefix)
	sig, err := hex.DecodeString(hexSig)
	if !ok || err != nil || len(sig) != ed25519.SignatureSize || len(pub) != ed25519.PublicKeySize {
		return false
	}
	msg, err := h.signed()
	return err == nil && ed25519.Verify(pub, msg, sig)
}

// PublicKeyString is a public key as bundles carry it: base64 of its 32
// bytes.
func PublicKeyString(pub ed25519.PublicKey) string { return base64.StdEncoding.EncodeToString(pub) }

// ErrKeySyntax means a public key that is not base64 of 32 bytes.
var ErrKeySyntax = errors.New("not an Ed25519 public key: want base64 of 32 bytes, as evidence_public_key in a bundle")

// ParsePublicKey reads a public key as PublicKeyString writes it.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, ErrKeySyntax
	}
	return ed25519.PublicKey(b), nil
}

func canonicalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
