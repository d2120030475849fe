package limits

import "time"

// Fair shares on the shared surfaces of `mail-plane up` (the writer's
// HTTP and SMTP listeners, the trial ports it is handed, the inbox and the
// gateway), which serve every trial at once: what one caller may hold
// there, so that no trial, and no stranger, can take a listener from the
// others. The drop-in sidecar keeps the reference's 16 connections per
// listener (package connlimit).
const (
	// TrialRequests bounds the requests one trial (the namespace the
	// plane resolved from its mail-API token, inbox token or read
	// capability) has in flight on one shared HTTP surface. One more is
	// answered 429 at once.
	TrialRequests = 32

	// TrialSends bounds the SMTP messages one trial (its AUTH password,
	// or its own port or door) has being received or in flight to the
	// plane at once, in one writer process: the share is taken when DATA
	// starts, before a byte of the body is held. One more DATA waits for
	// a share, up to TrialSendWait, its body unread; then it is answered
	// 452 (its body read and dropped) and may be retried.
	TrialSends = 8

	// TrialSendWait bounds how long a trial's DATA waits for one of its
	// TrialSends shares: long enough that a burst of a site's mailer
	// (64 connections at once in make bench) queues, as at a provider,
	// instead of failing with 452 while its trial's sends take
	// milliseconds each; short against an SMTP client's own timeout for
	// the reply to DATA (RFC 5321 section 4.5.3.2: minutes).
	TrialSendWait = 5 * time.Second

	// TrialBodyBytes bounds the HTTP request bodies one trial (the
	// namespace its credential opens) has one writer process hold at
	// once, counted from each request's Content-Length (a chunked body:
	// its route's maximum) before it is read, until it is answered: room
	// for a few of the largest batches (4 × MessageBytes), far below a
	// machine's memory. One more is answered 429 at once.
	TrialBodyBytes = 16 << 20

	// HeaderTimeout bounds how long an HTTP request's header may take to
	// arrive (net/http's ReadHeaderTimeout: on a new connection from the
	// accept, on a kept-alive one from the request's first byte): a
	// client that trickles its header is cut then, before its credential
	// is known.
	HeaderTimeout = 5 * time.Second

	// SharedIdle bounds how long a connection on a shared surface may
	// wait for its client: for its first request or SMTP command (the
	// greeting timeout), between kept-alive requests, and for each SMTP
	// command and DATA chunk.
	SharedIdle = 5 * time.Second

	// ConnBytes is what one open connection may cost a surface's process
	// at most while it waits (a goroutine's stack, read and write buffers,
	// a TLS state, and a header of up to 64 KiB being read from a caller
	// not yet known), to size the connection cap to the process's memory.
	// Measured: 9,000 connections each holding ~60 KiB of header cost the
	// writer 85 KiB each, over TLS 113 KiB.
	ConnBytes = 128 << 10

	// ConnMemoryShare is the part of the machine's (or the cgroup's)
	// memory that open connections of one process may use: 1/8.
	ConnMemoryShare = 8

	// ConnFDReserve is how many descriptors a process keeps for itself
	// (listeners, files, the plane connections of idle clients) beside its
	// connections. Each connection counts two descriptors: its own, and
	// the plane connection a request on it may hold.
	ConnFDReserve = 256

	// AuthFailureMaxDelay is the longest a refused SMTP AUTH waits as
	// failures on a listener mount (internal/smtpd, authfail.go); the
	// writer's --auth-failure-delay may lower it.
	AuthFailureMaxDelay = time.Second
)

// The agent's mailbox over IMAP (package inboximap): a mail client keeps
// its connections open for hours, so they are counted per trial rather
// than cut short, and nothing it sends before LOGIN may cost more than a
// few lines.
const (
	// IMAPPreauthBytes bounds what one IMAP connection may send before
	// its login is accepted (the TLS handshake included): a greeting's
	// worth of commands. One byte more ends the connection.
	IMAPPreauthBytes = 16 << 10
	// IMAPPreauthConns bounds the connections of one inbox process not
	// logged in yet, whoever they are: one more closes the oldest. A
	// waiting connection holds far more than the bytes it sent (go-imap's
	// goroutines, buffers, a field per atom: about 100 KB for a 4 KiB
	// line of short atoms, measured), so the process cap alone let a
	// stranger hold gigabytes and every connection slot. A mail client
	// logs in within its first round trips, so the oldest is a stranger's.
	IMAPPreauthConns = 128
	// IMAPPreauthTimeout bounds how long a connection may take to log in.
	IMAPPreauthTimeout = 20 * time.Second
	// IMAPLineBytes bounds every line a client sends, literals included
	// (whose bound is below it): a FETCH or SEARCH of hundreds of ids
	// (clients keep to 1000 octets, RFC 2683 §3.2.1.5).
	IMAPLineBytes = 4 << 10
	// IMAPAtomBytes bounds one atom of a line (a set of ids, a FETCH
	// item such as BODY.PEEK[HEADER.FIELDS (...)]). go-imap's reader
	// copies an atom once per character, so its cost grows with its
	// square: a 4 KiB line of one atom took 3.8 ms and 8.9 MB of garbage,
	// and a stranger's CPU per byte sent was 11 times a line of short
	// atoms' (measured on the door: 0.88 against 0.077 µs a byte). With
	// atoms of 1 KiB at most: 0.28 µs a byte, and the costliest line
	// (BenchmarkLongestLine in package inboximap) 2.1 ms and 2.2 MB.
	// A set of ids as long as RFC 2683 §3.2.1.5's 1000 octets fits.
	IMAPAtomBytes = 1 << 10
	// IMAPCommandBytes bounds one command, its lines and literals
	// together: each literal ends a line, so the line bound alone let a
	// logged-in client send one command of literals without end, all
	// held until it ended (300 MiB took mail-inbox to 380 MB, measured).
	// A login with two literals, or a search with a few, fits.
	IMAPCommandBytes = 16 << 10
	// IMAPLiteralBytes is the largest literal a command may carry
	// (go-imap's MaxLiteralSize): the mailbox takes no mail (APPEND is
	// refused), so a literal is a login's password or a search string.
	IMAPLiteralBytes = 2 << 10
	// IMAPIdle bounds how long a logged-in connection may send nothing;
	// RFC 3501 §5.4 asks for at least 30 minutes, and IDLE clients
	// renew every 29.
	IMAPIdle = 31 * time.Minute
	// IMAPFailedLogins is the failed logins that end a connection.
	IMAPFailedLogins = 3
	// IMAPTrialConns bounds one trial's logged-in IMAP connections, and
	// IMAPTrialIdles those of them in IDLE at once.
	IMAPTrialConns = 8
	IMAPTrialIdles = 4
)
