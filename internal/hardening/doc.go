// Package hardening is mailplane's reliability and security suite. It has
// no code of its own, only tests that run the real binaries as separate
// processes on real sockets:
//
//   - the isolation matrix, generated from the plane's authorization table
//     and the surfaces' route tables: every credential of two live trials
//     and every plane-wide grant against every route and every RPC method,
//     for both namespaces, in strict mode (one writer and inbox per trial)
//     and on a mail-plane up stack whose surfaces every trial shares;
//   - faults: SIGKILL of the plane under load, the store's disk full,
//     Mailpit killed, surfaces killed and restarted;
//   - errors by class: a handler's bug, a corrupt stored row, an answer
//     that does not decode and a stopped PostgreSQL, each as every door
//     answers it (500 for a bug, 503 for an outage, never one for the
//     other);
//   - exhaustion: connection caps, slow clients, floods of bad
//     credentials, oversized frames and bodies, with the good clients'
//     latency and every process's memory measured;
//   - fair shares: one trial's flood of idle and slow connections and of
//     requests in flight on every shared listener of a mail-plane up
//     stack, against another trial's requests, each timed;
//   - secrets: every minted secret and every one-time code searched for in
//     every log line and error body, and every comparison of a secret in
//     the source checked to be constant-time.
//
// By default the tests run in their short form (make test). With
// MAILPLANE_HARDENING=long (make hardening-long) they run longer and
// harder, and the table in docs/reliability.md reports the figures of such a run.
package hardening
