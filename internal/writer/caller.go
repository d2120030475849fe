package writer

import (
	"errors"
	"net/http"

	"github.com/websitebench/mailplane/internal/apierr"
	"github.com/websitebench/mailplane/internal/connlimit"
	"github.com/websitebench/mailplane/internal/sendapi"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// The caller before the body. A request's credential is in its headers
// (a Bearer token, Postmark's X-Postmark-Server-Token, Mailgun's Basic
// password), so the writer asks the plane which trial it opens before it
// reads one byte of the body: a stranger's request is answered 401 at
// once and its connection closed (connlimit.GuardHTTP), and the writer
// buffers nothing for it. A known caller's request then counts as busy
// under the connection pool, and takes its fair share of its door under
// the namespace the plane resolved.
//
// An SES request names its trial by a signature over its body's hash, so
// its body is read first, under the process's budget for unknown callers
// (limits.PreauthBytes) and within limits.PreauthBodyTimeout; the
// signature is checked before anything else is judged.

// Credentials the plane accepted are remembered for a few seconds
// (connlimit.Callers), so that the hot path asks the plane once, not once
// per request.

// errShareTaken: the caller's trial has its share of the door in flight.
var errShareTaken = errors.New("writer: the trial's share is in flight")

// admit decides who is calling: the namespace req's credential opens (a
// SigV4 proof is asked every time: it is bound to one request). The
// request is then busy under the pool, and holds its fair share of its
// door, and its body's bytes of its trial's budget (limits.TrialBodyBytes:
// its Content-Length, or limit, the route's maximum, for a chunked body),
// until release: before its body is read, so that one trial's requests
// can make the process hold at most that much of their bodies at once.
func (h *Handler) admit(r *http.Request, req rpc.CredentialRequest, limit int64) (release func(), err error) {
	ns, err := h.resolve(r, req)
	if err != nil {
		return nil, err
	}
	connlimit.Known(r.Context())
	releaseShare, ok := h.shares.Take(doorKey(r) + "\x00" + ns)
	if !ok {
		return nil, errShareTaken
	}
	releaseBytes, ok := h.bodyBytes.TakeN(ns, declared(r, limit))
	if !ok {
		releaseShare()
		return nil, errShareTaken
	}
	return func() { releaseBytes(); releaseShare() }, nil
}

// resolve is the namespace req opens: remembered, or the plane's answer.
func (h *Handler) resolve(r *http.Request, req rpc.CredentialRequest) (string, error) {
	ask := func() (string, error) {
		ctx, cancel := planeContext(r)
		defer cancel()
		resp, err := h.plane.ResolveCredential(ctx, &req)
		return resp.Namespace, err
	}
	if req.SigV4 != nil {
		return ask()
	}
	return h.known.Resolve(req.API+"\x00"+req.Credential, h.now(), ask)
}

// callerAnswer is the answer to a credential check that failed with
// err, or nil if it did not.
func (h *Handler) callerAnswer(err error) *apierr.Error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errShareTaken):
		return errTrialBusy
	}
	return h.planeAnswer(err).resend
}

// providerAnswer is callerAnswer in a provider API's shape.
func (h *Handler) providerAnswer(err error) *sendapi.Error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errShareTaken):
		return sendapi.Fail(sendapi.Busy)
	}
	return sendapi.Fail(h.planeAnswer(err).provider)
}
