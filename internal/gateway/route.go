package gateway

import (
	"errors"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// kind is what a request path asks for.
type kind int

const (
	routeNotFound     kind = iota
	routeHealth            // /healthz
	routeList              // /api/namespaces/{ns}/messages
	routeLatest            // /api/namespaces/{ns}/messages/latest
	routeMessage           // /api/namespaces/{ns}/messages/{id}
	routeInbox             // /inbox/{ns} (HTML)
	routeInboxMessage      // /inbox/{ns}/messages/{id} (HTML)
	routeEvents            // /api/namespaces/{ns}/events: the trial's trail
	routeWebhooks          // /api/namespaces/{ns}/webhooks: the trial's webhook events and attempts
)

var kindNames = [...]string{"not_found", "healthz", "list", "latest", "message", "inbox", "inbox_message", "events", "webhooks"}

func (k kind) String() string { return kindNames[k] }

// route is a parsed request path. ns is percent-decoded and not yet
// checked; id is 0 for an id too large to exist.
type route struct {
	kind kind
	ns   string
	id   int64
}

// parseRoute maps the escaped path of a request to a route, as the
// reference splits it (docs/reference.md §4.2, §4.3): leading and trailing
// slashes stripped, split on "/", the namespace segment percent-decoded.
// Unlike the reference, /messages/{anything} that is neither "latest" nor
// an id is not the list (quirk 21), and the HTML view's message links are
// served (quirk 20).
func parseRoute(escapedPath string) route {
	if escapedPath == "/healthz" {
		return route{kind: routeHealth}
	}
	seg := strings.Split(strings.Trim(escapedPath, "/"), "/")
	switch {
	case len(seg) == 4 && seg[0] == "api" && seg[1] == "namespaces" && seg[3] == "events":
		if ns, err := url.PathUnescape(seg[2]); err == nil {
			return route{kind: routeEvents, ns: ns}
		}
	case len(seg) == 4 && seg[0] == "api" && seg[1] == "namespaces" && seg[3] == "webhooks":
		if ns, err := url.PathUnescape(seg[2]); err == nil {
			return route{kind: routeWebhooks, ns: ns}
		}
	case len(seg) >= 4 && seg[0] == "api" && seg[1] == "namespaces" && seg[3] == "messages":
		ns, err := url.PathUnescape(seg[2])
		if err != nil {
			return route{}
		}
		switch {
		case len(seg) == 4:
			return route{kind: routeList, ns: ns}
		case len(seg) == 5 && seg[4] == "latest":
			return route{kind: routeLatest, ns: ns}
		case len(seg) == 5 && isID(seg[4]):
			return route{kind: routeMessage, ns: ns, id: parseID(seg[4])}
		}
	case len(seg) == 2 && seg[0] == "inbox":
		if ns, err := url.PathUnescape(seg[1]); err == nil {
			return route{kind: routeInbox, ns: ns}
		}
	case len(seg) == 4 && seg[0] == "inbox" && seg[2] == "messages" && isID(seg[3]):
		if ns, err := url.PathUnescape(seg[1]); err == nil {
			return route{kind: routeInboxMessage, ns: ns, id: parseID(seg[3])}
		}
	}
	return route{}
}

// isID reports whether s is a message id: ASCII digits (leading zeros are
// fine, as Python's int() took them).
func isID(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// parseID returns the value of an id isID accepted, or 0 (which no message
// has) when it does not fit.
func parseID(s string) int64 {
	n, err := strconv.ParseInt(strings.TrimLeft(s, "0"), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// Query parameters of list and latest.
var (
	errWait  = errors.New("invalid wait")
	errAfter = errors.New("invalid after")
	// plainSeconds is "wait=5" or "wait=2.5": seconds, as a number.
	plainSeconds = regexp.MustCompile(`^[0-9]{1,9}(\.[0-9]{1,9})?$`)
	afterSyntax  = regexp.MustCompile(`^[0-9]{1,18}$`)
)

// parseWait reads wait: a Go duration ("5s", "1500ms") or plain seconds,
// from 0 to rpc.MaxWait; "" is no wait.
func parseWait(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	var d time.Duration
	if plainSeconds.MatchString(s) {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f > rpc.MaxWait.Seconds() {
			return 0, errWait
		}
		d = time.Duration(f * float64(time.Second))
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, errWait
		}
	}
	if d < 0 || d > rpc.MaxWait {
		return 0, errWait
	}
	return d, nil
}

// parseAfter reads after: a message id; "" is 0 (every message).
func parseAfter(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	if !afterSyntax.MatchString(s) {
		return 0, errAfter
	}
	return strconv.ParseInt(s, 10, 64)
}

// firstValue is the first non-empty value of a query parameter: the
// reference's parse_qs drops empty ones.
func firstValue(q url.Values, name string) string {
	for _, v := range q[name] {
		if v != "" {
			return v
		}
	}
	return ""
}
