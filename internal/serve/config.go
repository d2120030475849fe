package serve

import (
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/websitebench/mailplane/internal/cliapp"
	"github.com/websitebench/mailplane/internal/ledger/sqlledger"
	"github.com/websitebench/mailplane/internal/mailpitrun"
	"github.com/websitebench/mailplane/internal/plane"
)

// Config is a plane's whole configuration: what mail-plane serve reads
// from its flags (ConfigFromFlags), and what mail-plane up and sidecar
// build to start a plane as their child (Args). A plane option is a field
// here, a flag in Command, and one line in each of ConfigFromFlags and
// Args; TestConfigRoundTrip fails for a flag that is missing from either.
type Config struct {
	Socket, SocketMode, Data, GrantsDir string
	AllowUID, AllowGID                  []string // ROLE=ID[,ID...]
	RPCReadTimeout                      time.Duration
	Store                               StoreConfig
	Advertise                           AdvertiseConfig
}

// StoreConfig chooses and sizes the message store (StoreFlags).
type StoreConfig struct {
	Kind, DSNFile                                                                 string // sqlite, mailpit or postgres
	MailpitSocket, MailpitSMTPSocket, MailpitRuntime, MailpitBinary, MailpitImage string
	QuotaMessages, QuotaBytes, EventBudget                                        int64
	EvidenceRetention                                                             time.Duration
}

// AdvertiseConfig is what the plane tells parties where the shared
// surfaces are, as given (checked by advertise): all four URLs or none.
type AdvertiseConfig struct {
	Writer, Inbox, Gateway, SMTP string
	CAFile, WriterHTTPS          string
	SMTPTLSPort                  int
	// IMAPPort and IMAPSPort are the inbox's IMAP ports (STARTTLS,
	// implicit TLS), on the inbox's host; 0: no IMAP.
	IMAPPort, IMAPSPort int
}

// Defaults is the configuration of mail-plane serve without flags (and
// without the environment variables some flags fall back on).
func Defaults() Config {
	return Config{Socket: cliapp.DefaultSocket, SocketMode: "0660", Data: cliapp.DefaultData,
		RPCReadTimeout: plane.DefaultReadTimeout, Store: DefaultStore()}
}

// DefaultStore is the store flags' defaults: the embedded store, with the
// reference's quotas.
func DefaultStore() StoreConfig {
	return StoreConfig{Kind: "sqlite", MailpitRuntime: mailpitrun.RuntimeBinary, MailpitImage: mailpitrun.DefaultImage,
		QuotaMessages: plane.DefaultQuotas.Messages, QuotaBytes: plane.DefaultQuotas.Bytes,
		EventBudget: sqlledger.DefaultEventBudget, EvidenceRetention: plane.DefaultRetention}
}

// ConfigFromFlags reads mail-plane serve's flags.
func ConfigFromFlags(c *cli.Context) Config {
	return Config{
		Socket: c.String("socket"), SocketMode: c.String("socket-mode"), Data: c.String("data"), GrantsDir: c.String("grants-dir"),
		AllowUID: c.StringSlice("allow-uid"), AllowGID: c.StringSlice("allow-gid"), RPCReadTimeout: c.Duration("rpc-read-timeout"),
		Store: StoreFromFlags(c),
		Advertise: AdvertiseConfig{Writer: c.String("advertise-writer"), Inbox: c.String("advertise-inbox"),
			Gateway: c.String("advertise-gateway"), SMTP: c.String("advertise-smtp"), CAFile: c.String("advertise-ca-file"),
			WriterHTTPS: c.String("advertise-writer-https"), SMTPTLSPort: c.Int("advertise-smtp-tls-port"),
			IMAPPort: c.Int("advertise-imap-port"), IMAPSPort: c.Int("advertise-imaps-port")},
	}
}

// StoreFromFlags reads StoreFlags, of serve or of up.
func StoreFromFlags(c *cli.Context) StoreConfig {
	return StoreConfig{Kind: c.String("store"), DSNFile: c.String("dsn-file"),
		MailpitSocket: c.String("mailpit-socket"), MailpitSMTPSocket: c.String("mailpit-smtp-socket"),
		MailpitRuntime: c.String("mailpit-runtime"), MailpitBinary: c.String("mailpit-binary"), MailpitImage: c.String("mailpit-image"),
		QuotaMessages: c.Int64("quota-messages"), QuotaBytes: c.Int64("quota-bytes"),
		EventBudget: c.Int64("event-budget"), EvidenceRetention: c.Duration("evidence-retention")}
}

// Args are mail-plane serve's flags for cfg, the one place a supervisor's
// plane child gets its command line from: ConfigFromFlags of Args(cfg) is
// cfg. An empty string is left out (the flag's default is empty, or the
// flag has none worth repeating); numbers and durations always go.
func (cfg Config) Args() []string {
	var args cliapp.Args
	str := args.Str
	str("socket", cfg.Socket)
	str("socket-mode", cfg.SocketMode)
	str("data", cfg.Data)
	str("grants-dir", cfg.GrantsDir)
	for _, v := range cfg.AllowUID {
		str("allow-uid", v)
	}
	for _, v := range cfg.AllowGID {
		str("allow-gid", v)
	}
	str("rpc-read-timeout", cfg.RPCReadTimeout.String())
	s := cfg.Store
	str("store", s.Kind)
	str("dsn-file", s.DSNFile)
	str("mailpit-socket", s.MailpitSocket)
	str("mailpit-smtp-socket", s.MailpitSMTPSocket)
	str("mailpit-runtime", s.MailpitRuntime)
	str("mailpit-binary", s.MailpitBinary)
	str("mailpit-image", s.MailpitImage)
	str("quota-messages", strconv.FormatInt(s.QuotaMessages, 10))
	str("quota-bytes", strconv.FormatInt(s.QuotaBytes, 10))
	str("event-budget", strconv.FormatInt(s.EventBudget, 10))
	str("evidence-retention", s.EvidenceRetention.String())
	a := cfg.Advertise
	str("advertise-writer", a.Writer)
	str("advertise-inbox", a.Inbox)
	str("advertise-gateway", a.Gateway)
	str("advertise-smtp", a.SMTP)
	str("advertise-ca-file", a.CAFile)
	str("advertise-smtp-tls-port", strconv.Itoa(a.SMTPTLSPort))
	str("advertise-writer-https", a.WriterHTTPS)
	str("advertise-imap-port", strconv.Itoa(a.IMAPPort))
	str("advertise-imaps-port", strconv.Itoa(a.IMAPSPort))
	return args
}
