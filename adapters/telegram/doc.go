// Package telegram connects opsgate to a Telegram bot: it receives updates
// (over a webhook checked with a secret header, or a getUpdates long-poll
// loop of its own), turns commands, replies and button presses into
// core.ChannelEvents, and delivers replies and approval cards (Telegram HTML
// with an inline keyboard) for the delivery pipeline.
//
// It uses github.com/go-telegram-bot-api/telegram-bot-api/v5 for requests
// and error values. That release predates the Bot API fields opsgate relies
// on (setWebhook's secret_token, message_thread_id, reply_parameters), so
// requests are built as raw parameters through BotAPI.MakeRequest and
// updates are decoded by this package's own types, which keep those fields.
//
// Threads are addressed as "<chat id>/<topic id>/<message id>": replies land
// in the same forum topic (message_thread_id) as answers to the message that
// asked (reply_parameters). Users are "telegram:<user id>".
//
// Button presses carry only a compact approval reference and an HMAC tag
// (see ids.go); Reject and Edit open a force_reply prompt whose own text
// carries that reference, so a restart between the press and the reply
// loses nothing. The bot token never appears in a log line or an error:
// everything that leaves the package passes through a scrubber.
package telegram
