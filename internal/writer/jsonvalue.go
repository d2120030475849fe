package writer

import (
	"strconv"
	"unicode/utf8"

	"github.com/websitebench/mailplane/internal/limits"
)

// decodeJSON reads b, valid UTF-8, as json.Unmarshal reads it into an
// any: objects as map[string]any (a repeated key's last value), arrays as
// []any, numbers as float64, an escaped lone surrogate as U+FFFD; ok is
// false where json.Unmarshal fails (FuzzDecodeJSON holds it to it). It
// reads b once, where json.Unmarshal checks it whole before it decodes,
// and copies a string only when it holds an escape: POST /emails spent
// most of its parsing in json.Unmarshal. lone reports an escaped
// surrogate that is not half of a pair (\ud800 alone), which the
// reference refuses and encoding/json hides.
func decodeJSON(b []byte) (v any, lone, ok bool) {
	d := jsonDecoder{b: b}
	d.space()
	v, ok = d.value(0)
	d.space()
	return v, d.lone, ok && d.i == len(b)
}

type jsonDecoder struct {
	b    []byte
	i    int
	lone bool // an escaped lone surrogate was read
}

func (d *jsonDecoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// value reads one value at d.i, inside depth arrays and objects.
func (d *jsonDecoder) value(depth int) (any, bool) {
	if d.i >= len(d.b) {
		return nil, false
	}
	switch c := d.b[d.i]; {
	case c == '{':
		return d.object(depth + 1)
	case c == '[':
		return d.array(depth + 1)
	case c == '"':
		return d.str()
	case c == '-' || '0' <= c && c <= '9':
		return d.number()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	}
	return nil, false
}

func (d *jsonDecoder) literal(word string) bool {
	if len(d.b)-d.i < len(word) || string(d.b[d.i:d.i+len(word)]) != word {
		return false
	}
	d.i += len(word)
	return true
}

func (d *jsonDecoder) object(depth int) (any, bool) {
	if depth > limits.JSONDepth {
		return nil, false
	}
	d.i++ // {
	m := map[string]any{}
	d.space()
	if d.i < len(d.b) && d.b[d.i] == '}' {
		d.i++
		return m, true
	}
	for {
		if d.i >= len(d.b) || d.b[d.i] != '"' {
			return nil, false
		}
		k, ok := d.str()
		if !ok {
			return nil, false
		}
		d.space()
		if d.i >= len(d.b) || d.b[d.i] != ':' {
			return nil, false
		}
		d.i++
		d.space()
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		m[k] = v
		if more, ok := d.next('}'); !ok {
			return nil, false
		} else if !more {
			return m, true
		}
	}
}

func (d *jsonDecoder) array(depth int) (any, bool) {
	if depth > limits.JSONDepth {
		return nil, false
	}
	d.i++ // [
	a := []any{}
	d.space()
	if d.i < len(d.b) && d.b[d.i] == ']' {
		d.i++
		return a, true
	}
	for {
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		a = append(a, v)
		if more, ok := d.next(']'); !ok {
			return nil, false
		} else if !more {
			return a, true
		}
	}
}

// next reads what follows a member or an element: a comma (more), or
// end, which closes the object or array; ok is false for anything else.
func (d *jsonDecoder) next(end byte) (more, ok bool) {
	d.space()
	if d.i >= len(d.b) {
		return false, false
	}
	switch d.b[d.i] {
	case ',':
		d.i++
		d.space()
		return true, true
	case end:
		d.i++
		return false, true
	}
	return false, false
}

// number reads JSON's number grammar and converts as encoding/json does
// (a number out of float64's range fails).
func (d *jsonDecoder) number() (any, bool) {
	start := d.i
	digits := func() int {
		n := 0
		for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	if d.b[d.i] == '-' {
		d.i++
	}
	if d.i < len(d.b) && d.b[d.i] == '0' {
		d.i++
	} else if digits() == 0 {
		return nil, false
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if digits() == 0 {
			return nil, false
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if digits() == 0 {
			return nil, false
		}
	}
	f, err := strconv.ParseFloat(string(d.b[start:d.i]), 64)
	return f, err == nil
}

// str reads a string at d.i (its opening quote).
func (d *jsonDecoder) str() (string, bool) {
	d.i++ // "
	start := d.i
	for d.i < len(d.b) {
		switch c := d.b[d.i]; {
		case c == '"':
			s := string(d.b[start:d.i])
			d.i++
			return s, true
		case c == '\\':
			return d.escaped(start)
		case c < ' ':
			return "", false
		}
		d.i++
	}
	return "", false
}

// escaped reads the rest of a string from its first escape at d.i, the
// string having begun at start.
func (d *jsonDecoder) escaped(start int) (string, bool) {
	out := append(make([]byte, 0, d.i-start+16), d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			return string(out), true
		case c < ' ':
			return "", false
		case c != '\\':
			out = append(out, c)
			d.i++
			continue
		}
		if d.i+1 >= len(d.b) {
			return "", false
		}
		e := d.b[d.i+1]
		d.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := d.hex4()
			if !ok {
				return "", false
			}
			if 0xD800 <= r && r < 0xE000 {
				// A high surrogate and a low one escaped right after it are
				// one rune; any other surrogate is U+FFFD, as in
				// encoding/json, and noted (parseEmail refuses it).
				r2 := rune(-1)
				if r < 0xDC00 && d.i+1 < len(d.b) && d.b[d.i] == '\\' && d.b[d.i+1] == 'u' {
					save := d.i
					d.i += 2
					if r2, ok = d.hex4(); !ok || r2 < 0xDC00 || r2 >= 0xE000 {
						d.i, r2 = save, -1 // read again as an escape of its own
					}
				}
				if r2 >= 0 {
					r = 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00)
				} else {
					r, d.lone = utf8.RuneError, true
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", false
		}
	}
	return "", false
}

// hex4 reads the four hex digits of a \u escape at d.i.
func (d *jsonDecoder) hex4() (rune, bool) {
	if len(d.b)-d.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range d.b[d.i : d.i+4] {
		r <<= 4
		switch {
		case '0' <= c && c <= '9':
			r |= rune(c - '0')
		case 'a' <= c && c <= 'f':
			r |= rune(c-'a') + 10
		case 'A' <= c && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, false
		}
	}
	d.i += 4
	return r, true
}
