package serve

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/websitebench/mailplane/internal/credfiles"
)

// ensureEvidenceKey loads the signing key kept at path, minting it first when
// there is none. A key file others may read is refused: whoever reads it
// can sign a rewritten trail. It lives here, at the plane's edge, rather
// than in package evidence, so that evidence needs only the standard
// library and the console may decode trails with its Event.
func ensureEvidenceKey(path string) (ed25519.PrivateKey, error) {
	key, err := loadEvidenceKey(path)
	if !errors.Is(err, os.ErrNotExist) {
		return key, err
	}
	_, key, err = ed25519.GenerateKey(nil)
	if err != nil {
		return nil, err
	}
	if err := credfiles.WriteSecret(path, base64.StdEncoding.EncodeToString(key.Seed())); err != nil {
		if errors.Is(err, os.ErrExist) { // another plane on this directory minted it first
			return loadEvidenceKey(path)
		}
		return nil, err
	}
	return key, nil
}

func loadEvidenceKey(path string) (ed25519.PrivateKey, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s: mode %v lets others read the evidence key; want 0600", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	seed, err := base64.StdEncoding.Strict().DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%s: not an evidence key (base64 of a %d-byte Ed25519 seed)", path, ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}
