package ident

import (
	"regexp"
	"strings"
	"testing"
)

func TestFormats(t *testing.T) {
	cases := []struct {
		name string
		mint func() string
		re   string
	}{
		{"namespace", Namespace, `^trial-[0-9a-f]{32}$`},
		{"capability", Capability, `^[0-9a-f]{64}$`},
		{"inbox token", InboxToken, `^[A-Za-z0-9_-]{43}$`},
		{"grant", Grant, `^mpg_[0-9a-f]{64}$`},
		{"storage tag", StorageTag, `^wb-[0-9a-f]{48}$`},
	}
	for _, c := range cases {
		re := regexp.MustCompile(c.re)
		seen := map[string]bool{}
		for i := 0; i < 100; i++ {
			v := c.mint()
			if !re.MatchString(v) {
				t.Fatalf("%s %q does not match %s", c.name, v, c.re)
			}
			if seen[v] {
				t.Fatalf("%s repeated", c.name)
			}
			seen[v] = true
		}
	}
	if !ValidNamespace(Namespace()) {
		t.Fatal("minted namespace is not valid")
	}
}

func TestEqual(t *testing.T) {
	s := Capability()
	d := Digest(s)
	if !Equal(s, d) {
		t.Fatal("secret does not match its digest")
	}
	for _, bad := range []string{"", s[:63], s + "0", Capability(), "é"} {
		if Equal(bad, d) {
			t.Fatalf("%q matched", bad)
		}
	}
	if Equal(s, nil) {
		t.Fatal("matched an empty digest")
	}
}

func TestValidNamespace(t *testing.T) {
	for s, want := range map[string]bool{
		"a": true, "trial-0f": true, "A.b_c-9": true,
		"": false, "a/b": false, "a b": false, "é": false,
		string(make([]byte, 161)): false,
	} {
		if got := ValidNamespace(s); got != want {
			t.Errorf("ValidNamespace(%q) = %v", s, got)
		}
	}
}

// TestWordIsTheRegexp: Word answers as the regexps it replaced, for every
// byte in every position and at every length around the bounds.
func TestWordIsTheRegexp(t *testing.T) {
	for _, c := range []struct {
		re       string
		min, max int
		punct    string
	}{
		{`^[a-zA-Z0-9._-]{1,160}$`, 1, 160, "._-"},     // ValidNamespace
		{`^[A-Za-z0-9._~-]{32,256}$`, 32, 256, "._~-"}, // inbox.ValidToken
	} {
		re := regexp.MustCompile(c.re)
		var inputs []string
		for n := range c.max + 3 {
			inputs = append(inputs, strings.Repeat("a", n))
		}
		for b := range 256 {
			for _, at := range []int{0, c.min - 1, c.max - 1} {
				s := []byte(strings.Repeat("Z", c.min+1))
				if at < len(s) {
					s[max(at, 0)] = byte(b)
				}
				inputs = append(inputs, string(s), string(s)+"\n", "é"+string(s))
			}
		}
		for _, s := range inputs {
			if got, want := Word(s, c.min, c.max, c.punct), re.MatchString(s); got != want {
				t.Errorf("Word(%q, %d, %d, %q) = %v, the regexp %s says %v", s, c.min, c.max, c.punct, got, c.re, want)
			}
		}
	}
}

// FuzzWord: on any input, Word answers as the regexps it replaced.
func FuzzWord(f *testing.F) {
	f.Add("ns-1.a_b")
	f.Add(strings.Repeat("x", 160))
	f.Add("é" + strings.Repeat("~", 40))
	namespace := regexp.MustCompile(`^[a-zA-Z0-9._-]{1,160}$`)
	token := regexp.MustCompile(`^[A-Za-z0-9._~-]{32,256}$`)
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := Word(s, 1, 160, "._-"), namespace.MatchString(s); got != want {
			t.Fatalf("Word(%q, 1, 160, \"._-\") = %v, the regexp says %v", s, got, want)
		}
		if got, want := Word(s, 32, 256, "._~-"), token.MatchString(s); got != want {
			t.Fatalf("Word(%q, 32, 256, \"._~-\") = %v, the regexp says %v", s, got, want)
		}
	})
}
