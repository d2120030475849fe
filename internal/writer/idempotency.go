package writer

import (
	"crypto/sha256"
	"net/http"
	"sync"

	"github.com/websitebench/mailplane/internal/apierr"
)

// Resend's Idempotency-Key rules (https://resend.com/docs/dashboard/emails/idempotency-keys):
// 1 to 256 characters; the same key and payload answer with the first
// answer, another payload is 409 invalid_idempotent_request (both decided
// by the plane, which keeps the keys for the trial's life); and a request
// that arrives while the first one with its key is still being answered is
// 409 concurrent_idempotent_requests, decided here, where requests run.

var errIdemConcurrent = &apierr.Error{Status: http.StatusConflict, Code: "concurrent_idempotent_requests", Name: "concurrent_idempotent_requests", Message: "Same idempotency key used while original request is still in progress."}

// inflight is the set of idempotency keys whose first request is still
// running, per credential and route. The zero value is ready.
type inflight struct {
	mu      sync.Mutex
	running map[[sha256.Size]byte]struct{}
}

// slot names one key of one credential on one route, as a digest: the
// set holds no credential.
func slot(cred, route, key string) [sha256.Size]byte {
	return sha256.Sum256([]byte(cred + "\x00" + route + "\x00" + key))
}

// claim claims key (if any) for a request of cred on route until release
// is called; when another request holds it, it answers 409 itself and
// returns false.
func (f *inflight) claim(w http.ResponseWriter, cred, route, key string) (release func(), ok bool) {
	if key == "" {
		return func() {}, true
	}
	if !f.begin(cred, route, key) {
		writeError(w, errIdemConcurrent)
		return nil, false
	}
	return func() { f.end(cred, route, key) }, true
}

// begin claims key for a request; false if another holds it.
func (f *inflight) begin(cred, route, key string) bool {
	s := slot(cred, route, key)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running == nil {
		f.running = map[[sha256.Size]byte]struct{}{}
	}
	if _, busy := f.running[s]; busy {
		return false
	}
	f.running[s] = struct{}{}
	return true
}

// end releases key.
func (f *inflight) end(cred, route, key string) {
	s := slot(cred, route, key)
	f.mu.Lock()
	delete(f.running, s)
	f.mu.Unlock()
}
