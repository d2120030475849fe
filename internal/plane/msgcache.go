package plane

import (
	"container/list"
	"sync"

	"github.com/websitebench/mailplane/internal/mailindex"
)

// messageCacheBytes bounds the message indexes the plane keeps. A list of
// 32 messages of 100 KiB fits several times over; an idle plane holds
// nothing.
const messageCacheBytes = 16 << 20

// messageCache keeps messages' indexes (package mailindex) as reads load
// them, least recently used first out, so that reading the same mail
// again (an evaluator's list while it waits, the inbox's reloads) costs
// neither the ledger's round trip nor decoding the index. A stored message never
// changes, and a key names one message for ever: its namespace, its
// sequence number, its UUID (random, never reused) and its place in the
// store. The cache holds only what a read already loaded, and a read
// finds in it only the entries the ledger lists for the namespace the
// read was authorized for, so it is no path around the policy.
type messageCache struct {
	mu    sync.Mutex
	bytes int
	order list.List // of *cached, most recent first
	m     map[messageKey]*list.Element
}

type messageKey struct {
	namespace string
	seq       int64
	uuid, ref string
}

type cached struct {
	key  messageKey
	msg  mailindex.Index
	size int
}

// weight is what a message is counted as against messageCacheBytes.
func weight(m *mailindex.Index) int {
	n := 512 + len(m.Subject) + len(m.Text) + len(m.HTML) + len(m.HTMLText) + len(m.FromAddress) + len(m.FromName) + len(m.Found.ActionLink)
	for _, im := range m.Inline {
		n += len(im.Data)
	}
	for _, h := range m.Headers {
		n += 64 + len(h.Name) + len(h.Value)
	}
	for _, l := range [][]string{m.Found.Codes, m.Found.Links, m.LinkURLs} {
		for _, s := range l {
			n += 16 + len(s)
		}
	}
	return n + 256*len(m.Attachments)
}

func (c *messageCache) get(k messageKey) (mailindex.Index, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.m[k]
	if !ok {
		return mailindex.Index{}, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*cached).msg, true
}

func (c *messageCache) put(k messageKey, m mailindex.Index) {
	size := weight(&m)
	if size > messageCacheBytes/8 {
		return // one message may not push out most of the others
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[messageKey]*list.Element{}
	}
	if _, ok := c.m[k]; ok {
		return
	}
	c.m[k] = c.order.PushFront(&cached{key: k, msg: m, size: size})
	c.bytes += size
	for c.bytes > messageCacheBytes {
		old := c.order.Remove(c.order.Back()).(*cached)
		delete(c.m, old.key)
		c.bytes -= old.size
	}
}
