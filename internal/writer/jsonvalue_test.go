package writer

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/websitebench/mailplane/internal/limits"
)

// decodesAsJSON fails t unless decodeJSON reads b as json.Unmarshal does.
func decodesAsJSON(t *testing.T, b []byte) {
	t.Helper()
	var want any
	err := json.Unmarshal(b, &want)
	got, _, ok := decodeJSON(b)
	if ok != (err == nil) || ok && !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeJSON(%q) = %#v, %v; json.Unmarshal: %#v, %v", b, got, ok, want, err)
	}
}

var jsonCases = []string{
	``, ` `, `{}`, `[]`, ` {"a" : [1, -2.5e3, 0, -0, 1E+2, true, false, null, "x"] } `,
	`{"from":"a@b.c","to":["x@y.z"],"subject":"s","text":"Your code is 123456."}`,
	`{"a":1,"a":2}`, `{"a":{"b":{}}}`, `[[],[[]]]`, `"\"\\\/\b\f\n\r\t\u00e9\u20AC"`,
	`"\ud83d\ude00"`, `"\ud83d"`, `"\ude00"`, `"\ud83d\u0041"`, `"\ud83d\ud83d\ude00"`, `"\ud83dx"`, `"\ud83d\uZZZZ"`,
	`"é – 例"`, "\"\x7f\"", "\"\x01\"", `"\x"`, `"\u12"`, `"abc`, `"abc\`,
	`01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`, `1e400`, `-1e400`, `1e-400`, `123456789012345678901234567890`,
	`tru`, `truex`, `nul`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[1 2]`, `{,}`, `{1:2}`, `{"a":1}}`, `[`, `{`,
	"\t\r\n[\t1\r\n]\n", `{"a":1} x`, `NaN`, `Infinity`,
}

// TestDecodeJSON holds decodeJSON to json.Unmarshal on valid and broken
// JSON, and at and past encoding/json's bound on nesting.
func TestDecodeJSON(t *testing.T) {
	for _, s := range jsonCases {
		decodesAsJSON(t, []byte(s))
	}
	for _, n := range []int{limits.JSONDepth, limits.JSONDepth + 1} {
		decodesAsJSON(t, []byte(strings.Repeat("[", n)+strings.Repeat("]", n)))
		decodesAsJSON(t, []byte(strings.Repeat(`{"a":`, n)+"1"+strings.Repeat("}", n)))
	}
}

// FuzzDecodeJSON is TestDecodeJSON over any UTF-8 (parseEmail refuses
// other bytes before it decodes).
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range jsonCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if utf8.ValidString(s) {
			decodesAsJSON(t, []byte(s))
		}
	})
}
