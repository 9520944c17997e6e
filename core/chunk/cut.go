package chunk

import "unicode/utf8"

// Ellipsis marks where Cut shortened a text.
const Ellipsis = "…"

// Cut shortens s to at most n units of u, cutting between runes and marking
// the cut with Ellipsis (which counts against n); s is returned as it is
// when it fits. Adapters use it for the short texts a platform caps (a
// button's answer, an embed field, a notice): long replies go through Split.
func Cut(s string, n int, u Unit) string {
	if Measure(s, u) <= n {
		return s
	}
	room := n - Measure(Ellipsis, u)
	if room < 0 {
		return ""
	}
	used := 0
	for i, r := range s {
		w := 1
		switch u {
		case Bytes:
			w = utf8.RuneLen(r)
			if w < 0 {
				w = 3 // an invalid byte becomes U+FFFD when written out
			}
		case UTF16:
			if r > 0xFFFF {
				w = 2
			}
		}
		if used+w > room {
			return s[:i] + Ellipsis
		}
		used += w
	}
	return s
}
