package plane

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// TestNetnsDoorsOpenAndClose: trial.open with netns waits for the
// supervisor's report (here a loop answering ports.sync as up's would,
// without binding), answers the doors' addresses, and a refused path
// opens nothing; closing a trial hands its key to the supervisor to close.
// Several opens run at once (for the race detector).
func TestNetnsDoorsOpenAndClose(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := openLedger(t)
	b := NewBroker(l, nil, Quotas{}, zerolog.Nop())
	b.SetAdvertise(Advertise{WriterURL: "http://127.0.0.1:1", InboxURL: "http://127.0.0.1:2", GatewayURL: "http://127.0.0.1:3", SMTPHost: "127.0.0.1", SMTPPort: 4,
		CAFile: "/data/ca.pem", SMTPTLSPort: 5, WriterHTTPSURL: "https://127.0.0.1:6"})

	if _, err := b.OpenTrial(ctx, &rpc.TrialOpenRequest{Netns: "/run/netns/x"}); rpc.CodeOf(err) != rpc.CodeBadRequest {
		t.Fatalf("netns with no supervisor: %v, want %s", err, rpc.CodeBadRequest)
	}
	closed := make(chan string, 16)
	sctx, stop := context.WithCancel(ctx)
	var loop sync.WaitGroup
	loop.Add(1)
	go func() { // the supervisor
		defer loop.Done()
		req := &rpc.PortsSyncRequest{Restore: true}
		next := 20000
		for sctx.Err() == nil {
			req.WaitMillis = 200
			resp, err := b.SyncPorts(sctx, req)
			if err != nil {
				continue
			}
			req = &rpc.PortsSyncRequest{}
			for range resp.Want {
				next++
				req.Add = append(req.Add, next)
			}
			for _, d := range resp.Doors {
				if d.Netns == "/run/netns/missing" {
					d.Error = "no such file"
				} else {
					d.HTTPPort, d.SMTPPort, d.SMTPTLSPort = 8080, 2525, 4650 // the same in every namespace
				}
				req.Doors = append(req.Doors, d)
			}
			for _, k := range resp.CloseDoors {
				closed <- k
				req.DoorsClosed = append(req.DoorsClosed, k)
			}
		}
	}()
	defer func() { stop(); loop.Wait() }()
	itest.Eventually(t, "the supervisor loop's call", itest.Bound, func() bool {
		b.ports.mu.Lock()
		defer b.ports.mu.Unlock()
		return b.ports.supervised()
	})

	for _, bad := range []string{"relative/netns", "/run/netns/../x", "/run/netns/missing"} {
		if _, err := b.OpenTrial(ctx, &rpc.TrialOpenRequest{Netns: bad}); rpc.CodeOf(err) != rpc.CodeBadRequest {
			t.Errorf("netns %q: %v, want %s", bad, err, rpc.CodeBadRequest)
		}
	}
	bundles := make([]rpc.Bundle, 6)
	var wg sync.WaitGroup
	for i := range bundles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bu, err := b.OpenTrial(ctx, &rpc.TrialOpenRequest{Netns: "/run/netns/n" + strconv.Itoa(i)})
			if err != nil {
				t.Errorf("open %d: %v", i, err)
			}
			bundles[i] = bu
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	all, err := b.ListTrials(ctx, &rpc.TrialListRequest{})
	if err != nil || len(all.Trials) != len(bundles) {
		t.Fatalf("%d trials open after %d netns opens and refusals (%v)", len(all.Trials), len(bundles), err)
	}
	for i, bu := range bundles {
		env := bu.CandidateEnvironment
		if bu.Netns != "/run/netns/n"+strconv.Itoa(i) || bu.SMTPPort != 2525 || bu.SMTPTLSPort != 4650 || bu.WriterURL != "http://127.0.0.1:8080" ||
			env["WEBSITEBENCH_SMTP_PORT"] != "2525" || env["WEBSITEBENCH_MAILBOX_BOOTSTRAP_URL"] != "http://127.0.0.1:8080/internal/bootstrap" ||
			// The door's own implicit-TLS port and the stack's CA; no HTTPS door in a namespace.
			env["WEBSITEBENCH_SMTP_TLS_PORT"] != "4650" || env["WEBSITEBENCH_SMTP_CA_FILE"] != "/data/ca.pem" || env["WEBSITEBENCH_MAIL_API_HTTPS_URL"] != "" {
			t.Fatalf("bundle %d: %+v", i, bu)
		}
	}
	ds, err := l.NetnsDoors(ctx)
	if err != nil || len(ds) != len(bundles) {
		t.Fatalf("doors: %d, %v", len(ds), err)
	}
	if err := b.closeTrial(ctx, ds[0].TrialID, "closed"); err != nil {
		t.Fatal(err)
	}
	select {
	case k := <-closed:
		if k != ds[0].Key {
			t.Fatalf("the supervisor was told to close door %q, want the closed trial's", k)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the closed trial's doors were never handed to the supervisor to close")
	}
	if _, err := l.TrialByDoor(ctx, ds[0].Key); err == nil {
		t.Fatal("a closed trial's door key still finds it")
	}
}
