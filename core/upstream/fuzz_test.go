package upstream

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/tools"
)

// A server's tools/list and tools/call answers are outside input: whatever
// they hold, opsgate must neither panic nor offer a tool it cannot check.

func FuzzToolsList(f *testing.F) {
	f.Add([]byte(`{"tools":[{"name":"echo","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]},"annotations":{"readOnlyHint":true}}]}`))
	f.Add([]byte(`{"tools":[{"name":"x","inputSchema":{"type":"string"}},{"name":"x","inputSchema":{}},null]}`))
	f.Add([]byte(`{"tools":[{"name":"a b/c","inputSchema":{"$ref":"file:///etc/passwd"}},{"name":"r","inputSchema":{"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}}]}`))
	f.Add([]byte(`{"tools":[{"name":"w","inputSchema":{"type":"object"},"annotations":{"destructiveHint":false,"openWorldHint":false,"idempotentHint":true}}]}`))
	c := newClient(Server{Name: "f", Command: []string{"x"}, Tools: []string{"*"}, Secrets: []string{"sekret"}}, slog.New(slog.DiscardHandler))
	f.Fuzz(func(t *testing.T, data []byte) {
		var res mcp.ListToolsResult
		if json.Unmarshal(data, &res) != nil {
			return
		}
		infos, offered := c.buildTools(res.Tools)
		for name, tl := range offered {
			remote, ok := strings.CutPrefix(name, "f.")
			if !ok || !remoteNameRE.MatchString(remote) || tl.Name != name || tl.Runner == nil || tl.Schema == nil {
				t.Fatalf("offered %q: %+v", name, tl)
			}
			if strings.Contains(tl.Description, "sekret") {
				t.Fatalf("description unmasked: %q", tl.Description)
			}
		}
		for _, in := range infos {
			if in.Offered != (offered[in.Name] != nil) {
				t.Fatalf("info %q offered=%v disagrees with the tools", in.Name, in.Offered)
			}
		}
	})
}

func FuzzRenderResult(f *testing.F) {
	f.Add([]byte(`{"content":[{"type":"text","text":"hi"},{"type":"image","data":"aGk=","mimeType":"image/png"}]}`))
	f.Add([]byte(`{"content":[],"structuredContent":{"a":[1,2,{"b":null}]},"isError":true}`))
	f.Add([]byte(`{"content":[{"type":"resource","resource":{"uri":"file:///x","blob":"aGk="}},{"type":"resource_link","uri":"x://y","name":"n"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var res mcp.CallToolResult
		if json.Unmarshal(data, &res) != nil {
			return
		}
		out, cut := tools.CapOutput(renderResult(&res), 256)
		if cut && len(out) > 256+len("\n[… truncated 9223372036854775807 bytes]") {
			t.Fatalf("capped output is %d bytes", len(out))
		}
	})
}

// FuzzElicitationForm: a server's requested schema is outside input.
// Whatever it holds, the form opsgate makes of it is a valid ask_user ask
// (or refused with an error), and an answer skipping what may be skipped
// is read back without a panic.
func FuzzElicitationForm(f *testing.F) {
	f.Add([]byte(`{"type":"object","properties":{"env":{"type":"string","enum":["a","b"]},"n":{"type":"integer","minimum":1},"ok":{"type":"boolean"}},"required":["env"]}`))
	f.Add([]byte(`{"type":"object","properties":{"s":{"type":"string","oneOf":[{"const":"x","title":"X"},{"const":"y"}]},"t":{"type":"array","items":{"enum":["p","q"]}}}}`))
	f.Add([]byte(`{"type":"object","properties":{"a b!":{"type":"number","title":""},"c":{"type":"string","enum":["only"]}},"required":["a b!","zz"]}`))
	f.Add([]byte(`{"type":"object","properties":{"x":{"type":"object"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var raw any
		if json.Unmarshal(data, &raw) != nil {
			return
		}
		fm, err := newForm("f", raw)
		if err != nil {
			return
		}
		if _, err := agent.ParseAsk(string(mustJSON(fm.ask))); err != nil {
			t.Fatalf("the form is no valid ask: %v (%s)", err, data)
		}
		var r agent.Reply
		for _, q := range fm.ask.Questions {
			r.Answers = append(r.Answers, agent.Answer{QuestionID: q.ID, IsSkipped: q.Optional, Answer: "1"})
		}
		_, _ = fm.content(r)
	})
}
