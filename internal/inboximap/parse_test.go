package inboximap

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/emersion/go-imap"
	"github.com/rs/zerolog"

	"github.com/websitebench/mailplane/internal/complexity"
	"github.com/websitebench/mailplane/internal/limits"
)

// parsed is what the server's reading of a client's bytes made of them.
type parsed struct {
	commands int  // lines that parsed as a command the server knows, with valid arguments
	lines    int  // lines read, parsed or not
	literal  int  // the longest literal accepted
	ended    bool // the reading ended on a line over the bound
}

// countingReader counts the bytes read, so that a parse error that
// consumes nothing ends the loop.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// parseClient reads data as the IMAP door's server does (newIMAP's
// configuration: its line and literal bounds, its commands and IDLE's
// wrapper): a line at a time with go-imap's reader, a BAD line skipped as
// the server answers it, each line's command looked up and its arguments
// parsed by its handler.
func parseClient(data []byte) parsed {
	is := newIMAP(&Server{}, nil, zerolog.Nop())
	continues := make(chan bool)
	go func() {
		for range continues { // the server's "+ send literal"
		}
	}()
	defer close(continues)
	cr := &countingReader{r: bytes.NewReader(data)}
	br := bufio.NewReader(io.TeeReader(cr, &lineTap{}))
	r := imap.NewServerReader(br, continues)
	r.MaxLiteralSize = is.MaxLiteralSize
	var out parsed
	for {
		before := cr.n
		fields, err := r.ReadLine()
		if err == io.EOF {
			return out
		}
		out.lines++
		if errors.Is(err, errTooMuch) {
			out.ended = true
			return out
		}
		if err != nil {
			if !imap.IsParseError(err) || cr.n == before && br.Buffered() == 0 {
				return out
			}
			continue
		}
		for _, f := range fields {
			if l, ok := f.(imap.Literal); ok {
				out.literal = max(out.literal, l.Len())
			}
		}
		cmd := &imap.Command{}
		if cmd.Parse(fields) != nil {
			continue
		}
		newHandler := is.Command(cmd.Name)
		if newHandler == nil {
			continue
		}
		if newHandler().Parse(cmd.Arguments) == nil {
			out.commands++
		}
	}
}

func TestParseClient(t *testing.T) {
	lit := strings.Repeat("x", limits.IMAPLiteralBytes)
	long := parseClient([]byte("a0 NOOP\r\na1 SEARCH" + strings.Repeat(" x", limits.IMAPLineBytes/2) + "\r\na2 NOOP\r\n"))
	if !long.ended || long.commands != 1 {
		t.Errorf("a line over the bound: %+v, want the reading ended after one command", long)
	}
	atom := parseClient([]byte("a0 NOOP\r\na1 SEARCH SUBJECT " + strings.Repeat("y", limits.IMAPAtomBytes+1) + "\r\na2 NOOP\r\n"))
	if !atom.ended || atom.commands > 1 {
		t.Errorf("an atom over the bound: %+v, want the reading ended", atom)
	}
	// A command of literals: each ends a line, the command is bounded.
	lits := func(n int) string {
		return "a1 SEARCH" + strings.Repeat(" TEXT {2000+}\r\n"+strings.Repeat("z", 2000), n) + "\r\n"
	}
	if endless := parseClient([]byte(lits(limits.IMAPCommandBytes/2000 + 1))); !endless.ended || endless.commands != 0 {
		t.Errorf("a command over its bound: %+v, want the reading ended", endless)
	}
	for _, c := range []struct {
		in       string
		commands int
		literal  int
	}{
		{lits(limits.IMAPCommandBytes/2000 - 1), 1, 2000},
		{"a1 LOGIN agent secret\r\na2 SELECT INBOX\r\na3 UID FETCH 1:* (FLAGS BODY.PEEK[HEADER.FIELDS (SUBJECT)])\r\n", 3, 0},
		{"a1 SEARCH ALL\r\na2 IDLE\r\nDONE\r\na3 LOGOUT\r\n", 3, 0},
		{"a1 LOGIN {5}\r\nagent {6+}\r\nsecret\r\n", 1, 6},
		{"a1 LOGIN agent {" + strconv.Itoa(len(lit)) + "}\r\n" + lit + "\r\n", 1, len(lit)},
		// One byte over the bound: BAD, and its bytes are never a literal.
		{"a1 LOGIN agent {" + strconv.Itoa(len(lit)+1) + "}\r\n" + strings.Repeat("x ", len(lit)/2) + "x\r\n", 0, 0},
		{"a1 FETCH 1 (BODY[\r\n", 0, 0},
		{longestLine(), 1, 0},
		// An atom within square brackets goes on past spaces; one in
		// quotes is a quoted string, never an atom.
		{"a1 FETCH 1 (BODY.PEEK[HEADER.FIELDS (" + strings.Repeat("X ", limits.IMAPAtomBytes/2-40) + "Y)])\r\n", 1, 0},
		{"a1 SEARCH SUBJECT \"" + strings.Repeat("y", limits.IMAPLineBytes-30) + "\"\r\n", 1, 0},
		{"a1 NOSUCH\r\n", 0, 0},
	} {
		got := parseClient([]byte(c.in))
		if got.commands != c.commands || got.literal != c.literal || got.ended {
			t.Errorf("%.60q: %+v, want %d commands, literal %d", c.in, got, c.commands, c.literal)
		}
	}
}

