package supervisor_test

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/mailclient"
)

// TestWrongCapabilityProbe: a stranger with a wrong read capability cannot
// tell a real namespace from a missing one, by the answer or by its time,
// and cannot fill the real trial's trail: its refusals are counted, not
// recorded. The medians are logged (go test -v -run TestWrongCapabilityProbe
// ./internal/supervisor/) and must be within 1.5x of each other; the
// samples alternate, so that load on the machine falls on both alike.
func TestWrongCapabilityProbe(t *testing.T) {
	s := itest.StartUp(t, "--trials", "1")
	b := s.Bundle.Bundle
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	gw := mailclient.New(s.Bundle.APIURL, b.Namespace, b.ReadCapability)
	before, err := gw.Events(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	wrong := strings.Repeat("0", 64)
	missing := "trial-" + strings.Repeat("ab", 16)
	probe := func(ns string) (time.Duration, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Bundle.APIURL+"/api/namespaces/"+ns+"/messages", nil)
		req.Header.Set("Authorization", "Bearer "+wrong)
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		return took, resp.Status + " " + strings.ReplaceAll(string(body), ns, "NS")
	}
	const n = 150
	var real, miss []time.Duration
	for i := range n + 10 {
		tr, ar := probe(b.Namespace)
		tm, am := probe(missing)
		if ar != am {
			t.Fatalf("the answers differ: real namespace %q, missing %q", ar, am)
		}
		if i >= 10 { // warm-up
			real, miss = append(real, tr), append(miss, tm)
		}
	}
	mr, mm := median(real), median(miss)
	t.Logf("wrong read capability, median of %d: real namespace %v, missing namespace %v (ratio %.2f)", n, mr, mm, float64(mr)/float64(mm))
	if float64(mr) > 1.5*float64(mm) || float64(mm) > 1.5*float64(mr) {
		t.Errorf("a real namespace answers in %v, a missing one in %v: the time tells them apart", mr, mm)
	}
	after, err := gw.Events(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("the trail grew from %d to %d events with a stranger's refusals", len(before), len(after))
	}
	h, err := s.Admin(t).Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.UnboundRefusals < 2*(n+10) {
		t.Errorf("health counts %d refusals by credentials that open no trial, want at least %d", h.UnboundRefusals, 2*(n+10))
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
