// Package faketelegram is an in-process fake of the Telegram Bot API for
// tests: it answers the methods the adapter uses, keeps the messages it was
// sent (so tests can read a card after an edit), enforces the limits the
// real API enforces (4,096 UTF-16 units of text after entity parsing,
// well-formed HTML, callback_data ≤ 64 bytes), queues updates for
// getUpdates with Telegram's offset semantics, and fails on demand with
// the real error shapes (429 with parameters.retry_after).
package faketelegram

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf16"
)

// Call is one request the fake received.
type Call struct {
	Method string
	Params map[string]string
	At     time.Time // when it arrived
	Failed int       // the injected failure's code it was answered with, 0 if none
}

// Message is a message the bot sent, as it now stands (edits applied).
type Message struct {
	Chat     int64
	ID       int64
	ThreadID int64
	ReplyTo  int64
	Text     string // as sent: Telegram HTML
	Markup   string // reply_markup JSON, "" when none or removed
	Edits    int
}

// Entry is one accepted sendMessage or edit, in arrival order.
type Entry struct {
	Method string // sendMessage | editMessageText | editMessageReplyMarkup
	Message
}

// Failure is an error the fake returns for the next call of a method.
type Failure struct {
	Code        int
	Description string
	RetryAfter  int
}

// Server is the fake. Its zero value is not usable; call New.
type Server struct {
	*httptest.Server
	token string
	bot   map[string]any

	mu       sync.Mutex
	calls    []Call
	log      []Entry
	msgs     map[string]*Message
	nextID   map[int64]int64
	fail     map[string][]Failure
	skip     map[string]int    // calls of a method to let through before its failures
	updates  []json.RawMessage // unconfirmed, in id order
	ids      []int64
	nextUpd  int64
	webhook  map[string]string
	answered map[string]string
	wake     chan struct{}
	// files people sent, by file_id (files.go)
	files     map[string]*File
	downloads []string
}

// New starts a fake for token, with a bot named username. Close it when
// done (t.Cleanup(s.Close)).
func New(token, username string) *Server {
	id, _, _ := strings.Cut(token, ":")
	bid, _ := strconv.ParseInt(id, 10, 64)
	s := &Server{
		token: token,
		bot: map[string]any{"id": bid, "is_bot": true, "first_name": "Ops", "username": username,
			"can_join_groups": true, "can_read_all_group_messages": false},
		msgs: map[string]*Message{}, nextID: map[int64]int64{}, fail: map[string][]Failure{}, skip: map[string]int{},
		answered: map[string]string{}, nextUpd: 100000, wake: make(chan struct{}), files: map[string]*File{},
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// APIURL is the base to configure as the adapter's api_url.
func (s *Server) APIURL() string { return s.URL }

// Endpoint is the tgbotapi endpoint format for NewBotAPIWithAPIEndpoint.
func (s *Server) Endpoint() string { return s.URL + "/bot%s/%s" }

// FailNext makes the next call of method fail with f.
func (s *Server) FailNext(method string, f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[method] = append(s.fail[method], f)
}

// FailAfter lets the next ok calls of method through, then fails the
// following ones with fs, one each, in order: a storm of 429s in the
// middle of a stream of messages.
func (s *Server) FailAfter(method string, ok int, fs ...Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.skip[method] = ok
	s.fail[method] = append(s.fail[method], fs...)
}

// Calls returns the calls of method so far ("" for all).
func (s *Server) Calls(method string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if method == "" || c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// Message returns a sent message as it stands now.
func (s *Server) Message(chat, id int64) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.msgs[key(chat, id)]
	if !ok {
		return Message{}, false
	}
	return *m, true
}

// Messages returns every message sent to chat, in order.
func (s *Server) Messages(chat int64) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for i := int64(1000); i < s.nextID[chat]; i++ {
		if m, ok := s.msgs[key(chat, i)]; ok {
			out = append(out, *m)
		}
	}
	return out
}

// Log returns every accepted send and edit, in arrival order.
func (s *Server) Log() []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Entry(nil), s.log...)
}

// Answer returns the text a callback query was answered with.
func (s *Server) Answer(callbackID string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.answered[callbackID]
	return a, ok
}

