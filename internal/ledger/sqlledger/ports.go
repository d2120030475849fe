package sqlledger

import (
	"context"
	"database/sql"
	"errors"

	"github.com/websitebench/mailplane/internal/evidence"
	. "github.com/websitebench/mailplane/internal/ledger"
)

// A trial's own SMTP port belongs to the plane that serves it: the one
// whose supervisor binds it on its host. Each plane has an identity
// (SetPlane), stored with the port of every trial it opens; a plane finds
// trials by port, and restores ports, only among its own, so that two
// planes on one PostgreSQL database may use the same port number. Among
// one plane's open trials a port is unique (the index
// trials_plane_smtp_port, and a check before each write that names it).

// dedupePorts keeps, before the unique index is made, only the oldest of
// open trials that a database of an older build let share one port; the
// others lose their port (their clients authenticate on the shared port).
const dedupePorts = `UPDATE trials SET smtp_port = NULL WHERE smtp_port IS NOT NULL AND id NOT IN
	(SELECT MIN(id) FROM trials WHERE smtp_port IS NOT NULL GROUP BY plane, smtp_port)`

// SetPlane sets this plane's identity; call it before the ledger is used.
// On SQLite the database is the plane's alone: every trial in it is its
// own (those stored before planes had identities too). On PostgreSQL such
// older trials belong to no plane: their ports are neither restored nor
// routed (their clients authenticate on the shared port).
func (l *DB) SetPlane(ctx context.Context, id string) error {
	l.plane = id
	if l.listen != nil {
		// The listening connection names its plane in pg_stat_activity
		// (in a copy: the write handle's config shares the map).
		l.listen = l.listen.Copy()
		l.listen.RuntimeParams["application_name"] = ListenApplication(id)
		return nil
	}
	return l.execDurable(ctx, `UPDATE trials SET plane = ? WHERE plane IS NULL OR plane <> ?`, id, id)
}

// ListenApplication is the application_name of plane id's LISTEN
// connection on PostgreSQL.
func ListenApplication(id string) string { return "mailplane listen " + id }

// portTaken reports ErrPortTaken if an open trial of this plane owns port.
func (l *DB) portTaken(ctx context.Context, tx txq, port int) error {
	if port == 0 {
		return nil
	}
	var one int
	err := tx.queryRow(ctx, qPortTaken, l.plane, port).Scan(&one)
	switch {
	case err == nil:
		return ErrPortTaken
	case errors.Is(err, sql.ErrNoRows):
		return nil
	}
	return err
}

// MovePort moves this plane's open trial that owns port from to port to,
// and records the move in the trail of the trial's current namespace. It
// fails with ErrNotFound if no open trial of the plane owns from, and with
// ErrPortTaken if one owns to.
func (l *DB) MovePort(ctx context.Context, from, to int) (Trial, error) {
	var t Trial
	err := l.policyTx(ctx, func(tx *sql.Tx) error {
		var err error
		if t, err = l.lockTrial(ctx, tx, ` AND plane = ? AND smtp_port = ?`, l.plane, from); err != nil {
			return err
		}
		if err := l.portTaken(ctx, txq{tx: tx, s: l.ws}, to); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE trials SET smtp_port = ? WHERE id = ?`, to, t.ID); err != nil {
			return err
		}
		t.SMTPPort = to
		e := &evidence.Event{Namespace: t.Namespace, Door: evidence.DoorPlane, Action: evidence.ActionPortMoved,
			Outcome: evidence.Accepted, OldPort: from, NewPort: to}
		if err := l.appendEvent(ctx, txq{tx: tx, s: l.ws}, e, true); err != nil {
			return err
		}
		return l.announce(ctx, tx, changePolicy, t.Namespace)
	})
	return t, err
}

// lockTrial reads the one open trial that cond (after trialSelect's
// WHERE) names, locked for the rest of tx (FOR UPDATE on PostgreSQL; the
// write transaction itself on SQLite): ErrNotFound if there is none.
func (l *DB) lockTrial(ctx context.Context, tx *sql.Tx, cond string, args ...any) (Trial, error) {
	return firstTrial(tx.QueryContext(ctx, l.d.text(trialSelect+cond+forUpdate), args...))
}

// KeyCheck keeps under name, in the ledger's meta table, the first check
// value a plane gives it (a one-way value of a key the planes of one
// database must share, never the key), and returns the value kept, for
// the plane to compare its own with.
func (l *DB) KeyCheck(ctx context.Context, name, check string) (string, error) {
	if err := l.execDurable(ctx, `INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING`, name, check); err != nil {
		return "", err
	}
	var kept string
	err := l.write.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, name).Scan(&kept)
	return kept, err
}
