package mailmsg

import (
	"bytes"
	"context"
	"errors"
	"mime"
	"strings"

	"github.com/websitebench/mailplane/internal/limits"
)

// ErrHeaderTooLarge is Scrub's refusal of a message with a header block
// (its own or a MIME part's) of more than limits.HeaderLines lines or
// limits.HeaderBytes bytes, before or after the scrub.
var ErrHeaderTooLarge = errors.New("a header block exceeds the limit on lines or bytes")

// LabelHeader carries the label of a message the evaluator planted. Only
// the plane writes it, as one of Scrub's extra headers: Scrub removes it,
// with every X-WebsiteBench-* header, from whatever a sender wrote.
const LabelHeader = "X-WebsiteBench-Label"

// Scrub returns raw with the headers a sender may not choose replaced
// (docs/reference.md §8.8): every X-Tags and X-WebsiteBench-* header is removed
// from every MIME part; the top-level From, To, Cc and Bcc are removed and
// From: <from> and To: <to joined by ", "> are appended. From keeps the
// display name the sender wrote (cleaned, see Sender), never its address. Everything else,
// including the body bytes, is kept as it was. extra headers (such as a
// store's private tag) are appended after To.
//
// A message with a header block over the limits is refused with
// ErrHeaderTooLarge, not cut: read past the limit as body, its remaining
// fields would go unscrubbed and still be headers to the next parser (a
// Mailpit, a mail client), so a sender could smuggle From or
// X-WebsiteBench-* past the scrub by padding. Refusing also keeps every
// stored message within the limits that Parse reads. Scrub stops with
// ctx's error when ctx ends.
func Scrub(ctx context.Context, raw []byte, from string, to []string, extra ...string) ([]byte, error) {
	name := ""
	if v, ok := HeaderValue(raw, "From"); ok {
		name, _ = Sender(v)
	}
	add := []string{"From: " + FromHeader(name, from), "To: " + strings.Join(to, ", ")}
	add = append(add, extra...)
	s := scrubber{ctx: ctx, eol: lineEnding(raw)}
	s.out.Grow(len(raw) + 256)
	if err := s.entity(raw, true, add, 0); err != nil {
		return nil, err
	}
	return s.out.Bytes(), nil
}

// maxDepth bounds MIME recursion; deeper parts are kept verbatim.
const maxDepth = 16

// scrubber writes one scrubbed message into out, part by part, so that no
// part's bytes are copied more than once.
type scrubber struct {
	ctx context.Context
	eol string
	out bytes.Buffer
}

func (s *scrubber) entity(entity []byte, top bool, add []string, depth int) error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	header, sep, body, over := splitHeader(entity)
	if over {
		return ErrHeaderTooLarge
	}
	start := s.out.Len()
	boundary := ""
	for _, f := range headerFields(header) {
		name := strings.ToLower(strings.TrimSpace(f.name))
		if name == "x-tags" || strings.HasPrefix(name, "x-websitebench-") {
			continue
		}
		if top && (name == "from" || name == "to" || name == "cc" || name == "bcc") {
			continue
		}
		if name == "content-type" {
			if mt, params, err := mime.ParseMediaType(unfold(f.value)); err == nil && strings.HasPrefix(mt, "multipart/") {
				boundary = params["boundary"]
			}
		}
		s.out.Write(f.raw)
		if !bytes.HasSuffix(f.raw, []byte("\n")) {
			s.out.WriteString(s.eol) // a header block cut off without its line end
		}
	}
	for _, a := range add {
		s.out.WriteString(a)
		s.out.WriteString(s.eol)
	}
	if h := s.out.Bytes()[start:]; len(h) > limits.HeaderBytes || bytes.Count(h, []byte("\n")) > limits.HeaderLines {
		return ErrHeaderTooLarge // within the limits only before From and To were added
	}
	if sep == nil {
		return nil
	}
	s.out.Write(sep)
	if boundary == "" || depth >= maxDepth {
		s.out.Write(body)
		return nil
	}
	return s.parts(body, boundary, depth+1)
}

// parts scrubs each part between the boundary delimiter lines of a
// multipart body, keeping preamble, delimiters and epilogue verbatim.
func (s *scrubber) parts(body []byte, boundary string, depth int) error {
	delim := []byte("--" + boundary)
	start := findDelimiter(body, delim)
	s.out.Write(body[:start])
	rest := body[start:]
	for len(rest) > 0 {
		line, next := cutLine(rest)
		s.out.Write(line)
		if bytes.HasSuffix(bytes.TrimRight(line, "\r\n \t"), []byte("--")) {
			s.out.Write(next) // closing delimiter: the rest is epilogue
			break
		}
		end := findDelimiter(next, delim)
		part, trail := next[:end], []byte(nil)
		// The line break before a delimiter belongs to the delimiter.
		if bytes.HasSuffix(part, []byte("\r\n")) {
			part, trail = part[:len(part)-2], part[len(part)-2:]
		} else if bytes.HasSuffix(part, []byte("\n")) {
			part, trail = part[:len(part)-1], part[len(part)-1:]
		}
		if err := s.entity(part, false, nil, depth); err != nil {
			return err
		}
		s.out.Write(trail)
		rest = next[end:]
	}
	return nil
}

