package sqlledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/websitebench/mailplane/internal/evidence"
	. "github.com/websitebench/mailplane/internal/ledger"
)

// CreateTrial stores a new trial with its first namespace and its grants.
// It fails with ErrExists if the namespace name is taken, and with
// ErrPortTaken if an open trial of this plane owns its SMTP port, and with
// ErrNetnsTaken if one has its doors in the same network namespace.
func (l *DB) CreateTrial(ctx context.Context, t *Trial, ns *Namespace, grants []Grant) error {
	return l.tx(ctx, func(tx *sql.Tx) error {
		q := txq{tx: tx, s: l.ws}
		if err := nsExists(ctx, q, ns.Name); err != nil {
			return err
		}
		if err := l.portTaken(ctx, q, t.SMTPPort); err != nil {
			return err
		}
		t.Plane = l.plane
		if t.Created.IsZero() {
			t.Created = time.Now()
		}
		err := q.queryRow(ctx, qInsertTrial, t.Profile, ns.Name, t.MailAPIToken, t.BootstrapToken, t.InboxToken, t.Created.UnixMilli(), nullMillis(t.Expires), nullInt(t.SMTPPort), t.Plane).Scan(&t.ID)
		if err != nil {
			return err
		}
		ns.TrialID = t.ID
		if err := insertNamespace(ctx, q, ns); err != nil {
			return err
		}
		if err := l.insertDoor(ctx, tx, t); err != nil {
			return err
		}
		if err := l.lifecycle(ctx, tx, ns.Name, evidence.ActionOpen, ""); err != nil {
			return err
		}
		if t.Faults != "" {
			if err := l.setFaults(ctx, tx, t.ID, ns.Name, t.Faults); err != nil {
				return err
			}
		}
		if t.Webhooks != "" {
			if err := l.setWebhooks(ctx, tx, t.ID, ns.Name, t.Webhooks); err != nil {
				return err
			}
		}
		for _, g := range grants {
			g.TrialID = t.ID
			if err := insertGrant(ctx, q, g); err != nil {
				return err
			}
		}
		return nil
	})
}

// AddGrant stores a grant not bound to a trial (gateway, admin).
func (l *DB) AddGrant(ctx context.Context, g Grant) error {
	return l.tx(ctx, func(tx *sql.Tx) error {
		if err := insertGrant(ctx, txq{tx: tx, s: l.ws}, g); err != nil {
			return err
		}
		return l.announce(ctx, tx, changePolicy, "")
	})
}

// Rotate adds ns as the trial's new current namespace and seals the
// previous one.
func (l *DB) Rotate(ctx context.Context, trialID int64, ns *Namespace) (sealed string, err error) {
	err = l.policyTx(ctx, func(tx *sql.Tx) error {
		q := txq{tx: tx, s: l.ws}
		if err := nsExists(ctx, q, ns.Name); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, l.d.text(`SELECT namespace FROM trials WHERE id = ? AND destroyed = 0`+forUpdate), trialID).Scan(&sealed); err != nil {
			return notFound(err)
		}
		ns.TrialID = trialID
		if err := insertNamespace(ctx, q, ns); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE namespaces SET state = ? WHERE name = ? AND state = ?`, StateSealed, sealed, StateActive); err != nil {
			return err
		}
		if err := l.lifecycle(ctx, tx, sealed, evidence.ActionRotate, ns.Name); err != nil {
			return err
		}
		if err := l.lifecycle(ctx, tx, ns.Name, evidence.ActionOpen, sealed); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE trials SET namespace = ? WHERE id = ?`, ns.Name, trialID); err != nil {
			return err
		}
		return l.announce(ctx, tx, changePolicy, sealed)
	})
	return sealed, err
}

