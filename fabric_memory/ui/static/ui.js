// fabric-memory ui: the little the pages need beyond HTML. Vendored, no dependencies,
// talks only to the server that sent it.
"use strict";

function sessionPath(handle) {
  return handle.split("/").map(encodeURIComponent).join("/");
}

function copyText(text, button) {
  const done = () => { button.textContent = "copied"; setTimeout(() => { button.textContent = "copy expand"; }, 1500); };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(text).then(done, () => fallbackCopy(text, done));
  } else {
    fallbackCopy(text, done);
  }
}

function fallbackCopy(text, done) {
  const area = document.createElement("textarea");
  area.value = text;
  document.body.appendChild(area);
  area.select();
  document.execCommand("copy");
  area.remove();
  done();
}

function wire(root) {
  root.querySelectorAll("button.copy").forEach((button) => {
    button.addEventListener("click", () => copyText(button.dataset.copy, button));
  });
  root.querySelectorAll("details.raw").forEach((details) => {
    details.addEventListener("toggle", () => {
      if (!details.open || details.dataset.loaded) return;
      details.dataset.loaded = "yes";
      const pre = details.querySelector("pre");
      fetch(details.dataset.src, { credentials: "same-origin" })
        .then((r) => r.text().then((t) => { pre.textContent = r.ok ? t : "could not read: " + t; }))
        .catch(() => { pre.textContent = "could not read the line"; });
    });
  });
}

function land() {
  const address = decodeURIComponent(location.hash.slice(1));
  if (!address) return;
  const found = document.getElementById(address);
  // An entry's own id (what a recall hit names) is an anchor inside its element.
  const target = found && found.classList.contains("alias") ? found.parentElement : found;
  if (target) {
    document.querySelectorAll(".target").forEach((el) => el.classList.remove("target"));
    target.classList.add("target");
    target.scrollIntoView({ block: "center" });
    return;
  }
  const body = document.body;
  if (body.dataset.page === "session" && !new URLSearchParams(location.search).has("at")) {
    // The address is on another page of the timeline: ask for the page that holds it.
    location.replace("/session/" + sessionPath(body.dataset.handle) + "?at=" +
                     encodeURIComponent(address) + location.hash);
  }
}

function followSession() {
  const body = document.body;
  let after = Number(body.dataset.entries);
  const source = new EventSource("/live/" + sessionPath(body.dataset.handle) + "?after=" + after);
  source.addEventListener("entries", (event) => {
    const holder = document.createElement("div");
    holder.innerHTML = event.data;
    const added = holder.querySelectorAll("article.entry").length;
    after += added;
    body.dataset.entries = String(after);
    if (body.dataset.last === "yes") {
      const timeline = document.getElementById("timeline");
      wire(holder);
      while (holder.firstChild) timeline.appendChild(holder.firstChild);
    } else {
      const note = document.getElementById("live-note");
      note.hidden = false;
      note.textContent = "The session has grown to " + after + " entries; the newest are on its last page.";
    }
  });
}

function followList() {
  const source = new EventSource("/events");
  source.addEventListener("changed", () => {
    fetch(location.href, { credentials: "same-origin" }).then((r) => r.text()).then((html) => {
      const fresh = new DOMParser().parseFromString(html, "text/html");
      for (const selector of ["#sessions", "h1", "p.agents"]) {
        const now = fresh.querySelector(selector);
        const old = document.querySelector(selector);
        if (now && old) old.replaceWith(now);
      }
    });
  });
}

document.addEventListener("DOMContentLoaded", () => {
  wire(document);
  land();
  window.addEventListener("hashchange", land);
  const kind = document.body.dataset.page;
  if (kind === "session") followSession();
  if (kind === "sessions") followList();
});
