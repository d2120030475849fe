package plane_test

import (
	"slices"
	"testing"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// TestSparePortsNeverOwned: a port an open trial owns is never handed out
// again, whoever offers it as a spare (a supervisor's ports.sync, before
// or after a restart of the plane); once the trial is closed and its
// port's listener closed, the port may serve a new trial.
func TestSparePortsNeverOwned(t *testing.T) {
	p := itest.StartPlane(t)
	admin := p.Admin
	const owned, spare, later = 41001, 41002, 41003
	sync := func(req *rpc.PortsSyncRequest) rpc.PortsSyncResponse {
		t.Helper()
		r, err := admin.PortsSync(ctx(t), req)
		if err != nil {
			t.Fatalf("ports.sync %+v: %v", req, err)
		}
		return r
	}
	open := func() (rpc.Identity, int, error) {
		id, err := admin.TrialCreate(ctx(t), &rpc.TrialCreateRequest{Profile: rpc.ProfileCandidate})
		if err != nil {
			return id, 0, err
		}
		info, err := admin.TrialInfo(ctx(t), id.Namespace)
		if err != nil {
			t.Fatalf("trial.info: %v", err)
		}
		return id, info.SMTPPort, nil
	}
	sync(&rpc.PortsSyncRequest{Add: []int{owned}})
	first, port, err := open()
	if err != nil || port != owned {
		t.Fatalf("the first trial: port %d, %v; want %d", port, err, owned)
	}

	// Offered again, with a free one: only the free one is handed out;
	// then there is none (an outage, never the owned port).
	sync(&rpc.PortsSyncRequest{Add: []int{owned, spare}})
	if _, port, err := open(); err != nil || port != spare {
		t.Fatalf("the second trial: port %d, %v; want %d", port, err, spare)
	}
	if _, port, err := open(); code(err) != rpc.CodeStoreUnavailable {
		t.Fatalf("a third trial with only an owned port offered: port %d, %v; want store_unavailable", port, err)
	}

	// The same after the plane restarts: its first ports.sync restores
	// the owned ports, and they are not spares.
	p.Stop(t)
	p.Restart(t)
	if r := sync(&rpc.PortsSyncRequest{Restore: true}); !slices.Equal(r.Assigned, []int{owned, spare}) {
		t.Fatalf("restored ports %v; want %v", r.Assigned, []int{owned, spare})
	}
	sync(&rpc.PortsSyncRequest{Add: []int{spare, owned, later}})
	if _, port, err := open(); err != nil || port != later {
		t.Fatalf("after the restart: port %d, %v; want %d", port, err, later)
	}
	if _, port, err := open(); code(err) != rpc.CodeStoreUnavailable {
		t.Fatalf("after the restart, with only owned ports offered: port %d, %v; want store_unavailable", port, err)
	}

	// Closed, released and its listener closed: the port is free again.
	if err := admin.TrialClose(ctx(t), first.Namespace); err != nil {
		t.Fatal(err)
	}
	if r := sync(&rpc.PortsSyncRequest{}); !slices.Contains(r.Release, owned) {
		t.Fatalf("release after the close: %v; want %d", r.Release, owned)
	}
	sync(&rpc.PortsSyncRequest{Closed: []int{owned}, Add: []int{owned}})
	if _, port, err := open(); err != nil || port != owned {
		t.Fatalf("a trial after the owner closed: port %d, %v; want %d", port, err, owned)
	}
}
