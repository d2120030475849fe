package plane_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/complexity"
	"github.com/websitebench/mailplane/internal/evidence"
	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// exportTrail reads a namespace's whole trail as the operator does.
func exportTrail(t testing.TB, admin *rpc.Client, ns string) []evidence.Event {
	t.Helper()
	var buf bytes.Buffer
	req := &rpc.EventsRequest{Namespace: ns}
	for {
		page, err := admin.Export(ctx(t), req)
		if err != nil {
			t.Fatalf("export: %v", err)
		}
		for _, l := range page.Events {
			buf.Write(l)
			buf.WriteByte('\n')
		}
		if len(page.Events) < rpc.MaxEventPage {
			break
		}
		var last evidence.Event
		json.Unmarshal(page.Events[len(page.Events)-1], &last)
		req.After = last.Seq
	}
	if _, err := evidence.Verify(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatalf("the trail does not verify: %v", err)
	}
	var out []evidence.Event
	sc := bufio.NewScanner(&buf)
	sc.Buffer(nil, evidence.MaxLine)
	for sc.Scan() {
		var e evidence.Event
		json.Unmarshal(sc.Bytes(), &e)
		out = append(out, e)
	}
	return out
}

// TestEvidenceKill9UnderLoad kills the plane with SIGKILL three times
// while eight writers send: afterwards every acknowledged send has its
// accepted event, and the accepted events and the stored messages are the
// same set (an event exists exactly for what was stored: a send the plane
// did not store has none). A send stored whose answer the kill cut off
// is accepted in both; its sender saw an outage and may retry.
func TestEvidenceKill9UnderLoad(t *testing.T) {
	p := itest.StartPlane(t, "--quota-messages", "0", "--quota-bytes", "0")
	id := p.Trial(t, rpc.ProfileCandidate)
	acked := map[string]bool{}
	var mu sync.Mutex
	var outages atomic.Int64
	for round := range 3 {
		w := rpc.NewClient(p.Socket, id.WriterGrant)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					r, err := w.Send(c, &rpc.SendRequest{Via: rpc.ViaSMTP, From: rpc.CandidateSender,
						To: []string{"u@example.com"}, Raw: msg(fmt.Sprintf("r%d g%d i%d", round, g, i), "hello")})
					cancel()
					if err != nil {
						outages.Add(1)
						time.Sleep(5 * time.Millisecond)
						continue
					}
					mu.Lock()
					acked[r.ID] = true
					mu.Unlock()
				}
			}()
		}
		// The kill lands under load: once this round has 40 sends
		// acknowledged, and the writers then see the plane gone.
		mu.Lock()
		from := len(acked)
		mu.Unlock()
		itest.Eventually(t, "40 sends acknowledged", itest.Bound, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(acked) >= from+40
		})
		seen := outages.Load()
		p.Kill()
		itest.Eventually(t, "an outage after the kill", itest.Bound, func() bool { return outages.Load() > seen })
		close(stop)
		wg.Wait()
		w.Close()
		p.Restart(t)
	}
	gw := p.Client(t, p.GatewayGrant(t))
	stored := map[string]bool{}
	for after := int64(0); ; {
		msgs, err := gw.List(ctx(t), &rpc.ReadRequest{Namespace: id.Namespace, Capability: id.ReadCapability, After: after})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			stored[m.UUID] = true
			after = m.ID
		}
	}
	events := map[string]bool{}
	for _, e := range exportTrail(t, p.Admin, id.Namespace) {
		if e.Action == "send" && e.Outcome == evidence.Accepted {
			if events[e.EmailID] {
				t.Errorf("two accepted events for %s", e.EmailID)
			}
			events[e.EmailID] = true
		}
	}
	missing, cut := 0, 0
	for uuid := range acked {
		if !events[uuid] {
			missing++
		}
	}
	for uuid := range events {
		if !stored[uuid] {
			t.Errorf("an accepted event for %s, which is not stored", uuid)
		}
		if !acked[uuid] {
			cut++
		}
	}
	for uuid := range stored {
		if !events[uuid] {
			t.Errorf("message %s is stored without its accepted event", uuid)
		}
	}
	if missing > 0 {
		t.Errorf("%d acknowledged sends have no accepted event", missing)
	}
	if len(acked) < 100 || outages.Load() == 0 {
		t.Fatalf("%d acknowledged, %d outages: the kills did not land under load", len(acked), outages.Load())
	}
	t.Logf("kill -9 ×3: acknowledged %d, accepted events %d, stored %d, stored with the answer cut by the kill %d, outage answers %d",
		len(acked), len(events), len(stored), cut, outages.Load())
}

