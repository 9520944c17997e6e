package telegram

import "github.com/opsgate/opsgate/core/approvalref"

// MaxCallbackData is Telegram's limit on an inline button's callback_data,
// in bytes.
const MaxCallbackData = 64

// newButtons returns the codec of callback_data and prompt references. Its
// key is derived from the bot token, so no extra secret must be configured
// and rotating the token invalidates every old button. There is no prefix:
// in 64 bytes every byte counts, and a bot only receives presses of its own
// buttons. The 96-bit tag is far beyond guessing within Telegram's rate
// limits.
func newButtons(token string) (*approvalref.Codec, error) {
	return approvalref.New(token, approvalref.Format{MaxLen: MaxCallbackData, TagBytes: approvalref.DefaultTagBytes})
}
