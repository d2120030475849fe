// Package serve is mail-plane serve: the broker's composition root. It
// opens the ledger and the message store, keeps the plane's own grant
// files, and serves the RPC on one Unix socket, and nothing else: no TCP.
package serve

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/credfiles"
	"github.com/websitebench/mailplane/internal/evidence"
	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/ledger/sqlledger"
	"github.com/websitebench/mailplane/internal/logging"
	"github.com/websitebench/mailplane/internal/mailpitrun"
	"github.com/websitebench/mailplane/internal/msgstore"
	"github.com/websitebench/mailplane/internal/msgstore/mailpit"
	"github.com/websitebench/mailplane/internal/peercred"
	"github.com/websitebench/mailplane/internal/plane"
	"github.com/websitebench/mailplane/internal/seskey"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// StoreFlags choose and size the message store; up passes them through.
func StoreFlags() []cli.Flag {
	d := DefaultStore()
	return []cli.Flag{
		&cli.StringFlag{Name: "store", Value: d.Kind, Usage: "where the ledger and the mail live: sqlite (embedded, in --data), mailpit (mail in Mailpit, the ledger in --data) or postgres (both in PostgreSQL, which several planes may share)"},
		&cli.StringFlag{Name: "dsn-file", Usage: "with --store postgres: a file holding the database's DSN (libpq key=value or postgres:// URL), e.g. from systemd's LoadCredential (default: $" + DSNEnv + ")"},
		&cli.StringFlag{Name: "mailpit-socket", Usage: "with --store mailpit: HTTP socket (http.sock) of a running Mailpit (default: $" + mailpit.SocketEnv + "; if neither, the plane starts its own Mailpit)"},
		&cli.StringFlag{Name: "mailpit-smtp-socket", Usage: "SMTP socket of that Mailpit (default: smtp.sock beside --mailpit-socket)"},
		&cli.StringFlag{Name: "mailpit-runtime", Value: d.MailpitRuntime, Usage: "how the plane runs its own Mailpit: binary or docker"},
		&cli.StringFlag{Name: "mailpit-binary", Usage: "mailpit executable for --mailpit-runtime binary (default: mailpit on PATH)", EnvVars: []string{"MAILPLANE_MAILPIT"}},
		&cli.StringFlag{Name: "mailpit-image", Value: d.MailpitImage, Usage: "image for --mailpit-runtime docker"},
		&cli.Int64Flag{Name: "quota-messages", Value: d.QuotaMessages, Usage: "messages per namespace (0: unlimited)"},
		&cli.Int64Flag{Name: "quota-bytes", Value: d.QuotaBytes, Usage: "stored bytes per namespace (0: unlimited)"},
		&cli.Int64Flag{Name: "event-budget", Value: d.EventBudget, Usage: "events a namespace's trail holds before refusals and reads are only counted, in one summary; the agent's opens and clicks have as many again of their own (0: unlimited)"},
		&cli.DurationFlag{Name: "evidence-retention", Value: d.EvidenceRetention, Usage: "how long a closed trial's trail is kept for mail-plane evidence export"},
	}
}

// DSNEnv holds the PostgreSQL DSN when --dsn-file is not given. No flag
// takes the DSN itself: it would show in ps.
const DSNEnv = "MAILPLANE_DSN"

