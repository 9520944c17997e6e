package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestDeployFilesPinAndShip: the Kubernetes manifests run a release tag
// (or a digest), never :latest or an untagged image; the release archive
// carries the Grafana dashboard, the Kubernetes files and the systemd
// unit; the unit names the config to start from, which the archive holds.
func TestDeployFilesPinAndShip(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	image := regexp.MustCompile(`(?m)^\s*image:\s*(\S+)`)
	pinned := regexp.MustCompile(`^[^:@\s]+(:v\d+\.\d+\.\d+|@sha256:[0-9a-f]{64})$`)
	manifests, err := filepath.Glob(filepath.Join(root, "deploy", "k8s", "*.yaml"))
	if err != nil || len(manifests) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	images := 0
	for _, m := range manifests {
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range image.FindAllStringSubmatch(string(b), -1) {
			images++
			if !pinned.MatchString(g[1]) {
				t.Errorf("%s: image %q is not pinned to a release tag or a digest", filepath.Base(m), g[1])
			}
		}
	}
	if images == 0 {
		t.Fatal("no image in deploy/k8s")
	}

	b, err := os.ReadFile(filepath.Join(root, ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Archives []struct {
			Files []string `yaml:"files"`
		} `yaml:"archives"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil || len(cfg.Archives) != 1 {
		t.Fatalf("archives: %v %+v", err, cfg)
	}
	ships := func(path string) bool {
		for _, glob := range cfg.Archives[0].Files {
			if ok, _ := filepath.Match(glob, path); ok {
				return true
			}
		}
		return false
	}
	for _, want := range []string{"deploy/grafana/opsgate-dashboard.json", "deploy/grafana/README.md", "deploy/k8s/deployment.yaml",
		"deploy/k8s/kustomization.yaml", "deploy/k8s/secret.example.yaml", "deploy/systemd/opsgate.service", "configs/production.yaml"} {
		if _, err := os.Stat(filepath.Join(root, want)); err != nil {
			t.Errorf("%s: %v", want, err)
		}
		if !ships(want) {
			t.Errorf("the release archive does not carry %s", want)
		}
	}

	unit, err := os.ReadFile(filepath.Join(root, "deploy", "systemd", "opsgate.service"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "install -m 0644 configs/production.yaml /etc/opsgate/opsgate.yaml") {
		t.Error("the systemd unit's install steps do not name the config to start from (configs/production.yaml)")
	}
}
