package writer

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// apiError is one refusal of the writer's HTTP API. Code is the
// reference's `error` value (verifier scripts match it); Name is Resend's
// error name for the same situation, so Resend clients understand it too.
// Message is short and fixed: nothing from the request or the plane is
// ever echoed.
type apiError struct {
	Status  int
	Code    string
	Name    string
	Message string
}

// Every refusal the writer can answer with. Resend's names are from
// https://resend.com/docs/api-reference/errors.
var (
	errNotFound       = &apiError{http.StatusNotFound, "not_found", "not_found", "No such route."}
	errMethod         = &apiError{http.StatusMethodNotAllowed, "method_not_allowed", "method_not_allowed", "Method not allowed."}
	errMissingKey     = &apiError{http.StatusUnauthorized, "unauthorized", "missing_api_key", "Missing API key in the authorization header."}
	errUnauthorized   = &apiError{http.StatusUnauthorized, "unauthorized", "invalid_api_key", "API key is invalid."}
	errForbidden      = &apiError{http.StatusForbidden, "forbidden", "invalid_api_key", "The bootstrap token is invalid."}
	errMediaType      = &apiError{http.StatusUnsupportedMediaType, "application_json_required", "validation_error", "Content-Type must be application/json."}
	errLengthRequired = &apiError{http.StatusLengthRequired, "content_length_required", "validation_error", "A Content-Length (or a chunked body) is required."}
	errTooLarge       = &apiError{http.StatusRequestEntityTooLarge, "message_too_large", "validation_error", "The message exceeds the size limit."}
	errIncomplete     = &apiError{http.StatusBadRequest, "incomplete_request", "validation_error", "The body ended before Content-Length bytes arrived."}
	errJSON           = &apiError{http.StatusBadRequest, "invalid_json", "validation_error", "The body is not UTF-8 JSON."}
	errFields         = &apiError{http.StatusBadRequest, "invalid_message_fields", "validation_error", "The body must be an object with from, to, subject and text or html, and only supported fields."}
	errMessage        = &apiError{http.StatusBadRequest, "invalid_message", "validation_error", "A field has an invalid value."}
	errIdemKey        = &apiError{http.StatusBadRequest, "invalid_idempotency_key", "invalid_idempotency_key", "The key must be between 1-256 chars."}
	errIdemConflict   = &apiError{http.StatusConflict, "invalid_idempotent_request", "invalid_idempotent_request", "Same idempotency key used with a different request payload."}
	errCapacity       = &apiError{http.StatusTooManyRequests, "mailbox_capacity", "daily_quota_exceeded", "The mailbox quota is exhausted."}
	errSealed         = &apiError{http.StatusForbidden, "mailbox_sealed", "validation_error", "This mailbox no longer accepts mail."}
	errUnavailable    = &apiError{http.StatusServiceUnavailable, "mailpit_unavailable", "application_error", "Mail storage is unavailable; try again later."}
	errInternal       = &apiError{http.StatusInternalServerError, "internal_error", "internal_server_error", "Unexpected error."}
)

// errorBody is the JSON of every refusal. Fields are in key order, as the
// reference sorts its keys.
type errorBody struct {
	Error      string `json:"error"`
	Message    string `json:"message"`
	Name       string `json:"name"`
	StatusCode int    `json:"statusCode"`
}

// writeError answers with e. An outage says when to try again.
func writeError(w http.ResponseWriter, e *apiError) {
	if e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.Status, errorBody{Error: e.Code, Message: e.Message, Name: e.Name, StatusCode: e.Status})
}

// writeJSON answers with v. Cache-Control: no-store is set on every answer
// by ServeHTTP, before any route runs.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"error":"internal_error","message":"Unexpected error.","name":"internal_server_error","statusCode":500}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(body)
}
