package gateway_test

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// waited is an answer to a request that waited, or why there is none.
type waited struct {
	answer
	err error
}

// startWaiting sends a GET in the background; its answer arrives on the
// returned channel.
func startWaiting(url, capability string) <-chan waited {
	ch := make(chan waited, 1)
	go func() {
		ans, err := try(http.MethodGet, url, "Bearer "+capability)
		ch <- waited{answer: ans, err: err}
	}()
	return ch
}

func receive(t *testing.T, ch <-chan waited, within time.Duration) waited {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("waiting request failed: %v", r.err)
		}
		return r
	case <-time.After(within):
		t.Fatalf("no answer within %v", within)
		return waited{}
	}
}

// A waiting request is woken by the send it waits for: held at the plane
// (its parked-waits gauge says so) and unanswered until the send, it
// answers with that message long before its own 30 s wait could end, and
// the plane counts it as woken by a commit. How fast the wake-up is, is a
// figure for make bench ("wait wake-up" in bench/reads.go) and
// BenchmarkWaitWake, not an assertion here.
func TestWaitWakesOnSend(t *testing.T) {
	plane := itest.StartPlane(t)
	id := plane.Trial(t, rpc.ProfileCandidate)
	gw := startGateway(t, plane)
	s := newSender(t, plane, id)
	api := gw.URL + "/api/namespaces/" + id.Namespace + "/messages"
	const rounds = 3
	for i := range rounds {
		ch := startWaiting(api+"/latest?recipient=user@example.com&wait=30s&after="+strconv.Itoa(i), id.ReadCapability)
		plane.WaitParked(t, "mail", 1)
		select {
		case r := <-ch:
			t.Fatalf("round %d: answered before any mail was sent: %d %s", i, r.status, r.body)
		default:
		}
		subject := fmt.Sprintf("wake %d", i)
		s.send(t, []string{"user@example.com"}, subject, "code 4242")
		r := receive(t, ch, itest.Bound)
		if r.status != 200 {
			t.Fatalf("round %d: %d %s", i, r.status, r.body)
		}
		if m := r.json(t); m["subject"] != subject || m["id"] != float64(i+1) {
			t.Fatalf("round %d: woke with %v %v, want %q id %d", i, m["subject"], m["id"], subject, i+1)
		}
		if n := plane.Metric(t, "mailplane_wait_wakeup_seconds_count"); n != float64(i+1) {
			t.Fatalf("round %d: the plane counts %v reads woken by a commit, want %d", i, n, i+1)
		}
	}
}

// A wait that sees no matching mail ends with 404 (latest) or an empty
// list, after the wait and not before; mail to someone else does not end
// it; after= counts only newer messages.
func TestWaitTimeoutAndFilters(t *testing.T) {
	plane := itest.StartPlane(t)
	id := plane.Trial(t, rpc.ProfileCandidate)
	gw := startGateway(t, plane)
	s := newSender(t, plane, id)
	api := gw.URL + "/api/namespaces/" + id.Namespace + "/messages"

	for _, c := range []struct {
		url, want string
		status    int
	}{
		{api + "/latest?wait=300ms", `"message_not_found"`, 404},
		{api + "/latest?wait=0.3", `"message_not_found"`, 404},
		{api + "?wait=300ms", `{"messages":[]}`, 200},
		// With wait, a recipient that has received nothing yet is waited
		// for rather than refused: evaluators start waiting first.
		{api + "?recipient=nobody@example.com&wait=300ms", `{"messages":[]}`, 200},
	} {
		start := time.Now()
		ans := get(t, c.url, id.ReadCapability)
		took := time.Since(start)
		if ans.status != c.status || !(ans.body == c.want || c.status == 404 && ans.json(t)["error"] == "message_not_found") {
			t.Errorf("%s: %d %s, want %d %s", c.url, ans.status, ans.body, c.status, c.want)
		}
		if took < 300*time.Millisecond || took > itest.Bound {
			t.Errorf("%s answered after %v, want after its 300ms", c.url, took)
		}
	}

	s.send(t, []string{"alice@example.com"}, "first", "hello")
	ch := startWaiting(api+"/latest?recipient=bob@example.com&wait=30s", id.ReadCapability)
	list := startWaiting(api+"?after=1&wait=30s", id.ReadCapability)
	plane.WaitParked(t, "mail", 2)
	s.send(t, []string{"alice@example.com"}, "to alice", "not for bob")
	if r := receive(t, list, itest.Bound); r.status != 200 || len(r.json(t)["messages"].([]any)) != 1 {
		t.Fatalf("list after=1: %d %s", r.status, r.body)
	}
	// Alice's mail wakes bob's waiter too: it looks, finds nothing for bob,
	// and sleeps again; had it answered with her mail, the select or the
	// subject checked below would show it.
	plane.WaitParked(t, "mail", 1)
	select {
	case r := <-ch:
		t.Fatalf("bob's waiter woke for alice's mail: %d %s", r.status, r.body)
	default:
	}
	s.send(t, []string{"Bob@Example.com"}, "to bob", "code 5150")
	r := receive(t, ch, itest.Bound)
	if m := r.json(t); r.status != 200 || m["subject"] != "to bob" || m["otp"] != "5150" {
		t.Fatalf("bob's waiter: %d %s", r.status, r.body)
	}
}

