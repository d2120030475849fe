package gateway_test

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// samples collects request latencies and reports their percentiles.
type samples []time.Duration

func (s samples) report(b *testing.B, name string) {
	if len(s) == 0 {
		return
	}
	slices.Sort(s)
	at := func(p float64) float64 {
		return float64(s[min(len(s)-1, int(p*float64(len(s))))].Microseconds())
	}
	b.ReportMetric(at(0.50), name+"-p50-µs")
	b.ReportMetric(at(0.99), name+"-p99-µs")
}

// benchGet is one timed GET on a kept-alive connection.
func benchGet(b *testing.B, hc *http.Client, url, capability string, want int) time.Duration {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if capability != "" {
		req.Header.Set("Authorization", "Bearer "+capability)
	}
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if err != nil || resp.StatusCode != want {
		b.Fatalf("GET: %d, %v", resp.StatusCode, err)
	}
	return took
}

func benchSetup(b *testing.B) (*itest.Plane, rpc.Identity, *gateway, *sender) {
	plane := itest.StartPlane(b, "--quota-messages", "0", "--quota-bytes", "0")
	id := plane.Trial(b, rpc.ProfileCandidate)
	gw := startGateway(b, plane)
	return plane, id, gw, newSender(b, plane, id)
}

// BenchmarkList32 is GET …/messages answering 32 messages (each parsed by
// the plane and searched for codes and links by the gateway), next to two
// baselines measured alternately with it: GET /healthz, which crosses
// HTTP, the gateway and the plane's socket but reads nothing, and the same
// list asked of the plane directly over its socket (what the gateway adds
// is the difference).
func BenchmarkList32(b *testing.B) {
	plane, id, gw, s := benchSetup(b)
	direct := plane.Client(b, plane.GatewayGrant(b))
	for i := range 32 {
		s.send(b, []string{"user@example.com"}, "Message "+strconv.Itoa(i),
			"Hello,\r\n\r\nYour verification code is 4"+strconv.Itoa(10000+i)+".\r\nOr open https://site.example/verify?t="+strconv.Itoa(i)+" to sign in.\r\n")
	}
	hc := &http.Client{}
	list := gw.URL + "/api/namespaces/" + id.Namespace + "/messages"
	var lists, healths, planes samples
	for b.Loop() {
		lists = append(lists, benchGet(b, hc, list, id.ReadCapability, 200))
		healths = append(healths, benchGet(b, hc, gw.URL+"/healthz", "", 200))
		start := time.Now()
		msgs, err := direct.List(context.Background(), &rpc.ReadRequest{Namespace: id.Namespace, Capability: id.ReadCapability})
		planes = append(planes, time.Since(start))
		if err != nil || len(msgs) != 32 {
			b.Fatalf("plane list: %d messages, %v", len(msgs), err)
		}
	}
	lists.report(b, "list32")
	healths.report(b, "healthz")
	planes.report(b, "plane-list32")
}

// BenchmarkWaitWake is the time from a send's acknowledgement by the plane
// to the answer of a GET …/messages/latest?wait= that was waiting for it
// ("wake"; the plane wakes waiters on commit, before it acknowledges, so
// the answer can beat the acknowledgement and the time be negative), and
// from the start of the send ("send-to-wake"), next to two baselines
// measured in the same iterations: GET /healthz and GET
// …/messages/latest without waiting (the same read, not held).
func BenchmarkWaitWake(b *testing.B) {
	plane, id, gw, s := benchSetup(b)
	hc := &http.Client{}
	latest := gw.URL + "/api/namespaces/" + id.Namespace + "/messages/latest"
	var wakes, sendToWakes, healths, reads samples
	n := 0
	for b.Loop() {
		done := make(chan time.Time, 1)
		go func(after int) {
			req, _ := http.NewRequest(http.MethodGet, latest+"?wait=10s&after="+strconv.Itoa(after), nil)
			req.Header.Set("Authorization", "Bearer "+id.ReadCapability)
			resp, err := hc.Do(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					err = io.ErrUnexpectedEOF
				}
			}
			if err != nil {
				done <- time.Time{}
				return
			}
			done <- time.Now()
		}(n)
		// Until the request is parked at the plane; this is not measured.
		plane.WaitParked(b, "mail", 1)
		sent := time.Now()
		s.send(b, []string{"user@example.com"}, "wake", "code 4711")
		acked := time.Now()
		n++
		at := <-done
		if at.IsZero() {
			b.Fatal("the waiting request failed")
		}
		wakes = append(wakes, at.Sub(acked))
		sendToWakes = append(sendToWakes, at.Sub(sent))
		healths = append(healths, benchGet(b, hc, gw.URL+"/healthz", "", 200))
		reads = append(reads, benchGet(b, hc, latest, id.ReadCapability, 200))
	}
	wakes.report(b, "wake")
	sendToWakes.report(b, "send-to-wake")
	healths.report(b, "healthz")
	reads.report(b, "latest")
}
