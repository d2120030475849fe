package sqlledger

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/evidence"
	. "github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/internal/mailindex"
	"github.com/websitebench/mailplane/internal/mailmsg"
)

// BenchmarkCommitSend is make profile's send as the ledger sees it: POST
// /emails of 512 B, scrubbed and indexed as the broker does, with its
// body, index and event, from 8 senders at once into one namespace. Its
// cpu-us/send (the process's CPU time, most of it the committer's) is the
// figure to compare: unlike a rate, it hardly moves with the machine's
// other work.
func BenchmarkCommitSend(b *testing.B) {
	l, body, index := openProfileLedger(b)
	before := cpuTime()
	b.ResetTimer()
	lat := sendProfile(b, l, body, index)
	b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(b.N), "cpu-us/send")
	lat.report(b)
}

// sendProfile accepts b.N of make profile's sends (profileOffer) into l,
// from 8 senders at once, and times each.
func sendProfile(b *testing.B, l *DB, body, index []byte) *latencies {
	var lat latencies
	inParallel(b, 8, func() error {
		start := time.Now()
		_, _, err := l.Accept(context.Background(), profileOffer(body, index))
		lat.add(time.Since(start))
		return err
	})
	return &lat
}

// BenchmarkCreateTrial opens trials one after another, as trial.open does
// in the ledger; its p99-us shows the opens that ran a checkpoint.
func BenchmarkCreateTrial(b *testing.B) {
	ctx := context.Background()
	l := openSQLite(b, b.TempDir())
	var lat latencies
	i := 0
	for b.Loop() {
		i++
		id := strconv.Itoa(i)
		tr := &Trial{Profile: "candidate", MailAPIToken: digest("a" + id), BootstrapToken: digest("b" + id), InboxToken: digest("c" + id)}
		ns := &Namespace{Name: "trial-" + id, ReadCapability: digest("r" + id), WriteCapability: digest("w" + id), Tag: "t" + id}
		start := time.Now()
		if err := l.CreateTrial(ctx, tr, ns, []Grant{{Digest: digest("g" + id), Role: "writer"}}); err != nil {
			b.Fatal(err)
		}
		lat.add(time.Since(start))
	}
	lat.report(b)
}

// latencies collects calls' latencies, from several goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// report reports the median and the 99th percentile, in microseconds.
func (l *latencies) report(b *testing.B) {
	if len(l.d) == 0 {
		return
	}
	slices.Sort(l.d)
	b.ReportMetric(float64(l.d[len(l.d)/2].Microseconds()), "p50-us")
	b.ReportMetric(float64(l.d[len(l.d)*99/100].Microseconds()), "p99-us")
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// profileNS is make profile's trial's namespace.
const profileNS = "trial-0123456789abcdef0123456789abcdef"

// openProfileLedger is a ledger in a temporary directory holding
// make profile's trial, and that trial's message as the broker stores it;
// the ledger is closed when the test ends.
func openProfileLedger(tb testing.TB) (l *DB, body, index []byte) {
	tb.Helper()
	l = openSQLite(tb, tb.TempDir())
	profileTrial(tb, l)
	body, index = profileSend(tb)
	return l, body, index
}

// profileTrial creates make profile's trial in l.
func profileTrial(tb testing.TB, l *DB) {
	tr := &Trial{Profile: "candidate", MailAPIToken: digest("a"), BootstrapToken: digest("b"), InboxToken: digest("c")}
	if err := l.CreateTrial(context.Background(), tr, &Namespace{Name: profileNS, Tag: "t"}, nil); err != nil {
		tb.Fatal(err)
	}
}

// profileOffer is make profile's send of body and index (profileSend)
// into profileNS, with its event.
func profileOffer(body, index []byte) *Offer {
	from, to := "bench@example.com", []string{"agent@example.com"}
	return &Offer{Namespace: profileNS, UUID: "0b5e3c1e-8f0e-4f8e-9f5e-1c2d3e4f5a6b", From: from, To: to, Size: len(body), Body: body, Index: index,
		Event: &evidence.Event{Door: evidence.DoorWriterHTTP, Action: "send", Outcome: evidence.Accepted,
			Credential: "mail_api_token", API: "resend", From: from, To: to}}
}

// profileSend is make profile's message (POST /emails, 512 B of text) as
// the broker stores it: scrubbed, and its index.
func profileSend(tb testing.TB) (body, index []byte) {
	from, to := "bench@example.com", []string{"agent@example.com"}
	raw := "From: " + from + "\r\nTo: " + to[0] + "\r\nSubject: Your code\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" +
		strings.Repeat("lorem ipsum dolor sit amet ", 19)[:512]
	body, err := mailmsg.Scrub(context.Background(), []byte(raw), from, to)
	if err != nil {
		tb.Fatal(err)
	}
	return body, mailindex.Of(body).Encode()
}
