package tlsca

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
)

// TestEnsureAndIssue: the CA is minted once (key 0600), loaded again the
// same, and a leaf it issues verifies for the default and configured names
// and for nothing else.
func TestEnsureAndIssue(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	ca, err := Ensure(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi.Mode(), err)
	}
	if di, _ := os.Stat(dir); di.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v", di.Mode())
	}
	again, err := Ensure(dir)
	if err != nil || !again.Cert.Equal(ca.Cert) {
		t.Fatalf("second Ensure minted another CA: %v", err)
	}
	if !ca.Cert.IsCA || !ca.Cert.MaxPathLenZero {
		t.Fatal("not a CA with path length 0")
	}

	certFile, keyFile := filepath.Join(t.TempDir(), "w.pem"), filepath.Join(t.TempDir(), "w.key")
	if err := ca.WriteLeaf([]string{"mail.test", "10.1.2.3", "0.0.0.0"}, certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	if ki, _ := os.Stat(keyFile); ki.Mode().Perm() != 0o600 {
		t.Fatalf("leaf key mode %v", ki.Mode())
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	pem, err := ReadCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	for _, name := range []string{"localhost", "127.0.0.1", "::1", "mail.test", "10.1.2.3"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, name := range []string{"example.com", "0.0.0.0", "10.1.2.4"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name}); err == nil {
			t.Errorf("%s verified", name)
		}
	}
	// A leaf is no CA: it cannot sign another certificate that verifies.
	if leaf.IsCA {
		t.Fatal("leaf is a CA")
	}
}

// TestLoadRefusesMismatch: a certificate beside another CA's key is
// refused, not used.
func TestLoadRefusesMismatch(t *testing.T) {
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	if _, err := Ensure(a); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(b); err != nil {
		t.Fatal(err)
	}
	key, _ := os.ReadFile(filepath.Join(b, KeyFile))
	os.WriteFile(filepath.Join(a, KeyFile), key, 0o600)
	if _, err := Load(a); err == nil {
		t.Fatal("mismatched key accepted")
	}
}
