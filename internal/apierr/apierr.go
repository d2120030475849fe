// Package apierr is the one error envelope of every JSON answer the HTTP
// surfaces give (the writer, the gateway, the sidecar's API router): the
// reference's `error` code plus Resend's `name`, a fixed `message`, and
// `statusCode`. Nothing from a request or from the plane is ever echoed
// in it.
package apierr

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
)

// Error is one refusal. Code is the reference's `error` value (verifier
// scripts match it); Name is Resend's name for the same situation
// (https://resend.com/docs/api-reference/errors), so Resend clients
// understand it too.
type Error struct {
	Status  int
	Code    string
	Name    string
	Message string
}

// Errors more than one surface answers with.
var (
	// Unavailable is every outage: the plane or its store cannot be asked.
	Unavailable = &Error{http.StatusServiceUnavailable, "mailpit_unavailable", "application_error", "Mail storage is unavailable; try again later."}
	// LengthRequired is a body with neither a Content-Length nor chunked
	// framing.
	LengthRequired = &Error{http.StatusLengthRequired, "content_length_required", "validation_error", "A Content-Length (or a chunked body) is required."}
	// TrialBusy is a request of a trial that already has its share of
	// requests in flight on a shared surface (limits.TrialRequests): its
	// own refusal, never an outage; the other trials are served.
	TrialBusy = &Error{http.StatusTooManyRequests, "trial_busy", "rate_limit_exceeded", "Too many requests of this trial in flight; retry when one is answered."}
)

// Body is the JSON of every refusal; its fields are in key order, as the
// reference sorts its keys.
type Body struct {
	Error      string `json:"error"`
	Message    string `json:"message"`
	Name       string `json:"name"`
	StatusCode int    `json:"statusCode"`
}

// Write answers with e. An outage says when to try again.
func (e *Error) Write(w http.ResponseWriter) {
	if e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	WriteJSON(w, e.Status, Body{Error: e.Code, Message: e.Message, Name: e.Name, StatusCode: e.Status})
}

// WriteJSON answers with v as the reference writes JSON: UTF-8 as is, <, >
// and & not escaped, no trailing newline; never cached, never sniffed.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":"internal_error","message":"Unexpected error.","name":"internal_server_error","statusCode":500}`)
	}
	body := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(body)
}
