package plane

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/internal/wbenv"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// Doors inside a candidate's network namespace. A port on the host's
// loopback is reachable by every local process; a port on the loopback of
// the candidate's own network namespace only by the processes in it. So
// for a trial opened with netns, the supervisor (mail-plane up) binds the
// trial's candidate doors there and hands them to the shared writer, and
// plain SMTP on them is the trial's, as in the reference. The plane asks
// for them through ports.sync, as it asks for ports, and knows each
// trial's doors by a key that the writer presents with their messages:
// port numbers repeat across namespaces, keys do not.

const (
	// doorWait bounds how long trial.open waits for the supervisor to
	// bind a trial's doors.
	doorWait = 5 * time.Second
	// maxNetnsPath bounds the netns path trial.open accepts (PATH_MAX).
	maxNetnsPath = 4096
)

// doorQueue is the plane's side of the doors; portPool's mu guards it.
type doorQueue struct {
	wanted  []rpc.NetnsDoor               // answered until the supervisor reports on them
	waiting map[string]chan rpc.NetnsDoor // trial.open calls waiting, by key
	closing []string                      // keys answered until the supervisor acknowledges them
	byTrial map[int64][]string            // open trials' keys, to close their doors with them
}

// validNetns reports whether path may name a namespace file: absolute,
// clean and bounded. Whether it is one, the supervisor finds out.
func validNetns(path string) bool {
	return len(path) <= maxNetnsPath && filepath.IsAbs(path) && filepath.Clean(path) == path && !strings.ContainsRune(path, 0)
}

// doorKey mints a door's key: "mpd_" and 26 base32 characters, a shape
// the redaction point knows (it opens the trial's plain SMTP to a shared
// writer that presents it).
func doorKey() string { return "mpd_" + rand.Text() }

// openDoors has the supervisor bind a new trial's doors in netns and
// answers them with their ports and the namespace's identity. A path that is no network namespace is
// refused (4xx) and leaves nothing bound; a supervisor that does not
// answer in time is an outage.
func (p *portPool) openDoors(ctx context.Context, netns string) (rpc.NetnsDoor, error) {
	return p.bindDoors(ctx, "netns", rpc.NetnsDoor{Key: doorKey(), Netns: netns})
}

// openAgentDoor has the supervisor bind the agent's IMAP door of trial ns
// in netns and hand it to the inbox, as openDoors does the candidate's.
// Its key is ns: the inbox takes that trial's token only there.
func (p *portPool) openAgentDoor(ctx context.Context, netns, ns string) (rpc.NetnsDoor, error) {
	return p.bindDoors(ctx, "agent_netns", rpc.NetnsDoor{Key: ns, Netns: netns, Namespace: ns, Agent: true})
}

// bindDoors is openDoors and openAgentDoor: field names the request's
// field in errors.
func (p *portPool) bindDoors(ctx context.Context, field string, want rpc.NetnsDoor) (rpc.NetnsDoor, error) {
	netns, key := want.Netns, want.Key
	if !validNetns(netns) {
		return rpc.NetnsDoor{}, rpc.Errorf(rpc.CodeBadRequest, "%s must be the absolute, clean path of a network namespace file", field)
	}
	ch := make(chan rpc.NetnsDoor, 1)
	p.mu.Lock()
	if !p.supervised() {
		p.mu.Unlock()
		return rpc.NetnsDoor{}, rpc.Errorf(rpc.CodeBadRequest, "no supervisor binds doors in network namespaces here: open %s trials on mail-plane up", field)
	}
	if p.doors.waiting == nil {
		p.doors.waiting = map[string]chan rpc.NetnsDoor{}
	}
	p.doors.waiting[key] = ch
	p.doors.wanted = append(p.doors.wanted, want)
	p.signal()
	p.mu.Unlock()
	timer := time.NewTimer(doorWait)
	defer timer.Stop()
	var err error
	select {
	case d := <-ch:
		if d.Error != "" {
			return d, rpc.Errorf(rpc.CodeBadRequest, "%s %s: %s", field, netns, d.Error)
		}
		return d, nil
	case <-timer.C:
		err = rpc.Errorf(rpc.CodeStoreUnavailable, "the supervisor did not bind the trial's doors in time")
	case <-ctx.Done():
		err = rpc.Errorf(rpc.CodeDeadlineExceeded, "the call ended while the trial's doors were bound")
	}
	// Whatever the supervisor bound of it is closed again (a key it does
	// not hold, the writer ignores).
	p.mu.Lock()
	delete(p.doors.waiting, key)
	p.doors.wanted = slices.DeleteFunc(p.doors.wanted, func(d rpc.NetnsDoor) bool { return d.Key == key })
	p.doors.closing = append(p.doors.closing, key)
	p.signal()
	p.mu.Unlock()
	return rpc.NetnsDoor{}, err
}

// doorsOpened records that trial id owns the doors of key.
func (p *portPool) doorsOpened(id int64, key string) {
	p.mu.Lock()
	if p.doors.byTrial == nil {
		p.doors.byTrial = map[int64][]string{}
	}
	p.doors.byTrial[id] = append(p.doors.byTrial[id], key)
	p.mu.Unlock()
}

// closeDoors queues the doors of key (bound for a trial that was not
// created) or of trial id's (closed) for the supervisor to close.
func (p *portPool) closeDoors(id int64, key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := []string{key}
	if key == "" {
		keys = p.doors.byTrial[id]
		delete(p.doors.byTrial, id)
	}
	if len(keys) > 0 {
		p.doors.closing = append(p.doors.closing, keys...)
		p.signal()
	}
}

// doorWork reports whether the supervisor has doors to bind or close;
// the caller holds mu.
func (p *portPool) doorWork() bool { return len(p.doors.wanted) > 0 || len(p.doors.closing) > 0 }

