package api

import "net/http"

// ChannelHeader names the surface a decision or an answer made through the
// API came from, for the audit trail: `opsgate tui` sends "tui", so its
// decisions read "alice (tui) approved …" rather than "(api)". It is a
// label and nothing more: the token alone says who decides and what it may
// do, and only the labels in channelLabels are accepted, so a client cannot
// pass its decision off as a click in Slack or an email reply.
const ChannelHeader = "Opsgate-Channel"

// TUIChannel is the label `opsgate tui` sends in ChannelHeader.
const TUIChannel = "tui"

// channelLabels are the values ChannelHeader may take; absent means
// DecisionChannel.
var channelLabels = map[string]bool{DecisionChannel: true, TUIChannel: true}

// requestChannel is the channel recorded for a decision or an answer made
// by r: DecisionChannel, or the label r names in ChannelHeader; any other
// label is refused (422) before anything is recorded.
func requestChannel(r *http.Request) (string, error) {
	v := r.Header.Get(ChannelHeader)
	if v == "" {
		return DecisionChannel, nil
	}
	if !channelLabels[v] {
		return "", invalid(ChannelHeader, "%s %q: want %q or %q (a label for the audit; it grants nothing)", ChannelHeader, v, DecisionChannel, TUIChannel)
	}
	return v, nil
}
