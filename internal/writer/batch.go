package writer

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/websitebench/mailplane/internal/apierr"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// POST /emails/batch is Resend's batch send: a JSON list of 1 to 100
// emails, each what POST /emails takes (without attachments or
// scheduled_at, which Resend's batch does not take either), under one
// credential. The credential is checked first, as for POST /emails.
//
// x-batch-validation: strict (the default) refuses the whole batch if any
// email is invalid, naming its index, and stores nothing; permissive sends
// the valid ones and answers {"data": [...], "errors": [{"index",
// "message"}]}. Every email goes to the one trial the credential opens, so
// a batch cannot mix trials: an email that tries to name another (an
// X-WebsiteBench-* header) is invalid like any other bad header.
//
// The plane judges each email in turn: a refusal that holds for the whole
// batch (a wrong credential, a sealed mailbox, a reused idempotency key
// with another batch) or an outage ends the batch with that answer, in
// either mode; in permissive mode an email the plane refuses on its own
// (quota, envelope) becomes one of the errors. Strict mode is all or
// nothing for everything the writer can judge before sending; the quota
// running out part way through a strict batch still leaves the emails
// before it stored (the plane has no batch transaction), and answers 429.
//
// An Idempotency-Key covers the whole batch: each email is offered under
// a key derived from it and its index, with a fingerprint of the whole
// batch, so a repeat answers the same ids and another batch under the same
// key is 409.

// Batch limits.
const (
	maxBatch = 100
	// batchBodyFactor: a batch body may be this many times the message
	// body limit.
	batchBodyFactor = 4
	batchModeHeader = "X-Batch-Validation"
)

var (
	errBatchBody  = &apierr.Error{Status: http.StatusBadRequest, Code: "invalid_message_fields", Name: "validation_error", Message: "The body must be a list of emails."}
	errBatchSize  = &apierr.Error{Status: http.StatusUnprocessableEntity, Code: "invalid_batch", Name: "validation_error", Message: "A batch holds 1 to 100 emails."}
	errBatchMode  = &apierr.Error{Status: http.StatusUnprocessableEntity, Code: "invalid_batch_validation", Name: "validation_error", Message: "x-batch-validation must be strict or permissive."}
	errBatchExtra = &apierr.Error{Status: http.StatusUnprocessableEntity, Code: "invalid_batch", Name: "validation_error", Message: "attachments and scheduled_at are not supported in a batch."}
)

type batchID struct {
	ID string `json:"id"`
}

type batchError struct {
	Index   int    `json:"index"`
	Message string `json:"message"`
}

type batchStrictBody struct {
	Data []batchID `json:"data"`
}

type batchPermissiveBody struct {
	Data   []batchID    `json:"data"`
	Errors []batchError `json:"errors"`
}

func (h *Handler) batch(w http.ResponseWriter, r *http.Request) {
	if r.URL.RawQuery != "" {
		writeError(w, errNotFound)
		return
	}
	cred, ok := bearer(r)
	if !ok {
		writeError(w, errMissingKey)
		return
	}
	done, err := h.admit(r, rpc.CredentialRequest{Via: rpc.ViaHTTP, Credential: cred}, h.cfg.MaxBodyBytes*batchBodyFactor)
	if err != nil {
		writeError(w, h.callerAnswer(err))
		return
	}
	defer done()
	permissive, items, key, fail := h.readBatch(w, r)
	var emails []*email
	var errs []batchError
	if fail == nil {
		emails, errs, fail = parseBatchEmails(items, permissive, h.cfg.MaxRecipients)
	}
	if fail != nil {
		// The plane records the refusal in the trial's trail.
		writeError(w, h.authenticated(r, cred, fail))
		return
	}
	release, ok := h.running.claim(w, cred, "batch", key)
	if !ok {
		return
	}
	defer release()
	fp := batchFingerprint(permissive, emails)
	data := []batchID{}
	for i, e := range emails {
		if e == nil {
			continue
		}
		ctx, cancel := planeContext(r)
		resp, err := h.plane.Send(ctx, &rpc.SendRequest{
			Via:            rpc.ViaHTTP,
			Credential:     cred,
			From:           e.From,
			To:             e.Recipients(),
			Raw:            compose(e, h.now()),
			IdempotencyKey: batchItemKey(key, i),
			Fingerprint:    fp + ":" + strconv.Itoa(i),
		})
		cancel()
		if err != nil {
			if !permissive || wholeBatch(err) {
				writeError(w, h.refusal(err))
				return
			}
			errs = append(errs, batchError{Index: i, Message: h.refusal(err).Message})
			continue
		}
		// A fault's refusal or timeout is the whole batch's answer, as a
		// real rate limit or outage would be; the emails before it stay
		// sent.
		if answerFault(w, r, resp.Fault) {
			return
		}
		data = append(data, batchID{ID: resp.ID})
	}
	h.log.Debug().Int("emails", len(emails)).Int("accepted", len(data)).Int("errors", len(errs)).Bool("permissive", permissive).Msg("http: batch")
	if permissive {
		if errs == nil {
			errs = []batchError{}
		}
		writeJSON(w, http.StatusOK, batchPermissiveBody{Data: data, Errors: errs})
		return
	}
	writeJSON(w, http.StatusOK, batchStrictBody{Data: data})
}

