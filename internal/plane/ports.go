package plane

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Per-trial SMTP ports. A plain SMTP client is told apart by the port it
// connects to (docs/reference.md §9.1: each trial's WEBSITEBENCH_SMTP_PORT is its
// own). The plane has no network, and the shared writer never binds: a
// supervisor (mail-plane up) binds ports, passes them to the writer, and
// hands their numbers to the plane through ports.sync. The plane keeps a
// few spare, gives one to each candidate trial it opens, and tells the
// supervisor to close a closed trial's port. Without a supervisor, trials
// have no port of their own: their clients authenticate on the shared
// port.

// Pool sizes: the supervisor keeps spareTarget ports ready, so that a
// burst of opens does not wait for a bind; an open waits at most takeWait
// for a port when the pool is dry. The supervisor is called back only once
// the pool is down to spareLow, and then binds the rest at once: one
// round (its call, the writer's listeners, the plane's check of the new
// ports) for spareTarget-spareLow opens, not one for each open, run
// beside the very open that took the port.
const (
	spareTarget = 32
	spareLow    = spareTarget / 2
	takeWait    = 2 * time.Second
	// supervisedFor is how long after its last answer a supervisor still
	// counts as there: it calls again at once, so this only covers the
	// gap between two calls, and one admin's stray ports.sync does not
	// make a plane without a supervisor wait for ports.
	supervisedFor = 5 * time.Second
)

type portPool struct {
	mu    sync.Mutex
	doors doorQueue // doors.go
	spare []int
	// released are closed trials' ports, answered to every ports.sync
	// until one acknowledges having closed them (Closed), so that no
	// caller can take them away from the supervisor.
	released []int
	lastSeen time.Time     // of the supervisor's last answer; zero: never
	syncing  int           // supervisor calls in flight
	changed  chan struct{} // closed and replaced when spare or released changes
}

func newPortPool() portPool { return portPool{changed: make(chan struct{})} }

// signal wakes whoever waits on the pool; the caller holds mu.
func (p *portPool) signal() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// supervised reports whether a supervisor keeps ports; the caller holds mu.
func (p *portPool) supervised() bool {
	return p.syncing > 0 || (!p.lastSeen.IsZero() && time.Since(p.lastSeen) < supervisedFor)
}

// take hands out a spare port: 0 on a plane with no supervisor, an outage
// when the supervisor does not keep up.
func (p *portPool) take(ctx context.Context) (int, error) {
	deadline := time.NewTimer(takeWait)
	defer deadline.Stop()
	p.mu.Lock()
	for {
		if !p.supervised() {
			p.mu.Unlock()
			return 0, nil
		}
		if n := len(p.spare); n > 0 {
			port := p.spare[n-1]
			p.spare = p.spare[:n-1]
			p.signal() // the supervisor may want to refill
			p.mu.Unlock()
			return port, nil
		}
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			return 0, rpc.Errorf(rpc.CodeStoreUnavailable, "no SMTP port is ready for a new trial")
		case <-ctx.Done():
			return 0, rpc.Errorf(rpc.CodeDeadlineExceeded, "the call ended while waiting for an SMTP port")
		}
		p.mu.Lock()
	}
}

// giveBack returns a port taken for a trial that was not created.
func (p *portPool) giveBack(port int) {
	if port == 0 {
		return
	}
	p.mu.Lock()
	p.spare = append(p.spare, port)
	p.signal()
	p.mu.Unlock()
}

// release queues a closed trial's port for the supervisor to close.
func (p *portPool) release(port int) {
	if port == 0 {
		return
	}
	p.mu.Lock()
	p.released = append(p.released, port)
	p.signal()
	p.mu.Unlock()
}