// Command is mail-plane serve: the broker's composition root.
func Command() *cli.Command {
	d := Defaults()
	return &cli.Command{
		Name:  "serve",
		Usage: "run the broker on its Unix socket",
		Description: "The broker listens on one Unix socket and nowhere else. Each connection is identified by the kernel\n" +
			"(SO_PEERCRED) and each call by a grant. On first start it writes admin.grant and gateway.grant\n" +
			"(mode 0600) into --grants-dir.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "socket", Value: d.Socket, Usage: "Unix socket to listen on (its directory is created 0750)", EnvVars: []string{"MAILPLANE_SOCKET"}},
			&cli.StringFlag{Name: "socket-mode", Value: d.SocketMode, Usage: "file mode of the socket"},
			&cli.StringFlag{Name: "data", Value: d.Data, Usage: "directory of the database (created 0700)", EnvVars: []string{"MAILPLANE_DATA"}},
			&cli.StringFlag{Name: "grants-dir", Usage: "where admin.grant and gateway.grant are kept (default: --data)"},
			&cli.StringSliceFlag{Name: "allow-uid", Usage: "ROLE=UID[,UID...]: only these uids may use ROLE's grants (repeatable)"},
			&cli.StringSliceFlag{Name: "allow-gid", Usage: "ROLE=GID[,GID...]: only these gids may use ROLE's grants (repeatable)"},
			&cli.DurationFlag{Name: "rpc-read-timeout", Value: d.RPCReadTimeout, Usage: "how long a caller may take to send one request"},
			&cli.StringFlag{Name: "advertise-writer", Usage: "URL of the shared mail-writer's HTTP door, as candidates reach it (enables trial.open)"},
			&cli.StringFlag{Name: "advertise-inbox", Usage: "URL of the shared mail-inbox, as agents reach it"},
			&cli.StringFlag{Name: "advertise-gateway", Usage: "URL of mail-gateway, as evaluators reach it"},
			&cli.StringFlag{Name: "advertise-smtp", Usage: "HOST:PORT of the shared writer's SMTP listener (AUTH selects the trial there)"},
			&cli.StringFlag{Name: "advertise-ca-file", Usage: "with the writer serving TLS: the path of the CA certificate candidates trust (ca_file)"},
			&cli.IntFlag{Name: "advertise-smtp-tls-port", Usage: "with the writer serving TLS: its implicit-TLS SMTP port (smtp_tls_port)"},
			&cli.IntFlag{Name: "advertise-imap-port", Usage: "with the inbox serving IMAP: its STARTTLS port, on the inbox's host (inbox_imap.port)"},
			&cli.IntFlag{Name: "advertise-imaps-port", Usage: "with the inbox serving IMAP: its implicit-TLS port (inbox_imap.tls_port)"},
			&cli.StringFlag{Name: "advertise-writer-https", Usage: "with the writer serving TLS: the URL of its HTTPS door (writer_https_url)"},
		}, StoreFlags()...),
		Action: serve,
	}
}

func serve(c *cli.Context) error {
	log, err := logging.FromFlags(c, "mail-plane")
	if err != nil {
		return cliapp.UsageError{Err: err}
	}
	return Run(ConfigFromFlags(c), log)
}

