package supervisor

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/tlsca"
)

// upTLSFlags are mail-plane up's TLS settings.
func upTLSFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "smtp-tls-port", Usage: "SMTP port with implicit TLS (0: any free port)"},
		&cli.IntFlag{Name: "writer-https-port", Usage: "POST /emails over HTTPS (0: any free port)"},
		&cli.StringSliceFlag{Name: "tls-name", Usage: "a further DNS name or IP address for the writer's certificate (repeatable)"},
	}
}

// writerTLS is what up gives the writer for TLS: a leaf from the plane's
// CA, its implicit-TLS SMTP and HTTPS listeners (fd 5 and 6, after the
// HTTP and SMTP ones), and the CA certificate for candidates.
type writerTLS struct {
	lns    []net.Listener
	args   []string
	caFile string // a world-readable copy of the CA certificate
}

func (w *writerTLS) smtpTLSPort() int { return w.lns[0].Addr().(*net.TCPAddr).Port }
func (w *writerTLS) httpsURL() string { return "https://" + w.lns[1].Addr().String() }

func (w *writerTLS) close() {
	for _, ln := range w.lns {
		ln.Close()
	}
}

// prepareWriterTLS mints the CA (once per data directory), issues the
// writer's leaf for host and --tls-name, and opens the TLS listeners.
func (s *stack) prepareWriterTLS(c *cli.Context, host string) (*writerTLS, error) {
	ca, err := tlsca.Ensure(filepath.Join(s.data, "plane", tlsca.DirName))
	if err != nil {
		return nil, fmt.Errorf("local CA: %w", err)
	}
	dir := filepath.Join(s.data, "writer-tls")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := ca.WriteLeaf(append([]string{host}, c.StringSlice("tls-name")...), cert, key); err != nil {
		return nil, fmt.Errorf("writer certificate: %w", err)
	}
	w := &writerTLS{caFile: filepath.Join(s.data, "ca.pem")}
	if err := os.WriteFile(w.caFile, ca.CertPEM, 0o644); err != nil {
		return nil, err
	}
	if err := os.Chmod(w.caFile, 0o644); err != nil { // whatever the umask: candidates read it
		return nil, err
	}
	for _, port := range []int{c.Int("smtp-tls-port"), c.Int("writer-https-port")} {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			w.close()
			return nil, cliapp.Usagef("listen on %s port %d: %v", host, port, err)
		}
		w.lns = append(w.lns, ln)
	}
	w.args = []string{"--tls-cert", cert, "--tls-key", key, "--smtp-tls-listen", "fd:5", "--https-listen", "fd:6"}
	return w, nil
}
