package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
)

// APIError is a request the Bot API answered with ok=false: its error_code,
// description and, for 429, retry_after. Callers branch on Code.
type APIError struct {
	Method      string
	Code        int
	Description string
	RetryAfter  time.Duration
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("telegram: %s: %d %s", e.Method, e.Code, e.Description)
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	return s
}

// notModified reports Telegram's answer to an edit that changes nothing,
// which for us means the edit already happened.
func (e *APIError) notModified() bool {
	return e.Code == 400 && strings.Contains(strings.ToLower(e.Description), "message is not modified")
}

// editGone reports that the message to edit no longer exists or can no
// longer be edited (deleted, too old): the card is re-sent instead.
func (e *APIError) editGone() bool {
	d := strings.ToLower(e.Description)
	return e.Code == 400 && (strings.Contains(d, "message to edit not found") ||
		strings.Contains(d, "message can't be edited") || strings.Contains(d, "message_id_invalid"))
}

// botAPI performs Bot API calls through tgbotapi.BotAPI.MakeRequest, with
// a context per call and every error scrubbed of the token.
type botAPI struct {
	bot    *tgbotapi.BotAPI
	client *http.Client
	scrub  scrubber
}

func newBotAPI(cfg Config, client *http.Client) *botAPI {
	// The BotAPI is built by hand rather than with NewBotAPIWithClient,
	// which calls getMe at once: a constructor must not fail because
	// Telegram is briefly unreachable. getMe happens in Run, with backoff.
	bot := &tgbotapi.BotAPI{Token: cfg.BotToken, Client: client, Buffer: 100}
	bot.SetAPIEndpoint(cfg.APIURL + "/bot%s/%s")
	return &botAPI{bot: bot, client: client, scrub: scrubber{token: cfg.BotToken}}
}

// ctxDoer binds one request to a context: MakeRequest has none of its own.
type ctxDoer struct {
	ctx context.Context
	c   *http.Client
}

func (d ctxDoer) Do(r *http.Request) (*http.Response, error) { return d.c.Do(r.WithContext(d.ctx)) }

// call sends method with params (strings and integers as they are, anything
// else JSON-encoded, as the Bot API accepts in form fields) and decodes the
// result into out when out is non-nil.
func (a *botAPI) call(ctx context.Context, method string, params map[string]any, out any) error {
	p := tgbotapi.Params{}
	for k, v := range params {
		switch v := v.(type) {
		case nil:
		case string:
			p[k] = v
		case int:
			p[k] = strconv.Itoa(v)
		case int64:
			p[k] = strconv.FormatInt(v, 10)
		case bool:
			p[k] = strconv.FormatBool(v)
		default:
			b, err := json.Marshal(v)
			if err != nil {
				return fmt.Errorf("telegram: %s: encode %s: %w", method, k, err)
			}
			p[k] = string(b)
		}
	}
	// A shallow copy carries this call's context in its client; the shared
	// BotAPI is never mutated, so concurrent calls are safe.
	b := *a.bot
	b.Client = ctxDoer{ctx: ctx, c: a.client}
	resp, err := b.MakeRequest(method, p)
	if err != nil {
		var te *tgbotapi.Error
		if errors.As(err, &te) {
			return &APIError{Method: method, Code: te.Code, Description: a.scrub.String(te.Message),
				RetryAfter: time.Duration(te.RetryAfter) * time.Second}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("telegram: %s: %w", method, ctx.Err())
		}
		return fmt.Errorf("telegram: %s: %w", method, a.scrub.Err(err))
	}
	if out != nil && len(resp.Result) > 0 {
		if err := json.Unmarshal(resp.Result, out); err != nil {
			return fmt.Errorf("telegram: %s: decode result: %w", method, err)
		}
	}
	return nil
}