// Run runs the plane cfg describes until SIGINT or SIGTERM.
func Run(cfg Config, log zerolog.Logger) error {
	mode, err := strconv.ParseUint(cfg.SocketMode, 8, 32)
	if err != nil || mode > 0o777 {
		return cliapp.Usagef("--socket-mode %q: want an octal file mode such as 0660", cfg.SocketMode)
	}
	peers := peercred.Policy{}
	if err := peers.ParseAllow(cfg.AllowUID, false, rpc.RoleNames); err != nil {
		return cliapp.Usagef("--allow-uid: %v", err)
	}
	if err := peers.ParseAllow(cfg.AllowGID, true, rpc.RoleNames); err != nil {
		return cliapp.Usagef("--allow-gid: %v", err)
	}
	st := cfg.Store
	quotas := plane.Quotas{Messages: st.QuotaMessages, Bytes: st.QuotaBytes}
	if quotas.Messages < 0 || quotas.Bytes < 0 {
		return cliapp.Usagef("quotas must not be negative")
	}
	if st.EventBudget < 0 || st.EvidenceRetention <= 0 {
		return cliapp.Usagef("--event-budget must not be negative, --evidence-retention must be positive")
	}
	adv, err := advertise(cfg.Advertise)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	l, err := openLedger(ctx, st, cfg.Data)
	if err != nil {
		return err
	}
	defer l.Close()
	id, err := planeID(cfg.Data)
	if err != nil {
		return err
	}
	if err := l.SetPlane(ctx, id); err != nil {
		return err
	}
	store, closeStore, err := openStore(ctx, st, cfg.Data, log)
	if err != nil {
		return err
	}
	defer closeStore()
	broker := plane.NewBroker(l, store, quotas, log)
	broker.SetEvidence(st.EventBudget, st.EvidenceRetention)
	if err := setSigner(broker, cfg.Data); err != nil {
		return err
	}
	if err := setSESKey(ctx, broker, l, cfg.Data, log); err != nil {
		return err
	}
	broker.SetAdvertise(adv)
	grants := cmp.Or(cfg.GrantsDir, cfg.Data)
	// The gateway's, admin's, console's and hooks process's grants, and
	// the shared writer's and inbox's: surfaces that serve every trial.
	for _, role := range []rpc.Role{rpc.RoleAdmin, rpc.RoleGateway, rpc.RoleWriter, rpc.RoleInbox, rpc.RoleConsole, rpc.RoleHooks} {
		if err := ensureGrantFile(ctx, broker, filepath.Join(grants, string(role)+".grant"), role); err != nil {
			return err
		}
	}
	ln, err := listenSocket(cfg.Socket, os.FileMode(mode))
	if err != nil {
		return cliapp.Usagef("%v", err)
	}
	srv := plane.NewServer(broker, peers, cfg.RPCReadTimeout, log)
	go broker.Run(ctx)
	go l.Watch(ctx, broker.Changed)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info().Str("socket", cfg.Socket).Str("store", st.Kind).Str("data", cfg.Data).Str("plane", id).
		Int64("quota_messages", quotas.Messages).Int64("quota_bytes", quotas.Bytes).Msg("plane listening")
	select {
	case err := <-errc:
		return err
	case <-l.Broken():
		// As PostgreSQL after a failed fsync: what was committed since the
		// last good flush may be lost, and readers see it; a restart
		// recovers from what the disk holds (docs/storage.md).
		log.Error().Msg("the ledger's flush to the disk failed; exiting, so that a restart recovers the database from the disk")
		stop() // the broker's runners and long polls end, as on a signal
		shutdown(srv, cfg.Socket, log)
		return errLedgerBroken
	case <-ctx.Done():
	}
	shutdown(srv, cfg.Socket, log)
	return nil
}

// errLedgerBroken is Run's error when the ledger's flush failed.
var errLedgerBroken = errors.New("mail-plane serve: the ledger could not flush its write-ahead log to the disk; restart the plane")

// Shutdown bounds: the RPC server's drain (open long-polls end at once,
// as the broker's Run ends with the context; a call still running after
// drainTimeout is cut), and the whole of a stop, whatever hangs (a store
// that does not answer).
const (
	drainTimeout = 5 * time.Second
	exitTimeout  = 15 * time.Second
)

// shutdown drains the RPC server within drainTimeout and removes the
// socket; past exitTimeout the process exits whatever still runs.
func shutdown(srv *plane.Server, socket string, log zerolog.Logger) {
	log.Info().Msg("shutting down")
	time.AfterFunc(exitTimeout, func() {
		log.Error().Msg("shutdown took longer than " + exitTimeout.String() + "; exiting")
		os.Exit(1)
	})
	sctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn().Err(err).Msg("RPC calls still running after " + drainTimeout.String() + "; closing them")
		srv.Close()
	}
	os.Remove(socket)
}

// setSigner gives the broker the key it signs trails with, kept in the
// data directory (minted 0600 at first start; it never leaves it).
func setSigner(b *plane.Broker, data string) error {
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	key, err := ensureEvidenceKey(filepath.Join(data, evidence.KeyFile))
	if err != nil {
		return fmt.Errorf("evidence key: %w", err)
	}
	b.SetSigner(key)
	return nil
}

// sesKeyCheck is the meta key under which the ledger keeps the SES key's
// check value.
const sesKeyCheck = "ses_key_check"

