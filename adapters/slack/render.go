package slack

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	slackapi "github.com/slack-go/slack"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/chunk"
	"github.com/opsgate/opsgate/core/delivery"
	"github.com/opsgate/opsgate/core/markdown"
)

// Slack's limits, as documented for Block Kit and chat.postMessage.
const (
	// replyLimit is the text length Slack shows without truncation
	// ("keep text under 4,000 characters"); chat.postMessage cuts at 40,000.
	replyLimit     = 4000
	sectionTextMax = 3000
	headerTextMax  = 150
	maxBlocks      = 50
	// blocksBudget is the JSON size of a message's blocks opsgate stays
	// under: Slack refuses messages (msg_blocks_too_long) near 13k.
	blocksBudget = 12000
	// argFold is where a long argument value is folded on the card; the
	// modal and the console show it whole.
	argFold = 300
)

// Format is how replies are rendered and cut for Slack: mrkdwn, at most
// 4,000 characters a message, "(i/n)" markers on multi-part replies.
func (a *Adapter) Format() delivery.Format {
	return delivery.Format{
		Limit: replyLimit, Unit: chunk.Runes, Syntax: chunk.Mrkdwn, Markers: true,
		Render: renderMrkdwn,
	}
}

// renderCard renders an approval card as Block Kit: self-contained (tool,
// arguments, reason, risk, preview, who asked, who decides, expiry) with
// Approve / Reject / Edit while pending, and the outcome line once decided.
// It stays within 50 blocks, 3,000 characters a section and ~12,000
// characters of blocks by folding long values and trimming the preview,
// with a note and a console link when it does. The second result is the
// notification text.
func (a *Adapter) renderCard(c core.Card) ([]slackapi.Block, string) {
	if len(c.Batch) > 1 {
		return a.renderBatch(c)
	}
	mk := func(s string) *slackapi.TextBlockObject {
		return slackapi.NewTextBlockObject(slackapi.MarkdownType, s, false, false)
	}
	section := func(s string) slackapi.Block {
		return slackapi.NewSectionBlock(mk(clip(s, sectionTextMax)), nil, nil)
	}

	title := "Approval needed: " + c.Tool
	if !c.Pending() {
		title = "Approval " + string(c.Status) + ": " + c.Tool
	}
	head := []slackapi.Block{slackapi.NewHeaderBlock(slackapi.NewTextBlockObject(slackapi.PlainTextType, clip(title, headerTextMax), false, false))}

	approvers := peopleMrkdwn(c.Approvers)
	if c.Quorum > 1 {
		approvers += fmt.Sprintf(" (%d of %d approvals)", c.Approvals, c.Quorum)
	}
	fields := []*slackapi.TextBlockObject{
		mk("*Tool*\n" + codeSpan(clip(c.Tool, 500))),
		mk("*Risk*\n" + escapeMrkdwn(clip(string(c.Risk), 200))),
		mk("*Requested by*\n" + clip(peopleMrkdwn([]string{c.Requester}), 1000)),
		mk("*Who may decide*\n" + clip(approvers, 1500)),
	}
	if c.Pending() && !c.ExpiresAt.IsZero() {
		fields = append(fields, mk("*Expires*\n"+slackDate(c.ExpiresAt)))
	}
	if c.Pending() && c.Next != "" {
		fields = append(fields, mk("*Next*\n"+escapeMrkdwn(clip(core.OneLine(c.Next), 500))))
	}
	head = append(head, slackapi.NewSectionBlock(nil, fields, nil))
	if c.Reason != "" {
		head = append(head, section("*Reason*\n"+quote(clip(core.OneLine(c.Reason), 1500))))
	}
	if lines := c.ChangeLines(); len(lines) > 0 {
		head = append(head, section("*"+core.ChangesHeading+"*\n• "+escapeMrkdwn(clip(strings.Join(lines, "\n• "), 1500))))
	}

	// The tail is the decision area: buttons or the outcome, and the id.
	var tail []slackapi.Block
	if c.Pending() {
		btn := func(action, label string) *slackapi.ButtonBlockElement {
			return slackapi.NewButtonBlockElement(action, a.sign.buttonValue(action, c.ApprovalID),
				slackapi.NewTextBlockObject(slackapi.PlainTextType, label, false, false))
		}
		tail = append(tail, slackapi.NewActionBlock("opsgate:decide",
			btn(actionApprove, "Approve").WithStyle(slackapi.StylePrimary),
			btn(actionReject, "Reject").WithStyle(slackapi.StyleDanger),
			btn(actionEdit, "Edit"),
		))
	} else if line := outcomeMrkdwn(c); line != "" {
		tail = append(tail, section(line))
	}
	ctxText := "Approval " + codeSpan(c.ApprovalID)
	if u, ok := markdown.SafeURL(c.ConsoleURL); ok && c.ConsoleURL != "" {
		ctxText += " · <" + u + "|Open in the console>"
	}
	tail = append(tail, slackapi.NewContextBlock("", mk(clip(ctxText, 2000))))

	used := blocksSize(head) + blocksSize(tail)
	blocks := head

	// Arguments, folded, in as many sections as they need.
	if len(c.Args) > 0 {
		var secs []string
		cur := "*Arguments*"
		shown := 0
		for _, arg := range c.Args {
			line := "\n• " + codeSpan(clip(arg.Name, 200)) + ": " + foldValue(arg.Shown())
			if utf8.RuneCountInString(cur)+utf8.RuneCountInString(line) > sectionTextMax {
				secs = append(secs, cur)
				cur = strings.TrimPrefix(line, "\n")
			} else {
				cur += line
			}
			if used+sumLen(secs)+jsonLen(cur)+200 > blocksBudget*3/4 || len(blocks)+len(secs)+len(tail)+3 > maxBlocks {
				break
			}
			shown++
		}
		if shown < len(c.Args) {
			cur += fmt.Sprintf("\n_…and %d more arguments; see the console._", len(c.Args)-shown)
		}
		secs = append(secs, cur)
		for _, s := range secs {
			b := section(s)
			blocks = append(blocks, b)
			used += blockSize(b)
		}
	}

	// The dry-run preview gets what budget is left, trimmed with a note.
	if c.Preview != "" {
		room := min(blocksBudget-used-600, sectionTextMax-40)
		raw := strings.ReplaceAll(c.Preview, "```", "`\u200b``")
		total := utf8.RuneCountInString(raw)
		if room > 100 {
			// Trim the raw text, then escape: a cut never splits an entity.
			// JSON escaping can grow text, so measure what is sent.
			trimmed := total > room
			if trimmed { // every rune is at least one JSON character
				raw = clipRunes(raw, room)
			}
			shown := escapeMrkdwn(raw)
			for n := total; jsonLen(shown) > room && n > 0; {
				n = n * room / jsonLen(shown) * 9 / 10
				raw = clipRunes(raw, n)
				shown, trimmed = escapeMrkdwn(raw), true
			}
			blocks = append(blocks, section("*Dry run*\n```"+shown+"```"))
			if trimmed {
				note := fmt.Sprintf("_Preview trimmed: %d of %d characters shown._", utf8.RuneCountInString(raw), total)
				if u, ok := markdown.SafeURL(c.ConsoleURL); ok && c.ConsoleURL != "" {
					note += " <" + u + "|Full preview in the console>"
				}
				blocks = append(blocks, slackapi.NewContextBlock("", mk(note)))
			}
		} else {
			blocks = append(blocks, slackapi.NewContextBlock("", mk("_Dry-run preview too long to show here; see the console._")))
		}
	}
	blocks = append(blocks, tail...)
	// The estimates above are conservative; this guard makes the budget a
	// guarantee: drop the middle (preview, then arguments) before the
	// decision area ever goes.
	for len(blocks) > len(head)+len(tail) && blocksSize(blocks) > blocksBudget {
		i := len(blocks) - len(tail) - 1
		blocks = slices.Delete(blocks, i, i+1)
		// Say so, if the note itself fits.
		blocks = slices.Insert(blocks, i, slackapi.Block(slackapi.NewContextBlock("", mk("_Some details did not fit; see the console._"))))
		if blocksSize(blocks) > blocksBudget {
			blocks = slices.Delete(blocks, i, i+1)
		}
	}
	return blocks, clip(c.Headline(), 3000)
}

