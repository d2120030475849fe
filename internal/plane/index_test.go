package plane

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/ident"
	"github.com/websitebench/mailplane/internal/ledger"
	"github.com/websitebench/mailplane/internal/mailmsg"
	"github.com/websitebench/mailplane/pkg/rpc"
)

// A read of a stored message, by every reader (the evaluator's gateway,
// the agent's inbox and its clicks, the operator's console, and a plane
// that has just started, whose cache is empty), runs no parser of mail:
// the index made when the message was accepted answers it, the same as
// parsing would. A message stored before indexes (no index in the
// ledger) is parsed on its read, and the counter sees it.
func TestReadsParseNothing(t *testing.T) {
	ctx := context.Background()
	l, b, socket, id, gateway := servedTrial(t)
	inbox := client(t, socket, id.InboxGrant)
	sent, err := client(t, socket, id.WriterGrant).Send(ctx, &rpc.SendRequest{Via: rpc.ViaSMTP, From: rpc.CandidateSender,
		To: []string{"user@example.com"}, Raw: []byte(indexedMail)})
	if err != nil {
		t.Fatal(err)
	}

	before := mailmsg.Parses()
	read := func(seq int64) (rpc.Message, rpc.Message, rpc.ConsoleMessage) {
		t.Helper()
		gm, err := gateway.Get(ctx, &rpc.ReadRequest{Namespace: id.Namespace, Capability: id.ReadCapability, ID: seq})
		if err != nil {
			t.Fatal(err)
		}
		im, err := inbox.Get(ctx, &rpc.ReadRequest{ID: seq, Door: rpc.DoorInboxMCP})
		if err != nil {
			t.Fatal(err)
		}
		cm, err := b.consoleMessages(ctx, id.Namespace, seq)
		if err != nil || len(cm) != 1 {
			t.Fatalf("console: %d messages, %v", len(cm), err)
		}
		return gm, im, cm[0]
	}
	gm, im, cm := read(sent.Seq)
	// The inbox's links, as its pings number them: the text's, then the
	// HTML's others.
	for link, want := range map[int]string{0: "", 1: "", 2: rpc.CodeNotFound} {
		if err := inbox.Click(ctx, &rpc.ClickRequest{ID: sent.Seq, Link: link}); rpc.CodeOf(err) != want {
			t.Fatalf("click on link %d: %v, want %q", link, err, want)
		}
	}
	// A plane started over the same ledger has nothing cached.
	fresh, err := NewBroker(l, nil, Quotas{}, zerolog.Nop()).consoleMessages(ctx, id.Namespace, sent.Seq)
	if err != nil || len(fresh) != 1 {
		t.Fatalf("a fresh plane's console: %d messages, %v", len(fresh), err)
	}
	if n := mailmsg.Parses() - before; n != 0 {
		t.Fatalf("reads of a stored message ran the mail parsers %d times", n)
	}

	if gm.Subject != "Your code is 482913" || gm.FromName != "Site Team" || !strings.Contains(gm.Text, "482913") ||
		!strings.Contains(gm.HTML, "help.example") || len(gm.Attachments) != 2 || gm.Attachments[0].FileName != "invoice.pdf" ||
		gm.Attachments[0].Checksums.SHA256 == "" || gm.Inline != nil || gm.HTMLText != "" ||
		gm.Found == nil || gm.Found.OTP != "482913" || gm.Found.ActionLink != "https://site.example/verify?t=abc" {
		t.Fatalf("the gateway's read: %+v", gm)
	}
	if len(im.Inline) != 1 || im.Inline[0].ContentID != "logo@site" || len(im.Inline[0].Data) == 0 ||
		im.Found != nil || !strings.Contains(im.HTMLText, "Verify") {
		t.Fatalf("the inbox's read: %+v", im)
	}
	if !slices.Contains(cm.Codes, "482913") || cm.ActionLink != "https://site.example/verify?t=abc" || len(cm.Links) != 2 ||
		len(cm.Headers) != 5 || cm.Attachments[0].Checksums != (rpc.Checksums{}) {
		t.Fatalf("the console's read: %+v", cm)
	}
	if !reflect.DeepEqual(fresh[0], cm) {
		t.Fatalf("a fresh plane's console read %+v, the first %+v", fresh[0], cm)
	}

	// The same bytes stored the way older planes stored them, with no
	// index: parsed on their read, to the same message.
	raw, err := l.Body(ctx, id.Namespace, strconv.FormatInt(sent.Seq, 10))
	if err != nil {
		t.Fatal(err)
	}
	old, _, err := l.Accept(ctx, &ledger.Offer{Namespace: id.Namespace, UUID: ident.UUID(), From: rpc.CandidateSender,
		To: []string{"user@example.com"}, Size: len(raw), Body: raw})
	if err != nil {
		t.Fatal(err)
	}
	before = mailmsg.Parses()
	ogm, oim, ocm := read(old.Seq)
	if mailmsg.Parses() == before {
		t.Fatal("a message with no index was read without parsing it")
	}
	same := func(m rpc.Message) rpc.Message {
		m.ID, m.UUID, m.Received = 0, "", time.Time{} // only the content is compared
		return m
	}
	for i, pair := range [][2]rpc.Message{{gm, ogm}, {im, oim}, {cm.Message, ocm.Message}} {
		if !reflect.DeepEqual(same(pair[0]), same(pair[1])) {
			t.Fatalf("read %d: indexed %+v, parsed %+v", i, pair[0], pair[1])
		}
	}
	if !reflect.DeepEqual([]any{cm.Headers, cm.Codes, cm.Links, cm.ActionLink}, []any{ocm.Headers, ocm.Codes, ocm.Links, ocm.ActionLink}) {
		t.Fatalf("console: indexed %+v, parsed %+v", cm, ocm)
	}
}

