package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"
)

// Namespace states.
const (
	StateActive    = "active"
	StateSealed    = "sealed"
	StateDestroyed = "destroyed"
)

// Trial is a trial's durable row. Secrets are digests.
type Trial struct {
	ID             int64
	Profile        string
	Namespace      string // current
	MailAPIToken   []byte
	BootstrapToken []byte
	InboxToken     []byte
	Destroyed      bool
	Created        time.Time
}

// Namespace is a namespace's durable row.
type Namespace struct {
	Name            string
	TrialID         int64
	State           string
	ReadCapability  []byte
	WriteCapability []byte
	// BootstrapCapability is the one capability kept in clear: the value
	// /internal/bootstrap must hand out (the write capability of a candidate
	// trial, the read capability of a sidecar or authoring trial).
	BootstrapCapability string
	AllowedSenders      []string
	Tag                 string
	NextSeq             int64
	MessageCount        int64
	ByteCount           int64
	Created             time.Time
}

// Grant is a grant's durable row.
type Grant struct {
	Digest  []byte
	Role    string
	TrialID int64 // 0 for roles not bound to a trial
	Revoked bool
}

// CreateTrial stores a new trial with its first namespace and its grants.
// It fails with ErrExists if the namespace name is taken.
func (l *Ledger) CreateTrial(ctx context.Context, t *Trial, ns *Namespace, grants []Grant) error {
	return l.tx(ctx, func(tx *sql.Tx) error {
		if err := nsExists(ctx, tx, ns.Name); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO trials (profile, namespace, mail_api_token, bootstrap_token, inbox_token, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			t.Profile, ns.Name, t.MailAPIToken, t.BootstrapToken, t.InboxToken, now())
		if err != nil {
			return err
		}
		if t.ID, err = res.LastInsertId(); err != nil {
			return err
		}
		ns.TrialID = t.ID
		if err := insertNamespace(ctx, tx, ns); err != nil {
			return err
		}
		for _, g := range grants {
			g.TrialID = t.ID
			if err := insertGrant(ctx, tx, g); err != nil {
				return err
			}
		}
		return nil
	})
}

// AddGrant stores a grant not bound to a trial (gateway, admin).
func (l *Ledger) AddGrant(ctx context.Context, g Grant) error {
	return l.tx(ctx, func(tx *sql.Tx) error { return insertGrant(ctx, tx, g) })
}

// Rotate adds ns as the trial's new current namespace and seals the
// previous one.
func (l *Ledger) Rotate(ctx context.Context, trialID int64, ns *Namespace) (sealed string, err error) {
	err = l.tx(ctx, func(tx *sql.Tx) error {
		if err := nsExists(ctx, tx, ns.Name); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, `SELECT namespace FROM trials WHERE id = ? AND destroyed = 0`, trialID).Scan(&sealed); err != nil {
			return notFound(err)
		}
		ns.TrialID = trialID
		if err := insertNamespace(ctx, tx, ns); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE namespaces SET state = ? WHERE name = ? AND state = ?`, StateSealed, sealed, StateActive); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE trials SET namespace = ? WHERE id = ?`, ns.Name, trialID)
		return err
	})
	return sealed, err
}

// Seal stops a namespace from taking mail; reads with its capability go on.
func (l *Ledger) Seal(ctx context.Context, name string) error {
	return l.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE namespaces SET state = ? WHERE name = ? AND state <> ?`, StateSealed, name, StateDestroyed)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ErrNotFound
		}
		return nil
	})
}

// Destroy revokes every grant of the trial, forgets its capabilities and
// idempotency keys, and marks its namespaces destroyed. Names stay taken.
func (l *Ledger) Destroy(ctx context.Context, trialID int64) error {
	return l.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE trials SET destroyed = 1 WHERE id = ? AND destroyed = 0`, trialID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ErrNotFound
		}
		stmts := []string{
			`UPDATE grants SET revoked = 1 WHERE trial_id = ?`,
			`DELETE FROM idempotency WHERE namespace IN (SELECT name FROM namespaces WHERE trial_id = ?)`,
			`UPDATE namespaces SET state = 'destroyed', read_capability = NULL, write_capability = NULL, bootstrap_capability = NULL WHERE trial_id = ?`,
		}
		for _, s := range stmts {
			if _, err := tx.ExecContext(ctx, s, trialID); err != nil {
				return err
			}
		}
		return nil
	})
}

// Grant returns the grant with this digest.
func (l *Ledger) Grant(ctx context.Context, digest []byte) (Grant, error) {
	g := Grant{Digest: digest}
	var trial sql.NullInt64
	err := l.rs.queryRow(ctx, qGrant, digest).Scan(&g.Role, &trial, &g.Revoked)
	g.TrialID = trial.Int64
	return g, notFound(err)
}

