// Package dendritetest runs a real Matrix homeserver for tests: Dendrite
// (github.com/matrix-org/dendrite, Apache-2.0), built from .ci/dendrite —
// its own module, so it never enters opsgate's go.mod — and started once
// per test binary on a loopback port with open registration, federation
// off and rate limits off.
//
// The binary is $OPSGATE_DENDRITE_BIN (.ci/run builds and caches it, then
// exports it). Without it a test skips loudly, or fails when CI is set, so
// CI can never pass without the homeserver having run:
//
//	go -C .ci/dendrite build -o /tmp/dendrite github.com/matrix-org/dendrite/cmd/dendrite
//	OPSGATE_DENDRITE_BIN=/tmp/dendrite go test ./adapters/matrix/
package dendritetest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix"
)

// EnvBin names the Dendrite binary.
const EnvBin = "OPSGATE_DENDRITE_BIN"

// ServerName is the homeserver's name: users are "@name:localhost".
const ServerName = "localhost"

// Server is the running homeserver.
type Server struct {
	// URL is the client-server API base, http://127.0.0.1:<port>.
	URL string
	dir string
	cmd *exec.Cmd
	log string
}

var (
	once    sync.Once
	server  *Server
	failure error
)

// Main runs the package's tests and then stops the homeserver, if one was
// started: `func TestMain(m *testing.M) { dendritetest.Main(m) }`.
func Main(m *testing.M) {
	code := m.Run()
	if server != nil {
		server.stop()
	}
	os.Exit(code)
}

// Start returns the package's homeserver, starting it on first use. It
// skips t (fails it when CI is set) when the binary is missing, and fails
// t when the binary does not start.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := os.Getenv(EnvBin)
	if bin == "" {
		msg := "no Matrix homeserver: set " + EnvBin + " to a Dendrite binary (go -C .ci/dendrite build -o /tmp/dendrite github.com/matrix-org/dendrite/cmd/dendrite); .ci/run does this"
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set but " + msg)
		}
		t.Skip("SKIPPED (loudly): " + msg)
	}
	once.Do(func() { server, failure = start(bin) })
	if failure != nil {
		t.Fatalf("dendritetest: %v", failure)
	}
	return server
}

func start(bin string) (*Server, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s=%s: %w", EnvBin, bin, err)
	}
	dir, err := os.MkdirTemp("", "opsgate-dendrite-")
	if err != nil {
		return nil, err
	}
	if err := writeKey(filepath.Join(dir, "matrix_key.pem")); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "dendrite.yaml"), []byte(config(dir)), 0o600); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{URL: "http://127.0.0.1:" + port, dir: dir, log: filepath.Join(dir, "dendrite.log")}
	logf, err := os.Create(s.log)
	if err != nil {
		return nil, err
	}
	s.cmd = exec.Command(bin, "-config", filepath.Join(dir, "dendrite.yaml"),
		"-http-bind-address", "127.0.0.1:"+port, "-really-enable-open-registration")
	s.cmd.Dir = dir
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait(); logf.Close() }()
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("dendrite exited before it was ready (%v):\n%s", err, s.tail())
		default:
		}
		resp, err := http.Get(s.URL + "/_matrix/client/versions")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("dendrite not ready after 90s:\n%s", s.tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *Server) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		time.Sleep(50 * time.Millisecond)
	}
	_ = os.RemoveAll(s.dir)
}

func (s *Server) tail() string {
	b, _ := os.ReadFile(s.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Register creates a user (open registration, m.login.dummy) whose name
// starts with prefix and is unique on this server, and returns a client
// logged in as them.
func (s *Server) Register(t testing.TB, prefix string) *mautrix.Client {
	t.Helper()
	cli, err := mautrix.NewClient(s.URL, "", "")
	if err != nil {
		t.Fatal(err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.ToLower(fmt.Sprintf("%s%x", prefix, b))
	resp, err := cli.RegisterDummy(context.Background(), &mautrix.ReqRegister[any]{
		Username: name, Password: "opsgate-test-" + name, InitialDeviceDisplayName: "opsgate test",
	})
	if err != nil {
		t.Fatalf("dendritetest: register %s: %v\n%s", name, err, s.tail())
	}
	cli.UserID, cli.AccessToken = resp.UserID, resp.AccessToken
	cli.DeviceID = resp.DeviceID
	return cli
}

func writeKey(path string) error {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	b := pem.EncodeToMemory(&pem.Block{Type: "MATRIX PRIVATE KEY", Headers: map[string]string{"Key-ID": "ed25519:test"}, Bytes: priv.Seed()})
	return os.WriteFile(path, b, 0o600)
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	return port, err
}

// config is Dendrite's configuration for a throwaway test server: SQLite
// files under dir, in-memory NATS, no federation (nothing leaves the
// machine), no rate limits, open registration.
func config(dir string) string {
	db := func(name string) string {
		return "\n  database:\n    connection_string: file:" + filepath.Join(dir, "dendrite_"+name+".db") + "\n"
	}
	return `version: 2
global:
  server_name: ` + ServerName + `
  private_key: ` + filepath.Join(dir, "matrix_key.pem") + `
  disable_federation: true
  trusted_third_party_id_servers: []
  presence: {enable_inbound: false, enable_outbound: false}
  report_stats: {enabled: false}
  server_notices: {enabled: false}
  jetstream:
    storage_path: ` + dir + `
    in_memory: true
app_service_api: {config_files: []}
client_api:
  registration_disabled: false
  registration_shared_secret: ""
  rate_limiting: {enabled: false}
federation_api:` + db("federationapi") + `  key_perspectives: []
key_server:` + db("keyserver") + `media_api:` + db("mediaapi") + `  base_path: ` + filepath.Join(dir, "media") + `
room_server:` + db("roomserver") + `sync_api:` + db("syncapi") + `  search: {enabled: false}
user_api:
  bcrypt_cost: 4` + strings.Replace(db("userapi"), "database:", "account_database:", 1) + `mscs:` + db("mscs") + `  mscs: []
relay_api:` + db("relayapi") + `logging:
- type: std
  level: warn
`
}