// readBatch reads the mode header, the body and the idempotency key.
func (h *Handler) readBatch(w http.ResponseWriter, r *http.Request) (permissive bool, items []json.RawMessage, key string, fail *apierr.Error) {
	switch strings.ToLower(strings.TrimSpace(r.Header.Get(batchModeHeader))) {
	case "", "strict":
	case "permissive":
		permissive = true
	default:
		return false, nil, "", errBatchMode
	}
	body, fail := h.readBody(w, r, h.cfg.MaxBodyBytes*batchBodyFactor)
	if fail != nil {
		return permissive, nil, "", fail
	}
	if items, fail = splitBatch(body); fail != nil {
		return permissive, nil, "", fail
	}
	key, fail = idempotencyKey(r)
	return permissive, items, key, fail
}

// splitBatch reads a batch body as a list of 1 to maxBatch JSON values,
// each left for parseEmail.
func splitBatch(body []byte) ([]json.RawMessage, *apierr.Error) {
	if !utf8.Valid(body) {
		return nil, errJSON
	}
	var top any
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, errJSON
	}
	if _, isList := top.([]any); !isList {
		return nil, errBatchBody
	}
	var items []json.RawMessage
	if err := json.Unmarshal(body, &items); err != nil {
		return nil, errJSON
	}
	if len(items) == 0 || len(items) > maxBatch {
		return nil, errBatchSize
	}
	return items, nil
}

// parseBatchEmails validates every email. In strict mode the first invalid
// one is the answer (with its index); in permissive mode each invalid one
// is an error and its place in the result is nil.
func parseBatchEmails(items []json.RawMessage, permissive bool, maxRecipients int) ([]*email, []batchError, *apierr.Error) {
	emails := make([]*email, len(items))
	var errs []batchError
	for i, raw := range items {
		e, fail := parseEmail(bytes.TrimSpace(raw), maxRecipients)
		if fail == nil && len(e.Attachments) > 0 {
			fail = errBatchExtra
		}
		if fail == errScheduled {
			fail = errBatchExtra
		}
		if fail == nil {
			emails[i] = e
			continue
		}
		if !permissive {
			return nil, nil, atIndex(i, fail)
		}
		errs = append(errs, batchError{Index: i, Message: fail.Message})
	}
	return emails, errs, nil
}

// atIndex is fail for the email at index i of a strict batch.
func atIndex(i int, fail *apierr.Error) *apierr.Error {
	f := *fail
	f.Message = fmt.Sprintf("Email at index %d: %s", i, fail.Message)
	return &f
}

// wholeBatch reports whether a plane error on one email holds for every
// email of the batch: a refusal of its credential, its trial or its key,
// an outage, or a bug (the whole request is a 500).
func wholeBatch(err error) bool {
	switch rpc.CodeOf(err) {
	case rpc.CodeUnauthorized, rpc.CodeUnauthenticated, rpc.CodePermissionDenied, rpc.CodeSealed, rpc.CodeIdempotencyConflict:
		return true
	}
	return rpc.ClassOf(err) != rpc.Refused
}

// batchFingerprint is a digest of a batch's meaning: its mode and every
// email (an invalid one as a gap).
func batchFingerprint(permissive bool, emails []*email) string {
	d := sha256.New()
	fmt.Fprintf(d, "batch permissive=%t n=%d\n", permissive, len(emails))
	for _, e := range emails {
		if e == nil {
			d.Write([]byte("-\n"))
			continue
		}
		d.Write([]byte(e.Fingerprint() + "\n"))
	}
	return hex.EncodeToString(d.Sum(nil))
}

// batchItemKey is the plane's key for email i of a batch sent under key.
func batchItemKey(key string, i int) string {
	if key == "" {
		return ""
	}
	return idempotencyDigest("batch\x00" + key + "\x00" + strconv.Itoa(i))
}
