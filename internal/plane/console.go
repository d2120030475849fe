package plane

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/websitebench/mailplane/internal/evidence"
	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/internal/mailindex"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// The operator's console (package console) reads through these: every
// trial and kept trail, one trial's mail and trail, and a wait for the
// next change. They change nothing and answer no secret: rows hold
// counts, messages are the mail as sent, events are the trail's lines.

// ConsoleTrials answers one page of the trials list: open trials newest
// first, then kept trails most recently closed first, filtered.
func (b *Broker) ConsoleTrials(ctx context.Context, req *rpc.ConsoleTrialsRequest) (rpc.ConsoleTrialsResponse, error) {
	limit := req.Limit
	if limit <= 0 || limit > rpc.MaxConsolePage {
		limit = rpc.MaxConsolePage
	}
	out := rpc.ConsoleTrialsResponse{Rows: []rpc.ConsoleTrial{}}
	if req.Offset < 0 || len(req.Recipient) > limits.AddressBytes || len(req.Namespace) > limits.AddressBytes || len(req.Subject) > limits.AddressBytes {
		return out, rpc.Errorf(rpc.CodeBadRequest, "a negative offset, or a filter longer than %d bytes", limits.AddressBytes)
	}
	var err error
	if out.Open, out.Closed, err = b.ledger.ConsoleCount(ctx, ledger.ConsoleFilter{}); err != nil {
		return out, b.storeErr("console count", err)
	}
	f := ledger.ConsoleFilter{Namespace: req.Namespace, Recipient: req.Recipient}
	var rows []ledger.ConsoleRow
	if req.Subject == "" {
		open, closed, err := b.ledger.ConsoleCount(ctx, f)
		if err != nil {
			return out, b.storeErr("console count", err)
		}
		out.Total = open + closed
		if rows, err = b.ledger.ConsolePage(ctx, f, req.Offset, limit); err != nil {
			return out, b.storeErr("console page", err)
		}
	} else {
		// Subjects are not indexed: the rows the other filters keep are
		// read in order, and their mail searched.
		all, err := b.ledger.ConsolePage(ctx, f, 0, 0)
		if err != nil {
			return out, b.storeErr("console page", err)
		}
		if all, err = b.bySubject(ctx, all, strings.ToLower(req.Subject), &out); err != nil {
			return out, err
		}
		out.Total = len(all)
		rows = all[min(req.Offset, len(all)):min(req.Offset+limit, len(all))]
	}
	nss := make([]string, len(rows))
	for i, r := range rows {
		nss[i] = r.Namespace
	}
	trails, err := b.ledger.ConsoleTrails(ctx, nss)
	if err != nil {
		return out, b.storeErr("console trails", err)
	}
	for _, r := range rows {
		out.Rows = append(out.Rows, consoleRow(r, trails[r.Namespace]))
	}
	return out, nil
}

// bySubject keeps the open trials with a message whose subject holds s.
// It reads at most limits.ConsoleSubjectScan messages, the newest
// trials' first, and says so when it stopped.
func (b *Broker) bySubject(ctx context.Context, rows []ledger.ConsoleRow, s string, out *rpc.ConsoleTrialsResponse) ([]ledger.ConsoleRow, error) {
	budget := limits.ConsoleSubjectScan
	kept := rows[:0]
	for _, r := range rows {
		if r.State == ledger.StateClosed || r.Messages == 0 {
			continue // a closed trial's mail is deleted with it
		}
		if budget <= 0 {
			out.SubjectTruncated = true
			break
		}
		hit, used, err := b.subjectIn(ctx, r.Namespace, s, budget)
		if err != nil {
			return nil, err
		}
		budget -= used
		if hit {
			kept = append(kept, r)
		}
	}
	return kept, nil
}

// subjectIn reports whether a message of ns has a subject containing s
// (lower case), reading at most budget messages.
func (b *Broker) subjectIn(ctx context.Context, name, s string, budget int) (hit bool, used int, err error) {
	ns, err := b.ledger.Namespace(ctx, name)
	if errors.Is(err, ledger.ErrNotFound) {
		return false, 0, nil // closed meanwhile
	}
	if err != nil {
		return false, 0, b.storeErr("namespace", err)
	}
	entries, err := b.ledger.Entries(ctx, name, 0)
	if err != nil {
		return false, 0, b.storeErr("entries", err)
	}
	t := target{view: operatorView, ns: ns}
	for _, e := range entries {
		if used == budget {
			return false, used, nil
		}
		used++
		m, err := b.load(ctx, t, e)
		if rpc.CodeOf(err) == rpc.CodeForbidden {
			return false, used, nil // closed meanwhile
		}
		if err != nil {
			return false, used, err
		}
		if strings.Contains(strings.ToLower(m.Subject), s) {
			return true, used, nil
		}
	}
	return false, used, nil
}

