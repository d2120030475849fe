package sqlledger

import (
	"sync"

	. "github.com/websitebench/mailplane/internal/ledger"
)

// hintEntries bounds the hints; when full they start over.
const hintEntries = 1 << 16

// hints are what the ledger last saw of namespaces' counters and states,
// so that Precheck can refuse a send to a full or sealed namespace without
// a read transaction. A hint only ever understates: message and byte
// counts only grow, a sealed namespace never takes mail again, and a hint
// is recorded only once what it describes has committed. It serves only
// in the policy generation it was read in (a seal, rotation or close ends
// it), so Precheck refuses from a hint exactly what it would refuse from
// the database; with no hint it reads the database and leaves one.
type hints struct {
	mu sync.Mutex
	m  map[string]hint
}

type hint struct {
	gen          uint64
	active       bool
	count, bytes int64
}

func (h *hints) get(gen uint64, ns string) (hint, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.m[ns]
	return v, ok && v.gen == gen
}

// put records v unless a hint of a later generation, or of more mail in
// this one, is already there.
func (h *hints) put(ns string, v hint) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if old, ok := h.m[ns]; ok && (old.gen > v.gen || (old.gen == v.gen && old.count > v.count)) {
		return
	}
	if h.m == nil || len(h.m) >= hintEntries {
		h.m = map[string]hint{}
	}
	h.m[ns] = v
}

// refuses answers what decide would answer for o from h: ErrNotActive,
// ErrCapacity, or nil (decide may still refuse).
func (v hint) refuses(o *Offer) error {
	switch {
	case !v.active:
		return ErrNotActive
	case (o.MaxMessages > 0 && v.count >= o.MaxMessages) || (o.MaxBytes > 0 && v.bytes+int64(o.Size) > o.MaxBytes):
		return ErrCapacity
	}
	return nil
}