// Webhook returns the parameters of the last setWebhook (nil after
// deleteWebhook).
func (s *Server) Webhook() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.webhook
}

// SetWebhookActive marks a webhook as set, so getUpdates conflicts.
func (s *Server) SetWebhookActive(url string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.webhook = map[string]string{"url": url}
}

// Push queues an update for getUpdates, giving it the next update_id when
// it has none, and returns the id.
func (s *Server) Push(update map[string]any) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var id int64
	switch v := update["update_id"].(type) {
	case int64:
		id = v
	case int:
		id = int64(v)
	default:
		s.nextUpd++
		id = s.nextUpd
		update["update_id"] = id
	}
	b, _ := json.Marshal(update)
	s.updates = append(s.updates, b)
	s.ids = append(s.ids, id)
	close(s.wake)
	s.wake = make(chan struct{})
	return id
}

// PushRaw queues a raw update body with a known id (a replay of the same
// update uses the same id).
func (s *Server) PushRaw(id int64, raw []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updates = append(s.updates, raw)
	s.ids = append(s.ids, id)
	close(s.wake)
	s.wake = make(chan struct{})
}

// Unconfirmed is how many queued updates no getUpdates offset has
// confirmed yet.
func (s *Server) Unconfirmed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.updates)
}

func key(chat, id int64) string { return fmt.Sprintf("%d/%d", chat, id) }

var pathRE = regexp.MustCompile(`^/bot([^/]+)/([A-Za-z]+)$`)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/file/bot") {
		s.download(w, r)
		return
	}
	m := pathRE.FindStringSubmatch(r.URL.Path)
	if m == nil || m[1] != s.token {
		writeErr(w, Failure{Code: 404, Description: "Not Found"})
		return
	}
	if err := r.ParseForm(); err != nil {
		writeErr(w, Failure{Code: 400, Description: "Bad Request: " + err.Error()})
		return
	}
	p := map[string]string{}
	for k, v := range r.PostForm {
		p[k] = v[0]
	}
	method := m[2]
	s.mu.Lock()
	s.calls = append(s.calls, Call{Method: method, Params: p, At: time.Now()})
	if n := s.skip[method]; n > 0 {
		s.skip[method] = n - 1
	} else if fs := s.fail[method]; len(fs) > 0 {
		s.fail[method] = fs[1:]
		s.calls[len(s.calls)-1].Failed = fs[0].Code
		s.mu.Unlock()
		writeErr(w, fs[0])
		return
	}
	s.mu.Unlock()
	if method == "getUpdates" {
		s.getUpdates(w, r, p)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch method {
	case "getMe":
		writeOK(w, s.bot)
	case "setWebhook":
		if p["url"] == "" {
			writeErr(w, Failure{Code: 400, Description: "Bad Request: bad webhook: URL must be provided"})
			return
		}
		s.webhook = p
		writeOK(w, true)
	case "deleteWebhook":
		s.webhook = nil
		writeOK(w, true)
	case "sendMessage":
		s.sendMessage(w, p)
	case "editMessageText":
		s.edit(w, p, true)
	case "editMessageReplyMarkup":
		s.edit(w, p, false)
	case "getFile":
		s.getFile(w, p)
	case "answerCallbackQuery":
		id := p["callback_query_id"]
		if id == "" {
			writeErr(w, Failure{Code: 400, Description: "Bad Request: query is too old and response timeout expired or query ID is invalid"})
			return
		}
		if _, dup := s.answered[id]; dup {
			writeErr(w, Failure{Code: 400, Description: "Bad Request: query is too old and response timeout expired or query ID is invalid"})
			return
		}
		if n := len(utf16.Encode([]rune(p["text"]))); n > 200 {
			writeErr(w, Failure{Code: 400, Description: "Bad Request: MESSAGE_TOO_LONG"})
			return
		}
		s.answered[id] = p["text"]
		writeOK(w, true)
	default:
		writeErr(w, Failure{Code: 404, Description: "Not Found: method not found"})
	}
}

