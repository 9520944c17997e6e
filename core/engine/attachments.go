package engine

import (
	"fmt"
	"maps"
	"strings"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/markdown"
)

// Files that come with messages: the agent's run fetches them on demand
// (core/agentrun), through the fetcher the engine holds for each channel.

// FetchFilesFrom makes the files of channel's messages readable by agents
// through f (cmd/opsgate registers every adapter that is a
// core.AttachmentFetcher). A channel without one has its files listed by
// reference.
func (e *Engine) FetchFilesFrom(channel string, f core.AttachmentFetcher) {
	m := map[string]core.AttachmentFetcher{}
	if old := e.fetchers.Load(); old != nil {
		maps.Copy(m, *old)
	}
	m[channel] = f
	e.fetchers.Store(&m)
}

func (e *Engine) fetcher(channel string) core.AttachmentFetcher {
	if m := e.fetchers.Load(); m != nil {
		return (*m)[channel]
	}
	return nil
}

// filesWithoutAgent is the reply to a message of only files where no
// agent takes free text: nothing reads files but an agent.
func filesWithoutAgent(as []core.Attachment) string {
	names := make([]string, 0, len(as))
	for _, a := range as {
		names = append(names, markdown.Escape(nameOf(a))) // outside text: inert
	}
	return fmt.Sprintf("📎 Received %s, but no agent reads files here, so nothing was started. "+
		"Send a command with it (`help` lists them).", strings.Join(names, ", "))
}

func nameOf(a core.Attachment) string {
	if n := strings.Join(strings.Fields(a.Name), " "); n != "" {
		if len(n) > 120 {
			n = strings.ToValidUTF8(n[:120], "") + "…"
		}
		return n
	}
	return "a file"
}
