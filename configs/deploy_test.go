package configs

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestDeployConfigsAgreeWithQuickstart: the container's default config and
// the compose config are the quickstart with a few keys changed on purpose;
// everything else (tools with their schemas, flows, policy, approvals) must
// be the quickstart's, so a fix to the quickstart cannot be forgotten there.
func TestDeployConfigsAgreeWithQuickstart(t *testing.T) {
	t.Parallel()
	quick := yamlMap(t, Quickstart)
	for file, own := range map[string][]string{
		// server.listen: 0.0.0.0 inside a container.
		"../deploy/docker/opsgate.yaml": {"server.listen"},
		// Postgres, a public URL and a token from the environment.
		"../deploy/compose/opsgate.yaml": {"server.listen", "server.public_url", "store", "api"},
	} {
		t.Run(filepath.Base(filepath.Dir(file)), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			got, want := yamlMap(t, data), yamlMap(t, Quickstart)
			for _, k := range own {
				drop(got, k)
				drop(want, k)
			}
			for k := range union(got, want) {
				if !reflect.DeepEqual(got[k], want[k]) {
					t.Errorf("%s: %s differs from configs/quickstart.yaml:\n got: %v\nwant: %v", file, k, got[k], want[k])
				}
			}
		})
	}
	if len(quick) == 0 {
		t.Fatal("quickstart parsed empty")
	}
}

// TestDriftIsCaught: the comparison above notices the kind of drift that
// happened before (a schema losing additionalProperties).
func TestDriftIsCaught(t *testing.T) {
	t.Parallel()
	a := yamlMap(t, Quickstart)
	b := yamlMap(t, Quickstart)
	tools := b["tools"].([]any)
	delete(tools[1].(map[string]any)["input_schema"].(map[string]any), "additionalProperties")
	if reflect.DeepEqual(a["tools"], b["tools"]) {
		t.Fatal("a schema without additionalProperties compares equal")
	}
}

func yamlMap(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// drop deletes a top-level key or a second-level "a.b" key.
func drop(m map[string]any, key string) {
	for i := 0; i < len(key); i++ {
		if key[i] == '.' {
			if sub, ok := m[key[:i]].(map[string]any); ok {
				delete(sub, key[i+1:])
			}
			return
		}
	}
	delete(m, key)
}

func union(a, b map[string]any) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}