// syncDoors is SyncPorts' part for doors, under mu: it hands waiting
// trial.open calls the supervisor's reports and answers those nobody
// waits for (a restored trial's, or a call that gave up), and forgets the
// doors it reported on and the keys whose doors it closed.
func (p *portPool) syncDoors(req *rpc.PortsSyncRequest) (unclaimed []rpc.NetnsDoor) {
	p.doors.closing = slices.DeleteFunc(p.doors.closing, func(k string) bool { return slices.Contains(req.DoorsClosed, k) })
	p.doors.wanted = slices.DeleteFunc(p.doors.wanted, func(w rpc.NetnsDoor) bool {
		return slices.ContainsFunc(req.Doors, func(d rpc.NetnsDoor) bool { return d.Key == w.Key })
	})
	for _, d := range req.Doors {
		if ch, ok := p.doors.waiting[d.Key]; ok {
			delete(p.doors.waiting, d.Key)
			ch <- d
			continue
		}
		unclaimed = append(unclaimed, d)
	}
	return unclaimed
}

// answerDoors adds the supervisor's door work to resp, under mu. Like
// released ports, wanted doors are answered to every call until the
// supervisor reports on them, so that a stray ports.sync cannot take them
// away from it.
func (p *portPool) answerDoors(resp *rpc.PortsSyncResponse) {
	resp.Doors = append(resp.Doors, p.doors.wanted...)
	resp.CloseDoors = slices.Clone(p.doors.closing)
}

// restoreDoors answers a new supervisor the doors open trials own, at
// their ports, to bind again inside their namespaces.
func (b *Broker) restoreDoors(ctx context.Context) ([]rpc.NetnsDoor, error) {
	ds, err := b.ledger.NetnsDoors(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]rpc.NetnsDoor, 0, len(ds))
	for _, d := range ds {
		b.ports.doorsOpened(d.TrialID, d.Key)
		out = append(out, rpc.NetnsDoor{Key: d.Key, Netns: d.Netns, Namespace: d.Namespace,
			HTTPPort: d.HTTPPort, SMTPPort: d.SMTPPort, SMTPTLSPort: d.SMTPTLSPort, NetnsDev: d.Dev, NetnsIno: d.Ino,
			Agent: d.Agent, IMAPPort: d.IMAPPort})
	}
	return out, nil
}

// unservedDoors seals the trials whose doors the supervisor reported it
// could not bind again and no trial.open waits for (a restored trial's):
// a candidate still configured with them would reach whoever holds them
// now, or nothing. The log says why, with the supervisor's words.
func (b *Broker) unservedDoors(ctx context.Context, ds []rpc.NetnsDoor) error {
	for _, d := range ds {
		if d.Error == "" {
			continue
		}
		if d.Agent {
			// The agent reads through the host's ports still; nothing of
			// the trial's mail can go astray, so the trial goes on.
			b.log.Error().Str("namespace", d.Namespace).Str("netns", d.Netns).Str("error", d.Error).
				Msg("the agent's IMAP door in its network namespace is not served")
			continue
		}
		reason := cmp.Or(d.Reason, rpc.SealDoorsUnbound)
		t, err := b.ledger.TrialByDoor(ctx, d.Key)
		if errors.Is(err, ledger.ErrNotFound) {
			continue
		}
		if err != nil {
			return b.storeErr("doors", err)
		}
		if err := b.sealFor(ctx, t.ID, reason); err != nil {
			return err
		}
		b.log.Error().Str("namespace", t.Namespace).Str("netns", d.Netns).Str("error", d.Error).Str("reason", reason).
			Msg("a trial's doors in its network namespace are not served: the trial is sealed and takes no more mail")
	}
	return nil
}

// ledgerDoor is the ledger's row of a door the supervisor bound.
func ledgerDoor(d rpc.NetnsDoor) *ledger.NetnsDoor {
	return &ledger.NetnsDoor{Key: d.Key, Netns: d.Netns, HTTPPort: d.HTTPPort, SMTPPort: d.SMTPPort, SMTPTLSPort: d.SMTPTLSPort,
		Dev: d.NetnsDev, Ino: d.NetnsIno, Agent: d.Agent, IMAPPort: d.IMAPPort}
}

// doorBundle is a netns trial's bundle: the candidate's addresses are on
// its namespace's loopback; the agent's and evaluator's are the stack's.
func (b *Broker) doorBundle(id rpc.Identity, d *ledger.NetnsDoor) rpc.Bundle {
	a := b.advertise
	writer := "http://" + net.JoinHostPort(rpc.NetnsDoorHost, strconv.Itoa(d.HTTPPort))
	p := b.providers(writer, id)
	bu := rpc.Bundle{
		Namespace:            id.Namespace,
		CandidateEnvironment: withWebhookKeys(wbenv.Candidate(writer, rpc.NetnsDoorHost, d.SMTPPort, id.MailAPIToken, id.BootstrapToken), p),
		InboxURL:             a.InboxURL + "/inbox/" + id.InboxToken,
		InboxMCPURL:          a.InboxURL + "/mcp/" + id.InboxToken,
		APIURL:               a.GatewayURL,
		ReadCapability:       id.ReadCapability,
		SMTPPort:             d.SMTPPort,
		WriterURL:            writer,
		SMTPTLSPort:          d.SMTPTLSPort,
		Netns:                d.Netns,
		Providers:            p,
		InboxIMAP:            a.inboxIMAP(id), // the agent's, at the stack's inbox
	}
	if d.SMTPTLSPort > 0 {
		bu.CAFile = a.CAFile
		wbenv.WithTLS(bu.CandidateEnvironment, a.CAFile, d.SMTPTLSPort, "")
	}
	return bu
}
