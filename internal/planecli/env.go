package planecli

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// candidateNames is the complete mail ABI a candidate may be handed
// (BEHAVIOR.md §9.1). Nothing outside it reaches a candidate.
var candidateNames = []string{
	"WEBSITEBENCH_MAIL_API_URL",
	"WEBSITEBENCH_MAIL_API_TOKEN",
	"WEBSITEBENCH_MAIL_FROM",
	"WEBSITEBENCH_SMTP_HOST",
	"WEBSITEBENCH_SMTP_PORT",
	"WEBSITEBENCH_SMTP_FROM",
	"WEBSITEBENCH_MAILBOX_BOOTSTRAP_URL",
	"WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN",
}

// CandidateEnvironment is the §9.1 environment for a candidate trial whose
// writer serves HTTP on writerPort and SMTP on smtpPort. URLs always name
// 127.0.0.1, as the reference's do.
func CandidateEnvironment(id rpc.Identity, writerPort, smtpPort int) map[string]string {
	base := "http://127.0.0.1:" + strconv.Itoa(writerPort)
	return map[string]string{
		"WEBSITEBENCH_MAIL_API_URL":            base + "/emails",
		"WEBSITEBENCH_MAIL_API_TOKEN":          id.MailAPIToken,
		"WEBSITEBENCH_MAIL_FROM":               rpc.CandidateSender,
		"WEBSITEBENCH_SMTP_HOST":               "127.0.0.1",
		"WEBSITEBENCH_SMTP_PORT":               strconv.Itoa(smtpPort),
		"WEBSITEBENCH_SMTP_FROM":               rpc.CandidateSender,
		"WEBSITEBENCH_MAILBOX_BOOTSTRAP_URL":   base + "/internal/bootstrap",
		"WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN": id.BootstrapToken,
	}
}

// CheckCandidateEnvironment refuses an environment with a name outside the
// candidate ABI, or a name or value that points at the plane, Mailpit or
// a secret that is not the candidate's (forbidden lists such socket paths
// and secrets).
func CheckCandidateEnvironment(env map[string]string, forbidden ...string) error {
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

// AuthoringEnvironment is the §9.2 environment of an authoring trial whose
// API (gateway reads and writer routes) answers at apiURL and whose SMTP
// listener is smtpHost:smtpPort.
func AuthoringEnvironment(id rpc.Identity, apiURL, smtpHost string, smtpPort int) map[string]string {
	return map[string]string{
		"WEBSITEBENCH_MAILBOX_URL":             apiURL,
		"WEBSITEBENCH_MAILBOX_ALLOWLIST":       "",
		"WEBSITEBENCH_MAILBOX_CREDENTIAL":      id.ReadCapability,
		"WEBSITEBENCH_MAILBOX_NAMESPACE":       id.Namespace,
		"WEBSITEBENCH_MAILBOX_BOOTSTRAP_URL":   apiURL + "/internal/bootstrap",
		"WEBSITEBENCH_MAILBOX_BOOTSTRAP_TOKEN": id.BootstrapToken,
		"WEBSITEBENCH_SMTP_HOST":               smtpHost,
		"WEBSITEBENCH_SMTP_PORT":               strconv.Itoa(smtpPort),
		"WEBSITEBENCH_MAIL_API_URL":            apiURL + "/emails",
		"WEBSITEBENCH_MAIL_API_TOKEN":          id.BootstrapToken,
		"WEBSITEBENCH_MAIL_FROM":               rpc.CandidateSender,
		"WEBSITEBENCH_SMTP_FROM":               rpc.CandidateSender,
	}
}
