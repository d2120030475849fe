// Package limits names, once, the limits on untrusted mail that the
// writer, the SMTP listener and the plane share, so that a door and the
// plane behind it can never disagree about what is too big. Limits that
// belong to one server alone (timeouts, connections, frame sizes) stay
// with that server.
package limits

const (
	// MessageBytes bounds one message as the sender wrote it (docs/reference.md
	// §11): the SMTP DATA, the raw message the writer composes, the send
	// the plane accepts.
	MessageBytes = 1 << 20

	// Recipients bounds the envelope recipients of one message (to, cc
	// and bcc together) (docs/reference.md §11).
	Recipients = 16

	// HeaderBytes and HeaderLines bound one header block (the top-level
	// one and each MIME part's), counted with line endings and folded
	// lines. Real mail has a few kilobytes of headers in a few dozen
	// lines; the writer's largest (16 headers, a 998-character subject
	// encoded in 72-byte words, tags) stays far below both. A sender who
	// needs more is refused rather than stored (see mailmsg.Scrub).
	HeaderBytes = 64 << 10
	HeaderLines = 1000

	// URLBytes bounds one URL that is linked or offered as a link. RFC
	// 9110 §4.1 asks that URIs of at least 8000 octets be supported;
	// longer runs of URL characters are left as text.
	URLBytes = 8000

	// AddressBytes bounds one address (RFC 5321 §4.5.3.1: a 64-byte local
	// part, @, a 255-byte domain).
	AddressBytes = 320

	// IdempotencyKeyBytes bounds an idempotency key (Resend's 1 to 256).
	IdempotencyKeyBytes = 256

	// JSONDepth bounds the nesting of a JSON request body: encoding/json's
	// own bound, which the writer's decoder of POST /emails
	// (internal/writer/jsonvalue.go) keeps too, so that a body nests as
	// deep through either.
	JSONDepth = 10000

	// LinkifyBytes bounds how much of a message's text is searched for
	// URLs. A URL that starts within it is still read to its end (at most
	// URLBytes further); text beyond it is shown, never linked.
	LinkifyBytes = 256 << 10

	// FrameImageBytes bounds the data: URI bytes of the inline images one
	// message's HTML frame shows (package render): an image named by cid:
	// twice shows twice, but a message of one large image named a
	// thousand times would make a page a thousand times its size. Every
	// image of a message shows at least once.
	FrameImageBytes = 2 * MessageBytes

	// ConsoleSubjectScan bounds the messages one filter by subject of the
	// operator's console reads (subjects are not indexed): it looks at the
	// newest trials' mail first and says when it stopped.
	ConsoleSubjectScan = 5000
)

// DisplayNameRunes bounds a sender's display name as it is kept and shown
// (package mailmsg): a name is a few words; a longer one is cut, so that
// it can never push the address it stands for off the line.
const DisplayNameRunes = 128
