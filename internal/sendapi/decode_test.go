package sendapi

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/complexity"
)

func TestSplitList(t *testing.T) {
	for in, want := range map[string]string{
		`a@example.com, b@example.com`:              `[a@example.com b@example.com]`,
		`"Doe, Jane" <j@example.com>,x@example.com`: `["Doe, Jane" <j@example.com> x@example.com]`,
		`"a \", b" <a@b>, <c,d@e>`:                  `["a \", b" <a@b> <c,d@e>]`,
		` , ,`:                                      `[]`,
	} {
		if got := fmt.Sprint(SplitList(in)); got != want {
			t.Errorf("%q: %s, want %s", in, got, want)
		}
	}
}

func TestDecodeJSONNamesTheField(t *testing.T) {
	var v struct{ To []string }
	if e := DecodeJSON([]byte(`{"To":"a"}`), &v); e == nil || e.Field != "To" {
		t.Fatalf("%+v", e)
	}
	for _, body := range []string{"{} {}", "\xff", "{"} {
		if e := DecodeJSON([]byte(body), &v); e == nil || e.Failure != Invalid {
			t.Fatalf("%q: %+v", body, e)
		}
	}
}

// FuzzSplitList: every piece is a trimmed, non-empty part of the input,
// in order.
func FuzzSplitList(f *testing.F) {
	f.Add(`"a \", b" <a@b>, <c,d@e>,, x`)
	f.Fuzz(func(t *testing.T, s string) {
		rest := s
		for _, p := range SplitList(s) {
			i := strings.Index(rest, p)
			if p == "" || p != strings.TrimSpace(p) || i < 0 {
				t.Fatalf("piece %q of %q", p, s)
			}
			rest = rest[i+len(p):]
		}
	})
}

func TestSplitListLinear(t *testing.T) {
	for unit, repeat := range map[string]int{`"a,\"<`: 24, "<a,": 120, "a@b.c, ": 24} {
		complexity.Linear(t, "SplitList/"+unit, func(n int) func() {
			s := strings.Repeat(unit, n)
			return complexity.Repeat(repeat, func() { SplitList(s) })
		}, 20_000)
	}
}

// TestFaultAnswer: a fault's status and Retry-After override the
// provider's status for the failure, in its shape.
func TestFaultAnswer(t *testing.T) {
	w := httptest.NewRecorder()
	e := Fail(Unavailable)
	e.Status, e.RetryAfter = 502, 3
	e.Answer(w, 503, map[string]string{"message": "x"})
	if w.Code != 502 || w.Header().Get("Retry-After") != "3" || w.Body.String() != `{"message":"x"}` {
		t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
	}
	w = httptest.NewRecorder()
	Fail(Quota).Answer(w, 429, map[string]string{})
	if w.Code != 429 || w.Header().Get("Retry-After") != "" {
		t.Fatalf("%d %v", w.Code, w.Header())
	}
}
