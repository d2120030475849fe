// Package serve is mail-plane serve: the broker's composition root. It
// opens the ledger and the message store, keeps the plane's own grant
// files, and serves the RPC on one Unix socket, and nothing else: no TCP.
package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/credfiles"
	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/internal/logging"
	"github.com/websitebench/mailplane/internal/msgstore"
	"github.com/websitebench/mailplane/internal/msgstore/mailpit"
	"github.com/websitebench/mailplane/internal/peercred"
	"github.com/websitebench/mailplane/internal/plane"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// StoreFlags choose and size the message store; up passes them through.
func StoreFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "store", Value: "sqlite", Usage: "where the ledger and the mail live: sqlite (embedded, in --data), mailpit (mail in Mailpit, the ledger in --data) or postgres (both in PostgreSQL, which several planes may share)"},
		&cli.StringFlag{Name: "dsn-file", Usage: "with --store postgres: a file holding the database's DSN (libpq key=value or postgres:// URL), e.g. from systemd's LoadCredential (default: $" + DSNEnv + ")"},
		&cli.StringFlag{Name: "mailpit-socket", Usage: "with --store mailpit: HTTP socket (http.sock) of a running Mailpit (default: $" + mailpit.SocketEnv + "; if neither, the plane starts its own Mailpit)"},
		&cli.StringFlag{Name: "mailpit-smtp-socket", Usage: "SMTP socket of that Mailpit (default: smtp.sock beside --mailpit-socket)"},
		&cli.StringFlag{Name: "mailpit-runtime", Value: mailpit.RuntimeBinary, Usage: "how the plane runs its own Mailpit: binary or docker"},
		&cli.StringFlag{Name: "mailpit-binary", Usage: "mailpit executable for --mailpit-runtime binary (default: mailpit on PATH)", EnvVars: []string{"MAILPLANE_MAILPIT"}},
		&cli.StringFlag{Name: "mailpit-image", Value: mailpit.DefaultImage, Usage: "image for --mailpit-runtime docker"},
		&cli.Int64Flag{Name: "quota-messages", Value: plane.DefaultQuotas.Messages, Usage: "messages per namespace (0: unlimited)"},
		&cli.Int64Flag{Name: "quota-bytes", Value: plane.DefaultQuotas.Bytes, Usage: "stored bytes per namespace (0: unlimited)"},
		&cli.Int64Flag{Name: "event-budget", Value: ledger.DefaultEventBudget, Usage: "events a namespace's trail holds before refusals and reads are only counted, in one summary (0: unlimited)"},
		&cli.DurationFlag{Name: "evidence-retention", Value: plane.DefaultRetention, Usage: "how long a closed trial's trail is kept for mail-plane evidence export"},
	}
}

// DSNEnv holds the PostgreSQL DSN when --dsn-file is not given. No flag
// takes the DSN itself: it would show in ps.
const DSNEnv = "MAILPLANE_DSN"

