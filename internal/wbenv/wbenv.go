// Package wbenv is the WEBSITEBENCH_* environment: every variable name the
// reference defines (docs/reference.md §9), in this one file, and the sets of
// them that each party is handed.
package wbenv

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// A candidate's mail ABI (docs/reference.md §9.1).
const (
	MailAPIURL            = "WEBSITEBENCH_MAIL_API_URL"
	MailAPIToken          = "WEBSITEBENCH_MAIL_API_TOKEN"
	MailFrom              = "WEBSITEBENCH_MAIL_FROM"
	SMTPHost              = "WEBSITEBENCH_SMTP_HOST"
	SMTPPort              = "WEBSITEBENCH_SMTP_PORT"
	SMTPFrom              = "WEBSITEBENCH_SMTP_FROM"
	MailboxBootstrapURL   = "WEBSITEBENCH_MAILBOX_BOOTSTRAP_URL"
	MailboxBootstrapToken = "WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN"
)

// The SMTP credential of a trial on a shared stack's host ports, where a
// client authenticates (Resend's convention: user "resend", the mail-API
// token as the password). Not in the reference's ABI, whose SMTP port is
// the trial's alone.
const (
	SMTPUsername = "WEBSITEBENCH_SMTP_USERNAME"
	SMTPPassword = "WEBSITEBENCH_SMTP_PASSWORD"
	// SMTPUser is the user name handed out; any name is accepted.
	SMTPUser = "resend"
)

// TLS, where the writer serves it (docs/tls.md): the local CA's
// certificate to trust, the implicit-TLS SMTP port (the SMTP port also
// offers STARTTLS) and the HTTPS door's POST /emails. A client configured
// from these verifies the writer, so it never hands its password to a
// process that took one of the trial's ports. Not in the reference's ABI.
// The two CA names hold the same file: each door's settings are complete
// under its own prefix, as MailFrom and SMTPFrom are.
const (
	SMTPCAFile      = "WEBSITEBENCH_SMTP_CA_FILE"
	SMTPTLSPort     = "WEBSITEBENCH_SMTP_TLS_PORT"
	MailAPIHTTPSURL = "WEBSITEBENCH_MAIL_API_HTTPS_URL"
	MailAPICAFile   = "WEBSITEBENCH_MAIL_API_CA_FILE"
)

// An authoring capture's further variables (docs/reference.md §9.2).
const (
	MailboxURL        = "WEBSITEBENCH_MAILBOX_URL"
	MailboxAllowlist  = "WEBSITEBENCH_MAILBOX_ALLOWLIST"
	MailboxCredential = "WEBSITEBENCH_MAILBOX_CREDENTIAL"
	MailboxNamespace  = "WEBSITEBENCH_MAILBOX_NAMESPACE"
)

// What the drop-in sidecar and the plane read.
const (
	MailpitHTTPSocket        = "WEBSITEBENCH_MAILPIT_HTTP_SOCKET"
	MailboxAPIBind           = "WEBSITEBENCH_MAILBOX_API_BIND"
	MailboxInboxBind         = "WEBSITEBENCH_MAILBOX_INBOX_BIND"
	MailboxSMTPAdvertiseHost = "WEBSITEBENCH_MAILBOX_SMTP_ADVERTISE_HOST"
)

// Prefix starts every name above; nothing with it reaches a child process
// that was not handed it by flag.
const Prefix = "WEBSITEBENCH_"

// candidateNames is the complete mail ABI a candidate may be handed.
// Nothing outside it reaches a candidate.
var candidateNames = []string{MailAPIURL, MailAPIToken, MailFrom, SMTPHost, SMTPPort, SMTPFrom, MailboxBootstrapURL, MailboxBootstrapToken,
	SMTPUsername, SMTPPassword, SMTPCAFile, SMTPTLSPort, MailAPIHTTPSURL, MailAPICAFile,
	ResendWebhookSecret, SendGridWebhookPublicKey, MailgunWebhookSigningKey}

// The trial's webhook verification material, under the names each
// provider's SDK examples read (docs/webhooks.md).
const (
	ResendWebhookSecret      = "RESEND_WEBHOOK_SECRET"
	SendGridWebhookPublicKey = "SENDGRID_WEBHOOK_PUBLIC_KEY"
	MailgunWebhookSigningKey = "MAILGUN_WEBHOOK_SIGNING_KEY"
)

