package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

func readAll(t *testing.T, in string) ([]Event, error) {
	t.Helper()
	r := NewReader(strings.NewReader(in))
	var out []Event
	for range 10000 {
		ev, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		out = append(out, ev)
	}
	t.Fatal("reader did not end")
	return nil, nil
}

func TestReader(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in string
		want     []string // type#id "data"
	}{
		{"OneEvent", "id: 1\nevent: approval\ndata: {\"a\":1}\n\n", []string{`approval#1 "{\"a\":1}"`}},
		{"DefaultTypeIsMessage", "data: x\n\n", []string{`message# "x"`}},
		{"DataLinesJoin", "data: a\ndata: b\n\n", []string{`message# "a\nb"`}},
		{"NoSpaceAfterColon", "event:run\ndata:x\n\n", []string{`run# "x"`}},
		{"OnlyOneSpaceIsStripped", "data:  x\n\n", []string{`message# " x"`}},
		{"CRLFAndCR", "event: a\r\ndata: 1\r\n\r\nevent: b\rdata: 2\r\r", []string{`a# "1"`, `b# "2"`}},
		{"CommentsAndPingsDispatchNothing", ": ping\n\n:hello\ndata: x\n\n", []string{`message# "x"`}},
		{"IDCarriesOver", "id: 7\ndata: a\n\ndata: b\n\n", []string{`message#7 "a"`, `message#7 "b"`}},
		{"IDWithNULIgnored", "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n", []string{`message#1 "a"`, `message#1 "b"`}},
		{"EventWithoutDataIsDropped", "event: ready\n\ndata: x\n\n", []string{`message# "x"`}},
		{"EmptyDataIsDropped", "data:\n\n", nil},
		{"TwoEmptyDataLinesAreANewline", "data:\ndata:\n\n", []string{`message# "\n"`}},
		{"UnknownFieldsIgnored", "foo: bar\nretry: x\ndata: y\n\n", []string{`message# "y"`}},
		{"TypeDoesNotLeakToTheNextEvent", "event: a\ndata: 1\n\ndata: 2\n\n", []string{`a# "1"`, `message# "2"`}},
		{"UnterminatedLastEventIsDiscarded", "data: a\n\ndata: b\n", []string{`message# "a"`}},
		{"FieldWithoutColon", "data\n\n", nil},
		{"Retry", "retry: 2000\ndata: x\n\n", []string{`message# "x"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			evs, err := readAll(t, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ev := range evs {
				got = append(got, ev.String())
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("got %q\nwant %q", got, tc.want)
			}
		})
	}
	t.Run("RetryIsReported", func(t *testing.T) {
		evs, _ := readAll(t, "retry: 2000\ndata: x\n\n")
		if len(evs) != 1 || evs[0].Retry != 2000 {
			t.Fatalf("%+v", evs)
		}
	})
}

func TestReaderOnComment(t *testing.T) {
	t.Parallel()
	r := NewReader(strings.NewReader(": ping\n\n:\ndata: x\n\n: after\n"))
	n := 0
	r.OnComment(func() { n++ })
	if ev, err := r.Next(); err != nil || string(ev.Data) != "x" || n != 2 {
		t.Fatalf("first event %v, %v after %d comments; want x after 2", ev, err, n)
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) || n != 3 {
		t.Fatalf("end %v after %d comments; want io.EOF after 3", err, n)
	}
}

func TestReaderBounds(t *testing.T) {
	t.Parallel()
	long := "data: " + strings.Repeat("x", MaxLine+1) + "\n\n"
	if _, err := readAll(t, long); !errors.Is(err, ErrTooLong) {
		t.Fatalf("a line past MaxLine: %v", err)
	}
	var b strings.Builder
	line := "data: " + strings.Repeat("y", 1000) + "\n"
	for b.Len() < MaxEvent+MaxEvent/10 {
		b.WriteString(line)
	}
	b.WriteString("\n")
	if _, err := readAll(t, b.String()); !errors.Is(err, ErrTooLong) {
		t.Fatalf("an event past MaxEvent: %v", err)
	}
}

// FuzzReader: any bytes end in events and then io.EOF or ErrTooLong,
// never a panic or a hang; what a well-behaved server writes (one event
// per frame, data without line breaks) reads back exactly.
func FuzzReader(f *testing.F) {
	f.Add([]byte("id: 1\nevent: approval\ndata: {}\n\n"), "run", "x")
	f.Add([]byte(": ping\r\n\r\ndata:\rdata:a\r\r"), "", "")
	f.Add([]byte("data: a\x00b\n\nid\n:\n\n"), "ev", "d:a:t")
	f.Fuzz(func(t *testing.T, raw []byte, typ, data string) {
		r := NewReader(bytes.NewReader(raw))
		for i := 0; ; i++ {
			if i > len(raw)+1 {
				t.Fatalf("more events than bytes")
			}
			if _, err := r.Next(); err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, ErrTooLong) {
					t.Fatalf("unexpected error %v", err)
				}
				break
			}
		}
		if strings.ContainsAny(typ+data, "\r\n") || data == "" || !utf8.ValidString(typ) {
			return
		}
		frame := "id: 5\nevent: " + typ + "\ndata: " + data + "\n\n"
		evs, err := readAll(t, frame)
		want := typ
		if typ == "" {
			want = "message"
		}
		if err != nil || len(evs) != 1 || evs[0].Type != want || string(evs[0].Data) != data || evs[0].ID != "5" {
			// "event: " + typ keeps typ whole only when it does not start
			// with a space (one is stripped).
			if strings.HasPrefix(typ, " ") || strings.HasPrefix(data, " ") {
				return
			}
			t.Fatalf("frame %q read as %v, %v", frame, evs, err)
		}
	})
}
