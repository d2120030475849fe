package writertest

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/tlsca"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// TLSWriter is a running mail-writer with STARTTLS, an implicit-TLS SMTP
// listener and HTTPS, on a leaf issued by a fresh local CA whose
// certificate is CAFile.
type TLSWriter struct {
	*Writer
	CAFile      string
	Roots       *x509.CertPool
	Host        string // the address every listener is on
	SMTPTLSAddr string // implicit TLS
	SMTPTLSPort int
	HTTPSURL    string
}

// StartTLS runs mail-writer for trial id on plane with its listeners on
// host (127.0.0.1, or another loopback address a test treats as a
// network), TLS from a CA minted for the test, and extra flags.
func StartTLS(t testing.TB, plane *itest.Plane, id rpc.Identity, mode, host string, extra ...string) *TLSWriter {
	t.Helper()
	dir := t.TempDir()
	ca, err := tlsca.Ensure(filepath.Join(dir, "ca"))
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := ca.WriteLeaf([]string{host}, certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM)

	grant := itest.WriteSecret(t, "writer.grant", id.WriterGrant)
	hp, sp, tp, xp := itest.FreePort(t), itest.FreePort(t), itest.FreePort(t), itest.FreePort(t)
	at := func(p int) string { return net.JoinHostPort(host, strconv.Itoa(p)) }
	w := &TLSWriter{
		Writer:      &Writer{URL: "http://" + at(hp), SMTPAddr: at(sp), SMTPPort: sp},
		CAFile:      caFile,
		Roots:       roots,
		Host:        host,
		SMTPTLSAddr: at(tp),
		SMTPTLSPort: tp,
		HTTPSURL:    "https://" + at(xp),
	}
	w.args = append([]string{"--log-level", "debug", "--plane-socket", plane.Socket, "--grant-file", grant,
		"--http-listen", at(hp), "--smtp-listen", w.SMTPAddr, "--smtp-mode", mode,
		"--tls-cert", certFile, "--tls-key", keyFile, "--smtp-tls-listen", w.SMTPTLSAddr, "--https-listen", at(xp)}, extra...)
	w.Proc = itest.Start(t, "mail-writer", w.args...)
	itest.WaitHTTP(t, w.URL+"/healthz", 200, w.Proc)
	return w
}

// ClientTLS is a client configuration that verifies the writer against
// the test's CA, for the writer's host.
func (w *TLSWriter) ClientTLS() *tls.Config {
	return &tls.Config{RootCAs: w.Roots, ServerName: w.Host}
}