// WithWebhookKeys adds to a candidate's environment the verification
// material of its trial's webhooks.
func WithWebhookKeys(env map[string]string, resendSecret, sendgridPublicKey, mailgunKey string) map[string]string {
	env[ResendWebhookSecret] = resendSecret
	env[SendGridWebhookPublicKey] = sendgridPublicKey
	env[MailgunWebhookSigningKey] = mailgunKey
	return env
}

// Candidate is the §9.1 environment of a candidate trial whose writer
// serves HTTP at writerURL (scheme, host and port) and SMTP on smtpPort
// of smtpHost.
func Candidate(writerURL, smtpHost string, smtpPort int, mailAPIToken, bootstrapToken string) map[string]string {
	return map[string]string{
		MailAPIURL:            writerURL + "/emails",
		MailAPIToken:          mailAPIToken,
		MailFrom:              rpc.CandidateSender,
		SMTPHost:              smtpHost,
		SMTPPort:              strconv.Itoa(smtpPort),
		SMTPFrom:              rpc.CandidateSender,
		MailboxBootstrapURL:   writerURL + "/internal/bootstrap",
		MailboxBootstrapToken: bootstrapToken,
	}
}

// WithSMTPAuth adds to a candidate's environment the SMTP credential a
// host trial's port requires: the mail-API token as the password.
func WithSMTPAuth(env map[string]string) map[string]string {
	env[SMTPUsername] = SMTPUser
	env[SMTPPassword] = env[MailAPIToken]
	return env
}

// WithTLS adds to a candidate's environment the TLS its writer serves:
// caFile, the CA certificate that verifies it (nothing is added without
// one), the implicit-TLS SMTP port and the HTTPS door's origin, each when
// served (0 or "": not).
func WithTLS(env map[string]string, caFile string, smtpTLSPort int, httpsURL string) map[string]string {
	if caFile == "" {
		return env
	}
	env[SMTPCAFile] = caFile
	if smtpTLSPort > 0 {
		env[SMTPTLSPort] = strconv.Itoa(smtpTLSPort)
	}
	if httpsURL != "" {
		env[MailAPIHTTPSURL] = httpsURL + "/emails"
		env[MailAPICAFile] = caFile
	}
	return env
}

// LocalURL is the URL of a port on 127.0.0.1: the reference's URLs always
// name it.
func LocalURL(port int) string { return "http://127.0.0.1:" + strconv.Itoa(port) }

// Check refuses an environment with a name outside the candidate ABI, or a
// name or value that points at the plane, Mailpit or a secret that is not
// the candidate's (forbidden lists such socket paths and secrets).
func Check(env map[string]string, forbidden ...string) error {
	var unknown []string
	for k := range env {
		if strings.HasPrefix(k, "WEBSITEBENCH_MAILPIT_") || strings.HasPrefix(k, "MAILPLANE_") {
			return fmt.Errorf("candidate mailbox environment exposed the mail plane's sockets (%s)", k)
		}
		if !slices.Contains(candidateNames, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("candidate mailbox environment has unknown names: %s", strings.Join(unknown, ", "))
	}
	forbidden = append(forbidden, "/run/websitebench-mailpit")
	for _, v := range env {
		for _, f := range forbidden {
			if f != "" && strings.Contains(v, f) {
				return fmt.Errorf("candidate mailbox environment exposed a socket or secret of the mail plane")
			}
		}
	}
	return nil
}

// Authoring is the §9.2 environment of an authoring trial whose API
// (gateway reads and writer routes) answers at apiURL and whose SMTP
// listener is smtpHost:smtpPort.
func Authoring(id rpc.Identity, apiURL, smtpHost string, smtpPort int) map[string]string {
	return map[string]string{
		MailboxURL:            apiURL,
		MailboxAllowlist:      "",
		MailboxCredential:     id.ReadCapability,
		MailboxNamespace:      id.Namespace,
		MailboxBootstrapURL:   apiURL + "/internal/bootstrap",
		MailboxBootstrapToken: id.BootstrapToken,
		SMTPHost:              smtpHost,
		SMTPPort:              strconv.Itoa(smtpPort),
		MailAPIURL:            apiURL + "/emails",
		MailAPIToken:          id.BootstrapToken,
		MailFrom:              rpc.CandidateSender,
		SMTPFrom:              rpc.CandidateSender,
	}
}
