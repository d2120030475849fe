package gateway_test

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// timed is an answer and when it arrived.
type timed struct {
	answer
	err error
	at  time.Time
}

// startWaiting sends a GET in the background; its answer arrives on the
// returned channel.
func startWaiting(url, capability string) <-chan timed {
	ch := make(chan timed, 1)
	go func() {
		ans, err := try(http.MethodGet, url, "Bearer "+capability)
		ch <- timed{answer: ans, err: err, at: time.Now()}
	}()
	return ch
}

func receive(t *testing.T, ch <-chan timed, within time.Duration) timed {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("waiting request failed: %v", r.err)
		}
		return r
	case <-time.After(within):
		t.Fatalf("no answer within %v", within)
		return timed{}
	}
}

// parkTime is how long a test gives a waiting request to reach the plane
// and park there before mail is sent.
const parkTime = 300 * time.Millisecond

// A waiting request answers within 50 ms of the send being acknowledged:
// the plane wakes it on commit; nothing polls.
func TestWaitWakesWithin50ms(t *testing.T) {
	plane := itest.StartPlane(t)
	id := plane.Trial(t, rpc.ProfileCandidate)
	gw := startGateway(t, plane)
	s := newSender(t, plane, id)
	api := gw.URL + "/api/namespaces/" + id.Namespace + "/messages"
	const rounds = 5
	var lat []time.Duration
	for i := range rounds {
		ch := startWaiting(api+"/latest?recipient=user@example.com&wait=10s&after="+strconv.Itoa(i), id.ReadCapability)
		time.Sleep(parkTime)
		select {
		case r := <-ch:
			t.Fatalf("round %d: answered before any mail was sent: %d %s", i, r.status, r.body)
		default:
		}
		subject := fmt.Sprintf("wake %d", i)
		s.send(t, []string{"user@example.com"}, subject, "code 4242")
		acked := time.Now()
		r := receive(t, ch, 5*time.Second)
		if r.status != 200 {
			t.Fatalf("round %d: %d %s", i, r.status, r.body)
		}
		if m := r.json(t); m["subject"] != subject || m["id"] != float64(i+1) {
			t.Fatalf("round %d: woke with %v %v, want %q id %d", i, m["subject"], m["id"], subject, i+1)
		}
		lat = append(lat, r.at.Sub(acked))
	}
	slices.Sort(lat)
	t.Logf("wake-up after the send's acknowledgement, %d rounds: %v", rounds, lat)
	// One round may exceed 50 ms, so that a single scheduling hiccup of a
	// loaded CI machine (the race detector, other packages' tests) does not
	// fail the test; the wake-up itself is a channel close.
	if slow := lat[rounds-2]; slow > 50*time.Millisecond {
		t.Fatalf("%d of %d wake-ups exceed 50ms: %v", rounds-slices.IndexFunc(lat, func(d time.Duration) bool { return d > 50*time.Millisecond }), rounds, lat)
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
		if took < 300*time.Millisecond || took > 5*time.Second {
			t.Errorf("%s answered after %v, want just after 300ms", c.url, took)
		}
	}

	s.send(t, []string{"alice@example.com"}, "first", "hello")
	ch := startWaiting(api+"/latest?recipient=bob@example.com&wait=10s", id.ReadCapability)
	list := startWaiting(api+"?after=1&wait=10s", id.ReadCapability)
	time.Sleep(parkTime)
	s.send(t, []string{"alice@example.com"}, "to alice", "not for bob")
	time.Sleep(parkTime)
	select {
	case r := <-ch:
		t.Fatalf("bob's waiter woke for alice's mail: %d %s", r.status, r.body)
	default:
	}
	if r := receive(t, list, 5*time.Second); r.status != 200 || len(r.json(t)["messages"].([]any)) != 1 {
		t.Fatalf("list after=1: %d %s", r.status, r.body)
	}
	s.send(t, []string{"Bob@Example.com"}, "to bob", "code 5150")
	r := receive(t, ch, 5*time.Second)
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
	waiters := make([]<-chan timed, n)
	for i, id := range ids {
		waiters[i] = startWaiting(gw.URL+"/api/namespaces/"+id.Namespace+"/messages/latest?recipient=user@example.com&wait=30s", id.ReadCapability)
	}
	time.Sleep(2 * time.Second) // all of them parked at the plane
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
		r := receive(t, w, 10*time.Second)
		if r.status != 200 {
			t.Fatalf("waiter %d: %d %s", i, r.status, r.body)
		}
		if m := r.json(t); m["subject"] != ids[i].Namespace || m["namespace"] != ids[i].Namespace || m["id"] != float64(1) {
			t.Fatalf("waiter %d on %s woke with %v / %v / %v", i, ids[i].Namespace, m["subject"], m["namespace"], m["id"])
		}
	}
	t.Logf("%d sends and %d wake-ups in %v", n, n, time.Since(start))
}

// A wait outlasts the HTTP server's read timeout (10 s): mail that arrives
// after 11 s still reaches the request that waited for it.
func TestWaitOutlastsReadTimeout(t *testing.T) {
	t.Parallel()
	plane := itest.StartPlane(t)
	id := plane.Trial(t, rpc.ProfileCandidate)
	gw := startGateway(t, plane)
	ch := startWaiting(gw.URL+"/api/namespaces/"+id.Namespace+"/messages/latest?wait=30s", id.ReadCapability)
	time.Sleep(11 * time.Second)
	newSender(t, plane, id).send(t, []string{"user@example.com"}, "late", "code 8080")
	if r := receive(t, ch, 5*time.Second); r.status != 200 || r.json(t)["subject"] != "late" {
		t.Fatalf("after 11s: %d %s", r.status, r.body)
	}
}