// Command is mail-plane serve: the broker's composition root.
func Command() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run the broker on its Unix socket",
		Description: "The broker listens on one Unix socket and nowhere else. Each connection is identified by the kernel\n" +
			"(SO_PEERCRED) and each call by a grant. On first start it writes admin.grant and gateway.grant\n" +
			"(mode 0600) into --grants-dir.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "socket", Value: cliapp.DefaultSocket, Usage: "Unix socket to listen on (its directory is created 0750)", EnvVars: []string{"MAILPLANE_SOCKET"}},
			&cli.StringFlag{Name: "socket-mode", Value: "0660", Usage: "file mode of the socket"},
			&cli.StringFlag{Name: "data", Value: cliapp.DefaultData, Usage: "directory of the database (created 0700)", EnvVars: []string{"MAILPLANE_DATA"}},
			&cli.StringFlag{Name: "grants-dir", Usage: "where admin.grant and gateway.grant are kept (default: --data)"},
			&cli.StringSliceFlag{Name: "allow-uid", Usage: "ROLE=UID[,UID...]: only these uids may use ROLE's grants (repeatable)"},
			&cli.StringSliceFlag{Name: "allow-gid", Usage: "ROLE=GID[,GID...]: only these gids may use ROLE's grants (repeatable)"},
			&cli.DurationFlag{Name: "rpc-read-timeout", Value: plane.DefaultReadTimeout, Usage: "how long a caller may take to send one request"},
			&cli.StringFlag{Name: "advertise-writer", Usage: "URL of the shared mail-writer's HTTP door, as candidates reach it (enables trial.open)"},
			&cli.StringFlag{Name: "advertise-inbox", Usage: "URL of the shared mail-inbox, as agents reach it"},
			&cli.StringFlag{Name: "advertise-gateway", Usage: "URL of mail-gateway, as evaluators reach it"},
			&cli.StringFlag{Name: "advertise-smtp", Usage: "HOST:PORT of the shared writer's SMTP listener (AUTH selects the trial there)"},
			&cli.StringFlag{Name: "advertise-ca-file", Usage: "with the writer serving TLS: the path of the CA certificate candidates trust (ca_file)"},
			&cli.IntFlag{Name: "advertise-smtp-tls-port", Usage: "with the writer serving TLS: its implicit-TLS SMTP port (smtp_tls_port)"},
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
	mode, err := strconv.ParseUint(c.String("socket-mode"), 8, 32)
	if err != nil || mode > 0o777 {
		return cliapp.Usagef("--socket-mode %q: want an octal file mode such as 0660", c.String("socket-mode"))
	}
	peers := peercred.Policy{}
	if err := peers.ParseAllow(c.StringSlice("allow-uid"), false, rpc.RoleNames); err != nil {
		return cliapp.Usagef("--allow-uid: %v", err)
	}
	if err := peers.ParseAllow(c.StringSlice("allow-gid"), true, rpc.RoleNames); err != nil {
		return cliapp.Usagef("--allow-gid: %v", err)
	}
	quotas := plane.Quotas{Messages: c.Int64("quota-messages"), Bytes: c.Int64("quota-bytes")}
	if quotas.Messages < 0 || quotas.Bytes < 0 {
		return cliapp.Usagef("quotas must not be negative")
	}
	if c.Int64("event-budget") < 0 || c.Duration("evidence-retention") <= 0 {
		return cliapp.Usagef("--event-budget must not be negative, --evidence-retention must be positive")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	data := c.String("data")
	l, err := openLedger(ctx, c)
	if err != nil {
		return err
	}
	defer l.Close()
	store, err := openStore(ctx, c, l, log)
	if err != nil {
		return err
	}
	defer store.Close()
	broker := plane.NewBroker(l, store, quotas, log)
	broker.SetEvidence(c.Int64("event-budget"), c.Duration("evidence-retention"))
	adv, err := advertise(c)
	if err != nil {
		return err
	}
	broker.SetAdvertise(adv)
	grants := c.String("grants-dir")
	if grants == "" {
		grants = data
	}
	// The gateway's and admin's grants, and the shared writer's and
	// inbox's: surfaces that serve every trial.
	for _, role := range []rpc.Role{rpc.RoleAdmin, rpc.RoleGateway, rpc.RoleWriter, rpc.RoleInbox} {
		if err := ensureGrantFile(ctx, broker, filepath.Join(grants, string(role)+".grant"), role); err != nil {
			return err
		}
	}
	ln, err := plane.Listen(c.String("socket"), os.FileMode(mode))
	if err != nil {
		return cliapp.Usagef("%v", err)
	}
	srv := plane.NewServer(broker, peers, c.Duration("rpc-read-timeout"), log).HTTPServer()
	go broker.Run(ctx)
	go l.Watch(ctx, broker.Changed)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info().Str("socket", c.String("socket")).Str("store", c.String("store")).Str("data", data).
		Int64("quota_messages", quotas.Messages).Int64("quota_bytes", quotas.Bytes).Msg("plane listening")
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info().Msg("shutting down")
	// Whatever hangs (a store that does not answer), the process ends.
	time.AfterFunc(15*time.Second, func() {
		log.Error().Msg("shutdown took longer than 15s; exiting")
		os.Exit(1)
	})
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		srv.Close()
	}
	os.Remove(c.String("socket"))
	return nil
}