// setSESKey gives the broker the key it makes SES secrets with, kept in
// the data directory (minted 0600 at first start; it never leaves it and
// is never in the ledger), and compares it with the one the ledger's first
// plane made its trials' SES secrets with (by a one-way check value). They
// differ when planes of one PostgreSQL minted a key each, or when a data
// directory lost its ses.key: SES requests for the other key's trials are
// then refused here, and the log says why and what to do.
func setSESKey(ctx context.Context, b *plane.Broker, l *sqlledger.DB, data string, log zerolog.Logger) error {
	key, err := seskey.Ensure(filepath.Join(data, seskey.File))
	if err != nil {
		return fmt.Errorf("SES key: %w", err)
	}
	b.SetSESKey(key)
	mine := seskey.Check(key)
	kept, err := l.KeyCheck(ctx, sesKeyCheck, mine)
	if err != nil {
		return fmt.Errorf("SES key check: %w", err)
	}
	if kept != mine {
		log.Error().Str("file", filepath.Join(data, seskey.File)).Msg("this plane's SES key is not the one the database's trials were opened with " +
			"(another plane of this database minted its own, or this data directory lost its ses.key): SES signatures for those trials are refused here; " +
			"copy ses.key from a plane of the database into this data directory (0600) and restart")
	}
	return nil
}

// advertise checks the --advertise-* flags: all four URLs or none.
func advertise(c AdvertiseConfig) (plane.Advertise, error) {
	var a plane.Advertise
	urls := []struct{ name, v string }{{"advertise-writer", c.Writer}, {"advertise-inbox", c.Inbox}, {"advertise-gateway", c.Gateway}}
	set := 0
	for _, v := range []string{c.Writer, c.Inbox, c.Gateway, c.SMTP} {
		if v != "" {
			set++
		}
	}
	if set == 0 {
		return a, nil
	}
	if set != 4 {
		return a, cliapp.Usagef("--advertise-writer, --advertise-inbox, --advertise-gateway and --advertise-smtp go together")
	}
	for _, n := range urls {
		u, err := url.Parse(n.v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return a, cliapp.Usagef("--%s %q: want an origin such as http://127.0.0.1:8030", n.name, n.v)
		}
	}
	host, port, err := net.SplitHostPort(c.SMTP)
	p, perr := strconv.Atoi(port)
	if err != nil || perr != nil || p <= 0 || p > 65535 || host == "" {
		return a, cliapp.Usagef("--advertise-smtp %q: want HOST:PORT", c.SMTP)
	}
	trim := func(v string) string { return strings.TrimSuffix(v, "/") }
	return plane.Advertise{WriterURL: trim(c.Writer), InboxURL: trim(c.Inbox), GatewayURL: trim(c.Gateway),
		SMTPHost: host, SMTPPort: p, CAFile: c.CAFile, SMTPTLSPort: c.SMTPTLSPort,
		WriterHTTPSURL: trim(c.WriterHTTPS), IMAPPort: c.IMAPPort, IMAPSPort: c.IMAPSPort}, nil
}

// openLedger opens the ledger the flags ask for: in --data, or with
// --store postgres in the database the DSN names.
func openLedger(ctx context.Context, c StoreConfig, data string) (*sqlledger.DB, error) {
	if c.Kind != "postgres" {
		return sqlledger.Open(ctx, data)
	}
	dsn, err := readDSN(c.DSNFile)
	if err != nil {
		return nil, err
	}
	l, err := sqlledger.OpenPostgres(ctx, dsn)
	if errors.Is(err, sqlledger.ErrDSN) {
		return nil, cliapp.UsageError{Err: err}
	}
	return l, err
}

