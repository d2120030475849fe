// Package sigv4 checks AWS Signature Version 4, split the way the plane's
// zones are: the writer, which reads the request but must never hold a
// secret it could replay into another trial, turns a signed request into
// a Proof (the access key id, the string to sign and the signature); the
// plane, which holds what the trial's secret access key is made from,
// checks the Proof (Verify). A Proof is bound to its request's body (its
// hash is in the string to sign), to one trial (the access key id is the
// trial's namespace) and to a quarter of an hour, so that a writer that
// keeps one can replay it nowhere else.
//
// https://docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html
package sigv4

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Algorithm is the only signing algorithm accepted.
const Algorithm = "AWS4-HMAC-SHA256"

// Service is the signing name of Amazon SES.
const Service = "ses"

// Skew is how far a request's X-Amz-Date may be from the plane's clock,
// AWS's own bound.
const Skew = 15 * time.Minute

// Limits on what a Proof carries.
const (
	maxAuthorization = 2048
	maxAccessKeyID   = 128
	maxSignedHeaders = 32
	maxStringToSign  = 512
	amzDateLayout    = "20060102T150405Z"
	dateLayout       = "20060102"
	terminator       = "aws4_request"
	unsignedPayload  = "UNSIGNED-PAYLOAD"
)

// Errors of Prove: the request is not a complete SigV4 request. They are
// the writer's to answer; a wrong signature is the plane's.
var (
	ErrMissing    = errors.New("sigv4: no Authorization header")
	ErrIncomplete = errors.New("sigv4: incomplete or malformed signature")
	ErrPayload    = errors.New("sigv4: the payload hash does not match the body")
	// ErrMismatch is a signature that does not verify (Verify).
	ErrMismatch = errors.New("sigv4: signature does not match")
	// ErrExpired is a request dated too far from now (Verify).
	ErrExpired = errors.New("sigv4: signature expired")
)

// Proof is what the plane needs to check a request's signature.
type Proof struct {
	AccessKeyID  string `json:"access_key_id"`
	StringToSign string `json:"string_to_sign"`
	Signature    string `json:"signature"`
}

// auth is a parsed Authorization header.
type auth struct {
	accessKeyID, date, region, service string
	signedHeaders                      []string
	signature                          string
}

// Prove reads r's Authorization header and builds its string to sign over
// r and its body.
func Prove(r *http.Request, body []byte) (Proof, error) {
	a, err := parseAuthorization(r.Header.Get("Authorization"))
	if err != nil {
		return Proof{}, err
	}
	amzDate := r.Header.Get("X-Amz-Date")
	if !slices.Contains(a.signedHeaders, "host") || !slices.Contains(a.signedHeaders, "x-amz-date") ||
		len(amzDate) != len(amzDateLayout) || amzDate[:8] != a.date {
		return Proof{}, ErrIncomplete
	}
	sum := sha256.Sum256(body)
	payload := hex.EncodeToString(sum[:])
	if given := r.Header.Get("X-Amz-Content-Sha256"); given != "" && (given == unsignedPayload || !hmac.Equal([]byte(given), []byte(payload))) {
		return Proof{}, ErrPayload
	}
	canonical := canonicalRequest(r, a.signedHeaders, payload)
	scope := a.date + "/" + a.region + "/" + a.service + "/" + terminator
	return Proof{AccessKeyID: a.accessKeyID, StringToSign: stringToSign(amzDate, scope, canonical), Signature: a.signature}, nil
}

func stringToSign(amzDate, scope, canonical string) string {
	h := sha256.Sum256([]byte(canonical))
	return Algorithm + "\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(h[:])
}

// parseAuthorization reads "AWS4-HMAC-SHA256 Credential=AKID/date/region/
// service/aws4_request, SignedHeaders=a;b, Signature=hex".
func parseAuthorization(h string) (auth, error) {
	var a auth
	if h == "" {
		return a, ErrMissing
	}
	rest, ok := strings.CutPrefix(h, Algorithm+" ")
	if !ok || len(h) > maxAuthorization {
		return a, ErrIncomplete
	}
	var cred, signed string
	for part := range strings.SplitSeq(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			cred = v
		case "SignedHeaders":
			signed = v
		case "Signature":
			a.signature = v
		}
	}
	fields := strings.Split(cred, "/")
	if len(fields) != 5 || fields[4] != terminator || !token(fields[0], maxAccessKeyID) || !validDate(fields[1]) ||
		!token(fields[2], 64) || !token(fields[3], 64) || !lowerHex(a.signature, 64) {
		return a, ErrIncomplete
	}
	a.accessKeyID, a.date, a.region, a.service = fields[0], fields[1], fields[2], fields[3]
	a.signedHeaders = strings.Split(signed, ";")
	if signed == "" || len(a.signedHeaders) > maxSignedHeaders || !slices.IsSorted(a.signedHeaders) {
		return a, ErrIncomplete
	}
	for _, name := range a.signedHeaders {
		if !token(name, 64) || strings.ToLower(name) != name {
			return a, ErrIncomplete
		}
	}
	return a, nil
}

