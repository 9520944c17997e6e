package discord

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	discordapi "github.com/bwmarrin/discordgo"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/approvalref"
	"github.com/opsgate/opsgate/core/chunk"
	"github.com/opsgate/opsgate/core/markdown"
)

// Discord's published limits on messages, embeds and components.
const (
	MaxContent       = 2000
	maxEmbedTitle    = 256
	maxEmbedDesc     = 4096
	maxEmbedFields   = 25
	maxFieldName     = 256
	maxFieldValue    = 1024
	maxEmbedTotal    = 6000
	maxModalTitle    = 45
	maxModalInputs   = 5
	maxInputLabel    = 45
	maxInputValue    = 4000
	maxThreadName    = 100
	maxEphemeralText = 1900
)

// Embed colours by state, so a channel scrolls by readably.
const (
	colorPending  = 0xF0B232
	colorApproved = 0x23A559
	colorRejected = 0xDA373C
	colorOther    = 0x80848E
)

// noMentions stops every message the bot sends from pinging anyone, whatever
// its text says: rendered text is already neutralized, this is the second
// lock.
var noMentions = &discordapi.MessageAllowedMentions{Parse: []discordapi.AllowedMentionType{}}

// renderMarkdown turns opsgate's Markdown subset into Discord Markdown with
// stray markup escaped and @everyone/@here neutralized.
func renderMarkdown(md string) string { return markdown.Convert(md, dialect{}) }

// plain renders outside text (arguments, reasons, names) as inert Discord
// text: escaped first, so "[click](url)" is not read as a link, then the
// renderer escapes what would format or mention.
func plain(s string) string { return strings.TrimRight(renderMarkdown(markdown.Escape(s)), "\n") }

// inlineCode shows s verbatim in an inline code span; backticks, which a
// span cannot hold, are replaced by a look-alike.
func inlineCode(s string) string {
	s = strings.ReplaceAll(s, "`", "ˋ")
	s = strings.ReplaceAll(s, "\n", " ")
	if s == "" {
		return "` `"
	}
	return "`" + s + "`"
}

// codeBlock shows s verbatim in a fenced block of at most limit
// characters, cut with a marker when longer; a fence inside s is broken so
// it cannot end the block early.
func codeBlock(s string, limit int) string {
	s = strings.ReplaceAll(s, "```", "`\u200b``")
	const open, closing = "```\n", "\n```"
	room := limit - len([]rune(open)) - len([]rune(closing))
	return open + chunk.Cut(s, room, chunk.Runes) + closing
}

