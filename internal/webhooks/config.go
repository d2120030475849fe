// Package webhooks is a trial's provider webhooks: the endpoints the admin
// configures (Parse), the trial's own verification material (Keys), the
// events the plane derives from what happened to the trial's mail
// (events.go), and how each provider shapes and signs one (sign.go). It
// links no network: the plane decides what to send, the hooks process
// (package hooksproc) sends it.
package webhooks

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Providers whose webhooks are served.
const (
	Resend   = "resend"
	SendGrid = "sendgrid"
	Mailgun  = "mailgun"
	Postmark = "postmark"
)

// Names lists the providers, in the order errors name them.
var Names = []string{Resend, SendGrid, Mailgun, Postmark}

// DefaultRetries is each provider's own retry schedule, the waits after
// a failed attempt (Resend's documented one; the others are near it).
var DefaultRetries = map[string][]int{
	Resend:   {5, 300, 1800, 7200, 18000, 36000},
	SendGrid: {5, 300, 1800, 7200, 18000, 36000},
	Mailgun:  {10, 600, 900, 1800, 3600, 7200, 14400},
	Postmark: {60, 300, 600, 600, 900, 1800, 3600, 7200, 21600},
}

// Hook is one configured endpoint, as stored.
type Hook struct {
	Provider     string `json:"provider"`
	URL          string `json:"url"`
	RetrySeconds []int  `json:"retry_seconds"`
}

// Parse checks a trial's webhooks as the admin gave them and answers them
// as stored (JSON, "" for none), each with its retry schedule filled in.
// An error names the bad entry and is safe to show: it never quotes a URL,
// which may carry Basic credentials (Postmark's).
func Parse(in []rpc.Webhook) (string, error) {
	if len(in) == 0 {
		return "", nil
	}
	if len(in) > limits.Webhooks {
		return "", fmt.Errorf("at most %d webhooks per trial", limits.Webhooks)
	}
	hooks := make([]Hook, 0, len(in))
	for i, w := range in {
		if !slices.Contains(Names, w.Provider) {
			return "", fmt.Errorf("webhooks[%d]: provider must be one of %s", i, strings.Join(Names, ", "))
		}
		if err := checkURL(w.URL); err != nil {
			return "", fmt.Errorf("webhooks[%d]: url %v", i, err)
		}
		retries := w.RetrySeconds
		if retries == nil {
			retries = DefaultRetries[w.Provider]
		}
		if len(retries) > limits.WebhookRetries {
			return "", fmt.Errorf("webhooks[%d]: at most %d retry_seconds", i, limits.WebhookRetries)
		}
		for _, s := range retries {
			if s < 0 || time.Duration(s)*time.Second > limits.WebhookRetryMax {
				return "", fmt.Errorf("webhooks[%d]: each retry_seconds must be from 0 to %d", i, int(limits.WebhookRetryMax/time.Second))
			}
		}
		hooks = append(hooks, Hook{Provider: w.Provider, URL: w.URL, RetrySeconds: slices.Clone(retries)})
	}
	b, err := json.Marshal(hooks)
	return string(b), err
}

// checkURL accepts an absolute http or https URL with a host, without a
// fragment; its error never quotes it.
func checkURL(s string) error {
	if s == "" {
		return fmt.Errorf("is required")
	}
	if len(s) > limits.WebhookURLBytes {
		return fmt.Errorf("is longer than %d bytes", limits.WebhookURLBytes)
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("does not parse")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("must be http:// or https://")
	}
	if u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("must name a host")
	}
	if u.Fragment != "" || strings.Contains(s, "#") {
		return fmt.Errorf("must have no fragment")
	}
	return nil
}

// Load reads hooks as Parse stored them ("" is none).
func Load(stored string) ([]Hook, error) {
	if stored == "" {
		return nil, nil
	}
	var hs []Hook
	err := json.Unmarshal([]byte(stored), &hs)
	return hs, err
}

// Shown is hooks as an operator may see them: each URL without its
// credentials.
func Shown(hs []Hook) []rpc.Webhook {
	out := make([]rpc.Webhook, 0, len(hs))
	for _, h := range hs {
		out = append(out, rpc.Webhook{Provider: h.Provider, URL: WithoutCredentials(h.URL), RetrySeconds: h.RetrySeconds})
	}
	return out
}

// WithoutCredentials is u without its user information.
func WithoutCredentials(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	if p.User != nil {
		p.User = url.User("redacted")
	}
	return p.String()
}