// outcomeMrkdwn is Card.OutcomeLine for Slack: people as mentions, the time
// in each reader's own timezone.
func outcomeMrkdwn(c core.Card) string {
	o := c.Outcome
	if o == nil {
		if c.Pending() {
			return ""
		}
		return "*" + escapeMrkdwn(strings.ToUpper(string(c.Status[:1]))+string(c.Status[1:])) + "*"
	}
	at := slackDate(o.At)
	switch o.Status {
	case approvals.StatusExpired:
		return "*Expired* at " + at + " with no decision"
	case "cancelled":
		return "*Cancelled* at " + at
	}
	line := "*" + escapeMrkdwn(o.Verb()) + "* by " + peopleMrkdwn(o.By) + " at " + at
	if o.Reason != "" {
		line += ": " + escapeMrkdwn(clip(core.OneLine(o.Reason), 1500))
	}
	return line
}

var slackUserID = regexp.MustCompile(`^[UW][A-Z0-9]+$`)

// peopleMrkdwn renders identities: slack:U123 as a mention, others as text.
func peopleMrkdwn(ids []string) string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if u, ok := strings.CutPrefix(id, channelName+":"); ok && slackUserID.MatchString(u) {
			out = append(out, "<@"+u+">")
			continue
		}
		out = append(out, escapeMrkdwn(id))
	}
	if len(out) == 0 {
		return "—"
	}
	return strings.Join(out, ", ")
}