// Trial returns a trial by id.
func (l *Ledger) Trial(ctx context.Context, id int64) (Trial, error) {
	rows, err := l.rs.query(ctx, qTrial, id)
	if err != nil {
		return Trial{}, err
	}
	ts, err := scanTrials(rows)
	if err != nil {
		return Trial{}, err
	}
	if len(ts) == 0 {
		return Trial{}, ErrNotFound
	}
	return ts[0], nil
}

// Trials returns every trial, oldest first.
func (l *Ledger) Trials(ctx context.Context) ([]Trial, error) {
	rows, err := l.read.QueryContext(ctx, trialSelect+` ORDER BY id`)
	if err != nil {
		return nil, err
	}
	return scanTrials(rows)
}

const trialSelect = `SELECT id, profile, namespace, mail_api_token, bootstrap_token, inbox_token, destroyed, created_at FROM trials`

func scanTrials(rows *sql.Rows) ([]Trial, error) {
	defer rows.Close()
	var out []Trial
	for rows.Next() {
		var t Trial
		var created int64
		if err := rows.Scan(&t.ID, &t.Profile, &t.Namespace, &t.MailAPIToken, &t.BootstrapToken, &t.InboxToken, &t.Destroyed, &created); err != nil {
			return nil, err
		}
		t.Created = fromMillis(created)
		out = append(out, t)
	}
	return out, rows.Err()
}

// Namespace returns a namespace by name.
func (l *Ledger) Namespace(ctx context.Context, name string) (Namespace, error) {
	rows, err := l.rs.query(ctx, qNamespace, name)
	if err != nil {
		return Namespace{}, err
	}
	nss, err := scanNamespaces(rows)
	if err != nil {
		return Namespace{}, err
	}
	if len(nss) == 0 {
		return Namespace{}, ErrNotFound
	}
	return nss[0], nil
}

// Namespaces returns the namespaces of a trial, oldest first.
func (l *Ledger) Namespaces(ctx context.Context, trialID int64) ([]Namespace, error) {
	rows, err := l.read.QueryContext(ctx, nsSelect+` WHERE trial_id = ? ORDER BY created_at, name`, trialID)
	if err != nil {
		return nil, err
	}
	return scanNamespaces(rows)
}

const nsSelect = `SELECT name, trial_id, state, read_capability, write_capability, bootstrap_capability, allowed_senders, tag, next_seq, message_count, byte_count, created_at FROM namespaces`

func scanNamespaces(rows *sql.Rows) ([]Namespace, error) {
	defer rows.Close()
	var out []Namespace
	for rows.Next() {
		var ns Namespace
		var boot sql.NullString
		var senders string
		var created int64
		if err := rows.Scan(&ns.Name, &ns.TrialID, &ns.State, &ns.ReadCapability, &ns.WriteCapability, &boot, &senders, &ns.Tag, &ns.NextSeq, &ns.MessageCount, &ns.ByteCount, &created); err != nil {
			return nil, err
		}
		ns.BootstrapCapability = boot.String
		if err := json.Unmarshal([]byte(senders), &ns.AllowedSenders); err != nil {
			return nil, err
		}
		ns.Created = fromMillis(created)
		out = append(out, ns)
	}
	return out, rows.Err()
}

func nsExists(ctx context.Context, tx *sql.Tx, name string) error {
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM namespaces WHERE name = ?`, name).Scan(&one)
	switch {
	case err == nil:
		return ErrExists
	case errors.Is(err, sql.ErrNoRows):
		return nil
	}
	return err
}

func insertNamespace(ctx context.Context, tx *sql.Tx, ns *Namespace) error {
	senders, err := json.Marshal(nonNil(ns.AllowedSenders))
	if err != nil {
		return err
	}
	ns.State, ns.NextSeq = StateActive, 1
	_, err = tx.ExecContext(ctx, `INSERT INTO namespaces (name, trial_id, state, read_capability, write_capability, bootstrap_capability, allowed_senders, tag, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		ns.Name, ns.TrialID, ns.State, ns.ReadCapability, ns.WriteCapability, ns.BootstrapCapability, string(senders), ns.Tag, now())
	return err
}

func insertGrant(ctx context.Context, tx *sql.Tx, g Grant) error {
	var trial any
	if g.TrialID != 0 {
		trial = g.TrialID
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO grants (digest, role, trial_id, created_at) VALUES (?, ?, ?, ?)`, g.Digest, g.Role, trial, now())
	return err
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// tx runs fn in a write transaction, committing when it returns nil.
func (l *Ledger) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := l.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}
