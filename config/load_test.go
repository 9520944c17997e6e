package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/configs"
	"github.com/opsgate/opsgate/core/router"
)

func TestQuickstart(t *testing.T) {
	t.Parallel()
	cfg, err := Loader{LookupEnv: envOf(nil)}.Default()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Store.Driver != "sqlite" || cfg.Store.DSN != "./data/opsgate.db" || cfg.Server.Listen != "127.0.0.1:8080" {
		t.Errorf("store/server = %+v %+v", cfg.Store, cfg.Server)
	}
	if !cfg.Channels.Console.Enabled || len(cfg.API.Tokens) != 0 {
		t.Errorf("console %v, tokens %v", cfg.Channels.Console.Enabled, cfg.API.Tokens)
	}
	deploy := cfg.Tool("deploy")
	if deploy == nil || deploy.Risk != RiskHighImpact || !deploy.Destructive || deploy.Exec.Timeout.D() != time.Minute ||
		len(deploy.Exec.DryRun) == 0 || deploy.Exec.DryRun[1] != "--dry-run" {
		t.Fatalf("deploy tool = %+v", deploy)
	}
	if err := deploy.Schema().Validate(map[string]any{"service": "api", "version": "1.2.3"}); err != nil {
		t.Errorf("schema rejects valid args: %v", err)
	}
	if err := deploy.Schema().Validate(map[string]any{"service": "API!"}); err == nil {
		t.Error("schema accepts invalid args")
	}
	if !cfg.Approvals.AllowSelfApproval || cfg.Approvals.TTL.D() != time.Hour {
		t.Errorf("approvals = %+v", cfg.Approvals)
	}
	r, err := cfg.Router()
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Route("deploy api 1.2.3")
	if err != nil || got.Flow != "deploy" || got.Args["env"] != "staging" {
		t.Errorf("Route = %+v, %v", got, err)
	}
	var nm *router.NoMatchError
	if _, err := r.Route("deploy"); !errors.As(err, &nm) || !strings.Contains(err.Error(), "usage: deploy <service> <version> [env=staging]") {
		t.Errorf("Route(deploy) err = %v", err)
	}
	if cfg.Flow("status").Pattern().Command() != "status" {
		t.Error("status flow pattern not kept")
	}
	// The demo scripts the quickstart points at are the embedded ones
	// (serve installs them under <data_dir>/demo), and they are executable
	// in the repository.
	for _, tool := range cfg.Tools {
		cmd := tool.Exec.Command[0]
		name, ok := strings.CutPrefix(cmd, "./data/demo/")
		if !ok {
			t.Errorf("tool %s: %s is not under ./data/demo/", tool.Name, cmd)
			continue
		}
		st, err := os.Stat(filepath.Join("..", "configs", "demo", name))
		if err != nil || st.Mode()&0o111 == 0 {
			t.Errorf("tool %s: configs/demo/%s not executable: %v", tool.Name, name, err)
		}
	}
}

// productionEnv sets every variable configs/production.yaml references.
var productionEnv = map[string]string{
	"OPSGATE_DATABASE_URL":    "postgres://opsgate:pw@127.0.0.1:5432/opsgate",
	"OPSGATE_ADMIN_TOKEN":     "admin-token",
	"OPSGATE_CI_TOKEN":        "ci-token",
	"OPSGATE_AGENT_TOKEN":     "agent-token",
	"OPSGATE_STUDIO_TOKEN":    "studio-token",
	"SLACK_BOT_TOKEN":         "xoxb-1",
	"SLACK_SIGNING_SECRET":    "sign",
	"TELEGRAM_BOT_TOKEN":      "123:abcdefghijklmnopqrstuvwxyz", // the shape @BotFather issues: serve refuses others
	"TELEGRAM_WEBHOOK_SECRET": "tgsecret",
	"DISCORD_BOT_TOKEN":       "dtoken",
	"DISCORD_PUBLIC_KEY":      strings.Repeat("0f", 32),
	"IMAP_PASSWORD":           "imap",
	"SMTP_PASSWORD":           "smtp",
	"MATRIX_ACCESS_TOKEN":     "syt_matrix_token",
	"EMAIL_TOKEN_KEY":         "0123456789abcdef-token-key",
	"OPENAI_API_KEY":          "sk-test",
	"ANTHROPIC_API_KEY":       "sk-ant-test",
	"ALERT_WEBHOOK_SECRET":    "alert",
	"CI_WEBHOOK_SECRET":       "ci",
	"STATUS_API_TOKEN":        "status",
	"GH_MCP":                  "gh-mcp-token",
	"OIDC_CLIENT_SECRET":      "oidc-secret",
	"SIEM_TOKEN":              "siem-token",
}

