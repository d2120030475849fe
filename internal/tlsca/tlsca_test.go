package tlsca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestEnsureAndIssue: the CA is minted once (key 0600), loaded again the
// same, and a leaf it issues verifies for the default and configured names
// and for nothing else.
func TestEnsureAndIssue(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	ca, err := Ensure(dir, []string{"mail.test", "10.1.2.3", "0.0.0.0"})
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
	again, err := Ensure(dir, []string{"10.1.2.3"})
	if err != nil || !again.Cert.Equal(ca.Cert) || again.Renewed != "" {
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
	if _, err := Ensure(a, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(b, nil); err != nil {
		t.Fatal(err)
	}
	key, _ := os.ReadFile(filepath.Join(b, KeyFile))
	os.WriteFile(filepath.Join(a, KeyFile), key, 0o600)
	if _, err := Load(a); err == nil {
		t.Fatal("mismatched key accepted")
	}
}

// TestNameConstraints: the CA permits only the names it was minted for
// (critical constraints, server authentication only, a year at most), so
// that a leaf for any other name — made with the CA's own key, as whoever
// stole it would — verifies neither with Go's crypto/x509 nor with
// OpenSSL nor in a TLS handshake from Python's ssl; Issue refuses such a
// name; and asking Ensure for one mints a new CA instead of widening the
// old.
func TestNameConstraints(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	ca, err := Ensure(dir, []string{"mail.test", "10.1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	c := ca.Cert
	if !c.PermittedDNSDomainsCritical || !slices.Equal(c.PermittedDNSDomains, []string{"localhost", "mail.test"}) || len(c.PermittedIPRanges) != 3 {
		t.Fatalf("constraints: critical %v, DNS %v, IP %v", c.PermittedDNSDomainsCritical, c.PermittedDNSDomains, c.PermittedIPRanges)
	}
	if life := c.NotAfter.Sub(c.NotBefore); life > 366*24*time.Hour {
		t.Errorf("the CA lives %v", life)
	}
	if _, _, err := ca.Issue([]string{"evil.example"}); err == nil {
		t.Error("Issue made a leaf for a name outside the constraints")
	}
	if _, err := Ensure(dir, []string{"bad name"}); !errors.Is(err, ErrName) {
		t.Errorf("a name with a space: %v, want ErrName", err)
	}
	good, goodKey, err := ca.Issue([]string{"mail.test"})
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM)
	leaf := firstCert(t, good)
	kb, _ := pem.Decode(goodKey)
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	leafKeys[leaf.SerialNumber.String()] = k.(*ecdsa.PrivateKey)
	if life := leaf.NotAfter.Sub(leaf.NotBefore); life > 91*24*time.Hour || leaf.NotAfter.After(c.NotAfter) {
		t.Errorf("the leaf lives %v, until %v (the CA until %v)", life, leaf.NotAfter, c.NotAfter)
	}
	for _, name := range []string{"mail.test", "localhost", "127.0.0.1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	outside := map[string]*x509.Certificate{
		"evil.example": forge(t, ca, []string{"evil.example"}, nil),
		"10.9.9.9":     forge(t, ca, nil, []net.IP{net.ParseIP("10.9.9.9")}),
		// A name the CA permits beside one it does not: the whole leaf fails.
		"mail.test": forge(t, ca, []string{"mail.test", "bank.example"}, nil),
	}
	for name, cert := range outside {
		_, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: name})
		var inv x509.CertificateInvalidError
		if !errors.As(err, &inv) || inv.Reason != x509.CANotAuthorizedForThisName {
			t.Errorf("crypto/x509, leaf for %s: %v; want CANotAuthorizedForThisName", name, err)
		}
	}

	// Real clients: openssl verify, and a TLS handshake from Python.
	tmp := t.TempDir()
	caFile := filepath.Join(tmp, "ca.pem")
	os.WriteFile(caFile, ca.CertPEM, 0o644)
	pemOf := func(cert *x509.Certificate) string {
		f := filepath.Join(tmp, cert.SerialNumber.String()+".pem")
		os.WriteFile(f, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o644)
		return f
	}
	if out, err := exec.Command("openssl", "verify", "-CAfile", caFile, pemOf(leaf)).CombinedOutput(); err != nil {
		t.Errorf("openssl verify of a leaf for mail.test: %v %s", err, out)
	}
	for name, cert := range outside {
		out, err := exec.Command("openssl", "verify", "-CAfile", caFile, pemOf(cert)).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "subtree violation") {
			t.Errorf("openssl verify of a leaf for %s: %v %s; want a subtree violation", name, err, out)
		}
	}
	if out, err := handshake(t, ca, leaf, caFile, "mail.test"); err != nil {
		t.Errorf("python ssl, leaf for mail.test: %v %s", err, out)
	}
	if out, err := handshake(t, ca, outside["evil.example"], caFile, "evil.example"); err == nil || !strings.Contains(out, "CERTIFICATE_VERIFY_FAILED") {
		t.Errorf("python ssl, leaf for evil.example: %v %s; want CERTIFICATE_VERIFY_FAILED", err, out)
	}

	// A later start that asks for a name outside mints a new CA; the old
	// key is gone, and the old CA stays constrained.
	wider, err := Ensure(dir, []string{"mail.test", "other.test"})
	if err != nil {
		t.Fatal(err)
	}
	if wider.Cert.Equal(c) || !strings.Contains(wider.Renewed, "other.test") {
		t.Fatalf("Ensure for other.test kept the CA (renewed %q)", wider.Renewed)
	}
	if wider.key.Equal(ca.key) {
		t.Fatal("the new CA kept the old key")
	}
}

