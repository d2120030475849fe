package plant

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/internal/mailmsg"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// A planted message reads back as the evaluator wrote it.
func TestCheckComposes(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, req := range []rpc.PlantRequest{
		{Label: "stale-code", Subject: "Your code", Text: "Your code is 111111.\r\n"},
		{Label: "phish", From: "=?utf-8?q?S=C3=A9curit=C3=A9?= <security@bank.example>", Subject: "Vérifiez", HTML: "<p>Sign in <a href=\"https://x.example/\">here</a></p>"},
		{Label: "both:1", From: "Bank <b@bank.example>", To: []string{"u@example.com"}, Subject: "s", Text: "t --=_x", HTML: "<b>h</b>"},
	} {
		m, err := Check(&req, rpc.CandidateSender, []string{"agent@example.com"}, now)
		if err != nil {
			t.Fatalf("%s: %v", req.Label, err)
		}
		p := mailmsg.Parse(m.Raw)
		wantText := req.Text
		if wantText == "" {
			wantText = mailmsg.HTMLText(req.HTML)
		}
		if p.Subject != req.Subject || p.Text != wantText || p.HTML != req.HTML || m.Label != req.Label {
			t.Errorf("%s: read back %+v", req.Label, p)
		}
		wantName, wantAddr := mailmsg.Sender(req.From)
		if req.From == "" {
			wantAddr = rpc.CandidateSender
		}
		if m.From != wantAddr || p.FromName != wantName || p.FromAddress != wantAddr {
			t.Errorf("%s: from %q, name %q", req.Label, m.From, p.FromName)
		}
		if len(req.To) == 0 && strings.Join(m.To, ",") != "agent@example.com" {
			t.Errorf("%s: to %v", req.Label, m.To)
		}
	}
}

// Each bad field is refused as bad input, naming the field.
func TestCheckRefuses(t *testing.T) {
	ok := rpc.PlantRequest{Label: "x", Subject: "s", Text: "t"}
	for _, c := range []struct {
		field string
		edit  func(r *rpc.PlantRequest)
		to    []string
	}{
		{"label", func(r *rpc.PlantRequest) { r.Label = "" }, nil},
		{"label", func(r *rpc.PlantRequest) { r.Label = "has space" }, nil},
		{"label", func(r *rpc.PlantRequest) { r.Label = strings.Repeat("a", 65) }, nil},
		{"from", func(r *rpc.PlantRequest) { r.From = "not an address" }, nil},
		{"to", func(r *rpc.PlantRequest) {}, []string{}},
		{"to", func(r *rpc.PlantRequest) { r.To = []string{"A <a@b.example>"} }, nil},
		{"subject", func(r *rpc.PlantRequest) { r.Subject = "a\r\nBcc: x@y" }, nil},
		{"text or html", func(r *rpc.PlantRequest) { r.Text = "" }, nil},
	} {
		r := ok
		c.edit(&r)
		to := []string{"agent@example.com"}
		if c.to != nil {
			to = c.to
		}
		_, err := Check(&r, rpc.CandidateSender, to, time.Now())
		if rpc.CodeOf(err) != rpc.CodeBadRequest || !strings.HasPrefix(err.(*rpc.Error).Message, c.field) {
			t.Errorf("%s: %v", c.field, err)
		}
	}
}

// TestLabelIsTheRegexp: validLabel answers as the regexp it replaced.
func TestLabelIsTheRegexp(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$`)
	inputs := []string{""}
	for n := 1; n <= 65; n++ {
		s := strings.Repeat("a", n)
		inputs = append(inputs, s, s+"\n", "é"+s)
		for b := range 256 {
			for _, at := range []int{0, n - 1} {
				v := []byte(s)
				v[at] = byte(b)
				inputs = append(inputs, string(v))
			}
		}
	}
	for _, s := range inputs {
		if got, want := validLabel(s), re.MatchString(s); got != want {
			t.Errorf("validLabel(%q) = %v, the regexp says %v", s, got, want)
		}
	}
}

// FuzzLabel: on any input, validLabel answers as the regexp it replaced.
func FuzzLabel(f *testing.F) {
	f.Add("signup-1:a.b_c")
	f.Add("-x")
	f.Add(strings.Repeat("a", 64))
	re := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$`)
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validLabel(s), re.MatchString(s); got != want {
			t.Fatalf("validLabel(%q) = %v, the regexp says %v", s, got, want)
		}
	})
}