// canonicalRequest is SigV4's canonical form of r.
func canonicalRequest(r *http.Request, signed []string, payload string) string {
	var b strings.Builder
	b.WriteString(r.Method + "\n")
	b.WriteString(escapePath(r.URL.EscapedPath()) + "\n")
	b.WriteString(canonicalQuery(r.URL.Query()) + "\n")
	for _, name := range signed {
		b.WriteString(name + ":" + headerValue(r, name) + "\n")
	}
	b.WriteString("\n" + strings.Join(signed, ";") + "\n" + payload)
	return b.String()
}

// headerValue is a signed header's canonical value: its values, each
// trimmed with runs of spaces collapsed, joined by commas. Go's server
// keeps Host and Content-Length out of r.Header.
func headerValue(r *http.Request, name string) string {
	switch name {
	case "host":
		return r.Host
	case "content-length":
		if r.ContentLength < 0 {
			return ""
		}
		return strconv.FormatInt(r.ContentLength, 10)
	}
	vals := r.Header.Values(name)
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = strings.Join(strings.Fields(v), " ")
	}
	return strings.Join(out, ",")
}

// escapePath escapes every byte of an (already escaped) path but the
// unreserved ones and "/", as SigV4 does for every service but S3.
func escapePath(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if unreserved(c) || c == '/' {
			b.WriteByte(c)
			continue
		}
		b.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{c})))
	}
	return b.String()
}

func unreserved(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~'
}

// canonicalQuery sorts the query by name, then value, and escapes both.
func canonicalQuery(q url.Values) string {
	for _, v := range q {
		slices.Sort(v)
	}
	return strings.ReplaceAll(q.Encode(), "+", "%20")
}

// Verify checks p with the trial's secret access key, at now.
func Verify(p Proof, secret string, now time.Time) error {
	lines := strings.Split(p.StringToSign, "\n")
	if len(p.StringToSign) > maxStringToSign || len(lines) != 4 || lines[0] != Algorithm || !lowerHex(lines[3], 64) || !lowerHex(p.Signature, 64) {
		return ErrMismatch
	}
	at, err := time.Parse(amzDateLayout, lines[1])
	scope := strings.Split(lines[2], "/")
	if err != nil || len(scope) != 4 || scope[0] != lines[1][:8] || scope[2] != Service || scope[3] != terminator || !token(scope[1], 64) {
		return ErrMismatch
	}
	if d := now.Sub(at); d > Skew || d < -Skew {
		return ErrExpired
	}
	key := Key(secret, scope[0], scope[1], scope[2])
	want := hex.EncodeToString(mac(key, p.StringToSign))
	if !hmac.Equal([]byte(want), []byte(p.Signature)) {
		return ErrMismatch
	}
	return nil
}

// Key derives the signing key of secret for one day, region and service.
func Key(secret, date, region, service string) []byte {
	k := mac([]byte("AWS4"+secret), date)
	k = mac(k, region)
	k = mac(k, service)
	return mac(k, terminator)
}

func mac(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

// SecretPrefix starts every secret access key Secret makes, so that the
// redaction point knows one wherever it turns up (internal/redact).
const SecretPrefix = "mps_"

// Secret is a trial's secret access key: "mps_" and 36 base64url
// characters (40 in all, as AWS's are), made with the plane's SES key
// (package seskey) from what the plane keeps of the trial's write token (its
// digest) and its namespace. The plane can sign with it again without
// storing it, it changes when the token is rotated, and it is gone with the
// trial. Whoever reads the ledger (its token digests) still cannot make
// it without the key, which the ledger never holds; nobody who holds only
// the secret can derive the token, nor another trial's secret.
func Secret(key, tokenDigest []byte, namespace string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("mailplane ses secret access key v2\x00" + namespace + "\x00"))
	m.Write(tokenDigest)
	return SecretPrefix + base64.RawURLEncoding.EncodeToString(m.Sum(nil))[:40-len(SecretPrefix)]
}

// token: 1 to max printable ASCII characters without separators.
func token(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '/' || c == ',' || c == ';' || c == '=' {
			return false
		}
	}
	return true
}

func validDate(s string) bool {
	_, err := time.Parse(dateLayout, s)
	return len(s) == 8 && err == nil
}

func lowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
