package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/approvals/receipt"
)

// The audit chain is keyed (HMAC-SHA256) with a secret kept outside the
// store, in audit.key_file: someone who can rewrite rows in the database
// cannot re-seal them. Approval receipts are signed (Ed25519) with a key
// in approvals.receipt_key_file. serve generates each file on first
// start; every replica must read the same keys (a Kubernetes Secret, a
// shared volume).

// serverKeys are the keys serve loads before it builds the listener: the
// audit chain's, and the signer of approval receipts (nil signs none).
type serverKeys struct {
	audit    []byte
	receipts *receipt.Signer
}

// auditKeyBytes is the size of a generated key: 256 bits, written as hex.
const auditKeyBytes = 32

// errAuditKeyMissing reports that a key file does not exist (and was not
// to be created).
var errAuditKeyMissing = errors.New("key file not found")

// loadAuditKey reads the audit key from path: hex, at least 32 bytes.
// With create, a missing file is generated (readKeyFile); an existing
// file is never replaced, because a new key would break the chain.
func loadAuditKey(path string, create bool) (approvals.AuditKey, error) {
	b, err := readKeyFile(path, create, "audit key", "audit.key_file; the key the servers seal with", func() ([]byte, error) {
		var k [auditKeyBytes]byte
		if _, err := rand.Read(k[:]); err != nil {
			return nil, err
		}
		return []byte(hex.EncodeToString(k[:]) + "\n"), nil
	})
	if err != nil {
		return nil, err
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) < approvals.MinAuditKeyLen {
		return nil, fmt.Errorf("audit key %s: want at least %d bytes written as hex (e.g. `openssl rand -hex 32`)", path, approvals.MinAuditKeyLen)
	}
	return key, nil
}

// loadReceiptSigner reads the receipt signing key from path (a PEM
// PKCS #8 Ed25519 private key, as `openssl genpkey -algorithm ed25519`
// writes it), generating it when create and missing, and returns a signer
// whose receipts expire ttl after their decision. Replacing the file
// makes earlier receipts unverifiable with the new public key; verifiers
// holding the old one still verify them.
func loadReceiptSigner(path string, create bool, ttl time.Duration) (*receipt.Signer, error) {
	b, err := readKeyFile(path, create, "receipt key", "approvals.receipt_key_file; the key receipts are signed with", func() ([]byte, error) {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		return receipt.MarshalPrivateKey(k)
	})
	if err != nil {
		return nil, err
	}
	k, err := receipt.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("receipt key %s: %w", path, err)
	}
	return receipt.NewSigner(k, ttl)
}

// readKeyFile returns the contents of the secret key file at path. The
// file must be a regular file that no one but its owner and group can
// read (0600, 0400, or 0440 as a Kubernetes Secret with fsGroup mounts
// it). With create, a missing file is written with gen's bytes, mode
// 0600, without ever replacing a file another process created meanwhile
// (link, not rename). what names the key in errors, setting where it is
// configured.
func readKeyFile(path string, create bool, what, setting string, gen func() ([]byte, error)) ([]byte, error) {
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist) && create:
		if err := writeKeyFile(path, what, gen); err != nil {
			return nil, err
		}
		return readKeyFile(path, false, what, setting, gen)
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("%s %s: %w (%s)", what, path, errAuditKeyMissing, setting)
	case err != nil:
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	case !info.Mode().IsRegular():
		return nil, fmt.Errorf("%s %s: not a regular file", what, path)
	case info.Mode().Perm()&0o037 != 0:
		return nil, fmt.Errorf("%s %s: mode %s lets others read or write it; make it 0600 (or 0440 for a dedicated group)",
			what, path, info.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	return b, nil
}

// writeKeyFile writes gen's bytes to path as readKeyFile describes.
func writeKeyFile(path, what string, gen func() ([]byte, error)) error {
	dir := filepath.Dir(path)
	if err := makePrivateDir(dir); err != nil {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	content, err := gen()
	if err != nil {
		return fmt.Errorf("generate %s: %w", what, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", what, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", what, err)
	}
	if _, err := tmp.Write(content); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", what, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", what, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", what, err)
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("write %s %s: %w", what, path, err)
	}
	return nil
}
