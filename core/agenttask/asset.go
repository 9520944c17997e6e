package agenttask

import (
	"context"
	"encoding/base64"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/opsgate/opsgate/core"
)

// An agent task's assets, read by the agent holding the claim.

// Asset reads up to MaxAssetRead bytes of a declared asset from
// offset, for the claim holder. Assets are named by id only.
func (t *Tasks) Asset(ctx context.Context, actor core.Actor, ref core.AgentRef, claimID, assetID string, offset int64) (*core.AgentAsset, error) {
	c, err := t.loadCall(ctx, ref)
	if err != nil {
		return nil, err
	}
	if err := t.stillServed(ctx, c); err != nil {
		return nil, err
	}
	if ae := owned(c, actor, claimID); ae != nil {
		return nil, ae
	}
	if offset < 0 {
		return nil, agentErr(core.AgentBadRequest, "offset must not be negative")
	}
	var a *core.AgentTaskAsset
	for i := range c.Task.Assets {
		if c.Task.Assets[i].ID == assetID {
			a = &c.Task.Assets[i]
		}
	}
	if a == nil {
		return nil, agentErr(core.AgentUnknownAsset, "the task declares no asset %q", assetID)
	}
	var data []byte
	var size int64
	if a.Path == "" {
		size = int64(len(a.Text))
		if offset < size {
			data = []byte(a.Text[offset:min(size, offset+MaxAssetRead)])
		}
	} else {
		f, err := os.Open(a.Path)
		if err != nil {
			t.log.Error("agent asset unreadable", "asset", assetID, "err", err)
			return nil, agentErr(core.AgentAssetError, "asset %s cannot be read now", assetID)
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return nil, agentErr(core.AgentAssetError, "asset %s cannot be read now", assetID)
		}
		size = fi.Size()
		if offset < size {
			data, err = io.ReadAll(io.LimitReader(io.NewSectionReader(f, offset, size-offset), MaxAssetRead))
			if err != nil {
				return nil, agentErr(core.AgentAssetError, "asset %s cannot be read now", assetID)
			}
		}
	}
	out := &core.AgentAsset{ID: a.ID, MediaType: a.MediaType, Description: a.Description, Size: size, Offset: offset, NextOffset: -1}
	if utf8.Valid(data) || textLike(a.MediaType) && utf8.Valid(trimPartialRune(data)) {
		text := trimPartialRune(data)
		out.Encoding, out.Content = "utf-8", string(text)
		data = text
	} else {
		out.Encoding, out.Content = "base64", base64.StdEncoding.EncodeToString(data)
	}
	if end := offset + int64(len(data)); end < size {
		out.NextOffset = end
	}
	return out, nil
}

func textLike(mediaType string) bool {
	return strings.HasPrefix(mediaType, "text/") || strings.Contains(mediaType, "json") || strings.Contains(mediaType, "yaml") || strings.Contains(mediaType, "xml")
}

// trimPartialRune drops an incomplete UTF-8 sequence cut at the end of a
// read, so a text chunk stays valid; the next read starts with it.
func trimPartialRune(b []byte) []byte {
	// At most the last UTFMax-1 bytes can be the start of a cut rune.
	for cut := 0; cut < utf8.UTFMax && cut < len(b); cut++ {
		head := b[:len(b)-cut]
		if utf8.Valid(head) {
			return head
		}
	}
	return b
}