// slackDate renders t with Slack's date token (shown in the reader's
// timezone) and a UTC fallback for clients that cannot.
func slackDate(t time.Time) string {
	return fmt.Sprintf("<!date^%d^{date_short_pretty} at {time}|%s>", t.Unix(), t.UTC().Format("2006-01-02 15:04 UTC"))
}

// foldValue shows one argument value: short ones as inline code, long ones
// folded with a count of what was left out.
func foldValue(v string) string {
	n := utf8.RuneCountInString(v)
	if n > argFold {
		return escapeMrkdwn(clipRunes(v, argFold)) + fmt.Sprintf("… _(%d more characters)_", n-argFold)
	}
	if strings.ContainsAny(v, "`\n") || v == "" {
		return escapeMrkdwn(v)
	}
	return "`" + escapeMrkdwn(v) + "`"
}

// quote renders text as a mrkdwn block quote.
func quote(s string) string {
	return "> " + strings.ReplaceAll(escapeMrkdwn(s), "\n", "\n> ")
}

// clip cuts s to at most n runes, marking the cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return clipRunes(s, n-1) + "…"
}

func clipRunes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

func blockSize(b slackapi.Block) int {
	raw, err := json.Marshal(b)
	if err != nil {
		return 0
	}
	return len(raw)
}

func blocksSize(bs []slackapi.Block) int {
	n := 0
	for _, b := range bs {
		n += blockSize(b) + 1
	}
	return n
}

// sumLen estimates the JSON size of sections holding ss.
func sumLen(ss []string) int {
	n := 0
	for _, s := range ss {
		n += jsonLen(s) + 60
	}
	return n
}

func jsonLen(s string) int {
	raw, _ := json.Marshal(s)
	return len(raw)
}

// maxBatchShown bounds the calls a batch card lists with their own
// buttons (Block Kit allows 50 blocks); the rest are decided in the console.
const maxBatchShown = 12

