// The approvals tab: questions the host put to the console (approval channel
// "console"), with the time each has left; the first answer wins.

import { api } from "./api.js";
import { h, replace, duration, clock } from "./dom.js";
import { toast, reportErrors, sync, every } from "./ui.js";

let listEl, emptyEl, onCount;

export function mount(section, countChanged) {
  onCount = countChanged;
  listEl = h("div", { class: "approvals" });
  emptyEl = h("p", { class: "empty" }, "No question is waiting.");
  replace(section, h("div", { class: "panel" }, h("div", { class: "panel-head" }, h("h2", null, "Pending approvals")), emptyEl, listEl));
  every((now) => {
    for (const el of listEl.children) el._tick && el._tick(now);
  });
}

export function set(data) {
  const pending = data.pending || [];
  emptyEl.hidden = pending.length > 0;
  sync(listEl, pending, (q) => q.id, makeApproval);
  onCount(pending.length);
}

function makeApproval(first) {
  const kind = h("span", { class: "kind", testid: "approval-kind" });
  const owner = h("span", { class: "muted" });
  const left = h("span", { class: "left mono", testid: "approval-time-left" });
  const command = h("pre", { class: "command", testid: "approval-command" });
  const hosts = h("ul", { class: "hosts", testid: "approval-hosts" });
  const hostsRow = h("div", { class: "field" }, h("span", { class: "label" }, "hosts"), hosts);
  const why = h("p", { class: "justification", testid: "approval-justification" });
  const whyRow = h("div", { class: "field" }, h("span", { class: "label" }, "justification"), why);
  const approve = h("button", { type: "button", class: "primary", testid: "approval-approve" }, "Approve");
  const deny = h("button", { type: "button", class: "danger", testid: "approval-deny" }, "Deny");
  const el = h(
    "article",
    { class: "approval", testid: "approval", data: { approval: first.id } },
    h("header", null, kind, owner, left),
    command,
    hostsRow,
    whyRow,
    h("div", { class: "buttons" }, deny, approve),
  );
  let cur = first;
  const answer = async (decision) => {
    approve.disabled = deny.disabled = true;
    const ok = await reportErrors(`${decision} ${cur.kind}`, () => api.answer(cur.id, decision));
    if (ok) {
      toast(`${decision === "approve" ? "approved" : "denied"}: ${cur.command || cur.kind}`, "info");
      el.classList.add("answered");
    } else {
      approve.disabled = deny.disabled = false;
    }
  };
  approve.addEventListener("click", () => answer("approve"));
  deny.addEventListener("click", () => answer("deny"));
  el._tick = (now) => {
    const ms = Date.parse(cur.expiresAt) - now;
    if (Number.isNaN(ms)) {
      left.textContent = "";
      return;
    }
    left.textContent = ms > 0 ? `${duration(ms)} left` : "expired";
    el.classList.toggle("urgent", ms < 15000);
  };
  return {
    el,
    update: (q) => {
      cur = q;
      kind.textContent = q.kind;
      owner.textContent = `${q.owner} · asked ${clock(q.askedAt)}`;
      command.textContent = q.command || "";
      command.hidden = !q.command;
      hosts.replaceChildren(...(q.hosts || []).map((x) => h("li", { class: "mono" }, x)));
      hostsRow.hidden = !(q.hosts && q.hosts.length);
      why.textContent = q.justification || "";
      whyRow.hidden = !q.justification;
      el._tick(Date.now());
    },
  };
}
