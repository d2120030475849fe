package hooksproc

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/internal/limits"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// outbox hands out its deliveries once and keeps the reports: the
// plane's side of the two calls, without a plane.
type outbox struct {
	mu      sync.Mutex
	pending []rpc.WebhookDelivery
	reports []rpc.WebhookReport
}

func (o *outbox) WebhooksTake(ctx context.Context, _ *rpc.WebhooksTakeRequest) (rpc.WebhooksTakeResponse, error) {
	o.mu.Lock()
	out := o.pending
	o.pending = nil
	o.mu.Unlock()
	if len(out) == 0 {
		<-ctx.Done()
		return rpc.WebhooksTakeResponse{}, ctx.Err()
	}
	return rpc.WebhooksTakeResponse{Deliveries: out}, nil
}

func (o *outbox) WebhooksReport(_ context.Context, r *rpc.WebhookReport) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reports = append(o.reports, *r)
	return nil
}

func (o *outbox) reported() []rpc.WebhookReport {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]rpc.WebhookReport(nil), o.reports...)
}

// TestTrialShare: a trial whose endpoint holds every request has at most
// its share in flight at once, and another trial's deliveries go through
// meanwhile; what was over the share is left for the plane to hand out
// again, unreported.
func TestTrialShare(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	inFlight, most := map[string]int{}, map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		trial := r.URL.Path
		mu.Lock()
		inFlight[trial]++
		most[trial] = max(most[trial], inFlight[trial])
		mu.Unlock()
		if trial == "/slow" {
			<-release
		}
		mu.Lock()
		inFlight[trial]--
		mu.Unlock()
	}))
	defer srv.Close()
	o := &outbox{}
	for i := range 10 {
		o.pending = append(o.pending, rpc.WebhookDelivery{Trial: 1, Seq: int64(i + 1), EventID: "s" + strconv.Itoa(i), Provider: "resend", URL: srv.URL + "/slow"})
	}
	for i := range 2 {
		o.pending = append(o.pending, rpc.WebhookDelivery{Trial: 2, Seq: int64(i + 1), EventID: "f" + strconv.Itoa(i), Provider: "resend", URL: srv.URL + "/fast"})
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(o, zerolog.Nop()).Run(ctx) }()
	itest.Eventually(t, "the other trial's deliveries reported", 10*time.Second, func() bool {
		n := 0
		for _, r := range o.reported() {
			if r.Trial == 2 && r.Status == 200 {
				n++
			}
		}
		return n == 2
	})
	itest.Eventually(t, "the slow trial's share in flight", 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return inFlight["/slow"] == limits.TrialWebhookDeliveries
	})
	close(release)
	itest.Eventually(t, "the slow trial's share reported", 10*time.Second, func() bool { return len(o.reported()) == 2+limits.TrialWebhookDeliveries })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if most["/slow"] != limits.TrialWebhookDeliveries {
		t.Errorf("the slow trial had %d deliveries in flight at most, want its share %d", most["/slow"], limits.TrialWebhookDeliveries)
	}
	if n := len(o.reported()); n != 2+limits.TrialWebhookDeliveries {
		t.Errorf("%d reports, want %d: over the share is not attempted", n, 2+limits.TrialWebhookDeliveries)
	}
}

// TestFailures: an endpoint that is not there, and one that answers
// 500, are reported as what they are, without the URL.
func TestFailures(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) }))
	defer srv.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	goneURL := gone.URL
	gone.Close()
	o := &outbox{pending: []rpc.WebhookDelivery{
		{Trial: 1, Seq: 1, Provider: "sendgrid", URL: srv.URL},
		{Trial: 1, Seq: 2, Provider: "sendgrid", URL: goneURL},
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(o, zerolog.Nop()).Run(ctx) }()
	itest.Eventually(t, "both attempts reported", 10*time.Second, func() bool { return len(o.reported()) == 2 })
	cancel()
	<-done
	for _, r := range o.reported() {
		switch r.Seq {
		case 1:
			if r.Status != 500 || r.Error != "" {
				t.Errorf("500: %+v", r)
			}
		case 2:
			if r.Status != 0 || r.Error != "connect" {
				t.Errorf("no endpoint: %+v", r)
			}
		}
	}
}
