package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/authority"
)

// Records and artifacts (docs/mcp.md):
//
//   - A record is one entry of the audit log (approvals.AuditEntry): a
//     request, a decision, a grant, a run's interruption. Its recordId is
//     its sequence number. Only a token that reads every run reads the
//     audit log (core/authority: ReadAudit).
//   - An artifact is what a step produced: a tool's output or an agent
//     task's result (JSON), named <runId>/<stageName>; a flow's stage is
//     found by flow and stage name (the newest succeeded one).
//
// Lists carry metadata; get_record and get_artifact carry the business data
// (the entry's detail, the artifact's content). A missing (or invisible)
// record or artifact is null, not an error.

type recordView struct {
	ID         string          `json:"id"`
	Seq        int64           `json:"seq"`
	Kind       string          `json:"kind"`
	Actor      string          `json:"actor"`
	RunID      string          `json:"run_id,omitempty"`
	ApprovalID string          `json:"approval_id,omitempty"`
	Tool       string          `json:"tool,omitempty"`
	At         string          `json:"at"`
	Detail     json.RawMessage `json:"detail"`
	Hash       string          `json:"hash"`
}

func (s *Server) getRecord(ctx context.Context, x *call) (any, *toolErr) {
	type out struct {
		Record *recordView `json:"record"`
	}
	seq, err := strconv.ParseInt(x.str("recordId"), 10, 64)
	if err != nil || seq < 1 {
		return out{}, nil
	}
	es, err := s.o.Store.AuditList(ctx, approvals.AuditListParams{After: seq - 1, Limit: 1})
	if err != nil {
		return nil, s.internalError("get_record", err)
	}
	if len(es) == 0 || es[0].Seq != seq {
		return out{}, nil
	}
	e := es[0]
	detail := e.Detail
	if len(detail) == 0 {
		detail = json.RawMessage("null")
	}
	return out{Record: &recordView{ID: strconv.FormatInt(e.Seq, 10), Seq: e.Seq, Kind: string(e.Kind), Actor: e.Actor, RunID: e.RunID,
		ApprovalID: e.ApprovalID, Tool: e.Tool, At: rfc3339(e.At), Detail: detail, Hash: e.Hash}}, nil
}

type artifactView struct {
	ID        string          `json:"id"`
	RunID     string          `json:"run_id"`
	Flow      string          `json:"flow"`
	Stage     string          `json:"stage"`
	StepIndex int             `json:"step_index"`
	Tool      string          `json:"tool"`
	MediaType string          `json:"media_type"`
	Size      int             `json:"size"`
	CreatedAt string          `json:"created_at,omitempty"`
	Content   *string         `json:"content,omitempty"`
	JSON      json.RawMessage `json:"json,omitempty"`
}

// artifactsOf lists the artifacts of a run: its succeeded steps with
// output, in step order.
func (s *Server) artifactsOf(r *core.Run, stage string, detail bool) []artifactView {
	var out []artifactView
	for _, st := range r.Steps {
		if st.Status != core.StepSucceeded {
			continue
		}
		name := s.stage(r.Flow, st.Index, st)
		if stage != "" && name != stage {
			continue
		}
		a := artifactView{ID: r.ID + "/" + name, RunID: r.ID, Flow: r.Flow, Stage: name, StepIndex: st.Index, Tool: st.Tool,
			MediaType: "text/plain", Size: len(st.Output), CreatedAt: rfc3339Ptr(st.FinishedAt)}
		if st.Tool == core.AgentTaskStep && json.Valid([]byte(st.Output)) {
			a.MediaType = "application/json"
		}
		if detail {
			content := st.Output
			a.Content = &content
			if a.MediaType == "application/json" {
				a.JSON = json.RawMessage(st.Output)
			}
		}
		out = append(out, a)
	}
	return out
}