// Seal stops a namespace from taking mail; reads with its capability go on.
func (l *DB) Seal(ctx context.Context, name string) error {
	return l.policyTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE namespaces SET state = ? WHERE name = ? AND state IN (?, ?)`, StateSealed, name, StateActive, StateSealed)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ErrNotFound
		}
		if err := l.lifecycle(ctx, tx, name, evidence.ActionSeal, ""); err != nil {
			return err
		}
		return l.announce(ctx, tx, changePolicy, name)
	})
}

// SealTrial seals every namespace of trial id that still takes mail, and
// records why: in the trial (SealedReason) and as the code of a seal
// event in its current namespace's trail. The plane seals a trial this
// way when a restart cannot serve its doors where its candidate was told
// they are. It fails with ErrNotFound if the trial is not open.
func (l *DB) SealTrial(ctx context.Context, id int64, reason string) (Trial, error) {
	var t Trial
	err := l.policyTx(ctx, func(tx *sql.Tx) error {
		var err error
		if t, err = l.lockTrial(ctx, tx, ` AND id = ?`, id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE trials SET sealed_reason = ? WHERE id = ?`, reason, id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE namespaces SET state = ? WHERE trial_id = ? AND state = ?`, StateSealed, id, StateActive); err != nil {
			return err
		}
		t.SealedReason = reason
		e := &evidence.Event{Namespace: t.Namespace, Door: evidence.DoorPlane, Action: evidence.ActionSeal, Outcome: evidence.Accepted, Code: reason}
		if err := l.appendEvent(ctx, txq{tx: tx, s: l.ws}, e, true); err != nil {
			return err
		}
		return l.announce(ctx, tx, changePolicy, t.Namespace)
	})
	return t, err
}

// CloseTrial deletes a trial whole, in one transaction: its grants (so
// they are refused from the commit on), its namespaces with their
// capabilities, index, bodies, learned recipients and idempotency keys.
// With queue (an external store keeps the bodies), the namespaces are
// also queued for that store to purge after the commit (Purges, Purged),
// so that a store that is down now is purged later. Each namespace's trail
// ends with action (evidence.ActionClose or ActionExpire) and is kept (see
// DeleteTrails). It returns the trial and its namespaces as they were.
func (l *DB) CloseTrial(ctx context.Context, trialID int64, action string, queue bool) (Trial, []Namespace, error) {
	var t Trial
	var nss []Namespace
	err := l.policyTx(ctx, func(tx *sql.Tx) error {
		// Locked: a plane closing the same trial at once (two reapers)
		// waits, then finds it gone.
		var err error
		if t, err = l.lockTrial(ctx, tx, ` AND id = ?`, trialID); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, nsSelect+` WHERE trial_id = ?`, trialID)
		if err != nil {
			return err
		}
		if nss, err = scanNamespaces(rows); err != nil {
			return err
		}
		for _, ns := range nss {
			if err := l.closeTrail(ctx, tx, ns.Name, action); err != nil {
				return err
			}
			if err := l.announce(ctx, tx, changePolicy, ns.Name); err != nil {
				return err
			}
			if queue {
				if _, err := tx.ExecContext(ctx, `INSERT INTO purges (tag, namespace) VALUES (?, ?) ON CONFLICT DO NOTHING`, ns.Tag, ns.Name); err != nil {
					return err
				}
			}
			for _, q := range []string{
				`DELETE FROM messages WHERE namespace = ?`,
				`DELETE FROM recipients WHERE namespace = ?`,
				`DELETE FROM idempotency WHERE namespace = ?`,
				`DELETE FROM delayed WHERE namespace = ?`,
				`DELETE FROM opened WHERE namespace = ?`,
				`DELETE FROM flags WHERE namespace = ?`,
				`DELETE FROM bodies WHERE namespace = ?`,
				`DELETE FROM parsed WHERE namespace = ?`,
				`DELETE FROM webhook_cursors WHERE namespace = ?`,
			} {
				if _, err := tx.ExecContext(ctx, q, ns.Name); err != nil {
					return err
				}
			}
		}
		for _, q := range []string{
			`DELETE FROM grants WHERE trial_id = ?`,
			`DELETE FROM netns_doors WHERE trial_id = ?`,
			`DELETE FROM agent_doors WHERE trial_id = ?`,
			`DELETE FROM trial_faults WHERE trial_id = ?`,
			`DELETE FROM webhook_events WHERE trial_id = ?`,
			`DELETE FROM namespaces WHERE trial_id = ?`,
			`DELETE FROM trials WHERE id = ?`,
		} {
			if _, err := tx.ExecContext(ctx, q, trialID); err != nil {
				return err
			}
		}
		return nil
	})
	return t, nss, err
}

// Purges returns namespaces whose bodies an external store still has to
// delete.
func (l *DB) Purges(ctx context.Context) ([]Namespace, error) {
	rows, err := l.read.QueryContext(ctx, `SELECT namespace, tag FROM purges ORDER BY tag LIMIT 1000`)
	return scanAll(rows, err, func(r *sql.Rows, ns *Namespace) error { return r.Scan(&ns.Name, &ns.Tag) })
}

// Purged records that the store has deleted the bodies stored under tag.
func (l *DB) Purged(ctx context.Context, tag string) error {
	return l.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM purges WHERE tag = ?`, tag)
		return err
	})
}

