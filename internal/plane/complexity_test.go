package plane

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/complexity"
	"github.com/websitebench/mailplane/internal/peercred"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// decode, the plane's reader of RPC frames, runs in linear time on any
// frame a surface sends: a large raw message, many recipients, long
// strings of escapes, deep nesting, many keys, no end to the JSON line.
func TestDecodeLinear(t *testing.T) {
	frame := func(raw string, to string) []byte {
		return []byte(`{"via":"smtp","from":"` + rpc.CandidateSender + `","to":[` + to + "]}\n" + raw)
	}
	for _, c := range []struct {
		name string
		body func(n int) []byte
		base int
		reps int // capped: decode stops at a bound, so a run repeats it (times)
	}{
		{"large raw", func(n int) []byte {
			return frame(strings.Repeat("Subject: s\r\n\r\nbody\r\n", n), `"u@example.com"`)
		}, 2_500, 4096},
		{"many recipients", func(n int) []byte {
			return frame("", strings.TrimSuffix(strings.Repeat(`"u@example.com",`, n), ","))
		}, 160_000, 1},
		{"escaped strings", func(n int) []byte {
			return []byte(`{"via":"smtp","from":"` + strings.Repeat(`\u00e9\"\\`, n) + `","to":[]}` + "\n")
		}, 320_000, 1},
		{"deep nesting", func(n int) []byte {
			return []byte(`{"via":"smtp","to":` + strings.Repeat("[", n) + strings.Repeat("]", n) + "}\n")
		}, 1_000, 512},
		{"unknown keys", func(n int) []byte {
			var b strings.Builder
			b.WriteString(`{"via":"smtp"`)
			for i := range n {
				fmt.Fprintf(&b, `,"k%d":[1,2,3]`, i)
			}
			return []byte(b.String() + "}\n")
		}, 40_000, 1},
		{"trailing data", func(n int) []byte {
			return []byte(`{"via":"smtp"}` + strings.Repeat(`{"via":"smtp"}`, n) + "\n")
		}, 20_000, 4096},
		{"no newline", func(n int) []byte {
			return []byte(`{"via":"smtp","from":"` + strings.Repeat("a", 16*n) + `"}`)
		}, 20_000, 4096},
	} {
		t.Run(c.name, func(t *testing.T) {
			complexity.Linear(t, "decode/"+c.name, func(n int) func() {
				body := c.body(n)
				return complexity.Repeat(c.reps, func() {
					var req rpc.SendRequest
					decode(frameSend, body, &req)
				})
			}, c.base)
		})
	}
}

// A send frame runs through the whole server (frame, grant, decode,
// envelope checks, scrub) in linear time, into a namespace whose quota is
// full, as in the attack that found the quadratic unfolding: the message
// is scrubbed before the quota refuses it.
func TestSendLinear(t *testing.T) {
	ctx := context.Background()
	l := openLedger(t)
	b := NewBroker(l, nil, Quotas{Messages: 1}, zerolog.Nop())
	s := NewServer(b, peercred.Policy{}, 0, zerolog.Nop())
	// full's quota of one message is used up: its sends are refused
	// before their body is looked at. empty's is not: an oversized header
	// block is scrubbed and refused, and nothing is stored.
	full, err := b.CreateTrial(ctx, &rpc.TrialCreateRequest{Profile: rpc.ProfileCandidate})
	if err != nil {
		t.Fatal(err)
	}
	empty, err := b.CreateTrial(ctx, &rpc.TrialCreateRequest{Profile: rpc.ProfileCandidate})
	if err != nil {
		t.Fatal(err)
	}
	grant := full.WriterGrant
	send := func(raw []byte) (int, string) {
		body, _ := (&rpc.SendRequest{Via: rpc.ViaSMTP, From: rpc.CandidateSender, To: []string{"u@example.com"}, Raw: raw}).Frame()
		status, answer := pipeCall(t, s, rpc.MethodSend, grant, body, time.Time{})
		var e rpc.Error
		json.Unmarshal(answer, &e)
		return status, e.Code
	}
	if code, _ := send([]byte("Subject: fills the quota\r\n\r\nx")); code != http.StatusOK {
		t.Fatalf("first send: %d", code)
	}
	into := map[string]string{rpc.CodeMessageTooLarge: empty.WriterGrant, rpc.CodeMailboxCapacity: full.WriterGrant}
	for _, c := range []struct {
		name string
		raw  func(n int) string
		code string // the refusal every size gets
		base int
		reps int // capped: refused at a bound, so a run repeats the send (times)
	}{
		{"folded header", func(n int) string { return "X: a\r\n" + strings.Repeat(" \r\n", n) + "\r\nbody" }, rpc.CodeMessageTooLarge, 80_000, 16},
		{"many header fields", func(n int) string { return strings.Repeat("X-A: b\r\n", n) + "\r\nbody" }, rpc.CodeMessageTooLarge, 10_000, 16},
		{"long body", func(n int) string { return "Subject: s\r\n\r\n" + strings.Repeat("line of text\r\n", n) }, rpc.CodeMailboxCapacity, 2_500, 48},
		{"many parts", func(n int) string {
			return "Content-Type: multipart/mixed; boundary=b\r\n\r\n" + strings.Repeat("--b\r\nX-Tags: t\r\n\r\nhi\r\n", n) + "--b--\r\n"
		}, rpc.CodeMailboxCapacity, 1_000, 48},
	} {
		t.Run(c.name, func(t *testing.T) {
			grant = into[c.code]
			complexity.Linear(t, "send/"+c.name, func(n int) func() {
				raw := []byte(c.raw(n))
				if _, code := send(raw); code != c.code {
					t.Fatalf("n=%d: refused with %q, want %q", n, code, c.code)
				}
				return complexity.Repeat(c.reps, func() { send(raw) })
			}, c.base)
		})
	}
}
