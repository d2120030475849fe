package connlimit

import (
	"crypto/sha256"
	"sync"
	"time"
)

// Callers remembers, for CallerTTL since the plane accepted it, the
// namespace each credential the plane accepted opened, keyed by the credential's SHA-256 (never kept as
// given): a shared surface decides who is calling before it reads a
// request's body, and its hot path (one client making many requests)
// asks the plane once, not once per request, and a trial's busy client is
// known the moment its headers are read, never left waiting for a check
// with its connection as closable as a stranger's. The memory decides only
// whose share a request takes and whether its body is read: the plane
// still authorizes every call. A credential is asked about again
// CallerTTL after the plane last accepted it, however often it is
// presented, so a closed trial's credential stops being known within
// CallerTTL even while its client keeps presenting it. The zero value is
// ready.
type Callers struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]knownCaller
}

const (
	// CallerTTL is how long an accepted credential is remembered after
	// the plane accepted it.
	CallerTTL = 5 * time.Second
	// callerCacheMax bounds the credentials remembered; a full cache is
	// emptied (each trial's client asks again once).
	callerCacheMax = 4096
)

type knownCaller struct {
	ns    string
	until time.Time
}

// Get is the namespace cred opened, if it is remembered at now.
func (c *Callers) Get(cred string, now time.Time) (string, bool) {
	k := sha256.Sum256([]byte(cred))
	c.mu.Lock()
	defer c.mu.Unlock()
	kc, ok := c.m[k]
	if !ok || now.After(kc.until) {
		delete(c.m, k)
		return "", false
	}
	return kc.ns, true
}

// Put remembers from now that cred opened namespace ns.
func (c *Callers) Put(cred, ns string, now time.Time) {
	k := sha256.Sum256([]byte(cred))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= callerCacheMax {
		c.m = make(map[[sha256.Size]byte]knownCaller)
	}
	c.m[k] = knownCaller{ns: ns, until: now.Add(CallerTTL)}
}

// Resolve is the namespace cred opens: remembered at now, else ask's
// answer (the plane's), which is remembered when it accepts.
func (c *Callers) Resolve(cred string, now time.Time, ask func() (string, error)) (string, error) {
	if ns, ok := c.Get(cred, now); ok {
		return ns, nil
	}
	ns, err := ask()
	if err != nil {
		return "", err
	}
	c.Put(cred, ns, now)
	return ns, nil
}

// Forget drops cred: the plane has just refused it (its trial closed), and
// a door that outlives a request (IMAP) must not let it in again for the
// rest of CallerTTL.
func (c *Callers) Forget(cred string) {
	k := sha256.Sum256([]byte(cred))
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, k)
}
