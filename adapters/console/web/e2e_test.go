package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

const chromiumPath = "/usr/bin/chromium"

// artifactDir is where the screenshots go. The committed ones under
// artifacts/console/ (docs/console.md names them: desktop and phone for each
// page, so a change to the console shows in review) are rewritten only with
// OPSGATE_UPDATE_SCREENSHOTS=1, so an ordinary test run leaves the work tree
// clean; otherwise they go to a directory under the system's temp dir, named
// in the test log.
func artifactDir(t *testing.T) string {
	t.Helper()
	var dir string
	if os.Getenv("OPSGATE_UPDATE_SCREENSHOTS") == "1" {
		abs, err := filepath.Abs(filepath.Join("..", "..", "..", "artifacts", "console"))
		if err != nil {
			t.Fatal(err)
		}
		dir = abs
	} else {
		dir = filepath.Join(os.TempDir(), "opsgate-console-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s (OPSGATE_UPDATE_SCREENSHOTS=1 writes artifacts/console/)", dir)
	return dir
}

// browser starts headless Chromium with a fresh profile. In CI a missing
// Chromium fails the test; elsewhere it skips, loudly.
func browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but %s is missing: install it (apt-get install -y chromium)", chromiumPath)
		}
		t.Log("!!!!!!!! SKIPPING the browser end-to-end test: " + chromiumPath + " is missing (apt-get install -y chromium) !!!!!!!!")
		t.Skip(chromiumPath + " is missing")
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
	)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first Run starts the browser; it must not carry a timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// step runs browser actions with a bound, failing the test with what it
// was doing.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		loc, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("location.href + '\\n' + document.body.innerText.slice(0, 2000)"))
		t.Fatalf("%s: %v\npage: %s", what, err, loc)
	}
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// poll waits until the JavaScript predicate is true on the current page.
// It re-evaluates across navigations (a form submit replaces the page the
// predicate ran in), so it can follow a click that navigates.
func poll(js string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		deadline := time.Now().Add(2 * time.Minute) // a hang backstop
		var last error
		for time.Now().Before(deadline) {
			ok, err := chromedp.Evaluate[bool]("!!("+js+")")(ctx, tg)
			if err == nil && ok {
				return nil
			}
			last = err
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
		return fmt.Errorf("timed out waiting for %s (last error: %v)", js, last)
	})
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(artifactDir(t), name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", p, len(png))
}

func js(s string, args ...any) string { return fmt.Sprintf(s, args...) }

// q quotes a Go string as a JavaScript string literal.
func q(s string) string { return fmt.Sprintf("%q", s) }

