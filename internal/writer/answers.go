package writer

import (
	"net/http"

	"github.com/websitebench/mailplane/internal/apierr"
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

// writeError answers with e.
func writeError(w http.ResponseWriter, e *apierr.Error) { e.Write(w) }

// writeJSON answers with v. Cache-Control: no-store is set on every answer.
func writeJSON(w http.ResponseWriter, status int, v any) { apierr.WriteJSON(w, status, v) }
