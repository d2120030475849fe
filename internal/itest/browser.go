package itest

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Browser is one tab of a headless Chromium (the chromium on PATH) that a
// test drives through the DevTools protocol. It records every JavaScript
// dialog the tab opens (a script that ran; each is dismissed) and every
// entry of the browser's log (a CSP violation is one).
type Browser struct {
	// Ctx drives the tab (chromedp.Do, chromedp.Run, chromedp.Call) until
	// the time given to StartBrowser runs out or the test ends.
	Ctx context.Context

	mu      sync.Mutex
	dialogs []string
	log     []*cdplog.Entry
}

// StartBrowser starts Chromium with chromedp's default options, no
// sandbox (tests run as root in containers), no GPU, a fresh profile and
// extra, and opens a tab whose context ends after timeout. The test is
// skipped (or fails, in CI) without chromium.
func StartBrowser(t testing.TB, timeout time.Duration, extra ...chromedp.ExecAllocatorOption) *Browser {
	t.Helper()
	exe := Require(t, "chromium")
	opts := append(append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir())), extra...)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	t.Cleanup(cancel)
	b := &Browser{Ctx: ctx}
	dialogEvents := chromedp.Events(ctx, page.JavascriptDialogOpening)
	logEvents := chromedp.Events(ctx, cdplog.EntryAdded)
	go func() {
		for ev, err := range dialogEvents {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.dialogs = append(b.dialogs, ev.Message)
			b.mu.Unlock()
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	go func() {
		for ev, err := range logEvents {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.log = append(b.log, ev.Entry)
			b.mu.Unlock()
		}
	}()
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return b
}

// Dialogs are the messages of the dialogs the tab opened so far.
func (b *Browser) Dialogs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.dialogs)
}

// Log is the browser's log so far, as "source: text", of the entries at
// one of levels (any level if none is given).
func (b *Browser) Log(levels ...cdplog.EntryLevel) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, e := range b.log {
		if len(levels) == 0 || slices.Contains(levels, e.Level) {
			out = append(out, string(e.Source)+": "+e.Text)
		}
	}
	return out
}

// Do runs steps in the tab and fails t, naming what, if one fails.
func (b *Browser) Do(t testing.TB, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(b.Ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Eval evaluates expr, a string-valued expression, in the tab's page.
func (b *Browser) Eval(t testing.TB, expr string) string {
	t.Helper()
	v, err := chromedp.Run(b.Ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// Frame waits (up to Bound) for a child frame of the page whose URL
// matches, and returns its id.
func (b *Browser) Frame(t testing.TB, what string, match func(url string) bool) cdp.FrameID {
	t.Helper()
	var id cdp.FrameID
	Eventually(t, "a frame "+what, Bound, func() bool {
		tree, err := chromedp.Call(b.Ctx, page.GetFrameTree, cdp.Empty{})
		if err != nil || tree.FrameTree == nil {
			return false
		}
		for _, f := range tree.FrameTree.ChildFrames {
			if match(f.Frame.URL) {
				id = f.Frame.ID
				return true
			}
		}
		return false
	})
	return id
}

// EvalIn evaluates expr once in an isolated world of frame, which shares
// the frame's document but not its scripts (a sandboxed frame has none),
// and returns its value as a string; false if the frame or its document
// is not there (yet), or expr threw.
func (b *Browser) EvalIn(frame cdp.FrameID, expr string) (string, bool) {
	world, err := chromedp.Call(b.Ctx, page.CreateIsolatedWorld, page.CreateIsolatedWorldParams{FrameID: frame})
	if err != nil {
		return "", false
	}
	yes := true
	res, err := chromedp.Call(b.Ctx, runtime.Evaluate, runtime.EvaluateParams{
		Expression: "String(" + expr + ")", ContextID: world.ExecutionContextID, ReturnByValue: &yes})
	if err != nil || res.Result == nil || res.ExceptionDetails != nil {
		return "", false
	}
	var out string
	return out, json.Unmarshal(res.Result.Value, &out) == nil
}
