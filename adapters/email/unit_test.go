package email

import (
	"errors"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/opsgate/opsgate/core"
)

func TestAuthResults(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, header, from string
		id                 string
		pass               bool
	}{
		{"DMARCPass", "mx.example.com; dkim=pass header.d=example.com; dmarc=pass (p=REJECT) header.from=example.com", "example.com", "mx.example.com", true},
		{"DKIMAligned", "mx.example.com 1; dkim=pass (2048-bit key) header.d=example.com header.s=sel", "example.com", "mx.example.com", true},
		{"DKIMParentDomain", "mx.example.com; dkim=pass header.d=example.com", "eu.example.com", "mx.example.com", true},
		{"DKIMOtherDomain", "mx.example.com; dkim=pass header.d=evil.example; dmarc=fail header.from=example.com", "example.com", "mx.example.com", false},
		{"DKIMSuffixNotParent", "mx.example.com; dkim=pass header.d=ample.com", "example.com", "mx.example.com", false},
		{"DKIMByIdentity", "mx.example.com; dkim=pass header.i=@example.com", "example.com", "mx.example.com", true},
		{"DMARCOtherFrom", "mx.example.com; dmarc=pass header.from=evil.example", "example.com", "mx.example.com", false},
		{"AllFail", "mx.example.com; spf=pass smtp.mailfrom=example.com; dkim=fail; dmarc=fail", "example.com", "mx.example.com", false},
		{"None", "mx.example.com; none", "example.com", "mx.example.com", false},
		{"QuotedAndComments", `MX.Example.COM (our mx); dkim="pass" (good) header.d="example.com"`, "example.com", "mx.example.com", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ar, err := ParseAuthResults(c.header)
			if err != nil {
				t.Fatal(err)
			}
			if ar.AuthservID != c.id {
				t.Errorf("authserv-id %q, want %q", ar.AuthservID, c.id)
			}
			if got := ar.Passes(c.from); got != c.pass {
				t.Errorf("Passes(%q) = %v, want %v (%+v)", c.from, got, c.pass, ar)
			}
		})
	}
	for _, bad := range []string{"", "mx; dkim", "mx; dkim=pass (unclosed", `mx; dkim="pass`, "mx; )"} {
		if _, err := ParseAuthResults(bad); !errors.Is(err, ErrAuthResults) {
			t.Errorf("ParseAuthResults(%q) err = %v, want ErrAuthResults", bad, err)
		}
	}
}

func TestAuthenticatedUsesTopmostFromOurServer(t *testing.T) {
	t.Parallel()
	a := &Adapter{cfg: Config{AuthservID: "mx.example.com"}}
	in := &inbound{From: "bob@example.com", AuthResults: []string{
		"spamfilter.example.com; dkim=pass header.d=example.com", // not ours: ignored
		"mx.example.com; dkim=fail; dmarc=fail",                  // ours, topmost: decides
		"mx.example.com; dmarc=pass header.from=example.com",     // forged by the sender below ours
	}}
	if a.authenticated(in) {
		t.Error("a forged pass below our server's fail was believed")
	}
	in.AuthResults = in.AuthResults[:1]
	if a.authenticated(in) {
		t.Error("a pass from another authserv-id was believed")
	}
	in.AuthResults = []string{"mx.example.com; dmarc=pass header.from=example.com"}
	if !a.authenticated(in) {
		t.Error("our server's dmarc=pass was not believed")
	}
}

func FuzzParseAuthResults(f *testing.F) {
	f.Add("mx.example.com; dkim=pass header.d=example.com; dmarc=pass header.from=example.com")
	f.Add(`mx (c (nested)) 1; dkim="pass" reason="a \"b\""; none`)
	f.Fuzz(func(t *testing.T, s string) {
		ar, err := ParseAuthResults(s)
		if err != nil {
			if !errors.Is(err, ErrAuthResults) {
				t.Fatalf("error %v does not wrap ErrAuthResults", err)
			}
			return
		}
		if ar.AuthservID == "" {
			t.Fatal("parsed without authserv-id")
		}
		ar.Passes("example.com")
	})
}

