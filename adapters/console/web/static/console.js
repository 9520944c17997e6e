// opsgate console: live updates, expiry countdowns, relative times and
// keyboard shortcuts on an approval.
//
// Rules this file keeps (docs/console.md):
//  - It never builds HTML from strings. Live updates re-read the page the
//    server renders (html/template escapes every value), parse it with
//    DOMParser (scripts in a parsed document never run) and move those
//    nodes into place; the only text it writes itself goes through
//    textContent.
//  - It never changes state: every change is a form the person submits.
"use strict";

(function () {
  const body = document.body;
  const refreshURL = body.dataset.refresh || "";
  const liveState = document.getElementById("live-state");

  // --- countdowns ---------------------------------------------------------
  function fmt(ms) {
    const s = Math.max(0, Math.floor(ms / 1000));
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
    if (h > 0) return h + "h " + String(m).padStart(2, "0") + "m";
    return m + "m " + String(sec).padStart(2, "0") + "s";
  }
  function tick() {
    for (const el of document.querySelectorAll("time[data-countdown]")) {
      const at = Date.parse(el.getAttribute("datetime"));
      if (isNaN(at)) continue;
      const left = at - Date.now();
      el.textContent = left > 0 ? "expires in " + fmt(left) : "expired";
      el.classList.toggle("soon", left > 0 && left < 5 * 60 * 1000);
    }
  }
  // --- relative times ("3 min ago"); the absolute one is the title ------
  function rel(ms) {
    const future = ms < 0, d = Math.abs(ms) / 1000;
    let s;
    if (d < 45) return "just now";
    if (d < 90 * 60) s = Math.max(1, Math.round(d / 60)) + " min";
    else if (d < 36 * 3600) s = Math.round(d / 3600) + " h";
    else s = Math.round(d / 86400) + " d";
    return future ? "in " + s : s + " ago";
  }
  function relTimes() {
    for (const el of document.querySelectorAll("time[data-rel]")) {
      const at = Date.parse(el.getAttribute("datetime"));
      if (!isNaN(at)) el.textContent = rel(Date.now() - at);
    }
  }
  // Bars: each segment's share of the row (set through the CSSOM, which
  // the CSP allows; without script the segments are equal).
  function bars() {
    for (const seg of document.querySelectorAll(".bar .seg[data-count]")) {
      seg.style.flexGrow = String(Number(seg.dataset.count) || 0);
    }
  }
  function decorate() { tick(); relTimes(); bars(); }
  decorate();
  setInterval(tick, 1000);
  setInterval(relTimes, 30000);

  // --- keyboard shortcuts on an approval ------------------------------------
  // a: focus Approve (Enter then approves: one key never decides), r: open
  // Reject with the feedback box focused, e: open Edit with the first
  // argument focused, Esc: close both. Keys typed into a field are text.
  const shortcutArea = document.querySelector("[data-shortcuts]");
  if (shortcutArea) {
    document.addEventListener("keydown", (e) => {
      if (e.ctrlKey || e.metaKey || e.altKey) return;
      const t = e.target;
      if (t && /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName)) {
        if (e.key === "Escape") t.blur();
        return;
      }
      const card = shortcutArea.querySelector("article.card");
      if (!card) return;
      const open = (sel, focus) => {
        const d = card.querySelector(sel);
        if (!d) return;
        for (const other of card.querySelectorAll("details.reject, details.edit")) if (other !== d) other.open = false;
        d.open = true;
        for (const sel of focus) {
          const f = d.querySelector(sel);
          if (f) { f.focus(); break; }
        }
        e.preventDefault();
      };
      switch (e.key) {
        case "a": {
          const b = card.querySelector('button[data-action="approve"]');
          if (b) { b.focus(); b.classList.add("armed"); e.preventDefault(); }
          break;
        }
        case "r": open("details.reject", ["textarea"]); break;
        case "e": open("details.edit", ["input[data-arg]", "input:not([type=hidden])"]); break;
        case "Escape":
          for (const d of card.querySelectorAll("details.reject, details.edit")) d.open = false;
          for (const b of card.querySelectorAll("button.armed")) { b.classList.remove("armed"); b.blur(); }
          break;
      }
    });
    document.addEventListener("focusout", (e) => {
      if (e.target && e.target.classList) e.target.classList.remove("armed");
    });
  }

  // --- forms: remember which ones hold unsent input -----------------------
  document.addEventListener("input", (e) => {
    const f = e.target.closest && e.target.closest("form");
    if (f) f.dataset.dirty = "1";
  });
  document.addEventListener("toggle", (e) => {
    if (e.target.tagName === "DETAILS" && e.target.open) e.target.dataset.dirty = "1";
  }, true);

  function busy(el) {
    const a = document.activeElement;
    if (a && a !== document.body && el.contains(a) && /^(INPUT|TEXTAREA|SELECT)$/.test(a.tagName)) return true;
    return !!el.querySelector("form[data-dirty], details[data-dirty][open]");
  }

  // reconcile makes region cur look like next, keyed by child id: children
  // whose data-v is unchanged, or that hold unsent input, are kept as they
  // are (focus, open <details>, typed text survive).
  function reconcile(cur, next) {
    const want = Array.from(next.children);
    const ids = new Set(want.map((c) => c.id));
    for (const old of Array.from(cur.children)) {
      if (!ids.has(old.id) && !busy(old)) old.remove();
    }
    let prev = null;
    for (const n of want) {
      let old = null;
      for (const c of cur.children) if (c.id && c.id === n.id) { old = c; break; }
      let node = old;
      if (!old || (old.dataset.v !== n.dataset.v && !busy(old))) {
        node = document.importNode(n, true);
        if (old) old.replaceWith(node);
      }
      const here = prev ? prev.nextElementSibling : cur.firstElementChild;
      if (here !== node) {
        if (prev) prev.after(node); else cur.prepend(node);
      }
      prev = node;
    }
  }

  const regions = () => Array.from(document.querySelectorAll("[data-live]"));
  let inFlight = false, again = false;
  async function refresh() {
    if (!refreshURL || regions().length === 0) return;
    if (inFlight) { again = true; return; }
    inFlight = true;
    try {
      const res = await fetch(refreshURL, { credentials: "same-origin", headers: { "Accept": "text/html" } });
      if (res.redirected && new URL(res.url).pathname === "/signin") { location.assign(res.url); return; }
      if (!res.ok) return;
      const doc = new DOMParser().parseFromString(await res.text(), "text/html");
      const atBottom = nearBottom();
      for (const cur of regions()) {
        const next = doc.getElementById(cur.id);
        if (next) reconcile(cur, next);
      }
      decorate();
      if (atBottom) scrollChat();
      body.dataset.refreshed = String(Number(body.dataset.refreshed || "0") + 1);
    } catch (err) {
      // A failed refresh is retried on the next change or tick.
    } finally {
      inFlight = false;
      if (again) { again = false; refresh(); }
    }
  }

  // --- chat: keep the newest message in view ------------------------------
  const messages = document.getElementById("messages");
  function nearBottom() {
    return !messages || window.innerHeight + window.scrollY >= document.body.scrollHeight - 120;
  }
  function scrollChat() {
    if (messages && messages.lastElementChild) messages.lastElementChild.scrollIntoView({ block: "end" });
  }
  scrollChat();

  // --- the live feed ------------------------------------------------------
  if (refreshURL && regions().length > 0 && "EventSource" in window) {
    const es = new EventSource("/events");
    const state = (on) => {
      body.dataset.live = on ? "on" : "off";
      if (liveState) {
        liveState.classList.toggle("on", on);
        liveState.title = on ? "live updates on" : "live updates reconnecting";
      }
    };
    es.addEventListener("open", () => { state(true); refresh(); });
    es.addEventListener("error", () => state(false));
    es.addEventListener("change", refresh);
    es.addEventListener("tick", refresh);
  }
})();
