package inbox

import (
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/websitebench/mailplane/internal/ident"
)

const testToken = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ"

// tokenSyntax is an inbox token's syntax as a regexp: the fuzz target's
// oracle, apart from ValidToken's loop.
var tokenSyntax = regexp.MustCompile(`^[A-Za-z0-9._~-]{32,256}$`)

func TestParseRoute(t *testing.T) {
	tok := ident.Digest(testToken)
	type want struct {
		kind kind
		id   int64
	}
	for path, w := range map[string]want{
		"":                                      {routeRoot, 0},
		"/":                                     {routeRoot, 0},
		"/healthz":                              {routeHealth, 0},
		"/healthz/":                             {routeNotFound, 0},
		"/inbox":                                {routeNotFound, 0},
		"/inbox/" + testToken:                   {routeInbox, 0},
		"/inbox/" + testToken + "///":           {routeInbox, 0},
		"///inbox/" + testToken:                 {routeInbox, 0},
		"/inbox/%61" + testToken[1:]:            {routeInbox, 0},
		"/%69nbox/" + testToken:                 {routeInbox, 0},
		"/inbox/" + testToken + "/messages/7":   {routeMessage, 7},
		"/inbox/" + testToken + "/messages/007": {routeMessage, 7},
		"/inbox/" + testToken + "/messages/0":   {routeMessage, 0},
		"/inbox/" + testToken + "/messages/" + strings.Repeat("9", 25): {routeMessage, 0},
		"/inbox/" + testToken + "/messages/-7":                         {routeNotFound, 0},
		"/inbox/" + testToken + "/messages/7/":                         {routeMessage, 7},
		"/inbox/" + testToken + "/messages/7/8":                        {routeNotFound, 0},
		"/inbox/" + testToken + "/messages/7/text":                     {routeText, 7},
		"/inbox/" + testToken + "/messages/07/html/":                   {routeFrame, 7},
		"/inbox/" + testToken + "/messages/7/HTML":                     {routeNotFound, 0},
		"/inbox/" + testToken + "/messages/7/html/x":                   {routeNotFound, 0},
		"/inbox/" + testToken + "/messages":                            {routeNotFound, 0},
		"/inbox/" + testToken + "/%6dessages/7":                        {routeMessage, 7},
		"/inbox/" + testToken + "/x":                                   {routeNotFound, 0},
		"/inbox/" + testToken[1:]:                                      {routeNotFound, 0},
		"/inbox/" + testToken + "%2F":                                  {routeNotFound, 0},
		"/inbox/%zz":                                                   {routeNotFound, 0},
		"/inbox//" + testToken:                                         {routeNotFound, 0},
		"/inbox/" + testToken + "/messages/7/ping/0":                   {routePing, 7},
		"/inbox/" + testToken + "/messages/7/ping/12/":                 {routePing, 7},
		"/inbox/" + testToken + "/messages/7/ping/-1":                  {routeNotFound, 0},
		"/inbox/" + testToken + "/messages/7/ping/1/2":                 {routeNotFound, 0},
		"/inbox/" + testToken + "/messages/7/pong/1":                   {routeNotFound, 0},
		"/mcp/" + testToken:                                            {routeMCP, 0},
		"/mcp/" + testToken + "/":                                      {routeMCP, 0},
		"/mcp/" + testToken + "/x":                                     {routeNotFound, 0},
		"/mcp/" + testToken[1:]:                                        {routeNotFound, 0},
		"/mcp":                                                         {routeNotFound, 0},
	} {
		if rt := parseRoute(path, tok); rt.kind != w.kind || rt.id != w.id {
			k, id := rt.kind, rt.id
			t.Errorf("parseRoute(%q) = %v %d, want %v %d", path, k, id, w.kind, w.id)
		}
		// A shared inbox routes the same paths, with the token they name.
		if rt := parseRoute(path, nil); w.kind != routeNotFound && (rt.kind != w.kind || rt.id != w.id || (rt.kind >= routeInbox && rt.token != testToken)) {
			t.Errorf("shared parseRoute(%q) = %+v, want %v %d", path, rt, w.kind, w.id)
		}
	}
}

// FuzzParseRoute: no path reaches a page of the inbox unless its second
// segment, decoded, is the token.
func FuzzParseRoute(f *testing.F) {
	for _, s := range []string{"/", "/healthz", "/inbox/" + testToken, "/inbox/" + testToken + "/messages/01", "/inbox/%61bc", "/inbox/" + testToken + "/messages/99999999999999999999",
		"/inbox/" + testToken + "/messages/1/ping/3", "/mcp/" + testToken, "/inbox/" + testToken + "/messages/2/text", "/inbox/" + testToken + "/messages/2/html"} {
		f.Add(s)
	}
	tok := ident.Digest(testToken)
	f.Fuzz(func(t *testing.T, path string) {
		rt := parseRoute(path, tok)
		k, id := rt.kind, rt.id
		if shared := parseRoute(path, nil); shared.kind >= routeInbox && !tokenSyntax.MatchString(shared.token) {
			t.Fatalf("shared parseRoute(%q) routed a malformed token", path)
		}
		if id < 0 || (k != routeMessage && k != routeText && k != routeFrame && k != routePing && id != 0) || (k == routePing && rt.link < -1) {
			t.Fatalf("parseRoute(%q) = %+v", path, rt)
		}
		if k < routeInbox {
			return
		}
		seg := strings.Split(strings.Trim(path, "/"), "/")
		if len(seg) < 2 {
			t.Fatalf("%q routed to %v", path, k)
		}
		if d, err := url.PathUnescape(seg[1]); err != nil || d != testToken {
			t.Fatalf("%q reached %v without the token", path, k)
		}
	})
}
