package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The exchange of RFC 7677, section 3: user "user", password "pencil". Its
// client proof and server signature hold only if StoredKey and ServerKey
// are right: ClientKey = proof XOR HMAC(StoredKey, AuthMessage) must hash
// to StoredKey, and HMAC(ServerKey, AuthMessage) is the server signature.
func TestScramKeysRFC7677(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	const nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	auth := "n=user,r=rOprNGfwEbeRWgbNEkqO," +
		"r=" + nonce + ",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096," +
		"c=biws,r=" + nonce
	proof, _ := base64.StdEncoding.DecodeString("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
	signature, _ := base64.StdEncoding.DecodeString("6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")

	stored, server, err := scramKeys("pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	clientSig := hmacSHA256(stored, auth)
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ clientSig[i]
	}
	if sum := sha256.Sum256(clientKey); !bytes.Equal(sum[:], stored) {
		t.Errorf("StoredKey does not verify the RFC's client proof")
	}
	if got := hmacSHA256(server, auth); !bytes.Equal(got, signature) {
		t.Errorf("ServerKey gives signature %x, want %x", got, signature)
	}
}

func TestScramVerifierFormat(t *testing.T) {
	v, err := scramVerifier("correct horse battery staple")
	if err != nil {
		t.Fatal(err)
	}
	b64 := `[A-Za-z0-9+/]+={0,2}`
	if !regexp.MustCompile(`^SCRAM-SHA-256\$4096:` + b64 + `\$` + b64 + `:` + b64 + `$`).MatchString(v) {
		t.Errorf("verifier %q is not in PostgreSQL's format", v)
	}
	if strings.Contains(v, "horse") {
		t.Errorf("verifier carries the password")
	}
	if w, _ := scramVerifier("correct horse battery staple"); w == v {
		t.Errorf("two verifiers share a salt")
	}
}

func TestReadPassword(t *testing.T) {
	dir := t.TempDir()
	good := "0123456789abcdef!#%&"
	for _, c := range []struct {
		name, content, want string
		err                 error
	}{
		{"plain", good, good, nil},
		{"newline", good + "\n", good, nil},
		{"crlf", good + "\r\n", good, nil},
		{"short", "0123456789abcde", "", errPassword},
		{"long", strings.Repeat("a", maxPassword+1), "", errPassword},
		{"space", "0123456789 abcdef", "", errPassword},
		{"two lines", good + "\n" + good, "", errPassword},
		{"utf-8", good + "é", "", errPassword},
		{"empty", "", "", errPassword},
	} {
		path := filepath.Join(dir, c.name)
		os.WriteFile(path, []byte(c.content), 0o600)
		got, err := readPassword(path)
		if got != c.want || !errors.Is(err, c.err) {
			t.Errorf("%s: %q, %v; want %q, %v", c.name, got, err, c.want, c.err)
		}
		if err != nil && strings.Contains(err.Error(), "0123") {
			t.Errorf("%s: the error shows the file's content: %v", c.name, err)
		}
	}
	if _, err := readPassword(filepath.Join(dir, "missing")); err == nil || strings.Contains(err.Error(), dir) {
		t.Errorf("missing file: %v; want an error without the path", err)
	}
}
