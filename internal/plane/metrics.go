package plane

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/websitebench/mailplane/internal/evidence"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// The plane's Prometheus metrics. The plane counts what it sees of every
// door (each send and read is a call to it), so the surfaces report
// nothing and need no right to; the operator's console serves them
// (rpc.MethodMetrics) behind the admin credential. Labels are doors,
// outcomes and methods: never a namespace, a credential or an address.
type metrics struct {
	reg     *prometheus.Registry
	sends   *prometheus.CounterVec   // door, outcome
	reads   *prometheus.CounterVec   // door, outcome
	latency *prometheus.HistogramVec // op: send, read
	wake    prometheus.Histogram     // a waiting read's wake-up after its commit
	opened  prometheus.Counter
	closed  *prometheus.CounterVec // how: closed, expired
	open    prometheus.Gauge
	storeUp prometheus.Gauge
}

// latencyBuckets span a cached read (100 µs) to a wait's full minute.
var latencyBuckets = prometheus.ExponentialBuckets(0.0001, 4, 10)

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mailplane_sends_total",
			Help: "Sends the plane decided, by door (writer-http, writer-smtp) and outcome (accepted, refused, failed)."}, []string{"door", "outcome"}),
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mailplane_reads_total",
			Help: "Reads (list, latest, get) the plane answered, by door (inbox, gateway) and outcome."}, []string{"door", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "mailplane_call_seconds",
			Help: "Time the plane took to decide a send or answer a read that did not wait, by op.", Buckets: latencyBuckets}, []string{"op"}),
		wake: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "mailplane_wait_wakeup_seconds",
			Help: "Time from a message's commit to the answer of a read that was waiting for it.", Buckets: latencyBuckets}),
		opened: prometheus.NewCounter(prometheus.CounterOpts{Name: "mailplane_trials_opened_total", Help: "Trials this plane opened."}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mailplane_trials_closed_total",
			Help: "Trials this plane closed, by how (closed, expired)."}, []string{"how"}),
		open:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "mailplane_trials_open", Help: "Open trials in the plane's database."}),
		storeUp: prometheus.NewGauge(prometheus.GaugeOpts{Name: "mailplane_store_up", Help: "1 when the plane's stores answer, 0 when they do not."}),
	}
	m.reg.MustRegister(m.sends, m.reads, m.latency, m.wake, m.opened, m.closed, m.open, m.storeUp)
	// Every series a dashboard plots exists from the start, at zero.
	for _, door := range []string{evidence.DoorWriterHTTP, evidence.DoorWriterSMTP} {
		for _, o := range []string{evidence.Accepted, evidence.Refused, evidence.Failed} {
			m.sends.WithLabelValues(door, o)
		}
	}
	for _, how := range []string{"closed", "expired"} {
		m.closed.WithLabelValues(how)
	}
	return m
}

// countParked registers the gauge of long polls asleep now: the reads
// waiting for mail (on="mail"), and the events reads and console waits
// waiting for a trail's next event (on="trail").
func (m *metrics) countParked(mail, trail *notifier) {
	for on, n := range map[string]*notifier{"mail": mail, "trail": trail} {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mailplane_waits_parked",
			Help:        "Long polls asleep now: reads waiting for mail (on=mail), for a trail's next event (on=trail).",
			ConstLabels: prometheus.Labels{"on": on}}, func() float64 { return float64(n.asleep.Load()) }))
	}
}

// outcomeOf is a call's outcome as the trail names it.
func outcomeOf(err error) string {
	switch {
	case err == nil:
		return evidence.Accepted
	case rpc.ClassOf(err) != rpc.Refused:
		return evidence.Failed // an outage or a bug
	}
	return evidence.Refused
}

// metered counts a send row's calls by door and outcome and times them;
// the door is the send's Via, as its handler decoded it (decodedKey), or
// read from its frame when the handler could not decode it.
func metered(h handler) handler {
	next := h.run
	h.run = func(b *Broker, ctx context.Context, c caller, f framing, body []byte) (any, error) {
		start := time.Now()
		var decoded any
		resp, err := next(b, context.WithValue(ctx, decodedKey{}, &decoded), c, f, body)
		var req struct {
			Via rpc.Via `json:"via"`
		}
		if s, ok := decoded.(*rpc.SendRequest); ok {
			req.Via = s.Via
		} else if head, _, ok := rpc.SplitSendFrame(body); ok {
			json.Unmarshal(head, &req)
		}
		b.metrics.sends.WithLabelValues(sendDoor(req.Via), outcomeOf(err)).Inc()
		b.metrics.latency.WithLabelValues(rpc.MethodSend).Observe(time.Since(start).Seconds())
		return resp, err
	}
	return h
}

// meteredRefusal counts the writer's refusal of a malformed request as
// a refused send of its door, whatever its credential opened.
func meteredRefusal(h handler) handler {
	next := h.run
	h.run = func(b *Broker, ctx context.Context, c caller, f framing, body []byte) (any, error) {
		resp, err := next(b, ctx, c, f, body)
		var req struct {
			Via rpc.Via `json:"via"`
		}
		json.Unmarshal(body, &req)
		o := evidence.Refused
		if err != nil && rpc.ClassOf(err) != rpc.Refused {
			o = evidence.Failed
		}
		b.metrics.sends.WithLabelValues(sendDoor(req.Via), o).Inc()
		return resp, err
	}
	return h
}

// meteredRead counts a read row's calls by the door of its caller's view
// and times those that did not wait (a wait's time is its caller's, not
// the plane's; its wake-up is timed by waitFor). The read itself says
// whether it waits (markWaits), so the request is decoded once.
func meteredRead(h handler) handler {
	next := h.run
	h.run = func(b *Broker, ctx context.Context, c caller, f framing, body []byte) (any, error) {
		start := time.Now()
		var waits bool
		resp, err := next(b, context.WithValue(ctx, waitsKey{}, &waits), c, f, body)
		b.metrics.reads.WithLabelValues(c.view.door, outcomeOf(err)).Inc()
		if !waits {
			b.metrics.latency.WithLabelValues("read").Observe(time.Since(start).Seconds())
		}
		return resp, err
	}
	return h
}

// decodedKey is the context key of a metered call's request, which its
// handler sets once decoded (bound), so that it is decoded once.
type decodedKey struct{}

// waitsKey is the context key of a metered read's flag that it waits.
type waitsKey struct{}

// markWaits marks the metered read of ctx, if it is one, as one that waits.
func markWaits(ctx context.Context) {
	if w, ok := ctx.Value(waitsKey{}).(*bool); ok {
		*w = true
	}
}

// Metrics answers the plane's metrics in the Prometheus text format, the
// gauges read now.
func (b *Broker) Metrics(ctx context.Context, _ *rpc.MetricsRequest) (rpc.MetricsResponse, error) {
	if n, err := b.ledger.OpenTrials(ctx); err == nil {
		b.metrics.open.Set(float64(n))
	}
	up := 1.0
	if err := b.ping(ctx); err != nil {
		up = 0
	}
	b.metrics.storeUp.Set(up)
	families, err := b.metrics.reg.Gather()
	if err != nil {
		return rpc.MetricsResponse{}, fmt.Errorf("metrics: %w", err) // a bug: Server.call answers 500
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		if err := enc.Encode(f); err != nil {
			return rpc.MetricsResponse{}, fmt.Errorf("metrics: %w", err)
		}
	}
	return rpc.MetricsResponse{Text: buf.String()}, nil
}
