// Package ident mints the secrets and names of a trial, in the formats the
// reference uses (docs/reference.md §2), from crypto/rand, and compares them.
//
// Only digests of secrets are stored; Digest is the one way to make them and
// Equal the one way to compare them.
package ident

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"strings"
)

// GrantPrefix marks a grant, so that a grant is recognisable (and redactable)
// wherever it turns up.
const GrantPrefix = "mpg_"

// ValidNamespace reports whether s is acceptable as a namespace anywhere:
// 1 to 160 of A-Z a-z 0-9 . _ -.
func ValidNamespace(s string) bool { return Word(s, 1, 160, "._-") }

// Word reports whether s is minLen to maxLen bytes of ASCII letters,
// digits and the characters of punct. It is a loop rather than a regexp
// such as ^[a-zA-Z0-9._-]{1,160}$, which compiles to one copy of its class
// per repetition: 165 KB of heap, kept for the life of every process that
// links the package.
func Word(s string, minLen, maxLen int, punct string) bool {
	if len(s) < minLen || len(s) > maxLen {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(punct, c) >= 0) {
			return false
		}
	}
	return true
}

func random(n int) []byte {
	b := make([]byte, n)
	// crypto/rand.Read never fails on Linux (getrandom); it panics in the
	// impossible case rather than hand out a weak secret.
	_, _ = rand.Read(b)
	return b
}

// Hex returns n random bytes as lowercase hex.
func Hex(n int) string { return hex.EncodeToString(random(n)) }

// Namespace mints "trial-" + 32 hex.
func Namespace() string { return "trial-" + Hex(16) }

// Capability mints 64 lowercase hex: read capabilities, write capabilities,
// mail-API and bootstrap tokens all share this format.
func Capability() string { return Hex(32) }

// InboxToken mints 43 characters of base64url (32 random bytes, no padding).
func InboxToken() string { return base64.RawURLEncoding.EncodeToString(random(32)) }

// Grant mints a surface grant: GrantPrefix + 64 hex.
func Grant() string { return GrantPrefix + Hex(32) }

// StorageTag mints a private per-namespace storage tag, "wb-" + 48 hex.
func StorageTag() string { return "wb-" + Hex(24) }

// Digest is what the plane stores in place of a secret. Secrets are 256-bit
// random values, so a plain SHA-256 is enough: there is nothing to brute
// force.
func Digest(secret string) []byte {
	d := sha256.Sum256([]byte(secret))
	return d[:]
}

// Equal compares a presented secret with a stored digest in constant time.
// An empty secret never matches.
func Equal(secret string, digest []byte) bool {
	if secret == "" || len(digest) != sha256.Size {
		return false
	}
	return subtle.ConstantTimeCompare(Digest(secret), digest) == 1
}

// UUID mints a random (version 4) UUID, the shape of Resend's email ids.
func UUID() string {
	b := random(16)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
