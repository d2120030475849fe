package writer

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/websitebench/mailplane/internal/apierr"
	"github.com/websitebench/mailplane/internal/faults"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Faults on purpose: when a rule of the trial's schedule matched a send,
// the plane's answer says what to do (rpc.SendResponse.Fault). A refusal
// is answered in the API's own error shape, with Retry-After when the
// rule names one; a timeout holds the request and then closes the
// connection without an answer. delay, duplicate and drop are answered as
// any accepted send: the client cannot tell. Every send API of routes (POST /emails,
// the batch) calls answerFault with the plane's answer before its own, and
// the provider APIs (providers.go) holdAndDrop and providerFault, so that
// all are faulted alike, each in its own shape.

// faultRefusals are the refusals a rule may name, as a real outage or rate
// limit of this API would answer them.
var faultRefusals = map[int]*apierr.Error{
	http.StatusTooManyRequests:     {Status: http.StatusTooManyRequests, Code: "rate_limit_exceeded", Name: "rate_limit_exceeded", Message: "Too many requests; retry later."},
	http.StatusInternalServerError: errInternal,
	http.StatusBadGateway:          {Status: http.StatusBadGateway, Code: "bad_gateway", Name: "application_error", Message: "Mail storage did not answer; try again later."},
	http.StatusServiceUnavailable:  errUnavailable,
}

// faultAnswer is the refusal a send faulted with refuse gets, nil for any
// other fault.
func faultAnswer(f *rpc.Fault) *apierr.Error {
	if f == nil || f.Do != faults.Refuse {
		return nil
	}
	if e := faultRefusals[f.Status]; e != nil {
		return e
	}
	return errUnavailable
}

// writeFault answers a refused send; Retry-After is the rule's, or none.
func writeFault(w http.ResponseWriter, f *rpc.Fault, e *apierr.Error) {
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(f.RetryAfter))
	}
	writeJSON(w, e.Status, apierr.Body{Error: e.Code, Message: e.Message, Name: e.Name, StatusCode: e.Status})
}

// holdAndDrop holds a send faulted with timeout for its seconds (or until
// the client goes), then ends the request without an answer: net/http
// closes the connection.
func holdAndDrop(ctx context.Context, f *rpc.Fault) {
	t := time.NewTimer(time.Duration(f.Seconds) * time.Second)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	panic(http.ErrAbortHandler)
}

// answerFault answers a send the plane faulted with refuse or timeout and
// reports whether it did; any other send is left to the caller.
func answerFault(w http.ResponseWriter, r *http.Request, f *rpc.Fault) bool {
	switch {
	case f == nil:
		return false
	case f.Do == faults.Timeout:
		holdAndDrop(r.Context(), f)
	case f.Do == faults.Refuse:
		writeFault(w, f, faultAnswer(f))
		return true
	}
	return false
}
