// Package receipt signs and verifies approval receipts: proof, checkable
// offline by the system that acts, that people decided exactly this call.
//
// A receipt is a compact JWS (RFC 7515) signed with Ed25519 ("alg":
// "EdDSA") whose payload is the JSON of Claims: the approval's id, run,
// tool, arguments, rule and policy version, its digest, the decision, who
// decided (persons, identities and channels), when, a nonce (jti) and an
// expiry (exp). opsgate signs one when an approval is decided by people
// (approved, edited, rejected), keeps it with the approval, serves it at
// GET /api/v1/approvals/{id}/receipt and hands it to the tool that runs
// under it (exec: $OPSGATE_RECEIPT; http: the Opsgate-Receipt header).
// The public key is a JWK at GET /api/v1/receipts/key. docs/receipts.md
// shows a verifier in a few lines of Go and of Node.
package receipt

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/opsgate/opsgate/approvals"
)

// Type is the receipt's "typ" header (RFC 8725 explicit typing), so a
// receipt is never taken for another kind of token signed by the same key.
const Type = "opsgate-receipt+jwt"

// Issuer is the "iss" claim of every receipt.
const Issuer = "opsgate"

// Claims is a receipt's payload.
type Claims struct {
	Issuer string `json:"iss"`
	// ID is a random nonce: a system that acts may refuse a receipt it has
	// seen before (a re-dispatch after a crash carries the same one and
	// the same idempotency key).
	ID        string `json:"jti"`
	IssuedAt  int64  `json:"iat"`
	ExpiresAt int64  `json:"exp"`

	ApprovalID string `json:"approval_id"`
	RunID      string `json:"run_id"`
	Thread     string `json:"thread"`
	Requester  string `json:"requester"`
	Tool       string `json:"tool"`
	// Args are the arguments decided on (an edit's when edited), as
	// canonical JSON values.
	Args   any    `json:"args"`
	Rule   string `json:"rule"`
	Policy string `json:"policy"`
	// Digest is approvals.Digest(Tool, Args, Rule, Policy).
	Digest string `json:"digest"`
	// Decision is the approval's final status: approved, edited or
	// rejected.
	Decision  approvals.Status `json:"decision"`
	DecidedAt string           `json:"decided_at"`
	Deciders  []Decider        `json:"deciders"`
}

// Decider is one person's counted decision.
type Decider struct {
	Person   string           `json:"person"`
	Identity string           `json:"identity"`
	Channel  string           `json:"channel"`
	Action   approvals.Action `json:"action"`
	At       string           `json:"at"`
}

// Signer signs receipts with one Ed25519 key.
type Signer struct {
	signer jose.Signer
	public jose.JSONWebKey
	ttl    time.Duration
}

// DefaultTTL is how long a receipt verifies after its decision when the
// signer is given no TTL.
const DefaultTTL = 24 * time.Hour

// NewSigner returns a signer for key; its receipts expire ttl after the
// decision (DefaultTTL if 0).
func NewSigner(key ed25519.PrivateKey, ttl time.Duration) (*Signer, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, errors.New("receipt: not an Ed25519 private key")
	}
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	pub := jose.JSONWebKey{Key: key.Public(), Algorithm: string(jose.EdDSA), Use: "sig"}
	kid, err := KeyID(pub)
	if err != nil {
		return nil, err
	}
	pub.KeyID = kid
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: key},
		(&jose.SignerOptions{}).WithType(Type).WithHeader(jose.HeaderKey("kid"), kid))
	if err != nil {
		return nil, fmt.Errorf("receipt: signer: %w", err)
	}
	return &Signer{signer: s, public: pub, ttl: ttl}, nil
}

// KeyID is a key's RFC 7638 thumbprint (SHA-256, base64url): the "kid" of
// the receipts it signs and of its JWK.
func KeyID(k jose.JSONWebKey) (string, error) {
	tp, err := k.Thumbprint(crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("receipt: key thumbprint: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(tp), nil
}

// PublicKey is the verification key as a JWK (kty OKP, crv Ed25519, with
// kid, alg and use).
func (s *Signer) PublicKey() jose.JSONWebKey { return s.public }

// Issues reports whether a decided approval gets a receipt: one people
// decided (approved, edited, rejected); an expiry or a release is nobody's
// decision.
func Issues(a *approvals.Approval) bool {
	switch a.Status {
	case approvals.StatusApproved, approvals.StatusEdited, approvals.StatusRejected:
		return a.DecidedAt != nil
	}
	return false
}

// ErrNotDecided is returned for an approval that gets no receipt (see
// Issues).
var ErrNotDecided = errors.New("receipt: the approval is not decided by people")

// Sign returns the receipt of a, decided by people, as a compact JWS.
func (s *Signer) Sign(a *approvals.Approval) (string, error) {
	if !Issues(a) {
		return "", ErrNotDecided
	}
	c, err := claimsOf(a, s.ttl)
	if err != nil {
		return "", err
	}
	payload, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("receipt: %w", err)
	}
	jws, err := s.signer.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("receipt: sign: %w", err)
	}
	return jws.CompactSerialize()
}

// claimsOf is what a's receipt says: the arguments decided on (the
// edited ones for an edit; the proposed ones for a rejection) and every
// decision that counted.
func claimsOf(a *approvals.Approval, ttl time.Duration) (*Claims, error) {
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, fmt.Errorf("receipt: nonce: %w", err)
	}
	decided := a.DecidedAt.UTC()
	args := a.Args()
	c := &Claims{
		Issuer: Issuer, ID: base64.RawURLEncoding.EncodeToString(nonce[:]),
		IssuedAt: decided.Unix(), ExpiresAt: decided.Add(ttl).Unix(),
		ApprovalID: a.ID, RunID: a.RunID, Thread: a.Thread, Requester: a.Requester, Tool: a.Tool,
		Args: approvals.CanonicalArgs(args), Rule: a.RuleKey, Policy: a.PolicyVersion,
		Digest:   approvals.Digest(a.Tool, args, a.RuleKey, a.PolicyVersion),
		Decision: a.Status, DecidedAt: decided.Format(time.RFC3339Nano), Deciders: []Decider{},
	}
	for _, d := range a.Decisions {
		if d.Superseded || d.Action == approvals.ActionExpire || !counts(a.Status, d.Action) {
			continue
		}
		person := d.Person
		if person == "" {
			person = d.Actor
		}
		c.Deciders = append(c.Deciders, Decider{Person: person, Identity: d.Actor, Channel: d.Channel, Action: d.Action,
			At: d.At.UTC().Format(time.RFC3339Nano)})
	}
	return c, nil
}

// counts reports whether a decision with action made the final status.
func counts(status approvals.Status, action approvals.Action) bool {
	if status == approvals.StatusRejected {
		return action == approvals.ActionReject
	}
	return action == approvals.ActionApprove || action == approvals.ActionEdit
}
