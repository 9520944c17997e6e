package main

import (
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Docker does not run on every machine that runs the tests, so the image is
// checked by parts: the build command of deploy/Dockerfile is run as it is
// (outside docker) and its binary must be static and stamped; the file's
// runtime stage must keep its promises; .goreleaser.yaml must stamp the
// same variables main.go declares.

// dockerfileInstructions returns the Dockerfile's instructions, continuation
// lines joined, comments dropped.
func dockerfileInstructions(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	cur := ""
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		cur += strings.TrimSpace(strings.TrimSuffix(line, "\\")) + " "
		if !strings.HasSuffix(line, "\\") {
			if s := strings.TrimSpace(cur); s != "" {
				out = append(out, s)
			}
			cur = ""
		}
	}
	return out
}

func TestDockerfileBuildCommandMakesAStampedStaticBinary(t *testing.T) {
	t.Parallel()
	var build string
	for _, ins := range dockerfileInstructions(t) {
		if strings.HasPrefix(ins, "RUN ") && strings.Contains(ins, "go build") {
			build = ins
		}
	}
	if build == "" {
		t.Fatal("no RUN … go build in deploy/Dockerfile")
	}
	// Drop RUN's own options (--mount=…) and what follows the build.
	cmd := strings.TrimPrefix(build, "RUN ")
	for strings.HasPrefix(cmd, "--") {
		_, cmd, _ = strings.Cut(cmd, " ")
	}
	cmd, _, _ = strings.Cut(cmd, " && ")
	out := filepath.Join(t.TempDir(), "opsgate")
	if !strings.Contains(cmd, "-o /out/opsgate ") {
		t.Fatalf("the build does not write /out/opsgate: %s", cmd)
	}
	cmd = strings.Replace(cmd, "-o /out/opsgate ", "-o "+out+" ", 1)
	sh := exec.Command("sh", "-c", cmd)
	sh.Dir = filepath.Join("..", "..")
	sh.Env = append(os.Environ(), "TARGETOS="+runtime.GOOS, "TARGETARCH="+runtime.GOARCH,
		"VERSION=v9.8.7", "COMMIT=0123456789abcdef", "DATE=2026-12-01T10:20:30Z")
	if b, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, b)
	}
	v, err := exec.Command(out, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("version: %v\n%s", err, v)
	}
	for _, want := range []string{"opsgate v9.8.7\n", "commit: 0123456789abcdef\n", "built:  2026-12-01T10:20:30Z\n"} {
		if !strings.Contains(string(v), want) {
			t.Errorf("version lacks %q:\n%s", want, v)
		}
	}
	bi, err := buildinfo.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
		t.Errorf("binary is not static and trimmed: %v", settings)
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > releaseBudget {
		t.Errorf("the release binary is %.1f MiB, over its %d MiB budget: see which packages grew with go tool nm -size -sort size (README \"Install\")",
			float64(fi.Size())/(1<<20), releaseBudget>>20)
	}
}

// releaseBudget bounds the size of the binary deploy/Dockerfile builds
// (74 MiB on linux/amd64 with Go 1.26.8: README "Install" says what it is
// made of), so growth is a decision, not a drift.
const releaseBudget = 80 << 20

func TestDockerfileRuntimeStage(t *testing.T) {
	t.Parallel()
	ins := dockerfileInstructions(t)
	last := 0
	for i, s := range ins {
		if strings.HasPrefix(s, "FROM ") {
			last = i
		}
	}
	runtimeStage := ins[last:]
	joined := strings.Join(runtimeStage, "\n")
	for _, re := range []string{
		`(?m)^FROM alpine:\d+\.\d+$`,                         // minimal base, pinned minor
		`(?m)^USER 10001:10001$`,                             // non-root, numeric (runAsNonRoot can check it)
		`(?m)^HEALTHCHECK .* CMD \["opsgate", "healthcheck"`, // no curl needed
		`(?m)^ARG VERSION=dev$`,
		`org\.opencontainers\.image\.version="\$\{VERSION\}"`,
		`(?m)^ENTRYPOINT \["opsgate"\]$`,
	} {
		if !regexp.MustCompile(re).MatchString(joined) {
			t.Errorf("runtime stage lacks %s:\n%s", re, joined)
		}
	}
	// Every COPY from the build context names a file that exists.
	for _, s := range runtimeStage {
		f := strings.Fields(s)
		if f[0] != "COPY" || strings.HasPrefix(f[1], "--from") {
			continue
		}
		if _, err := os.Stat(filepath.Join("..", "..", f[1])); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	if strings.Contains(joined, "configs/") && strings.Contains(joined, "COPY configs") {
		t.Error("the image copies configs/: the demo scripts are embedded in the binary")
	}
}

func TestGoreleaserStampsWhatMainDeclares(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Builds []struct {
			Main    string   `yaml:"main"`
			Env     []string `yaml:"env"`
			Goos    []string `yaml:"goos"`
			Goarch  []string `yaml:"goarch"`
			Ldflags []string `yaml:"ldflags"`
		} `yaml:"builds"`
		Checksum map[string]any   `yaml:"checksum"`
		SBOMs    []map[string]any `yaml:"sboms"`
		Dockers  []struct {
			Dockerfile string            `yaml:"dockerfile"`
			Platforms  []string          `yaml:"platforms"`
			BuildArgs  map[string]string `yaml:"build_args"`
			ExtraFiles []string          `yaml:"extra_files"`
		} `yaml:"dockers_v2"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Builds) != 1 || len(cfg.Dockers) != 1 || len(cfg.SBOMs) == 0 || cfg.Checksum == nil {
		t.Fatalf("want one build, one image, checksums and SBOMs: %+v", cfg)
	}
	bd := cfg.Builds[0]
	ld := strings.Join(bd.Ldflags, " ")
	for _, v := range []string{"main.version=", "main.commit=", "main.date="} {
		if !strings.Contains(ld, "-X "+v) {
			t.Errorf("ldflags %q do not set %s", ld, v)
		}
	}
	if bd.Main != "./cmd/opsgate" || strings.Join(bd.Env, ",") != "CGO_ENABLED=0" ||
		strings.Join(bd.Goos, ",") != "linux,darwin" || strings.Join(bd.Goarch, ",") != "amd64,arm64" {
		t.Errorf("build %+v", bd)
	}
	d := cfg.Dockers[0]
	if d.Dockerfile != "deploy/Dockerfile" || d.BuildArgs["VERSION"] == "" || d.BuildArgs["COMMIT"] == "" || d.BuildArgs["DATE"] == "" {
		t.Errorf("image %+v", d)
	}
	// The image's build context must hold every top-level source folder.
	ents, err := os.ReadDir(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	extra := strings.Join(d.ExtraFiles, " ") + " "
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") || e.Name() == "deploy" || e.Name() == "docs" || e.Name() == "artifacts" ||
			e.Name() == "data" || e.Name() == "dist" || e.Name() == "testdata" || e.Name() == "node_modules" ||
			e.Name() == "clients" { // clients/js: the Agent API's JavaScript client, not part of the binary
			continue
		}
		if !strings.Contains(extra, e.Name()+" ") {
			t.Errorf("dockers_v2.extra_files lacks %s/, which the image build compiles", e.Name())
		}
	}
}
