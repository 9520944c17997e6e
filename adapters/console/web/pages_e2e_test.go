package web

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/schedule"
)

// TestBrowserEveryPage walks every page of the console in Chromium, on a
// desktop and a phone screen (nothing overflows sideways), saves both
// screenshots under artifacts/console/, and checks what the pages promise:
// the home page updates live, times read "… ago" with the absolute time on
// hover, the keyboard decides an approval, and dark mode follows the
// system setting.
func TestBrowserEveryPage(t *testing.T) {
	b := setup(t, setupOpts{selfApproval: true, schedules: []schedule.Schedule{{Name: "nightly-status-report", Cron: "0 3 * * mon-fri",
		Timezone: "America/Los_Angeles", Thread: "console:a-rather-long-thread-name-for-reports", Text: "xss", Overlap: schedule.OverlapQueue}}})
	ctx := browser(t)
	step(t, ctx, "sign in", chromedp.Navigate(b.url+"/"),
		poll(`location.pathname === "/signin"`),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("token").focus()`),
		chromedp.KeyEvent(adminToken), chromedp.KeyEvent("\r"),
		poll(`location.pathname === "/" && document.body.dataset.live === "on"`))

	// Some history: a run that succeeded, one approved on Slack, one waiting.
	b.waitRun(t, b.send(t, "pages-xss", "xss"), core.RunSucceeded)
	done := b.send(t, "pages-done", "deploy web 2.0.0")
	_, ad := b.waitPending(t, "console:pages-done")
	if _, err := b.eng.Decide(context.Background(), core.Actor{ID: "slack:U1"}, "slack", core.Decision{ApprovalID: ad.ID, Action: "edit",
		Args: map[string]any{"service": "web", "version": "2.0.1", "env": "staging"}}); err != nil {
		t.Fatal(err)
	}
	b.waitRun(t, done, core.RunSucceeded)

	// The home page counts the new pending approval without a reload.
	step(t, ctx, "home before", chromedp.Evaluate[chromedp.Void](`window.__marker = "home"`),
		poll(`document.querySelector('[data-field="pending-count"]').textContent === "0"`))
	waiting := b.send(t, "pages-wait", "deploy api 3.0.0")
	_, aw := b.waitPending(t, "console:pages-wait")
	step(t, ctx, "home counts it live", poll(`document.querySelector('[data-field="pending-count"]').textContent === "1" && window.__marker === "home"`))

	pages := []struct{ name, path, ready string }{
		{"home", "/", `document.getElementById("home-tiles") !== null`},
		{"chat", "/chat?thread=pages-wait", `document.querySelector("#messages .card") !== null`},
		{"approvals", "/approvals", `document.getElementById("card-` + aw.ID + `") !== null`},
		{"approval", "/approvals/" + aw.ID, `document.getElementById("shortcuts") !== null`},
		{"approvals-decided", "/approvals?status=decided", `document.getElementById("ad-` + ad.ID + `") !== null`},
		{"runs", "/runs", `document.querySelectorAll("#run-rows tr").length >= 3`},
		{"run", "/runs/" + done, `document.querySelector('[data-field="edit-diff"]') !== null && document.getElementById("final-status").textContent === "succeeded"`},
		{"audit", "/audit", `document.querySelectorAll("#audit-rows tr").length >= 2`},
		{"schedules", "/schedules", `document.getElementById("s-nightly-status-report") !== null`},
		{"deliveries", "/deliveries?status=sent", `document.querySelectorAll("#delivery-rows tr").length >= 1`},
		{"policy", "/policy", `document.getElementById("rule-1") !== null`},
	}
	for _, p := range pages {
		step(t, ctx, "open "+p.name, chromedp.EmulateViewport(1280, 1000), chromedp.Navigate(b.url+p.path),
			poll(`document.readyState === "complete" && (`+p.ready+`)`))
		screenshot(t, ctx, p.name+".png")
		step(t, ctx, p.name+" on a phone", chromedp.EmulateViewport(390, 844),
			poll(`document.documentElement.scrollWidth <= 392`))
		screenshot(t, ctx, p.name+"-phone.png")
	}
	step(t, ctx, "desktop", chromedp.EmulateViewport(1280, 1000))

	// Relative times, absolute on hover.
	step(t, ctx, "runs", chromedp.Navigate(b.url+"/runs"), poll(`document.querySelector("#run-rows time[data-rel]") !== null`))
	rel := eval[string](t, ctx, `document.querySelector("#run-rows time[data-rel]").textContent`)
	title := eval[string](t, ctx, `document.querySelector("#run-rows time[data-rel]").title`)
	if (rel != "just now" && !strings.HasSuffix(rel, " ago")) || !strings.HasSuffix(title, " UTC") {
		t.Errorf("relative time %q, title %q", rel, title)
	}
	// The run page shows the edit as a diff and the arguments once.
	step(t, ctx, "run page", chromedp.Navigate(b.url+"/runs/"+done), poll(`document.querySelector('[data-field="edit-diff"]') !== null`))
	diff := eval[string](t, ctx, `document.querySelector('[data-field="edit-diff"]').innerText`)
	if !strings.Contains(diff, `- version: "2.0.0"`) || !strings.Contains(diff, `+ version: "2.0.1"`) {
		t.Errorf("edit diff %q", diff)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('#timeline li.ev').length`); n < 6 {
		t.Errorf("timeline has %d events", n)
	}

	// Keyboard: e opens the editor, r the reject form, Esc leaves a field,
	// a arms Approve and Enter approves.
	step(t, ctx, "approval page", chromedp.Navigate(b.url+"/approvals/"+aw.ID),
		poll(`document.body.dataset.live === "on"`),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("main").focus()`), chromedp.KeyEvent("e"),
		poll(`document.querySelector("details.edit").open && document.activeElement.dataset.arg !== undefined`))
	step(t, ctx, "escape the field, then reject", chromedp.KeyEvent("\u001b"),
		poll(`!/^(INPUT|TEXTAREA)$/.test(document.activeElement.tagName)`), chromedp.KeyEvent("r"),
		poll(`document.querySelector("details.reject").open && !document.querySelector("details.edit").open && document.activeElement.tagName === "TEXTAREA"`))
	if cur, _ := b.store.ApprovalGet(context.Background(), aw.ID); cur.Status != approvals.StatusPending {
		t.Fatalf("a shortcut decided without Enter: %s", cur.Status)
	}
	step(t, ctx, "a then Enter approves", chromedp.KeyEvent("\u001b"), poll(`!/^(INPUT|TEXTAREA)$/.test(document.activeElement.tagName)`),
		chromedp.KeyEvent("a"), poll(`document.activeElement.dataset.action === "approve"`))
	if cur, _ := b.store.ApprovalGet(context.Background(), aw.ID); cur.Status != approvals.StatusPending {
		t.Fatalf("pressing a alone decided: %s", cur.Status)
	}
	step(t, ctx, "Enter", chromedp.KeyEvent("\r"), poll(`location.search.includes("done=approve")`))
	b.waitRun(t, waiting, core.RunSucceeded)

	// Dark mode follows prefers-color-scheme.
	step(t, ctx, "dark", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		return err
	}), chromedp.Navigate(b.url+"/"), poll(`document.getElementById("home-tiles") !== null`))
	bg := eval[string](t, ctx, `getComputedStyle(document.body).backgroundColor`)
	if bg != "rgb(18, 20, 23)" {
		t.Errorf("dark background %q", bg)
	}
	screenshot(t, ctx, "home-dark.png")
	step(t, ctx, "dark run", chromedp.Navigate(b.url+"/runs/"+done), poll(`document.getElementById("timeline") !== null`))
	screenshot(t, ctx, "run-dark.png")
}
