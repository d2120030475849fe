package plane

import "sync"

// policyCacheEntries bounds each policy cache; a full cache starts over.
// Entries are made only by credentials that open a trial, so an attacker
// with unknown credentials cannot fill it.
const policyCacheEntries = 1 << 16

// policyCache keeps rows of the ledger's policy (trials, namespaces,
// grants) that calls looked up, so that a send or a read does not query
// the ledger to learn what it learned on the call before. Every entry
// belongs to the ledger's policy generation it was read in (see
// ledger.PolicyGen); a lookup serves it only while that generation is
// current, and the generation moves on with every rotate, seal, close and
// revocation, so no entry outlives the rows it copies. Only what was found
// is kept: an unknown credential is looked up every time.
type policyCache[K comparable, V any] struct {
	mu  sync.Mutex
	gen uint64
	m   map[K]V
}

// get returns the entry for k if it was read in generation gen.
func (c *policyCache[K, V]) get(gen uint64, k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	if !ok || c.gen != gen {
		var zero V
		return zero, false
	}
	return v, true
}

// put keeps v for k, read in generation gen (taken before the read began).
// A read from an older generation than the cache's is dropped; a newer one
// starts the cache over.
func (c *policyCache[K, V]) put(gen uint64, k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen < c.gen {
		return
	}
	if gen > c.gen || c.m == nil || len(c.m) >= policyCacheEntries {
		c.gen, c.m = gen, map[K]V{}
	}
	c.m[k] = v
}
