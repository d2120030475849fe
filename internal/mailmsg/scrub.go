package mailmsg

import (
	"bytes"
	"mime"
	"strings"
)

// Scrub returns raw with the headers a sender may not choose replaced
// (BEHAVIOR.md §8.8): every X-Tags and X-WebsiteBench-* header is removed
// from every MIME part; the top-level From, To, Cc and Bcc are removed and
// From: <from> and To: <to joined by ", "> are appended. Everything else,
// including the body bytes, is kept as it was. extra headers (such as a
// store's private tag) are appended after To.
func Scrub(raw []byte, from string, to []string, extra ...string) []byte {
	eol := lineEnding(raw)
	add := []string{"From: " + from, "To: " + strings.Join(to, ", ")}
	add = append(add, extra...)
	return scrubEntity(raw, eol, true, add, 0)
}

// maxDepth bounds MIME recursion; deeper parts are kept verbatim.
const maxDepth = 16

func scrubEntity(entity []byte, eol string, top bool, add []string, depth int) []byte {
	header, sep, body := splitHeader(entity)
	fields := headerFields(header)
	var out bytes.Buffer
	out.Grow(len(entity) + 256)
	boundary := ""
	for _, f := range fields {
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
		out.Write(f.raw)
		if !bytes.HasSuffix(f.raw, []byte("\n")) {
			out.WriteString(eol) // a header block cut off without its line end
		}
	}
	for _, a := range add {
		out.WriteString(a)
		out.WriteString(eol)
	}
	if sep == nil {
		return out.Bytes()
	}
	out.Write(sep)
	if boundary == "" || depth >= maxDepth {
		out.Write(body)
		return out.Bytes()
	}
	out.Write(scrubParts(body, boundary, eol, depth+1))
	return out.Bytes()
}

// scrubParts scrubs each part between the boundary delimiter lines of a
// multipart body, keeping preamble, delimiters and epilogue verbatim.
func scrubParts(body []byte, boundary, eol string, depth int) []byte {
	delim := []byte("--" + boundary)
	var out bytes.Buffer
	start := findDelimiter(body, delim)
	out.Write(body[:start])
	rest := body[start:]
	for len(rest) > 0 {
		line, next := cutLine(rest)
		out.Write(line)
		if bytes.HasSuffix(bytes.TrimRight(line, "\r\n \t"), []byte("--")) {
			out.Write(next) // closing delimiter: the rest is epilogue
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
		out.Write(scrubEntity(part, eol, false, nil, depth))
		out.Write(trail)
		rest = next[end:]
	}
	return out.Bytes()
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
// field with an empty name so nothing is lost.
func headerFields(header []byte) []field {
	var fields []field
	rest := header
	for len(rest) > 0 {
		line, next := cutLine(rest)
		if (line[0] == ' ' || line[0] == '\t') && len(fields) > 0 {
			f := &fields[len(fields)-1]
			f.raw = append(f.raw, line...)
			f.value += string(line)
			rest = next
			continue
		}
		name, value, _ := strings.Cut(string(line), ":")
		if !strings.Contains(string(line), ":") {
			name, value = "", string(line)
		}
		fields = append(fields, field{name: name, value: value, raw: append([]byte(nil), line...)})
		rest = next
	}
	return fields
}

// splitHeader splits an entity at its first empty line (sep). sep is nil
// when there is no empty line (a header-only entity).
func splitHeader(entity []byte) (header, sep, body []byte) {
	for off := 0; off < len(entity); {
		line, _ := cutLine(entity[off:])
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			return entity[:off], line, entity[off+len(line):]
		}
		off += len(line)
	}
	return entity, nil, nil
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
	v = strings.ReplaceAll(v, "\r\n", "")
	v = strings.ReplaceAll(v, "\n", "")
	return strings.TrimSpace(v)
}

// HeaderValue returns the unfolded value of the first top-level header
// named name (case-insensitive), and whether it was present. Folded values
// are unfolded, so a capability that a client's mail library folded onto
// two lines still matches.
func HeaderValue(raw []byte, name string) (string, bool) {
	header, _, _ := splitHeader(raw)
	for _, f := range headerFields(header) {
		if strings.EqualFold(strings.TrimSpace(f.name), name) {
			return unfold(f.value), true
		}
	}
	return "", false
}