// Grant returns the grant with this digest.
func (l *DB) Grant(ctx context.Context, digest []byte) (Grant, error) {
	g := Grant{Digest: digest}
	var trial sql.NullInt64
	err := l.rs.queryRow(ctx, qGrant, digest).Scan(&g.Role, &trial, &g.Revoked)
	g.TrialID = trial.Int64
	return g, notFound(err)
}

// Trial returns a trial by id.
func (l *DB) Trial(ctx context.Context, id int64) (Trial, error) {
	return l.oneTrial(ctx, qTrial, id)
}

// trialByQuery is the lookup of each kind of credential (every send of a
// shared writer makes one or more).
var trialByQuery = map[Credential]string{
	ByMailAPIToken:    qTrialByMailAPIToken,
	ByBootstrapToken:  qTrialByBootstrapToken,
	ByInboxToken:      qTrialByInboxToken,
	ByWriteCapability: qTrialByWriteCapability,
}

// TrialBy returns the trial that holds the credential whose digest is d.
func (l *DB) TrialBy(ctx context.Context, kind Credential, d []byte) (Trial, error) {
	q := trialByQuery[kind]
	if q == "" || len(d) == 0 {
		return Trial{}, ErrNotFound
	}
	return l.oneTrial(ctx, q, d)
}

// TrialByPort returns this plane's trial that owns an SMTP port.
func (l *DB) TrialByPort(ctx context.Context, port int) (Trial, error) {
	if port <= 0 {
		return Trial{}, ErrNotFound
	}
	return l.oneTrial(ctx, qTrialByPort, l.plane, port)
}

func (l *DB) oneTrial(ctx context.Context, query string, args ...any) (Trial, error) {
	return firstTrial(l.rs.query(ctx, query, args...))
}

