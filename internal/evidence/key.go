package evidence

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/websitebench/mailplane/internal/credfiles"
)

// KeyFile is the name of the plane's signing key in its data directory:
// base64 of the Ed25519 seed, 0600, minted at first start and never sent
// anywhere; only its public half leaves the plane.
const KeyFile = "evidence.key"

// EnsureKey loads the signing key kept at path, minting it first when
// there is none. A key file others may read is refused: whoever reads it
// can sign a rewritten trail.
func EnsureKey(path string) (ed25519.PrivateKey, error) {
	key, err := loadKey(path)
	if !errors.Is(err, os.ErrNotExist) {
		return key, err
	}
	_, key, err = ed25519.GenerateKey(nil)
	if err != nil {
		return nil, err
	}
	if err := credfiles.WriteSecret(path, base64.StdEncoding.EncodeToString(key.Seed())); err != nil {
		if errors.Is(err, os.ErrExist) { // another plane on this directory minted it first
			return loadKey(path)
		}
		return nil, err
	}
	return key, nil
}

func loadKey(path string) (ed25519.PrivateKey, error) {
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
