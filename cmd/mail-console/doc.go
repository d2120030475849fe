// Command mail-console is the operator's door into mailplane: a read-only
// console of every trial (its mail rendered in a sandboxed frame, its
// trail as a timeline, live) and the plane's Prometheus metrics.
//
// Security contract. It listens on one TCP socket (--listen: host:port,
// fd:N or systemd:NAME; loopback by default) meant for the operator only,
// never on a candidate's or an agent's network, and talks to mail-plane
// over its Unix socket. It holds one secret, the console grant
// (--grant-file), which by itself reads nothing: its only plane calls are
// health, console.trials, console.trial, console.wait and metrics, all
// read-only, and each must carry the admin grant its own caller presented
// ("Authorization: Bearer <admin grant>", or the session the sign-in form
// opened with it: a random capability in the path, /s/<capability>/…,
// which maps to the grant in memory; never a cookie, which a browser
// would send to every port of the host), which the plane checks. It holds no trial's
// credential: pages are built from the plane's answers, which carry none,
// and anything shaped like a minted secret in mail is masked. A message's
// HTML is served to a sandboxed frame with a Content-Security-Policy that
// runs no script and loads nothing remote. It cannot write mail, open or
// close trials, or touch storage; it does not link the store.
//
// Routes: GET /healthz (open: whether the plane answers), GET / (trials, ?ns= ?rcpt= ?subject= ?page=), GET /trials/{ns},
// GET /trials/{ns}/messages/{id}/html, GET /live (Server-Sent Events),
// GET /metrics, all with a Bearer, or under /s/{capability} for a session;
// POST /s/{capability}/logout; GET /frames/… (a session's message frame);
// GET and POST /login.
package main