// cardEmbed renders a card as one self-contained embed: what, why, how
// risky, the dry run, who asked, who may decide, until when — and, once
// decided, the outcome.
func cardEmbed(c core.Card) *discordapi.MessageEmbed {
	e := &discordapi.MessageEmbed{Title: chunk.Cut(c.Headline(), maxEmbedTitle, chunk.Runes), Color: colorPending}
	if u, ok := markdown.SafeURL(c.ConsoleURL); ok && strings.HasPrefix(u, "http") {
		e.URL = u
	}
	var desc strings.Builder
	if c.Reason != "" {
		desc.WriteString("**Reason:** " + chunk.Cut(plain(core.OneLine(c.Reason)), 1500, chunk.Runes) + "\n")
	}
	if lines := c.ChangeLines(); len(lines) > 0 {
		desc.WriteString("**" + plain(core.ChangesHeading) + "**\n")
		for _, l := range lines {
			desc.WriteString("• " + chunk.Cut(plain(l), 500, chunk.Runes) + "\n")
		}
	}
	if c.Preview != "" {
		desc.WriteString("**Dry run:**\n" + codeBlock(c.Preview, 2000) + "\n")
	}
	if !c.Pending() {
		desc.WriteString("\n**" + chunk.Cut(plain(c.OutcomeLine()), 1000, chunk.Runes) + "**")
	}
	e.Description = chunk.Cut(desc.String(), maxEmbedDesc, chunk.Runes)
	field := func(name, value string, inline bool) {
		if len(e.Fields) >= maxEmbedFields {
			return
		}
		e.Fields = append(e.Fields, &discordapi.MessageEmbedField{
			Name: chunk.Cut(name, maxFieldName, chunk.Runes), Value: chunk.Cut(value, maxFieldValue, chunk.Runes), Inline: inline,
		})
	}
	field("Tool", inlineCode(c.Tool), true)
	field("Risk", inlineCode(string(c.Risk)), true)
	// Arguments each get a field, leaving room for the fixed ones.
	args := c.Args
	const fixed = 7
	if len(args) > maxEmbedFields-fixed {
		rest, _ := json.Marshal(argMap(args[maxEmbedFields-fixed-1:]))
		args = append(args[:maxEmbedFields-fixed-1:maxEmbedFields-fixed-1], core.CardArg{Name: "…more", Value: string(rest)})
	}
	for _, a := range args {
		field(plain(a.Name), inlineCode(chunk.Cut(a.Shown(), maxFieldValue-4, chunk.Runes)), true)
	}
	if len(c.Batch) > 1 {
		var calls strings.Builder
		for i, bc := range c.Batch {
			fmt.Fprintf(&calls, "%d. %s", i+1, inlineCode(bc.Tool))
			for _, a := range bc.Args {
				fmt.Fprintf(&calls, " %s=%s", plain(a.Name), inlineCode(chunk.Cut(a.Shown(), 60, chunk.Runes)))
			}
			fmt.Fprintf(&calls, " — %s\n", bc.Status)
		}
		field(fmt.Sprintf("Calls of this turn (%d)", len(c.Batch)), calls.String(), false)
	}
	field("Requested by", inlineCode(c.Requester), true)
	approvers := inlineCode(strings.Join(c.Approvers, ", "))
	if c.Quorum > 1 {
		approvers += fmt.Sprintf(" (%d of %d approvals)", c.Approvals, c.Quorum)
	}
	field("Approvers", approvers, true)
	if c.Pending() {
		field("Expires", fmt.Sprintf("<t:%d:R> (%s)", c.ExpiresAt.Unix(), c.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC")), true)
		if c.Next != "" {
			field("Next", plain(core.OneLine(c.Next)), false)
		}
	} else if c.Outcome != nil {
		field("Outcome", plain(c.OutcomeLine()), false)
		switch c.Outcome.Status {
		case approvals.StatusApproved, approvals.StatusEdited:
			e.Color = colorApproved
		case approvals.StatusRejected:
			e.Color = colorRejected
		default:
			e.Color = colorOther
		}
	} else {
		e.Color = colorOther
	}
	e.Footer = &discordapi.MessageEmbedFooter{Text: "Approval " + c.ApprovalID}
	trimEmbed(e)
	return e
}

func argMap(args []core.CardArg) map[string]string {
	m := make(map[string]string, len(args))
	for _, a := range args {
		m[a.Name] = a.Value
	}
	return m
}

// embedSize counts an embed the way Discord's 6,000-character total does.
func embedSize(e *discordapi.MessageEmbed) int {
	n := utf8.RuneCountInString(e.Title) + utf8.RuneCountInString(e.Description)
	if e.Footer != nil {
		n += utf8.RuneCountInString(e.Footer.Text)
	}
	for _, f := range e.Fields {
		n += utf8.RuneCountInString(f.Name) + utf8.RuneCountInString(f.Value)
	}
	return n
}

// trimEmbed shortens the description, then the longest fields, until the
// embed fits Discord's total.
func trimEmbed(e *discordapi.MessageEmbed) {
	for embedSize(e) > maxEmbedTotal {
		over := embedSize(e) - maxEmbedTotal
		if l := utf8.RuneCountInString(e.Description); l > 200 {
			e.Description = chunk.Cut(e.Description, max(200, l-over), chunk.Runes)
			continue
		}
		longest := 0
		for i, f := range e.Fields {
			if len(f.Value) > len(e.Fields[longest].Value) {
				longest = i
			}
		}
		f := e.Fields[longest]
		l := utf8.RuneCountInString(f.Value)
		if l <= 20 {
			return
		}
		f.Value = chunk.Cut(f.Value, max(20, l-over), chunk.Runes)
	}
}

// cardComponents are the card's buttons: Approve, Reject, Edit (each a
// signed custom_id), "Approve all" on a batch card with calls pending, and
// a link to the console. A decided card has none.
func cardComponents(buttons *approvalref.Codec, c core.Card) ([]discordapi.MessageComponent, error) {
	if !c.Pending() && !c.BatchPending() {
		return []discordapi.MessageComponent{}, nil
	}
	row := discordapi.ActionsRow{}
	acts := []struct {
		act   approvalref.Action
		label string
		style discordapi.ButtonStyle
	}{
		{approvalref.Approve, "Approve", discordapi.SuccessButton},
		{approvalref.Reject, "Reject", discordapi.DangerButton},
		{approvalref.Edit, "Edit", discordapi.SecondaryButton},
	}
	if !c.Pending() {
		acts = nil
	}
	if c.BatchPending() {
		acts = append(acts, struct {
			act   approvalref.Action
			label string
			style discordapi.ButtonStyle
		}{approvalref.ApproveAll, fmt.Sprintf("Approve all (%d)", len(c.Batch)), discordapi.SuccessButton})
	}
	for _, b := range acts {
		id, err := buttons.Encode(approvalref.Ref{Action: b.act, ApprovalID: c.ApprovalID})
		if err != nil {
			return nil, err
		}
		row.Components = append(row.Components, discordapi.Button{Label: b.label, Style: b.style, CustomID: id})
	}
	if u, ok := markdown.SafeURL(c.ConsoleURL); ok && strings.HasPrefix(u, "http") && len(u) <= 512 {
		row.Components = append(row.Components, discordapi.Button{Label: "Console", Style: discordapi.LinkButton, URL: u})
	}
	return []discordapi.MessageComponent{row}, nil
}

// Discord's limits on buttons: 5 per row, 5 rows per message, 80
// characters of label.
const (
	maxRowButtons = 5
	maxRows       = 5
	maxLabel      = 80
)

// questionComponents are an agent's question's buttons: one per choice
// (Yes and No for a confirm), Skip for an optional question, and "Answer…"
// opening a form for one answered in words. A question with more choices
// than fit has none: it is answered by a reply.
func questionComponents(buttons *approvalref.Codec, q *core.QuestionCard) ([]discordapi.MessageComponent, error) {
	step, ok := core.AskStep(q.ActionID)
	if !ok {
		return nil, fmt.Errorf("discord: question %q has no step", q.ActionID)
	}
	var bs []discordapi.MessageComponent
	add := func(r approvalref.Ref, label string, style discordapi.ButtonStyle) error {
		id, err := buttons.Encode(r)
		if err != nil {
			return err
		}
		bs = append(bs, discordapi.Button{Label: chunk.Cut(label, maxLabel, chunk.Runes), Style: style, CustomID: id})
		return nil
	}
	for i, label := range q.Buttons() {
		if err := add(approvalref.Ref{Action: approvalref.Answer, RunID: q.RunID, Step: step, Choice: i}, label, discordapi.PrimaryButton); err != nil {
			return nil, err
		}
	}
	if q.FreeText() {
		if err := add(approvalref.Ref{Action: approvalref.Form, RunID: q.RunID, Step: step}, "Answer…", discordapi.PrimaryButton); err != nil {
			return nil, err
		}
	}
	if q.Skippable() {
		if err := add(approvalref.Ref{Action: approvalref.Skip, RunID: q.RunID, Step: step}, "Skip", discordapi.SecondaryButton); err != nil {
			return nil, err
		}
	}
	if len(bs) > maxRowButtons*maxRows {
		return nil, nil
	}
	var rows []discordapi.MessageComponent
	for len(bs) > 0 {
		n := min(maxRowButtons, len(bs))
		rows = append(rows, discordapi.ActionsRow{Components: bs[:n]})
		bs = bs[n:]
	}
	return rows, nil
}

// inputAnswer is the text input of a question's answer form.
const inputAnswer = "answer"

// answerModal is the form that answers a question in words (the question
// stands in the message above it).
func answerModal(customID string) *discordapi.InteractionResponseData {
	return &discordapi.InteractionResponseData{
		CustomID: customID, Title: "Answer the agent",
		Components: []discordapi.MessageComponent{discordapi.ActionsRow{Components: []discordapi.MessageComponent{
			discordapi.TextInput{CustomID: inputAnswer, Label: "Your answer", Style: discordapi.TextInputParagraph, Required: true, MaxLength: maxInputValue},
		}}},
	}
}

// cardContent is the message text above the embed: the headline, which is
// what notifications and screen readers show.
func cardContent(c core.Card) string { return chunk.Cut(plain(c.Headline()), MaxContent, chunk.Runes) }

// Text inputs of the modals.
const (
	inputReason = "reason"
	inputJSON   = "args_json"
	inputArg    = "arg:" // + argument name
)

// rejectModal asks for the feedback a rejection hands the run.
func rejectModal(customID string, c core.Card) *discordapi.InteractionResponseData {
	return &discordapi.InteractionResponseData{
		CustomID: customID,
		Title:    chunk.Cut("Reject "+c.Tool, maxModalTitle, chunk.Runes),
		Components: []discordapi.MessageComponent{discordapi.ActionsRow{Components: []discordapi.MessageComponent{
			discordapi.TextInput{
				CustomID: inputReason, Label: "Feedback for the run", Style: discordapi.TextInputParagraph,
				Placeholder: "Why not? The run receives this as the tool's result.", Required: true, MaxLength: 1000,
			},
		}}},
	}
}

// editModal offers the arguments for editing: one text input each when
// they fit Discord's five, otherwise one JSON paragraph.
func editModal(customID string, c core.Card) *discordapi.InteractionResponseData {
	d := &discordapi.InteractionResponseData{CustomID: customID, Title: chunk.Cut("Edit "+c.Tool, maxModalTitle, chunk.Runes)}
	perArg := len(c.Args) > 0 && len(c.Args) <= maxModalInputs
	for _, a := range c.Args {
		if len(inputArg+a.Name) > MaxCustomID || utf8.RuneCountInString(a.Value) > maxInputValue {
			perArg = false
		}
	}
	if perArg {
		for _, a := range c.Args {
			d.Components = append(d.Components, discordapi.ActionsRow{Components: []discordapi.MessageComponent{
				discordapi.TextInput{
					CustomID: inputArg + a.Name, Label: chunk.Cut(a.Name, maxInputLabel, chunk.Runes), Style: discordapi.TextInputShort,
					Value: a.Value, Required: false, MaxLength: maxInputValue,
				},
			}})
		}
		return d
	}
	cur, _ := json.MarshalIndent(cardArgsJSON(c.Args), "", "  ")
	d.Components = []discordapi.MessageComponent{discordapi.ActionsRow{Components: []discordapi.MessageComponent{
		discordapi.TextInput{
			CustomID: inputJSON, Label: "Arguments (JSON object)", Style: discordapi.TextInputParagraph,
			Value: chunk.Cut(string(cur), maxInputValue, chunk.Runes), Required: true, MaxLength: maxInputValue,
		},
	}}}
	return d
}

// cardArgsJSON turns a card's displayed arguments back into values: what
// was shown as JSON (numbers, objects) is decoded, strings stay strings.
func cardArgsJSON(args []core.CardArg) map[string]any {
	m := make(map[string]any, len(args))
	for _, a := range args {
		m[a.Name] = argValue(a.Value, a.Value)
	}
	return m
}

// argValue interprets an edited text input: when the card showed the
// argument as JSON that is not a string (a number, a list), the input is
// read as JSON too; otherwise it is the string typed.
func argValue(shown, typed string) any {
	var was any
	if json.Unmarshal([]byte(shown), &was) == nil {
		if _, isString := was.(string); !isString && was != nil {
			var v any
			if json.Unmarshal([]byte(typed), &v) == nil {
				return v
			}
		}
	}
	return typed
}
