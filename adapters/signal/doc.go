// Package signal connects opsgate to Signal through a signal-cli daemon
// (`signal-cli -a +NUMBER daemon --http 127.0.0.1:8080`), the way Signal
// bots are run: the daemon holds the account (a linked device), and this
// adapter speaks its JSON-RPC over HTTP — POST /api/v1/rpc for `send`
// and GET /api/v1/events, a Server-Sent Events stream of received
// envelopes.
//
// Requests arrive by direct message or in a listed group; a card is a text
// message with a short approval code, and is decided by replying
// "approve CODE", "reject CODE: reason" or "edit CODE {json}", by quoting
// the card with "approve" / "reject: reason" / "edit {json}", or by
// reacting ✅ / ❌ to it. A decided card is edited in place (send with
// editTimestamp). Which approval a code, a quote or a reaction names comes
// from the store (written when the card was sent), never from the
// message; who decides is the envelope's source, which the daemon
// authenticated.
//
// Users are "signal:+15551234567", or "signal:<ACI uuid>" for accounts
// without a visible number. The events stream's Last-Event-ID is kept in
// the store after each envelope is recorded, so a reconnect (and a restart
// while the daemon runs) resumes where it stopped; one replica at a time
// reads the stream, under a store lease.
package signal
