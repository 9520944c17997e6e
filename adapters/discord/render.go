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
	return open + cut(s, room) + closing
}

// cut shortens s to at most n runes, marking the cut with an ellipsis.
func cut(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	if n == 1 {
		return "…"
	}
	return string(r[:n-1]) + "…"
}

// cardEmbed renders a card as one self-contained embed: what, why, how
// risky, the dry run, who asked, who may decide, until when — and, once
// decided, the outcome.
func cardEmbed(c core.Card) *discordapi.MessageEmbed {
	e := &discordapi.MessageEmbed{Title: cut(c.Headline(), maxEmbedTitle), Color: colorPending}
	if u, ok := markdown.SafeURL(c.ConsoleURL); ok && strings.HasPrefix(u, "http") {
		e.URL = u
	}
	var desc strings.Builder
	if c.Reason != "" {
		desc.WriteString("**Reason:** " + cut(plain(core.OneLine(c.Reason)), 1500) + "\n")
	}
	if lines := c.ChangeLines(); len(lines) > 0 {
		desc.WriteString("**" + plain(core.ChangesHeading) + "**\n")
		for _, l := range lines {
			desc.WriteString("• " + cut(plain(l), 500) + "\n")
		}
	}
	if c.Preview != "" {
		desc.WriteString("**Dry run:**\n" + codeBlock(c.Preview, 2000) + "\n")
	}
	if !c.Pending() {
		desc.WriteString("\n**" + cut(plain(c.OutcomeLine()), 1000) + "**")
	}
	e.Description = cut(desc.String(), maxEmbedDesc)
	field := func(name, value string, inline bool) {
		if len(e.Fields) >= maxEmbedFields {
			return
		}
		e.Fields = append(e.Fields, &discordapi.MessageEmbedField{
			Name: cut(name, maxFieldName), Value: cut(value, maxFieldValue), Inline: inline,
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
		field(plain(a.Name), inlineCode(cut(a.Shown(), maxFieldValue-4)), true)
	}
	field("Requested by", inlineCode(c.Requester), true)
	approvers := inlineCode(strings.Join(c.Approvers, ", "))
	if c.Quorum > 1 {
		approvers += fmt.Sprintf(" (%d of %d approvals)", c.Approvals, c.Quorum)
	}
	field("Approvers", approvers, true)
	if c.Pending() {
		field("Expires", fmt.Sprintf("<t:%d:R> (%s)", c.ExpiresAt.Unix(), c.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC")), true)
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
			e.Description = cut(e.Description, max(200, l-over))
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
		f.Value = cut(f.Value, max(20, l-over))
	}
}

// cardComponents are the card's buttons: Approve, Reject, Edit (each a
// signed custom_id) and a link to the console. A decided card has none.
func cardComponents(buttons *approvalref.Codec, c core.Card) ([]discordapi.MessageComponent, error) {
	if !c.Pending() {
		return []discordapi.MessageComponent{}, nil
	}
	row := discordapi.ActionsRow{}
	for _, b := range []struct {
		act   approvalref.Action
		label string
		style discordapi.ButtonStyle
	}{
		{approvalref.Approve, "Approve", discordapi.SuccessButton},
		{approvalref.Reject, "Reject", discordapi.DangerButton},
		{approvalref.Edit, "Edit", discordapi.SecondaryButton},
	} {
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

// cardContent is the message text above the embed: the headline, which is
// what notifications and screen readers show.
func cardContent(c core.Card) string { return cut(plain(c.Headline()), MaxContent) }

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
		Title:    cut("Reject "+c.Tool, maxModalTitle),
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
	d := &discordapi.InteractionResponseData{CustomID: customID, Title: cut("Edit "+c.Tool, maxModalTitle)}
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
					CustomID: inputArg + a.Name, Label: cut(a.Name, maxInputLabel), Style: discordapi.TextInputShort,
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
			Value: cut(string(cur), maxInputValue), Required: true, MaxLength: maxInputValue,
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

// refusalText explains a refused decision to the person who clicked.
func refusalText(de *core.DecisionError) string {
	switch de.Code {
	case core.DecisionAlreadyDecided:
		s := "ℹ️ Already decided"
		if de.By != "" {
			s += " by " + inlineCode(de.By)
		}
		if !de.At.IsZero() {
			s += " at " + de.At.UTC().Format("2006-01-02 15:04 UTC")
		}
		return s + "."
	case core.DecisionNotApprover:
		return "⛔ You are not one of this approval's approvers."
	case core.DecisionSelfApproval:
		return "⛔ You asked for this call, so you cannot approve it yourself."
	case core.DecisionExpired:
		return "⌛ This approval has expired."
	case core.DecisionNotFound:
		return "❓ Unknown approval."
	case core.DecisionInvalidArgs:
		return "⚠️ Arguments not accepted: " + cut(plain(de.Message), maxEphemeralText-40)
	}
	msg := de.Message
	if msg == "" {
		msg = string(de.Code)
	}
	return "⛔ Refused: " + cut(plain(msg), maxEphemeralText-20)
}
