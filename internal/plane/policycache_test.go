package plane_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// TestPolicyCacheRace races rotate, seal and close against sends and
// reads that keep the plane's policy caches warm (the grant cache and the
// cache of bindings): an answer given after a change has been answered
// must reflect it. After a rotation every send lands in the new
// namespace; after a seal every send is refused as sealed; after a close
// every call is refused; no send ever lands in another trial's namespace,
// and nothing is answered as an outage.
func TestPolicyCacheRace(t *testing.T) {
	// No quota: how many sends fit in a phase is the machine's speed.
	w := newWorld(t, "--quota-messages", "0", "--quota-bytes", "0")
	sharedWriter := w.plane.Client(t, w.plane.Grant(t, rpc.RoleWriter))
	type change struct {
		begun, at time.Time // the change's call, sent and answered
		ns        string    // the namespace a send must land in after it ("" after a seal or close)
		code      string    // the refusal a send gets after it
	}
	type trial struct {
		id      rpc.Identity
		writer  *rpc.Client
		mu      sync.Mutex
		changes []change
		owned   map[string]bool
	}
	var trials []*trial
	for range 4 {
		id := w.plane.Trial(t, rpc.ProfileCandidate)
		trials = append(trials, &trial{id: id, writer: w.plane.Client(t, id.WriterGrant), owned: map[string]bool{id.Namespace: true}})
	}
	type result struct {
		started, ended time.Time
		resp           rpc.SendResponse
		err            error
		read           bool
	}
	var mu sync.Mutex
	results := map[*trial][]result{}
	var lastStart []time.Time // by caller: when its last answered call started
	stop := make(chan struct{})
	var running sync.WaitGroup
	for _, tr := range trials {
		calls := []func() (rpc.SendResponse, error, bool){
			func() (rpc.SendResponse, error, bool) {
				r, err := send(t, tr.writer, "user@example.com", msg("race", "x"))
				return r, err, false
			},
			func() (rpc.SendResponse, error, bool) {
				r, err := sharedWriter.Send(ctx(t), &rpc.SendRequest{Via: rpc.ViaHTTP, Credential: tr.id.MailAPIToken,
					From: rpc.CandidateSender, To: []string{"u@example.com"}, Raw: msg("race", "x")})
				return r, err, false
			},
			func() (rpc.SendResponse, error, bool) {
				_, err := w.gateway.List(ctx(t), &rpc.ReadRequest{Namespace: tr.id.Namespace, Capability: tr.id.ReadCapability})
				return rpc.SendResponse{}, err, true
			},
		}
		for _, call := range calls {
			mu.Lock() // the callers already running read lastStart
			caller := len(lastStart)
			lastStart = append(lastStart, time.Time{})
			mu.Unlock()
			running.Add(1)
			go func() {
				defer running.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					start := time.Now()
					r, err, read := call()
					mu.Lock()
					results[tr] = append(results[tr], result{start, time.Now(), r, err, read})
					lastStart[caller] = start
					mu.Unlock()
				}
			}()
		}
	}
	// Each phase lasts until every caller has had a call answered that
	// started after the phase's changes were: then each phase counts at
	// least one call per caller, however slow the machine.
	pause := func() {
		since := time.Now()
		itest.Eventually(t, "a call by every caller", itest.Bound, func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, at := range lastStart {
				if !at.After(since) {
					return false
				}
			}
			return true
		})
	}
	pause()
	for _, tr := range trials {
		begun := time.Now()
		rot, err := w.plane.Admin.TrialRotate(ctx(t), &rpc.TrialRotateRequest{Namespace: tr.id.Namespace})
		if err != nil {
			t.Fatal(err)
		}
		tr.mu.Lock()
		tr.changes = append(tr.changes, change{begun: begun, at: time.Now(), ns: rot.Namespace})
		tr.owned[rot.Namespace] = true
		tr.mu.Unlock()
	}
	pause()
	for _, tr := range trials {
		cur, begun := tr.changes[0].ns, time.Now()
		if err := w.plane.Admin.TrialSeal(ctx(t), cur); err != nil {
			t.Fatal(err)
		}
		tr.changes = append(tr.changes, change{begun: begun, at: time.Now(), code: rpc.CodeSealed})
	}
	pause()
	for _, tr := range trials {
		begun := time.Now()
		if err := w.plane.Admin.TrialClose(ctx(t), tr.changes[0].ns); err != nil {
			t.Fatal(err)
		}
		tr.changes = append(tr.changes, change{begun: begun, at: time.Now(), code: "closed"})
	}
	pause()
	close(stop)
	running.Wait()

	counted := map[string]int{}
	for tr, rs := range results {
		for _, r := range rs {
			if rpc.IsOutage(r.err) {
				t.Fatalf("outage: %v", r.err)
			}
			if r.err == nil && !r.read && !tr.owned[r.resp.Namespace] {
				t.Fatalf("a send of trial %s landed in namespace %s", tr.id.Namespace, r.resp.Namespace)
			}
			// A call is judged by the last change answered before it
			// started, unless the next change began before it ended.
			var last *change
			overlaps := false
			for i := range tr.changes {
				if r.started.After(tr.changes[i].at) {
					last = &tr.changes[i]
				} else if r.ended.After(tr.changes[i].begun) {
					overlaps = true
					break
				}
			}
			if overlaps {
				continue
			}
			if last == nil {
				counted["before"]++
				continue
			}
			switch {
			case last.code == "closed":
				if r.err == nil {
					t.Fatalf("a call started %v after its trial's close succeeded", r.started.Sub(last.at))
				}
				counted["after close"]++
			case r.read:
				// The first namespace's reads go on until the close.
				if r.err != nil {
					t.Fatalf("a read before the close: %v", r.err)
				}
			case last.code == rpc.CodeSealed:
				if code(r.err) != rpc.CodeSealed {
					t.Fatalf("a send started %v after the seal: %v, %+v", r.started.Sub(last.at), r.err, r.resp)
				}
				counted["after seal"]++
			default:
				if r.err != nil || r.resp.Namespace != last.ns {
					t.Fatalf("a send started %v after the rotation to %s: %v, %+v", r.started.Sub(last.at), last.ns, r.err, r.resp)
				}
				counted["after rotation"]++
			}
		}
	}
	for _, k := range []string{"before", "after rotation", "after seal", "after close"} {
		if counted[k] < len(trials) {
			t.Fatalf("too few calls %s: %v", k, counted)
		}
	}
	t.Log(fmt.Sprint(counted))
}
