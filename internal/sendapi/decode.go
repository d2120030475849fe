package sendapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/mail"
	"strings"
	"unicode/utf8"
)

// DecodeJSON reads body, which must be UTF-8 JSON, into v (a struct of the
// provider's request). Unknown keys are left alone, as the providers do. A
// value of the wrong type is an Invalid refusal naming its field.
func DecodeJSON(body []byte, v any) *Error {
	// encoding/json would quietly turn invalid UTF-8 into U+FFFD.
	if !utf8.Valid(body) {
		return Bad("", "The body is not UTF-8 JSON.")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) && typ.Field != "" {
			return Bad(typ.Field, "The value of "+typ.Field+" has the wrong type.")
		}
		return Bad("", "The body is not valid JSON.")
	}
	if dec.More() {
		return Bad("", "The body is not valid JSON.")
	}
	return nil
}

// DecodeBase64 accepts what base64 encoders write: the standard alphabet,
// with or without padding, wrapped at any width.
func DecodeBase64(s string) ([]byte, bool) {
	clean := strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return -1
		}
		return r
	}, s)
	if b, err := base64.StdEncoding.Strict().DecodeString(clean); err == nil {
		return b, true
	}
	if b, err := base64.RawStdEncoding.Strict().DecodeString(clean); err == nil {
		return b, true
	}
	return nil, false
}

// NameAddr writes an address with its display name, as "Name <addr>", or
// the bare address when there is no name.
func NameAddr(name, addr string) string {
	if name == "" {
		return addr
	}
	return (&mail.Address{Name: name, Address: addr}).String()
}

// Text returns a pointer to s, or nil when s is empty: the providers treat
// an empty body as an absent one.
func Text(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// SplitList splits a comma-separated address list (Postmark's To,
// Mailgun's to) at the commas outside quotes and angle brackets, in one
// pass.
func SplitList(s string) []string {
	var out []string
	quoted, angle, escaped := false, false, false
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case escaped:
			escaped = false
		case c == '\\' && quoted:
			escaped = true
		case c == '"':
			quoted = !quoted
		case c == '<' && !quoted:
			angle = true
		case c == '>' && !quoted:
			angle = false
		case c == ',' && !quoted && !angle:
			if a := strings.TrimSpace(s[start:i]); a != "" {
				out = append(out, a)
			}
			start = i + 1
		}
	}
	if a := strings.TrimSpace(s[start:]); a != "" {
		out = append(out, a)
	}
	return out
}
