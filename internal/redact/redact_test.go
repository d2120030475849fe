package redact

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/ident"
)

// Every example row of docs/reference.md §10 (testdata/reference-rows.tsv, which
// the mail-plane redact command's test reads too).
func TestTextReferenceRows(t *testing.T) {
	b, err := os.ReadFile("testdata/reference-rows.tsv")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		in, out, ok := strings.Cut(line, "\t")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		n++
		if got := Text(in); got != out {
			t.Errorf("Text(%q) = %q, want %q", in, got, out)
		}
	}
	if n != 15 {
		t.Fatalf("%d rows read, want §10's 15", n)
	}
}

func TestTextMintedFormats(t *testing.T) {
	secrets := []string{ident.Grant(), ident.Capability(), ident.InboxToken(), "mps_" + ident.InboxToken()[:36], "mpd_" + rand.Text()}
	for _, s := range secrets {
		for _, wrap := range []string{`{"grant":"%s"}`, "path /inbox/%s/messages/1", "%s", `x="%s"`} {
			line := strings.Replace(wrap, "%s", s, 1)
			got := Text(line)
			if strings.Contains(got, s) {
				t.Errorf("secret survived in %q", got)
			}
		}
	}
	// A prefixed secret is found inside a longer run of token characters
	// too, where the unprefixed shapes are not.
	for _, s := range secrets[3:] {
		if got := Text(strings.Repeat("a", 50) + s); strings.Contains(got, s) {
			t.Errorf("secret survived in %q", got)
		}
	}
	keep := []string{"trial-0123456789abcdef0123456789abcdef", "sha256 of 32 hex 0123456789abcdef0123456789abcdef"}
	for _, s := range keep {
		if Text(s) != s {
			t.Errorf("Text(%q) = %q, want unchanged", s, Text(s))
		}
	}
}

func TestEvidence(t *testing.T) {
	var in any
	json.Unmarshal([]byte(`{"zipcode":"12345","nested":{"Token":"x","ok":[{"otp":"1"},2]},"note":"token=abc"}`), &in)
	want := map[string]any{
		"zipcode": Marker,
		"nested":  map[string]any{"Token": Marker, "ok": []any{map[string]any{"otp": Marker}, 2.0}},
		"note":    "token=abc",
	}
	if got := Evidence(in); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v", got)
	}
}

func TestWriter(t *testing.T) {
	var buf bytes.Buffer
	g := ident.Grant()
	Writer{&buf}.Write([]byte(`{"level":"info","msg":"grant ` + g + `"}` + "\n"))
	if strings.Contains(buf.String(), g) || !strings.Contains(buf.String(), Marker) {
		t.Fatalf("got %q", buf.String())
	}
}

// FuzzWriterJSON: a JSON log line stays JSON after redaction, and no
// grant survives in it.
func FuzzWriterJSON(f *testing.F) {
	f.Add("Authorization: Bearer abc", "token=x")
	f.Add(`"quoted" \ backslash`, "\u2028 é")
	f.Add("cookie:a=b;", ident.Grant())
	f.Fuzz(func(t *testing.T, msg, detail string) {
		line, err := json.Marshal(map[string]string{"message": msg, "detail": detail, "grant": "mpg_" + strings.Repeat("a", 64)})
		if err != nil {
			return
		}
		var buf bytes.Buffer
		Writer{&buf}.Write(append(line, '\n'))
		var back map[string]string
		if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
			t.Fatalf("redacted line is not JSON: %q → %q", line, buf.String())
		}
		if back["grant"] != Marker {
			t.Fatalf("grant survived: %q", buf.String())
		}
	})
}

func TestMinted(t *testing.T) {
	grant := "mpg_" + strings.Repeat("ab", 32)
	in := "code: 123456 grant " + grant + " cap " + strings.Repeat("0f", 32) + " inbox " + strings.Repeat("A", 43) + " path " + strings.Repeat("b", 50)
	got := Minted(in)
	want := "code: 123456 grant " + Marker + " cap " + Marker + " inbox " + Marker + " path " + strings.Repeat("b", 50)
	if got != want {
		t.Fatalf("Minted = %q, want %q", got, want)
	}
}
