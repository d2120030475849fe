package mailpit

import (
	"regexp"
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/complexity"
)

// variants are s with every byte in turn at each of positions, and s
// shortened and lengthened by one.
func variants(s string, positions ...int) []string {
	out := []string{s, s[:len(s)-1], s + s[len(s)-1:], s + "\n", "é" + s}
	for b := range 256 {
		for _, at := range positions {
			v := []byte(s)
			v[at] = byte(b)
			out = append(out, string(v))
		}
	}
	return out
}

// TestSyntaxIsTheRegexp: validTag, validID and queuedID answer as the
// regexps they replaced.
func TestSyntaxIsTheRegexp(t *testing.T) {
	tag := regexp.MustCompile(`^wb-[0-9a-f]{48}$`)
	for _, s := range append(variants(wireTag, 0, 2, 3, 50), "", "wb-") {
		if got, want := validTag(s), tag.MatchString(s); got != want {
			t.Errorf("validTag(%q) = %v, the regexp says %v", s, got, want)
		}
	}
	id := regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	inputs := []string{""}
	for n := 1; n <= 65; n++ {
		inputs = append(inputs, variants(strings.Repeat("x", n), 0, n-1)...)
	}
	for _, s := range inputs {
		if got, want := validID(s), id.MatchString(s); got != want {
			t.Errorf("validID(%q) = %v, the regexp says %v", s, got, want)
		}
	}
	queued := regexp.MustCompile(`queued as ([A-Za-z0-9_-]{1,64})`)
	for _, s := range append(inputs, "250 2.0.0 Ok: queued as AbC_-9", "queued as  x", "queued as queued as x", "queued as ", "queued as é queued as y z",
		"Ok: queued as "+strings.Repeat("a", 70), "250 Ok", "queued as\tx") {
		for _, line := range []string{s, "250 2.0.0 Ok: queued as " + s, "queued as " + s} {
			want := ""
			if m := queued.FindStringSubmatch(line); m != nil {
				want = m[1]
			}
			if got := queuedID(line); got != want {
				t.Errorf("queuedID(%q) = %q, the regexp finds %q", line, got, want)
			}
		}
	}
}

// FuzzSyntax: on any input, validTag, validID and queuedID answer as the
// regexps they replaced.
func FuzzSyntax(f *testing.F) {
	f.Add(wireTag)
	f.Add("250 2.0.0 Ok: queued as 0UkBLApjmo3AmeSLjXZ00w")
	f.Add("queued as é queued as y z")
	tag := regexp.MustCompile(`^wb-[0-9a-f]{48}$`)
	id := regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	queued := regexp.MustCompile(`queued as ([A-Za-z0-9_-]{1,64})`)
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validTag(s), tag.MatchString(s); got != want {
			t.Fatalf("validTag(%q) = %v, the regexp says %v", s, got, want)
		}
		if got, want := validID(s), id.MatchString(s); got != want {
			t.Fatalf("validID(%q) = %v, the regexp says %v", s, got, want)
		}
		want := ""
		if m := queued.FindStringSubmatch(s); m != nil {
			want = m[1]
		}
		if got := queuedID(s); got != want {
			t.Fatalf("queuedID(%q) = %q, the regexp finds %q", s, got, want)
		}
	})
}

// TestQueuedIDLinear: finding the ID runs in time linear in the reply,
// however many markers lead nowhere.
func TestQueuedIDLinear(t *testing.T) {
	for name, unit := range map[string]string{"markers without an ID": "queued as .", "near markers": "queued as\tx"} {
		t.Run(name, func(t *testing.T) {
			complexity.Linear(t, "queuedID/"+name, func(n int) func() {
				s := strings.Repeat(unit, n)
				return func() { queuedID(s) }
			}, 200000)
		})
	}
}
