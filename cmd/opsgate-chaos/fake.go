package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// fake is the one platform the chaos run talks to, on loopback: the few
// Telegram Bot API methods opsgate calls (it keeps every message it was
// sent, with its edits, as the log the invariants read) and the HTTP
// endpoint the run's tools call (it logs every dispatch with its
// Idempotency-Key, and takes a while to answer so kills land mid-call).
type fake struct {
	srv   *http.Server
	addr  string
	token string
	// toolDelay bounds how long a tool call takes (uniform in [0, it)).
	toolDelay time.Duration

	mu       sync.Mutex
	msgs     map[string]*sentMessage // "<chat>/<id>"
	order    []string
	nextID   map[int64]int64
	sends    int // sendMessage calls accepted
	edits    int
	notMod   int // edits refused as "message is not modified"
	dispatch []dispatchCall
}

type sentMessage struct {
	Chat, ID int64
	Text     string
	Markup   string
	Edits    int
}

type dispatchCall struct {
	Tool, Key, RunID string
	At               time.Time
}

func startFake(token string, toolDelay time.Duration) (*fake, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fake: listen: %w", err)
	}
	f := &fake{token: token, toolDelay: toolDelay, addr: l.Addr().String(), msgs: map[string]*sentMessage{}, nextID: map[int64]int64{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/bot"+token+"/{method}", f.botAPI)
	mux.HandleFunc("POST /tool/{name}", f.tool)
	f.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = f.srv.Serve(l) }()
	return f, nil
}

func (f *fake) url() string { return "http://" + f.addr }

func (f *fake) close() { _ = f.srv.Close() }

// botAPI answers one Bot API call: form or JSON parameters, {"ok":true,…}.
func (f *fake) botAPI(w http.ResponseWriter, r *http.Request) {
	p := map[string]string{}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		var m map[string]any
		_ = json.NewDecoder(r.Body).Decode(&m)
		for k, v := range m {
			if s, ok := v.(string); ok {
				p[k] = s
			} else {
				b, _ := json.Marshal(v)
				p[k] = string(b)
			}
		}
	} else {
		_ = r.ParseForm()
		for k := range r.Form {
			p[k] = r.Form.Get(k)
		}
	}
	switch r.PathValue("method") {
	case "getMe":
		ok(w, map[string]any{"id": 4242, "is_bot": true, "first_name": "Ops", "username": "chaos_bot"})
	case "setWebhook", "deleteWebhook", "answerCallbackQuery":
		ok(w, true)
	case "sendMessage":
		chat, _ := strconv.ParseInt(p["chat_id"], 10, 64)
		f.mu.Lock()
		f.nextID[chat]++
		id := f.nextID[chat] + 1 // message 1 of each chat is the request
		m := &sentMessage{Chat: chat, ID: id, Text: p["text"], Markup: keyboard(p["reply_markup"])}
		k := refKey(chat, id)
		f.msgs[k] = m
		f.order = append(f.order, k)
		f.sends++
		f.mu.Unlock()
		ok(w, map[string]any{"message_id": id, "chat": map[string]any{"id": chat, "type": "private"}, "date": time.Now().Unix(), "text": p["text"]})
	case "editMessageText", "editMessageReplyMarkup":
		chat, _ := strconv.ParseInt(p["chat_id"], 10, 64)
		id, _ := strconv.ParseInt(p["message_id"], 10, 64)
		f.mu.Lock()
		defer f.mu.Unlock()
		m := f.msgs[refKey(chat, id)]
		if m == nil {
			fail(w, 400, "Bad Request: message to edit not found")
			return
		}
		text, markup := m.Text, keyboard(p["reply_markup"])
		if r.PathValue("method") == "editMessageText" {
			text = p["text"]
		}
		if text == m.Text && markup == m.Markup {
			f.notMod++
			fail(w, 400, "Bad Request: message is not modified: specified new message content and reply markup are exactly the same")
			return
		}
		m.Text, m.Markup = text, markup
		m.Edits++
		f.edits++
		ok(w, true)
	default:
		fail(w, 404, "Not Found: method "+r.PathValue("method"))
	}
}

// keyboard normalises reply_markup: no keyboard and an empty one are alike.
func keyboard(s string) string {
	if s == "" || s == `{"inline_keyboard":[]}` {
		return ""
	}
	return s
}

func refKey(chat, id int64) string {
	return strconv.FormatInt(chat, 10) + "/" + strconv.FormatInt(id, 10)
}

func ok(w http.ResponseWriter, result any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": result})
}

func fail(w http.ResponseWriter, code int, desc string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error_code": code, "description": desc})
}

// tool is the tools' endpoint: the dispatch is logged when the request
// arrives — the tool "ran" — and answered after a random delay.
func (f *fake) tool(w http.ResponseWriter, r *http.Request) {
	c := dispatchCall{Tool: r.PathValue("name"), Key: r.Header.Get("Idempotency-Key"), RunID: r.Header.Get("X-Opsgate-Run-Id"), At: time.Now()}
	f.mu.Lock()
	f.dispatch = append(f.dispatch, c)
	f.mu.Unlock()
	if f.toolDelay > 0 {
		select {
		case <-time.After(rand.N(f.toolDelay)):
		case <-r.Context().Done():
			return
		}
	}
	_, _ = fmt.Fprintf(w, "%s done (%s)\n", c.Tool, c.Key)
}

// cards returns the messages that carry an inline keyboard (pending cards),
// with their approve button's callback_data, by chat.
func (f *fake) cards() map[int64]card {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[int64]card{}
	for _, k := range f.order {
		m := f.msgs[k]
		var kb struct {
			InlineKeyboard [][]struct {
				Text         string `json:"text"`
				CallbackData string `json:"callback_data"`
			} `json:"inline_keyboard"`
		}
		if m.Markup == "" || json.Unmarshal([]byte(m.Markup), &kb) != nil {
			continue
		}
		for _, row := range kb.InlineKeyboard {
			for _, b := range row {
				if strings.Contains(b.Text, "Approve") {
					out[m.Chat] = card{chat: m.Chat, id: m.ID, approve: b.CallbackData}
				}
			}
		}
	}
	return out
}

type card struct {
	chat, id int64
	approve  string
}

// snapshot copies what the invariants read.
func (f *fake) snapshot() (msgs map[string]sentMessage, calls []dispatchCall, sends, edits, notModified int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	msgs = make(map[string]sentMessage, len(f.msgs))
	for k, m := range f.msgs {
		msgs[k] = *m
	}
	return msgs, append([]dispatchCall(nil), f.dispatch...), f.sends, f.edits, f.notMod
}
