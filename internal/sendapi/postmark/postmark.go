// Package postmark reads Postmark's email API (POST /email and POST
// /email/batch, "X-Postmark-Server-Token: <token>") and answers in
// Postmark's shape: 200 with {"To", "SubmittedAt", "MessageID",
// "ErrorCode": 0, "Message": "OK"} (a list of them for a batch), or
// {"ErrorCode", "Message"} with 401, 413, 422, 429, 500 or 503
// (https://postmarkapp.com/developer/api/email-api,
// https://postmarkapp.com/developer/api/overview#error-codes).
//
// To, Cc and Bcc are Postmark's comma-separated lists. Tag is kept as an
// X-PM-Tag header and each Metadata entry as X-PM-Metadata-<key>, as
// Postmark's SMTP API spells them. TrackOpens, TrackLinks and
// MessageStream are accepted and change nothing here. Templates
// (/email/withTemplate) are not served.
package postmark

import (
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/websitebench/mailplane/internal/sendapi"
)

// Routes.
const (
	PathEmail = "/email"
	PathBatch = "/email/batch"
)

// Limits Postmark states.
const (
	maxBatch      = 500
	maxRecipients = 50 // in each of To, Cc, Bcc
	maxAttachment = 32
	maxMetadata   = 16
	// TagHeader and MetadataPrefix are Postmark's SMTP headers for Tag
	// and Metadata.
	TagHeader      = "X-PM-Tag"
	MetadataPrefix = "X-PM-Metadata-"
)

// Postmark's error codes.
const (
	codeOK           = 0
	codeInternal     = 1
	codeBadToken     = 10
	codeMaintenance  = 100
	codeInvalid      = 300
	codeInvalidJSON  = 402
	codeNotAllowed   = 405
	codeInactive     = 406
	codeJSONRequired = 409
	codeTooManyBatch = 410
	codeRateLimit    = 429
)

// API is Postmark's email API.
type API struct{}

// Name implements sendapi.API.
func (API) Name() string { return "postmark" }

// Match implements sendapi.API.
func (API) Match(path string) bool { return path == PathEmail || path == PathBatch }

// Batch implements sendapi.API.
func (API) Batch(path string) bool { return path == PathBatch }

// Credential implements sendapi.API. Postmark reads the header's name
// and value case-insensitively; the token is taken as sent.
func (API) Credential(r *http.Request) (string, bool) {
	tok := r.Header.Get("X-Postmark-Server-Token")
	return tok, tok != ""
}

type header struct {
	Name  string
	Value string
}

type attachment struct {
	Name        string
	Content     string
	ContentType string
	ContentID   string
}

// message is one email of Postmark's API; encoding/json matches its keys
// case-insensitively, as Postmark does.
type message struct {
	From          string
	To            string
	Cc            string
	Bcc           string
	Subject       string
	Tag           string
	HTMLBody      string `json:"HtmlBody"`
	TextBody      string
	ReplyTo       string
	Headers       []header
	TrackOpens    bool
	TrackLinks    string
	Attachments   []attachment
	Metadata      map[string]string
	MessageStream string
}

// fieldNames are the request's names of the fields the writer judges.
var fieldNames = map[string]string{"from": "From", "to": "To", "cc": "Cc", "bcc": "Bcc", "reply_to": "ReplyTo", "subject": "Subject"}

// FieldName implements sendapi.API.
func (API) FieldName(field string) string { return sendapi.FieldNames(fieldNames, field) }

// Parse implements sendapi.API.
func (API) Parse(r *http.Request, body []byte) ([]sendapi.Email, *sendapi.Error) {
	mt, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	if !strings.EqualFold(strings.TrimSpace(mt), "application/json") {
		return nil, &sendapi.Error{Failure: sendapi.MediaType, Code: strconv.Itoa(codeJSONRequired), Message: "JSON required: set the Content-Type header to application/json."}
	}
	if r.URL.EscapedPath() == PathEmail {
		var m message
		if fail := decode(body, &m); fail != nil {
			return nil, fail
		}
		e, fail := m.email()
		if fail != nil {
			return nil, fail
		}
		return []sendapi.Email{e}, nil
	}
	var list []message
	if fail := decode(body, &list); fail != nil {
		return nil, fail
	}
	if len(list) == 0 || len(list) > maxBatch {
		return nil, &sendapi.Error{Failure: sendapi.Invalid, Code: strconv.Itoa(codeTooManyBatch), Message: "Too many batch messages: a batch holds 1 to 500 messages."}
	}
	out := make([]sendapi.Email, len(list))
	for i, m := range list {
		e, fail := m.email()
		if fail != nil {
			e = sendapi.Email{To: []string{m.To}, Refused: fail}
		}
		out[i] = e
	}
	return out, nil
}

// decode reads Postmark JSON; anything unreadable is error 402.
func decode(body []byte, v any) *sendapi.Error {
	if fail := sendapi.DecodeJSON(body, v); fail != nil {
		return &sendapi.Error{Failure: sendapi.Invalid, Code: strconv.Itoa(codeInvalidJSON), Message: "Received invalid JSON input."}
	}
	return nil
}

func invalid(message string) *sendapi.Error {
	return &sendapi.Error{Failure: sendapi.Invalid, Code: strconv.Itoa(codeInvalid), Message: "Invalid email request: " + message}
}