// findDelimiter returns the offset of the first delimiter line of b (delim,
// optionally "--", then only white space), or len(b).
func findDelimiter(b, delim []byte) int {
	for off := 0; off < len(b); {
		line, _ := cutLine(b[off:])
		t := bytes.TrimRight(line, "\r\n \t")
		if bytes.Equal(t, delim) || (len(t) == len(delim)+2 && bytes.HasPrefix(t, delim) && bytes.HasSuffix(t, []byte("--"))) {
			return off
		}
		off += len(line)
	}
	return len(b)
}

type field struct {
	name, value string
	raw         []byte // the field's lines, with their line endings
}

// headerFields splits a header block into fields, continuation lines
// joined to their field. A line that is not a field (no colon) is kept as a
// field with an empty name so nothing is lost. Each field's value is made
// once from its lines (a value grown line by line is copied again for
// every line, and a sender folds as often as he likes): every name and
// value is a piece of one copy of the block.
func headerFields(header []byte) []field {
	// A field a line, mostly: one allocation, not one per doubling.
	fields := make([]field, 0, bytes.Count(header, []byte("\n"))+1)
	hs := string(header)
	for off := 0; off < len(header); {
		first, _ := cutLine(header[off:])
		end := off + len(first)
		for end < len(header) && (header[end] == ' ' || header[end] == '\t') {
			line, _ := cutLine(header[end:])
			end += len(line)
		}
		raw := header[off:end:end]
		f := field{raw: raw, value: hs[off:end]}
		if i := bytes.IndexByte(first, ':'); i >= 0 {
			f.name, f.value = hs[off:off+i], hs[off+i+1:end]
		}
		fields = append(fields, f)
		off = end
	}
	return fields
}

// splitHeader splits an entity at its first empty line (sep): header is
// what comes before it, body what follows. sep is nil when there is no
// empty line (a header-only entity). A header block is read only up to
// limits.HeaderLines lines and limits.HeaderBytes bytes: past that, over
// is true, header is the lines within the limits, sep is nil and body is
// the rest of the entity.
func splitHeader(entity []byte) (header, sep, body []byte, over bool) {
	lines := 0
	for off := 0; off < len(entity); {
		line, _ := cutLine(entity[off:])
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			return entity[:off], line, entity[off+len(line):], false
		}
		if lines == limits.HeaderLines || off+len(line) > limits.HeaderBytes {
			return entity[:off], nil, entity[off:], true
		}
		lines++
		off += len(line)
	}
	return entity, nil, nil, false
}

// cutLine returns the first line of b including its line ending.
func cutLine(b []byte) (line, rest []byte) {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i+1], b[i+1:]
	}
	return b, nil
}

func lineEnding(raw []byte) string {
	if i := bytes.IndexByte(raw, '\n'); i > 0 && raw[i-1] == '\r' {
		return "\r\n"
	}
	if i := bytes.IndexByte(raw, '\n'); i >= 0 {
		return "\n"
	}
	return "\r\n"
}

// unfold joins a folded header value onto one line (RFC 5322 §2.2.3) and
// trims it.
func unfold(v string) string {
	if i := strings.IndexByte(v, '\n'); i >= 0 && i == len(v)-1 {
		// Not folded: only the field's own line ending goes, with no copy.
		return strings.TrimSpace(strings.TrimSuffix(v[:i], "\r"))
	}
	v = strings.ReplaceAll(v, "\r\n", "")
	v = strings.ReplaceAll(v, "\n", "")
	return strings.TrimSpace(v)
}

// HeaderValue returns the unfolded value of the first top-level header
// named name (case-insensitive), and whether it was present. Folded values
// are unfolded, so a capability that a client's mail library folded onto
// two lines still matches.
//
// Only the first limits.HeaderLines lines and limits.HeaderBytes bytes of
// the header block are read; the plane refuses a message with more.
func HeaderValue(raw []byte, name string) (string, bool) {
	header, _, _, _ := splitHeader(raw)
	for _, f := range headerFields(header) {
		if strings.EqualFold(strings.TrimSpace(f.name), name) {
			return unfold(f.value), true
		}
	}
	return "", false
}