func (s *Server) sendMessage(w http.ResponseWriter, p map[string]string) {
	chat, err := strconv.ParseInt(p["chat_id"], 10, 64)
	if err != nil || chat == 0 {
		writeErr(w, Failure{Code: 400, Description: "Bad Request: chat not found"})
		return
	}
	if f, ok := checkText(p); !ok {
		writeErr(w, f)
		return
	}
	if f, ok := checkMarkup(p["reply_markup"]); !ok {
		writeErr(w, f)
		return
	}
	if s.nextID[chat] == 0 {
		s.nextID[chat] = 1000
	}
	id := s.nextID[chat]
	s.nextID[chat]++
	msg := &Message{Chat: chat, ID: id, Text: p["text"], Markup: p["reply_markup"]}
	msg.ThreadID, _ = strconv.ParseInt(p["message_thread_id"], 10, 64)
	if rp := p["reply_parameters"]; rp != "" {
		var v struct {
			MessageID int64 `json:"message_id"`
		}
		if err := json.Unmarshal([]byte(rp), &v); err != nil {
			writeErr(w, Failure{Code: 400, Description: "Bad Request: can't parse reply parameters JSON object"})
			return
		}
		msg.ReplyTo = v.MessageID
	}
	s.msgs[key(chat, id)] = msg
	s.log = append(s.log, Entry{Method: "sendMessage", Message: *msg})
	res := map[string]any{"message_id": id, "date": time.Now().Unix(), "text": p["text"],
		"chat": map[string]any{"id": chat, "type": chatType(chat)}, "from": s.bot}
	if msg.ThreadID > 0 {
		res["message_thread_id"] = msg.ThreadID
		res["is_topic_message"] = true
	}
	writeOK(w, res)
}

func (s *Server) edit(w http.ResponseWriter, p map[string]string, text bool) {
	chat, _ := strconv.ParseInt(p["chat_id"], 10, 64)
	id, _ := strconv.ParseInt(p["message_id"], 10, 64)
	msg, ok := s.msgs[key(chat, id)]
	if !ok {
		writeErr(w, Failure{Code: 400, Description: "Bad Request: message to edit not found"})
		return
	}
	if f, ok := checkMarkup(p["reply_markup"]); !ok {
		writeErr(w, f)
		return
	}
	markup := p["reply_markup"]
	if markup == `{"inline_keyboard":[]}` {
		markup = ""
	}
	if text {
		if f, ok := checkText(p); !ok {
			writeErr(w, f)
			return
		}
		if msg.Text == p["text"] && msg.Markup == markup {
			writeErr(w, Failure{Code: 400, Description: "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"})
			return
		}
		msg.Text = p["text"]
	} else if msg.Markup == markup {
		writeErr(w, Failure{Code: 400, Description: "Bad Request: message is not modified"})
		return
	}
	msg.Markup = markup
	msg.Edits++
	method := "editMessageReplyMarkup"
	if text {
		method = "editMessageText"
	}
	s.log = append(s.log, Entry{Method: method, Message: *msg})
	writeOK(w, map[string]any{"message_id": id, "chat": map[string]any{"id": chat, "type": chatType(chat)}, "text": msg.Text})
}

// getUpdates answers with the unconfirmed updates at or above offset,
// forgetting those below it (Telegram's confirmation), and long-polls up
// to timeout seconds (capped at 2 s) when there are none.
func (s *Server) getUpdates(w http.ResponseWriter, r *http.Request, p map[string]string) {
	offset, _ := strconv.ParseInt(p["offset"], 10, 64)
	timeout, _ := strconv.Atoi(p["timeout"])
	deadline := time.Now().Add(min(time.Duration(timeout)*time.Second, 2*time.Second))
	for {
		s.mu.Lock()
		if s.webhook != nil && s.webhook["url"] != "" {
			s.mu.Unlock()
			writeErr(w, Failure{Code: 409, Description: "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"})
			return
		}
		if offset > 0 {
			i := 0
			for i < len(s.ids) && s.ids[i] < offset {
				i++
			}
			s.ids, s.updates = s.ids[i:], s.updates[i:]
		}
		if len(s.updates) > 0 || time.Now().After(deadline) {
			out := append([]json.RawMessage(nil), s.updates...)
			s.mu.Unlock()
			writeOK(w, out)
			return
		}
		wake := s.wake
		s.mu.Unlock()
		select {
		case <-wake:
		case <-r.Context().Done():
			return
		case <-time.After(time.Until(deadline)):
		}
	}
}

