// Package redact is the one place where text that might hold a secret is
// made safe to write down: log lines, error texts, evidence files.
//
// It removes what the reference removes (docs/reference.md §10) and, in addition,
// anything shaped like a secret this project mints, each by its own shape:
// grants (mpg_ and 64 hex), SES secret access keys (mps_ and 36 base64url),
// netns door keys (mpd_ and 26 base32), Resend webhook secrets (whsec_ and
// 44 base64), 64-hex capabilities and tokens,
// and 43-character inbox tokens.
package redact

import (
	"encoding/json"
	"io"
	"regexp"
	"strings"
)

// Marker replaces every secret.
const Marker = "[REDACTED]"

// reference is docs/reference.md §10's pattern, verbatim.
var reference = regexp.MustCompile(`(?i)(?:bearer\s+[^\s"']+|(?:authorization|cookie|credential|password|secret|token|otp|verification[-_ ]?code|card[-_ ]?number)\s*[:=]\s*(?:bearer\s+)?[^\s,;]+)`)

// prefixed matches the secrets we mint with a prefix of their own (grants,
// SES secrets, door keys) wherever they stand, even inside a longer run of
// token characters; minted the others, also inside JSON strings where the
// reference's "key: value" shape does not apply.
var (
	prefixed = regexp.MustCompile(`mpg_[0-9a-fA-F]{64}|mps_[A-Za-z0-9_-]{36}|mpd_[A-Z2-7]{26}|whsec_[A-Za-z0-9+/]{43}=`)
	minted   = regexp.MustCompile(`\b[0-9a-fA-F]{64}\b|[A-Za-z0-9_-]{43,}`)
)

// ShortestMinted is the length of the shortest secret we mint (a door
// key): text with no run of token characters this long holds none.
const ShortestMinted = 30

// Text returns s with every secret replaced by Marker.
func Text(s string) string {
	return Minted(reference.ReplaceAllString(s, Marker))
}

// Minted returns s with only the secrets this project mints replaced by
// Marker: for text a person must read as it was written, such as mail
// shown to the operator, where Text would also hide "code: 123456".
func Minted(s string) string {
	s = prefixed.ReplaceAllString(s, Marker)
	return minted.ReplaceAllStringFunc(s, func(m string) string {
		// A run of base64url characters is a token only when it is exactly
		// one: longer runs (URLs' paths, hashes of other lengths) stay.
		if len(m) == 43 || len(m) == 64 {
			return Marker
		}
		return m
	})
}

// evidenceKey is docs/reference.md §10's key rule for redact_evidence.
var evidenceKey = regexp.MustCompile(`(?i)authorization|cookie|credential|password|secret|token|otp|code|payment|card`)

// Evidence returns a copy of a decoded JSON value in which every object
// member whose key looks secret has its whole value replaced by Marker,
// recursively; strings elsewhere are kept as they are, as the reference
// does.
func Evidence(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, val := range t {
			if evidenceKey.MatchString(k) {
				out[k] = Marker
			} else {
				out[k] = Evidence(val)
			}
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, val := range t {
			out[i] = Evidence(val)
		}
		return out
	default:
		return v
	}
}

// Writer redacts every write before passing it on. Each Write must carry
// whole lines (zerolog writes one event per call), so that no secret is
// split across two writes. A JSON line is redacted string by string, so
// that a pattern never swallows the quote that ends a value and the line
// stays JSON.
type Writer struct{ W io.Writer }

func (w Writer) Write(p []byte) (int, error) {
	out := string(p)
	if strings.HasPrefix(out, "{") {
		out = JSONStrings(out)
	} else {
		out = Text(out)
	}
	if _, err := io.WriteString(w.W, out); err != nil {
		return 0, err
	}
	return len(p), nil
}

var jsonString = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// JSONStrings redacts the content of every string literal of a JSON text.
func JSONStrings(s string) string {
	return jsonString.ReplaceAllStringFunc(s, func(lit string) string {
		var v string
		if json.Unmarshal([]byte(lit), &v) != nil {
			return Text(lit)
		}
		r := Text(v)
		if r == v {
			return lit
		}
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.Encode(r)
		return strings.TrimSuffix(b.String(), "\n")
	})
}
