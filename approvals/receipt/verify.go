package receipt

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/opsgate/opsgate/approvals"
)

// The reasons a receipt does not verify; Verify and Claims.Check wrap one.
var (
	// ErrMalformed: not a compact JWS with an EdDSA signature and claims.
	ErrMalformed = errors.New("receipt malformed")
	// ErrSignature: the signature does not verify with the key.
	ErrSignature = errors.New("receipt signature does not verify")
	// ErrExpired: past its exp (or issued in the future).
	ErrExpired = errors.New("receipt expired")
	// ErrDigest: the arguments do not hash to the receipt's digest.
	ErrDigest = errors.New("arguments do not match the receipt's digest")
	// ErrNotApproved: the receipt records a rejection.
	ErrNotApproved = errors.New("receipt records no approval")
)

// MaxLen bounds the receipts Verify reads.
const MaxLen = 1 << 20

// clockSkew is how far in the future a receipt's iat may be.
const clockSkew = time.Minute

// Verify checks a compact JWS receipt against key at now: the signature
// (EdDSA only), the type, the issuer and the expiry; then that its
// arguments hash to its digest. It returns the claims of a receipt that
// passes, whatever it decided (Claims.Approved says whether it approves).
func Verify(token string, key ed25519.PublicKey, now time.Time) (*Claims, error) {
	token = strings.TrimSpace(token)
	if len(token) > MaxLen {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrMalformed, MaxLen)
	}
	jws, err := jose.ParseSignedCompact(token, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if len(jws.Signatures) != 1 {
		return nil, fmt.Errorf("%w: want one signature", ErrMalformed)
	}
	if typ, _ := jws.Signatures[0].Protected.ExtraHeaders[jose.HeaderType].(string); typ != Type {
		return nil, fmt.Errorf("%w: typ %q, want %q", ErrMalformed, typ, Type)
	}
	payload, err := jws.Verify(key)
	if err != nil {
		return nil, ErrSignature
	}
	var c Claims
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, fmt.Errorf("%w: claims: %v", ErrMalformed, err)
	}
	if c.Issuer != Issuer || c.ApprovalID == "" || c.Digest == "" {
		return nil, fmt.Errorf("%w: not an opsgate receipt", ErrMalformed)
	}
	switch t := now.Unix(); {
	case t >= c.ExpiresAt:
		return nil, fmt.Errorf("%w at %s", ErrExpired, time.Unix(c.ExpiresAt, 0).UTC().Format(time.RFC3339))
	case time.Unix(c.IssuedAt, 0).After(now.Add(clockSkew)):
		return nil, fmt.Errorf("%w: issued in the future (%s)", ErrExpired, time.Unix(c.IssuedAt, 0).UTC().Format(time.RFC3339))
	}
	if err := c.Check(nil); err != nil {
		return nil, err
	}
	return &c, nil
}

// Check reports whether args — the arguments about to run, as JSON values
// — hash to the receipt's digest with its tool, rule and policy; nil args
// checks the receipt's own arguments.
func (c *Claims) Check(args map[string]any) error {
	if args == nil {
		m, ok := c.Args.(map[string]any)
		if !ok && c.Args != nil {
			return fmt.Errorf("%w: its arguments are not an object", ErrMalformed)
		}
		args = m
	}
	if got := approvals.Digest(c.Tool, args, c.Rule, c.Policy); got != c.Digest {
		return fmt.Errorf("%w: they hash to %s, the receipt names %s", ErrDigest, got, c.Digest)
	}
	return nil
}

// Approved reports whether the receipt records an approval (approved or
// edited), as opposed to a rejection.
func (c *Claims) Approved() bool {
	return c.Decision == approvals.StatusApproved || c.Decision == approvals.StatusEdited
}

// ParseKey reads a verification key: a JWK (what GET /api/v1/receipts/key
// answers), a PEM "PUBLIC KEY", or the PEM "PRIVATE KEY" of the signing
// key file itself.
func ParseKey(data []byte) (ed25519.PublicKey, error) {
	text := strings.TrimSpace(string(data))
	if strings.HasPrefix(text, "{") {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON([]byte(text)); err != nil {
			return nil, fmt.Errorf("receipt key: JWK: %w", err)
		}
		if pub, ok := k.Key.(ed25519.PublicKey); ok {
			return pub, nil
		}
		if priv, ok := k.Key.(ed25519.PrivateKey); ok {
			return priv.Public().(ed25519.PublicKey), nil
		}
		return nil, errors.New("receipt key: the JWK is not an Ed25519 (OKP) key")
	}
	block, _ := pem.Decode([]byte(text))
	if block == nil {
		return nil, errors.New("receipt key: want a JWK or a PEM public or private key")
	}
	switch block.Type {
	case "PUBLIC KEY":
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("receipt key: %w", err)
		}
		if pub, ok := k.(ed25519.PublicKey); ok {
			return pub, nil
		}
	case "PRIVATE KEY":
		priv, err := ParsePrivateKey(data)
		if err != nil {
			return nil, err
		}
		return priv.Public().(ed25519.PublicKey), nil
	}
	return nil, fmt.Errorf("receipt key: a PEM %q is not an Ed25519 key", block.Type)
}

// ParsePrivateKey reads the signing key file: a PEM "PRIVATE KEY" (PKCS
// #8) holding an Ed25519 key, as `openssl genpkey -algorithm ed25519`
// writes it.
func ParsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errors.New("receipt key: want a PEM \"PRIVATE KEY\" block (openssl genpkey -algorithm ed25519)")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("receipt key: %w", err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, errors.New("receipt key: not an Ed25519 key")
	}
	return priv, nil
}

// MarshalPrivateKey writes key as ParsePrivateKey reads it.
func MarshalPrivateKey(key ed25519.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("receipt key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
