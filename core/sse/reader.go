package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Event is one dispatched Server-Sent Event.
type Event struct {
	// ID is the last event id the stream set (it carries over to events
	// that set none, as the EventSource rules say).
	ID string
	// Type is the event's "event:" name, "message" when none was given.
	Type string
	Data []byte
	// Retry is the reconnection time the server asked for, if any.
	Retry int
}

// MaxLine bounds one line of a stream, and MaxEvent the data of one
// event: a server (or whatever answers in its place) cannot make the
// client buffer without limit.
const (
	MaxLine  = 1 << 20
	MaxEvent = 4 << 20
)

// ErrTooLong is a line or an event past MaxLine or MaxEvent.
var ErrTooLong = errors.New("event stream: line or event too long")

// Reader parses a text/event-stream (the WHATWG EventSource format): lines
// end in \n, \r\n or \r; "field: value" (one optional space after the
// colon); a line starting with ":" is a comment; data lines join with \n;
// a blank line dispatches the event, unless it has no data. Unknown fields
// are ignored, an id containing NUL is ignored, a non-numeric retry is
// ignored.
type Reader struct {
	br        *bufio.Reader
	lastID    string
	pending   bool // a \r was the last byte: skip a \n that follows
	onComment func()
}

// OnComment calls fn for each comment line: a server's keep-alive, which
// a reader that holds something while it reads (a lease) renews on.
func (r *Reader) OnComment(fn func()) { r.onComment = fn }

// NewReader reads events from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 64<<10)}
}

// readLine returns one line without its terminator; io.EOF at the end
// (a final unterminated line is discarded, as the format says: only a
// blank line dispatches).
func (r *Reader) readLine() ([]byte, error) {
	var line []byte
	for {
		b, err := r.br.ReadByte()
		if err != nil {
			return nil, err
		}
		if r.pending {
			r.pending = false
			if b == '\n' {
				continue
			}
		}
		switch b {
		case '\n':
			return line, nil
		case '\r':
			r.pending = true
			return line, nil
		}
		if len(line) >= MaxLine {
			return nil, ErrTooLong
		}
		line = append(line, b)
	}
}

// Next returns the next event with data; io.EOF when the stream ends.
func (r *Reader) Next() (Event, error) {
	var data bytes.Buffer
	typ, lines, retry := "", 0, 0
	for {
		line, err := r.readLine()
		if err != nil {
			return Event{}, err
		}
		if len(line) == 0 {
			// No data, or one empty data line: nothing to dispatch.
			if lines == 0 || (lines == 1 && data.Len() == 0) {
				data.Reset()
				typ, lines, retry = "", 0, 0
				continue
			}
			if typ == "" {
				typ = "message"
			}
			return Event{ID: r.lastID, Type: typ, Data: data.Bytes(), Retry: retry}, nil
		}
		if line[0] == ':' {
			if r.onComment != nil {
				r.onComment()
			}
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "event":
			typ = string(value)
		case "data":
			if lines > 0 {
				data.WriteByte('\n')
			}
			if data.Len()+len(value) > MaxEvent {
				return Event{}, ErrTooLong
			}
			data.Write(value)
			lines++
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				r.lastID = string(value)
			}
		case "retry":
			if n, err := strconv.Atoi(string(value)); err == nil && n >= 0 {
				retry = n
			}
		}
	}
}

// String renders an event for test failures.
func (e Event) String() string { return fmt.Sprintf("%s#%s %q", e.Type, e.ID, e.Data) }