func TestBrowserEndToEnd(t *testing.T) {
	// A slow dry run makes the card arrive after the chat page has loaded,
	// so seeing it proves the live update, not the initial render.
	b := setup(t, setupOpts{previewDelay: 1500 * time.Millisecond, selfApproval: true})
	ctx := browser(t)

	// No session: redirected to sign-in, then sign in by keyboard.
	step(t, ctx, "open approvals without a session", chromedp.Navigate(b.url+"/approvals"),
		poll(`location.pathname === "/signin" && location.search === "?next=%2Fapprovals"`))
	step(t, ctx, "sign in by keyboard",
		chromedp.Evaluate[chromedp.Void](`document.getElementById("token").focus()`),
		chromedp.KeyEvent(adminToken), chromedp.KeyEvent("\r"),
		poll(`location.pathname === "/approvals" && document.body.dataset.live === "on"`),
		chromedp.Evaluate[chromedp.Void](`window.__marker = "approvals-tab"`))

	// Send the message from the chat in a second tab (same browser, same session).
	chat, cancelChat := chromedp.NewContext(ctx)
	defer cancelChat()
	// The tab lives as long as the context of its first Run: no timeout here.
	if err := chromedp.Do(chat); err != nil {
		t.Fatalf("open a second tab: %v", err)
	}
	step(t, chat, "send deploy api 1.2.3", chromedp.Navigate(b.url+"/chat?thread=e2e"),
		poll(`document.body.dataset.live === "on"`),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("text").value = "deploy api 1.2.3"; document.getElementById("send").click()`),
		poll(`location.search.includes("sent=") && document.readyState === "complete" && document.body.dataset.live === "on"`))
	if eval[bool](t, chat, `document.querySelector("#messages .card") !== null`) {
		t.Fatal("the card was already there when the chat page loaded; the live update is not tested")
	}
	step(t, chat, "card appears in the chat without a reload",
		chromedp.Evaluate[chromedp.Void](`window.__marker = "chat"`),
		poll(`document.querySelector("#messages .card [data-field=status]") !== null && window.__marker === "chat"`))
	if got := eval[string](t, chat, `document.querySelector("#messages .msg-user .body").textContent`); got != "deploy api 1.2.3" {
		t.Fatalf("user message %q", got)
	}
	run, a := b.waitPending(t, "console:e2e")

	step(t, ctx, "card appears in the approvals queue without a reload",
		poll(js(`document.getElementById(%s) !== null && window.__marker === "approvals-tab"`, q("card-"+a.ID))))
	card := eval[string](t, ctx, js(`document.getElementById(%s).innerText`, q("card-"+a.ID)))
	for _, want := range []string{"deploy", "high_impact", "destructive", `"version": "1.2.3"`, "deploy api 1.2.3",
		"would deploy (dry run)", "console:admin in console:e2e", "group:sre", "0 of 1", "expires in", "Approve", "Reject", "Edit arguments"} {
		if !strings.Contains(card, want) {
			t.Errorf("card lacks %q:\n%s", want, card)
		}
	}
	screenshot(t, ctx, "approvals-live.png")

	// Phone-sized screen: nothing overflows sideways.
	step(t, ctx, "phone viewport", chromedp.EmulateViewport(390, 844),
		poll(`document.documentElement.scrollWidth <= 392`))
	screenshot(t, ctx, "approvals-live-phone.png")
	step(t, ctx, "desktop viewport", chromedp.EmulateViewport(1280, 1000))

	// An invalid edit shows the validator's message next to the field.
	sel := func(s string) string {
		return js(`document.getElementById(%s).querySelector(%s)`, q("card-"+a.ID), q(s))
	}
	step(t, ctx, "invalid edit",
		chromedp.Evaluate[chromedp.Void](sel("details.edit")+`.open = true`),
		chromedp.Evaluate[chromedp.Void](sel(`input[data-arg="service"]`)+`.value = "Bad Name!"`),
		chromedp.Evaluate[chromedp.Void](sel(`button[data-action="edit"]`)+`.click()`),
		poll(`document.querySelector('[data-field-error="service"]') !== null`))
	msg := eval[string](t, ctx, `document.querySelector('[data-field-error="service"]').textContent`)
	if !strings.Contains(msg, "does not match pattern") || !eval[bool](t, ctx, `document.querySelector('input[data-arg="service"]').getAttribute("aria-invalid") === "true"`) {
		t.Fatalf("validator message next to service: %q", msg)
	}
	// A valid edit approves with the new arguments.
	step(t, ctx, "valid edit",
		chromedp.Evaluate[chromedp.Void](`document.querySelector('input[data-arg="service"]').value = "api"`),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('input[data-arg="version"]').value = "1.2.4"`),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('button[data-action="edit"]').click()`),
		poll(`location.search.includes("done=edit")`))
	b.waitRun(t, run.ID, core.RunSucceeded)

	// The run timeline shows the executed arguments and success.
	step(t, ctx, "run timeline", chromedp.Navigate(b.url+"/runs/"+run.ID),
		poll(`document.getElementById("final-status").textContent === "succeeded"`))
	diff := eval[string](t, ctx, `document.querySelector('[data-field="edit-diff"]').innerText`)
	if !strings.Contains(diff, `+ version: "1.2.4"`) || !strings.Contains(diff, `- version: "1.2.3"`) {
		t.Fatalf("edit diff %s", diff)
	}
	if out := eval[string](t, ctx, `document.querySelector('[data-field="output"]').textContent`); out != "deployed api 1.2.4 to staging" {
		t.Fatalf("output %q", out)
	}
	screenshot(t, ctx, "run-timeline.png")

	// A decision made elsewhere (here: Slack, through the engine) shows live.
	runID2 := b.send(t, "e2e-live", "deploy web 2.0.0")
	_, a2 := b.waitPending(t, "console:e2e-live")
	step(t, ctx, "open the second approval", chromedp.Navigate(b.url+"/approvals/"+a2.ID),
		poll(`document.body.dataset.live === "on"`), chromedp.Evaluate[chromedp.Void](`window.__marker = "approval-page"`))
	if _, err := b.eng.Decide(context.Background(), core.Actor{ID: "slack:U1"}, "slack", core.Decision{ApprovalID: a2.ID, Action: "approve"}); err != nil {
		t.Fatal(err)
	}
	step(t, ctx, "decision appears live", poll(js(`(() => { const c = document.getElementById(%s);
		return c && c.querySelector("[data-field=status]").textContent === "approved" && c.innerText.includes("slack:U1") &&
			c.querySelector("table.decisions").innerText.includes("slack") && window.__marker === "approval-page"; })()`, q("card-"+a2.ID))))
	b.waitRun(t, runID2, core.RunSucceeded)

	// Tool output with <script> and <img onerror> is shown as text.
	step(t, chat, "xss output", chromedp.Navigate(b.url+"/chat?thread=xss"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("text").value = "xss"; document.getElementById("send").click()`),
		poll(js(`document.getElementById("messages").textContent.includes(%s)`, q(xssOutput))))
	if !eval[bool](t, chat, `window.__xss === undefined && document.querySelectorAll("#messages img, #messages script").length === 0`) {
		t.Fatal("tool output was rendered as HTML in the chat")
	}
	runs, _, err := b.store.RunList(context.Background(), core.RunListParams{Thread: "console:xss", Limit: 1})
	if err != nil || len(runs) != 1 {
		t.Fatalf("xss run: %v %v", runs, err)
	}
	step(t, chat, "xss timeline", chromedp.Navigate(b.url+"/runs/"+runs[0].ID),
		poll(js(`document.querySelector('[data-field="output"]').textContent === %s`, q(xssOutput))))
	if !eval[bool](t, chat, `window.__xss === undefined && document.querySelectorAll("main img, main script").length === 0`) {
		t.Fatal("tool output was rendered as HTML in the timeline")
	}

	// A cross-site POST is refused and changes nothing.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s/chat">
