package writer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/mail"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/websitebench/mailplane/internal/apierr"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/internal/mailmsg"
)

// Limits on the fields of POST /emails (docs/reference.md §5, §11), beyond the
// body size and recipient count the writer is configured with.
const (
	maxSubjectChars = 998 // code points
	maxAddressChars = limits.AddressBytes
	maxReplyTo      = 16
	maxTags         = 16
	maxTagChars     = 256
	maxHeaders      = 16
	maxHeaderName   = 76
	maxHeaderLine   = 998 // "Name: value", RFC 5322 §2.1.1
	maxIdemKeyBytes = limits.IdempotencyKeyBytes
)

// fields are the keys POST /emails accepts: the reference's four plus
// Resend's html, cc, bcc, reply_to, tags, headers and attachments
// (attachments.go), and scheduled_at, which is refused with a 422. from,
// to, subject and one of text or html are required.
var fields = []string{"from", "to", "subject", "text", "html", "cc", "bcc", "reply_to", "tags", "headers", "attachments", "scheduled_at"}

// email is a validated POST /emails body.
type email struct {
	From string // the envelope sender: a bare address
	// FromName is the display name of "Name <addr>" in from, kept in the
	// stored From (mailmsg.Sender cleans it).
	FromName string
	To       []string // bare addresses, as given (with display names removed)
	Cc       []string
	Bcc      []string
	ReplyTo  []string // as given, display names kept
	Subject  string
	Text     *string
	HTML     *string
	Tags     []tag
	Headers  []header // sorted by name
	// Attachments are in the order given (attachments.go).
	Attachments []attachment `json:",omitempty"`
}

type tag struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type header struct {
	Name, Value string
}

// Recipients is the envelope: to, then cc, then bcc.
func (e *email) Recipients() []string {
	return slices.Concat(e.To, e.Cc, e.Bcc)
}

// Fingerprint is a digest of the request's meaning, so that an idempotent
// repeat is recognised even when its JSON is spelled differently ("to" as
// a string or a one-element list, keys in another order), and a repeat
// with another payload is not.
func (e *email) Fingerprint() string {
	b, _ := json.Marshal(e)
	d := sha256.Sum256(b)
	return hex.EncodeToString(d[:])
}

