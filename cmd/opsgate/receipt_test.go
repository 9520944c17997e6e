package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals/receipt"
)

// docVerifiers are the verifiers of docs/receipts.md, taken from the page
// as it is: the Go one built once, the Node one run by node.
type docVerifiers struct {
	goBin, jsFile, node string
}

// buildDocVerifiers extracts the page's ```go and ```js blocks that start
// with "// verify.go" and "// verify.js".
func buildDocVerifiers(t *testing.T) docVerifiers {
	t.Helper()
	page, err := os.ReadFile("../../docs/receipts.md")
	if err != nil {
		t.Fatal(err)
	}
	block := func(lang, first string) string {
		m := regexp.MustCompile("(?s)```" + lang + "\n(// " + regexp.QuoteMeta(first) + ".*?)```").FindSubmatch(page)
		if m == nil {
			t.Fatalf("docs/receipts.md has no %s block starting with // %s", lang, first)
		}
		return string(m[1])
	}
	dir := t.TempDir()
	goSrc, jsSrc := filepath.Join(dir, "verify.go"), filepath.Join(dir, "verify.js")
	if err := os.WriteFile(goSrc, []byte(block("go", "verify.go")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jsSrc, []byte(block("js", "verify.js")), 0o644); err != nil {
		t.Fatal(err)
	}
	v := docVerifiers{goBin: filepath.Join(dir, "verify"), jsFile: jsSrc}
	build := exec.Command("go", "build", "-o", v.goBin, goSrc)
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("the Go verifier of docs/receipts.md does not build: %v\n%s", err, out)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node is not on PATH; CI installs it (.ci/run)")
		}
		fmt.Fprintf(os.Stderr, "SKIP %s: node is not on PATH\n", t.Name())
		t.Skip("node is not on PATH")
	}
	v.node = node
	return v
}

// run runs both verifiers on key, receipt and args (a JSON object) and
// returns whether each accepted, with their output.
func (v docVerifiers) run(t *testing.T, dir, keyFile, tok, args string) (goOK, jsOK bool, out string) {
	t.Helper()
	argsFile := filepath.Join(dir, fmt.Sprintf("args-%d.json", time.Now().UnixNano()))
	if err := os.WriteFile(argsFile, []byte(args), 0o644); err != nil {
		t.Fatal(err)
	}
	do := func(name string, args ...string) (bool, string) {
		var b bytes.Buffer
		cmd := exec.Command(name, args...)
		cmd.Stdout, cmd.Stderr = &b, &b
		err := cmd.Run()
		if _, exited := err.(*exec.ExitError); err != nil && !exited {
			t.Fatalf("run %s: %v", name, err)
		}
		return err == nil, b.String()
	}
	goOK, goOut := do(v.goBin, keyFile, tok, argsFile)
	jsOK, jsOut := do(v.node, v.jsFile, keyFile, tok, argsFile)
	return goOK, jsOK, "go: " + goOut + "node: " + jsOut
}