func TestProduction(t *testing.T) {
	t.Parallel()
	l := Loader{LookupEnv: envOf(productionEnv)}
	cfg, err := l.Load("../configs/production.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ch := cfg.Channels
	if cfg.Store.Driver != "postgres" || cfg.Store.DSN != productionEnv["OPSGATE_DATABASE_URL"] {
		t.Errorf("store = %+v", cfg.Store)
	}
	if !ch.Slack.Enabled || !ch.Telegram.Enabled || !ch.Discord.Enabled || !ch.Email.Enabled || len(ch.Webhooks) != 2 {
		t.Errorf("channels not all enabled: %+v", ch)
	}
	if !ch.Email.RequireDMARC || ch.Email.AuthservID != "mx.example.com" || ch.Email.IMAP.Mailbox != "INBOX" {
		t.Errorf("email = %+v", ch.Email)
	}
	if r := ch.Discord.RateLimits.Conversation; r.Rate.Events != 5 || r.Rate.Per != 5*time.Second || r.EffectiveBurst() != 5 {
		t.Errorf("discord conversation limit = %+v", r)
	}
	if g := ch.Telegram.RateLimits.Group; g.Rate.String() != "20/m" || g.EffectiveBurst() != 20 {
		t.Errorf("telegram group limit = %+v", g)
	}
	if ch.Slack.AppToken != "" || ch.Discord.GuildID != "" {
		t.Error("optional ${VAR:-} values not empty")
	}
	if h := cfg.Tool("service_status").HTTP; h.Headers["Authorization"] != "Bearer status" {
		t.Errorf("headers = %v", h.Headers)
	}
	if r := &cfg.Policy.Rules[3]; cfg.Tool("deploy").MaxOutput != 256<<10 || r.Quorum.Expr != `args.env == "prod-eu" ? 2 : 1` ||
		r.Condition() == nil || r.QuorumExpr() == nil {
		t.Error("max_output, the quorum expression or the condition not decoded and compiled")
	}
	if _, err := cfg.Router(); err != nil {
		t.Fatal(err)
	}
	// Without the environment every secret is reported, not just the first.
	_, err = Loader{LookupEnv: envOf(nil)}.Load("../configs/production.yaml")
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != len(productionEnv) {
		t.Errorf("without env: %d problems, want %d: %v", len(ce.Problems), len(productionEnv), err)
	}
}

type fakeInfo struct{ fs.FileInfo }

func TestResolve(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"flag.yaml":    "server: {listen: \"127.0.0.1:1001\"}\n",
		"env.yaml":     "server: {listen: \"127.0.0.1:1002\"}\n",
		"opsgate.yaml": "server: {listen: \"127.0.0.1:1003\"}\n",
	}
	loader := func(env map[string]string, withLocal bool) Loader {
		return Loader{
			LookupEnv: envOf(env),
			ReadFile: func(p string) ([]byte, error) {
				if s, ok := files[p]; ok && (p != DefaultFile || withLocal) {
					return []byte(s), nil
				}
				return nil, fs.ErrNotExist
			},
			Stat: func(p string) (fs.FileInfo, error) {
				if p == DefaultFile && withLocal {
					return fakeInfo{}, nil
				}
				return nil, fs.ErrNotExist
			},
		}
	}
	cases := map[string]struct {
		flag      string
		env       map[string]string
		local     bool
		wantPath  string
		wantPort  string
		wantError bool
	}{
		"FlagWins":        {flag: "flag.yaml", env: map[string]string{EnvConfig: "env.yaml"}, local: true, wantPath: "flag.yaml", wantPort: "1001"},
		"EnvBeforeLocal":  {env: map[string]string{EnvConfig: "env.yaml"}, local: true, wantPath: "env.yaml", wantPort: "1002"},
		"LocalFile":       {local: true, wantPath: "opsgate.yaml", wantPort: "1003"},
		"BuiltInDefaults": {wantPath: "", wantPort: "8080"},
		"EmptyEnvIgnored": {env: map[string]string{EnvConfig: ""}, wantPath: "", wantPort: "8080"},
		"MissingFlagFile": {flag: "nope.yaml", wantPath: "nope.yaml", wantError: true},
		"MissingEnvFile":  {env: map[string]string{EnvConfig: "nope.yaml"}, wantPath: "nope.yaml", wantError: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path, cfg, err := loader(tc.env, tc.local).Resolve(tc.flag)
			if path != tc.wantPath {
				t.Errorf("path = %q, want %q", path, tc.wantPath)
			}
			if tc.wantError {
				if err == nil || !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("err = %v, want not-exist", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(cfg.Server.Listen, ":"+tc.wantPort) {
				t.Errorf("listen = %q, want port %s", cfg.Server.Listen, tc.wantPort)
			}
		})
	}
	statErr := Loader{LookupEnv: envOf(nil), Stat: func(string) (fs.FileInfo, error) { return nil, fs.ErrPermission }}
	if _, _, err := statErr.Resolve(""); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("stat error not returned: %v", err)
	}
}

func TestLoadRealFile(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte("store: {driver: sqlite, dsn: x.db}\nextra: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Loader{LookupEnv: envOf(nil)}.Load(p)
	if err == nil || !strings.HasPrefix(err.Error(), p+":2: extra: unknown key") {
		t.Fatalf("err = %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(configs.Quickstart)
	f.Add([]byte(validTools))
	f.Add([]byte("server: {listen: \"${X:-a}:1\"}\n<<: {a: 1}\n"))
	f.Add([]byte("tools: [{name: t, risk: read, http: {url: 'http://x'}, input_schema: {type: object, $ref: '#/$defs/a', $defs: {a: {}}}}]"))
	f.Add([]byte("a: &a [*a]"))
	f.Add([]byte(validMCP))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Loader{LookupEnv: envOf(map[string]string{"X": "1"})}.Parse("fuzz.yaml", data)
		if err == nil {
			if cfg == nil {
				t.Fatal("nil config without error")
			}
			return
		}
		var ce *Error
		if !errors.As(err, &ce) || len(ce.Problems) == 0 {
			t.Fatalf("error %v is not a *Error with problems", err)
		}
	})
}
