package ident

import (
	"regexp"
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