// TestReceiptVerifiedOffline: a decided call's tool gets the signed
// receipt (an exec tool in OPSGATE_RECEIPT, an http tool in the
// Opsgate-Receipt header); the API serves the same receipt and the public
// key; separate programs holding only that key — the Go and Node
// verifiers of docs/receipts.md and `opsgate receipt verify` — accept it
// for the arguments that ran and refuse it after one byte of them
// changes, and a rejection's receipt approves nothing. Both stores.
func TestReceiptVerifiedOffline(t *testing.T) {
	t.Parallel()
	v := buildDocVerifiers(t)
	backends(t, func(t *testing.T, pgDSN string) {
		e := newEnv(t)
		headers := make(chan string, 4)
		notify := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			headers <- r.Header.Get("Opsgate-Receipt")
			fmt.Fprintln(w, "notified")
		}))
		t.Cleanup(notify.Close)
		receiptLog := filepath.Join(e.dir, "receipts.log")
		deploy := e.script("deploy.sh", fmt.Sprintf(`
if [ "$1" = "--dry-run" ]; then echo "would deploy $2 $3"; exit 0; fi
printf '%%s\n' "${OPSGATE_RECEIPT:-none}" >> %q
echo "deployed $1 $2 to $3"
`, receiptLog))
		e.writeConfig(e.storeYAML(pgDSN), fmt.Sprintf(`
engine: {poll_interval: 100ms, lease: 2s}
approvers:
  groups:
    sre: ["console:admin"]
tools:
  - name: deploy
    risk: high_impact
    input_schema:
      type: object
      required: [service, version]
      properties:
        service: {type: string}
        version: {type: string}
        env: {type: string, default: staging}
    exec:
      command: [%q, "{{.service}}", "{{.version}}", "{{.env}}"]
      dry_run: [%q, "--dry-run", "{{.service}}", "{{.version}}"]
  - name: notify
    risk: external
    input_schema: {type: object, required: [text], properties: {text: {type: string}}}
    http: {method: POST, url: %q, body: "{{json .text}}"}
flows:
  - {name: deploy, command: "deploy {service} {version}", steps: [{tool: deploy, args: {service: "{{.service}}", version: "{{.version}}"}}]}
  - {name: notify, command: "notify {text}", steps: [{tool: notify, args: {text: "{{.text}}"}}]}
policy:
  rules:
    - {match: {tool: "*"}, action: ask, approvers: ["group:sre"], description: every call asks}
    - {match: {tool: deploy, args: {service: "a*", env: "prod*"}}, when: 'args.version.startsWith("9")', action: deny}
approvals: {allow_self_approval: true, receipt_ttl: 1h}
`, deploy, deploy, notify.URL+"/notify"))
		e.start()

		run := e.message("rc-1", "deploy api 1.2.3")
		id := pendingApproval(t, e, run.ID)
		if code := e.api("GET", "/api/v1/approvals/"+id+"/receipt", nil, nil); code != http.StatusConflict {
			t.Fatalf("receipt of a pending approval: HTTP %d, want 409", code)
		}
		e.mustCLI("approvals", "approve", id)
		e.waitStatus(run.ID, "succeeded")
		got, err := os.ReadFile(receiptLog)
		if err != nil {
			t.Fatal(err)
		}
		tok := strings.TrimSpace(string(got))
		if strings.Count(tok, ".") != 2 {
			t.Fatalf("the exec tool got %q, not a receipt", tok)
		}
		var served struct{ Receipt string }
		if code := e.api("GET", "/api/v1/approvals/"+id+"/receipt", nil, &served); code != 200 || served.Receipt != tok {
			t.Fatalf("GET receipt: HTTP %d, %q; want the receipt the tool got", code, served.Receipt)
		}
		if out := e.mustCLI("approvals", "receipt", id); strings.TrimSpace(out) != tok {
			t.Fatalf("approvals receipt printed %q", out)
		}
		var jwk json.RawMessage
		if code := e.api("GET", "/api/v1/receipts/key", nil, &jwk); code != 200 {
			t.Fatalf("GET key: HTTP %d", code)
		}
		keyFile := filepath.Join(e.dir, "receipt.jwk")
		if err := os.WriteFile(keyFile, jwk, 0o644); err != nil {
			t.Fatal(err)
		}

		// The arguments that ran (the schema's default included), and the
		// same with one byte changed.
		ran := `{"service":"api","version":"1.2.3","env":"staging"}`
		changed := `{"service":"api","version":"1.2.4","env":"staging"}`
		if goOK, jsOK, out := v.run(t, e.dir, keyFile, tok, ran); !goOK || !jsOK {
			t.Fatalf("the doc verifiers refused the receipt of the call that ran:\n%s", out)
		}
		if goOK, jsOK, out := v.run(t, e.dir, keyFile, tok, changed); goOK || jsOK {
			t.Fatalf("a verifier accepted the receipt after one byte of the arguments changed:\n%s", out)
		}
		forged := []byte(tok)
		forged[len(forged)/2] ^= 1
		if goOK, jsOK, out := v.run(t, e.dir, keyFile, string(forged), ran); goOK || jsOK {
			t.Fatalf("a verifier accepted a receipt with one byte flipped:\n%s", out)
		}

		// opsgate receipt verify: with the key file, with the server's key,
		// from stdin; refused with other arguments.
		if out := e.mustCLI("receipt", "verify", "--key", keyFile, "--args", ran, tok); !strings.Contains(out, "receipt   valid") || !strings.Contains(out, id) {
			t.Fatalf("receipt verify: %s", out)
		}
		e.mustCLI("receipt", "verify", tok)
		if _, errOut, code := e.cli("receipt", "verify", "--key", keyFile, "--args", changed, tok); code != 1 || !strings.Contains(errOut, "do not match the receipt's digest") {
			t.Fatalf("receipt verify with changed args: exit %d: %s", code, errOut)
		}
		stdin := exec.Command(binPath, "receipt", "verify", "--key", keyFile, "-")
		stdin.Stdin = strings.NewReader(tok + "\n")
		if out, err := stdin.CombinedOutput(); err != nil {
			t.Fatalf("receipt verify -: %v\n%s", err, out)
		}

		// The http tool gets its receipt in the header.
		run = e.message("rc-2", "notify hello")
		nid := pendingApproval(t, e, run.ID)
		e.mustCLI("approvals", "approve", nid)
		e.waitStatus(run.ID, "succeeded")
		h := <-headers
		c, err := receipt.Verify(h, mustKey(t, jwk), time.Now())
		if err != nil || c.ApprovalID != nid || c.Tool != "notify" || c.Check(map[string]any{"text": "hello"}) != nil {
			t.Fatalf("the http tool's Opsgate-Receipt: %+v, %v", c, err)
		}

		// A rejection's receipt verifies but approves nothing.
		run = e.message("rc-3", "deploy web 9.9.9")
		rid := pendingApproval(t, e, run.ID)
		e.mustCLI("approvals", "reject", rid, "--reason", "not today")
		e.waitStatus(run.ID, "rejected")
		var rej struct{ Receipt string }
		if code := e.api("GET", "/api/v1/approvals/"+rid+"/receipt", nil, &rej); code != 200 {
			t.Fatalf("receipt of a rejection: HTTP %d", code)
		}
		if _, errOut, code := e.cli("receipt", "verify", "--key", keyFile, rej.Receipt); code != 1 || !strings.Contains(errOut, "rejected") {
			t.Fatalf("receipt verify of a rejection: exit %d: %s", code, errOut)
		}
		if goOK, jsOK, out := v.run(t, e.dir, keyFile, rej.Receipt, `{"service":"web","version":"9.9.9","env":"staging"}`); goOK || jsOK {
			t.Fatalf("a verifier accepted a rejection:\n%s", out)
		}
		// opsgate policy show: the policy in force, rule by rule, its
		// argument patterns in order.
		out := e.mustCLI("policy", "show")
		words := strings.Join(strings.Fields(out), " ")
		for _, want := range []string{"2 rules", "0 ask tool * - group:sre 1 every call asks",
			"1 deny tool deploy env=prod* service=a* args.version.startsWith(\"9\") - 1", "default: "} {
			if !strings.Contains(words, want) {
				t.Fatalf("policy show lacks %q:\n%s", want, out)
			}
		}
		// The key file is the server's, mode 0600.
		if info, err := os.Stat(filepath.Join(e.dir, "data", "receipt.key")); err != nil || info.Mode().Perm() != 0o600 {
			t.Fatalf("receipt key file: %v, %v", info, err)
		}
		e.stop()
	})
}

func mustKey(t *testing.T, jwk []byte) ed25519.PublicKey {
	t.Helper()
	k, err := receipt.ParseKey(jwk)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
