package smtpd

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestFingerprintComplexity: the digest of an SMTP message for
// Resend-Idempotency-Key is linear in its header lines and body bytes
// (sizes n to 8n; no doubling may more than triple the best time). A small
// local helper; a shared one (internal/complexity) is coming.
func TestFingerprintComplexity(t *testing.T) {
	for _, c := range []struct {
		name string
		make func(n int) []byte
	}{
		{"header lines", func(n int) []byte {
			return []byte(strings.Repeat("X-A: 1\r\n Date: folded\r\n", n) + "\r\nbody")
		}},
		{"body bytes", func(n int) []byte {
			return []byte("Subject: s\r\n\r\n" + strings.Repeat("x\n", n))
		}},
		{"no header end", func(n int) []byte {
			return []byte(strings.Repeat("Message-ID: <x>\n", n))
		}},
	} {
		var inputs [4][]byte
		var times [4]time.Duration
		for i := range inputs {
			inputs[i] = c.make(8192 << i)
			times[i] = time.Hour
		}
		// The best of several rounds taken in turn over the sizes, in CPU
		// time of this thread: other processes on a shared machine do not
		// count.
		runtime.LockOSThread()
		for range 9 {
			for i, raw := range inputs {
				runtime.GC()
				start := threadCPU()
				fingerprint("s@example.com", []string{"u@example.com"}, raw)
				times[i] = min(times[i], threadCPU()-start)
			}
		}
		runtime.UnlockOSThread()
		t.Logf("%s: %v", c.name, times)
		for i := 1; i < len(times); i++ {
			if times[i] > 3*times[i-1] && times[i] > 100*time.Microsecond {
				t.Errorf("%s: %v then %v: worse than linear", c.name, times[i-1], times[i])
			}
		}
	}
}

// threadCPU is the CPU time the calling OS thread has used.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic(err)
	}
	return time.Duration(ts.Nano())
}

// TestFingerprintIgnoresVolatileHeaders: Date, Message-ID, Received and the
// key header itself, folded or not, in any case, do not count; every other
// byte does.
func TestFingerprintIgnoresVolatileHeaders(t *testing.T) {
	base := fingerprint("s@x", []string{"u@x"}, []byte("Subject: a\r\nDate: 1\r\nMessage-ID: <1>\r\n\r\nbody"))
	same := []string{
		"Subject: a\r\ndate: 2\r\n\tcontinued\r\nMESSAGE-ID:\r\n <2>\r\nReceived: by x\r\n\r\nbody",
		"Resend-Idempotency-Key: other\r\nSubject: a\r\n\r\nbody",
	}
	for _, raw := range same {
		if fingerprint("s@x", []string{"u@x"}, []byte(raw)) != base {
			t.Errorf("%q: fingerprint differs", raw)
		}
	}
	differ := []struct {
		from string
		to   []string
		raw  string
	}{
		{"s@x", []string{"u@x"}, "Subject: b\r\n\r\nbody"},
		{"s@x", []string{"u@x"}, "Subject: a\r\n\r\nbody2"},
		{"s@x", []string{"u@x"}, "Subject: a\r\n continued\r\n\r\nbody"},
		{"t@x", []string{"u@x"}, "Subject: a\r\n\r\nbody"},
		{"s@x", []string{"u@x", "v@x"}, "Subject: a\r\n\r\nbody"},
	}
	for _, d := range differ {
		if fingerprint(d.from, d.to, []byte(d.raw)) == base {
			t.Errorf("%+v: same fingerprint", d)
		}
	}
}