// TestRenewNearExpiry: a CA with less than a leaf's lifetime left is
// minted anew at start.
func TestRenewNearExpiry(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	os.MkdirAll(dir, 0o700)
	if err := mint(dir, DefaultNames, time.Now().Add(-CALifetime+LeafLifetime/2)); err != nil {
		t.Fatal(err)
	}
	old, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := Ensure(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ca.Cert.Equal(old.Cert) || ca.Renewed == "" || time.Until(ca.Cert.NotAfter) < CALifetime-time.Hour {
		t.Fatalf("a CA expiring %v was kept (renewed %q)", old.Cert.NotAfter, ca.Renewed)
	}
}

// forge signs a leaf for names with the CA's key, bypassing Issue.
func forge(t *testing.T, ca *CA, dns []string, ips []net.IP) *x509.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial, _ := serialNumber()
	tmpl := &x509.Certificate{SerialNumber: serial, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, DNSNames: dns, IPAddresses: ips}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	leafKeys[cert.SerialNumber.String()] = key
	return cert
}

// leafKeys holds the leaves' keys, for the handshake.
var leafKeys = map[string]*ecdsa.PrivateKey{}

func firstCert(t *testing.T, chain []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(chain)
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// pythonClient connects to 127.0.0.1:PORT trusting CAFILE, with SNI and
// the hostname check for NAME, and prints the handshake's outcome.
const pythonClient = `
import socket, ssl, sys
port, cafile, name = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ctx = ssl.create_default_context(cafile=cafile)
with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
    with ctx.wrap_socket(s, server_hostname=name) as tls:
        print("verified", tls.version())
`

// handshake serves cert (its key from Issue's or forge's) on a loopback
// port and runs the Python client against it.
func handshake(t *testing.T, ca *CA, cert *x509.Certificate, caFile, name string) (string, error) {
	t.Helper()
	key := leafKeys[cert.SerialNumber.String()]
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{{
		Certificate: [][]byte{cert.Raw, ca.Cert.Raw}, PrivateKey: key}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	out, err := exec.Command("python3", "-c", pythonClient, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), caFile, name).CombinedOutput()
	return string(out), err
}
