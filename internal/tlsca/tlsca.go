// Package tlsca is the plane's local certificate authority: one ECDSA
// P-256 key and a self-signed CA certificate kept in a directory of the
// plane's data (the key 0600, never copied anywhere else), and leaf
// certificates for the writer's names, so that candidates configured for
// STARTTLS, implicit TLS or HTTPS verify a real chain against the exported
// CA certificate instead of turning verification off.
package tlsca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// File names inside a CA directory, and the directory's name inside a
// plane's data directory.
const (
	CertFile = "ca.pem"
	KeyFile  = "ca.key"
	DirName  = "ca"
)

// Find returns the CA directory of a data directory: DIR/ca for serve's
// layout, DIR/plane/ca for up's.
func Find(data string) (string, error) {
	for _, d := range []string{filepath.Join(data, DirName), filepath.Join(data, "plane", DirName)} {
		if _, err := os.Stat(filepath.Join(d, CertFile)); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("no CA in %s (mail-plane up or mail-plane ca issue mints one)", data)
}

// Lifetimes. The CA outlives every trial; a leaf is issued afresh each
// time a stack starts, so it can be short.
const (
	CALifetime   = 10 * 365 * 24 * time.Hour
	LeafLifetime = 90 * 24 * time.Hour
	// backdate absorbs clock skew between the plane and its clients.
	backdate = time.Hour
)

// DefaultNames are in every leaf: the writer is reached on loopback.
var DefaultNames = []string{"localhost", "127.0.0.1", "::1"}

// CA is a loaded authority.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	key     *ecdsa.PrivateKey
}

// Ensure loads the CA kept in dir, minting it first when dir holds none.
// dir is created 0700; the key is written 0600 and the certificate 0644.
func Ensure(dir string) (*CA, error) {
	ca, err := Load(dir)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return ca, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"mailplane"}, CommonName: "mailplane local CA " + hex.EncodeToString(serial.Bytes()[:4])},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(CALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	// The key first, exclusively: two stacks starting on one data
	// directory must not end with one's key and the other's certificate.
	if err := writeNew(filepath.Join(dir, KeyFile), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		if errors.Is(err, os.ErrExist) {
			return Load(dir)
		}
		return nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := writeNew(filepath.Join(dir, CertFile), certPEM, 0o644); err != nil {
		return nil, err
	}
	return Load(dir)
}

// Load reads the CA kept in dir.
func Load(dir string) (*CA, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CertFile))
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, KeyFile))
	if err != nil {
		return nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("tlsca: %s: not PEM", dir)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("tlsca: certificate: %w", err)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("tlsca: key: %w", err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("tlsca: %s: the key does not match the certificate", dir)
	}
	return &CA{Cert: cert, CertPEM: certPEM, key: key}, nil
}

// ReadCert returns the PEM of the CA certificate kept in dir, without
// reading its key.
func ReadCert(dir string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, CertFile))
	if err != nil {
		return nil, err
	}
	if blk, _ := pem.Decode(b); blk == nil || blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("tlsca: %s: not a PEM certificate", dir)
	}
	return b, nil
}

// Issue returns a server certificate (PEM, the leaf then the CA) and its
// private key (PEM) for names: DNS names and IP addresses, with
// DefaultNames always included.
func (ca *CA) Issue(names []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{Organization: []string{"mailplane"}, CommonName: "mail-writer"},
		NotBefore:    now.Add(-backdate),
		NotAfter:     now.Add(LeafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	seen := map[string]bool{}
	for _, n := range append(append([]string{}, DefaultNames...), names...) {
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		if ip := net.ParseIP(n); ip != nil {
			if !ip.IsUnspecified() {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			}
			continue
		}
		tmpl.DNSNames = append(tmpl.DNSNames, n)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	certPEM = append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), ca.CertPEM...)
	return certPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// WriteLeaf issues a leaf for names and writes it as certFile (0644) and
// keyFile (0600), replacing earlier ones.
func (ca *CA) WriteLeaf(names []string, certFile, keyFile string) error {
	cert, key, err := ca.Issue(names)
	if err != nil {
		return err
	}
	if err := replace(keyFile, key, 0o600); err != nil {
		return err
	}
	return replace(certFile, cert, 0o644)
}

func serialNumber() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// writeNew creates path with data; it fails if path exists.
func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if err := f.Chmod(mode); err != nil { // whatever the umask (mail-plane's is 077)
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// replace writes data to path through a temporary file in the same
// directory, created with mode, so that a reader never sees half a file.
func replace(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	os.Remove(tmp)
	if err := writeNew(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