func chatType(chat int64) string {
	if chat < 0 {
		return "supergroup"
	}
	return "private"
}

var allowedTags = map[string]bool{"b": true, "strong": true, "i": true, "em": true, "u": true, "ins": true,
	"s": true, "strike": true, "del": true, "span": true, "tg-spoiler": true, "a": true, "code": true,
	"pre": true, "blockquote": true, "tg-emoji": true}

var tagRE = regexp.MustCompile(`^<(/?)([a-z-]+)([^<>]*)>`)
var entityRE = regexp.MustCompile(`^&(lt|gt|amp|quot|#[0-9]+|#x[0-9a-fA-F]+);`)

// checkText enforces what Telegram enforces on text with parse_mode=HTML:
// tags it knows, properly nested; entities it knows; 1–4096 UTF-16 units
// after parsing.
func checkText(p map[string]string) (Failure, bool) {
	t := p["text"]
	visible := t
	if p["parse_mode"] == "HTML" {
		var b strings.Builder
		var stack []string
		for i := 0; i < len(t); {
			switch t[i] {
			case '<':
				m := tagRE.FindStringSubmatch(t[i:])
				if m == nil || !allowedTags[m[2]] {
					return Failure{Code: 400, Description: fmt.Sprintf("Bad Request: can't parse entities: unsupported start tag at byte offset %d", i)}, false
				}
				if m[1] == "/" {
					if len(stack) == 0 || stack[len(stack)-1] != m[2] {
						return Failure{Code: 400, Description: fmt.Sprintf("Bad Request: can't parse entities: unmatched end tag at byte offset %d", i)}, false
					}
					stack = stack[:len(stack)-1]
				} else {
					stack = append(stack, m[2])
				}
				i += len(m[0])
			case '&':
				m := entityRE.FindString(t[i:])
				if m == "" {
					return Failure{Code: 400, Description: fmt.Sprintf("Bad Request: can't parse entities: unsupported entity at byte offset %d", i)}, false
				}
				b.WriteString(html.UnescapeString(m))
				i += len(m)
			case '>':
				return Failure{Code: 400, Description: "Bad Request: can't parse entities: unexpected >"}, false
			default:
				b.WriteByte(t[i])
				i++
			}
		}
		if len(stack) > 0 {
			return Failure{Code: 400, Description: "Bad Request: can't parse entities: can't find end tag corresponding to start tag " + stack[len(stack)-1]}, false
		}
		visible = b.String()
	}
	n := len(utf16.Encode([]rune(visible)))
	if strings.TrimSpace(visible) == "" {
		return Failure{Code: 400, Description: "Bad Request: message text is empty"}, false
	}
	if n > 4096 {
		return Failure{Code: 400, Description: "Bad Request: message is too long"}, false
	}
	return Failure{}, true
}

// CheckHTML reports whether Telegram would accept text with
// parse_mode=HTML, and why not.
func CheckHTML(text string) error {
	if f, ok := checkText(map[string]string{"text": text, "parse_mode": "HTML"}); !ok {
		return fmt.Errorf("%d %s", f.Code, f.Description)
	}
	return nil
}

func checkMarkup(s string) (Failure, bool) {
	if s == "" {
		return Failure{}, true
	}
	var m struct {
		InlineKeyboard [][]struct {
			Text         string  `json:"text"`
			CallbackData *string `json:"callback_data"`
		} `json:"inline_keyboard"`
	}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return Failure{Code: 400, Description: "Bad Request: can't parse reply keyboard markup JSON object"}, false
	}
	for _, row := range m.InlineKeyboard {
		for _, b := range row {
			if b.CallbackData != nil && (len(*b.CallbackData) == 0 || len(*b.CallbackData) > 64) {
				return Failure{Code: 400, Description: "Bad Request: BUTTON_DATA_INVALID"}, false
			}
		}
	}
	return Failure{}, true
}

func writeOK(w http.ResponseWriter, result any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": result})
}

func writeErr(w http.ResponseWriter, f Failure) {
	body := map[string]any{"ok": false, "error_code": f.Code, "description": f.Description}
	if f.RetryAfter > 0 {
		body["parameters"] = map[string]any{"retry_after": f.RetryAfter}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(f.Code)
	_ = json.NewEncoder(w).Encode(body)
}
