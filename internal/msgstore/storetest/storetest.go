// Package storetest is the conformance suite of msgstore.Store: one set of
// tests, run unchanged against every external store (the Mailpit store,
// in package mailpit's tests, with Mailpit as the plane runs it and with
// its defaults). It drives a store the way the plane does: Put before the
// ledger's transaction, Get with the namespace and envelope the ledger
// kept. (The bodies the ledger keeps itself are tested in package sqlledger.)
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/mailmsg"
	"github.com/websitebench/mailplane/internal/msgstore"
)

// Subject is a store under test.
type Subject struct {
	// Open opens the store. The suite calls it again after Mend (as a
	// restarted plane would) and expects the mail stored before.
	Open func(t *testing.T) msgstore.Store
	// Break makes what the store keeps its mail in unavailable; Mend
	// brings it back with its data.
	Break func(t *testing.T)
	Mend  func(t *testing.T)
}

// Run runs the suite. The outage test runs last: it breaks the store.
func Run(t *testing.T, s Subject) {
	h := &harness{t: t, s: s}
	h.open()
	t.Cleanup(h.close)
	t.Run("RoundTrip", h.roundTrip)
	t.Run("Large", h.large)
	t.Run("OtherNamespace", h.otherNamespace)
	t.Run("UnknownRef", h.unknownRef)
	t.Run("Concurrent", h.concurrent)
	t.Run("Ping", h.ping)
	t.Run("Canceled", h.canceled)
	t.Run("OutageAndRestart", h.outage)
}

type harness struct {
	t     *testing.T
	s     Subject
	store msgstore.Store
}

func (h *harness) open() {
	h.t.Helper()
	h.store = h.s.Open(h.t)
}

func (h *harness) close() {
	if h.store != nil {
		h.store.Close()
	}
	h.store = nil
}

// namespace is a fresh namespace with its own tag, as the plane mints them.
func namespace() msgstore.Namespace {
	return msgstore.Namespace{Name: ident.Namespace(), Tag: ident.StorageTag()}
}