// firstTrial is the first trial of a query's rows: ErrNotFound if there
// is none.
func firstTrial(rows *sql.Rows, err error) (Trial, error) {
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

// Trials returns at most limit trials with an id above after, oldest
// first.
func (l *DB) Trials(ctx context.Context, after int64, limit int) ([]Trial, error) {
	rows, err := l.read.QueryContext(ctx, trialSelect+` AND id > ? ORDER BY id LIMIT ?`, after, limit)
	if err != nil {
		return nil, err
	}
	return scanTrials(rows)
}

// Expired returns up to limit trials whose TTL has passed at now.
func (l *DB) Expired(ctx context.Context, now time.Time, limit int) ([]Trial, error) {
	rows, err := l.read.QueryContext(ctx, trialSelect+` AND expires_at IS NOT NULL AND expires_at <= ? ORDER BY expires_at LIMIT ?`, now.UnixMilli(), limit)
	if err != nil {
		return nil, err
	}
	return scanTrials(rows)
}

// SMTPPorts returns the SMTP ports this plane's open trials own.
func (l *DB) SMTPPorts(ctx context.Context) ([]int, error) {
	rows, err := l.read.QueryContext(ctx, `SELECT smtp_port FROM trials WHERE destroyed = 0 AND plane = ? AND smtp_port IS NOT NULL ORDER BY smtp_port`, l.plane)
	return scanAll(rows, err, func(r *sql.Rows, p *int) error { return r.Scan(p) })
}

// trialSelect selects open trials; a caller appends " AND …". Rows marked
// destroyed come only from databases of schema 1, whose destroy kept them.
const trialSelect = `SELECT id, profile, namespace, mail_api_token, bootstrap_token, inbox_token, created_at, expires_at, smtp_port, plane, faults, sealed_reason, webhooks FROM trials WHERE destroyed = 0`

func scanTrials(rows *sql.Rows) ([]Trial, error) {
	defer rows.Close()
	var out []Trial
	for rows.Next() {
		var t Trial
		var created int64
		var expires, port sql.NullInt64
		var plane, faults, sealed, hooks sql.NullString
		if err := rows.Scan(&t.ID, &t.Profile, &t.Namespace, &t.MailAPIToken, &t.BootstrapToken, &t.InboxToken, &created, &expires, &port, &plane, &faults, &sealed, &hooks); err != nil {
			return nil, err
		}
		t.Created = fromMillis(created)
		if expires.Valid {
			t.Expires = fromMillis(expires.Int64)
		}
		if plane.Valid {
			// A port of no plane (a PostgreSQL database of an older build)
			// is served by none: the trial has no port of its own.
			t.SMTPPort = int(port.Int64)
		}
		t.Plane, t.Faults, t.SealedReason, t.Webhooks = plane.String, faults.String, sealed.String, hooks.String
		out = append(out, t)
	}
	return out, rows.Err()
}

// Namespace returns a namespace by name.
func (l *DB) Namespace(ctx context.Context, name string) (Namespace, error) {
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
func (l *DB) Namespaces(ctx context.Context, trialID int64) ([]Namespace, error) {
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

func nsExists(ctx context.Context, tx txq, name string) error {
	var one int
	err := tx.queryRow(ctx, qNsExists, name).Scan(&one)
	switch {
	case err == nil:
		return ErrExists
	case errors.Is(err, sql.ErrNoRows):
		return nil
	}
	return err
}

func insertNamespace(ctx context.Context, tx txq, ns *Namespace) error {
	senders, err := json.Marshal(nonNil(ns.AllowedSenders))
	if err != nil {
		return err
	}
	ns.State, ns.NextSeq = StateActive, 1
	_, err = tx.exec(ctx, qInsertNamespace, ns.Name, ns.TrialID, ns.State, ns.ReadCapability, ns.WriteCapability, ns.BootstrapCapability, string(senders), ns.Tag, now())
	if err != nil {
		return err
	}
	// A name used again (a sidecar's fixed namespace) starts a new trail;
	// the closed trial's kept one goes.
	for _, q := range []string{qDeleteEvents, qDeleteTrails} {
		if _, err := tx.exec(ctx, q, ns.Name); err != nil {
			return err
		}
	}
	return nil
}

func insertGrant(ctx context.Context, tx txq, g Grant) error {
	var trial any
	if g.TrialID != 0 {
		trial = g.TrialID
	}
	_, err := tx.exec(ctx, qInsertGrant, g.Digest, g.Role, trial, now())
	return err
}

// scanAll reads every row of a query (rows, err) into a list, one scan a
// row.
func scanAll[T any](rows *sql.Rows, err error, scan func(*sql.Rows, *T) error) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := scan(rows, &v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func nullMillis(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}

func nullInt(n int) any {
	if n == 0 {
		return nil
	}
	return n
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
