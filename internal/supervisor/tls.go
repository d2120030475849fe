package supervisor

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/inboxproc"
	"github.com/websitebench/mailplane/internal/tlsca"
	"github.com/websitebench/mailplane/internal/writerproc"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// upTLSFlags are mail-plane up's TLS settings.
func upTLSFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "smtp-tls-port", Usage: "SMTP port with implicit TLS (0: any free port)"},
		&cli.IntFlag{Name: "writer-https-port", Usage: "POST /emails over HTTPS (0: any free port)"},
		&cli.IntFlag{Name: "imap-port", Usage: "the agent's mailbox over IMAP with STARTTLS, on the inbox (0: any free port)"},
		&cli.IntFlag{Name: "imaps-port", Usage: "the agent's mailbox over IMAP with implicit TLS (0: any free port)"},
		&cli.StringSliceFlag{Name: "tls-name", Usage: "a further DNS name or IP address for the writer's and the inbox's certificates (repeatable)"},
	}
}

// writerTLS is what up gives the writer for TLS: a leaf from the plane's
// CA, its implicit-TLS SMTP and HTTPS listeners (fd 5 and 6, after the
// HTTP and SMTP ones), and the CA certificate for candidates; and the
// inbox's: its own leaf and its IMAP listeners (STARTTLS, implicit TLS).
type writerTLS struct {
	lns                 []net.Listener // SMTP with TLS, HTTPS, IMAP, IMAPS
	cert, key           string
	inboxCert, inboxKey string
	caFile              string // a world-readable copy of the CA certificate
}

func (w *writerTLS) port(i int) int        { return w.lns[i].Addr().(*net.TCPAddr).Port }
func (w *writerTLS) smtpTLSPort() int      { return w.port(0) }
func (w *writerTLS) httpsPort() int        { return w.port(1) }
func (w *writerTLS) imapPorts() (int, int) { return w.port(2), w.port(3) }
func (w *writerTLS) httpsURL() string      { return "https://" + w.lns[1].Addr().String() }

func (w *writerTLS) close() {
	for _, ln := range w.lns {
		ln.Close()
	}
}

// prepareWriterTLS mints the CA (once per data directory, again when
// host or a --tls-name is outside its name constraints or it nears
// expiry), issues the writer's leaf for them, and opens the TLS listeners.
func (s *stack) prepareWriterTLS(c *cli.Context, host string, prev [4]int) (*writerTLS, error) {
	names := append([]string{host}, c.StringSlice("tls-name")...)
	if host != rpc.NetnsDoorHost { // the address of trials' doors inside their network namespaces
		names = append(names, rpc.NetnsDoorHost)
	}
	ca, err := tlsca.Ensure(filepath.Join(s.data, "plane", tlsca.DirName), names)
	if errors.Is(err, tlsca.ErrName) {
		return nil, cliapp.Usagef("--bind-host or --tls-name: %v", err)
	}
	if err != nil {
		return nil, fmt.Errorf("local CA: %w", err)
	}
	if ca.Renewed != "" {
		s.log.Warn().Str("why", ca.Renewed).Strs("names", names).
			Msg("local CA minted anew for these names: candidates must trust the new ca_file")
	}
	dir := filepath.Join(s.data, "writer-tls")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := ca.WriteLeaf(names, cert, key); err != nil {
		return nil, fmt.Errorf("writer certificate: %w", err)
	}
	w := &writerTLS{caFile: filepath.Join(s.data, "ca.pem"), cert: cert, key: key}
	idir := filepath.Join(s.data, "inbox-tls")
	if err := os.MkdirAll(idir, 0o700); err != nil {
		return nil, err
	}
	w.inboxCert, w.inboxKey = filepath.Join(idir, "cert.pem"), filepath.Join(idir, "key.pem")
	if err := ca.WriteLeaf(names, w.inboxCert, w.inboxKey); err != nil {
		return nil, fmt.Errorf("inbox certificate: %w", err)
	}
	if err := os.WriteFile(w.caFile, ca.CertPEM, 0o644); err != nil {
		return nil, err
	}
	if err := os.Chmod(w.caFile, 0o644); err != nil { // whatever the umask: candidates read it
		return nil, err
	}
	// Flags, else the last start's ports (bundles kept from it name them),
	// else any.
	for i, flag := range []string{"smtp-tls-port", "writer-https-port", "imap-port", "imaps-port"} {
		port := cmp.Or(c.Int(flag), prev[i])
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			w.close()
			return nil, cliapp.Usagef("listen on %s port %d: %v", host, port, err)
		}
		w.lns = append(w.lns, ln)
	}
	return w, nil
}

// configureInbox gives the inbox its certificate and its IMAP listeners,
// at the listen addresses imap and imaps.
func (w *writerTLS) configureInbox(cfg *inboxproc.Config, imap, imaps string) {
	cfg.TLSCert, cfg.TLSKey, cfg.IMAPListen, cfg.IMAPSListen = w.inboxCert, w.inboxKey, imap, imaps
}

// configure gives the writer w's certificate and its two listeners, at
// the listen addresses smtpTLS and https.
func (w *writerTLS) configure(cfg *writerproc.Config, smtpTLS, https string) {
	cfg.TLSCert, cfg.TLSKey, cfg.SMTPTLSListen, cfg.HTTPSListen = w.cert, w.key, smtpTLS, https
}
