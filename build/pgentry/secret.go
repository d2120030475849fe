package main

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Limits of the password file: a generated password, printable ASCII (so
// that SASLprep leaves it as it is and a URL-encoded DSN can carry it).
const (
	minPassword = 16
	maxPassword = 1024
	// PostgreSQL's own default (scram_iterations) and salt length.
	scramIterations = 4096
	scramSaltLen    = 16
)

var errPassword = fmt.Errorf("password file: want %d to %d printable ASCII characters (a trailing newline is ignored)", minPassword, maxPassword)

// readPassword reads the role's password. A bad file is one fixed error
// that shows nothing of its content.
func readPassword(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("password file: %w", errors.Unwrap(err))
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPassword+3))
	if err != nil {
		return "", fmt.Errorf("password file: %w", errors.Unwrap(err))
	}
	p := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if len(p) < minPassword || len(p) > maxPassword {
		return "", errPassword
	}
	for i := 0; i < len(p); i++ {
		if p[i] < 0x21 || p[i] > 0x7e {
			return "", errPassword
		}
	}
	return p, nil
}

// scramVerifier is what PostgreSQL stores for a SCRAM-SHA-256 password
// (RFC 5802, RFC 7677): given in ALTER ROLE … PASSWORD, it is stored as is,
// so the server never sees the password itself.
func scramVerifier(password string) (string, error) {
	salt := make([]byte, scramSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	stored, server, err := scramKeys(password, salt, scramIterations)
	if err != nil {
		return "", err
	}
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", scramIterations, b64(salt), b64(stored), b64(server)), nil
}

// scramKeys are StoredKey and ServerKey for a password, salt and count.
func scramKeys(password string, salt []byte, iterations int) (stored, server []byte, err error) {
	salted, err := pbkdf2.Key(sha256.New, password, salt, iterations, sha256.Size)
	if err != nil {
		return nil, nil, err
	}
	clientKey := hmacSHA256(salted, "Client Key")
	sum := sha256.Sum256(clientKey)
	return sum[:], hmacSHA256(salted, "Server Key"), nil
}

func hmacSHA256(key []byte, msg string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(msg))
	return h.Sum(nil)
}