// 200 requests wait on 200 namespaces at once; one message to each wakes
// exactly its own waiter with exactly its own message.
func TestWait200Namespaces(t *testing.T) {
	const n = 200
	plane := itest.StartPlane(t)
	gw := startGateway(t, plane)
	ids := make([]rpc.Identity, n)
	for i := range ids {
		ids[i] = plane.Trial(t, rpc.ProfileCandidate)
	}
	waiters := make([]<-chan waited, n)
	for i, id := range ids {
		waiters[i] = startWaiting(gw.URL+"/api/namespaces/"+id.Namespace+"/messages/latest?recipient=user@example.com&wait=30s", id.ReadCapability)
	}
	plane.WaitParked(t, "mail", n)
	for i, w := range waiters {
		select {
		case r := <-w:
			t.Fatalf("waiter %d answered before any mail: %d %s", i, r.status, r.body)
		default:
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() { newSender(t, plane, id).send(t, []string{"user@example.com"}, id.Namespace, "code 9876") })
	}
	wg.Wait()
	for i, w := range waiters {
		r := receive(t, w, itest.Bound)
		if r.status != 200 {
			t.Fatalf("waiter %d: %d %s", i, r.status, r.body)
		}
		if m := r.json(t); m["subject"] != ids[i].Namespace || m["namespace"] != ids[i].Namespace || m["id"] != float64(1) {
			t.Fatalf("waiter %d on %s woke with %v / %v / %v", i, ids[i].Namespace, m["subject"], m["namespace"], m["id"])
		}
	}
	t.Logf("%d sends and %d wake-ups in %v", n, n, time.Since(start))
}

// A wait outlasts the HTTP server's read timeout (10 s, a constant of
// the gateway's server): mail that arrives after 11 s still reaches the
// request that waited for it. The 11 s are the point of the test; it runs
// in parallel with the others.
func TestWaitOutlastsReadTimeout(t *testing.T) {
	t.Parallel()
	plane := itest.StartPlane(t)
	id := plane.Trial(t, rpc.ProfileCandidate)
	gw := startGateway(t, plane)
	ch := startWaiting(gw.URL+"/api/namespaces/"+id.Namespace+"/messages/latest?wait=60s", id.ReadCapability)
	plane.WaitParked(t, "mail", 1)
	time.Sleep(11 * time.Second)
	// Still held at the plane: the gateway did not drop the request.
	if n := plane.Metric(t, `mailplane_waits_parked{on="mail"}`); n != 1 {
		t.Fatalf("after 11s, %v waits parked, want 1", n)
	}
	newSender(t, plane, id).send(t, []string{"user@example.com"}, "late", "code 8080")
	if r := receive(t, ch, itest.Bound); r.status != 200 || r.json(t)["subject"] != "late" {
		t.Fatalf("after 11s: %d %s", r.status, r.body)
	}
}
