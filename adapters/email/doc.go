// Package email is opsgate's email channel: requests arrive as mail to the
// bot's address, watched over IMAP (IDLE, or polling where the server lacks
// it); answers, results and approval cards leave as multipart text + HTML
// mail over SMTP, threaded with Message-ID, In-Reply-To and References.
//
// Approval by reply. A card mail carries two secrets derived from the
// approval id with an HMAC key (Config.TokenKey): a plus-address Reply-To
// (ops+<token>@example.com) and a tag inside our Message-ID, which a reply
// echoes in In-Reply-To. A reply counts only when both check out (in
// constant time), the sender is eligible (the core decides and audits), and,
// with Config.RequireDMARC, the topmost Authentication-Results header from
// Config.AuthservID shows an aligned DKIM pass or a DMARC pass. From alone
// is forgeable, and a link in a mail is followed by scanners, so no link
// ever decides anything.
//
// Exactly once. Every message is handed to core.Sink.HandleEvent with its
// Message-ID as EventID, and the (mailbox, UIDVALIDITY, last UID) cursor is
// advanced in the store (Deps.Store, key "email:cursor:<address>:<mailbox>")
// only after HandleEvent returned. A lost or stale cursor therefore only causes re-reads, which the
// store's (channel, event id) dedup absorbs. Replies to approvals are handed
// over as decision attempts even when they are refused before judgement (no
// token, unreadable, approval closed), and the answers this package mails
// directly (outside the outbox) go out only when the receipt is not a
// duplicate, so a re-read mail is answered once.
//
// The reply token is per approval (an HMAC of its id), not a one-time nonce:
// it stops working when the approval is decided, expired or cancelled, since
// the core then refuses every decision for it.
//
// Loops. Mail marked Auto-Submitted (other than "no"), Precedence
// bulk/list/junk, List-Id, or with an empty or MAILER-DAEMON return path is
// never answered (RFC 3834), and everything opsgate sends says
// "Auto-Submitted: auto-replied".
package email