// parseEmail checks a POST /emails body in the reference's order (§5 checks
// 7 to 10): UTF-8 JSON, then the key set, then every value. It returns
// errJSON, errFields, or errMessage's code with the field at fault and its
// rule (answers.go), and never looks at anything but the body.
func parseEmail(body []byte, maxRecipients int) (*email, *apierr.Error) {
	// encoding/json would quietly turn invalid UTF-8 into U+FFFD.
	if !utf8.Valid(body) {
		return nil, errJSON
	}
	top, lone, ok := decodeJSON(body)
	if !ok {
		return nil, errJSON
	}
	obj, ok := top.(map[string]any)
	if !ok {
		return nil, errFields
	}
	_, hasText := obj["text"]
	_, hasHTML := obj["html"]
	for k, v := range obj {
		if !slices.Contains(fields, k) {
			return nil, errFields
		}
		if v == nil && k != "from" && k != "to" && k != "subject" {
			delete(obj, k) // an optional field set to null is absent
		}
	}
	for _, k := range []string{"from", "to", "subject"} {
		if _, ok := obj[k]; !ok {
			return nil, errFields
		}
	}
	if !hasText && !hasHTML {
		return nil, errFields
	}
	if obj["text"] == nil && obj["html"] == nil {
		// The reference's key set, with a body that is not text: its value
		// is wrong, not its keys ("text": null).
		return nil, errBody
	}
	// An escaped lone surrogate decodes as U+FFFD, as in encoding/json;
	// the reference refuses it (§5 check 10).
	if lone {
		return nil, errSurrogate
	}
	e := &email{}
	var valid bool
	from, isStr := obj["from"].(string)
	if !isStr {
		return nil, errFrom
	}
	if e.From, e.FromName, valid = sender(from); !valid {
		return nil, errFrom
	}
	if e.To, valid = addressList(obj["to"], true); !valid {
		return nil, errTo
	}
	if e.Cc, valid = addressList(obj["cc"], false); !valid {
		return nil, errCc
	}
	if e.Bcc, valid = addressList(obj["bcc"], false); !valid {
		return nil, errBcc
	}
	if n := len(e.To) + len(e.Cc) + len(e.Bcc); n > maxRecipients {
		return nil, invalid("to", recipientsRule(maxRecipients))
	}
	if e.ReplyTo, valid = replyTo(obj["reply_to"]); !valid {
		return nil, errReplyTo
	}
	if e.Subject, valid = obj["subject"].(string); !valid || utf8.RuneCountInString(e.Subject) > maxSubjectChars || strings.ContainsAny(e.Subject, "\r\n") {
		return nil, errSubject
	}
	for _, k := range []string{"text", "html"} {
		v, present := obj[k]
		if !present {
			continue
		}
		s, isStr := v.(string)
		if !isStr {
			return nil, errBody
		}
		if k == "text" {
			e.Text = &s
		} else {
			e.HTML = &s
		}
	}
	if e.Tags, valid = tags(obj["tags"]); !valid {
		return nil, errTags
	}
	if e.Headers, valid = headers(obj["headers"]); !valid {
		return nil, errHeaders
	}
	var fail *apierr.Error
	if e.Attachments, fail = parseAttachments(obj["attachments"]); fail != nil {
		return nil, fail
	}
	if _, scheduled := obj["scheduled_at"]; scheduled {
		// Held mail would need a scheduler in the plane, and an evaluator
		// waiting for the mail would wait for a clock; refuse it clearly.
		return nil, errScheduled
	}
	return e, nil
}

// sender is from's bare address, with its display name as the plane
// keeps it (mailmsg.Sender).
func sender(from string) (addr, name string, ok bool) {
	if addr, ok = bareAddress(from); ok {
		name, _ = mailmsg.Sender(from)
	}
	return addr, name, ok
}

// bareAddress accepts "a@example.com" or Resend's "Name <a@example.com>"
// and returns the bare address, which must be a valid envelope address.
func bareAddress(s string) (string, bool) {
	if s == "" || utf8.RuneCountInString(s) > maxAddressChars || strings.ContainsAny(s, "\r\n") {
		return "", false
	}
	if mailmsg.ValidAddress(s) {
		return s, true
	}
	// Only the name-addr form: no groups, lists or comments, which
	// net/mail would also read as one address.
	a, err := mail.ParseAddress(s)
	if err != nil || !mailmsg.ValidAddress(a.Address) || !strings.HasSuffix(strings.TrimSpace(s), "<"+a.Address+">") {
		return "", false
	}
	return a.Address, true
}

