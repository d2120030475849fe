package writer

import (
	"encoding/base64"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/websitebench/mailplane/internal/mailmsg"
)

// scaling runs op on inputs of sizes n, 2n, 4n and 8n and fails if any
// doubling of the size more than triples the time. Time is the CPU time of
// the thread running op (so that other processes on a shared machine do
// not count), the best of several rounds taken in turn over the sizes (so
// that a busy moment does not fall on one size only). A small local
// helper; a shared one (internal/complexity) is coming.
func scaling(t *testing.T, name string, n int, prepare func(size int) any, op func(input any)) {
	t.Helper()
	const rounds = 9
	var inputs [4]any
	var times [4]time.Duration
	for i := range inputs {
		inputs[i] = prepare(n << i)
		times[i] = time.Duration(1<<63 - 1)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for range rounds {
		for i, in := range inputs {
			// A collection owed by the previous run must not land in
			// this one's time.
			runtime.GC()
			start := threadCPU()
			op(in)
			times[i] = min(times[i], threadCPU()-start)
		}
	}
	t.Logf("%s: n=%d: %v", name, n, times)
	for i := 1; i < len(times); i++ {
		// Below a tenth of a millisecond, the clock's grain dominates.
		if times[i] > 3*times[i-1] && times[i] > 100*time.Microsecond {
			t.Errorf("%s: size %d took %v, size %d took %v: worse than linear", name, n<<i, times[i], n<<(i-1), times[i-1])
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

// TestComplexity: the writer's new parsers of untrusted bytes (batch
// bodies, attachment content) and the composition and read-back of the
// message they make scale linearly with their input.
func TestComplexity(t *testing.T) {
	one := func(text string) map[string]any {
		return map[string]any{"from": "s@example.com", "to": "u@example.com", "subject": "s", "text": text}
	}
	t.Run("batch emails", func(t *testing.T) {
		scaling(t, "batch of k emails", 12, func(k int) any {
			list := make([]any, k)
			for i := range list {
				list[i] = one(strings.Repeat("text ", 200))
			}
			b, _ := json.Marshal(list)
			return b
		}, func(in any) {
			items, fail := splitBatch(in.([]byte))
			if fail == nil {
				parseBatchEmails(items, true, 16)
			}
		})
	})
	t.Run("batch body size", func(t *testing.T) {
		scaling(t, "batch of one email of n bytes", 32<<10, func(n int) any {
			b, _ := json.Marshal([]any{one(strings.Repeat("é\u00a0\\\"", n/8))})
			return b
		}, func(in any) {
			items, fail := splitBatch(in.([]byte))
			if fail == nil {
				parseBatchEmails(items, false, 16)
			}
		})
	})
	t.Run("attachment", func(t *testing.T) {
		scaling(t, "attachment of n bytes", 32<<10, func(n int) any {
			content := make([]byte, n)
			for i := range content {
				content[i] = byte(i * 31)
			}
			enc := base64.StdEncoding.EncodeToString(content)
			var wrapped strings.Builder
			for len(enc) > 76 {
				wrapped.WriteString(enc[:76] + "\r\n")
				enc = enc[76:]
			}
			wrapped.WriteString(enc)
			return []any{map[string]any{"filename": "a.bin", "content": wrapped.String()}}
		}, func(in any) {
			list, fail := parseAttachments(in)
			if fail != nil {
				panic(fail.Message)
			}
			text := "t"
			mailmsg.Parse(compose(&email{From: "s@example.com", To: []string{"u@example.com"}, Text: &text, Attachments: list}, time.Unix(0, 0)))
		})
	})
	t.Run("byte-list attachment", func(t *testing.T) {
		scaling(t, "attachment of n byte values", 16<<10, func(n int) any {
			list := make([]any, n)
			for i := range list {
				list[i] = float64(i % 256)
			}
			return []any{map[string]any{"filename": "a.bin", "content": list}}
		}, func(in any) {
			if _, fail := parseAttachments(in); fail != nil {
				panic(fail.Message)
			}
		})
	})
}
