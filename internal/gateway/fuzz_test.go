package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/websitebench/mailplane/pkg/rpc"
)

func TestParseRoute(t *testing.T) {
	for path, want := range map[string]route{
		"/healthz":                            {kind: routeHealth},
		"/healthz/":                           {},
		"/":                                   {},
		"/api/namespaces/ns/messages":         {kind: routeList, ns: "ns"},
		"//api/namespaces/ns/messages//":      {kind: routeList, ns: "ns"},
		"/api/namespaces/n%2Fs/messages":      {kind: routeList, ns: "n/s"},
		"/api/namespaces/n%zz/messages":       {},
		"/api/namespaces/ns/messages/latest":  {kind: routeLatest, ns: "ns"},
		"/api/namespaces/ns/messages/latest/": {kind: routeLatest, ns: "ns"},
		"/api/namespaces/ns/messages/007":     {kind: routeMessage, ns: "ns", id: 7},
		"/api/namespaces/ns/messages/" + strings.Repeat("9", 30): {kind: routeMessage, ns: "ns", id: 0},
		"/api/namespaces/ns/messages/0":                          {kind: routeMessage, ns: "ns", id: 0},
		"/api/namespaces/ns/messages/-1":                         {},
		"/api/namespaces/ns/messages/foo":                        {},
		"/api/namespaces/ns/messages/1/2":                        {},
		"/api/namespaces/ns":                                     {},
		"/api/namespaces/ns/other":                               {},
		"/API/namespaces/ns/messages":                            {},
		"/inbox/ns":                                              {kind: routeInbox, ns: "ns"},
		"/inbox/ns/messages/12":                                  {kind: routeInboxMessage, ns: "ns", id: 12},
		"/inbox/ns/messages/latest":                              {},
		"/inbox/ns/messages":                                     {},
		"/inbox":                                                 {},
	} {
		if got := parseRoute(path); got != want {
			t.Errorf("parseRoute(%q) = %+v, want %+v", path, got, want)
		}
	}
}

func TestParseWait(t *testing.T) {
	for s, want := range map[string]time.Duration{
		"": 0, "0": 0, "5": 5 * time.Second, "2.5": 2500 * time.Millisecond, "60": time.Minute,
		"1500ms": 1500 * time.Millisecond, "5s": 5 * time.Second, "1m": time.Minute, "0.001": time.Millisecond,
	} {
		if got, err := parseWait(s); err != nil || got != want {
			t.Errorf("parseWait(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"61", "60.001", "61s", "2m", "-1s", "-1", "1e3", "soon", "5 s", " 5", "NaN", "Inf", "0x10", "1h", "99999999999999999999"} {
		if d, err := parseWait(s); err == nil {
			t.Errorf("parseWait(%q) = %v, want an error", s, d)
		}
	}
}

// FuzzParseRoute: any path parses without panic into a route whose parts
// are consistent with its kind.
func FuzzParseRoute(f *testing.F) {
	for _, s := range []string{"/healthz", "/api/namespaces/ns/messages", "/api/namespaces/n%2Fs/messages/latest", "/api/namespaces/ns/messages/00012", "/inbox/ns/messages/1", "//", "/api/namespaces/%/messages"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		r := parseRoute(path)
		if r.id < 0 {
			t.Fatalf("negative id %d from %q", r.id, path)
		}
		switch r.kind {
		case routeNotFound, routeHealth:
			if r.ns != "" || r.id != 0 {
				t.Fatalf("%q: %+v", path, r)
			}
		case routeList, routeLatest, routeInbox:
			if r.id != 0 {
				t.Fatalf("%q: %+v", path, r)
			}
		}
		if r.kind != routeNotFound && !strings.HasPrefix(strings.TrimLeft(path, "/"), "api/") && !strings.HasPrefix(strings.TrimLeft(path, "/"), "inbox/") && r.kind != routeHealth {
			t.Fatalf("%q routed to %v", path, r.kind)
		}
	})
}

// FuzzParseWait: a wait is either refused or between 0 and rpc.MaxWait.
func FuzzParseWait(f *testing.F) {
	for _, s := range []string{"5s", "1500ms", "2.5", "60", "61", "-1s", "1e3", "999999999.999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseWait(s)
		if err == nil && (d < 0 || d > rpc.MaxWait) {
			t.Fatalf("parseWait(%q) = %v", s, d)
		}
		if a, err := parseAfter(s); err == nil && a < 0 {
			t.Fatalf("parseAfter(%q) = %d", s, a)
		}
	})
}