// FuzzParseClient: whatever a client sends, the server's reading of it
// neither panics nor accepts a literal over the bound, and every command
// it parses took a line feed of its own.
func FuzzParseClient(f *testing.F) {
	for _, s := range []string{
		"a1 LOGIN agent secret\r\n", "a1 AUTHENTICATE PLAIN AGFnZW50AHNlY3JldA==\r\n", "a2 SELECT INBOX\r\n", "a2 EXAMINE \"INBOX\"\r\n",
		"a3 UID FETCH 1:*,7 (UID FLAGS RFC822.SIZE BODY.PEEK[1.MIME] BODY[]<0.100>)\r\n", "a4 SEARCH OR FROM x (SUBJECT \"y z\") NOT SEEN 1:3\r\n",
		"a5 STORE 1 +FLAGS.SILENT (\\Seen \\Deleted)\r\n", "a6 APPEND INBOX (\\Seen) {3+}\r\nabc\r\n", "a7 IDLE\r\nDONE\r\n",
		"a8 STATUS INBOX (MESSAGES UIDNEXT UIDVALIDITY UNSEEN)\r\n", "a9 LIST \"\" *\r\n", "b1 LOGIN {99999999}\r\n", "b2 SEARCH TEXT {3+}\r\nabc TEXT {5}\r\nhello\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got := parseClient(data)
		if got.literal > limits.IMAPLiteralBytes {
			t.Fatalf("a literal of %d bytes was accepted", got.literal)
		}
		// A command ends with its line's CRLF (a BAD one may end mid-line:
		// the server reads on from there, as go-imap does).
		if got.commands > got.lines || got.commands > bytes.Count(data, []byte("\n")) {
			t.Fatalf("%+v from %d line feeds", got, bytes.Count(data, []byte("\n")))
		}
	})
}

// TestParseClientLinear: reading commands is linear in their number:
// FETCHes of hundreds of ids, SEARCHes of hundreds of criteria, short
// commands. (A line's own cost grows with its square, go-imap's; the
// line bound caps it: BenchmarkLongestLine.)
func TestParseClientLinear(t *testing.T) {
	var fetch strings.Builder
	fetch.WriteString("a1 UID FETCH 1")
	for i := 1; fetch.Len() < limits.IMAPLineBytes/4; i++ {
		fmt.Fprintf(&fetch, ",%d", 2*i+1)
	}
	fetch.WriteString(" (FLAGS)\r\n")
	search := "a2 SEARCH" + strings.Repeat(" OR SUBJECT x FROM y", limits.IMAPLineBytes/4/20) + " ALL\r\n"
	for _, c := range []struct {
		name, line string
		base       int
	}{
		{"n FETCHes of hundreds of ids", fetch.String(), 32},
		{"n SEARCHes of hundreds of criteria", search, 32},
		{"n short commands", "a3 NOOP\r\na4 UID SEARCH UNSEEN\r\n", 2000},
	} {
		complexity.Linear(t, c.name, func(n int) func() {
			in := []byte(strings.Repeat(c.line, n))
			want := strings.Count(string(in), "\n")
			return func() {
				if got := parseClient(in); got.commands != want || got.ended {
					t.Fatalf("%s: %+v, want %d commands", c.name, got, want)
				}
			}
		}, c.base)
	}
}

// longestLine is the costliest line a client may send: as long as a
// line may be, of atoms as long as an atom may be.
func longestLine() string {
	line := "a1 SEARCH"
	for room := limits.IMAPLineBytes - 1 - len(line) - len(" SUBJECT "); room > 0; room = limits.IMAPLineBytes - 1 - len(line) - len(" SUBJECT ") {
		line += " SUBJECT " + strings.Repeat("y", min(room, limits.IMAPAtomBytes))
	}
	return line + "\r\n"
}

// BenchmarkLongestLine is the cost of the costliest line a client may
// send (limits.IMAPAtomBytes' comment).
func BenchmarkLongestLine(b *testing.B) {
	in := []byte(longestLine())
	for b.Loop() {
		if parseClient(in).commands != 1 {
			b.Fatal("the line did not parse")
		}
	}
}
