package approvalref

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
)

const testUUID = "0b9a4a52-9b8e-4f7e-9d0c-3c1f5f7e2a11"

func mustNew(t testing.TB, secret string, f Format) *Codec {
	t.Helper()
	c, err := New(secret, f)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Limits the adapters use: a byte budget without a prefix, and a larger
// one with a prefix and a longer tag.
var (
	tight = Format{MaxLen: 64}
	roomy = Format{Prefix: "og1.", MaxLen: 100, TagBytes: 16}
)

func TestRoundTripAndRefusals(t *testing.T) {
	t.Parallel()
	for _, f := range []Format{tight, roomy} {
		c := mustNew(t, "secret", f)
		other := mustNew(t, "secret2", f)
		for _, id := range []string{testUUID, "ap-1", "AP_2", "0B9A4A52-9B8E-4F7E-9D0C-3C1F5F7E2A11"} {
			for _, act := range []Action{Approve, Reject, Edit} {
				s, err := c.Encode(Ref{Action: act, ApprovalID: id})
				if err != nil {
					t.Fatalf("%+v encode %s %s: %v", f, act, id, err)
				}
				if len(s) > f.MaxLen || !strings.HasPrefix(s, f.Prefix) {
					t.Errorf("%q: over %d bytes or without prefix %q", s, f.MaxLen, f.Prefix)
				}
				r, err := c.Decode(s)
				if err != nil || r.ApprovalID != id || r.Action != act {
					t.Errorf("decode %q = %+v, %v; want %s %s", s, r, err, act, id)
				}
				if _, err := other.Decode(s); !errors.Is(err, ErrForged) {
					t.Errorf("other key: %v, want ErrForged", err)
				}
				swapped := []byte(s)
				swapped[len(f.Prefix)] = byte(map[Action]Action{Approve: Reject, Reject: Edit, Edit: Approve}[act])
				if _, err := c.Decode(string(swapped)); !errors.Is(err, ErrForged) {
					t.Errorf("swapped action: %v, want ErrForged", err)
				}
			}
		}
	}
}

func TestUUIDTravelsCompactly(t *testing.T) {
	t.Parallel()
	c := mustNew(t, "secret", tight)
	s, err := c.Encode(Ref{Action: Approve, ApprovalID: testUUID})
	if err != nil {
		t.Fatal(err)
	}
	// action + "u" + 22 base64 chars + "." + 16 tag chars
	if want := 1 + 1 + 22 + 1 + 16; len(s) != want {
		t.Errorf("%q is %d bytes, want %d", s, len(s), want)
	}
}

func TestPrefixIsSigned(t *testing.T) {
	t.Parallel()
	a := mustNew(t, "secret", Format{Prefix: "x1.", MaxLen: 100})
	b := mustNew(t, "secret", Format{Prefix: "y1.", MaxLen: 100})
	s, _ := a.Encode(Ref{Action: Approve, ApprovalID: "ap-1"})
	if _, err := b.Decode("y1." + strings.TrimPrefix(s, "x1.")); !errors.Is(err, ErrForged) {
		t.Errorf("re-prefixed payload: %v, want ErrForged", err)
	}
	if _, err := b.Decode(s); !errors.Is(err, ErrMalformed) {
		t.Errorf("foreign prefix: %v, want ErrMalformed", err)
	}
}

func TestEncodeRefuses(t *testing.T) {
	t.Parallel()
	c := mustNew(t, "secret", tight)
	for name, r := range map[string]Ref{
		"unknown action": {Action: 'x', ApprovalID: "ap-1"},
		"empty id":       {Action: Approve},
		"unsafe id":      {Action: Approve, ApprovalID: "has space"},
		"dot in id":      {Action: Approve, ApprovalID: "a.b"},
		"too long":       {Action: Approve, ApprovalID: strings.Repeat("x", 60)},
	} {
		if s, err := c.Encode(r); err == nil {
			t.Errorf("%s: encoded %q", name, s)
		}
	}
	// The longest id that fits fills the limit exactly.
	n := tight.MaxLen - (1 + 1 + 1 + 16)
	s, err := c.Encode(Ref{Action: Edit, ApprovalID: strings.Repeat("x", n)})
	if err != nil || len(s) != tight.MaxLen {
		t.Errorf("id of %d: %q, %v; want exactly %d bytes", n, s, err, tight.MaxLen)
	}
	if _, err := c.Encode(Ref{Action: Edit, ApprovalID: strings.Repeat("x", n+1)}); err == nil {
		t.Errorf("id of %d encoded past the limit", n+1)
	}
}

func TestDecodeMalformed(t *testing.T) {
	t.Parallel()
	c := mustNew(t, "secret", tight)
	good, _ := c.Encode(Ref{Action: Approve, ApprovalID: testUUID})
	body, tag, _ := strings.Cut(good, ".")
	for name, s := range map[string]string{
		"empty":            "",
		"another app's":    "hello",
		"no body":          "." + tag,
		"no tag":           body + ".",
		"short tag":        body + "." + tag[:8],
		"padded tag":       body + "." + tag + "==",
		"newline in tag":   body + "." + tag[:4] + "\n" + tag[4:],
		"CR in ref":        body[:5] + "\r" + body[5:] + "." + tag,
		"unknown action":   "x" + good[1:],
		"unknown ref kind": "az" + good[2:],
		"short uuid":       body[:10] + "." + tag,
		"over the limit":   good + strings.Repeat("A", 64),
		"bad id":           "as%20x." + tag,
		"standard base64":  strings.ReplaceAll(strings.ReplaceAll(good, "-", "+"), "_", "/"),
	} {
		if s == good {
			continue // the replacement changed nothing
		}
		if _, err := c.Decode(s); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s %q: %v, want ErrMalformed", name, s, err)
		}
	}
	// A UUID whose last base64 character has non-zero trailing bits decodes
	// to the same bytes in lenient mode; strict decoding refuses it as not
	// ours rather than checking a tag over a second spelling.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, body[len(body)-1])
	mangled := body[:len(body)-1] + string(alphabet[last|1]) + "." + tag
	if _, err := c.Decode(mangled); !errors.Is(err, ErrMalformed) {
		t.Errorf("second spelling %q of %q: %v, want ErrMalformed", mangled, good, err)
	}
}