// advertise reads the --advertise-* flags: all or none.
func advertise(c *cli.Context) (plane.Advertise, error) {
	var a plane.Advertise
	names := []string{"advertise-writer", "advertise-inbox", "advertise-gateway", "advertise-smtp"}
	set := 0
	for _, n := range names {
		if c.String(n) != "" {
			set++
		}
	}
	if set == 0 {
		return a, nil
	}
	if set != len(names) {
		return a, cliapp.Usagef("--advertise-writer, --advertise-inbox, --advertise-gateway and --advertise-smtp go together")
	}
	for _, n := range names[:3] {
		u, err := url.Parse(c.String(n))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return a, cliapp.Usagef("--%s %q: want an origin such as http://127.0.0.1:8030", n, c.String(n))
		}
	}
	host, port, err := net.SplitHostPort(c.String("advertise-smtp"))
	p, perr := strconv.Atoi(port)
	if err != nil || perr != nil || p <= 0 || p > 65535 || host == "" {
		return a, cliapp.Usagef("--advertise-smtp %q: want HOST:PORT", c.String("advertise-smtp"))
	}
	trim := func(n string) string { return strings.TrimSuffix(c.String(n), "/") }
	return plane.Advertise{WriterURL: trim("advertise-writer"), InboxURL: trim("advertise-inbox"), GatewayURL: trim("advertise-gateway"),
		SMTPHost: host, SMTPPort: p, CAFile: c.String("advertise-ca-file"), SMTPTLSPort: c.Int("advertise-smtp-tls-port"),
		WriterHTTPSURL: trim("advertise-writer-https")}, nil
}

// openLedger opens the ledger the flags ask for: in --data, or with
// --store postgres in the database the DSN names.
func openLedger(ctx context.Context, c *cli.Context) (*ledger.Ledger, error) {
	if c.String("store") != "postgres" {
		return ledger.Open(ctx, c.String("data"))
	}
	dsn, err := readDSN(c.String("dsn-file"))
	if err != nil {
		return nil, err
	}
	l, err := ledger.OpenPostgres(ctx, dsn)
	if errors.Is(err, ledger.ErrDSN) {
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

// openStore opens the message store the flags ask for.
func openStore(ctx context.Context, c *cli.Context, l *ledger.Ledger, log zerolog.Logger) (msgstore.Store, error) {
	switch c.String("store") {
	case "sqlite":
		w, r := l.Handles()
		return msgstore.NewSQLite(ctx, w, r)
	case "postgres":
		w, r := l.Handles()
		return msgstore.NewPostgres(ctx, w, r, ledger.MigrationLock)
	case "mailpit":
		// The flag, else the reference's variable (blank counts as unset);
		// with neither, the plane runs a private Mailpit whose database
		// lives in --data, so its mail outlives the process.
		socket := strings.TrimSpace(c.String("mailpit-socket"))
		if socket == "" {
			socket = strings.TrimSpace(os.Getenv(mailpit.SocketEnv))
		}
		how := c.String("mailpit-runtime")
		if how != mailpit.RuntimeBinary && how != mailpit.RuntimeDocker {
			return nil, cliapp.Usagef("--mailpit-runtime %q: want binary or docker", how)
		}
		s, err := mailpit.Open(ctx, mailpit.Options{
			HTTPSocket: socket,
			SMTPSocket: c.String("mailpit-smtp-socket"),
			Ephemeral: mailpit.EphemeralConfig{
				Runtime: how,
				Binary:  c.String("mailpit-binary"),
				Image:   c.String("mailpit-image"),
				DataDir: filepath.Join(c.String("data"), "mailpit"),
			},
			Log: log,
		})
		if errors.Is(err, mailpit.ErrNotConfigured) {
			return nil, cliapp.UsageError{Err: err}
		}
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	return nil, cliapp.Usagef("--store %q: want sqlite, mailpit or postgres", c.String("store"))
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
