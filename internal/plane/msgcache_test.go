package plane

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/websitebench/mailplane/internal/mailindex"
)

// The message cache keeps within its bound, evicts the least recently
// used first, and never answers for a key it was not given: another
// namespace, sequence number, UUID or store reference misses.
func TestMessageCache(t *testing.T) {
	var c messageCache
	text := strings.Repeat("x", 10_000)
	key := func(i int) messageKey {
		return messageKey{namespace: "ns", seq: int64(i), uuid: fmt.Sprint("u", i), ref: fmt.Sprint(i)}
	}
	for i := range 10_000 {
		c.put(key(i), mailindex.Index{Subject: fmt.Sprint(i), Text: text})
		if i == 0 {
			continue
		}
		if _, ok := c.get(key(0)); !ok {
			t.Fatalf("the most used message was evicted after %d puts", i)
		}
	}
	if c.bytes > messageCacheBytes {
		t.Fatalf("cache holds %d bytes, bound %d", c.bytes, messageCacheBytes)
	}
	if _, ok := c.get(key(1)); ok {
		t.Fatal("an old message outlived 10,000 newer ones")
	}
	if m, ok := c.get(key(9_999)); !ok || m.Subject != "9999" {
		t.Fatalf("the newest message: %v %v", m.Subject, ok)
	}
	k := key(9_999)
	for _, other := range []messageKey{
		{namespace: "other", seq: k.seq, uuid: k.uuid, ref: k.ref},
		{namespace: k.namespace, seq: k.seq + 1, uuid: k.uuid, ref: k.ref},
		{namespace: k.namespace, seq: k.seq, uuid: "u-other", ref: k.ref},
		{namespace: k.namespace, seq: k.seq, uuid: k.uuid, ref: "other"},
	} {
		if _, ok := c.get(other); ok {
			t.Fatalf("%+v answered for %+v", other, k)
		}
	}
	c.put(key(-1), mailindex.Index{Text: strings.Repeat("x", messageCacheBytes)})
	if _, ok := c.get(key(-1)); ok {
		t.Fatal("a message larger than an eighth of the cache was kept")
	}
}

func TestMessageCacheConcurrent(t *testing.T) {
	var c messageCache
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				k := messageKey{namespace: fmt.Sprint("ns", w%2), seq: int64(i % 300)}
				if m, ok := c.get(k); ok && m.Subject != k.namespace {
					t.Errorf("%+v answered %q", k, m.Subject)
					return
				}
				c.put(k, mailindex.Index{Subject: k.namespace, Text: strings.Repeat("y", 40_000)})
			}
		}()
	}
	wg.Wait()
	if c.bytes > messageCacheBytes || c.order.Len() != len(c.m) {
		t.Fatalf("bytes %d, list %d, map %d", c.bytes, c.order.Len(), len(c.m))
	}
}