func TestNewRefusesBadFormats(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		secret string
		f      Format
	}{
		"empty secret":      {"", tight},
		"short tag":         {"s", Format{MaxLen: 64, TagBytes: 4}},
		"long tag":          {"s", Format{MaxLen: 200, TagBytes: 33}},
		"no room for uuid":  {"s", Format{MaxLen: 40}},
		"prefix with space": {"s", Format{Prefix: "o g", MaxLen: 100}},
	} {
		if _, err := New(tc.secret, tc.f); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New("s", Format{MaxLen: 41}); err != nil {
		t.Errorf("exact room for a UUID reference refused: %v", err)
	}
}

func TestActionString(t *testing.T) {
	t.Parallel()
	for a, want := range map[Action]string{Approve: "approve", Reject: "reject", Edit: "edit"} {
		if a.String() != want {
			t.Errorf("%c.String() = %q, want %q", byte(a), a.String(), want)
		}
	}
}

// FuzzDecode checks that decoding never panics, never accepts anything it
// did not sign, and that whatever it accepts re-encodes to exactly itself:
// no second spelling of a signed payload exists.
func FuzzDecode(f *testing.F) {
	codecs := []*Codec{mustNew(f, "token", tight), mustNew(f, "token", roomy)}
	for _, c := range codecs {
		for _, id := range []string{testUUID, "ap-1"} {
			for _, act := range []Action{Approve, Reject, Edit} {
				s, err := c.Encode(Ref{Action: act, ApprovalID: id})
				if err != nil {
					f.Fatal(err)
				}
				f.Add(s)
			}
		}
	}
	f.Add("a.b")
	f.Add("og1.su.AAAA")
	f.Add("uAAAAAAAAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAA")
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range codecs {
			r, err := c.Decode(s)
			if err != nil {
				if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrForged) {
					t.Fatalf("decode %q: unexpected error %v", s, err)
				}
				continue
			}
			again, err := c.Encode(r)
			if err != nil || again != s {
				t.Fatalf("decoded %q → %+v, re-encoded %q (%v)", s, r, again, err)
			}
		}
	})
}

// DeriveKey is HMAC-SHA256(secret, "opsgate-buttons-v1"): Slack's button
// values are signed with it, so changing it would invalidate every button
// already posted.
func TestDeriveKeyIsStable(t *testing.T) {
	t.Parallel()
	m := hmac.New(sha256.New, []byte("xoxb-secret"))
	m.Write([]byte("opsgate-buttons-v1"))
	if got := DeriveKey("xoxb-secret"); !hmac.Equal(got, m.Sum(nil)) {
		t.Errorf("DeriveKey changed: %x", got)
	}
	if hmac.Equal(DeriveKey("a"), DeriveKey("b")) {
		t.Error("different secrets derive the same key")
	}
}

// A question's answer travels like a decision: its run, step and choice,
// signed, in the tightest format; any other spelling of the numbers is
// malformed, and an altered choice does not verify.
func TestQuestionRefsRoundTrip(t *testing.T) {
	t.Parallel()
	c := mustNew(t, "secret", tight)
	for _, r := range []Ref{
		{Action: Answer, RunID: testUUID, Step: 12, Choice: 3},
		{Action: Skip, RunID: testUUID, Step: 0},
		{Action: Form, RunID: "run-1", Step: 9999},
		{Action: ApproveAll, ApprovalID: testUUID},
	} {
		s, err := c.Encode(r)
		if err != nil || len(s) > tight.MaxLen {
			t.Fatalf("encode %+v = %q, %v", r, s, err)
		}
		got, err := c.Decode(s)
		if err != nil || got != r {
			t.Errorf("decode %q = %+v, %v; want %+v", s, got, err, r)
		}
	}
	if _, err := c.Encode(Ref{Action: Answer, RunID: testUUID, Choice: maxNumber + 1}); err == nil {
		t.Error("a choice out of range was encoded")
	}
	s, _ := c.Encode(Ref{Action: Answer, RunID: "run-1", Step: 2, Choice: 1})
	body, tag, _ := strings.Cut(s, ".")
	for _, bad := range []string{"q2-1", "q02-1srun-1", "q2-srun-1", "q-1srun-1", "q2-1", "q2_1srun-1"} {
		if _, err := c.Decode(bad + "." + tag); !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrForged) {
			t.Errorf("decode %q: %v", bad, err)
		}
	}
	altered := strings.Replace(body, "2-1", "2-0", 1) + "." + tag
	if _, err := c.Decode(altered); !errors.Is(err, ErrForged) {
		t.Errorf("altered choice: %v, want ErrForged", err)
	}
}