// TestEvidenceRefusalFlood sends 100,000 refused messages into one trial:
// the trail stays within its budget, says so with a budget event, counts
// every refusal past it in one summary, and the plane's memory stays flat.
func TestEvidenceRefusalFlood(t *testing.T) {
	// The plane under test is built without the race detector; in this
	// process it would only slow the flooding clients (make unit runs the
	// test again without it).
	complexity.SkipUnderRace(t)
	n := 100000
	if testing.Short() {
		n = 5000
	}
	const budget = 1000
	t.Setenv("MAILPLANE_LOG_LEVEL", "warn") // 100,000 refusals are logged at info
	p := itest.StartPlane(t, "--event-budget", strconv.Itoa(budget))
	id := p.Trial(t, rpc.ProfileCandidate)
	pid := p.Cmd.Process.Pid
	flood := func(count int) {
		var wg sync.WaitGroup
		var next atomic.Int64
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w := rpc.NewClient(p.Socket, id.WriterGrant)
				defer w.Close()
				for next.Add(1) <= int64(count) {
					_, err := w.Send(context.Background(), &rpc.SendRequest{Via: rpc.ViaHTTP, Credential: id.MailAPIToken,
						From: "evil@example.com", To: []string{"u@example.com"}, Raw: msg("x", "y")})
					if code(err) != rpc.CodeInvalidEnvelope {
						t.Errorf("refused send: %v", err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	start := time.Now()
	flood(2000) // the trail fills, the plane warms up
	before := rss(t, pid)
	flood(n - 2000)
	took := time.Since(start)
	after := rss(t, pid)
	t.Logf("%d refused sends in %v (%.0f/s); plane RSS %d KiB after 2,000, %d KiB after %d", n, took, float64(n)/took.Seconds(), before, after, n)
	if after > before*3/2+32<<10 {
		t.Errorf("the plane's memory grew from %d KiB to %d KiB", before, after)
	}

	events := exportTrail(t, p.Admin, id.Namespace)
	if len(events) != budget+1 {
		t.Fatalf("%d events in the trail, want the budget %d and one summary", len(events), budget)
	}
	full, summary := events[budget-1], events[budget]
	if full.Action != evidence.ActionBudget || full.Code != evidence.CodeBudgetFull {
		t.Fatalf("event %d is %+v, want the budget event", budget, full)
	}
	refused := 0
	for _, e := range events[:budget-1] {
		if e.Action == "send" && e.Outcome == evidence.Refused && e.Code == rpc.CodeInvalidEnvelope {
			refused++
		}
	}
	if summary.Action != evidence.ActionSummary || int(summary.Counts["send/refused"])+refused != n || summary.Count != summary.Counts["send/refused"] {
		t.Fatalf("summary %+v with %d refusals in the trail; want %d in all", summary, refused, n)
	}
	// An accepted send afterwards is still recorded, past the budget.
	mustSend(t, p.Client(t, id.WriterGrant), "u@example.com", msg("ok", "fine"))
	events = exportTrail(t, p.Admin, id.Namespace)
	if last := events[len(events)-1]; last.Action != "send" || last.Outcome != evidence.Accepted {
		t.Fatalf("the accepted send after the flood: %+v", last)
	}
}

// rss is a process's resident memory in KiB.
func rss(t testing.TB, pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// BenchmarkSendCost measures sends into a running plane (eight senders,
// 512 B) with the plane's own CPU time per send, read from /proc: on a
// shared machine that figure moves less than throughput does. Run it with
// MAILPLANE_BIN set to a build without the trail to see the trail's cost.
func BenchmarkSendCost(b *testing.B) {
	b.Setenv("MAILPLANE_LOG_LEVEL", "warn")
	p := itest.StartPlane(b, "--quota-messages", "0", "--quota-bytes", "0")
	id := p.Trial(b, rpc.ProfileCandidate)
	w := p.Client(b, id.WriterGrant)
	raw := append([]byte("Subject: bench\r\n\r\n"), bytes.Repeat([]byte("abcdefgh"), 64)...)
	cpu := func() time.Duration {
		st, err := os.ReadFile("/proc/" + strconv.Itoa(p.Cmd.Process.Pid) + "/stat")
		if err != nil {
			b.Fatal(err)
		}
		f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+2:]))
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		return time.Duration(ut+stime) * 10 * time.Millisecond // USER_HZ 100
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	before := cpu()
	b.ResetTimer()
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if _, err := w.Send(context.Background(), &rpc.SendRequest{Via: rpc.ViaSMTP, From: rpc.CandidateSender, To: []string{"bench@example.com"}, Raw: raw}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sends/s")
	b.ReportMetric(float64((cpu()-before).Microseconds())/float64(b.N), "plane-cpu-µs/op")
}