// readDSN reads the DSN from file, else from $MAILPLANE_DSN. Its content
// is never repeated in an error.
func readDSN(file string) (string, error) {
	if file == "" {
		dsn := strings.TrimSpace(os.Getenv(DSNEnv))
		if dsn == "" {
			return "", cliapp.Usagef("--store postgres needs the database's DSN: --dsn-file PATH or $%s", DSNEnv)
		}
		return dsn, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", cliapp.Usagef("--dsn-file: %v", err)
	}
	dsn := strings.TrimSpace(string(b))
	if dsn == "" {
		return "", cliapp.Usagef("--dsn-file %s is empty", file)
	}
	return dsn, nil
}

// openStore opens the external message store the flags ask for, or
// returns nil when the ledger keeps the bodies in its own database. With
// --store mailpit and no Mailpit named, it starts the plane's private one
// (its database in --data, so its mail outlives the process); close stops
// both.
func openStore(ctx context.Context, c StoreConfig, data string, log zerolog.Logger) (_ msgstore.Store, close func(), err error) {
	switch c.Kind {
	case "sqlite", "postgres":
		return nil, func() {}, nil
	case "mailpit":
	default:
		return nil, nil, cliapp.Usagef("--store %q: want sqlite, mailpit or postgres", c.Kind)
	}
	// The flag, else the reference's variable (blank counts as unset).
	o := mailpit.Options{
		HTTPSocket: cmp.Or(strings.TrimSpace(c.MailpitSocket), strings.TrimSpace(os.Getenv(mailpit.SocketEnv))),
		SMTPSocket: c.MailpitSMTPSocket,
		Log:        log,
	}
	stopRun := func() {}
	if o.HTTPSocket == "" {
		how := c.MailpitRuntime
		if how != mailpitrun.RuntimeBinary && how != mailpitrun.RuntimeDocker {
			return nil, nil, cliapp.Usagef("--mailpit-runtime %q: want binary or docker", how)
		}
		run, err := mailpitrun.Start(ctx, mailpitrun.Config{
			Runtime: how,
			Binary:  c.MailpitBinary,
			Image:   c.MailpitImage,
			DataDir: filepath.Join(data, "mailpit"),
			Log:     log,
		})
		if errors.Is(err, mailpitrun.ErrNoBinary) {
			return nil, nil, cliapp.UsageError{Err: fmt.Errorf("%s is not configured, and %w", mailpit.SocketEnv, err)}
		}
		if err != nil {
			return nil, nil, err
		}
		o.HTTPSocket, o.SMTPSocket = run.HTTPSocket, run.SMTPSocket
		stopRun = func() { run.Stop() }
	}
	s, err := mailpit.Open(ctx, o)
	if err != nil {
		stopRun()
		return nil, nil, err
	}
	return s, func() { s.Close(); stopRun() }, nil
}

// ensureGrantFile keeps a grant for role in path: minted and written (0600)
// on first start, re-registered if the database was replaced.
func ensureGrantFile(ctx context.Context, b *plane.Broker, path string, role rpc.Role) error {
	if g, err := rpc.ReadSecretFile(path); err == nil {
		if err := b.EnsureGrant(ctx, g, role); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	g := ident.Grant()
	if err := b.EnsureGrant(ctx, g, role); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return credfiles.WriteSecret(path, g)
}

// PlaneIDFile, in the plane's data directory, holds its identity: minted
// at first start, kept for ever after. On a PostgreSQL database several
// planes share, it tells whose trial an SMTP port is (sqlledger.DB.SetPlane).
const PlaneIDFile = "plane.id"

// planeID reads the plane's identity from dir, minting it on first start.
func planeID(dir string) (string, error) {
	path := filepath.Join(dir, PlaneIDFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", err
		}
		id := "plane-" + ident.Hex(8)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return "", err
		}
		_, err = f.WriteString(id + "\n")
		if err := errors.Join(err, f.Sync(), f.Close()); err != nil {
			return "", err
		}
		return id, nil
	}
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if !planeIDSyntax.MatchString(id) {
		return "", fmt.Errorf("%s: not a plane identity (want plane- and 16 hex digits)", path)
	}
	return id, nil
}

var planeIDSyntax = regexp.MustCompile(`^plane-[0-9a-f]{16}$`)
