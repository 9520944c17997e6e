package core

import "strings"

// The text command that approves every pending call of a batch card, on
// channels without a button for it (Matrix, Signal, email, the local
// channel): "approve all <ref>", where ref names the card — its approval
// id, or what the channel shows instead (Signal's card code). A reply to
// the card itself may leave ref out. Every text channel takes this one
// spelling, parsed here (docs/agents.md, "Approve all").
const approveAllWords = "approve all"

// ApproveAllCommand is the command as a card shows it: "approve all <ref>".
func ApproveAllCommand(ref string) string { return approveAllWords + " " + ref }

// ParseApproveAll reads text as the approve-all command: "approve all",
// case-insensitive, optionally followed by one reference and a final
// period, with any spacing. ok is false for any other text; ref is "" when
// none was given.
func ParseApproveAll(text string) (ref string, ok bool) {
	f := strings.Fields(strings.TrimSuffix(strings.TrimSpace(text), "."))
	if len(f) < 2 || len(f) > 3 || !strings.EqualFold(f[0], "approve") || !strings.EqualFold(f[1], "all") {
		return "", false
	}
	if len(f) == 3 {
		ref = strings.Trim(f[2], "<>`\"'.")
		if ref == "" {
			return "", false
		}
	}
	return ref, true
}
