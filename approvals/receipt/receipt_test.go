package receipt

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/opsgate/opsgate/approvals"
)

var decidedAt = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func newKey(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func decided(status approvals.Status) *approvals.Approval {
	at := decidedAt
	args := map[string]any{"service": "api", "env": "prod-eu", "version": "1.2.3", "replicas": 3}
	a := &approvals.Approval{ID: "ap1", RunID: "run1", Thread: "slack:C1/1.2", Requester: "slack:UREQ", Tool: "deploy",
		ProposedArgs: args, Status: status, RuleKey: "rabc", PolicyVersion: "p123", DecidedAt: &at,
		Digest: approvals.Digest("deploy", args, "rabc", "p123")}
	action := approvals.ActionApprove
	if status == approvals.StatusRejected {
		action = approvals.ActionReject
	} else {
		a.ApprovedArgs = args
	}
	a.Decisions = []approvals.Decision{
		{Actor: "slack:UOLD", Person: "person:old", Channel: "slack", Action: approvals.ActionApprove, At: at, Superseded: true},
		{Actor: "slack:UALICE", Person: "person:alice", Channel: "slack", Action: action, At: at},
		{Actor: "console:bob", Person: "person:bob", Channel: "console", Action: action, At: at},
	}
	return a
}

// A receipt carries what the contract lists and verifies with the public
// key alone; a changed argument, another key, its expiry or a tampered
// payload are each refused with their reason.
func TestSignVerify(t *testing.T) {
	t.Parallel()
	key := newKey(t)
	s, err := NewSigner(key, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	a := decided(approvals.StatusApproved)
	tok, err := s.Sign(a)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(tok, ".") != 2 {
		t.Fatalf("not a compact JWS: %s", tok)
	}
	pub := key.Public().(ed25519.PublicKey)
	c, err := Verify(tok, pub, decidedAt.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if c.ApprovalID != "ap1" || c.RunID != "run1" || c.Digest != a.Digest || c.Decision != approvals.StatusApproved || !c.Approved() ||
		c.ID == "" || c.ExpiresAt != decidedAt.Add(time.Hour).Unix() || len(c.Deciders) != 2 ||
		c.Deciders[0] != (Decider{Person: "person:alice", Identity: "slack:UALICE", Channel: "slack", Action: approvals.ActionApprove, At: decidedAt.Format(time.RFC3339Nano)}) {
		t.Fatalf("claims %+v", c)
	}
	if err := c.Check(map[string]any{"service": "api", "env": "prod-eu", "version": "1.2.3", "replicas": 3.0}); err != nil {
		t.Fatalf("the same arguments: %v", err)
	}
	if err := c.Check(map[string]any{"service": "api", "env": "prod-eu", "version": "1.2.4", "replicas": 3}); !errors.Is(err, ErrDigest) {
		t.Fatalf("one byte changed: %v, want ErrDigest", err)
	}
	if _, err := Verify(tok, newKey(t).Public().(ed25519.PublicKey), decidedAt); !errors.Is(err, ErrSignature) {
		t.Fatalf("another key: %v", err)
	}
	if _, err := Verify(tok, pub, decidedAt.Add(time.Hour)); !errors.Is(err, ErrExpired) {
		t.Fatalf("at exp: %v", err)
	}
	if _, err := Verify(tok, pub, decidedAt.Add(-time.Hour)); !errors.Is(err, ErrExpired) {
		t.Fatalf("issued in the future: %v", err)
	}
	// One byte of the payload's arguments changed: the signature breaks.
	parts := strings.Split(tok, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	forged := strings.Replace(string(payload), `"1.2.3"`, `"1.2.4"`, 1)
	if forged == string(payload) {
		t.Fatal("payload has no version")
	}
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(forged))
	if _, err := Verify(strings.Join(parts, "."), pub, decidedAt); !errors.Is(err, ErrSignature) {
		t.Fatalf("tampered payload: %v", err)
	}
	// Two receipts of one approval differ in their nonce.
	tok2, _ := s.Sign(a)
	c2, _ := Verify(tok2, pub, decidedAt)
	if c2 == nil || c2.ID == c.ID {
		t.Fatal("nonce repeated")
	}
}

// A rejection gets a receipt that records it; expiry and pending get none.
func TestWhatGetsAReceipt(t *testing.T) {
	t.Parallel()
	s, _ := NewSigner(newKey(t), 0)
	tok, err := s.Sign(decided(approvals.StatusRejected))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Verify(tok, s.PublicKey().Key.(ed25519.PublicKey), decidedAt)
	if err != nil || c.Approved() || c.Decision != approvals.StatusRejected || len(c.Deciders) != 2 {
		t.Fatalf("rejection: %+v, %v", c, err)
	}
	for _, st := range []approvals.Status{approvals.StatusExpired, approvals.StatusPending} {
		a := decided(st)
		if _, err := s.Sign(a); !errors.Is(err, ErrNotDecided) {
			t.Errorf("%s: %v", st, err)
		}
	}
}

// Tokens that are not opsgate receipts are refused before any claim is
// trusted: another algorithm, no type, garbage.
func TestRefusesOtherTokens(t *testing.T) {
	t.Parallel()
	key := newKey(t)
	pub := key.Public().(ed25519.PublicKey)
	payload, _ := json.Marshal(map[string]any{"iss": Issuer, "approval_id": "x", "digest": "sha256:00", "exp": decidedAt.Add(time.Hour).Unix()})
	hs, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte(strings.Repeat("k", 32))}, (&jose.SignerOptions{}).WithType(Type))
	hsTok := mustSerialize(t, hs, payload)
	untyped, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: key}, nil)
	untypedTok := mustSerialize(t, untyped, payload)
	for name, tok := range map[string]string{
		"hs256": hsTok, "untyped": untypedTok, "garbage": "a.b.c", "empty": "", "none": "eyJhbGciOiJub25lIn0.e30.",
		"huge": strings.Repeat("a", MaxLen+1),
	} {
		if _, err := Verify(tok, pub, decidedAt); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

func mustSerialize(t *testing.T, s jose.Signer, payload []byte) string {
	t.Helper()
	jws, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// The key reads as a JWK, a PEM public key or the private key file.
func TestParseKey(t *testing.T) {
	t.Parallel()
	key := newKey(t)
	s, _ := NewSigner(key, 0)
	jwk, err := json.Marshal(s.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	pemPriv, _ := MarshalPrivateKey(key)
	for name, in := range map[string][]byte{"jwk": jwk, "private": pemPriv} {
		pub, err := ParseKey(in)
		if err != nil || !pub.Equal(key.Public()) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if !strings.Contains(string(jwk), `"kty":"OKP"`) || !strings.Contains(string(jwk), `"crv":"Ed25519"`) || !strings.Contains(string(jwk), `"kid"`) {
		t.Errorf("JWK %s", jwk)
	}
	for _, bad := range []string{"", "{}", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", "nonsense"} {
		if _, err := ParseKey([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzReceiptVerify: whatever comes in as a receipt, Verify answers an
// error or claims that verify, and never panics.
func FuzzReceiptVerify(f *testing.F) {
	key := newKey(f)
	s, _ := NewSigner(key, time.Hour)
	tok, _ := s.Sign(decided(approvals.StatusApproved))
	f.Add(tok)
	f.Add("eyJhbGciOiJFZERTQSJ9.e30.AAAA")
	f.Add("..")
	pub := key.Public().(ed25519.PublicKey)
	f.Fuzz(func(t *testing.T, in string) {
		c, err := Verify(in, pub, decidedAt)
		if err == nil && (c == nil || c.Check(nil) != nil) {
			t.Fatalf("verified %q without consistent claims", in)
		}
	})
}