func TestTokens(t *testing.T) {
	t.Parallel()
	tk := newTokens("a-long-enough-secret")
	other := newTokens("another-long-secret")
	id := "0d8f7a2e-5c1b-4b9e-9f59-5b3c2a1d0e4f"
	tok := tk.replyToken(id, "Bob@Example.com")
	if len(tok) != tokenLen || strings.ToLower(tok) != tok {
		t.Fatalf("token %q: want %d lowercase characters", tok, tokenLen)
	}
	if tok == tk.msgTag(id) {
		t.Error("reply token and Message-ID tag are the same secret")
	}
	if !tk.validReply(id, "bob@example.com", strings.ToUpper(tok)) || tk.validReply(id+"x", "bob@example.com", tok) ||
		other.validReply(id, "bob@example.com", tok) {
		t.Error("reply token check accepts or refuses wrongly")
	}
	// A token is bound to the approver it was mailed to.
	if tk.validReply(id, "alice@example.com", tok) || tk.replyToken(id, "alice@example.com") == tok {
		t.Error("one approver's token is valid for another")
	}
	addr := tk.plusAddress("ops@example.com", id, "bob@example.com")
	if tag, ok := plusTag(strings.ToUpper(addr), "ops@example.com"); !ok || tag != tok {
		t.Errorf("plusTag(%q) = %q, %v", addr, tag, ok)
	}
	for _, bad := range []string{"ops@example.com", "opsx+" + tok + "@example.com", "ops+" + tok + "@evil.example", "ops+@example.com"} {
		if _, ok := plusTag(bad, "ops@example.com"); ok {
			t.Errorf("plusTag(%q) accepted", bad)
		}
	}
	for _, apID := range []string{id, "weird id/with.dots@and spaces"} {
		mid := tk.newMessageID("example.com", apID)
		if got, ok := tk.approvalOfMessageID("<"+mid+">", "EXAMPLE.com"); !ok || got != apID {
			t.Errorf("approvalOfMessageID(%q) = %q, %v; want %q", mid, got, ok, apID)
		}
		if _, ok := other.approvalOfMessageID(mid, "example.com"); ok {
			t.Errorf("a Message-ID tagged under another key was accepted")
		}
		if _, ok := tk.approvalOfMessageID(mid, "evil.example"); ok {
			t.Errorf("a Message-ID of another domain was accepted")
		}
	}
	forged := "og.a.i" + id + "." + strings.Repeat("a", tokenLen) + ".xyz@example.com"
	if _, ok := tk.approvalOfMessageID(forged, "example.com"); ok {
		t.Error("a forged tag was accepted")
	}
	if plain := tk.newMessageID("example.com", ""); !isOurMessageID(plain, "example.com") || strings.HasPrefix(plain, "og.a.") {
		t.Errorf("plain Message-ID %q", plain)
	}
}