// consoleRow describes one row with its trail's counts.
func consoleRow(r ledger.ConsoleRow, s ledger.TrailStats) rpc.ConsoleTrial {
	row := rpc.ConsoleTrial{Namespace: r.Namespace, Profile: r.Profile, State: r.State, Created: r.Created, Messages: r.Messages}
	if !r.Expires.IsZero() {
		row.TTLMillis = r.Expires.Sub(r.Created).Milliseconds()
	}
	row.Events, row.Refusals, row.Faults = s.Events, s.Refused, s.Faults
	var first, last evidence.Event
	json.Unmarshal([]byte(s.First), &first)
	json.Unmarshal([]byte(s.Last), &last)
	if row.Created.IsZero() {
		// A closed trial's row is gone; its trail's first event is its
		// opening.
		row.Created, _ = time.Parse(evidence.TimeFormat, first.Time)
	}
	row.LastActivity, _ = time.Parse(evidence.TimeFormat, last.Time)
	row.LastAction = last.Action
	end := time.Now()
	if !r.Closed.IsZero() {
		end = r.Closed
	}
	if !row.Created.IsZero() {
		row.AgeMillis = end.Sub(row.Created).Milliseconds()
	}
	return row
}

// ConsoleTrial answers one namespace's messages and the newest of its
// trail's events: an open one's, or a closed trial's kept trail.
func (b *Broker) ConsoleTrial(ctx context.Context, req *rpc.ConsoleTrialRequest) (rpc.ConsoleTrialResponse, error) {
	if !ident.ValidNamespace(req.Namespace) {
		return rpc.ConsoleTrialResponse{}, rpc.Errorf(rpc.CodeInvalidNamespace, "invalid namespace")
	}
	out := rpc.ConsoleTrialResponse{Messages: []rpc.ConsoleMessage{}, Events: []json.RawMessage{}}
	r, err := b.consoleRowOf(ctx, req.Namespace)
	if err != nil {
		return out, err
	}
	trails, err := b.ledger.ConsoleTrails(ctx, []string{req.Namespace})
	if err != nil {
		return out, b.storeErr("console trails", err)
	}
	out.Trial = consoleRow(r, trails[req.Namespace])
	if r.State != ledger.StateClosed {
		if out.Messages, err = b.consoleMessages(ctx, req.Namespace, req.MessageID); err != nil {
			return out, err
		}
	}
	if req.MessageID != 0 {
		return out, nil
	}
	if r.State != ledger.StateClosed {
		if t, _, err := b.trialOf(ctx, req.Namespace); err == nil {
			if out.Webhooks, err = b.webhookList(ctx, t); err != nil {
				return out, err
			}
		}
	}
	lines, err := b.ledger.LastEvents(ctx, req.Namespace, rpc.MaxConsoleEvents)
	if err != nil {
		return out, b.storeErr("events", err)
	}
	for _, l := range lines {
		out.Events = append(out.Events, json.RawMessage(l))
	}
	return out, nil
}

// consoleRowOf finds the row of one namespace: an open trial's (current
// or sealed namespace) or a kept trail's.
func (b *Broker) consoleRowOf(ctx context.Context, name string) (ledger.ConsoleRow, error) {
	ns, err := b.ledger.Namespace(ctx, name)
	switch {
	case err == nil:
		t, err := b.ledger.Trial(ctx, ns.TrialID)
		if err != nil && !errors.Is(err, ledger.ErrNotFound) {
			return ledger.ConsoleRow{}, b.storeErr("trial", err)
		}
		return ledger.ConsoleRow{Namespace: name, Profile: t.Profile, State: ns.State, Created: t.Created,
			Expires: t.Expires, Messages: ns.MessageCount}, nil
	case !errors.Is(err, ledger.ErrNotFound):
		return ledger.ConsoleRow{}, b.storeErr("namespace", err)
	}
	at, kept, err := b.ledger.ClosedAt(ctx, name)
	if err != nil {
		return ledger.ConsoleRow{}, b.storeErr("trail", err)
	}
	if !kept {
		return ledger.ConsoleRow{}, rpc.Errorf(rpc.CodeNotFound, "no such trial")
	}
	return ledger.ConsoleRow{Namespace: name, State: ledger.StateClosed, Closed: at}, nil
}