func (s *Server) getArtifact(ctx context.Context, x *call) (any, *toolErr) {
	type out struct {
		Artifact *artifactView `json:"artifact"`
	}
	id, flow, stage := x.str("artifactId"), x.str("flowName"), x.str("stageName")
	switch {
	case id != "" && (flow != "" || stage != ""):
		return nil, errf("invalid_input", "get_artifact takes artifactId, or flowName and stageName, not both")
	case id != "":
		runID, st, ok := strings.Cut(id, "/")
		if !ok {
			return out{}, nil
		}
		r, err := s.auth.Run(ctx, x.c.auth, authority.SeeRun, runID)
		if ref, ok := authority.RefusalOf(err); ok && ref.Code == authority.CodeNotFound {
			return out{}, nil
		}
		if err != nil {
			return nil, s.refused("get_artifact", err)
		}
		if as := s.artifactsOf(r, st, true); len(as) > 0 {
			return out{Artifact: &as[0]}, nil
		}
		return out{}, nil
	case flow == "" || stage == "":
		return nil, errf("invalid_input", "get_artifact needs artifactId, or both flowName and stageName")
	}
	p := core.RunListParams{Flow: flow, Limit: 50, Requester: s.auth.RunFilter(x.c.auth)}
	view := s.auth.Viewer(x.c.auth)
	// The newest succeeded stage, within the newest few hundred runs.
	for page := 0; page < 10; page++ {
		runs, next, err := s.o.Store.RunList(ctx, p)
		if err != nil {
			return nil, s.internalError("get_artifact", err)
		}
		for _, meta := range runs {
			if ok, err := view.SeesRun(ctx, meta); err != nil || !ok {
				if err != nil {
					return nil, s.internalError("get_artifact", err)
				}
				continue
			}
			r, err := s.o.Store.RunGet(ctx, meta.ID)
			if err != nil {
				return nil, s.internalError("get_artifact", err)
			}
			if as := s.artifactsOf(r, stage, true); len(as) > 0 {
				return out{Artifact: &as[0]}, nil
			}
		}
		if next == "" {
			break
		}
		p.Cursor = next
	}
	return out{}, nil
}

// artifactCursor is where the next page of list_artifacts starts: a page
// of runs (its RunList cursor) and how many artifacts of it were listed.
type artifactCursor struct {
	Runs string `json:"r"`
	Skip int    `json:"s"`
}

func (s *Server) listArtifacts(ctx context.Context, x *call) (any, *toolErr) {
	limit := x.int("limit", defaultLimit)
	var cur artifactCursor
	if c := x.str("cursor"); c != "" {
		b, err := base64.RawURLEncoding.DecodeString(c)
		if err != nil || json.Unmarshal(b, &cur) != nil || cur.Skip < 0 {
			return nil, errf("invalid_input", "cursor is not valid (use next_cursor from a previous page)")
		}
	}
	stage := x.str("stageName")
	p := core.RunListParams{Flow: x.str("flowName"), Limit: 20, Cursor: cur.Runs, Requester: s.auth.RunFilter(x.c.auth)}
	view := s.auth.Viewer(x.c.auth)
	out := struct {
		Artifacts  []artifactView `json:"artifacts"`
		NextCursor string         `json:"next_cursor"`
	}{Artifacts: []artifactView{}}
	skip := cur.Skip
	for pages := 0; pages < 50 && len(out.Artifacts) < limit; pages++ {
		runs, next, err := s.o.Store.RunList(ctx, p)
		if err != nil {
			if p.Cursor != "" {
				return nil, errf("invalid_input", "cursor is not valid (use next_cursor from a previous page)")
			}
			return nil, s.internalError("list_artifacts", err)
		}
		var page []artifactView
		for _, meta := range runs {
			if ok, err := view.SeesRun(ctx, meta); err != nil || !ok {
				if err != nil {
					return nil, s.internalError("list_artifacts", err)
				}
				continue
			}
			r, err := s.o.Store.RunGet(ctx, meta.ID)
			if err != nil {
				return nil, s.internalError("list_artifacts", err)
			}
			page = append(page, s.artifactsOf(r, stage, false)...)
		}
		if skip > len(page) {
			skip = len(page)
		}
		page = page[skip:]
		if room := limit - len(out.Artifacts); len(page) > room {
			out.Artifacts = append(out.Artifacts, page[:room]...)
			out.NextCursor = encodeCursor(artifactCursor{Runs: p.Cursor, Skip: skip + room})
			return out, nil
		}
		out.Artifacts = append(out.Artifacts, page...)
		if next == "" {
			return out, nil
		}
		p.Cursor, skip = next, 0
	}
	// Only a run page with a next one gets here: more may follow.
	out.NextCursor = encodeCursor(artifactCursor{Runs: p.Cursor})
	return out, nil
}

func encodeCursor(c artifactCursor) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}
