package planecli

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

// The plane's local CA (ARCHITECTURE.md, "TLS and the local CA") lives in
// caDir of the plane's data directory: its key never leaves it. mail-plane
// up mints it on first start, issues the writer a leaf for its names at
// every start, and hands candidates only the CA certificate (ca_file).

// caDir is where the CA is kept inside a plane's data directory.
const caDir = "ca"

func caCommand() *cli.Command {
	dataFlag := &cli.StringFlag{Name: "data", Value: DefaultData, Usage: "the plane's data directory (serve --data), or mail-plane up's --data", EnvVars: []string{"MAILPLANE_DATA"}}
	return &cli.Command{
		Name:  "ca",
		Usage: "the plane's local certificate authority, for the writer's STARTTLS, implicit TLS and HTTPS",
		Subcommands: []*cli.Command{
			{
				Name:   "export",
				Usage:  "print the CA certificate (PEM), for SSL_CERT_FILE, NODE_EXTRA_CA_CERTS or a trust store",
				Flags:  []cli.Flag{dataFlag},
				Action: caExport,
			},
			{
				Name: "issue",
				Usage: "issue a leaf certificate for mail-writer (--tls-cert/--tls-key), minting the CA if there is none;\n" +
					"always valid for localhost, 127.0.0.1 and ::1",
				Flags: []cli.Flag{dataFlag,
					&cli.StringSliceFlag{Name: "name", Usage: "a further DNS name or IP address of the writer (repeatable)"},
					&cli.StringFlag{Name: "cert", Required: true, Usage: "where to write the certificate chain (PEM, 0644)"},
					&cli.StringFlag{Name: "key", Required: true, Usage: "where to write its private key (PEM, 0600)"},
				},
				Action: caIssue,
			},
		},
	}
}

// findCA returns the CA directory of a data directory: DIR/ca for serve's
// layout, DIR/plane/ca for up's.
func findCA(data string) (string, error) {
	for _, d := range []string{filepath.Join(data, caDir), filepath.Join(data, "plane", caDir)} {
		if _, err := os.Stat(filepath.Join(d, tlsca.CertFile)); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("no CA in %s (mail-plane up or mail-plane ca issue mints one)", data)
}

func caExport(c *cli.Context) error {
	dir, err := findCA(c.String("data"))
	if err != nil {
		return err
	}
	pem, err := tlsca.ReadCert(dir)
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(pem)
	return err
}

func caIssue(c *cli.Context) error {
	dir, err := findCA(c.String("data"))
	if err != nil {
		dir = filepath.Join(c.String("data"), caDir)
	}
	ca, err := tlsca.Ensure(dir)
	if err != nil {
		return err
	}
	return ca.WriteLeaf(c.StringSlice("name"), c.String("cert"), c.String("key"))
}

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
	ca, err := tlsca.Ensure(filepath.Join(s.data, "plane", caDir))
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