// renderBatch renders one card for several gated calls of an agent's turn:
// each call with its reason, its own Approve and Reject buttons (Edit is in
// the console), and "Approve all" while any call waits.
func (a *Adapter) renderBatch(c core.Card) ([]slackapi.Block, string) {
	mk := func(s string) *slackapi.TextBlockObject {
		return slackapi.NewTextBlockObject(slackapi.MarkdownType, s, false, false)
	}
	pending := c.BatchPending()
	title := fmt.Sprintf("Approval needed: %d calls", len(c.Batch))
	if !pending {
		title = fmt.Sprintf("Decided: %d calls", len(c.Batch))
	}
	blocks := []slackapi.Block{slackapi.NewHeaderBlock(slackapi.NewTextBlockObject(slackapi.PlainTextType, clip(title, headerTextMax), false, false))}
	fields := []*slackapi.TextBlockObject{
		mk("*Requested by*\n" + clip(peopleMrkdwn([]string{c.Requester}), 1000)),
		mk("*Who may decide*\n" + clip(peopleMrkdwn(c.Approvers), 1500)),
	}
	if pending && !c.ExpiresAt.IsZero() {
		fields = append(fields, mk("*Expires*\n"+slackDate(c.ExpiresAt)))
	}
	if pending && c.Next != "" {
		fields = append(fields, mk("*Next*\n"+escapeMrkdwn(clip(core.OneLine(c.Next), 500))))
	}
	blocks = append(blocks, slackapi.NewSectionBlock(nil, fields, nil))
	for i, bc := range c.Batch {
		if i == maxBatchShown {
			blocks = append(blocks, slackapi.NewContextBlock("", mk(fmt.Sprintf("_…and %d more calls; decide them in the console._", len(c.Batch)-i))))
			break
		}
		text := fmt.Sprintf("*%d. %s* · %s", i+1, codeSpan(clip(bc.Tool, 200)), escapeMrkdwn(string(bc.Risk)))
		for _, arg := range bc.Args {
			text += "\n• " + codeSpan(clip(arg.Name, 100)) + ": " + foldValue(clip(arg.Shown(), 300))
		}
		if bc.Reason != "" {
			text += "\n" + quote(clip(core.OneLine(bc.Reason), 500))
		}
		if bc.Status != approvals.StatusPending {
			line := string(bc.Status)
			if bc.Outcome != nil {
				line = outcomeMrkdwn(core.Card{Outcome: bc.Outcome})
			}
			text += "\n_" + clip(line, 500) + "_"
		} else if bc.Quorum > 1 {
			text += fmt.Sprintf("\n_%d of %d approvals_", bc.Approvals, bc.Quorum)
		}
		blocks = append(blocks, slackapi.NewSectionBlock(mk(clip(text, sectionTextMax)), nil, nil))
		if bc.Status == approvals.StatusPending {
			btn := func(action, label string) *slackapi.ButtonBlockElement {
				return slackapi.NewButtonBlockElement(action, a.sign.buttonValue(action, bc.ApprovalID),
					slackapi.NewTextBlockObject(slackapi.PlainTextType, label, false, false))
			}
			blocks = append(blocks, slackapi.NewActionBlock(fmt.Sprintf("opsgate:decide:%d", i),
				btn(actionApprove, "Approve").WithStyle(slackapi.StylePrimary),
				btn(actionReject, "Reject").WithStyle(slackapi.StyleDanger),
			))
		}
	}
	if pending {
		all := slackapi.NewButtonBlockElement(actionApproveAll, a.sign.buttonValue(actionApproveAll, c.ApprovalID),
			slackapi.NewTextBlockObject(slackapi.PlainTextType, "Approve all", false, false)).WithStyle(slackapi.StylePrimary)
		blocks = append(blocks, slackapi.NewActionBlock("opsgate:all", all))
	}
	ctxText := "Approvals of run " + codeSpan(c.RunID)
	if u, ok := markdown.SafeURL(c.ConsoleURL); ok && c.ConsoleURL != "" {
		ctxText += " · <" + u + "|Open in the console>"
	}
	blocks = append(blocks, slackapi.NewContextBlock("", mk(clip(ctxText, 2000))))
	for len(blocks) > 4 && (len(blocks) > maxBlocks || blocksSize(blocks) > blocksBudget) {
		// Bounded by maxBatchShown this never happens; if it does, the
		// first calls' blocks go before the Approve all and the link.
		blocks = slices.Delete(blocks, 2, 3)
	}
	return blocks, title
}
