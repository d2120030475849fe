// Package sendapi is what the writer's provider-compatible send APIs
// (SendGrid, Postmark, Mailgun, Amazon SES; one package each under
// internal/sendapi) have in common: the message a provider's request asks
// for, read for its shape only, and the refusals the writer answers with,
// which each provider renders in its own error shape and status codes.
//
// A provider package never judges values (is this an address, a header a
// sender may set, an attachment name), never talks to the plane and holds
// no credential: it turns bytes into Emails, and Failures into answers.
// The writer judges each Email exactly as it judges POST /emails, composes
// the same message, and sends it through the same plane call, so that
// every door applies one rule.
package sendapi

import (
	"net/http"
	"strconv"

	"github.com/websitebench/mailplane/internal/apierr"
)

// Email is one message a provider's request asks for, before the writer
// judges its values. Addresses are as given ("Name <a@example.com>" or
// bare). Raw, when set, is a whole MIME message (SES's Content.Raw): then
// only From and the recipients are read besides it.
type Email struct {
	From        string
	To          []string
	Cc          []string
	Bcc         []string
	ReplyTo     []string
	Subject     string
	Text        *string
	HTML        *string
	Headers     []Header
	Attachments []Attachment
	Raw         []byte
	// Refused is set on an email of a batch that its parser already
	// refused (the others are still sent); the writer skips it.
	Refused *Error
}

// Header is one header a sender asked for.
type Header struct {
	Name, Value string
}

// Attachment is one file, decoded.
type Attachment struct {
	Filename    string
	ContentType string // empty: derived from Filename
	ContentID   string // set: an inline part
	Content     []byte
}

// Failure is why a request was refused, as a provider's answer tells it.
type Failure int

const (
	// Unauthorized: no credential, or one that opens no trial.
	Unauthorized Failure = iota + 1
	// Invalid: a request that is not what the API takes (shape or value).
	Invalid
	// MediaType: a body of a type the API does not read.
	MediaType
	// TooLarge: the body or the composed message exceeds its limit.
	TooLarge
	// Quota: the trial's mailbox quota is exhausted.
	Quota
	// Sealed: the trial no longer accepts mail.
	Sealed
	// Busy: the trial has its share of requests in flight.
	Busy
	// Unavailable: an outage of the plane or its store (never a refusal).
	Unavailable
	// Internal: an answer the writer did not expect.
	Internal
)

// Error is one refusal: Failure decides the status; Field names the part
// of the request at fault where the provider's shape has a place for it;
// Message is fixed text, never an echo of the request's values.
type Error struct {
	Failure Failure
	Field   string
	// Code is the provider's own code for the refusal, where its parser
	// knows a more precise one than Failure's (Postmark's ErrorCode 402).
	Code    string
	Message string
	// Status and RetryAfter are a fault on purpose's (internal/faults):
	// the status its rule names, answered in the provider's shape for
	// Failure, and the seconds of its Retry-After.
	Status     int
	RetryAfter int
}

// Answer writes body, the provider's shape of e, with status (or the
// fault's status, and its Retry-After).
func (e *Error) Answer(w http.ResponseWriter, status int, body any) {
	if e.Status != 0 {
		status = e.Status
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	WriteJSON(w, status, body)
}

// Fail returns a refusal with f's default message.
func Fail(f Failure) *Error { return &Error{Failure: f, Message: defaultMessage[f]} }

// Bad returns an Invalid refusal about field.
func Bad(field, message string) *Error {
	return &Error{Failure: Invalid, Field: field, Message: message}
}

var defaultMessage = map[Failure]string{
	Unauthorized: "The credential is missing or invalid.",
	Invalid:      "The request is invalid.",
	MediaType:    "The body's content type is not supported.",
	TooLarge:     "The message exceeds the size limit.",
	Quota:        "The mailbox quota is exhausted.",
	Sealed:       "This mailbox no longer accepts mail.",
	Busy:         "Too many requests of this trial in flight; retry when one is answered.",
	Unavailable:  "Mail storage is unavailable; try again later.",
	Internal:     "Unexpected error.",
}

// Result is the writer's verdict on one Email of a request: its id, or
// its refusal.
type Result struct {
	ID  string
	To  []string // the Email's To, as given, for answers that echo it
	Err *Error
}

// API is one provider's send API on the writer.
type API interface {
	// Name is the API's name in bundles and the trail: "sendgrid", …
	Name() string
	// Match reports whether a request to path (escaped, as sent) is this
	// API's; every method but POST is then refused by the writer.
	Match(path string) bool
	// Batch reports whether the request at path is a batch whose emails
	// are judged one by one (Postmark's /email/batch): its body may be
	// larger, and an invalid email is one of its answers, not the answer.
	Batch(path string) bool
	// Credential returns the bearer credential the request presents, or
	// false. (An API that is a Signed one presents a signature instead.)
	Credential(r *http.Request) (string, bool)
	// FieldName is field, a part of an email the writer judges by its
	// POST /emails name (from, to, cc, bcc, reply_to, subject), as this
	// API's request spells it, so that a refusal names what the caller
	// wrote.
	FieldName(field string) string
	// Parse reads the body of a request to path.
	Parse(r *http.Request, body []byte) ([]Email, *Error)
	// Accepted answers a request all or part of whose emails were judged.
	Accepted(w http.ResponseWriter, r *http.Request, results []Result)
	// Refuse answers a request refused as a whole.
	Refuse(w http.ResponseWriter, e *Error)
}

// Signed is an API whose requests are signed with AWS Signature Version
// 4 (package sigv4) instead of presenting a bearer credential: SES.
type Signed interface {
	API
	// Unsigned is the refusal of a request with no signature, or with
	// one that is not a complete SigV4 signature.
	Unsigned(missing bool) *Error
}

// FieldNames is an API's FieldName: names, else field itself.
func FieldNames(names map[string]string, field string) string {
	if n, ok := names[field]; ok {
		return n
	}
	return field
}

// WriteJSON answers with v in status, as every JSON answer of the writer
// is written (package apierr); an outage says when to try again.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	apierr.WriteJSON(w, status, v)
}