<input name="thread" value="evil"><input name="text" value="deploy api 6.6.6"><input name="_csrf" value="guess"></form>
<script>document.getElementById("f").submit()</script>`, b.url)
	}))
	defer evil.Close()
	eu, _ := url.Parse(evil.URL)
	step(t, chat, "cross-site POST", chromedp.Navigate("http://localhost:"+eu.Port()+"/"),
		poll(`location.pathname === "/chat" && document.body.innerText.includes("cross-site request refused")`))
	if runs, _, err := b.store.RunList(context.Background(), core.RunListParams{Thread: "console:evil"}); err != nil || len(runs) != 0 {
		t.Fatalf("the cross-site POST started %d runs (%v)", len(runs), err)
	}

	// Signed out (cookies gone): every page sends the browser to sign-in.
	// The tab leaves its live page first: a live page that refreshes after
	// the cookies are gone goes to sign-in by itself (next=its own path),
	// and that navigation could land after the one this step makes.
	step(t, ctx, "no session", chromedp.Navigate("about:blank"),
		chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Call(ctx, network.ClearBrowserCookies, cdp.Empty{})
			return err
		}),
		chromedp.Navigate(b.url+"/runs/"+run.ID),
		poll(js(`location.pathname === "/signin" && new URLSearchParams(location.search).get("next") === %s`, q("/runs/"+run.ID))))

	if cur, err := b.store.ApprovalGet(context.Background(), a.ID); err != nil || cur.Status != approvals.StatusEdited {
		t.Fatalf("first approval ended %v (%v)", cur, err)
	}
}