// email checks m's shape and makes it an Email.
func (m *message) email() (sendapi.Email, *sendapi.Error) {
	e := sendapi.Email{From: strings.TrimSpace(m.From), Subject: m.Subject, ReplyTo: sendapi.SplitList(m.ReplyTo),
		Text: sendapi.Text(m.TextBody), HTML: sendapi.Text(m.HTMLBody)}
	if e.From == "" {
		return e, invalid("The 'From' address is required.")
	}
	e.To, e.Cc, e.Bcc = sendapi.SplitList(m.To), sendapi.SplitList(m.Cc), sendapi.SplitList(m.Bcc)
	if len(e.To)+len(e.Cc)+len(e.Bcc) == 0 {
		return e, invalid("Zero recipients specified.")
	}
	if len(e.To) > maxRecipients || len(e.Cc) > maxRecipients || len(e.Bcc) > maxRecipients {
		return e, invalid("Too many recipients: at most 50 in each of To, Cc and Bcc.")
	}
	if e.Text == nil && e.HTML == nil {
		return e, invalid("Provide either email TextBody or HtmlBody or both.")
	}
	if m.Tag != "" {
		e.Headers = append(e.Headers, sendapi.Header{Name: TagHeader, Value: m.Tag})
	}
	if len(m.Metadata) > maxMetadata {
		return e, invalid("Too many Metadata fields.")
	}
	for _, k := range slices.Sorted(maps.Keys(m.Metadata)) {
		e.Headers = append(e.Headers, sendapi.Header{Name: MetadataPrefix + k, Value: m.Metadata[k]})
	}
	for _, h := range m.Headers {
		e.Headers = append(e.Headers, sendapi.Header{Name: h.Name, Value: h.Value})
	}
	if len(m.Attachments) > maxAttachment {
		return e, invalid("Too many attachments.")
	}
	for _, a := range m.Attachments {
		data, ok := sendapi.DecodeBase64(a.Content)
		if !ok || a.Name == "" {
			return e, invalid("Each attachment needs a Name and base64 Content.")
		}
		e.Attachments = append(e.Attachments, sendapi.Attachment{Filename: a.Name, ContentType: a.ContentType, ContentID: strings.TrimPrefix(a.ContentID, "cid:"), Content: data})
	}
	return e, nil
}

// response is Postmark's answer for one email.
type response struct {
	To          string `json:"To,omitempty"`
	SubmittedAt string `json:"SubmittedAt,omitempty"`
	MessageID   string `json:"MessageID,omitempty"`
	ErrorCode   int    `json:"ErrorCode"`
	Message     string `json:"Message"`
}

// errorBody is Postmark's error.
type errorBody struct {
	ErrorCode int    `json:"ErrorCode"`
	Message   string `json:"Message"`
}

// verdict is the status and Postmark error code of e.
func verdict(e *sendapi.Error) (status, code int, message string) {
	if n, err := strconv.Atoi(e.Code); err == nil {
		code = n // the parser named Postmark's code
	}
	message = e.Message
	if message == "" {
		message = "Invalid email request."
	}
	switch e.Failure {
	case sendapi.Unauthorized:
		return http.StatusUnauthorized, codeBadToken, "The Server Token you provided in the X-Postmark-Server-Token request header was invalid. Please verify that you are using a valid token."
	case sendapi.Invalid, sendapi.MediaType:
		if code == 0 {
			code = codeInvalid
		}
		return http.StatusUnprocessableEntity, code, message
	case sendapi.TooLarge:
		return http.StatusRequestEntityTooLarge, codeInvalid, "Invalid email request: the message exceeds the size limit."
	case sendapi.Quota:
		return http.StatusUnprocessableEntity, codeNotAllowed, "Not allowed to send: the mailbox quota is exhausted."
	case sendapi.Sealed:
		return http.StatusUnprocessableEntity, codeInactive, "You tried to send to recipient(s) that have been marked as inactive: this mailbox no longer accepts mail."
	case sendapi.Busy:
		return http.StatusTooManyRequests, codeRateLimit, "Rate limit exceeded: too many requests of this trial in flight."
	case sendapi.Unavailable:
		return http.StatusServiceUnavailable, codeMaintenance, "Mail storage is unavailable; try again later."
	}
	return http.StatusInternalServerError, codeInternal, "Unexpected error."
}

// Refuse implements sendapi.API.
func (API) Refuse(w http.ResponseWriter, e *sendapi.Error) {
	st, code, msg := verdict(e)
	e.Answer(w, st, errorBody{ErrorCode: code, Message: msg})
}

// Accepted implements sendapi.API. A single email's refusal is the
// answer; a batch answers 200 with each email's verdict, as Postmark
// does.
func (a API) Accepted(w http.ResponseWriter, r *http.Request, results []sendapi.Result) {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	one := func(res sendapi.Result) response {
		to := strings.Join(res.To, ", ")
		if res.Err != nil {
			_, code, msg := verdict(res.Err)
			return response{To: to, ErrorCode: code, Message: msg}
		}
		return response{To: to, SubmittedAt: now, MessageID: res.ID, ErrorCode: codeOK, Message: "OK"}
	}
	if r.URL.EscapedPath() == PathEmail {
		if len(results) == 1 && results[0].Err != nil {
			a.Refuse(w, results[0].Err)
			return
		}
		sendapi.WriteJSON(w, http.StatusOK, one(results[0]))
		return
	}
	out := make([]response, 0, len(results))
	for _, res := range results {
		out = append(out, one(res))
	}
	sendapi.WriteJSON(w, http.StatusOK, out)
}
