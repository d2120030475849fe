// Package tlsca is the plane's local certificate authority: one ECDSA
// P-256 key and a self-signed CA certificate kept in a directory of the
// plane's data (the key 0600, never copied anywhere else), and leaf
// certificates for the writer's names, so that candidates configured for
// STARTTLS, implicit TLS or HTTPS verify a real chain against the exported
// CA certificate instead of turning verification off.
//
// A candidate is told to trust this CA, so the CA must not be able to
// vouch for anything else: its certificate carries X.509 name constraints
// (critical) that permit only the names it was minted for (DefaultNames,
// the bind host, up's --tls-name: each DNS name with its subdomains, each
// IP address alone) and server authentication only, and it lives a year.
// A leaf for any other name does not verify, even if the CA's key leaks.
// When a later start asks for a name outside the constraints, or the CA
// has less than a leaf's lifetime left, Ensure mints a new CA in place of
// the old one (whose key is then gone) rather than widening anything: the
// CA certificate's path stays, so candidates that read ca_file again trust
// the new one, and a client that kept the old one fails closed.
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
	"strings"
	"syscall"
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

// Lifetimes of a local test CA. A leaf is issued afresh each time a stack
// starts, never outliving its CA; a CA with less than a leaf's lifetime
// left is minted anew at start.
const (
	CALifetime   = 365 * 24 * time.Hour
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
	// Renewed says why Ensure minted this CA in place of another ("" when
	// it kept the one it found, or found none).
	Renewed string
}

// Ensure loads the CA kept in dir for names (DNS names and IP addresses,
// besides DefaultNames), minting it first when dir holds none, or holds
// one whose constraints leave out one of names, or that is about to
// expire (Renewed then says why). dir is created 0700; the key is
// written 0600 and the certificate 0644, under a lock, so that two
// starts on one directory never pair one's key with the other's
// certificate.
func Ensure(dir string, names []string) (*CA, error) {
	wanted, err := normalize(names)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	unlock, err := lock(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	ca, err := Load(dir)
	var outside error
	if err == nil {
		outside = ca.permits(wanted)
	}
	why := ""
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	case !ca.Cert.PermittedDNSDomainsCritical:
		why = "the CA has no name constraints"
	case time.Until(ca.Cert.NotAfter) < LeafLifetime:
		why = "the CA expires within a leaf's lifetime"
	case outside != nil:
		why = outside.Error()
	default:
		return ca, nil
	}
	if err := mint(dir, wanted, time.Now()); err != nil {
		return nil, err
	}
	if ca, err = Load(dir); err != nil {
		return nil, err
	}
	ca.Renewed = why
	return ca, nil
}

// mint writes a new CA for names, valid from now, in place of any other.
func mint(dir string, names []string, now time.Time) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := serialNumber()
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"mailplane"}, CommonName: "mailplane local CA " + hex.EncodeToString(serial.Bytes()[:4])},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(CALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		// Critical: a client that does not understand the constraints
		// must reject the chain rather than ignore them.
		PermittedDNSDomainsCritical: true,
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			bits := 8 * len(ip.To16())
			if ip4 := ip.To4(); ip4 != nil {
				ip, bits = ip4, 32
			}
			tmpl.PermittedIPRanges = append(tmpl.PermittedIPRanges, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
			continue
		}
		tmpl.PermittedDNSDomains = append(tmpl.PermittedDNSDomains, n)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	// The key first: a crash between the two leaves a pair Load refuses
	// (and the next Ensure mints again), never a usable mismatch.
	if err := replace(filepath.Join(dir, KeyFile), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	return replace(filepath.Join(dir, CertFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

// ErrName is a name that is neither a DNS name nor an IP address.
var ErrName = errors.New("tlsca: neither a DNS name nor an IP address")

// normalize checks names and returns them with DefaultNames, each once:
// DNS names lowercased without a final dot, IP addresses in their
// canonical form; unspecified addresses (a wildcard bind) are left out.
func normalize(names []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, n := range append(append([]string{}, DefaultNames...), names...) {
		if ip := net.ParseIP(n); ip != nil {
			if ip.IsUnspecified() {
				continue
			}
			n = ip.String()
		} else {
			n = strings.TrimSuffix(strings.ToLower(n), ".")
			if !validDNSName(n) {
				return nil, fmt.Errorf("%w: %q", ErrName, n)
			}
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out, nil
}

// validDNSName: dot-separated labels of letters, digits and inner
// hyphens, at most 253 bytes.
func validDNSName(n string) bool {
	if n == "" || len(n) > 253 {
		return false
	}
	for _, label := range strings.Split(n, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
				return false
			}
		}
	}
	return true
}

// permits reports the first of names (normalized) outside the CA's
// constraints.
func (ca *CA) permits(names []string) error {
	for _, n := range names {
		ok := false
		if ip := net.ParseIP(n); ip != nil {
			for _, r := range ca.Cert.PermittedIPRanges {
				ok = ok || r.Contains(ip)
			}
		} else {
			for _, d := range ca.Cert.PermittedDNSDomains {
				ok = ok || n == d || strings.HasSuffix(n, "."+d)
			}
		}
		if !ok {
			return fmt.Errorf("%s is outside the CA's name constraints", n)
		}
	}
	return nil
}

// lock takes an exclusive lock on dir for the life of a mint.
func lock(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
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
// DefaultNames always included. A name outside the CA's constraints is
// refused: its leaf would not verify.
func (ca *CA) Issue(names []string) (certPEM, keyPEM []byte, err error) {
	wanted, err := normalize(names)
	if err != nil {
		return nil, nil, err
	}
	if err := ca.permits(wanted); err != nil {
		return nil, nil, fmt.Errorf("tlsca: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	notAfter := now.Add(LeafLifetime)
	if ca.Cert.NotAfter.Before(notAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{Organization: []string{"mailplane"}, CommonName: "mail-writer"},
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range wanted {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
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
