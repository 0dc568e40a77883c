// corral's dashboard: live redraws over server-sent events, errors shown where the answer
// goes, and the workflows of a hovered node highlighted. No build step; htmx does the rest.
"use strict";

function redraw() {
  htmx.ajax("GET", window.location.pathname + window.location.search, {
    target: "#live", select: "#live", swap: "outerHTML",
  });
}

function listen() {
  const live = document.getElementById("live");
  if (!live || !live.dataset.topic || !window.EventSource) return;
  const source = new EventSource("/ui/events?topic=" + encodeURIComponent(live.dataset.topic));
  const state = () => document.getElementById("live-state");
  source.addEventListener("changed", redraw);
  source.onopen = () => { if (state()) state().textContent = "live"; };
  source.onerror = () => { if (state()) state().textContent = "reconnecting"; };
}

document.addEventListener("htmx:beforeSwap", (event) => {
  const xhr = event.detail.xhr;
  if (xhr.status < 400) return;
  let message = xhr.responseText;
  try { message = JSON.parse(xhr.responseText).message || message; } catch (_) { /* text */ }
  const paragraph = document.createElement("p");
  paragraph.className = "error";
  paragraph.setAttribute("role", "alert");
  paragraph.textContent = message;
  event.detail.shouldSwap = true;
  event.detail.isError = false;
  event.detail.serverResponse = paragraph.outerHTML;
});

function highlight(event) {
  const cell = event.target.closest ? event.target.closest("[data-owners]") : null;
  document.querySelectorAll(".same-owner").forEach((c) => c.classList.remove("same-owner"));
  if (!cell || event.type === "mouseout" || event.type === "focusout") return;
  const owners = cell.dataset.owners.split(" ").filter(Boolean);
  if (!owners.length) return;
  document.querySelectorAll("[data-owners]").forEach((other) => {
    const theirs = other.dataset.owners.split(" ");
    if (owners.some((owner) => theirs.includes(owner))) other.classList.add("same-owner");
  });
}

// Outline where a waiting group would land: nodes by name, and (a large pool drawn one cell
// per domain) the domains' cells.
function outlineGhost(root) {
  const note = root.querySelector ? (root.matches("[data-ghost-nodes]") ? root : root.querySelector("[data-ghost-nodes]")) : null;
  if (!note) return;
  const mark = (selector) => document.querySelectorAll(selector).forEach((cell) => cell.classList.add("ghost"));
  note.dataset.ghostNodes.split(" ").filter(Boolean).forEach((name) => mark(`[data-node="${CSS.escape(name)}"]`));
  note.dataset.ghostDomains.split(" ").filter(Boolean).forEach((name) => mark(`[data-domain-cell="${CSS.escape(name)}"]`));
}

document.addEventListener("htmx:load", (event) => outlineGhost(event.detail.elt));

document.addEventListener("DOMContentLoaded", () => {
  listen();
  for (const kind of ["mouseover", "mouseout", "focusin", "focusout"]) {
    document.addEventListener(kind, highlight);
  }
});
