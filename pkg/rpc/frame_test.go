package rpc_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// frameHeadIsMarshal fails t unless r's frame is json.Marshal(r), a
// newline and r.Raw.
func frameHeadIsMarshal(t *testing.T, r *rpc.SendRequest) {
	t.Helper()
	frame, err := r.Frame()
	if err != nil {
		t.Fatal(err)
	}
	head, raw, ok := rpc.SplitSendFrame(frame)
	want, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !ok || !bytes.Equal(head, want) || !bytes.Equal(raw, r.Raw) {
		t.Fatalf("frame of %+v:\n%q\nwant head %q and raw %q", r, frame, want, r.Raw)
	}
}

// TestFrameHead holds the hand-written frame head to json.Marshal's bytes,
// empty fields left out or not as its tags say, and strings that need
// escaping (quotes, control bytes, HTML, invalid UTF-8, U+2028).
func TestFrameHead(t *testing.T) {
	for _, r := range []*rpc.SendRequest{
		{},
		{Via: rpc.ViaHTTP, Credential: "re_tok", From: "a@example.com", To: []string{"b@example.com", "c@example.com"},
			Raw: []byte("Subject: x\r\n\r\nhi\n"), IdempotencyKey: "k1", Fingerprint: "ab12", API: "postmark"},
		{Via: rpc.ViaSMTPSelect, Namespace: "ns-1", Port: 2525, Door: "door/7", From: "", To: []string{}},
		{Via: rpc.ViaHTTP, API: "ses", From: "a@example.com", To: []string{"b@example.com"},
			SigV4: &rpc.SigV4Proof{AccessKeyID: "ns", StringToSign: "AWS4-HMAC-SHA256\n20261206T070000Z\nscope\nabc", Signature: "00ff"}},
		{Via: "h\"t\\tp", Credential: "<tok>&\x00\x1f\x7f", From: "\"Q\" <q@example.com>", Port: -3,
			To: []string{"\xff\xfe", "a\u2028b\u2029c", "é@例え.jp", "\t\b\f\r\n"}},
	} {
		frameHeadIsMarshal(t, r)
	}
}

// FuzzFrameHead is TestFrameHead over any strings.
func FuzzFrameHead(f *testing.F) {
	f.Add("http", "tok", "a@example.com", "b@example.com", "key", 25, true)
	f.Add("smtp", "", "\"<&>\"", "\xff\u2028", "", 0, false)
	f.Fuzz(func(t *testing.T, via, cred, from, to, key string, port int, sig bool) {
		r := &rpc.SendRequest{Via: rpc.Via(via), Credential: cred, Namespace: to, Port: port, Door: key, From: from,
			To: []string{to, from}, Raw: []byte(from), IdempotencyKey: key, Fingerprint: cred, API: via}
		if sig {
			r.SigV4 = &rpc.SigV4Proof{AccessKeyID: via, StringToSign: from + "\n" + to, Signature: key}
		}
		frameHeadIsMarshal(t, r)
	})
}
