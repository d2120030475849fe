// Package seskey keeps the plane's SES key: the secret, outside the
// ledger, with which every trial's SES secret is made (sigv4.Secret), so
// that the ledger alone (a database role, a backup) signs for no trial.
// It lives apart from sigv4, which the writer links to read signatures:
// the writer never touches the key's file.
package seskey

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/websitebench/mailplane/internal/credfiles"
)

// File is the name of the plane's SES key in its data directory: base64
// of 32 random bytes, 0600, minted at first start. Planes that share one
// PostgreSQL must hold the same key (docs/postgres.md).
const File = "ses.key"

// Size is the SES key's length in bytes.
const Size = 32

// Ensure loads the SES key kept at path, minting it first when there
// is none. A key file others may read is refused: whoever reads it and
// the ledger can sign for every trial.
func Ensure(path string) ([]byte, error) {
	key, err := load(path)
	if !errors.Is(err, os.ErrNotExist) {
		return key, err
	}
	key = make([]byte, Size)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := credfiles.WriteSecret(path, base64.StdEncoding.EncodeToString(key)); err != nil {
		if errors.Is(err, os.ErrExist) { // another plane on this directory minted it first
			return load(path)
		}
		return nil, err
	}
	return key, nil
}

func load(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s: mode %v lets others read the SES key; want 0600", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	key, err := base64.StdEncoding.Strict().DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) != Size {
		return nil, fmt.Errorf("%s: not an SES key (base64 of %d bytes)", path, Size)
	}
	return key, nil
}

// Check is a one-way value of key that planes sharing one ledger compare
// (ledger.KeyCheck): it tells two keys apart and opens nothing.
func Check(key []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("mailplane ses key check"))
	return "ses_" + hex.EncodeToString(m.Sum(nil))[:16]
}
