// Command mail-inbox is the agent's door into mailplane: a trial's mail as
// plain HTML pages, opened by the inbox token in the URL.
//
// Security contract. It listens on one TCP socket (--listen: host:port,
// fd:N or systemd:NAME) that the agents' browsers reach, and talks to
// mail-plane over its Unix socket. Its only plane calls are health, list
// and get of one trial's current namespace, without OTP, click (a link of
// a message it showed was followed) and, shared, read.check (which trial a
// token opens, before a request's body is read). It holds no
// capability that works on the JSON API, cannot write mail, and does not
// link the store, the ledger or OTP extraction. Pages are HTML only
// (healthz and the 503 outage answer excepted), every value escaped, links
// in bodies rel="noreferrer noopener", no script and no remote content
// (Content-Security-Policy), Cache-Control: no-store and Referrer-Policy:
// no-referrer on every answer. A message's HTML part shows in a frame
// sandboxed without scripts, forms, popups or its own origin, whose
// document is cleaned to an allowlist first (links to http(s) or mailto
// only, leading the top window; images only the message's own cid:
// parts, as data: URIs; styles that load nothing) and carries its own
// policy (no script, no form, no request but its links' pings). GET / and every other path is a "Not found"
// page: nobody who can reach the port learns a mailbox from it. The same
// mailbox is an MCP server at /mcp/{token} (three read tools, the same
// fields as the pages, no code), and each link of a page pings the inbox
// when followed, which the plane checks against the stored message and
// records as a click.
//
// Shared mode (mail-plane up; no --token-file): one inbox serves every
// trial of its plane, with the plane's shared inbox grant, which by itself
// opens no mailbox: it passes the token in the URL to the plane, which
// binds the call to the trial that token opens; the token is checked so
// before any body is read, and a wrong one is answered at once. It holds
// no token (an accepted one's digest is remembered for seconds). Its
// connections share one cap sized to the process, with short waits for a
// client, and each trial has its share of requests in flight.
//
// Strict mode (--token-file, one inbox per trial): it holds that trial's
// inbox grant, bound by the plane to the trial, and its inbox token, which
// it compares in constant time before any plane call, so a wrong token is
// a "Not found" page even while the plane is down. It keeps the
// reference's limits (16 connections, 10 s idle, 30 s lifetime). Only here
// does --root-redirect restore the reference's GET / redirect to the token
// URL (the drop-in sidecar's contract): anyone who can reach the port then
// has the mailbox.
//
// IMAP (--imap-listen with STARTTLS, --imaps-listen with implicit TLS,
// --tls-cert and --tls-key: a shared inbox only, as mail-plane up runs
// it): the same mailbox for a mail client (package inboximap), the
// password its inbox token, judged at LOGIN by the plane's read.check and
// only once the connection is TLS; read-only but for the flags \Seen and
// \Flagged, which the plane keeps (flag); a body fetch is an open at door
// imap. Its only further plane calls are list (with a wait, for IDLE), get
// and flag.
//
// Routes: GET /healthz, GET /inbox/{token}, GET /inbox/{token}/messages/{id}
// (and /text, /html: its text, its HTML's frame), POST /inbox/{token}/messages/{id}/ping/{link} (text/ping), and MCP's
// POST /mcp/{token}; anything else is "Not found".
package main
