package mailpit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/itest"
	"github.com/websitebench/mailplane/pkg/rpc"
)

const (
	benchConcurrency = 8
	benchMessageSize = 512
)

// benchMessage is a 512-byte message.
func benchMessage(i int) []byte {
	head := fmt.Sprintf("Subject: bench %d\r\nContent-Type: text/plain\r\n\r\n", i)
	body := strings.Repeat("x", benchMessageSize-len(head)-2) + "\r\n"
	return []byte(head + body)
}

// meter accumulates the time, latencies and CPU of one path over rounds.
type meter struct {
	n       int
	elapsed time.Duration
	lat     []time.Duration
	cpu     map[int]time.Duration // by process
}

// cpuTime is the CPU time pid has used (user + system), from /proc.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// cpuPerOp is the CPU time pid spent per operation of m, in µs.
func (m *meter) cpuPerOp(pid int) float64 {
	return float64(m.cpu[pid].Microseconds()) / float64(m.n)
}

func (m *meter) rate() float64 { return float64(m.n) / m.elapsed.Seconds() }

func (m *meter) p99() time.Duration {
	slices.Sort(m.lat)
	return m.lat[(len(m.lat)*99)/100]
}

// drive runs n operations on workers goroutines into m, counting the CPU
// of pids.
func drive(b *testing.B, m *meter, n, workers int, pids []int, op func(worker, i int) error) {
	cpu0 := map[int]time.Duration{}
	for _, pid := range pids {
		cpu0[pid] = cpuTime(pid)
	}
	defer func() {
		if m.cpu == nil {
			m.cpu = map[int]time.Duration{}
		}
		for _, pid := range pids {
			m.cpu[pid] += cpuTime(pid) - cpu0[pid]
		}
	}()
	var next atomic.Int64
	lat := make([][]time.Duration, workers)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				if err := op(w, i); err != nil {
					errs <- err
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	m.elapsed += time.Since(start)
	m.n += n
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	m.lat = append(m.lat, slices.Concat(lat...)...)
}

// BenchmarkSendIntoMailpit measures sends through the plane (rpc Send, 8 at
// a time, 512-byte messages, no quotas) into Mailpit, next to raw SMTP
// straight into the same Mailpit's socket in the same run, 8 at a time
// (raw_*) and one at a time (serial_*): the plane writes to Mailpit inside
// its ledger's one write transaction at a time, so serial_sends/s is its
// ceiling.
func BenchmarkSendIntoMailpit(b *testing.B) {
	srv := startServer(b)
	dir := itest.ShortTempDir(b)
	socket, data := filepath.Join(dir, "plane.sock"), filepath.Join(dir, "data")
	args := []string{"--log-level", "warn", "serve", "--socket", socket, "--data", data, "--quota-messages", "0", "--quota-bytes", "0"}
	proc := itest.Start(b, "mail-plane", append(args, "--store", "mailpit", "--mailpit-socket", srv.HTTP)...)
	var admin *rpc.Client
	deadline := time.Now().Add(15 * time.Second)
	for admin == nil {
		if g, err := rpc.ReadSecretFile(filepath.Join(data, "admin.grant")); err == nil {
			c := rpc.NewClient(socket, g)
			if _, err := c.Health(context.Background()); err == nil {
				admin = c
				break
			}
			c.Close()
		}
		if time.Now().After(deadline) {
			b.Fatalf("plane not up:\n%s", proc.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer admin.Close()
	id, err := admin.TrialCreate(context.Background(), &rpc.TrialCreateRequest{Profile: rpc.ProfileCandidate})
	if err != nil {
		b.Fatal(err)
	}
	writers := make([]*rpc.Client, benchConcurrency)
	sessions := make([]*smtpConn, benchConcurrency)
	for w := range benchConcurrency {
		writers[w] = rpc.NewClient(socket, id.WriterGrant)
		defer writers[w].Close()
		c, err := dialSMTP(context.Background(), srv.SMTP)
		if err != nil {
			b.Fatal(err)
		}
		defer c.close()
		sessions[w] = c
	}
	to := []string{"agent@example.com"}
	tag := ident.StorageTag()
	// Warm both paths (connections, Mailpit's caches).
	for w := range benchConcurrency {
		if _, err := writers[w].Send(context.Background(), &rpc.SendRequest{Via: rpc.ViaSMTP, From: rpc.CandidateSender, To: to, Raw: benchMessage(-1)}); err != nil {
			b.Fatal(err)
		}
		if _, err := sessions[w].send(rpc.CandidateSender, to, newFrame(tag, rpc.CandidateSender, benchMessage(-1))); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()

	// The two paths take turns, so that whatever else the machine does
	// weighs on both alike.
	const rounds = 4
	planePID, mailpitPID := proc.Cmd.Process.Pid, srv.cmd.Process.Pid
	pids := []int{planePID, mailpitPID}
	var raw, serial, plane meter
	for r := range rounds {
		n := b.N / rounds
		if r == rounds-1 {
			n = b.N - 3*(b.N/rounds)
		}
		rawSend := func(w, i int) error {
			_, err := sessions[w].send(rpc.CandidateSender, to, newFrame(tag, rpc.CandidateSender, benchMessage(i)))
			return err
		}
		drive(b, &raw, n, benchConcurrency, pids, rawSend)
		drive(b, &serial, n/4, 1, pids, rawSend)
		drive(b, &plane, n, benchConcurrency, pids, func(w, i int) error {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := writers[w].Send(ctx, &rpc.SendRequest{Via: rpc.ViaSMTP, From: rpc.CandidateSender, To: to, Raw: benchMessage(i)})
			return err
		})
	}
	b.StopTimer()
	b.ReportMetric(plane.rate(), "plane_sends/s")
	b.ReportMetric(float64(plane.p99().Microseconds())/1000, "plane_p99_ms")
	b.ReportMetric(raw.rate(), "raw_sends/s")
	b.ReportMetric(float64(raw.p99().Microseconds())/1000, "raw_p99_ms")
	b.ReportMetric(serial.rate(), "serial_sends/s")
	b.ReportMetric(plane.cpuPerOp(planePID), "plane_cpu_µs/send")
	b.ReportMetric(plane.cpuPerOp(mailpitPID), "mailpit_cpu_µs/plane_send")
	b.ReportMetric(raw.cpuPerOp(mailpitPID), "mailpit_cpu_µs/raw_send")
	b.ReportMetric(100*plane.rate()/raw.rate(), "pct_of_raw")
}