// stringList reads JSON's "a string or a list of strings".
func stringList(v any) ([]string, bool) {
	switch t := v.(type) {
	case nil:
		return nil, true
	case string:
		return []string{t}, true
	case []any:
		out := make([]string, 0, len(t))
		for _, r := range t {
			s, ok := r.(string)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	return nil, false
}

// addressList reads a string or a list of strings as bare addresses.
// required means at least one address.
func addressList(v any, required bool) ([]string, bool) {
	raw, ok := stringList(v)
	if !ok || (required && len(raw) == 0) {
		return nil, false
	}
	if raw == nil {
		return nil, true
	}
	out := make([]string, 0, len(raw))
	for _, s := range raw {
		a, ok := bareAddress(s)
		if !ok {
			return nil, false
		}
		out = append(out, a)
	}
	return out, true
}

// replyTo reads reply_to (a string or a list) and keeps display names.
func replyTo(v any) ([]string, bool) {
	raw, ok := stringList(v)
	if !ok || len(raw) > maxReplyTo {
		return nil, false
	}
	if raw == nil {
		return nil, true
	}
	out := make([]string, 0, len(raw))
	for _, s := range raw {
		bare, ok := bareAddress(s)
		if !ok {
			return nil, false
		}
		name := ""
		if a, err := mail.ParseAddress(s); err == nil {
			name = a.Name
		}
		out = append(out, (&mail.Address{Name: name, Address: bare}).String())
	}
	return out, true
}

var tagSyntax = regexp.MustCompile(`^[A-Za-z0-9_-]*$`)

// tags reads Resend's [{"name": …, "value": …}]: ASCII letters, digits,
// underscores and dashes, at most 256 each; a name is required.
func tags(v any) ([]tag, bool) {
	if v == nil {
		return nil, true
	}
	list, ok := v.([]any)
	if !ok || len(list) > maxTags {
		return nil, false
	}
	out := make([]tag, 0, len(list))
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, false
		}
		var t tag
		for k, val := range m {
			s, ok := val.(string)
			if !ok || len(s) > maxTagChars || !tagSyntax.MatchString(s) {
				return nil, false
			}
			switch k {
			case "name":
				t.Name = s
			case "value":
				t.Value = s
			default:
				return nil, false
			}
		}
		if t.Name == "" {
			return nil, false
		}
		out = append(out, t)
	}
	return out, true
}

// headers reads the custom headers a sender may set: X-* (but not the
// plane's X-Tags and X-WebsiteBench-*, nor our X-Resend-Tag), and a few
// list and threading headers. Anything that shapes the message itself
// (From, Sender, Content-*, MIME-Version, Date, Message-ID, Received…) is
// the writer's or the plane's to set. Values are printable ASCII on one
// line.
func headers(v any) ([]header, bool) {
	if v == nil {
		return nil, true
	}
	m, ok := v.(map[string]any)
	if !ok || len(m) > maxHeaders {
		return nil, false
	}
	out := make([]header, 0, len(m))
	for name, val := range m {
		s, ok := val.(string)
		if !ok || !safeHeaderName(name) || len(name)+2+len(s) > maxHeaderLine || !printableASCII(s) {
			return nil, false
		}
		out = append(out, header{Name: name, Value: s})
	}
	sort.Slice(out, func(i, j int) bool { return strings.ToLower(out[i].Name) < strings.ToLower(out[j].Name) })
	for i := 1; i < len(out); i++ {
		if strings.EqualFold(out[i].Name, out[i-1].Name) {
			return nil, false
		}
	}
	return out, true
}

var allowedHeaders = []string{
	"list-unsubscribe", "list-unsubscribe-post", "list-id", "list-help",
	"in-reply-to", "references", "auto-submitted", "precedence", "keywords", "comments",
}

func safeHeaderName(name string) bool {
	if name == "" || len(name) > maxHeaderName {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c >= 0x7f || c == ':' {
			return false
		}
	}
	l := strings.ToLower(name)
	if l == "x-tags" || l == tagHeaderLower || strings.HasPrefix(l, "x-websitebench-") {
		return false
	}
	return strings.HasPrefix(l, "x-") || slices.Contains(allowedHeaders, l)
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c >= 0x7f {
			return false
		}
	}
	return true
}

// idempotencyDigest is what the plane keeps for a key: a digest, so that
// any bytes a client sent (a header may carry Latin-1) stay distinct
// through the plane's JSON, which would turn invalid UTF-8 into U+FFFD.
func idempotencyDigest(key string) string {
	if key == "" {
		return ""
	}
	d := sha256.Sum256([]byte(key))
	return hex.EncodeToString(d[:])
}

// validIdempotencyKey is §5 check 12: absent, or 1 to 256 bytes on one
// line.
func validIdempotencyKey(values []string) bool {
	if len(values) == 0 {
		return true
	}
	k := values[0]
	return k != "" && len(k) <= maxIdemKeyBytes && !strings.ContainsAny(k, "\r\n")
}
