// Package msgstore is the plane's interface to an external message store
// (Mailpit, package msgstore/mailpit). The plane's ledger (package ledger)
// decides what is accepted and keeps the index: which message of which
// namespace is where. When no external store is configured the ledger
// keeps the bodies too, in its own database and transactions; an external
// Store only keeps bytes, durably, and gives them back.
package msgstore

import (
	"context"
	"errors"
)

// Namespace is what a store knows of a namespace: its name and the private
// storage tag the plane minted for it (durable, so mail stays readable
// across restarts of the plane).
type Namespace struct {
	Name string
	Tag  string
}

// Envelope is the accepted envelope of a message.
type Envelope struct {
	From string
	To   []string
}

// ErrNotFound means the store does not hold the referenced message (or no
// longer holds it for this namespace).
var ErrNotFound = errors.New("msgstore: message not found")

// Store keeps message bodies outside the ledger's database.
type Store interface {
	// Put stores raw (already scrubbed) for ns and returns a reference to
	// it. The plane calls it before the ledger's transaction that indexes
	// the message, so that the store's writes run concurrently; the
	// message must be durably stored when Put returns. An error means
	// nothing was accepted; the plane then answers with an outage, never a
	// refusal, unless the error wraps ErrRefused.
	Put(ctx context.Context, ns Namespace, env Envelope, raw []byte) (ref string, err error)
	// Get returns the stored bytes of ref. The store must check that the
	// message it finds still belongs to ns and to env's recipients: its
	// own search is an index, not an authorization.
	Get(ctx context.Context, ns Namespace, ref string, env Envelope) ([]byte, error)
	// Purge deletes every body stored for ns (a closed trial's). It is
	// called after the ledger's close commits, and again later if it
	// fails, until it succeeds.
	Purge(ctx context.Context, ns Namespace) error
	// Ping reports whether the store can take and serve mail now.
	Ping(ctx context.Context) error
	// Close releases the store.
	Close() error
	// Unavailable reports whether err, which the store returned, means it
	// cannot answer now (not running, unreachable, out of time): an
	// outage. Its other errors, but ErrNotFound and ErrRefused, are bugs.
	Unavailable(err error) bool
}

// ErrRefused wraps a store's refusal of a message it will never take (as
// opposed to an outage).
var ErrRefused = errors.New("msgstore: message refused")
