package limits

import "time"

// Work a shared surface does for a request before it knows who sent it.
// Every door decides who is calling from the request line and headers
// where it can, and reads no body for a caller it refused; where the body
// itself names the caller (a SigV4 signature covers the body's hash, an
// inbox MCP call is judged with its arguments), the body is read under
// these bounds, which one process's unauthenticated requests share.
const (
	// PreauthBytes bounds the body bytes one process holds at once for
	// requests whose caller is not yet known. A body that would pass it
	// makes room: the oldest such bodies still being read are given up
	// and their connections closed (connlimit.Preauth); only a body
	// larger than the whole bound is answered 429 at once, unread.
	PreauthBytes = 8 << 20

	// PreauthRequests bounds how many such bodies one process reads at
	// once; one more makes room as PreauthBytes says.
	PreauthRequests = 64

	// PreauthBodyTimeout bounds how long such a body may take to arrive
	// (a known caller's body has the listener's longer bound).
	PreauthBodyTimeout = 5 * time.Second
)
