package rpc_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/websitebench/mailplane/pkg/rpc"
)

// TestClassOf: the class of every kind of error a door can hold.
func TestClassOf(t *testing.T) {
	for _, c := range []struct {
		err   error
		class rpc.Class
		code  string
	}{
		{nil, "", ""},
		{rpc.Errorf(rpc.CodeNotFound, "x"), rpc.Refused, rpc.CodeNotFound},
		{fmt.Errorf("wrapped: %w", rpc.Errorf(rpc.CodeSealed, "x")), rpc.Refused, rpc.CodeSealed},
		{rpc.Errorf(rpc.CodeStoreUnavailable, "x"), rpc.Outage, rpc.CodeStoreUnavailable},
		{rpc.Errorf(rpc.CodePlaneUnavailable, "x"), rpc.Outage, rpc.CodePlaneUnavailable},
		{rpc.Errorf(rpc.CodeDeadlineExceeded, "x"), rpc.Outage, rpc.CodeDeadlineExceeded},
		{rpc.Errorf(rpc.CodeInternal, "x"), rpc.Bug, rpc.CodeInternal},
		// Decoded without a class (an older plane): its code's.
		{&rpc.Error{Code: rpc.CodeStoreUnavailable}, rpc.Outage, rpc.CodeStoreUnavailable},
		{&rpc.Error{Code: rpc.CodeForbidden}, rpc.Refused, rpc.CodeForbidden},
		// A class this side does not know, or no code: drift, a bug.
		{&rpc.Error{Code: rpc.CodeForbidden, Class: "maybe"}, rpc.Bug, rpc.CodeInternal},
		{&rpc.Error{}, rpc.Bug, rpc.CodeInternal},
		// A plain error is a bug, not an outage; a context's end is.
		{errors.New("nil map"), rpc.Bug, rpc.CodeInternal},
		{context.DeadlineExceeded, rpc.Outage, rpc.CodeDeadlineExceeded},
		{fmt.Errorf("x: %w", context.Canceled), rpc.Outage, rpc.CodeDeadlineExceeded},
	} {
		if got := rpc.ClassOf(c.err); got != c.class {
			t.Errorf("ClassOf(%v) = %q, want %q", c.err, got, c.class)
		}
		if got := rpc.CodeOf(c.err); got != c.code {
			t.Errorf("CodeOf(%v) = %q, want %q", c.err, got, c.code)
		}
		if rpc.IsOutage(c.err) != (c.class == rpc.Outage) {
			t.Errorf("IsOutage(%v) = %t", c.err, rpc.IsOutage(c.err))
		}
	}
}

// TestAnswers: a door's table answers a named refusal as named, every
// outage alike, and a bug or an unnamed refusal as a bug.
func TestAnswers(t *testing.T) {
	a := rpc.Answers[int]{Refused: map[string]int{rpc.CodeNotFound: 404}, Outage: 503, Bug: 500}
	for _, c := range []struct {
		err    error
		answer int
		class  rpc.Class
	}{
		{rpc.Errorf(rpc.CodeNotFound, "x"), 404, rpc.Refused},
		{rpc.Errorf(rpc.CodeSealed, "x"), 500, rpc.Bug},
		{rpc.Errorf(rpc.CodeStoreUnavailable, "x"), 503, rpc.Outage},
		{context.DeadlineExceeded, 503, rpc.Outage},
		{rpc.Errorf(rpc.CodeInternal, "x"), 500, rpc.Bug},
		{errors.New("plain"), 500, rpc.Bug},
	} {
		if got, class := a.For(c.err); got != c.answer || class != c.class {
			t.Errorf("For(%v) = %d %q, want %d %q", c.err, got, class, c.answer, c.class)
		}
	}
}

// TestClientClasses: over a real Unix socket, an answer the client cannot
// decode (wire drift) is a bug, never an outage; a plane that is not
// there is an outage; a coded answer keeps its class.
func TestClientClasses(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "plane.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	answers := map[string]struct {
		status int
		body   string
	}{
		"/v1/health":                   {http.StatusOK, `{"role":7}`},     // a field of another type
		"/v1/" + rpc.MethodTrialList:   {http.StatusOK, `{"trials":[`},    // cut short
		"/v1/" + rpc.MethodTrialInfo:   {http.StatusBadGateway, `<html>`}, // not the plane's error shape
		"/v1/" + rpc.MethodTrialSeal:   {http.StatusServiceUnavailable, `{"code":"store_unavailable","class":"outage","message":"m"}`},
		"/v1/" + rpc.MethodTrialRotate: {http.StatusInternalServerError, `{"code":"internal_error","class":"bug","message":"m"}`},
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := answers[r.URL.Path]
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		w.Write([]byte(a.body))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	c := rpc.NewClient(socket, "mpg_test")
	t.Cleanup(c.Close)
	ctx := context.Background()

	check := func(what string, err error, class rpc.Class, code string) {
		t.Helper()
		if rpc.ClassOf(err) != class || rpc.CodeOf(err) != code {
			t.Errorf("%s: %v: class %q code %q, want %q %q", what, err, rpc.ClassOf(err), rpc.CodeOf(err), class, code)
		}
	}
	_, err = c.Health(ctx)
	check("a field of another type", err, rpc.Bug, rpc.CodeInternal)
	var list rpc.TrialListResponse
	check("a cut answer", c.Call(ctx, rpc.MethodTrialList, &rpc.TrialListRequest{}, &list), rpc.Bug, rpc.CodeInternal)
	check("a 502 page", c.Call(ctx, rpc.MethodTrialInfo, &rpc.Empty{}, nil), rpc.Bug, rpc.CodeInternal)
	check("the plane's outage", c.Call(ctx, rpc.MethodTrialSeal, &rpc.Empty{}, nil), rpc.Outage, rpc.CodeStoreUnavailable)
	check("the plane's bug", c.Call(ctx, rpc.MethodTrialRotate, &rpc.Empty{}, nil), rpc.Bug, rpc.CodeInternal)

	gone := rpc.NewClient(filepath.Join(t.TempDir(), "none.sock"), "mpg_test")
	t.Cleanup(gone.Close)
	_, err = gone.Health(ctx)
	check("no plane", err, rpc.Outage, rpc.CodePlaneUnavailable)
}