// SyncPorts is one turn of the supervisor's loop: it takes the ports the
// supervisor added and those it closed, moves the trials whose ports it
// could not bind again (Unbound) to ports it added or seals them, and answers, as soon
// as there is any, its next work: how many ports to bind, which to close,
// and on its first call (Restore) which ports this plane's open trials
// already own.
func (b *Broker) SyncPorts(ctx context.Context, req *rpc.PortsSyncRequest) (rpc.PortsSyncResponse, error) {
	var resp rpc.PortsSyncResponse
	if req.Restore {
		ports, err := b.ledger.SMTPPorts(ctx)
		if err != nil {
			return resp, b.storeErr("ports", err)
		}
		resp.Assigned = ports
		if resp.Doors, err = b.restoreDoors(ctx); err != nil {
			return resp, b.storeErr("doors", err)
		}
	}
	owned, err := b.ownedOf(ctx, req.Add)
	if err != nil {
		return resp, err
	}
	p := &b.ports
	p.mu.Lock()
	p.released = slices.DeleteFunc(p.released, func(port int) bool { return slices.Contains(req.Closed, port) })
	unclaimed := p.syncDoors(req)
	for _, port := range req.Add {
		if slices.Contains(owned, port) {
			// Never a spare: it is an open trial's (the unique index would
			// refuse the trial that took it anyway).
			b.log.Warn().Int("port", port).Msg("ports.sync: an open trial owns this port; not kept as a spare")
			continue
		}
		if port > 0 && port < 1<<16 && !slices.Contains(p.spare, port) {
			p.spare = append(p.spare, port)
		}
	}
	if len(req.Add) > 0 {
		p.signal()
	}
	p.mu.Unlock()
	// Seals and moves write to the ledger, outside the pool's lock, and
	// are done before the answer: the supervisor reports ready only after
	// it.
	if err := b.unservedDoors(ctx, unclaimed); err != nil {
		return resp, err
	}
	if err := b.takenPorts(ctx, req.Unbound, req.MoveTaken); err != nil {
		return resp, err
	}
	p.mu.Lock()
	p.syncing++
	deadline := time.Now().Add(min(time.Duration(req.WaitMillis)*time.Millisecond, rpc.MaxWait))
	for {
		if len(p.spare) <= spareLow || len(p.released) > 0 || resp.Assigned != nil || p.doorWork() || !time.Now().Before(deadline) || ctx.Err() != nil {
			break
		}
		ch := p.changed
		p.mu.Unlock()
		timer := time.NewTimer(time.Until(deadline))
		select {
		case <-ch:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
		p.mu.Lock()
	}
	resp.Release = slices.Clone(p.released)
	p.answerDoors(&resp)
	resp.Want = max(0, spareTarget-len(p.spare))
	p.syncing--
	p.lastSeen = time.Now()
	p.mu.Unlock()
	return resp, nil
}

// ownedOf returns the ports of ports that an open trial of this plane
// owns.
func (b *Broker) ownedOf(ctx context.Context, ports []int) ([]int, error) {
	var owned []int
	for _, port := range ports {
		_, err := b.ledger.TrialByPort(ctx, port)
		switch {
		case err == nil:
			owned = append(owned, port)
		case !errors.Is(err, ledger.ErrNotFound):
			return nil, b.storeErr("ports", err)
		}
	}
	return owned, nil
}

// takenPorts deals with each trial whose port the supervisor could not
// bind again (another process holds it): the trial is never advertised on
// a port its writer does not serve, and a candidate still configured with
// the old port would hand its credentials to that process. So the trial
// is sealed (rpc.SealPortTaken), or, with move (up --move-taken-ports),
// moved to a spare port. A port that no open trial of this plane owns any
// more is skipped.
func (b *Broker) takenPorts(ctx context.Context, unbound []int, move bool) error {
	for _, from := range unbound {
		if !move {
			if err := b.sealTaken(ctx, from); err != nil {
				return err
			}
			continue
		}
		to, ok := b.ports.pop()
		if !ok {
			b.log.Error().Int("port", from).Msg("a trial's SMTP port is taken and no spare port is bound to move it to")
			return rpc.Errorf(rpc.CodeStoreUnavailable, "SMTP port %d is taken and no spare port is ready to move its trial to", from)
		}
		t, err := b.ledger.MovePort(ctx, from, to)
		if errors.Is(err, ledger.ErrNotFound) {
			b.ports.giveBack(to)
			continue
		}
		if err != nil {
			b.ports.giveBack(to)
			return b.storeErr("move port", err)
		}
		b.trails.notify(t.Namespace)
		b.log.Warn().Str("namespace", t.Namespace).Int("old_port", from).Int("new_port", to).
			Msg("a trial's SMTP port is taken by another process: the trial moved to a new port (--move-taken-ports)")
	}
	return nil
}

// sealTaken seals the open trial that owns port, which another process
// holds.
func (b *Broker) sealTaken(ctx context.Context, port int) error {
	t, err := b.ledger.TrialByPort(ctx, port)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil
	}
	if err != nil {
		return b.storeErr("ports", err)
	}
	if err := b.sealFor(ctx, t.ID, rpc.SealPortTaken); err != nil {
		return err
	}
	b.log.Error().Str("namespace", t.Namespace).Int("port", port).Str("reason", rpc.SealPortTaken).
		Msg("a trial's SMTP port is taken by another process: the trial is sealed and takes no more mail (up --move-taken-ports moves it instead)")
	return nil
}

// sealFor seals trial id for reason (rpc.Seal…): no door takes its mail
// any more, and readers of its trail wake to the seal.
func (b *Broker) sealFor(ctx context.Context, id int64, reason string) error {
	t, err := b.ledger.SealTrial(ctx, id, reason)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil // closed meanwhile
	}
	if err != nil {
		return b.storeErr("seal", err)
	}
	b.lifecycleDone(t.Namespace)
	return nil
}

// pop takes a spare port without waiting.
func (p *portPool) pop() (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.spare)
	if n == 0 {
		return 0, false
	}
	port := p.spare[n-1]
	p.spare = p.spare[:n-1]
	p.signal()
	return port, true
}