// put stores raw as the plane does.
func (h *harness) put(ctx context.Context, ns msgstore.Namespace, env msgstore.Envelope, raw []byte) (string, error) {
	return h.store.Put(ctx, ns, env, raw)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

var env = msgstore.Envelope{From: "site@sender.example", To: []string{"user@example.com", "second@example.org"}}

// message is what the plane hands a store: the sender's bytes, scrubbed.
func message(raw string) []byte {
	return scrubbed([]byte(raw), env)
}

// scrubbed is raw as the plane hands it to a store for envelope e.
func scrubbed(raw []byte, e msgstore.Envelope) []byte {
	out, err := mailmsg.Scrub(context.Background(), raw, e.From, e.To)
	if err != nil {
		panic(err) // every fixture here is within the header limits
	}
	return out
}

// cases are messages whose bytes a store must give back exactly.
func cases() map[string][]byte {
	all := make([]byte, 0, 4*256)
	for range 4 {
		for b := range 256 {
			all = append(all, byte(b))
		}
	}
	return map[string][]byte{
		"crlf":                 message("Subject: crlf\r\nDate: Mon, 2 Jan 2006 15:04:05 +0000\r\nMessage-ID: <a@b>\r\n\r\nHello\r\nWorld\r\n"),
		"lf":                   message("Subject: lf\nX-Other: kept\n\nHello\nWorld\n"),
		"mixed endings":        message("Subject: mixed\r\n\nline one\nline two\r\nbare\rcr\r\n"),
		"no final newline":     message("Subject: no newline\r\n\r\nthe last line has no line break"),
		"no final newline lf":  message("Subject: no newline\n\nend"),
		"ends with CR":         message("Subject: cr\r\n\r\nends with a bare CR\r"),
		"ends with CR CR":      message("Subject: crcr\r\n\r\nends with two CRs\r\r"),
		"dot lines":            message("Subject: dots\r\n\r\n.\r\n..\r\n.leading dot\r\n...\r\n.\n.\r\nmiddle\r\n.\r\n"),
		"dot last no newline":  message("Subject: dots\n\nx\n."),
		"dot only body":        message("Subject: dot\r\n\r\n.\r\n"),
		"CR CR LF":             message("Subject: crcrlf\r\n\r\none\r\r\ntwo\r\r\r\nthree\r\r\n\r\r\n"),
		"CR CR LF in lf":       message("Subject: crcrlf\n\none\r\r\ntwo\n"),
		"binary":               append(message("Subject: binary\r\nContent-Type: application/octet-stream\r\n\r\n"), all...),
		"binary with NUL line": message("Subject: nul\r\n\r\n\x00\x00\r\n\x00.\r\n.\x00\r\n\xff\xfe\r\n"),
		"utf-8":                message("Subject: =?utf-8?q?Gr=C3=BC=C3=9Fe?=\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\nGrüße, 你好, ١٢٣٤\r\n"),
		"empty body":           message("Subject: empty\r\n\r\n"),
		"header only":          message("Subject: header only\r\n"),
		"multipart": message("Subject: multi\r\nMIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=\"b1\"\r\n\r\n" +
			"preamble\r\n--b1\r\nContent-Type: text/plain\r\n\r\ncode 123456\r\n--b1\r\nContent-Type: text/html\r\n\r\n<p>code <b>123456</b></p>\r\n--b1--\r\nepilogue\r\n"),
	}
}

func (h *harness) roundTrip(t *testing.T) {
	c := ctx(t)
	ns := namespace()
	refs := map[string]string{}
	for name, raw := range cases() {
		ref, err := h.put(c, ns, env, raw)
		if err != nil {
			t.Fatalf("%s: Put: %v", name, err)
		}
		refs[name] = ref
		got, err := h.store.Get(c, ns, ref, env)
		if err != nil {
			t.Fatalf("%s: Get: %v", name, err)
		}
		if !bytes.Equal(got, raw) {
			t.Fatalf("%s: Get returned other bytes\n got %q\nwant %q", name, clip(got), clip(raw))
		}
	}
	// Every message is still itself once all are stored.
	for name, raw := range cases() {
		got, err := h.store.Get(c, ns, refs[name], env)
		if err != nil || !bytes.Equal(got, raw) {
			t.Fatalf("%s: second Get: %v (equal: %v)", name, err, bytes.Equal(got, raw))
		}
	}
}

// large stores messages at the plane's limit: 1 MiB from the sender, as
// text and as arbitrary bytes, then scrubbed.
func (h *harness) large(t *testing.T) {
	c := ctx(t)
	ns := namespace()
	const size = 1 << 20
	rng := rand.New(rand.NewPCG(1, 2))
	text := []byte("Subject: large text\r\n\r\n")
	for len(text) < size {
		line := fmt.Sprintf(".line %d with a leading dot and some words to fill it up\r\n", len(text))
		text = append(text, line...)
	}
	text = text[:size]
	bin := []byte("Subject: large binary\r\nContent-Type: application/octet-stream\r\n\r\n")
	for len(bin) < size {
		// Bytes drawn mostly from the ones that matter to SMTP.
		const alphabet = "\r\n.\x00a\xff"
		bin = append(bin, alphabet[rng.IntN(len(alphabet))])
	}
	for name, raw := range map[string][]byte{"text": scrubbed(text, env), "binary": scrubbed(bin, env)} {
		ref, err := h.put(c, ns, env, raw)
		if err != nil {
			t.Fatalf("%s: Put of %d bytes: %v", name, len(raw), err)
		}
		got, err := h.store.Get(c, ns, ref, env)
		if err != nil {
			t.Fatalf("%s: Get: %v", name, err)
		}
		if !bytes.Equal(got, raw) {
			t.Fatalf("%s: Get returned %d other bytes for %d", name, len(got), len(raw))
		}
	}
}

// otherNamespace: a ref of one namespace opens nothing in another, even
// with the right envelope.
func (h *harness) otherNamespace(t *testing.T) {
	c := ctx(t)
	a, b := namespace(), namespace()
	envB := msgstore.Envelope{From: env.From, To: []string{"other@example.net"}}
	refA, err := h.put(c, a, env, message("Subject: for a\r\n\r\nsecret of a\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	rawB := scrubbed([]byte("Subject: for b\r\n\r\nmail of b\r\n"), envB)
	refB, err := h.put(c, b, envB, rawB)
	if err != nil {
		t.Fatal(err)
	}
	for _, try := range []struct {
		ns  msgstore.Namespace
		ref string
		env msgstore.Envelope
	}{{b, refA, env}, {b, refA, envB}, {a, refB, envB}, {a, refB, env}} {
		if got, err := h.store.Get(c, try.ns, try.ref, try.env); !errors.Is(err, msgstore.ErrNotFound) {
			t.Fatalf("Get of another namespace's message: %v, %q; want ErrNotFound", err, clip(got))
		}
	}
	if got, err := h.store.Get(c, b, refB, envB); err != nil || !bytes.Equal(got, rawB) {
		t.Fatalf("own message: %v", err)
	}
}

func (h *harness) unknownRef(t *testing.T) {
	c := ctx(t)
	ns := namespace()
	ref, err := h.put(c, ns, env, message("Subject: known\r\n\r\nx\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "x", "999999", "-1", ref + "0", strings.Repeat("a", 300), "mp1:::::", "\x00"} {
		if _, err := h.store.Get(c, ns, bad, env); !errors.Is(err, msgstore.ErrNotFound) {
			t.Fatalf("Get(%q): %v; want ErrNotFound", clip([]byte(bad)), err)
		}
	}
}

// concurrent: eight writers and readers at once, as the plane's callers
// are.
func (h *harness) concurrent(t *testing.T) {
	c := ctx(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ns := namespace()
			for i := range 10 {
				raw := message(fmt.Sprintf("Subject: writer %d message %d\r\n\r\nbody %d/%d\r\n", w, i, w, i))
				ref, err := h.put(c, ns, env, raw)
				if err != nil {
					errs <- fmt.Errorf("writer %d Put %d: %w", w, i, err)
					return
				}
				got, err := h.store.Get(c, ns, ref, env)
				if err != nil || !bytes.Equal(got, raw) {
					errs <- fmt.Errorf("writer %d Get %d: %v", w, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func (h *harness) ping(t *testing.T) {
	if err := h.store.Ping(ctx(t)); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

// canceled: a call whose context has ended fails as an outage.
func (h *harness) canceled(t *testing.T) {
	ns := namespace()
	ref, err := h.put(ctx(t), ns, env, message("Subject: c\r\n\r\nc\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.put(c, ns, env, message("Subject: c\r\n\r\nc\r\n")); err == nil || errors.Is(err, msgstore.ErrRefused) {
		t.Fatalf("Put with an ended context: %v; want an outage", err)
	}
	if _, err := h.store.Get(c, ns, ref, env); err == nil || errors.Is(err, msgstore.ErrNotFound) {
		t.Fatalf("Get with an ended context: %v; want an outage", err)
	}
}

// outage: while the store's backing is down every call fails as an outage
// (never a refusal, never "not found"); once it is back, a store reopened
// over the same data (a restarted plane) reads what was stored before.
func (h *harness) outage(t *testing.T) {
	c := ctx(t)
	ns := namespace()
	before := message("Subject: before the outage\r\n\r\nkept\r\n")
	ref, err := h.put(c, ns, env, before)
	if err != nil {
		t.Fatal(err)
	}
	h.s.Break(t)
	short, cancel := context.WithTimeout(c, 10*time.Second)
	defer cancel()
	if err := h.store.Ping(short); err == nil {
		t.Fatal("Ping succeeded while the store is down")
	}
	if _, err := h.put(short, ns, env, message("Subject: during\r\n\r\nlost\r\n")); err == nil || errors.Is(err, msgstore.ErrRefused) {
		t.Fatalf("Put during the outage: %v; want an outage error", err)
	}
	if _, err := h.store.Get(short, ns, ref, env); err == nil || errors.Is(err, msgstore.ErrNotFound) || errors.Is(err, msgstore.ErrRefused) {
		t.Fatalf("Get during the outage: %v; want an outage error", err)
	}
	h.s.Mend(t)
	h.close()
	h.open()
	got, err := h.store.Get(c, ns, ref, env)
	if err != nil || !bytes.Equal(got, before) {
		t.Fatalf("Get after the outage, over a reopened store: %v", err)
	}
	after := message("Subject: after\r\n\r\nagain\r\n")
	ref2, err := h.put(c, ns, env, after)
	if err != nil {
		t.Fatalf("Put after the outage: %v", err)
	}
	if got, err := h.store.Get(c, ns, ref2, env); err != nil || !bytes.Equal(got, after) {
		t.Fatalf("Get of a message stored after the outage: %v", err)
	}
	if err := h.store.Ping(c); err != nil {
		t.Fatalf("Ping after the outage: %v", err)
	}
}

// clip shortens bytes for a failure message.
func clip(b []byte) []byte {
	if len(b) > 300 {
		return append(append([]byte{}, b[:300]...), "…"...)
	}
	return b
}
