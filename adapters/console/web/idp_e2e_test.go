package web

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserIDPSignIn signs in through the identity provider in
// Chromium, with the provider on another site (localhost) than the
// console (127.0.0.1): the attempt cookie must survive the provider's
// cross-site redirect back (SameSite=Lax), and the strict session cookie
// must reach the first page after it (the continue page's same-site
// navigation). Then the console is live as the person the provider named.
func TestBrowserIDPSignIn(t *testing.T) {
	ib := setupIDP(t, idpOpts{host: "localhost"})
	ctx := browser(t)
	step(t, ctx, "open approvals without a session", chromedp.Navigate(ib.url+"/approvals"),
		poll(`location.pathname === "/signin" && document.getElementById("idp-signin") !== null`))
	step(t, ctx, "go to the identity provider",
		chromedp.Evaluate[chromedp.Void](`document.getElementById("idp-signin").click()`),
		poll(js(`location.origin === %s && document.getElementById("username") !== null`, q(ib.idp.Issuer))))
	step(t, ctx, "sign in there",
		chromedp.Evaluate[chromedp.Void](`document.getElementById("username").value = "carol"; document.getElementById("password").value = "pw-carol"; document.getElementById("submit").click()`),
		poll(js(`location.origin === %s && location.pathname === "/approvals" && document.body.dataset.live === "on"`, q(ib.url))))
	if got := eval[string](t, ctx, `document.querySelector("header.top strong").textContent`); got != "console:carol@example.com" {
		t.Fatalf("signed in as %q, want console:carol@example.com", got)
	}
	screenshot(t, ctx, "idp-signed-in.png")
}
