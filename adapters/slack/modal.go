package slack

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	slackapi "github.com/slack-go/slack"

	"github.com/opsgate/opsgate/core"
)

// Block ids of the modals' inputs; every input's action_id is "value".
const (
	blockReason   = "reason"
	blockArgsJSON = "args_json"
	argPrefix     = "arg:"
)

// Block Kit limits that shape the modals.
const (
	inputMaxLength = 3000 // plain_text_input max_length
	modalMaxBlocks = 100
	labelMax       = 2000
)

func argBlock(name string) string { return argPrefix + name }

// buildModal builds the Reject (feedback) or Edit (arguments) modal for a
// card. meta is the signed reference the submission comes back with.
func buildModal(callback string, card core.Card, meta string) (slackapi.ModalViewRequest, error) {
	pt := func(s string) *slackapi.TextBlockObject {
		return slackapi.NewTextBlockObject(slackapi.PlainTextType, s, false, false)
	}
	v := slackapi.ModalViewRequest{
		Type: slackapi.VTModal, CallbackID: callback, PrivateMetadata: meta,
		Close: pt("Cancel"),
	}
	summary := slackapi.NewSectionBlock(slackapi.NewTextBlockObject(slackapi.MarkdownType,
		clip("*"+escapeMrkdwn(card.Headline())+"*", sectionTextMax), false, false), nil, nil)
	v.Blocks.BlockSet = append(v.Blocks.BlockSet, summary)

	if callback == callbackReject {
		v.Title, v.Submit = pt("Reject"), pt("Reject")
		in := slackapi.NewPlainTextInputBlockElement(pt("What should change?"), "value").
			WithMultiline(true).WithMaxLength(inputMaxLength)
		v.Blocks.BlockSet = append(v.Blocks.BlockSet,
			slackapi.NewInputBlock(blockReason, pt("Feedback for the requester"), nil, in))
		return v, nil
	}

	v.Title, v.Submit = pt("Edit and approve"), pt("Approve")
	note := slackapi.NewContextBlock("", slackapi.NewTextBlockObject(slackapi.MarkdownType,
		"The call runs with these arguments once they pass the tool's schema and the policy. Leave a field empty to use its default.", false, false))
	v.Blocks.BlockSet = append(v.Blocks.BlockSet, note)
	if jsonMode(card.Args) {
		obj := map[string]any{}
		for _, a := range card.Args {
			obj[a.Name] = argJSONValue(a.Value)
		}
		b, err := json.MarshalIndent(obj, "", "  ")
		if err != nil || len(b) > inputMaxLength {
			return v, notice(fmt.Sprintf("These arguments are too large to edit in Slack; edit them in the console%s.", consoleSuffix(card)))
		}
		in := slackapi.NewPlainTextInputBlockElement(nil, "value").WithMultiline(true).
			WithMaxLength(inputMaxLength).WithInitialValue(string(b))
		v.Blocks.BlockSet = append(v.Blocks.BlockSet, slackapi.NewInputBlock(blockArgsJSON, pt("Arguments (JSON object)"), nil, in))
	} else {
		for _, a := range card.Args {
			in := slackapi.NewPlainTextInputBlockElement(nil, "value").WithMaxLength(inputMaxLength).WithInitialValue(a.Value)
			if len(a.Value) > 80 || strings.Contains(a.Value, "\n") {
				in = in.WithMultiline(true)
			}
			ib := slackapi.NewInputBlock(argBlock(a.Name), pt(clip(a.Name, labelMax)), nil, in)
			ib.Optional = true
			v.Blocks.BlockSet = append(v.Blocks.BlockSet, ib)
		}
	}
	reason := slackapi.NewInputBlock(blockReason, pt("Note (optional)"), nil,
		slackapi.NewPlainTextInputBlockElement(nil, "value").WithMaxLength(inputMaxLength))
	reason.Optional = true
	v.Blocks.BlockSet = append(v.Blocks.BlockSet, reason)
	return v, nil
}

// jsonMode reports whether the Edit modal must use one JSON field instead
// of one field per argument: structured values, names too long for a
// block id, values too long for an input, or more inputs than a modal holds.
func jsonMode(args []core.CardArg) bool {
	if len(args) > modalMaxBlocks-4 {
		return true
	}
	for _, a := range args {
		if len(a.Name) > 200 || len(a.Value) > inputMaxLength {
			return true
		}
		if v := strings.TrimSpace(a.Value); strings.HasPrefix(v, "{") || strings.HasPrefix(v, "[") {
			return true
		}
	}
	return false
}

// argJSONValue turns a card's rendered value back into JSON: structured
// values as they were, everything else as the string shown.
func argJSONValue(v string) any {
	t := strings.TrimSpace(v)
	if strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
		var x any
		if json.Unmarshal([]byte(t), &x) == nil {
			return x
		}
	}
	return v
}

// notice is an error whose text is shown to the person as it is (a modal
// field error, an ephemeral message): a sentence, not a wrapped error string.
type notice string

func (n notice) Error() string { return string(n) }

// argsFromModal rebuilds the argument object from a submitted Edit modal.
// Values arrive as strings; the tool's schema reads them as its declared
// types. On error it names the block to show the error under.
func argsFromModal(values map[string]string) (map[string]any, string, error) {
	if s, ok := values[blockArgsJSON]; ok {
		var obj map[string]any
		if err := json.Unmarshal([]byte(s), &obj); err != nil || obj == nil {
			return nil, blockArgsJSON, notice(fmt.Sprintf("Not a JSON object: %v", err))
		}
		return obj, blockArgsJSON, nil
	}
	args := map[string]any{}
	var blocks []string
	for block, v := range values {
		name, ok := strings.CutPrefix(block, argPrefix)
		if !ok {
			continue
		}
		blocks = append(blocks, block)
		if v == "" {
			continue // empty: let the schema's default (or its error) apply
		}
		args[name] = v
	}
	sort.Strings(blocks)
	first := blockReason
	if len(blocks) > 0 {
		first = blocks[0]
	}
	return args, first, nil
}

func consoleSuffix(card core.Card) string {
	if card.ConsoleURL == "" {
		return ""
	}
	return " (" + card.ConsoleURL + ")"
}