// The parsers of mail are reached from the plane's code in three places
// only: a send and a plant index what they accept, and index (index.go)
// indexes a message stored before indexes were. Everything else reads
// the index; TestReadsParseNothing shows that index parses nothing for a
// message that has one.
func TestParsersOnlyAtAccept(t *testing.T) {
	parsers := map[string]func(name string) bool{
		"mailmsg":   func(n string) bool { return n == "Parse" || n == "Headers" || n == "HTMLText" },
		"mailindex": func(n string) bool { return n == "Of" },
		"otp":       func(string) bool { return true },
		"render":    func(string) bool { return true },
		"urls":      func(string) bool { return true },
		"xhtml":     func(string) bool { return true },
		"html":      func(string) bool { return true },
		"multipart": func(string) bool { return true },
		"mail":      func(string) bool { return true },
	}
	allowed := map[string]bool{"Send": true, "Plant": true, "index": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		imported := map[string]string{} // local name: import path's last element
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			local := path[strings.LastIndex(path, "/")+1:]
			if im.Name != nil {
				local = im.Name.Name
			}
			imported[local] = path[strings.LastIndex(path, "/")+1:]
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			ast.Inspect(d, func(n ast.Node) bool {
				sel, isSel := n.(*ast.SelectorExpr)
				if !isSel {
					return true
				}
				x, isIdent := sel.X.(*ast.Ident)
				if !isIdent {
					return true
				}
				pkg, isPkg := imported[x.Name]
				if !isPkg || parsers[pkg] == nil || !parsers[pkg](sel.Sel.Name) {
					return true
				}
				where := "a declaration"
				if ok {
					where = fn.Name.Name
				}
				seen = append(seen, where)
				if !ok || !allowed[fn.Name.Name] {
					t.Errorf("%s: %s calls %s.%s", fset.Position(sel.Pos()), where, x.Name, sel.Sel.Name)
				}
				return true
			})
		}
	}
	for fn := range allowed {
		if !slices.Contains(seen, fn) {
			t.Errorf("%s reaches no parser: the test's list is out of date", fn)
		}
	}
}
