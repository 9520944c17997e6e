package web

import (
	"bufio"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestEventStreamWireFormat pins the page feed's bytes (written through
// core/sse): the reconnect delay, then numbered "change" frames after a
// commit and "tick" frames on the fallback, each data the frame's number.
func TestEventStreamWireFormat(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	c := newClient(t, b.url)
	csrf := c.signIn(adminToken)
	req, _ := http.NewRequestWithContext(t.Context(), "GET", b.url+"/events", nil)
	res, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" || res.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("status %d, headers %v", res.StatusCode, res.Header)
	}
	br := bufio.NewReader(res.Body)
	frame := func() string {
		var f strings.Builder
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("after %q: %v", f.String(), err)
			}
			if f.WriteString(line); line == "\n" {
				return f.String()
			}
		}
	}
	if f := frame(); f != "retry: 2000\n\n" {
		t.Fatalf("first frame %q", f)
	}
	if r := c.do("POST", "/chat", url.Values{"thread": {"wire"}, "text": {"hello"}, "_csrf": {csrf}}, nil); r.status != http.StatusSeeOther {
		t.Fatalf("chat: %d %s", r.status, r.body)
	}
	re := regexp.MustCompile(`^id: (\d+)\nevent: (change|tick)\ndata: (\d+)\n\n$`)
	for n := 1; ; n++ {
		f := frame()
		m := re.FindStringSubmatch(f)
		if m == nil || m[1] != strconv.Itoa(n) || m[3] != m[1] {
			t.Fatalf("frame %d: %q", n, f)
		}
		if m[2] == "change" {
			break
		}
		if n > 50 {
			t.Fatal("no change frame after a commit")
		}
	}
}
