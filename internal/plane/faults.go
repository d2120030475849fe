package plane

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/websitebench/mailplane/internal/faults"
	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Faults on purpose: a trial's schedule (package faults) is part of its
// policy in the ledger, so every door of every plane applies it alike.
// The trial row a send is bound to says whether it has one; only then is
// the send counted and judged, inside the transaction that decides it
// (ledger.Offer.Faults), and the plane's answer tells the writer what to
// do (rpc.SendResponse.Fault). A trial without a schedule pays nothing.

// parseFaults reads a schedule from an admin call: "" for none, or a
// CodeInvalidFaults refusal that names the bad rule.
func parseFaults(raw json.RawMessage) (string, error) {
	if len(raw) == 0 {
		return "", nil
	}
	s, err := faults.Parse(raw)
	if err != nil {
		return "", rpc.Errorf(rpc.CodeInvalidFaults, "%v", err)
	}
	return s.JSON(), nil
}

// SetFaults replaces the schedule of the open trial a namespace belongs
// to; an empty list clears it. Its sends are counted again from 1.
func (b *Broker) SetFaults(ctx context.Context, req *rpc.TrialFaultsRequest) (rpc.Empty, error) {
	if !ident.ValidNamespace(req.Namespace) {
		return rpc.Empty{}, rpc.Errorf(rpc.CodeInvalidNamespace, "invalid namespace")
	}
	if len(req.Faults) == 0 {
		return rpc.Empty{}, rpc.Errorf(rpc.CodeInvalidFaults, "faults: give a list of rules ([] clears the schedule)")
	}
	stored, err := parseFaults(req.Faults)
	if err != nil {
		return rpc.Empty{}, err
	}
	t, _, err := b.trialOf(ctx, req.Namespace)
	if err != nil {
		return rpc.Empty{}, err
	}
	err = b.ledger.SetFaults(ctx, t.ID, t.Namespace, stored)
	if errors.Is(err, ledger.ErrNotFound) {
		return rpc.Empty{}, rpc.Errorf(rpc.CodeNotFound, "the trial of %s is closed", req.Namespace)
	}
	if err != nil {
		return rpc.Empty{}, b.storeErr("faults", err)
	}
	b.lifecycleDone(t.Namespace)
	b.log.Info().Str("namespace", t.Namespace).Bool("cleared", stored == "").Msg("trial fault schedule set")
	return rpc.Empty{}, nil
}

// faultCheck is what a send of trial t through via needs to be judged
// against its schedule: nil when it has none.
func faultCheck(t ledger.Trial, via rpc.Via) *ledger.FaultCheck {
	if t.Faults == "" {
		return nil
	}
	door := faults.SMTP
	if via == rpc.ViaHTTP {
		door = faults.HTTP
	}
	return &ledger.FaultCheck{Trial: t.ID, Door: door}
}

// faultAnswer is the writer's part of an injected fault.
func faultAnswer(in *ledger.Injected) *rpc.Fault {
	if in == nil {
		return nil
	}
	r := in.Rule
	f := &rpc.Fault{Rule: in.Index, Do: r.Do, Status: r.Status, RetryAfter: r.RetryAfter, SMTPCode: r.SMTPCode, Seconds: r.Seconds, Copies: in.Copies}
	if !in.VisibleAt.IsZero() {
		at := in.VisibleAt
		f.VisibleAt = &at
	}
	return f
}

// delayRecheck is how often the plane looks for delayed messages it was
// not told of: another plane's, on a shared database, whose plane went
// away before their time.
const delayRecheck = time.Second

// delayed wakes runDelays when a send was delayed: its time may come
// before the one the runner waits for.
type delayed struct{ kick chan struct{} }

func (d *delayed) wake() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// runDelays shows delayed messages when their time comes, and wakes
// their readers, until ctx ends. Their time is durable in the ledger:
// after a restart the first look finds what is due.
func (b *Broker) runDelays(ctx context.Context) {
	for ctx.Err() == nil {
		wait := delayRecheck
		next, err := b.ledger.NextDelayed(ctx)
		if err != nil && ctx.Err() == nil {
			b.log.Warn().Err(err).Msg("delayed messages unreadable; will retry")
		}
		if !next.IsZero() {
			wait = min(wait, time.Until(next))
		}
		if wait <= 0 {
			b.deliverDue(ctx)
			continue
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-timer.C:
		case <-b.delays.kick:
		}
		timer.Stop()
	}
}

func (b *Broker) deliverDue(ctx context.Context) {
	shown, err := b.ledger.DeliverDue(ctx, time.Now())
	if err != nil {
		if ctx.Err() == nil {
			b.log.Warn().Err(err).Msg("showing delayed messages failed; will retry")
			time.Sleep(delayRecheck / 10) // not a busy loop on a store that is down
		}
		return
	}
	for _, ns := range shown {
		b.wake.notify(ns)
		b.trails.notify(ns)
	}
}
