package smtpd

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/emersion/go-smtp"

	"github.com/websitebench/mailplane/internal/mailmsg"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// IdempotencyHeader is Resend's SMTP spelling of POST /emails'
// Idempotency-Key: a client that repeats a message after an ambiguous
// answer (a 451, a lost connection after the final dot) with the same key
// gets the first message's 250 and id, and nothing is stored twice; the
// same key on another message is refused. The rules are the API's: 1 to
// 256 bytes, kept as long as the plane keeps the API's keys. The header is
// stored with the message (the stored bytes are the bytes sent); it is the
// client's own label, not a secret.
const IdempotencyHeader = "Resend-Idempotency-Key"

// maxIdempotencyKey is Resend's limit, as POST /emails applies it.
const maxIdempotencyKey = 256

var (
	errIdemKey      = &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "Resend-Idempotency-Key must be 1 to 256 characters"}
	errIdemConflict = &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 7, 0}, Message: "Resend-Idempotency-Key already used for another message"}
)

// idempotency sets req's key and fingerprint from the message's
// Resend-Idempotency-Key header, if it has one.
func idempotency(req *rpc.SendRequest) *smtp.SMTPError {
	key, ok := mailmsg.HeaderValue(req.Raw, IdempotencyHeader)
	if !ok {
		return nil
	}
	if key == "" || len(key) > maxIdempotencyKey {
		return errIdemKey
	}
	// SMTP's keys are kept apart from the API's: the same label on a
	// POST /emails and on an SMTP message names two requests.
	d := sha256.Sum256([]byte("smtp\x00" + key))
	req.IdempotencyKey = hex.EncodeToString(d[:])
	req.Fingerprint = fingerprint(req.From, req.To, req.Raw)
	return nil
}

// volatile are the headers a mail library mints afresh each time it
// builds a message, so that a repeat of the same message is recognised
// when only they differ.
var volatile = []string{"date", "message-id", "received", strings.ToLower(IdempotencyHeader)}

// fingerprint is a digest of the envelope and of the message without its
// volatile headers. Every other byte counts.
func fingerprint(from string, to []string, raw []byte) string {
	h := sha256.New()
	h.Write([]byte(from))
	h.Write([]byte{0})
	for _, r := range to {
		h.Write([]byte(r))
		h.Write([]byte{0})
	}
	header, body := raw, []byte(nil)
	if i := bytes.Index(raw, []byte("\r\n\r\n")); i >= 0 {
		header, body = raw[:i+2], raw[i+2:]
	} else if i := bytes.Index(raw, []byte("\n\n")); i >= 0 {
		header, body = raw[:i+1], raw[i+1:]
	}
	skip := false
	for len(header) > 0 {
		line := header
		if i := bytes.IndexByte(header, '\n'); i >= 0 {
			line, header = header[:i+1], header[i+1:]
		} else {
			header = nil
		}
		if line[0] != ' ' && line[0] != '\t' {
			name, _, _ := bytes.Cut(line, []byte(":"))
			skip = false
			for _, v := range volatile {
				if strings.EqualFold(strings.TrimSpace(string(name)), v) {
					skip = true
				}
			}
		}
		if !skip {
			h.Write(line)
		}
	}
	h.Write([]byte{0})
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}
