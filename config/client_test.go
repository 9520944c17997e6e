package config

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
)

// clientLoader serves one file as ./opsgate.yaml and env as the
// environment.
func clientLoader(file string, env map[string]string) Loader {
	return Loader{
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		ReadFile: func(p string) ([]byte, error) {
			if p == DefaultFile && file != "" {
				return []byte(file), nil
			}
			return nil, fs.ErrNotExist
		},
		Stat: func(p string) (fs.FileInfo, error) {
			if p == DefaultFile && file != "" {
				return nil, nil
			}
			return nil, fs.ErrNotExist
		},
	}
}

// TestResolveClientReadsOnlyListenAndDataDir: a production config naming
// secrets the operator's shell lacks still gives the CLI its two values.
func TestResolveClientReadsOnlyListenAndDataDir(t *testing.T) {
	t.Parallel()
	const prod = `server:
  listen: "${OPSGATE_LISTEN:-0.0.0.0:9090}"
  data_dir: /var/lib/opsgate
channels:
  webhooks:
    - {name: ci, secret: "${CI_WEBHOOK_SECRET}"}
tools: [{name: x, risk: nonsense}]
`
	cs, err := clientLoader(prod, nil).ResolveClient("")
	if err != nil {
		t.Fatalf("ResolveClient: %v", err)
	}
	if cs.Listen != "0.0.0.0:9090" || cs.DataDir != "/var/lib/opsgate" || cs.Source != DefaultFile {
		t.Fatalf("got %+v", cs)
	}
	if _, _, err := (clientLoader(prod, nil)).Resolve(""); err == nil || !strings.Contains(err.Error(), "CI_WEBHOOK_SECRET") {
		t.Fatalf("the full load should still fail on the missing secret: %v", err)
	}
	cs, err = clientLoader(prod, map[string]string{"OPSGATE_LISTEN": "127.0.0.1:7000"}).ResolveClient("")
	if err != nil || cs.Listen != "127.0.0.1:7000" {
		t.Fatalf("with OPSGATE_LISTEN: %+v, %v", cs, err)
	}
}

func TestResolveClientDefaultsAndErrors(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		file, listen, dataDir, err string
	}{
		"BuiltIn":         {"", "127.0.0.1:8080", "./data", ""},
		"NoServerSection": {"tools: []\n", DefaultListen, DefaultDataDir, ""},
		"NullValues":      {"server: {listen: null, data_dir: ~}\n", DefaultListen, DefaultDataDir, ""},
		"UnsetVariable":   {"server: {listen: \"${NOPE}\"}\n", "", "", "NOPE is not set"},
		"NotAString":      {"server: {data_dir: [a]}\n", "", "", "server.data_dir: must be a string"},
		"BadYAML":         {"server: [\n", "", "", "opsgate.yaml"},
		"ServerNotAMap":   {"server: 3\n", "", "", "opsgate.yaml"},
	} {
		t.Run(name, func(t *testing.T) {
			cs, err := clientLoader(c.file, nil).ResolveClient("")
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || cs.Listen != c.listen || cs.DataDir != c.dataDir {
				t.Fatalf("%+v, %v; want %s %s", cs, err, c.listen, c.dataDir)
			}
		})
	}
	if _, err := (Loader{ReadFile: func(string) ([]byte, error) { return nil, errors.New("boom") }}).ResolveClient("x.yaml"); err == nil ||
		!strings.Contains(err.Error(), "x.yaml") {
		t.Fatalf("unreadable file: %v", err)
	}
}

func FuzzResolveClient(f *testing.F) {
	f.Add("server: {listen: \"${A:-1.2.3.4:5}\", data_dir: d}\n")
	f.Add("server: [\n")
	f.Add("a: &a [*a]\n")
	f.Fuzz(func(t *testing.T, file string) {
		if file == "" {
			return
		}
		cs, err := clientLoader(file, nil).ResolveClient("")
		if err == nil && (cs.Listen == "" || cs.DataDir == "") {
			t.Fatalf("no error but empty values: %+v", cs)
		}
	})
}
