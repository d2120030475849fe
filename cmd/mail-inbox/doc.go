// Command mail-inbox is the agent's door into mailplane: one trial's mail
// as plain HTML pages, opened by the inbox token in the URL.
//
// Security contract. It listens on one TCP socket (--listen: host:port,
// fd:N or systemd:NAME) that the agent's browser reaches, and talks to
// mail-plane over its Unix socket. It holds two secrets: the trial's inbox
// grant (--grant-file), whose only plane calls are health, list and get of
// its own trial's current namespace, without OTP; and the inbox token
// (--token-file), which it compares in constant time before any plane call
// (it routes before it reads). It holds no capability that works on the
// JSON API, cannot name a second namespace, cannot write mail, and does not
// link the store, the ledger or OTP extraction. Pages are HTML only
// (healthz and the 503 outage answer excepted), every value escaped, links
// in bodies rel="noreferrer noopener", no script and no remote content
// (Content-Security-Policy), Cache-Control: no-store and Referrer-Policy:
// no-referrer on every answer including the redirect. With
// --no-root-redirect, GET / does not reveal the token URL.
//
// Routes: GET / (302 to /inbox/{token}), GET /healthz, GET /inbox/{token},
// GET /inbox/{token}/messages/{id}; anything else is "Not found".
package main
