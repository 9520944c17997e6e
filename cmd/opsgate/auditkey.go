package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/opsgate/opsgate/approvals"
)

// The audit chain is keyed (HMAC-SHA256) with a secret kept outside the
// store, in audit.key_file: someone who can rewrite rows in the database
// cannot re-seal them. serve generates the file on first start; every
// replica must read the same key (a Kubernetes Secret, a shared volume).

// auditKeyBytes is the size of a generated key: 256 bits, written as hex.
const auditKeyBytes = 32

// errAuditKeyMissing reports that the key file does not exist (and was not
// to be created).
var errAuditKeyMissing = errors.New("audit key file not found")

// loadAuditKey reads the audit key from path: hex, at least 32 bytes. The
// file must be a regular file that no one but its owner and group can
// read (0600, 0400, or 0440 as a Kubernetes Secret with fsGroup mounts
// it). With create, a missing file is generated, mode 0600; an existing
// file is never replaced, because a new key would break the chain.
func loadAuditKey(path string, create bool) (approvals.AuditKey, error) {
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist) && create:
		return generateAuditKey(path)
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("audit key %s: %w (audit.key_file; the key the servers seal with)", path, errAuditKeyMissing)
	case err != nil:
		return nil, fmt.Errorf("audit key %s: %w", path, err)
	case !info.Mode().IsRegular():
		return nil, fmt.Errorf("audit key %s: not a regular file", path)
	case info.Mode().Perm()&0o037 != 0:
		return nil, fmt.Errorf("audit key %s: mode %s lets others read or write it; make it 0600 (or 0440 for a dedicated group)",
			path, info.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("audit key %s: %w", path, err)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) < approvals.MinAuditKeyLen {
		return nil, fmt.Errorf("audit key %s: want at least %d bytes written as hex (e.g. `openssl rand -hex 32`)", path, approvals.MinAuditKeyLen)
	}
	return key, nil
}

// generateAuditKey writes a new random key to path, mode 0600, without
// ever replacing a file another process created meanwhile (link, not
// rename), and returns the key that is in the file.
func generateAuditKey(path string) (approvals.AuditKey, error) {
	dir := filepath.Dir(path)
	if err := makePrivateDir(dir); err != nil {
		return nil, fmt.Errorf("audit key %s: %w", path, err)
	}
	var b [auditKeyBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("generate audit key: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".audit.key-*")
	if err != nil {
		return nil, fmt.Errorf("write audit key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("write audit key: %w", err)
	}
	if _, err := tmp.WriteString(hex.EncodeToString(b[:]) + "\n"); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("write audit key: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("write audit key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("write audit key: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("write audit key %s: %w", path, err)
	}
	return loadAuditKey(path, false)
}
