// Package msgstore holds message bodies for the plane. The plane's ledger
// (package ledger) decides what is accepted and keeps the index: which
// message of which namespace is where. A Store only keeps bytes, durably,
// and gives them back.
//
// Two stores exist: the database store (this package), inside the
// ledger's own database, SQLite or PostgreSQL, so that a message and the
// policy that accepted it commit together; and
// Mailpit (package msgstore/mailpit), reached over its Unix sockets.
package msgstore

import (
	"context"
	"database/sql"
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

// Store keeps message bodies.
type Store interface {
	// Put stores raw (already scrubbed) as message seq of ns and returns a
	// reference to it. tx is the ledger's open transaction: a store inside
	// the ledger's database writes through it, so the message commits with
	// its index entry; an external store ignores tx and must have the
	// message durably stored when Put returns. An error means nothing was
	// accepted; the plane then answers with an outage, never a refusal,
	// unless the error wraps ErrRefused.
	Put(ctx context.Context, tx *sql.Tx, ns Namespace, seq int64, env Envelope, raw []byte) (ref string, err error)
	// Get returns the stored bytes of ref. An external store must check that
	// the message it finds still belongs to ns and to env's recipients: its
	// own search is an index, not an authorization.
	Get(ctx context.Context, ns Namespace, ref string, env Envelope) ([]byte, error)
	// Purge deletes every body stored for ns (a closed trial's). A
	// transactional store deletes through tx, inside the ledger's close;
	// an external one is called after it with a nil tx, and again later
	// if it fails, until it succeeds.
	Purge(ctx context.Context, tx *sql.Tx, ns Namespace) error
	// Transactional reports whether Put must run inside the ledger's
	// transaction (a store in the ledger's own database). An external
	// store's Put is called before that transaction, with a nil tx and a
	// zero seq, so that its writes run concurrently.
	Transactional() bool
	// Ping reports whether the store can take and serve mail now.
	Ping(ctx context.Context) error
	// Close releases the store.
	Close() error
}

// ErrRefused wraps a store's refusal of a message it will never take (as
// opposed to an outage).
var ErrRefused = errors.New("msgstore: message refused")
