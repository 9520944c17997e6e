// Package matrix connects opsgate to Matrix as a bot account on a
// homeserver: it reads the account's rooms with /sync long polling, turns
// requests (`!ops deploy api 1.2.3`, a mention of the bot, any message in a
// direct room) and decisions (✅/❌ reactions on a card, replies
// `approve`, `reject: reason`, `edit {json}` to a card) into
// core.ChannelEvents, and delivers replies and approval cards as formatted
// m.room.message events in the request's thread (m.thread, with the reply
// fallback for clients without threads), editing a card in place
// (m.replace) once it is decided.
//
// It uses maunium.net/go/mautrix for the Client-Server API and its event
// types. The sync position (next_batch) lives in the store and is advanced
// only after every event of a batch was recorded by the sink, so a restart
// loses and repeats nothing the inbox would not deduplicate (by event id);
// one replica at a time syncs, under a store lease. A first start reads no
// old timeline: it only takes the current position.
//
// Sends carry transaction ids derived from the outbox key, so a retried
// send is the same event to the homeserver. M_LIMIT_EXCEEDED becomes a
// core.RateLimitError with the server's retry_after_ms.
//
// Users are "matrix:@user:server". Only events from joined rooms listed in
// the configuration (and direct rooms, when enabled) count; the bot ignores
// its own events. End-to-end encrypted rooms are refused with a notice
// naming the room (docs/matrix.md says why).
package matrix