// consoleMessages loads a namespace's messages with their header fields
// and what the evaluator's JSON extracts from them: all of them, or the
// one numbered id.
func (b *Broker) consoleMessages(ctx context.Context, name string, id int64) ([]rpc.ConsoleMessage, error) {
	ns, err := b.ledger.Namespace(ctx, name)
	if errors.Is(err, ledger.ErrNotFound) {
		return []rpc.ConsoleMessage{}, nil // closed meanwhile
	}
	if err != nil {
		return nil, b.storeErr("namespace", err)
	}
	entries, err := b.ledger.Entries(ctx, name, 0)
	if err != nil {
		return nil, b.storeErr("entries", err)
	}
	if id != 0 {
		entries = slices.DeleteFunc(entries, func(e ledger.Entry) bool { return e.Seq != id })
	}
	if len(entries) > maxListMessages {
		entries = entries[len(entries)-maxListMessages:]
	}
	out := make([]rpc.ConsoleMessage, 0, len(entries))
	for _, e := range entries {
		x, err := b.index(ctx, ns, e)
		if errors.Is(err, errGone) {
			continue // purged under this read: its trial was closed
		}
		if err != nil {
			return nil, b.storeErr("get", err)
		}
		out = append(out, consoleMessage(ns.Name, e, x))
	}
	return out, nil
}

func consoleMessage(ns string, e ledger.Entry, x mailindex.Index) rpc.ConsoleMessage {
	m := rpc.ConsoleMessage{Message: rpc.Message{ID: e.Seq, UUID: e.UUID, Namespace: ns, EnvelopeFrom: e.From, FromName: x.FromName,
		Recipients: e.To, Subject: x.Subject, Text: x.Text, HTML: x.HTML, Size: e.Size, Received: e.Received,
		Attachments: make([]rpc.Attachment, 0, len(x.Attachments)), Fault: e.Fault},
		Headers: x.Headers, Codes: x.Found.Codes, Links: x.Found.Links, ActionLink: x.Found.ActionLink}
	for _, a := range x.Attachments {
		a.Checksums = rpc.Checksums{} // the console shows names and sizes
		m.Attachments = append(m.Attachments, a)
	}
	return m
}

// ConsoleWait holds until the console's view changes after req.Version,
// at most req.WaitMillis (bounded by rpc.MaxWait). Without a namespace,
// any trail's change counts (the plane's change count); with one, the
// version is its trail's last seq.
func (b *Broker) ConsoleWait(ctx context.Context, req *rpc.ConsoleWaitRequest) (rpc.ConsoleWaitResponse, error) {
	if req.WaitMillis < 0 {
		return rpc.ConsoleWaitResponse{}, rpc.Errorf(rpc.CodeBadRequest, "wait_ms must not be negative")
	}
	if req.Namespace != "" && !ident.ValidNamespace(req.Namespace) {
		return rpc.ConsoleWaitResponse{}, rpc.Errorf(rpc.CodeInvalidNamespace, "invalid namespace")
	}
	key := anyNamespace
	if req.Namespace != "" {
		key = req.Namespace
		exists, _, err := b.ledger.TrailOf(ctx, req.Namespace)
		if err != nil {
			return rpc.ConsoleWaitResponse{}, b.storeErr("trail", err)
		}
		if !exists {
			return rpc.ConsoleWaitResponse{}, rpc.Errorf(rpc.CodeNotFound, "no such trial")
		}
	}
	var v uint64
	err := waitFor(ctx, &b.trails, key, boundedWait(req.WaitMillis), func() (bool, error) {
		var err error
		v, err = b.consoleVersion(ctx, req.Namespace)
		return v != req.Version, err
	})
	return rpc.ConsoleWaitResponse{Version: v}, err
}

// consoleVersion is the plane's change count, or a namespace's trail's
// last seq.
func (b *Broker) consoleVersion(ctx context.Context, ns string) (uint64, error) {
	if ns == "" {
		return b.trails.version.Load(), nil
	}
	lines, err := b.ledger.LastEvents(ctx, ns, 1)
	if err != nil {
		return 0, b.storeErr("events", err)
	}
	if len(lines) == 0 {
		return 0, nil
	}
	var e struct{ Seq uint64 }
	json.Unmarshal([]byte(lines[0]), &e)
	return e.Seq, nil
}
