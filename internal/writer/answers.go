package writer

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/websitebench/mailplane/internal/apierr"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/internal/sendapi"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Every refusal the writer can answer with (package apierr has the
// envelope and the ones other surfaces share).
var (
	errNotFound       = &apierr.Error{Status: http.StatusNotFound, Code: "not_found", Name: "not_found", Message: "No such route."}
	errMethod         = &apierr.Error{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed", Name: "method_not_allowed", Message: "Method not allowed."}
	errMissingKey     = &apierr.Error{Status: http.StatusUnauthorized, Code: "unauthorized", Name: "missing_api_key", Message: "Missing API key in the authorization header."}
	errUnauthorized   = &apierr.Error{Status: http.StatusUnauthorized, Code: "unauthorized", Name: "invalid_api_key", Message: "API key is invalid."}
	errForbidden      = &apierr.Error{Status: http.StatusForbidden, Code: "forbidden", Name: "invalid_api_key", Message: "The bootstrap token is invalid."}
	errMediaType      = &apierr.Error{Status: http.StatusUnsupportedMediaType, Code: "application_json_required", Name: "validation_error", Message: "Content-Type must be application/json."}
	errLengthRequired = apierr.LengthRequired
	errTooLarge       = &apierr.Error{Status: http.StatusRequestEntityTooLarge, Code: "message_too_large", Name: "validation_error", Message: "The message exceeds the size limit."}
	errIncomplete     = &apierr.Error{Status: http.StatusBadRequest, Code: "incomplete_request", Name: "validation_error", Message: "The body ended before Content-Length bytes arrived."}
	errJSON           = &apierr.Error{Status: http.StatusBadRequest, Code: "invalid_json", Name: "validation_error", Message: "The body is not UTF-8 JSON."}
	errFields         = &apierr.Error{Status: http.StatusBadRequest, Code: "invalid_message_fields", Name: "validation_error", Message: "The body must be an object with from, to, subject and text or html, and only supported fields."}
	errMessage        = &apierr.Error{Status: http.StatusBadRequest, Code: "invalid_message", Name: "validation_error", Message: "A field has an invalid value."}
	errIdemKey        = &apierr.Error{Status: http.StatusBadRequest, Code: "invalid_idempotency_key", Name: "invalid_idempotency_key", Message: "The key must be between 1-256 chars."}
	errIdemConflict   = &apierr.Error{Status: http.StatusConflict, Code: "invalid_idempotent_request", Name: "invalid_idempotent_request", Message: "Same idempotency key used with a different request payload."}
	errCapacity       = &apierr.Error{Status: http.StatusTooManyRequests, Code: "mailbox_capacity", Name: "daily_quota_exceeded", Message: "The mailbox quota is exhausted."}
	errSealed         = &apierr.Error{Status: http.StatusForbidden, Code: "mailbox_sealed", Name: "validation_error", Message: "This mailbox no longer accepts mail."}
	errUnavailable    = apierr.Unavailable
	errTrialBusy      = apierr.TrialBusy
	errInternal       = &apierr.Error{Status: http.StatusInternalServerError, Code: "internal_error", Name: "internal_server_error", Message: "Unexpected error."}
)

// answer is the writer's answer to a plane error in each of its shapes:
// POST /emails' (resend) and the provider APIs' (provider).
type answer struct {
	resend   *apierr.Error
	provider sendapi.Failure
}

// planeAnswers is the writer's one table from a plane error to its answer,
// for a send, a credential check and a bootstrap alike. A refused envelope
// (errMessage, sendapi.Invalid) also names its field (envelopeRule). A
// refusal not named here is the writer's bug.
var planeAnswers = rpc.Answers[answer]{
	Refused: map[string]answer{
		rpc.CodeUnauthorized: {errUnauthorized, sendapi.Unauthorized},
		// The plane no longer honours this writer's grant: its trial was
		// destroyed (or the grant is wrong). The client's credential is
		// dead with it.
		rpc.CodeUnauthenticated:   {errUnauthorized, sendapi.Unauthorized},
		rpc.CodePermissionDenied:  {errUnauthorized, sendapi.Unauthorized},
		rpc.CodeForbidden:         {errForbidden, sendapi.Unauthorized}, // a bootstrap token that opens nothing
		rpc.CodeInvalidEnvelope:   {errMessage, sendapi.Invalid},
		rpc.CodeTooManyRecipients: {errMessage, sendapi.Invalid},
		rpc.CodeMessageTooLarge:   {errTooLarge, sendapi.TooLarge},
		rpc.CodeMailboxCapacity:   {errCapacity, sendapi.Quota},
		rpc.CodeSealed:            {errSealed, sendapi.Sealed},
		// Only POST /emails takes an idempotency key.
		rpc.CodeIdempotencyConflict: {errIdemConflict, sendapi.Internal},
	},
	Outage: answer{errUnavailable, sendapi.Unavailable},
	Bug:    answer{errInternal, sendapi.Internal},
}

// planeAnswer is the answer to err, a plane error, logged by its class.
func (h *Handler) planeAnswer(err error) answer {
	a, class := planeAnswers.For(err)
	switch code := rpc.CodeOf(err); {
	case class == rpc.Outage:
		h.log.Warn().Str("code", code).Msg("http: plane unavailable")
	case class == rpc.Bug:
		h.log.Error().Err(err).Msg("http: the plane failed, or answered what the writer does not know")
	case code == rpc.CodeUnauthenticated || code == rpc.CodePermissionDenied:
		h.log.Error().Str("code", code).Msg("the plane refused the writer's grant")
	}
	return a
}

// What each field of a message must be. A refusal of a value names its
// field and its rule ("from must be …"), in every API's shape: never the
// value itself, nothing the caller was not given (the pinned sender is in
// its environment, WEBSITEBENCH_MAIL_FROM).
const (
	ruleSender    = `an address, bare or as "Name <address>"`
	ruleAddresses = `an address or a list of addresses, each bare or as "Name <address>"`
	ruleTo        = ruleAddresses + `, at least one`
	ruleReplyTo   = `at most 16 addresses, each bare or as "Name <address>"`
	ruleSubject   = `a string of at most 998 characters on one line`
	ruleBody      = `strings, and at least one of them set`
	ruleTags      = `a list of at most 16 {"name", "value"}, each of ASCII letters, digits, _ and -, at most 256 long; name is required`
	ruleHeaders   = `an object of at most 16 headers, each named once: X-* (not X-Tags, X-Resend-Tag or X-WebsiteBench-*) or a list or threading header, its value printable ASCII on one line`
	ruleAttach    = `a list of at most 32 {"filename", "content", "content_type", "content_id"}: a plain file name, base64 content (or a list of byte values), a media type that is not multipart`
	// ruleDisplayName follows the pinned sender in a refused from.
	ruleDisplayName = "; a display name is allowed"
)

// The refusals of POST /emails' values: errMessage's status and code, and
// the field's rule.
var (
	errFrom        = invalid("from", ruleSender)
	errTo          = invalid("to", ruleTo)
	errCc          = invalid("cc", ruleAddresses)
	errBcc         = invalid("bcc", ruleAddresses)
	errReplyTo     = invalid("reply_to", ruleReplyTo)
	errSubject     = invalid("subject", ruleSubject)
	errBody        = invalid("text and html", ruleBody)
	errTags        = invalid("tags", ruleTags)
	errHeaders     = invalid("headers", ruleHeaders)
	errAttachments = invalid("attachments", ruleAttach)
	errSurrogate   = invalid("every string", `valid UTF-16: no unpaired \uD800-\uDFFF escape`)
)

// invalid is errMessage saying that field must be must.
func invalid(field, must string) *apierr.Error {
	e := *errMessage
	e.Message = field + " must be " + must
	return &e
}

// recipientsRule is what to, cc and bcc together must be.
func recipientsRule(max int) string {
	return "at most " + strconv.Itoa(max) + " recipients, with cc and bcc"
}

// envelopeRule is what the plane's refusal of an envelope (err) says is
// wrong: its field, by POST /emails' name, and what that must be, or ""
// when the plane named none.
func envelopeRule(err error) (field, must string) {
	var e *rpc.Error
	if !errors.As(err, &e) {
		return "", ""
	}
	switch {
	case e.Code == rpc.CodeTooManyRecipients:
		return "to", recipientsRule(limits.Recipients)
	case e.Field == "from" && len(e.Allowed) == 1:
		return "from", e.Allowed[0] + ruleDisplayName
	case e.Field == "from" && len(e.Allowed) > 1:
		return "from", "one of " + strings.Join(e.Allowed, ", ") + ruleDisplayName
	case e.Field == "from":
		return "from", ruleSender
	case e.Field == "to":
		return "to", ruleTo
	}
	return "", ""
}

// writeError answers with e.
func writeError(w http.ResponseWriter, e *apierr.Error) { e.Write(w) }

// writeJSON answers with v. Cache-Control: no-store is set on every answer.
func writeJSON(w http.ResponseWriter, status int, v any) { apierr.WriteJSON(w, status, v) }