func TestThreadKeyRoundTrip(t *testing.T) {
	t.Parallel()
	for _, k := range []threadKey{
		{Addr: "alice@example.com", Root: "CAF=x+y@mail.gmail.com", Subject: "deploy api 1.2.3"},
		{Addr: "a@b.c", Root: "r@h"},
		{Addr: "a@b.c", Root: "r@h", Subject: "subject with <angle> > brackets"},
	} {
		got, err := parseThreadKey(k.String())
		if err != nil || got != k {
			t.Errorf("parseThreadKey(%q) = %+v, %v; want %+v", k.String(), got, err, k)
		}
		if th, err := core.ParseThread(k.thread().String()); err != nil || th.Key != k.String() {
			t.Errorf("thread %q does not survive core.ParseThread: %v", k.thread(), err)
		}
	}
	for _, bad := range []string{"", "nobody", "a@b <unterminated", "noat <x@y>"} {
		if _, err := parseThreadKey(bad); err == nil {
			t.Errorf("parseThreadKey(%q) accepted", bad)
		}
	}
	for in, want := range map[string]string{
		"Re: RE: Fwd:  deploy   api": "deploy api", "AW: WG: x": "x", "Re[2]: y": "y", "Reply needed": "Reply needed",
	} {
		if got := baseSubject(in); got != want {
			t.Errorf("baseSubject(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAutoReason(t *testing.T) {
	t.Parallel()
	base := testMail{From: "alice@example.com", To: "ops@example.com", Subject: "deploy api 1", MessageID: "m@x", Body: "hi"}
	cases := map[string][]string{
		"":                       nil,
		"Auto-Submitted":         {"Auto-Submitted: auto-replied"},
		"Precedence":             {"Precedence: bulk"},
		"List-Id":                {"List-Id: <ops.lists.example.com>"},
		"empty Return-Path":      {"Return-Path: <>"},
		"Return-Path mailer-":    {"Return-Path: <MAILER-DAEMON@mx.example.com>"},
		"auto-responder header":  {"X-Autoreply: yes"},
		"AutoSubmittedNoIsHuman": {"Auto-Submitted: no"},
	}
	for want, headers := range cases {
		m := base
		m.Headers = headers
		in, err := parseMail([]byte(m.String()))
		if err != nil {
			t.Fatal(err)
		}
		if want == "AutoSubmittedNoIsHuman" {
			want = ""
		}
		if (want == "") != (in.AutoReason == "") || !strings.HasPrefix(in.AutoReason, want) {
			t.Errorf("headers %v: AutoReason %q, want %q", headers, in.AutoReason, want)
		}
	}
	bounce := base
	bounce.From = "Mail Delivery Subsystem <MAILER-DAEMON@mx.example.com>"
	if in, _ := parseMail([]byte(bounce.String())); in == nil || in.AutoReason == "" {
		t.Error("a bounce from MAILER-DAEMON is not recognised")
	}
}

func TestParseMailMalformed(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"", "not a mail at all", "Subject: x\n\nno from", "From: \n\nbody"} {
		if _, err := parseMail([]byte(raw)); !errors.Is(err, ErrMalformed) {
			t.Errorf("parseMail(%q) err = %v, want ErrMalformed", raw, err)
		}
	}
	in, err := parseMail([]byte("From: a@b.c\nSubject: =?utf-8?q?d=C3=A9ploy?=\n\nbody"))
	if err != nil || in.Subject != "déploy" || !strings.HasPrefix(in.MessageID, "sha256:") {
		t.Errorf("parseMail: %+v, %v", in, err)
	}
}

func FuzzParseMail(f *testing.F) {
	f.Add(testMail{From: "a@b.c", To: "ops@example.com", Subject: "s", MessageID: "m@x", Body: "approve"}.String())
	f.Add(loadReply(f, "gmail_reply.eml", replyVars))
	if b, err := os.ReadFile("testdata/thunderbird_attachments.eml"); err == nil {
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, raw string) {
		in, err := parseMail([]byte(raw))
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if in.MessageID == "" || in.From == "" {
			t.Fatalf("parsed without Message-ID or From: %+v", in)
		}
		StripQuotes(in.Text)
		if len(in.Files) > maxFilesPerMail {
			t.Fatalf("%d files, over the bound", len(in.Files))
		}
		for _, fl := range in.Files {
			if _, sec, err := parseFileRef("1/1/" + fl.Section); err != nil || len(sec) == 0 {
				t.Fatalf("section %q does not parse back: %v", fl.Section, err)
			}
		}
	})
}

func TestHTMLToText(t *testing.T) {
	t.Parallel()
	md := "Deployed **api** to _prod_\n\n- one\n- two `x<y`\n\n```\nls -l\n  indented\n```\n\n> quoted\n\n[docs](https://x.example/a?b=1&c=2) <script>\n\n1. a\n2. b"
	got := htmlToText(renderReply(md))
	for _, want := range []string{"Deployed api to prod", "• one", "• two x<y", "ls -l\n  indented", "> quoted",
		"docs (https://x.example/a?b=1&c=2) <script>", "1. a", "2. b"} {
		if !strings.Contains(got, want) {
			t.Errorf("htmlToText lost %q:\n%s", want, got)
		}
	}
	gmail := `<div dir="ltr">approve</div><div class="gmail_quote">On x wrote:<blockquote>reject: no<br>edit</blockquote></div><style>p{}</style>`
	if s := StripQuotes(htmlToText(gmail)); !strings.HasPrefix(s, "approve") || strings.Contains(s, "reject") || strings.Contains(s, "p{}") {
		t.Errorf("blockquote history survived: %q", s)
	}
}

// FuzzHTMLToText: HTML-only mail from anyone converts without panicking,
// keeps valid UTF-8 valid, and drops script contents.
func FuzzHTMLToText(f *testing.F) {
	f.Add(`<div dir="ltr">approve</div><blockquote>quoted<br>more</blockquote>`)
	f.Add(`<ol start="3"><li>a</li></ol><a href='x'>t</a><pre>  x</pre><!-- c -->`)
	f.Add(`<script>secret()</script>visible`)
	f.Fuzz(func(t *testing.T, s string) {
		out := htmlToText(s)
		if utf8.ValidString(s) && !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 out of valid input %q", s)
		}
		if strings.Contains(s, "<script>PWN</script>") && strings.Contains(out, "PWN") && !strings.Contains(strings.Replace(s, "<script>PWN</script>", "", 1), "PWN") {
			t.Fatalf("script contents leaked: %q", out)
		}
	})
}
