package writertest

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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
	ca, err := tlsca.Ensure(filepath.Join(dir, "ca"), []string{host})
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
	// The listeners are bound here and handed over as fd 3 to 6, as
	// mail-plane up does: a port picked free and bound later by the child
	// can be taken in between on a busy machine.
	var lns [4]*net.TCPListener
	var files []*os.File
	for i := range lns {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln.(*net.TCPListener)
		f, err := lns[i].File()
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		ln.Close()
	}
	addr := func(i int) string { return lns[i].Addr().String() }
	port := func(i int) int { return lns[i].Addr().(*net.TCPAddr).Port }
	w := &TLSWriter{
		Writer:      &Writer{URL: "http://" + addr(0), SMTPAddr: addr(1), SMTPPort: port(1)},
		CAFile:      caFile,
		Roots:       roots,
		Host:        host,
		SMTPTLSAddr: addr(2),
		SMTPTLSPort: port(2),
		HTTPSURL:    "https://" + addr(3),
	}
	args := append([]string{"--log-level", "debug", "--plane-socket", plane.Socket, "--grant-file", grant,
		"--http-listen", "fd:3", "--smtp-listen", "fd:4", "--smtp-mode", mode,
		"--tls-cert", certFile, "--tls-key", keyFile, "--smtp-tls-listen", "fd:5", "--https-listen", "fd:6"}, extra...)
	cmd := exec.Command(itest.Bin(t, "mail-writer"), args...)
	cmd.ExtraFiles = files
	w.Proc = itest.StartCmd(t, cmd, "mail-writer")
	for _, f := range files {
		f.Close()
	}
	itest.WaitHTTP(t, w.URL+"/healthz", 200, w.Proc)
	return w
}

// ClientTLS is a client configuration that verifies the writer against
// the test's CA, for the writer's host.
func (w *TLSWriter) ClientTLS() *tls.Config {
	return &tls.Config{RootCAs: w.Roots, ServerName: w.Host}
}
